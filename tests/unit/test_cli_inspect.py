"""``kinesis-src lineage`` and ``leases``: whole outputs, on the shared fake Kinesis and a moto lease table.

The fake's clock is fixed, so ages, counts and lags are exact; every text
output is compared whole (plain text is the format scripts read).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from datetime import datetime, timezone

import pytest
from fake_kinesis import FakeKinesis
from moto import mock_aws

from kinesis_src.aws.dynamodb import DynamoDBClient
from kinesis_src.cli.inspect import leases_command, lineage_command, status_command
from kinesis_src.cli.output import Screen
from kinesis_src.config import AwsSettings
from kinesis_src.errors import ConfigurationError, ResourceNotFoundError
from kinesis_src.leases.model import Checkpoint, HashRange, Lease, Throughput
from kinesis_src.leases.table import LeaseTable

S0, S1, S2, S3, S4 = (f"shardId-00000000000{i}" for i in range(5))


def reshared_fake() -> FakeKinesis:
    """Two shards; 0 splits into 2 and 3; 3 merges with 1 into 4. Records of 10 B in every generation."""
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.put_records("s", [(f"k{i}", b"x" * 10) for i in range(20)])
    _low, high = fake.split_shard("s", S0, 2**126)
    fake.put_records("s", [(f"k{i}", b"y" * 10) for i in range(20)])
    fake.merge_shards("s", high, S1)
    fake.put_records("s", [(f"k{i}", b"z" * 10) for i in range(20)])
    return fake


def lineage(fake: FakeKinesis, **flags) -> str:
    args = argparse.Namespace(stream="s", count=False, json=False, dot=False, svg=None, png=None)
    vars(args).update(flags)
    out = io.StringIO()
    assert lineage_command(fake, args, out, now=lambda: datetime.fromtimestamp(fake.clock + 3600, timezone.utc)) == 0
    return out.getvalue()


def test_lineage_draws_the_tree_roots_first_with_a_merge_child_under_its_first_parent() -> None:
    assert lineage(reshared_fake()) == """\
stream s: 2 open, 3 closed shards; retention 24 h
shard                       state   range    hash keys                                                                         oldest
shardId-000000000000        closed   50.00%  0..170141183460469231731687303715884105727                                        1 h 00 min
├─ shardId-000000000002     open     25.00%  0..85070591730234615865843651857942052863                                         1 h 00 min
└─ shardId-000000000003     closed   25.00%  85070591730234615865843651857942052864..170141183460469231731687303715884105727   1 h 00 min
   └─ shardId-000000000004  open             (merge child, drawn under shardId-000000000001)
shardId-000000000001        closed   50.00%  170141183460469231731687303715884105728..340282366920938463463374607431768211455  1 h 00 min
└─ shardId-000000000004     open     75.00%  85070591730234615865843651857942052864..340282366920938463463374607431768211455   1 h 00 min
"""


def test_lineage_count_reads_every_shard_and_the_counts_add_up() -> None:
    out = lineage(reshared_fake(), count=True)
    assert out.splitlines()[1].split()[-2:] == ["records", "bytes"]
    rows = [line.split() for line in out.splitlines()[2:] if "drawn under" not in line]
    assert sum(int(r[-2]) for r in rows) == 60 and sum(int(r[-1]) for r in rows) == 600  # every record, once
    assert out == """\
stream s: 2 open, 3 closed shards; retention 24 h
shard                       state   range    hash keys                                                                         oldest      records  bytes
shardId-000000000000        closed   50.00%  0..170141183460469231731687303715884105727                                        1 h 00 min  11       110
├─ shardId-000000000002     open     25.00%  0..85070591730234615865843651857942052863                                         1 h 00 min  14       140
└─ shardId-000000000003     closed   25.00%  85070591730234615865843651857942052864..170141183460469231731687303715884105727   1 h 00 min  4        40
   └─ shardId-000000000004  open             (merge child, drawn under shardId-000000000001)
shardId-000000000001        closed   50.00%  170141183460469231731687303715884105728..340282366920938463463374607431768211455  1 h 00 min  18       180
└─ shardId-000000000004     open     75.00%  85070591730234615865843651857942052864..340282366920938463463374607431768211455   1 h 00 min  13       130
"""


def test_lineage_dot_has_every_shard_once_and_every_parent_edge() -> None:
    assert lineage(reshared_fake(), dot=True) == """\
