"""The Spark source's options, parsed once into a frozen value before a query starts.

Names: :mod:`.option_keys`; single values: :mod:`.option_values`; other connectors' names:
:mod:`.aliases`. Here: :class:`SourceOptions` and the checks of options that go together.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Mapping

from lineage import KeyRange

from ..config import (
    ENV_DYNAMODB_ENDPOINT_URL,
    ENV_ENDPOINT_URL,
    AwsSettings,
    CredentialSource,
)
from ..errors import ConfigurationError
from ..positions import Position
from ..retrieval.registration import ConsumerMode, consumer_name, parse_consumer_mode
from ..stream_ref import StreamRef
from . import aliases, option_keys, option_values
from .option_keys import KNOWN_OPTIONS

__all__ = ["KNOWN_OPTIONS", "SourceOptions", "parse_options"]


@dataclass(frozen=True)
class SourceOptions:
    streams: tuple[StreamRef, ...]  # streamName or streamARN, in the order given; names are unique
    region: str
    endpoint_url: str | None
    dynamodb_endpoint_url: str | None
    initial_position: Position
    ending_timestamp: datetime | None
    ending_latest: bool
    application_name: str
    lease_table_name: str
    max_records_per_fetch: int = 10_000
    max_records_per_shard: int = 100_000
    max_fetch_duration_ms: int = 10_000
    fetch_interval_ms: int = 200
    idle_poll_interval_ms: int = 1_000
    shards_per_task: int = 1
    fail_on_data_loss: bool = True
    preserve_shard_order: bool = True
    strict_aggregation: bool = False
    max_records_per_trigger: int | None = None
    consumer_mode: ConsumerMode = ConsumerMode.POLLING
    consumer_name: str = ""  # the enhanced fan-out consumer; parse_options derives it from applicationName
    require_consumer_deregistration: bool = False
    credentials: CredentialSource = field(default_factory=CredentialSource)  # profile / role names, never keys
    key_range: KeyRange | None = None  # hashKeyRange: read only this slice of the hash key space
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def stream_name(self) -> str:
        """The first stream's name: the only one of a single-stream query (and the default applicationName's)."""
        return self.streams[0].name

    @property
    def stream_names(self) -> tuple[str, ...]:
        return tuple(ref.name for ref in self.streams)

    def aws_settings(self) -> AwsSettings:
        return AwsSettings(
            region=self.region,
            endpoint_url=self.endpoint_url,
            dynamodb_endpoint_url=self.dynamodb_endpoint_url,
            credentials=self.credentials,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain values for pickling into partitions (no credentials: only a profile's and a role's names)."""
        out = asdict(self)
        out["initial_position"] = self.initial_position.to_dict()
        return out




def parse_options(
    options: Mapping[str, str], *, batch: bool | None, environ: Mapping[str, str] | None = None
) -> SourceOptions:
    """Validate Spark's options; ``batch`` selects the defaults of ``spark.read``.

    ``batch=None`` (the schema, at ``load()``) checks all that does not depend on the kind of read.
    """
    env = os.environ if environ is None else environ
    given = {str(k).lower(): str(v) for k, v in options.items()}
    option_keys.reject_aws_options(given)
    aliases.reject_foreign(given, option_keys.KNOWN_KEYS, {str(k).lower(): str(k) for k in options})
    option_keys.reject_unknown(given)
    option_keys.reject_untrimmed(given)
    opts, renamed = aliases.canonical(given, option_keys.display)
    try:
        return _parse(opts, batch, env)
    except ConfigurationError as exc:
        named = [(t, n) for t, n in renamed.items() if f"'{option_keys.display(t)}'" in str(exc)]
        if not named:
            raise
        note = ", ".join(f"'{option_keys.display(t)}' was given as option '{n}'" for t, n in named)
        raise ConfigurationError(f"{exc} ({note})") from None


