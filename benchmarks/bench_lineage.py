"""Benchmark: lineage.ShardGraph update cost must not grow with history size.

Builds graphs of 1k, 10k and 50k shards from a simulated reshard history
(random splits and merges, 16..64 open shards), then applies the next
REPEATS pages of 10 new shards each, one update() per page, exactly as an
incremental ListShards(ExclusiveStartShardId=max_shard_id()) poll would, and
reports the median time per page.  Also times a full build, to_json, from_json,
validate, owner and a ready() call with every closed shard drained.

Run: .venv/bin/python benchmarks/bench_lineage.py   (about 7 s)

Measured on the 2-core dev box (Python 3.11.7); medians except build_ms (one
update() of the whole history):

    shards  page_us  page_ratio  build_ms  to_json_ms  from_json_ms  validate_us  owner_us  ready_all_us
      1000   109.21        1.00      8.19       10.57         28.55        17.50      0.29        112.97
     10000   108.95        1.00     90.93       52.07        147.36        19.23      0.27        526.69
     50000   113.68        1.04    639.94      282.57        844.11        28.30      0.30       2817.27

page_us (one update() of 10 new shards, ~11 us per shard) is flat across
history sizes: only per-shard work happens.  build/to_json/from_json scale
linearly.  validate and owner depend on the open set (16..64 shards), not
history.  ready_all_us is ready() with every closed shard drained (the steady
state of a reader): O(shards) by a C-level set difference, as documented.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from bisect import insort
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lineage import MAX_HASH_KEY, ShardGraph  # noqa: E402

SIZES = (1_000, 10_000, 50_000)
PAGE = 10
REPEATS = 200
MIN_OPEN, MAX_OPEN = 16, 64


@dataclass(order=True)
class _Shard:
    start: int
    end: int
    number: int
    parents: tuple[int, ...] = field(compare=False)
    created: int = field(compare=False)
    closed: int | None = field(default=None, compare=False)

    def listing(self, step: int) -> dict[str, Any]:
        shard: dict[str, Any] = {"ShardId": f"shardId-{self.number:012d}"}
        if self.parents:
            shard["ParentShardId"] = f"shardId-{self.parents[0]:012d}"
        if len(self.parents) == 2:
            shard["AdjacentParentShardId"] = f"shardId-{self.parents[1]:012d}"
        shard["HashKeyRange"] = {"StartingHashKey": str(self.start), "EndingHashKey": str(self.end)}
        sequence = {"StartingSequenceNumber": str(49_590_000_000_000_000_000 + self.number * 10)}
        if self.closed is not None and self.closed <= step:
            sequence["EndingSequenceNumber"] = str(49_590_000_000_000_000_000 + self.number * 10 + 9)
        shard["SequenceNumberRange"] = sequence
        return shard


def simulate(total: int, seed: int) -> list[_Shard]:
    """A reshard history with at least ``total`` shards, in creation (id) order."""
    rng = random.Random(seed)
    shards: list[_Shard] = []
    open_shards: list[_Shard] = []
    step = 0

    def new(start: int, end: int, parents: tuple[int, ...]) -> None:
        shard = _Shard(start, end, len(shards), parents, step)
        shards.append(shard)
        insort(open_shards, shard)

    quarter = (MAX_HASH_KEY + 1) // 4
    for index in range(4):
        new(index * quarter, (index + 1) * quarter - 1, ())
    while len(shards) < total:
        step += 1
        count = len(open_shards)
        if count < MIN_OPEN or (count < MAX_OPEN and rng.random() < 0.5):
            parent = open_shards.pop(rng.randrange(count))
            parent.closed = step
            at = rng.randint(parent.start + 1, parent.end)
            new(parent.start, at - 1, (parent.number,))
            new(at, parent.end, (parent.number,))
        else:
            index = rng.randrange(count - 1)
            left, right = open_shards[index], open_shards[index + 1]
            del open_shards[index : index + 2]
            left.closed = right.closed = step
            new(left.start, right.end, (left.number, right.number))
    return shards


def listing_upto(shards: list[_Shard], count: int) -> list[dict[str, Any]]:
    """The first ``count`` shards as ListShards showed them when the last was created."""
    step = shards[count - 1].created
    return [shard.listing(step) for shard in shards[:count]]


def median_us(action: Callable[[], object], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        begin = time.perf_counter_ns()
        action()
        samples.append(time.perf_counter_ns() - begin)
    return statistics.median(samples) / 1_000


def bench(size: int) -> dict[str, float]:
    shards = simulate(size + PAGE * REPEATS, seed=size)
    base = listing_upto(shards, size)
    graph = ShardGraph()
    begin = time.perf_counter()
    graph.update(base)
    build_ms = (time.perf_counter() - begin) * 1_000
    assert len(graph) == size

    pages = []
    for first in range(size, size + PAGE * REPEATS, PAGE):
        step = shards[first + PAGE - 1].created
        pages.append([shard.listing(step) for shard in shards[first : first + PAGE]])
    page_samples = []
    for page in pages:
        begin = time.perf_counter_ns()
        changed = graph.update(page)
        page_samples.append(time.perf_counter_ns() - begin)
        assert len(changed) >= PAGE
    graph.validate()

    text = graph.to_json()
    drained = {sid for sid in graph.shard_ids() if not graph.is_open(sid)}
    keys = [random.Random(size).randrange(MAX_HASH_KEY + 1) for _ in range(1_000)]
    key_iter = iter(keys * 10)
    return {
        "shards": size,
        "page_us": statistics.median(page_samples) / 1_000,
        "build_ms": build_ms,
        "to_json_ms": median_us(graph.to_json, 3) / 1_000,
        "from_json_ms": median_us(lambda: ShardGraph.from_json(text), 3) / 1_000,
        "validate_us": median_us(graph.validate, 50),
        "owner_us": median_us(lambda: graph.owner(next(key_iter)), 5_000),
        "ready_all_us": median_us(lambda: graph.ready(drained), 20),
    }


def main() -> None:
    columns = ("shards", "page_us", "page_ratio", "build_ms", "to_json_ms", "from_json_ms",
               "validate_us", "owner_us", "ready_all_us")
    print(f"page = {PAGE} new shards, median of {REPEATS} consecutive incremental updates")
    print("  ".join(f"{name:>{max(len(name), 6)}}" for name in columns))
    first_page_us = None
    for size in SIZES:
        row = bench(size)
        first_page_us = first_page_us or row["page_us"]
        row["page_ratio"] = row["page_us"] / first_page_us
        cells = []
        for name in columns:
            width = max(len(name), 6)
            value = row[name]
            cells.append(f"{value:>{width}d}" if name == "shards" else f"{value:>{width}.2f}")
        print("  ".join(cells))


if __name__ == "__main__":
    main()