digraph "s" {
  rankdir=TB;
  node [shape=box, fontname="monospace"];
  "shardId-000000000000" [label="shardId-000000000000\\nclosed 50.00%"];
  "shardId-000000000002" [label="shardId-000000000002\\nopen 25.00%", style=filled, fillcolor="#d8f0d8"];
  "shardId-000000000003" [label="shardId-000000000003\\nclosed 25.00%"];
  "shardId-000000000001" [label="shardId-000000000001\\nclosed 50.00%"];
  "shardId-000000000004" [label="shardId-000000000004\\nopen 75.00%", style=filled, fillcolor="#d8f0d8"];
  "shardId-000000000000" -> "shardId-000000000002";
  "shardId-000000000000" -> "shardId-000000000003";
  "shardId-000000000003" -> "shardId-000000000004";
  "shardId-000000000001" -> "shardId-000000000004";
}
"""


def test_lineage_json_keeps_hash_keys_exact_and_lists_each_shard_once() -> None:
    doc = json.loads(lineage(reshared_fake(), json=True, count=True))
    assert [s["shardId"] for s in doc["shards"]] == [S0, S2, S3, S1, S4]
    merged = doc["shards"][-1]
    assert merged["parents"] == [S3, S1] and merged["hashRange"] == {
        "start": str(2**126), "end": str(2**128 - 1)} and merged["share"] == 0.75
    assert merged["records"] == 13 and merged["bytes"] == 130
    assert all(3600 <= s["oldestRecordAgeSeconds"] < 3601 for s in doc["shards"])
    assert doc["retentionHours"] == 24


def test_lineage_picture_without_graphviz_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` here
    with pytest.raises(ConfigurationError, match=r"--svg needs Graphviz's `dot` on PATH .* --dot"):
        lineage(reshared_fake(), svg=str(tmp_path / "tree.svg"))


def test_lineage_picture_goes_through_dot(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A stand-in `dot` that records its arguments and input: the command hands Graphviz the --dot text."""
    fake_dot = tmp_path / "dot"
    fake_dot.write_text(f"#!{sys.executable}\nimport sys\nopen(sys.argv[0] + '.args', 'w').write(' '.join(sys.argv[1:]))\n"
                        "open(sys.argv[0] + '.input', 'w').write(sys.stdin.read())\n")
    fake_dot.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    fake = reshared_fake()
    lineage(fake, png=str(tmp_path / "tree.png"))
    assert (tmp_path / "dot.args").read_text().split() == ["-Tpng", "-o", str(tmp_path / "tree.png")]
    assert (tmp_path / "dot.input").read_text() == lineage(fake, dot=True)


def test_a_terminal_gets_the_same_cells_in_a_rich_table() -> None:
    out = io.StringIO()
    Screen(out, rich=True, width=120).table(["shard", "note"], [["├─ shardId-1", "[not markup]"]], title="t")
    text = out.getvalue()
    assert "├─ shardId-1" in text and "[not markup]" in text and "┃" in text  # drawn with rich's borders


# -- leases ---------------------------------------------------------------------------------------------

NOW_MS = 1_700_000_000_000
FULL = HashRange(0, 2**128 - 1)


@pytest.fixture
def dynamodb(dummy_credentials: None):
    with mock_aws():
        yield DynamoDBClient(AwsSettings(region="us-east-1"))


def lease_table(dynamodb: DynamoDBClient) -> LeaseTable:
    """Shard 0 finished but still owned; 1 checkpointed; 2 a child of 0 (ready); 3 a child of 1 (waiting)."""
    table = LeaseTable(dynamodb, "kinesis-src-app", "app", "s", now_ms=lambda: NOW_MS - 30_000)
    table.ensure_table()
    old = table.register_worker("w-old")
    table.now_ms = lambda: NOW_MS - 2_000
    table.register_worker("w-new")
    for item in (
        Lease(S0, Checkpoint.shard_end(), FULL, counter=3, owner="w-new", child_shard_ids=(S2,)),
        Lease(S1, Checkpoint.sequence("49590338271490256608559692538361571095921575989136588898"), FULL,
              counter=1, owner="w-old"),
        Lease(S2, Checkpoint.trim_horizon(), FULL, parent_shard_ids=(S0,)),
        Lease(S3, Checkpoint.trim_horizon(), FULL, parent_shard_ids=(S1,)),
    ):
        assert table.create_lease(item)
    assert old.worker_id == "w-old"
    return table


def leases(dynamodb: DynamoDBClient, kinesis=None, **flags) -> str:
    args = argparse.Namespace(application="app", stream="s", table=None, no_lag=kinesis is None,
                              failover_s=10.0, json=False)
    vars(args).update(flags)
    out = io.StringIO()
    assert leases_command(dynamodb, kinesis, args, out, now_ms=lambda: NOW_MS) == 0
    return out.getvalue()


def test_leases_shows_owner_counter_checkpoint_parents_and_stale_workers(dynamodb: DynamoDBClient) -> None:
    lease_table(dynamodb)
    assert leases(dynamodb) == """\
table kinesis-src-app, application app, stream s: 4 leases (2 owned, 1 finished), 2 workers
shard                 owner  counter  checkpoint                                                lag  parents                        note
shardId-000000000000  w-new  3        SHARD_END                                                 -    -                              held past SHARD_END
shardId-000000000001  w-old  1        49590338271490256608559692538361571095921575989136588898  -    -
shardId-000000000002  -      0        TRIM_HORIZON                                              -    done
shardId-000000000003  -      0        TRIM_HORIZON                                              -    waiting: shardId-000000000001
worker  heartbeat  age   state  leases
w-new   0          2 s   live   1
w-old   0          30 s  stale  1
"""


