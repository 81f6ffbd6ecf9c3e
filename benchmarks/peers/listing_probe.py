"""What an endpoint's ListShards returns while a stream splits and merges, checked the way KCL checks it.

KCL 3's first shard sync (HierarchicalShardSyncer.getShardListAtInitialPosition)
lists the shards with the ShardFilter of its initial position
(``AT_TRIM_HORIZON`` for TRIM_HORIZON) and accepts the list only if the
shards, sorted by starting hash key, tile 0..2**128-1 with no hole and no
overlap (each next start = previous end + 1); three failures in a row give
"Hash range of shards returned ... was incomplete after 3 retries".
AWS documents ``AT_TRIM_HORIZON`` as the shards open at the trim horizon:
one generation, which tiles the key space. This probe records, for each
listing during and after a split and a merge, whether KCL would accept it,
and which shards came back. Run by run.py (workload ``listing``) on kinesis-mock.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import asdict, dataclass

MAX_HASH = 2**128 - 1


@dataclass(frozen=True)
class Listing:
    """One ListShards answer: when (relative to the reshard call), filter, shards, and KCL's verdict."""

    phase: str
    filter: str
    shards: list[str]
    kcl_accepts: bool
    why: str


def kcl_verdict(shards: list[dict]) -> tuple[bool, str]:
    """KCL's isHashRangeOfShardsComplete: sorted by start, first 0, last max, each start = end + 1."""
    if not shards:
        return False, "no shards"
    ranges = sorted((int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]),
                     s["ShardId"]) for s in shards)
    if ranges[0][0] != 0 or ranges[-1][1] != MAX_HASH:
        return False, "does not start at 0 or end at 2^128-1"
    for (_, end, a), (start, _, b) in zip(ranges, ranges[1:]):
        if start != end + 1:
            kind = "overlap" if start <= end else "hole"
            return False, f"{kind} between {a} and {b}"
    return True, "tiles the key space"


def describe(shard: dict) -> str:
    closed = "closed" if shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber") else "open"
    parents = "+".join(p for p in (shard.get("ParentShardId"), shard.get("AdjacentParentShardId")) if p)
    return f"{shard['ShardId']} ({closed}{', parents ' + parents if parents else ''})"


def list_all(client, stream: str, shard_filter: dict | None) -> list[dict]:  # noqa: ANN001
    args: dict = {"StreamName": stream}
    if shard_filter:
        args["ShardFilter"] = shard_filter
    out = client.list_shards(**args)
    shards = list(out["Shards"])
    while out.get("NextToken"):
        out = client.list_shards(NextToken=out["NextToken"])
        shards.extend(out["Shards"])
    return shards


def probe(client, phase: str, stream: str) -> list[Listing]:  # noqa: ANN001
    found = []
    for name, flt in (("AT_TRIM_HORIZON", {"Type": "AT_TRIM_HORIZON"}), ("none", None)):
        shards = list_all(client, stream, flt)
        ok, why = kcl_verdict(shards)
        found.append(Listing(phase, name, [describe(s) for s in shards], ok, why))
    return found


def watch_during(client, stream: str, action, seconds: float = 2.0) -> list[Listing]:  # noqa: ANN001
    """Probe repeatedly while ``action`` runs and until ``seconds`` after it; keeps each distinct answer."""
    seen: list[Listing] = []
    done = threading.Event()
    worker = threading.Thread(target=lambda: (action(), done.set()))
    worker.start()
    until = None
    while until is None or time.monotonic() < until:
        if done.is_set() and until is None:
            until = time.monotonic() + seconds
        for listing in probe(client, "during", stream):
            if not any(s.filter == listing.filter and s.shards == listing.shards for s in seen):
                seen.append(listing)
    worker.join()
    return seen


def run(endpoint: str) -> dict:
    import boto3

    client = boto3.client("kinesis", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id="test", aws_secret_access_key="test")
    stream = f"probe-{uuid.uuid4().hex[:6]}"
    client.create_stream(StreamName=stream, ShardCount=2)
    client.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.2})
    listings = probe(client, "before", stream)
    listings += watch_during(client, stream, lambda: client.split_shard(
        StreamName=stream, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(2**126)))
    client.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.2})
    listings += probe(client, "after split (ACTIVE)", stream)
    listings += watch_during(client, stream, lambda: client.merge_shards(
        StreamName=stream, ShardToMerge="shardId-000000000003", AdjacentShardToMerge="shardId-000000000001"))
    client.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.2})
    listings += probe(client, "after merge (ACTIVE)", stream)
    return {"endpoint": "kinesis-mock", "listings": [asdict(x) for x in listings]}


if __name__ == "__main__":
    import json
    import os
    import sys

    endpoint = sys.argv[1] if len(sys.argv) > 1 else os.environ["KINESIS_SRC_LOCALSTACK_ENDPOINT_URL"]
    result = run(endpoint)
    result["endpoint"] = sys.argv[2] if len(sys.argv) > 2 else "LocalStack"
    print(json.dumps(result, indent=1))
