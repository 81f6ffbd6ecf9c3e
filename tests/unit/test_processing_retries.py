"""Per-record retry backoff (kinesis_src/consumer/processing/retries.py): bounded at any retry count.

``max_delivery_attempts`` may be huge ("retry forever"), so the delay of the
n-th retry must come out between half the cap and the cap for every n, never
an OverflowError; the processing loop must survive such a record too.
"""

from __future__ import annotations

import math
import random

import pytest
from consumer_harness import run, until
from hypothesis import example, given
from hypothesis import strategies as st
from processing_script import ScriptedConsumer, last_checkpoint, processing, processor

from kinesis_src.consumer.processing import Backoff, DeliveredRecord
from kinesis_src.errors import ConfigurationError


@pytest.mark.parametrize("retry", [1024, 1025, 1026, 10**6, 10**18, 10**400])
def test_a_retry_count_past_the_float_range_waits_the_capped_delay(retry: int) -> None:
    delay = Backoff().delay_s(retry, random.Random(7))
    assert 15.0 <= delay <= 30.0


def test_the_delay_grows_by_the_multiplier_until_the_cap() -> None:
    backoff = Backoff(initial_s=0.1, max_s=30.0, multiplier=2.0)
    ceilings = [backoff.delay_s(n, _Top()) for n in range(1, 12)]
    assert ceilings[:9] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6])
    assert ceilings[9:] == [30.0, 30.0]


class _Top(random.Random):
    """A random source at its top: the delay is the ceiling itself."""

    def random(self) -> float:
        return 1.0


positive = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(positive, positive, st.floats(min_value=1.0, max_value=1e300, allow_nan=False, allow_infinity=False),
       st.integers(min_value=1, max_value=10**30))
@example(0.1, 30.0, 2.0, 1025)
@example(5e-324, 1e6, 1.0000000000000002, 10**30)
@example(1e-300, 1e6, 1e300, 3)
@example(0.0, 0.0, 2.0, 1025)
def test_every_retry_waits_between_half_the_ceiling_and_the_cap(initial_s: float, max_s: float, multiplier: float,
                                                                 retry: int) -> None:
    initial_s, max_s = sorted((initial_s, max_s))
    backoff = Backoff(initial_s=initial_s, max_s=max_s, multiplier=multiplier)
    low, high = backoff.delay_s(retry, _Bottom()), backoff.delay_s(retry, _Top())
    assert math.isfinite(high) and 0.0 <= low <= high <= max_s
    assert low == pytest.approx(high / 2)
    assert backoff.delay_s(retry + 1, _Top()) >= high, "the ceiling fell as retries went on"


class _Bottom(random.Random):
    def random(self) -> float:
        return 0.0


@pytest.mark.parametrize("options", [{"max_s": math.inf}, {"initial_s": math.nan}, {"multiplier": math.inf}])
def test_a_backoff_that_is_not_finite_is_refused_naming_the_field(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match="finite"):
        Backoff(**options)


def test_a_record_that_fails_more_than_a_thousand_times_is_retried_until_accepted() -> None:
    """Past the 1,024th retry ``multiplier ** n`` leaves the float range; processing must go on."""

    async def scenario() -> None:
        consumer = ScriptedConsumer()

        async def handler(record: DeliveredRecord) -> None:
            if record.delivery_count < 1100:
                raise RuntimeError(f"attempt {record.delivery_count}")

        consumer.put("shard-1", [("a", 1)])
        proc, metrics = processor(consumer, handler, max_delivery_attempts=10**9,
                                  retry_backoff=Backoff(initial_s=0.0, max_s=0.0, multiplier=2.0))
        async with processing(proc, consumer):
            await until(lambda: last_checkpoint(consumer, "shard-1") == "00001" or proc._failure is not None,
                        "the record accepted at delivery 1100", timeout_s=8.0)
            assert proc._failure is None, f"processing stopped: {proc._failure!r}"
        assert (metrics.failed, metrics.accepted) == (1099, 1)

    run(scenario)