def test_leases_lag_asks_kinesis_at_each_checkpoint(dynamodb: DynamoDBClient) -> None:
    lease_table(dynamodb)
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    for i in range(8):  # two records per shard, then 90 s pass: one record read, the next is 90 s old
        fake.put_record("s", "k", b"old", explicit_hash_key=str(i % 4 * 2**126))
    fake.advance(90)
    doc = json.loads(leases(dynamodb, fake, json=True))
    lag = {item["shardId"]: item["lagMillis"] for item in doc["leases"]}
    assert lag[S0] is None  # finished: no lag
    assert lag[S2] >= 90_000 and lag[S3] >= 90_000  # read from TRIM_HORIZON: 90 s behind the tip
    assert [w["workerId"] for w in doc["workers"]] == ["w-new", "w-old"] and doc["workers"][1]["stale"]


def test_leases_of_an_application_that_never_ran_names_what_to_check(dynamodb: DynamoDBClient) -> None:
    lease_table(dynamodb)
    with pytest.raises(ResourceNotFoundError, match="no leases and no workers of application 'other'.*--stream"):
        leases(dynamodb, application="other", table="kinesis-src-app")


# -- status ---------------------------------------------------------------------------------------------


def status(dynamodb: DynamoDBClient, kinesis, **flags) -> tuple[str, list[float]]:
    args = argparse.Namespace(application="app", stream="s", table=None, watch=None, rounds=None, json=False)
    vars(args).update(flags)
    out, slept = io.StringIO(), []
    assert status_command(dynamodb, kinesis, args, out, now_ms=lambda: NOW_MS, sleep=slept.append) == 0
    return out.getvalue(), slept


def status_table(dynamodb: DynamoDBClient) -> None:
    """Shard 0 finished; 1 busy (measured 5 s ago); 2 measured 20 min ago (idle since); 3 never measured."""
    table = LeaseTable(dynamodb, "kinesis-src-app", "app", "s", now_ms=lambda: NOW_MS)
    table.ensure_table()
    table.register_worker("w-1")
    for item in (
        Lease(S0, Checkpoint.shard_end(), FULL, owner="w-1"),
        Lease(S1, Checkpoint.trim_horizon(), FULL, owner="w-1",
              throughput=Throughput(850.5, 170_100.0, NOW_MS - 5_000)),
        Lease(S2, Checkpoint.trim_horizon(), FULL, owner="w-1", throughput=Throughput(2.0, 400.0, NOW_MS - 1_200_000)),
        Lease(S3, Checkpoint.trim_horizon(), FULL),
    ):
        assert table.create_lease(item)


def test_status_shows_each_shards_rate_as_its_holder_measured_it_and_its_lag(dynamodb: DynamoDBClient) -> None:
    status_table(dynamodb)
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    for i in range(8):
        fake.put_record("s", "k", b"old", explicit_hash_key=str(i % 4 * 2**126))
    fake.advance(90)
    text, slept = status(dynamodb, fake)
    assert slept == []
    lines = text.splitlines()
    assert lines[0] == ("application app, stream s: 1 worker, 3 shards reading, 852.5 records/s, 170.5 KB/s, "
                        "max lag 1 min")
    assert lines[1:] == [
        "shard                 owner  records/s  KB/s   measured            lag",
        "shardId-000000000000  w-1    -          -      -                   finished",
        "shardId-000000000001  w-1    850.5      170.1  5 s ago             1 min",
        "shardId-000000000002  w-1    2.0        0.4    20 min ago (stale)  1 min",
        "shardId-000000000003  -      -          -      -                   1 min",
    ]


def test_status_watch_shows_it_again_until_the_rounds_are_done(dynamodb: DynamoDBClient) -> None:
    status_table(dynamodb)
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    text, slept = status(dynamodb, fake, watch=2.5, rounds=3, json=True)
    docs = [json.loads(part) for part in text.replace("}\n{", "}\n\x00{").split("\x00")]
    assert len(docs) == 3 and slept == [2.5, 2.5]
    assert docs[0]["shards"][1] == {"shardId": S1, "owner": "w-1", "finished": False, "recordsPerSecond": 850.5,
                                    "bytesPerSecond": 170_100.0, "measuredSecondsAgo": 5.0, "lagMillis": 0}


def test_status_of_an_application_without_leases_says_where_a_spark_querys_figures_are(
    dynamodb: DynamoDBClient,
) -> None:
    status_table(dynamodb)
    with pytest.raises(ResourceNotFoundError, match="lastProgress"):
        status(dynamodb, FakeKinesis(), application="other", table="kinesis-src-app")
    with pytest.raises(ConfigurationError, match="--watch takes a positive"):
        status(dynamodb, FakeKinesis(), watch=0)
