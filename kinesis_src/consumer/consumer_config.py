"""Everything a :class:`~kinesis_src.Consumer` is told, checked once: :class:`ConsumerConfig`.

The parts read their settings from this one frozen value; input forms are normalized here, and every
wrong option fails here with a :class:`~kinesis_src.errors.ConfigurationError` naming it."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from numbers import Integral, Real
from typing import Any, Callable

from lineage import KeyRange

from ..config import AwsSettings, CredentialSource
from ..errors import ConfigurationError, InvalidPositionError
from ..leases.timing import LeaseTiming
from ..names import (
    default_table_name,
    validate_name,
    validate_table_name,
    validate_worker_id,
)
from ..positions import Position, PositionForm, PositionKind
from ..retrieval.pacing import FetchPacing
from ..retrieval.polling import MAX_RECORDS_PER_FETCH
from ..retrieval.registration import ConsumerMode, parse_consumer_mode
from ..retrieval.registration import consumer_name as consumer_name_of
from ..retry import RetryPolicy

END_ACK_WARNING_S = 60.0  # default of end_ack_warning_s
_DEFAULT_IDLE_S = 1.0


@dataclass(frozen=True)
class ConsumerConfig:
    """A consumer's options (docs/consumer.md, "Options"), validated and normalized at construction.

    ``ConsumerConfig("orders", application_name="billing-etl", key_range="0/4")``, passed as
    ``Consumer(config)``. Afterwards each option holds its normalized form (a tuple of streams, a
    Position, a KeyRange or None), and ``worker_id``, ``lease_table_name`` and (EFO)
    ``consumer_name`` are filled in."""

    stream_name: str | Sequence[str]
    application_name: str
    region: str | None = None
    endpoint_url: str | None = None
    dynamodb_endpoint_url: str | None = None
    initial_position: str | datetime | Position = "trim_horizon"
    key_range: KeyRange | str | None = None
    worker_id: str | None = None
    lease_table_name: str | None = None
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    max_records_per_fetch: int = MAX_RECORDS_PER_FETCH
    idle_interval_s: float = _DEFAULT_IDLE_S
    pacing: FetchPacing | None = None
    prefetch_batches: int = 1
    release_timeout_s: float = 10.0
    preserve_shard_order: bool = True
    metrics_interval_s: float = 60.0
    end_ack_warning_s: float = END_ACK_WARNING_S
    fail_on_data_loss: bool = False
    strict_aggregation: bool = False
    consumer_mode: str | ConsumerMode = "polling"
    consumer_name: str | None = None
    require_consumer_deregistration: bool = False
    handle_signals: bool = True
    check_retention: bool = True
    retry: RetryPolicy | None = None
    credentials: CredentialSource | None = None
    settings: AwsSettings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_types(self)
        put = object.__setattr__
        put(self, "lease_timing", self.lease_timing or LeaseTiming())
        put(self, "stream_name", parse_streams(self.stream_name))
        put(self, "application_name", validate_name(self.application_name, "application_name"))
        put(self, "initial_position", parse_initial_position(self.initial_position))
        put(self, "key_range", parse_key_range(self.key_range))
        self._check_numbers()
        put(self, "pacing", self._pacing())
        put(self, "worker_id", validate_worker_id(self.worker_id or default_worker_id()))
        table = self.lease_table_name or default_table_name(self.application_name)
        put(self, "lease_table_name", validate_table_name(table, "lease_table_name"))
        self._check_fan_out()
        extra: dict[str, Any] = {"retry": self.retry} if self.retry is not None else {}
        if self.credentials is not None:
            extra["credentials"] = self.credentials
        put(self, "settings", AwsSettings.from_env(self.region, self.endpoint_url, self.dynamodb_endpoint_url, **extra))

    @classmethod
    def of(cls, stream_name: str | Sequence[str] | ConsumerConfig, options: dict[str, Any]) -> ConsumerConfig:
        """The config a ``Consumer(...)`` call names: a ConsumerConfig, or a stream and options.

        An unknown option fails naming it and the known ones (a typo must not be dropped)."""
        if isinstance(stream_name, ConsumerConfig):
            if options:
                raise ConfigurationError(
                    f"Consumer(config, ...) takes no other options, got {', '.join(sorted(options))}: "
                    "put them in the ConsumerConfig (dataclasses.replace(config, ...))"
                )
            return stream_name
        known = {f.name for f in fields(cls) if f.init}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ConfigurationError(
                f"unknown consumer option(s) {', '.join(map(repr, unknown))}; the options are: "
                f"{', '.join(sorted(known - {'stream_name'}))}"
            )
        return cls(stream_name, **options)

    @property
    def streams(self) -> tuple[str, ...]:
        """The stream names (``stream_name`` after normalization)."""
        return self.stream_name  # type: ignore[return-value]  # a tuple after __post_init__

    def release_wait_s(self) -> float:
        """How long a hand-off waits for the batch in hand: never longer than one renewal interval,
        since the coordinator's cycle waits too, and a view of the table older than 1.5 renewals
        stops every delivery (``LeaseCoordinator.view_is_fresh``)."""
        return min(self.release_timeout_s, self.lease_timing.renew_s)

    # -- checks ------------------------------------------------------------------------------------

    def _check_numbers(self) -> None:
        if not 1 <= self.max_records_per_fetch <= MAX_RECORDS_PER_FETCH:
            raise ConfigurationError(
                f"max_records_per_fetch must be 1..{MAX_RECORDS_PER_FETCH}, got {self.max_records_per_fetch}"
            )
        if self.prefetch_batches < 1:
            raise ConfigurationError(f"prefetch_batches must be >= 1, got {self.prefetch_batches}")
        if self.release_timeout_s < 0 or self.metrics_interval_s <= 0 or self.end_ack_warning_s <= 0:
            raise ConfigurationError("release_timeout_s must be >= 0, metrics_interval_s and end_ack_warning_s > 0")

    def _pacing(self) -> FetchPacing:
        if self.pacing is None:
            return FetchPacing(idle_interval_s=self.idle_interval_s)
        if self.idle_interval_s not in (_DEFAULT_IDLE_S, self.pacing.idle_interval_s):
            raise ConfigurationError(
                "pass idle_interval_s or pacing, not both: pacing=FetchPacing(idle_interval_s=...) holds it"
            )
        return self.pacing

    def _check_fan_out(self) -> None:
        put = object.__setattr__
        named = self.consumer_name is not None
        put(self, "consumer_mode", parse_consumer_mode(self.consumer_mode, "consumer_mode"))
        if self.consumer_mode is not ConsumerMode.EFO and (named or self.require_consumer_deregistration):
            raise ConfigurationError(
                "consumer_name and require_consumer_deregistration apply to enhanced fan-out only: "
                "add consumer_mode='efo', or remove them"
            )
        if self.consumer_mode is ConsumerMode.EFO and self.key_range is not None and not named:
            raise ConfigurationError(
                "consumer_mode='efo' with a key_range needs a consumer_name of the range's own (e.g. "
                f"f'{self.application_name}-slice-{{i}}'): readers of different ranges under one stream "
                "consumer would refuse each other's subscriptions to the shards they share"
            )
        if self.consumer_mode is ConsumerMode.EFO:
            put(self, "consumer_name", consumer_name_of(self.consumer_name, self.application_name, "consumer_name"))


def _is_int(value: object) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


_PLAIN_TYPES: tuple[tuple[tuple[str, ...], Callable[[object], bool], str], ...] = (
    (("max_records_per_fetch", "prefetch_batches"), _is_int, "an int"),
    (("idle_interval_s", "release_timeout_s", "metrics_interval_s", "end_ack_warning_s"), _is_number, "a number"),
    (("preserve_shard_order", "fail_on_data_loss", "strict_aggregation", "require_consumer_deregistration",
      "handle_signals", "check_retention"), lambda v: isinstance(v, bool), "True or False"),
    (("region", "endpoint_url", "dynamodb_endpoint_url", "worker_id", "lease_table_name", "consumer_name"),
     lambda v: v is None or isinstance(v, str), "a string (or None)"),
)
_OBJECTS: dict[str, type] = {"lease_timing": LeaseTiming, "pacing": FetchPacing, "retry": RetryPolicy,
                             "credentials": CredentialSource}


def _check_types(config: ConsumerConfig) -> None:
    """Every option of a plain type has that type (a bool is not a number, ``"no"`` is not False)."""
    for names, ok, want in _PLAIN_TYPES:
        for name in names:
            _check_type(config, name, ok(getattr(config, name)), want)
    for name, kind in _OBJECTS.items():
        value = getattr(config, name)
        _check_type(config, name, value is None or isinstance(value, kind), f"a {kind.__name__} (or None)")


def _check_type(config: ConsumerConfig, name: str, ok: bool, want: str) -> None:
    if not ok:
        value = getattr(config, name)
        raise ConfigurationError(f"{name} must be {want}, got {value!r} ({type(value).__name__})")


# -- the parsers of the options' input forms --------------------------------------------------------


def parse_streams(value: str | Sequence[str]) -> tuple[str, ...]:
    """One stream name, or a non-empty list of distinct ones (each read with its own leases)."""
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, Sequence) or isinstance(names, (bytes, bytearray)):
        raise ConfigurationError(
            f"stream_name must be a stream name or a list of them, got {type(value).__name__}"
        )
    streams = tuple(validate_name(name, "stream_name") for name in names)
    if not streams:
        raise ConfigurationError("stream_name is an empty list: name at least one stream")
    repeated = sorted({name for name in streams if streams.count(name) > 1})
    if repeated:
        raise ConfigurationError(
            f"stream_name lists {', '.join(map(repr, repeated))} more than once: name each stream once"
        )
    return streams


def parse_key_range(value: KeyRange | str | None) -> KeyRange | None:
    """``key_range``: a :class:`KeyRange`, its text (``"START-END"`` or ``"i/n"``), or None (every key)."""
    if value is None or isinstance(value, KeyRange):
        return value
    if isinstance(value, str):
        return KeyRange.parse(value, "key_range")  # KeyRangeError names the option and the forms
    raise ConfigurationError(
        f"key_range must be a kinesis_src.KeyRange (e.g. KeyRange.slice(0, 4)), 'START-END' or 'i/n', "
        f"got {type(value).__name__}"
    )


_INITIAL_FORMS = frozenset(
    {PositionForm.KEYWORD, PositionForm.TIMESTAMP, PositionForm.DATETIME, PositionForm.POSITION}
)


def parse_initial_position(value: str | datetime | Position) -> Position:
    """``"trim_horizon"``/``"earliest"``, ``"latest"``, a datetime / ISO-8601 text (AT_TIMESTAMP), or a Position."""
    if not isinstance(value, (str, datetime, Position)):
        raise ConfigurationError(f"initial_position must be a string, datetime or Position, got {type(value).__name__}")
    try:
        position = Position.parse(value, forms=_INITIAL_FORMS)
    except InvalidPositionError as exc:
        if not isinstance(value, str):
            raise
        raise ConfigurationError(
            f"initial_position {value!r} is not valid: use 'trim_horizon', 'latest', or an ISO-8601 "
            "timestamp / datetime (AT_TIMESTAMP)"
        ) from exc
    if position.kind in (PositionKind.AT_SEQUENCE_NUMBER, PositionKind.AFTER_SEQUENCE_NUMBER):
        raise ConfigurationError("initial_position is where a new application starts: trim_horizon, latest or a timestamp")
    return position


def default_worker_id() -> str:
    """Unique per process, readable in the lease table: host, pid, and a random suffix."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
