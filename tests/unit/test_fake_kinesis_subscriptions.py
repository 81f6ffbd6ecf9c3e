"""The fake's AWS mode for SubscribeToShard: one open subscription per (consumer, shard).

AWS refuses a second SubscribeToShard of a consumer to a shard while the first is read
(ResourceInUseException); LocalStack, and the fake by default, accept any number. Tests that must
show a reader never shares a pair opt in with ``FakeKinesis(concurrent_subscriptions="refused")``;
"takeover" adds AWS's takeover by a subscription made 5 s or more (on the fake's clock) after the open one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError
from fake_kinesis import FakeKinesis, shard_id

from kinesis_src.aws.fanout import FanOutEvent
from kinesis_src.errors import RetriesExhaustedError, SubscriptionBusyError
from kinesis_src.positions import Position

S0, S1 = shard_id(0), shard_id(1)
START = Position.trim_horizon()


def strict_fake(shards: int = 1) -> tuple[FakeKinesis, str, str]:
    """A strict fake with one record per shard and two consumers ("a", "b") of its stream."""
    fake = FakeKinesis(concurrent_subscriptions="refused")
    stream = fake.create_stream("s", shards)
    for n in range(shards):
        fake.put_record("s", f"k{n}", b"r", shard_id=shard_id(n))
    return fake, fake.register_consumer(stream.arn, "a").arn, fake.register_consumer(stream.arn, "b").arn


def opened(fake: FakeKinesis, consumer_arn: str, sid: str = S0) -> Iterator[FanOutEvent]:
    """A subscription whose first event was read: it is open until closed or run out."""
    events = fake.subscribe(consumer_arn, sid, START)
    assert next(events).page.partition_keys
    return events


def refusal(fake: FakeKinesis, consumer_arn: str, sid: str = S0) -> RetriesExhaustedError:
    with pytest.raises(RetriesExhaustedError) as caught:
        next(fake.subscribe(consumer_arn, sid, START))
    return caught.value


def test_a_second_subscription_of_a_consumer_to_a_shard_is_refused_while_the_first_is_open() -> None:
    fake, a, _ = strict_fake()
    first = opened(fake, a)
    error = refusal(fake, a)
    busy = error.last_error
    assert isinstance(busy, SubscriptionBusyError) and busy.retriable and not error.retriable
    assert isinstance(busy.__cause__, ClientError)
    assert busy.__cause__.response["Error"]["Code"] == "ResourceInUseException"
    assert S0 in str(error) and a in str(error)
    assert fake.count("subscribe", S0) == 2  # the refused call is a call
    assert fake.open_subscriptions == {(a, S0): 1} and fake.subscriptions_open == 1
    next(first)  # the first one is unharmed: AWS's 5 s takeover is not modelled
    first.close()
    again = opened(fake, a)  # the pair is free once the reader closed it
    again.close()
    assert fake.open_subscriptions == {} and fake.subscriptions_open == 0


def test_a_subscription_that_ran_out_frees_the_pair() -> None:
    fake, a, _ = strict_fake()
    fake.events_per_subscription = 2
    assert len(list(fake.subscribe(a, S0, START))) == 2  # the service ended it (its 5 minutes)
    assert fake.open_subscriptions == {}
    opened(fake, a).close()


def test_other_consumers_and_other_shards_never_interfere() -> None:
    fake, a, b = strict_fake(shards=2)
    held = [opened(fake, a, S0), opened(fake, b, S0), opened(fake, a, S1), opened(fake, b, S1)]
    assert fake.open_subscriptions == {(a, S0): 1, (b, S0): 1, (a, S1): 1, (b, S1): 1}
    for consumer_arn in (a, b):
        for sid in (S0, S1):
            assert isinstance(refusal(fake, consumer_arn, sid).last_error, SubscriptionBusyError)
    for events in held:
        events.close()
    assert fake.subscriptions_open == 0


def test_by_default_the_fake_accepts_any_number_as_localstack_does() -> None:
    fake, a, _ = strict_fake()
    fake.concurrent_subscriptions = "allowed"
    held = [opened(fake, a), opened(fake, a)]
    assert fake.open_subscriptions == {(a, S0): 2}
    for events in held:
        events.close()
    assert FakeKinesis().concurrent_subscriptions == "allowed"


def test_the_async_twin_refuses_too_and_frees_the_pair_on_aclose() -> None:
    fake, a, _ = strict_fake()

    async def scenario() -> tuple[BaseException | None, int]:
        async with fake.aio() as aio:
            first = aio.subscribe(a, S0, START)
            assert len((await first.__anext__()).page) == 1
            second = aio.subscribe(a, S0, START)
            try:
                await second.__anext__()
                refused = None
            except RetriesExhaustedError as exc:
                refused = exc.last_error
            await first.aclose()
            third = aio.subscribe(a, S0, START)
            records = len((await third.__anext__()).page)
            await third.aclose()
            return refused, records

    refused, records = asyncio.run(scenario())
    assert isinstance(refused, SubscriptionBusyError) and records == 1
    assert fake.open_subscriptions == {}


def test_refused_keeps_the_first_however_old_it_is() -> None:
    fake, a, _ = strict_fake()
    first = opened(fake, a)
    fake.advance(3600)
    refusal(fake, a)
    next(first)
    first.close()


def test_takeover_refuses_for_five_seconds_then_the_new_one_takes_the_pair_and_the_old_one_fails() -> None:
    fake, a, b = strict_fake()
    fake.concurrent_subscriptions = "takeover"
    first = opened(fake, a)
    other = opened(fake, b)  # another consumer's subscription is never taken over
    fake.advance(4.9)
    refusal(fake, a)
    fake.advance(0.1)
    second = opened(fake, a)
    with pytest.raises(SubscriptionBusyError) as caught:  # as its event stream would: not retried
        next(first)
    assert isinstance(caught.value.__cause__, ClientError)
    assert caught.value.__cause__.response["Error"]["Code"] == "ResourceInUseException"
    assert fake.open_subscriptions == {(a, S0): 1, (b, S0): 1}  # the failed one is over
    next(second)
    next(other)
    refusal(fake, a)  # the new one is young again
    for events in (second, other):
        events.close()
    assert fake.subscriptions_open == 0
