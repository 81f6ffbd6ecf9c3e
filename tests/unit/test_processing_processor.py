"""The processing loop (kinesis_src/consumer/processing/processor.py) against a scripted consumer: no servers.

The scripted consumer (tests/processing_script.py) hands out real :class:`Batch`
objects with real :class:`ShardState` holdings and records every checkpoint; the integration
tests (tests/integration/test_processing.py) run the same loop on the real
Consumer, kinesis-mock and DynamoDB Local. Here the outcomes are checked
exactly: which checkpoints are written, how often a record is delivered,
what reaches the dead letter, what a lost lease or a stop does.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest
from consumer_harness import run, until
from processing_script import (
    GatedHandler,
    ScriptedConsumer,
    last_checkpoint,
    process_rows,
    process_until_checkpoint,
    processing,
    processor,
)

from kinesis_src.consumer.processing import (
    DeadLetter,
    DeadLetterReason,
    DeliveredRecord,
    Reject,
    Release,
    process,
)
from kinesis_src.consumer.processing.dead_letter import CallableDeadLetter
from kinesis_src.errors import (
    ConfigurationError,
    RecordNotProcessedError,
)

# -- accept -------------------------------------------------------------------------------


def test_records_of_different_keys_run_together_each_keys_in_order_and_the_checkpoint_reaches_the_last() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        running: set[str] = set()
        peak = 0
        order: dict[str, list[int]] = defaultdict(list)

        async def handler(record: DeliveredRecord) -> None:
            nonlocal peak
            assert record.partition_key not in running, "two records of one key in flight"
            running.add(record.partition_key)
            peak = max(peak, len(running))
            order[record.partition_key].append(int(record.sequence_number))
            await asyncio.sleep(0.001 * (int(record.sequence_number) % 3))
            running.discard(record.partition_key)

        consumer.put("shard-1", [(f"k{n % 4}", n) for n in range(1, 21)])
        consumer.put("shard-2", [(f"k{n % 4}", n) for n in range(101, 111)])
        proc, metrics = processor(consumer, handler)
        async with processing(proc, consumer):
            await until(lambda: metrics.accepted == 30 and last_checkpoint(consumer, "shard-1") == "00020"
                        and last_checkpoint(consumer, "shard-2") == "00110", "every record accepted and checkpointed")
        assert peak > 1, "records never overlapped"
        for key, seqs in order.items():
            assert seqs == sorted(seqs), f"{key} out of order: {seqs}"
        assert metrics.deliveries == 30 and metrics.redelivered == 0 and metrics.buffered_records == 0

    run(scenario)


def test_a_slow_record_holds_the_checkpoint_back_while_later_records_finish() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        handler = GatedHandler(lambda record: record.sequence_number == "00002")
        gate = handler.gate
        consumer.put("shard-1", [("a", 1), ("b", 2), ("c", 3), ("d", 4)])
        proc, metrics = processor(consumer, handler, ordering="unordered")
        async with processing(proc, consumer):
            await until(lambda: metrics.accepted == 3, "the three fast records")
            await until(lambda: consumer.checkpoints, "the checkpoint before the slow record")
            assert [c[3] for c in consumer.checkpoints] == ["00001"]  # never past 00002
            gate.set()
            await until(lambda: last_checkpoint(consumer, "shard-1") == "00004", "the checkpoint after it")

    run(scenario)


# -- fail, release, reject -----------------------------------------------------------------


def test_a_failing_record_is_tried_max_delivery_attempts_times_then_dead_lettered_and_counts_as_done() -> None:
    async def scenario() -> None:
        def verdict(record: DeliveredRecord) -> None:
            if record.partition_key == "poison":
                raise TimeoutError("backend timed out")

        delivered, letters, metrics = await process_rows([("poison", 1), ("poison", 2), ("ok", 3)], verdict, "00003",
                                                         max_delivery_attempts=4)
        calls = [(seq, count) for seq, _, count in delivered]
        assert [c for c in calls if c[0] == "00001"] == [("00001", n) for n in (1, 2, 3, 4)]
        assert [(d.record.sequence_number, d.delivery_count, d.reason, d.error_type) for d in letters] == [
            ("00001", 4, DeadLetterReason.FAILED, "TimeoutError"), ("00002", 4, DeadLetterReason.FAILED, "TimeoutError")]
        assert calls.index(("00002", 1)) > calls.index(("00001", 4)), "key order: 00002 started before 00001 was done"
        envelope = letters[0].envelope()
        assert (envelope["stream"], envelope["shard_id"], envelope["sequence_number"], envelope["data"]) == (
            "s", "shard-1", "00001", "cG9pc29uOjE=")  # base64 of b"poison:1"
        assert (metrics.failed, metrics.dead_lettered, metrics.accepted, metrics.redelivered) == (8, 2, 1, 6)

    run(scenario)


def test_reject_dead_letters_at_once_and_release_redelivers_until_the_last_attempt() -> None:
    async def scenario() -> None:
        def verdict(record: DeliveredRecord) -> None:
            if record.partition_key == "bad":
                raise Reject("unparseable")
            if record.partition_key == "later" and record.delivery_count < 2:
                raise Release("not yet")
            if record.partition_key == "never":
                raise Release("never ready")

        delivered, letters, metrics = await process_rows([("bad", 1), ("later", 2), ("never", 3)], verdict, "00003",
                                                         max_delivery_attempts=3)
        calls = [(key, count) for _, key, count in delivered]
        assert sorted(calls) == sorted([("bad", 1), ("later", 1), ("later", 2), ("never", 1), ("never", 2), ("never", 3)])
        assert [(d.record.partition_key, d.delivery_count, d.reason, d.error_message) for d in letters] == [
            ("bad", 1, DeadLetterReason.REJECTED, "unparseable"), ("never", 3, DeadLetterReason.RELEASED, "never ready")]
        assert (metrics.rejected, metrics.released, metrics.accepted) == (1, 4, 1)

    run(scenario)


def test_without_a_dead_letter_a_record_out_of_attempts_stops_processing_and_is_not_checkpointed() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()

        async def handler(record: DeliveredRecord) -> None:
            if record.partition_key == "poison":
                raise ValueError("bad payload")

        consumer.put("shard-1", [("poison", 1), ("ok", 2)])
        proc, _ = processor(consumer, handler, max_delivery_attempts=2)
        with pytest.raises(RecordNotProcessedError, match="max_delivery_attempts=2") as raised:
            await proc.run()
        assert isinstance(raised.value.__cause__, ValueError)
        assert all(seq != "00001" and seq != "00002" for *_, seq in consumer.checkpoints)

    run(scenario)


# -- delivery counts across owners ------------------------------------------------------------


def test_owner_switches_since_the_checkpoint_count_as_deliveries_and_a_head_record_past_the_limit_is_dead_lettered() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        consumer.holding("shard-1", owner_switches=3)  # two earlier holders received these records
        consumer.holding("shard-2", owner_switches=5)  # four: past max_delivery_attempts=3
        counts: dict[str, int] = {}
        letters: list[DeadLetter] = []

        async def handler(record: DeliveredRecord) -> None:
            counts[record.sequence_number] = record.delivery_count

        consumer.put("shard-1", [("a", 1)])
        consumer.put("shard-2", [("b", 11), ("c", 12)])
        proc, metrics = processor(consumer, handler, letters=letters, max_delivery_attempts=3)
        async with processing(proc, consumer):
            await until(lambda: last_checkpoint(consumer, "shard-1") == "00001" and last_checkpoint(consumer, "shard-2") == "00012",
                        "both shards checkpointed")
        assert counts["00001"] == 3
        assert [(d.record.sequence_number, d.reason, d.delivery_count) for d in letters] == [
            ("00011", DeadLetterReason.OWNER_SWITCHES, 5)]  # the head; never given to the handler
        assert "00011" not in counts and counts["00012"] == 5  # not the head when it started: processed
        assert metrics.redelivered == 2

    run(scenario)


# -- leases that go, buffers, stopping ------------------------------------------------------------


def test_a_lost_lease_abandons_its_records_writes_no_checkpoint_and_the_other_shard_goes_on() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        handler = GatedHandler(lambda record: record.shard_id == "shard-1")
        gate, started = handler.gate, handler.started
        consumer.put("shard-1", [("a", 1), ("a", 2), ("a", 3)])
        proc, metrics = processor(consumer, handler)
        async with processing(proc, consumer):
            await until(lambda: started == ["00001"], "the first record of shard-1 in its handler")
            consumer.holding("shard-1").lose()
            gate.set()
            consumer.put("shard-2", [("b", 21)])
            await until(lambda: last_checkpoint(consumer, "shard-2") == "00021", "shard-2 checkpointed")
            await until(lambda: not proc.holdings.get(("s", "shard-1", 1)), "shard-1's holding forgotten")
        assert last_checkpoint(consumer, "shard-1") is None
        # 00001 finished (accepted, its checkpoint refused); 00002 and 00003 never started: the next owner has them
        assert started == ["00001", "00021"] and metrics.abandoned == 2 and metrics.buffered_records == 0

    run(scenario)


def test_the_buffer_cap_stops_taking_batches_until_records_are_done() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        handler = GatedHandler()
        gate = handler.gate
        for n in range(5):
            consumer.put("shard-1", [(f"k{n}", 2 * n + 1), (f"k{n}b", 2 * n + 2)])
        proc, metrics = processor(consumer, handler, max_in_flight=2, max_buffered_records=4)
        async with processing(proc, consumer):
            await until(lambda: metrics.in_flight == 2 and metrics.buffered_records == 4,
                        "two batches in, two records in flight")
            for _ in range(20):  # let every ready task run: a puller ignoring the cap would take batch 3 now
                await asyncio.sleep(0)
            assert consumer.pulled == 2 and metrics.buffered_records == 4
            gate.set()
            await until(lambda: last_checkpoint(consumer, "shard-1") == "00010", "all ten")
        assert consumer.pulled == 5

    run(scenario)


def test_a_stop_lets_running_records_finish_checkpoints_them_and_leaves_unstarted_ones_to_the_next_owner() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        handler = GatedHandler()
        gate, started = handler.gate, handler.started
        consumer.put("shard-1", [("a", 1), ("b", 2), ("c", 3)])
        proc, metrics = processor(consumer, handler, max_in_flight=2, checkpoint_interval_s=60.0)
        task = asyncio.create_task(proc.run())
        await until(lambda: len(started) == 2, "two records in flight")
        consumer.stop()
        await until(lambda: proc.phase.value == "draining", "the drain")
        gate.set()
        await task
        assert started == ["00001", "00002"]
        assert last_checkpoint(consumer, "shard-1") == "00002"  # the drain writes at once, whatever the interval
        assert metrics.abandoned == 1

    run(scenario)


def test_the_empty_batch_that_ends_a_shard_is_checkpointed_once_the_records_before_it_are_done() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        consumer.put("shard-1", [("a", 1)])
        consumer.put("shard-1", [])
        await process_until_checkpoint(consumer, lambda record: None, "shard-1", "end")
        assert [c[2:] for c in consumer.checkpoints if c[0] == "shard-1"][-1] == (2, "end")

    run(scenario)


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "named"), [
    ({"max_in_flight": 0}, "max_in_flight"),
    ({"ordering": "by-customer"}, "ordering"),
    ({"max_delivery_attempts": 0}, "max_delivery_attempts"),
    ({"max_buffered_records": 10, "max_in_flight": 64}, "max_buffered_records"),
    ({"dead_letter": 42}, "dead_letter"),
])
def test_a_wrong_option_fails_before_anything_is_read_naming_it(options: dict[str, Any], named: str) -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        consumer.put("shard-1", [("a", 1)])

        async def handler(record: DeliveredRecord) -> None:
            raise AssertionError("a record was processed")

        with pytest.raises(ConfigurationError, match=named):
            await process(consumer, handler, **options)
        assert consumer.pulled == 0

    run(scenario)


def test_process_before_the_consumer_started_fails_naming_the_fix_and_reads_nothing() -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()  # its handout has no open clients: start() never ran
        consumer.put("shard-1", [("a", 1)])

        async def handler(record: DeliveredRecord) -> None:
            raise AssertionError("a record was processed")

        for dead_letter in (None, "letters"):
            with pytest.raises(ConfigurationError, match="inside `async with Consumer"):
                await process(consumer, handler, dead_letter=dead_letter)
        assert consumer.pulled == 0

    run(scenario)


# -- the whole loop under random outcomes and completion orders ---------------------------------

from hypothesis import example, given, settings
from hypothesis import strategies as st

Plan = tuple[str, int, int]  # (key, yields before finishing, failures before success; -1: reject)


@settings(max_examples=40)
@example([[("c", 0, 3)], [("a", 3, 1), ("c", 0, 3), ("b", 2, 1)], [("a", 2, -1), ("a", 2, -1)], []], "shard")
@given(st.lists(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 6), st.integers(-1, 3)),
                         min_size=0, max_size=6), min_size=1, max_size=4),
       st.sampled_from(["key", "unordered", "shard"]))
def test_random_outcomes_never_checkpoint_past_an_undone_record_and_end_with_everything_done(
    batches: list[list[Plan]], ordering: str
) -> None:
    async def scenario() -> None:
        consumer = ScriptedConsumer()
        plan: dict[str, Plan] = {}
        seq = 0
        for rows in batches:
            numbered = []
            for key, yields, failures in rows:
                seq += 1
                plan[f"{seq:05d}"] = (key, yields, failures)
                numbered.append((key, seq))
            consumer.put("shard-1", numbered)
        done: set[str] = set()
        running_keys: list[str] = []
        first_start: dict[str, list[int]] = {}
        letters: list[DeadLetter] = []
        checked = 0

        def check_checkpoints() -> None:
            nonlocal checked
            for _, _, _, cp in consumer.checkpoints[checked:]:
                if cp != "end":
                    undone = [s for s in plan if s <= cp and s not in done]
                    assert not undone, f"checkpoint {cp} covers undone records {undone}"
            checked = len(consumer.checkpoints)

        async def handler(record: DeliveredRecord) -> None:
            key, yields, failures = plan[record.sequence_number]
            if record.delivery_count == 1:
                first_start.setdefault(key, []).append(int(record.sequence_number))
            if ordering == "key":
                assert key not in running_keys
            running_keys.append(key)
            try:
                for _ in range(yields):
                    await asyncio.sleep(0)
                    check_checkpoints()
            finally:
                running_keys.remove(key)
            if failures == -1:
                raise Reject("never")
            if record.delivery_count <= failures:
                raise RuntimeError(f"failure {record.delivery_count}")
            done.add(record.sequence_number)

        def on_letter(letter: DeadLetter) -> None:
            done.add(letter.record.sequence_number)
            letters.append(letter)

        proc, metrics = processor(consumer, handler, ordering=ordering, max_delivery_attempts=3)
        proc.sink = CallableDeadLetter(on_letter)
        async with processing(proc, consumer):
            last = "end" if not batches[-1] else f"{seq:05d}"  # an empty last batch is checkpointed as itself
            await until(lambda: len(done) == len(plan) and last_checkpoint(consumer, "shard-1") == last,
                        "every record done and checkpointed")
            check_checkpoints()
        expected_letters = {s for s, (_, _, f) in plan.items() if f == -1 or f >= 3}
        assert {d.record.sequence_number for d in letters} == expected_letters
        if ordering == "key":
            for key, seqs in first_start.items():
                assert seqs == sorted(seqs), f"{key} first started out of order: {seqs}"
        assert metrics.buffered_records == 0

    run(scenario)


def test_holdings_lost_again_and_again_while_every_slot_is_busy_keep_the_ready_queue_within_the_buffer() -> None:
    """Dropped records give their bytes back to the buffer; they must leave the ready queue too."""

    async def scenario() -> None:
        consumer = ScriptedConsumer()
        handler = GatedHandler(lambda record: record.shard_id == "shard-0")
        consumer.put("shard-0", [("busy", 1)])
        proc, metrics = processor(consumer, handler, max_in_flight=1, max_buffered_records=20)
        async with processing(proc, consumer):
            await until(lambda: handler.started == ["00001"], "the one slot busy")
            for generation in range(1, 41):
                consumer.put("shard-1", [(f"k{n}", 100 * generation + n) for n in range(5)], generation=generation)
                await until(lambda: ("s", "shard-1", generation) in proc.holdings
                            and ("s", "shard-1", generation - 1) not in proc.holdings, f"holding {generation} taken")
                assert len(proc.scheduler._ready) <= metrics.buffered_records <= 6, (
                    f"{len(proc.scheduler._ready)} ready entries, {metrics.buffered_records} buffered records")
                consumer.holding("shard-1", generation).lose()
            handler.gate.set()
            await until(lambda: last_checkpoint(consumer, "shard-0") == "00001", "the busy record checkpointed")
        assert handler.started == ["00001"]

    run(scenario)


def test_a_lost_holding_waiting_on_a_long_release_gives_the_buffer_back_promptly_to_the_other_shards() -> None:
    """Nothing of the lost holding will run again: its buffer share must not wait for the release timer."""

    async def scenario() -> None:
        consumer = ScriptedConsumer()

        async def handler(record: DeliveredRecord) -> None:
            if record.shard_id == "shard-1":
                raise Release("not before a minute", delay_s=60.0)

        consumer.put("shard-1", [("a", 1), ("a", 2), ("a", 3), ("a", 4)])
        proc, metrics = processor(consumer, handler, max_in_flight=2, max_buffered_records=4)
        async with processing(proc, consumer):
            await until(lambda: metrics.released == 1 and metrics.buffered_records == 4,
                        "shard-1's head parked for 60 s, the buffer full")
            consumer.holding("shard-1").lose()
            consumer.put("shard-2", [("b", 21)])
            await until(lambda: last_checkpoint(consumer, "shard-2") == "00021",
                        "shard-2's record taken, processed and checkpointed", timeout_s=3.0)
        assert (metrics.released, metrics.abandoned, metrics.accepted) == (1, 4, 1)

    run(scenario)
