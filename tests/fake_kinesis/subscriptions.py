"""SubscribeToShard's rule of one subscription per (consumer, shard), on the fake's clock.

AWS: "If you call SubscribeToShard again with the same ConsumerARN and ShardId within 5 seconds of a
successful call, you'll get a ResourceInUseException. If you call SubscribeToShard 5 seconds or more
after a successful call, the second call takes over the subscription and the previous connection
expires or fails with a ResourceInUseException." LocalStack accepts any number; so does the fake by
default. The rule applies to open subscriptions only: the fake's clock does not run while a
subscription's events are read (its "5 minutes" pass in no time), so a reader resubscribing after its
subscription ended is never refused, as on AWS, where the last one started 5 minutes before.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from typing import Literal

from botocore.exceptions import ClientError, EventStreamError

from kinesis_src.aws.fanout_errors import fanout_error, stream_error
from kinesis_src.errors import KinesisSourceError, RetriesExhaustedError

# "allowed": any number open at once (LocalStack). "refused": a second one is refused while one is open.
# "takeover": AWS in full: refused while the open one is younger than TAKEOVER_S on the fake's clock;
# later the new one takes over and the old one fails at its next event.
ConcurrentSubscriptions = Literal["allowed", "refused", "takeover"]
TAKEOVER_S = 5.0


class SubscriptionState(enum.Enum):
    OPEN = "open"
    TAKEN_OVER = "taken over"  # a newer subscription of the pair took it: the next event fails


@dataclass(eq=False)
class OpenSubscription:
    """One subscription between its first ``next()`` and its end (or the reader closing it)."""

    what: str  # the call, as FanOut names it in errors
    pair: tuple[str, str]  # (consumer ARN, shard id)
    opened_at: float
    state: SubscriptionState = SubscriptionState.OPEN


@dataclass
class SubscriptionTable:
    """The open subscriptions of every (consumer, shard); opening one applies the fake's rule."""

    by_pair: dict[tuple[str, str], list[OpenSubscription]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)  # the sync twin may subscribe from threads

    def start(self, rule: ConcurrentSubscriptions, what: str, pair: tuple[str, str], now: float,
              endpoint: str) -> OpenSubscription:
        """Open one (raising AWS's refusal, as FanOut.subscribe would, when the rule says so)."""
        with self._lock:
            held = [s for s in self.by_pair.get(pair, []) if s.state is SubscriptionState.OPEN]
            if held and rule != "allowed":
                if rule == "refused" or now - held[-1].opened_at < TAKEOVER_S:
                    raise refused(what, endpoint)
                for old in held:
                    old.state = SubscriptionState.TAKEN_OVER
            sub = OpenSubscription(what, pair, now)
            self.by_pair.setdefault(pair, []).append(sub)
            return sub

    def end(self, sub: OpenSubscription) -> None:
        with self._lock:
            subs = self.by_pair[sub.pair]
            subs.remove(sub)
            if not subs:
                del self.by_pair[sub.pair]

    def counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return {pair: len(subs) for pair, subs in self.by_pair.items()}


def in_use(what: str) -> ClientError:
    """botocore's ResourceInUseException on SubscribeToShard."""
    return ClientError({"Error": {"Code": "ResourceInUseException",
                                  "Message": f"Another active subscription exists: {what}"},
                        "ResponseMetadata": {"HTTPStatusCode": 400}}, "SubscribeToShard")


def refused(what: str, endpoint: str) -> RetriesExhaustedError:
    """What FanOut.subscribe raises when AWS keeps answering ResourceInUseException: botocore's error,
    mapped as the library maps it, after the retry budget (the fake does not wait the retries out)."""
    error = in_use(what)
    busy = fanout_error(error, what, endpoint, subscribing=True)
    assert busy is not None, "the library no longer maps ResourceInUseException on SubscribeToShard"
    busy.__cause__ = error
    return RetriesExhaustedError(f"{what} still failing after 1 attempt(s): {busy}", busy)


def taken_over(sub: OpenSubscription, endpoint: str) -> KinesisSourceError:
    """What FanOut.subscribe's events raise when AWS fails a subscription another one took over."""
    return mapped_stream_error(in_use(sub.what), sub, endpoint)


def event_stream_error(code: str, message: str = "injected") -> EventStreamError:
    """An error message on a SubscribeToShard event stream, exactly as botocore raises it: the code and
    message, no HTTP status (the stream's HTTP answer was 200). Inject it on ``subscribe_event``: the fake
    raises it mapped as FanOut.subscribe's event stream maps it."""
    return EventStreamError({"Error": {"Code": code, "Message": message}}, "SubscribeToShard")


def mapped_stream_error(error: ClientError, sub: OpenSubscription, endpoint: str) -> KinesisSourceError:
    """What FanOut.subscribe's events raise for botocore's ``error`` on this subscription's event stream."""
    mapped = stream_error(error, sub.what, endpoint)
    mapped.__cause__ = error
    return mapped
