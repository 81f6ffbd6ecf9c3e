"""The Spark source's options, parsed once into a frozen value before a query starts.

Spark hands options over as a case-insensitive map of strings. Every option
is checked here, by name, with the accepted values in the message, so a typo
fails at ``load()`` instead of deep inside a task. Unknown options are
errors too (a misspelt ``maxRecordsPerShard`` silently ignored would be a
production incident), unless they start with ``spark.``, which Spark owns.
``aws.*`` options are refused: credentials come from botocore's default
chain on every process, and an option value would be pickled in plain text
into every partition. Other connectors' names (Databricks', the awslabs
connector's ``kinesis.*``) are translated or refused in ``aliases.py``.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Mapping

from lineage import KeyRange, KeyRangeError

from ..config import (
    ENV_DYNAMODB_ENDPOINT_URL,
    ENV_ENDPOINT_URL,
    AwsSettings,
    CredentialSource,
    check_endpoint_url,
    region_from_env,
)
from ..errors import ConfigurationError, InvalidPositionError
from ..positions import Position, parse_timestamp
from ..retrieval.registration import ConsumerMode, consumer_name, parse_consumer_mode
from ..stream_ref import StreamRef, parse_list
from . import aliases

INITIAL_POSITIONS = ("latest", "trim_horizon", "earliest", "at_timestamp")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


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


_INT_OPTIONS: dict[str, tuple[str, int, int]] = {
    # option name -> (field, minimum, maximum)
    "maxrecordsperfetch": ("max_records_per_fetch", 1, 10_000),
    "maxrecordspershard": ("max_records_per_shard", 1, 10_000_000),
    "maxfetchdurationms": ("max_fetch_duration_ms", 1, 3_600_000),
    "fetchintervalms": ("fetch_interval_ms", 0, 60_000),
    "idlepollintervalms": ("idle_poll_interval_ms", 100, 600_000),
    "shardspertask": ("shards_per_task", 1, 10_000),
    "maxrecordspertrigger": ("max_records_per_trigger", 1, 1_000_000_000),
}
_BOOL_OPTIONS = {
    "failondataloss": "fail_on_data_loss",
    "preserveshardorder": "preserve_shard_order",
    "strictaggregation": "strict_aggregation",
    "requireconsumerderegistration": "require_consumer_deregistration",
}
_STRING_OPTIONS = {
    "streamname",
    "streamarn",
    "hashkeyrange",
    "region",
    "endpointurl",
    "dynamodbendpointurl",
    "initialposition",
    "startingtimestamp",
    "endingtimestamp",
    "endingposition",
    "applicationname",
    "leasetablename",
    "consumermode",
    "consumername",
    "profile",
    "rolearn",
    "rolesessionname",
    "roleexternalid",
    "stsendpoint",
}
KNOWN_OPTIONS = sorted(
    ["streamName", "streamARN", "hashKeyRange", "region", "endpointUrl", "dynamodbEndpointUrl", "initialPosition", "startingTimestamp",
     "endingTimestamp", "endingPosition", "applicationName", "leaseTableName", "maxRecordsPerFetch",
     "maxRecordsPerShard", "maxFetchDurationMs", "fetchIntervalMs", "idlePollIntervalMs", "shardsPerTask",
     "failOnDataLoss", "preserveShardOrder", "maxRecordsPerTrigger", "strictAggregation", "consumerMode",
     "consumerName", "requireConsumerDeregistration", "profile", "roleArn", "roleSessionName", "roleExternalId",
     "stsEndpoint"],
    key=str.lower,
)
_KNOWN_KEYS = frozenset(_STRING_OPTIONS | set(_INT_OPTIONS) | set(_BOOL_OPTIONS) | {"path"})


def parse_options(
    options: Mapping[str, str], *, batch: bool | None, environ: Mapping[str, str] | None = None
) -> SourceOptions:
    """Validate Spark's options; ``batch`` selects the defaults of ``spark.read``.

    ``batch=None`` checks everything that does not depend on the kind of read:
    Spark asks for the schema at ``load()``, before it says which reader it
    wants, and that is the earliest moment a typo can be reported.
    """
    env = os.environ if environ is None else environ
    given = {str(k).lower(): str(v) for k, v in options.items()}
    _reject_aws_options(given)
    aliases.reject_foreign(given, _KNOWN_KEYS, {str(k).lower(): str(k) for k in options})
    _reject_unknown(given)
    _reject_untrimmed(given)
    opts, renamed = aliases.canonical(given, _display)
    try:
        return _parse(opts, batch, env)
    except ConfigurationError as exc:
        named = [(t, n) for t, n in renamed.items() if f"'{_display(t)}'" in str(exc)]
        if not named:
            raise
        note = ", ".join(f"'{_display(t)}' was given as option '{n}'" for t, n in named)
        raise ConfigurationError(f"{exc} ({note})") from None


def _parse(opts: Mapping[str, str], batch: bool | None, env: Mapping[str, str]) -> SourceOptions:
    streams = _streams(opts)
    stream = streams[0].name
    region = _region(opts, streams, env)
    endpoint = _url(opts.get("endpointurl") or env.get(ENV_ENDPOINT_URL), "endpointUrl")
    dynamo = _url(opts.get("dynamodbendpointurl") or env.get(ENV_DYNAMODB_ENDPOINT_URL), "dynamodbEndpointUrl")
    application = _name(opts.get("applicationname") or f"kinesis-src-{stream}", "applicationName")
    values: dict[str, Any] = {
        "streams": streams,
        "key_range": _key_range(opts),
        "region": region,
        "endpoint_url": endpoint,
        "dynamodb_endpoint_url": dynamo,
        "initial_position": _initial_position(opts, bool(batch)),
        "ending_timestamp": _timestamp(opts, "endingtimestamp", "endingTimestamp"),
        "ending_latest": _ending_latest(opts, bool(batch)),
        "application_name": application,
        "lease_table_name": _name(opts.get("leasetablename") or f"kinesis-src-{application}", "leaseTableName"),
        "consumer_mode": parse_consumer_mode(opts.get("consumermode", "polling"), "option 'consumerMode' ="),
        "consumer_name": consumer_name(opts.get("consumername"), application, "option 'consumerName' ="),
        "credentials": CredentialSource(
            profile=opts.get("profile"), role_arn=opts.get("rolearn"), role_session_name=opts.get("rolesessionname"),
            role_external_id=opts.get("roleexternalid"), sts_endpoint_url=opts.get("stsendpoint"),
        ),
        "extra": {k: v for k, v in opts.items() if k.startswith("spark.")},
    }
    for key, (name, low, high) in _INT_OPTIONS.items():
        if key in opts:
            values[name] = _int(opts[key], _display(key), low, high)
    for key, name in _BOOL_OPTIONS.items():
        if key in opts:
            values[name] = _bool(opts[key], _display(key))
    parsed = SourceOptions(**values)
    if batch is not None:
        _check_combinations(parsed, opts, batch)
    return parsed


def _display(key: str) -> str:
    return next((name for name in KNOWN_OPTIONS if name.lower() == key), None) or aliases.display(key) or key


def _reject_aws_options(opts: Mapping[str, str]) -> None:
    """``aws.*`` options (keys, secrets) would travel in plain text to every executor: refuse them.

    The message names the keys only, never the values.
    """
    given = sorted(k for k in opts if k.startswith("aws."))
    if given:
        raise ConfigurationError(
            f"option(s) {', '.join(repr(k) for k in given)} not supported by format 'kinesis': AWS "
            "credentials come from botocore's default chain on the driver and on every executor "
            "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE with the shared "
            "config files, or an instance/container role); remove the option(s). Accepted options: "
            f"{', '.join(KNOWN_OPTIONS)}"
        )


def _reject_unknown(opts: Mapping[str, str]) -> None:
    unknown = sorted(k for k in opts if k not in _KNOWN_KEYS and k not in aliases.ALIASES and not k.startswith("spark."))
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) {', '.join(repr(u) for u in unknown)} for format 'kinesis'; "
            f"accepted options: {', '.join(KNOWN_OPTIONS)} (other connectors' names: {aliases.GUIDE})"
        )


def _reject_untrimmed(opts: Mapping[str, str]) -> None:
    """Refuse rather than strip: ``"orders\\n"`` read from a file is a bug the user should see."""
    for key, value in opts.items():
        if key.startswith("spark."):
            continue  # Spark's, not ours to judge
        if value != value.strip() or any(unicodedata.category(c) == "Cc" for c in value):
            raise ConfigurationError(
                f"option '{_display(key)}' = {value!r} has leading/trailing whitespace or a control "
                "character (newline, tab, NUL...); pass the value without them"
            )


def _streams(opts: Mapping[str, str]) -> tuple[StreamRef, ...]:
    """``streamName`` (names) or ``streamARN`` (ARNs), each a comma-separated list: exactly one of the two."""
    names, arns = opts.get("streamname"), opts.get("streamarn")
    if names is not None and arns is not None:
        raise ConfigurationError(
            "set either option 'streamName' or option 'streamARN', not both: streamName for streams of the "
            "caller's account, streamARN for streams named by ARN (other accounts included)"
        )
    if arns is not None:
        return parse_list(arns, "streamARN", StreamRef.parse_arn)
    if not (names or "").strip():
        raise ConfigurationError(
            "option 'streamName' is required: .option('streamName', '<name>') or a comma-separated list of "
            "names (or option 'streamARN' with stream ARNs)"
        )
    return parse_list(names, "streamName", _stream_by_name)


def _stream_by_name(text: str, option: str) -> StreamRef:
    return StreamRef(_name(text, option))


def _region(opts: Mapping[str, str], streams: tuple[StreamRef, ...], env: Mapping[str, str]) -> str:
    """``region``; else the streams' ARNs' region; else the environment's. ARNs in another region fail."""
    in_arns = sorted({ref.region for ref in streams if ref.region})
    given = opts.get("region")
    if len(in_arns) > 1 or (given and in_arns and in_arns != [given]):
        raise ConfigurationError(
            f"option 'streamARN' names streams in region(s) {', '.join(in_arns)}"
            + (f", but option 'region' is {given!r}" if given else "")
            + ": one query reads one region; read each region's streams in a query of its own"
        )
    region = given or (in_arns[0] if in_arns else None) or region_from_env(env)
    if not region:
        raise ConfigurationError("option 'region' is required (or set AWS_REGION), e.g. .option('region', 'us-east-1')")
    return region


