"""How a reader gets its records: polling or enhanced fan-out, and the fan-out consumer's lifecycle.

One parser for ``consumerMode`` / ``consumer_mode`` and ``consumerName`` /
``consumer_name``, shared by the Spark source and the Consumer, and the two
lifecycle steps both engines run on the driver / at start:
:func:`register` (find or register the stream consumer, wait for ACTIVE)
and :func:`deregister` (only when the user asked for it:
``requireConsumerDeregistration``, as Databricks names it, default false,
because every restart would otherwise pay a registration of seconds and
other workers sharing the consumer would lose their subscriptions).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from ..aws import KinesisClient
from ..aws.fanout import check_consumer_stream
from ..errors import ConfigurationError
from ..names import validate_consumer_name

log = logging.getLogger(__name__)


class ConsumerMode(str, enum.Enum):
    POLLING = "polling"  # GetRecords, shared 5 calls/s and 2 MB/s per shard by every application
    EFO = "efo"  # SubscribeToShard: this consumer's own 2 MB/s per shard, pushed


def parse_consumer_mode(value: str | ConsumerMode, option: str = "consumerMode") -> ConsumerMode:
    if isinstance(value, ConsumerMode):
        return value
    text = value.strip().lower() if isinstance(value, str) else value
    for mode in ConsumerMode:
        if text == mode.value:
            return mode
    raise ConfigurationError(
        f"{option} {value!r} is not a consumer mode: use 'polling' (GetRecords, the default) or 'efo' "
        "(enhanced fan-out: a registered stream consumer with its own 2 MB/s per shard)"
    )


def consumer_name(value: str | None, application: str, option: str = "consumerName") -> str:
    """The stream consumer's name: as given, or the application's name (one consumer per application)."""
    return validate_consumer_name(application if value is None else value, option)


@dataclass(frozen=True)
class FanOutTarget:
    """A registered, ACTIVE stream consumer: what a fan-out reader subscribes with. Picklable."""

    consumer_arn: str
    stream_arn: str
    consumer_name: str


def register(kinesis: KinesisClient, stream: str, name: str, *, stream_arn: str | None = None) -> FanOutTarget:
    """Find or register ``name`` on the stream and wait until it is ACTIVE (idempotent: every worker may)."""
    arn = stream_arn or kinesis.describe_stream(stream).arn
    consumer = kinesis.fan_out().register_consumer(arn, name)
    check_consumer_stream(consumer.arn, arn)
    log.info("stream %r: enhanced fan-out consumer %r is ACTIVE (%s)", stream, name, consumer.arn)
    return FanOutTarget(consumer.arn, arn, name)


def deregister(kinesis: KinesisClient, target: FanOutTarget) -> None:
    """Deregister the consumer: its subscriptions end, the stream's consumer slot is free again."""
    removed = kinesis.fan_out().deregister_consumer(target.consumer_arn)
    log.info(
        "enhanced fan-out consumer %r %s", target.consumer_name,
        "deregistered" if removed else "was not registered any more",
    )
