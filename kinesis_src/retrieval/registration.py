"""How a reader gets its records: polling or enhanced fan-out, and the fan-out consumer's lifecycle.

Shared by Spark and the Consumer; :func:`deregister` runs only on request, and each lease unit
read gets its own stream consumer (:func:`unit_consumer_name`; docs/efo.md)."""

from __future__ import annotations

import enum
import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..aws import KinesisClient
from ..aws.fanout import check_consumer_stream
from ..errors import ConfigurationError, KinesisSourceError
from ..names import MAX_NAME_LENGTH, validate_consumer_name

if TYPE_CHECKING:
    from ..aws.async_kinesis import AsyncKinesisClient

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


UNIT_DIGEST_CHARS = 10  # hex digits of the unit's digest: 40 bits, against at most 20 consumers per stream


def unit_consumer_name(base: str, scope: str, usual_scope: str) -> str:
    """The stream consumer a worker reads the unit of lease scope ``scope`` with: ``base`` for the
    usual unit (``usual_scope``), else ``<base>-unit-<digest of both>``: the same on every worker
    and restart, distinct per unit, within 128 characters."""
    if scope == usual_scope:
        return base
    digest = hashlib.sha256(f"{base}\0{scope}".encode()).hexdigest()[:UNIT_DIGEST_CHARS]
    suffix = f"-unit-{digest}"
    return validate_consumer_name(base[:MAX_NAME_LENGTH - len(suffix)] + suffix)


@dataclass(frozen=True)
class FanOutTarget:
    """A registered, ACTIVE stream consumer: what a fan-out reader subscribes with. Picklable."""

    consumer_arn: str
    stream_arn: str
    consumer_name: str


def register(kinesis: KinesisClient, stream: str, name: str, *, stream_arn: str | None = None) -> FanOutTarget:
    """Find or register ``name`` on the stream and wait until it is ACTIVE (idempotent: every worker may)."""
    arn = stream_arn or kinesis.describe_stream(stream).arn
    return _active(stream, name, arn, kinesis.fan_out().register_consumer(arn, name).arn)


async def aregister(kinesis: AsyncKinesisClient, stream: str, name: str) -> FanOutTarget:
    """:func:`register` on the Consumer's event loop."""
    arn = (await kinesis.describe_stream(stream)).arn
    return _active(stream, name, arn, (await kinesis.fan_out().register_consumer(arn, name)).arn)


def _active(stream: str, name: str, stream_arn: str, consumer_arn: str) -> FanOutTarget:
    check_consumer_stream(consumer_arn, stream_arn)
    log.info("stream %r: enhanced fan-out consumer %r is ACTIVE (%s)", stream, name, consumer_arn)
    return FanOutTarget(consumer_arn, stream_arn, name)


def deregister(kinesis: KinesisClient, target: FanOutTarget) -> None:
    """Deregister the consumer: its subscriptions end, the stream's consumer slot is free again."""
    _deregistered(target, kinesis.fan_out().deregister_consumer(target.consumer_arn))


def _deregistered(target: FanOutTarget, removed: bool) -> None:
    log.info(
        "enhanced fan-out consumer %r %s", target.consumer_name,
        "deregistered" if removed else "was not registered any more",
    )


class Registrations:
    """The stream consumers one worker registered (or found), by (stream, name), on its event loop. A
    unit read again reuses its target without a call; :meth:`aderegister_all` reaches the consumers of
    units this worker no longer reads too."""

    def __init__(self) -> None:
        self._targets: dict[tuple[str, str], FanOutTarget] = {}

    async def aregister(self, kinesis: AsyncKinesisClient, stream: str, name: str) -> FanOutTarget:
        """:func:`aregister`, once per (stream, name). Of two registrations of one unit that race, the
        first kept is the one returned to both."""
        if (stream, name) not in self._targets:
            target = await aregister(kinesis, stream, name)
            self._targets.setdefault((stream, name), target)
        return self._targets[(stream, name)]

    def targets(self) -> list[FanOutTarget]:
        return list(self._targets.values())

    async def aderegister_all(self, kinesis: AsyncKinesisClient) -> list[KinesisSourceError]:
        """Deregister every consumer registered here; each is tried, and the failures are returned."""
        failures: list[KinesisSourceError] = []
        for target in self.targets():
            try:
                _deregistered(target, await kinesis.fan_out().deregister_consumer(target.consumer_arn))
            except KinesisSourceError as exc:
                log.warning("could not deregister enhanced fan-out consumer %r: %s", target.consumer_name, exc)
                failures.append(exc)
                continue
            self._targets = {k: t for k, t in self._targets.items() if t != target}
        return failures