def _key_range(opts: Mapping[str, str]) -> KeyRange | None:
    if "hashkeyrange" not in opts:
        return None
    try:
        return KeyRange.parse(opts["hashkeyrange"], "option 'hashKeyRange'")
    except KeyRangeError as exc:
        raise ConfigurationError(str(exc)) from None


def _name(value: str, display: str) -> str:
    if not _NAME.match(value):
        raise ConfigurationError(
            f"option '{display}' = {value!r} must be 1-128 characters of letters, digits, '_', '-', '.'"
        )
    return value


def _url(value: str | None, display: str) -> str | None:
    return check_endpoint_url(value, f"option '{display}'") if value else None


def _int(text: str, display: str, low: int, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigurationError(f"option '{display}' = {text!r} is not an integer") from None
    if not low <= value <= high:
        raise ConfigurationError(f"option '{display}' = {value} is out of range {low}..{high}")
    return value


def _bool(text: str, display: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigurationError(f"option '{display}' = {text!r} must be true or false")


def _timestamp(opts: Mapping[str, str], key: str, display: str) -> datetime | None:
    if key not in opts:
        return None
    try:
        return parse_timestamp(opts[key])
    except InvalidPositionError as exc:
        raise ConfigurationError(f"option '{display}': {exc}") from None


def _initial_position(opts: Mapping[str, str], batch: bool) -> Position:
    text = opts.get("initialposition", "trim_horizon" if batch else "latest")
    if text.startswith("{"):
        raise ConfigurationError(
            f"option 'initialPosition' = {text!r}: Databricks' JSON form is not accepted (its Java date "
            "patterns are not interpreted); use .option('initialPosition', 'at_timestamp')"
            ".option('startingTimestamp', '<ISO-8601>'), e.g. 2020-06-25T10:23:45-07:00"
        )
    if text.strip().lower() not in INITIAL_POSITIONS:
        raise ConfigurationError(
            f"option 'initialPosition' = {text!r}; accepted values: {', '.join(INITIAL_POSITIONS)}"
        )
    start = _timestamp(opts, "startingtimestamp", "startingTimestamp")
    if start is not None and text.strip().lower() != "at_timestamp":
        raise ConfigurationError(
            "option 'startingTimestamp' needs option 'initialPosition' = 'at_timestamp' "
            f"(got {text!r})"
        )
    if text.strip().lower() == "at_timestamp" and start is None:
        raise ConfigurationError(
            "option 'initialPosition' = 'at_timestamp' needs option 'startingTimestamp' "
            "(ISO-8601, e.g. 2026-01-31T12:00:00Z)"
        )
    return Position.at_timestamp(start) if start is not None else Position.parse(text)


def _ending_latest(opts: Mapping[str, str], batch: bool) -> bool:
    text = opts.get("endingposition")
    if text is None:
        return batch and "endingtimestamp" not in opts
    if text.strip().lower() != "latest":
        raise ConfigurationError(f"option 'endingPosition' = {text!r}; accepted value: latest")
    return True


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