def _parse(opts: Mapping[str, str], batch: bool | None, env: Mapping[str, str]) -> SourceOptions:
    streams = option_values.streams(opts)
    stream = streams[0].name
    region = option_values.region(opts, streams, env)
    endpoint = option_values.url(opts.get("endpointurl") or env.get(ENV_ENDPOINT_URL), "endpointUrl")
    dynamo = option_values.url(opts.get("dynamodbendpointurl") or env.get(ENV_DYNAMODB_ENDPOINT_URL), "dynamodbEndpointUrl")
    application = option_values.name(opts.get("applicationname") or f"kinesis-src-{stream}", "applicationName")
    values: dict[str, Any] = {
        "streams": streams,
        "key_range": option_values.key_range(opts),
        "region": region,
        "endpoint_url": endpoint,
        "dynamodb_endpoint_url": dynamo,
        "initial_position": option_values.initial_position(opts, bool(batch)),
        "ending_timestamp": option_values.timestamp(opts, "endingtimestamp", "endingTimestamp"),
        "ending_latest": option_values.ending_latest(opts, bool(batch)),
        "application_name": application,
        "lease_table_name": option_values.name(opts.get("leasetablename") or f"kinesis-src-{application}", "leaseTableName"),
        "consumer_mode": parse_consumer_mode(opts.get("consumermode", "polling"), "option 'consumerMode' ="),
        "consumer_name": consumer_name(opts.get("consumername"), application, "option 'consumerName' ="),
        "credentials": CredentialSource(
            profile=opts.get("profile"), role_arn=opts.get("rolearn"), role_session_name=opts.get("rolesessionname"),
            role_external_id=opts.get("roleexternalid"), sts_endpoint_url=opts.get("stsendpoint"),
        ),
        "extra": {k: v for k, v in opts.items() if k.startswith("spark.")},
    }
    for key, (name, low, high) in option_keys.INT_OPTIONS.items():
        if key in opts:
            values[name] = option_values.integer(opts[key], option_keys.display(key), low, high)
    for key, name in option_keys.BOOL_OPTIONS.items():
        if key in opts:
            values[name] = option_values.boolean(opts[key], option_keys.display(key))
    parsed = SourceOptions(**values)
    if batch is not None:
        _check_combinations(parsed, opts, batch)
    return parsed


def _check_fan_out(parsed: SourceOptions, opts: Mapping[str, str], batch: bool) -> None:
    efo_only = [name for key, name in (("consumername", "consumerName"),
                ("requireconsumerderegistration", "requireConsumerDeregistration")) if key in opts]
    if efo_only and parsed.consumer_mode is not ConsumerMode.EFO:
        raise ConfigurationError(
            f"option(s) {', '.join(repr(n) for n in efo_only)} apply to enhanced fan-out only: add "
            ".option('consumerMode', 'efo'), or remove them"
        )
    if batch and parsed.require_consumer_deregistration:
        raise ConfigurationError(
            "option 'requireConsumerDeregistration' applies to streaming queries (deregistered when the query "
            "stops); a batch read has no such moment. Deregister afterwards with `aws kinesis "
            "deregister-stream-consumer`, or kinesis_src.aws.FanOut(...).deregister_consumer"
        )


def _check_combinations(parsed: SourceOptions, opts: Mapping[str, str], batch: bool) -> None:
    _check_fan_out(parsed, opts, batch)
    if not batch and ("endingtimestamp" in opts or "endingposition" in opts):
        raise ConfigurationError(
            "options 'endingTimestamp' / 'endingPosition' apply to batch reads (spark.read) only; "
            "a streaming query has no end"
        )
    if parsed.ending_timestamp is not None and "endingposition" in opts:
        raise ConfigurationError("set either option 'endingTimestamp' or 'endingPosition', not both")
    start = parsed.initial_position.timestamp
    if start is not None and parsed.ending_timestamp is not None and parsed.ending_timestamp <= start:
        raise ConfigurationError(
            f"option 'endingTimestamp' ({parsed.ending_timestamp.isoformat()}) must be after "
            f"'startingTimestamp' ({start.isoformat()})"
        )
    if batch and parsed.initial_position.kind.value == "LATEST":
        raise ConfigurationError(
            "option 'initialPosition' = 'latest' reads nothing in a batch read; use trim_horizon, "
            "earliest or at_timestamp"
        )

