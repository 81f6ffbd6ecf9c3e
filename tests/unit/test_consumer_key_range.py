"""A sticky key range in the Consumer without servers (fake Kinesis, recording coordinator).

Three cases per shard: the range does not overlap it (ended unread in the
range's lease set), covers it (read whole: Kinesis routed every record there
by a hash key inside the range), or straddles it (read, and only records
whose hash key is in the range are delivered). Plus the options' bad input.
"""

from __future__ import annotations

import pytest
from consumer_harness import make_consumer, make_lease, only, run, take, until
from fake_kinesis import FakeKinesis

from kinesis_src import KeyRange
from kinesis_src.consumer import Consumer
from kinesis_src.errors import ConfigurationError
from lineage import HashRange, KeyRangeError, hash_key_of

try:  # default rootdir import: this directory is on sys.path
    from lineage_model import listing
except ImportError:  # tests/ and tests/unit/ made packages later
    from tests.unit.lineage_model import listing

LOW, HIGH = "shardId-000000000001", "shardId-000000000002"
HALF = KeyRange.slice(0, 2).end  # the lower half of the hash space ends here
KEYS = [f"k{i}" for i in range(40)]


def two_halves() -> FakeKinesis:
    """Stream "orders": shard 1 holds the lower half of the hash space, shard 2 the upper; 40 keys put."""
    fake = FakeKinesis()
    fake.create_stream("orders", listing=[listing(1, 0, HALF), listing(2, HALF + 1, 2**128 - 1)])
    for n, key in enumerate(KEYS):
        fake.put_record("orders", key, b"%d" % n)
    return fake


def in_range(key_range: KeyRange) -> list[str]:
    return [k for k in KEYS if hash_key_of(k) in key_range]


def test_a_straddled_shard_delivers_only_the_keys_in_range_and_counts_the_rest() -> None:
    key_range = KeyRange(KeyRange.slice(0, 4).end + 1, KeyRange.slice(2, 4).end)  # the middle half: both shards
    wanted = in_range(key_range)
    assert 0 < len(wanted) < len(KEYS)

    async def scenario() -> None:
        consumer, coordinator = make_consumer(two_halves(), key_range=key_range)
        for shard, (lo, hi) in ((LOW, (0, HALF)), (HIGH, (HALF + 1, 2**128 - 1))):
            take(only(consumer), make_lease(shard, hash_range=HashRange(lo, hi)))
        got: list[str] = []
        while len(got) < len(wanted):
            batch = await consumer.__anext__()
            got.extend(r.partition_key for r in batch.records)
            await batch.checkpoint()
        await until(lambda: consumer.metrics.records_filtered == len(KEYS) - len(wanted), "the filter count")
        assert sorted(got) == sorted(wanted)
        assert consumer.metrics.records == len(wanted)
        assert {shard for shard, _ in coordinator.writes} == {LOW, HIGH}  # checkpoints per shard, at in-range records

    run(scenario)


def test_a_shard_outside_the_range_is_ended_unread_and_a_covered_shard_is_read_whole() -> None:
    key_range = KeyRange.slice(0, 2)  # exactly shard 1's range: covers it, misses shard 2

    async def scenario() -> None:
        fake = two_halves()
        consumer, coordinator = make_consumer(fake, key_range=key_range)
        take(only(consumer), make_lease(HIGH, hash_range=HashRange(HALF + 1, 2**128 - 1)))
        await until(lambda: (HIGH, "SHARD_END ") in coordinator.writes, "the out-of-range shard to be ended")
        assert not [c for c in fake.calls_to("get_shard_iterator") if c.shard_id == HIGH]  # never read
        # A record put with an explicit hash key inside shard 1 is placed by it, whatever its
        # partition key's MD5: a covered shard is not filtered, so it is delivered.
        stray = next(k for k in (f"x{i}" for i in range(100)) if hash_key_of(k) not in key_range)
        fake.put_record("orders", stray, b"explicit", explicit_hash_key="5")
        take(only(consumer), make_lease(LOW, hash_range=HashRange(0, HALF)))
        got: list[str] = []
        while len(got) < len(in_range(key_range)) + 1:
            batch = await consumer.__anext__()
            got.extend(r.partition_key for r in batch.records)
        assert sorted(got) == sorted([*in_range(key_range), stray])
        assert consumer.metrics.records_filtered == 0

    run(scenario)


@pytest.mark.parametrize("bad", ["4/4", "abc", "5-3", f"0-{2**128}", "-1/2"])
def test_a_malformed_key_range_fails_at_construction_naming_the_option(dummy_credentials, bad) -> None:
    with pytest.raises(KeyRangeError, match="key_range"):
        Consumer("orders", application_name="app", key_range=bad)


def test_a_key_range_of_the_wrong_type_is_refused(dummy_credentials) -> None:
    with pytest.raises(ConfigurationError, match="key_range must be"):
        Consumer("orders", application_name="app", key_range=7)  # type: ignore[arg-type]
    with pytest.raises(KeyRangeError, match="0..3"):
        KeyRange.parse("4/4")


def test_text_and_value_key_ranges_are_the_same_range(dummy_credentials) -> None:
    consumer = Consumer(["a", "b"], application_name="app", key_range="1/3")
    assert consumer.config.key_range == KeyRange.slice(1, 3)
    assert {r.scope for r in consumer.readers.values()} == {str(KeyRange.slice(1, 3))}


def test_enhanced_fan_out_with_a_key_range_needs_the_range_s_own_consumer_name(dummy_credentials) -> None:
    with pytest.raises(ConfigurationError, match="consumer_name of the range's own"):
        Consumer("orders", application_name="app", key_range="0/2", consumer_mode="efo")
    named = Consumer("orders", application_name="app", key_range="0/2", consumer_mode="efo", consumer_name="app-0")
    assert named.config.consumer_name == "app-0"
