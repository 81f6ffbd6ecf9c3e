"""Other Kinesis connectors' option names (Databricks', awslabs' ``kinesis.*``): aliased or refused.

An alias is converted and parsed under our name; a refusal names what to use instead. Messages
never echo values (some names carry credentials). A unit test keeps docs/migration.md in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, Collection, Mapping

from ..errors import ConfigurationError, InvalidPositionError
from ..positions import Position, PositionForm, format_timestamp, keyword_kind, parse_timestamp

DATABRICKS = "Databricks"
AWSLABS = "awslabs connector"
GUIDE = "docs/migration.md"

Convert = Callable[[str, str], "dict[str, str]"]


@dataclass(frozen=True)
class Alias:
    name: str  # as the other connector spells it, for messages
    origin: str
    convert: Convert  # (value, name) -> {our option key (lower case): value as our parser takes it}
    targets: tuple[str, ...]  # our option keys it may set


@dataclass(frozen=True)
class Refusal:
    name: str
    origin: str
    advice: str


# --- value conversions -------------------------------------------------------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([a-z]+)$", re.IGNORECASE)
_UNIT_MS = {
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1_000),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
    **dict.fromkeys(("d", "day", "days"), 86_400_000),
}


def duration_ms(text: str, name: str) -> int:
    """A duration string as Databricks writes them ("10s", "400ms", "2m") in whole milliseconds.

    A bare number is refused: seconds or milliseconds would be a guess.
    """
    match = _DURATION.match(text)
    unit = _UNIT_MS.get(match.group(2).lower()) if match else None
    millis = Decimal(match.group(1)) * unit if match and unit else None
    if millis is None or millis != millis.to_integral_value():
        raise ConfigurationError(
            f"option '{name}' = {text!r} is not a duration in whole milliseconds: use a number and a unit, "
            "e.g. 10s, 400ms, 2m (units ms, s, m, h, d)"
        )
    return int(millis)


def _same(target: str) -> Convert:
    return lambda value, name: {target: value}


def _duration(target: str) -> Convert:
    return lambda value, name: {target: str(duration_ms(value, name))}


def _seconds(target: str) -> Convert:
    def convert(value: str, name: str) -> dict[str, str]:
        if not value.isdigit():
            raise ConfigurationError(f"option '{name}' = {value!r} is not a whole number of seconds")
        return {target: str(int(value) * 1000)}

    return convert


_CONSUMER_TYPES = {"getrecords": "polling", "subscribetoshard": "efo"}


def _consumer_type(value: str, name: str) -> dict[str, str]:
    mode = _CONSUMER_TYPES.get(value.lower())
    if mode is None:
        raise ConfigurationError(
            f"option '{name}' = {value!r}; accepted values: GetRecords, SubscribeToShard "
            "(our option consumerMode: polling, efo)"
        )
    return {"consumermode": mode}


_STARTING_FORMS = frozenset({PositionForm.KEYWORD, PositionForm.AT_TIMESTAMP_PHRASE})


def _starting_position(value: str, name: str) -> dict[str, str]:
    """LATEST | TRIM_HORIZON | EARLIEST | "AT_TIMESTAMP <ISO-8601>" -> initialPosition (+ startingTimestamp)."""
    try:
        position = Position.parse(value, forms=_STARTING_FORMS)
    except InvalidPositionError as exc:
        raise ConfigurationError(
            f"option '{name}': {exc} (our options initialPosition and startingTimestamp)"
        ) from None
    if position.timestamp is None:  # the keyword as spelt: an initialPosition given too must spell it alike
        return {"initialposition": value.strip().lower()}
    return {"initialposition": "at_timestamp", "startingtimestamp": format_timestamp(position.timestamp)}


def _alias(name: str, origin: str, convert: Convert, *targets: str) -> tuple[str, Alias]:
    return name.lower(), Alias(name, origin, convert, targets)


ALIASES: dict[str, Alias] = dict(
    [
        _alias("maxFetchDuration", DATABRICKS, _duration("maxfetchdurationms"), "maxfetchdurationms"),
        _alias("minFetchPeriod", DATABRICKS, _duration("fetchintervalms"), "fetchintervalms"),
        _alias("endpoint", DATABRICKS, _same("endpointurl"), "endpointurl"),
        _alias("kinesis.streamName", AWSLABS, _same("streamname"), "streamname"),
        _alias("kinesis.region", AWSLABS, _same("region"), "region"),
        _alias("kinesis.kinesisRegion", AWSLABS, _same("region"), "region"),
        _alias("kinesis.endpointUrl", AWSLABS, _same("endpointurl"), "endpointurl"),
        _alias("kinesis.consumerType", AWSLABS, _consumer_type, "consumermode"),
        _alias("kinesis.consumerName", AWSLABS, _same("consumername"), "consumername"),
        _alias("kinesis.failOnDataLoss", AWSLABS, _same("failondataloss"), "failondataloss"),
        _alias("kinesis.maxFetchRecordsPerShard", AWSLABS, _same("maxrecordspershard"), "maxrecordspershard"),
        _alias("kinesis.maxFetchTimePerShardSec", AWSLABS, _seconds("maxfetchdurationms"), "maxfetchdurationms"),
        _alias("kinesis.startingPosition", AWSLABS, _starting_position, "initialposition", "startingtimestamp"),
        _alias("kinesis.getRecords.numberOfRecordsPerFetch", AWSLABS, _same("maxrecordsperfetch"),
               "maxrecordsperfetch"),
        _alias("kinesis.getRecords.fetchIntervalMs", AWSLABS, _same("fetchintervalms"), "fetchintervalms"),
        _alias("kinesis.stsRoleArn", AWSLABS, _same("rolearn"), "rolearn"),
        _alias("kinesis.stsSessionName", AWSLABS, _same("rolesessionname"), "rolesessionname"),
        _alias("kinesis.stsEndpointUrl", AWSLABS, _same("stsendpoint"), "stsendpoint"),
    ]
)

# --- refused names -----------------------------------------------------------------------------------------------

_CREDENTIALS = (
    "credentials come from botocore's default chain on the driver and on every executor (environment, "
    "AWS_PROFILE with the shared config files, or an instance/container role); an option value would be "
    "pickled in plain text into every partition. Remove the option"
)
_LISTING = (
    "not configurable: the driver lists the stream's shards every 30 s and again as soon as a shard it reads "
    "ends, so a reshard's children are seen at their parents' end without waiting for an interval"
)
_RETRIES = (
    "not configurable: every AWS call retries throttling, 5xx and connection errors with capped exponential "
    "backoff and jitter, then fails naming the call"
)
_METADATA = (
    "per-batch shard progress always lives in the DynamoDB lease table (option leaseTableName, default "
    "kinesis-src-<applicationName>); Spark's checkpointLocation holds the offsets. Remove the option"
)
_NO_BLOCKS = (
    "there is no prefetch here: a micro-batch's tasks read Kinesis themselves and return rows directly, so "
    "there are no blocks to coalesce; size tasks with shardsPerTask"
)
_REGISTERED = (
    "use consumerName: the stream consumer of that name is reused if it exists, registered if not "
    "(consumer ARNs are not accepted)"
)


def _refuse(name: str, origin: str, advice: str) -> tuple[str, Refusal]:
    return name.lower(), Refusal(name, origin, advice)


REFUSED: dict[str, Refusal] = dict(
    [
        _refuse("maxFetchRate", DATABRICKS,
                "is a read rate in MB/s per shard, which is not supported: a task spaces GetRecords calls on a "
                "shard by fetchIntervalMs (default 200 ms, Kinesis' 5 calls/s) and sizes them by "
                "maxRecordsPerFetch, backing off when Kinesis throttles; to read more slowly, raise "
                "fetchIntervalMs or lower maxRecordsPerFetch"),
        _refuse("fetchBufferSize", DATABRICKS,
                "sizes Databricks' prefetch buffer; there is no prefetch here (each micro-batch's tasks read "
                "Kinesis directly): bound a batch with maxRecordsPerTrigger (whole batch) or maxRecordsPerShard"),
        _refuse("shardFetchInterval", DATABRICKS, _LISTING),
        _refuse("maxShardsPerDescribe", DATABRICKS,
                "not configurable: shards are listed with ListShards at the API's largest page"),
        _refuse("coalesceThresholdBlockSize", DATABRICKS, _NO_BLOCKS),
        _refuse("coalesceBinSize", DATABRICKS, _NO_BLOCKS),
        _refuse("maxPartitions", DATABRICKS,
                "use shardsPerTask: a batch runs one task per shardsPerTask shards it reads"),
        _refuse("consumerNamePrefix", DATABRICKS,
                "not supported: consumerName is used verbatim (no 'databricks_' prefix); put the whole name "
                "in consumerName"),
        _refuse("consumerRefreshInterval", DATABRICKS,
                "not configurable: the EFO consumer is registered or described when the query starts "
                "(see docs/efo.md)"),
        _refuse("registeredConsumerId", DATABRICKS, _REGISTERED),
        _refuse("registeredConsumerIdType", DATABRICKS, _REGISTERED),
        _refuse("awsAccessKey", DATABRICKS, _CREDENTIALS),
        _refuse("awsSecretKey", DATABRICKS, _CREDENTIALS),
        _refuse("serviceCredential", DATABRICKS, _CREDENTIALS),
        _refuse("kinesis.describeShardInterval", AWSLABS, _LISTING),
        _refuse("kinesis.minBatchesToRetain", AWSLABS,
                "not needed: Spark's spark.sql.streaming.minBatchesToRetain governs the checkpoint, and the "
                "lease table keeps the recorded ends of the last committed batch until the next commit"),
        _refuse("kinesis.checkNewRecordThreads", AWSLABS,
                "not configurable: the driver probes idle shards concurrently; idlePollIntervalMs sets how often"),
        _refuse("kinesis.metadataCommitterType", AWSLABS, _METADATA),
        _refuse("kinesis.metadataPath", AWSLABS, _METADATA),
        _refuse("kinesis.dynamodb.tableName", AWSLABS,
                "use leaseTableName, naming a table of its own: the item formats differ, so never point it at "
                "the awslabs connector's table"),
        _refuse("kinesis.metadataNumRetries", AWSLABS, _RETRIES),
        _refuse("kinesis.metadataRetryIntervalsMs", AWSLABS, _RETRIES),
        _refuse("kinesis.metadataMaxRetryIntervalMs", AWSLABS, _RETRIES),
        _refuse("kinesis.clientNumRetries", AWSLABS, _RETRIES),
        _refuse("kinesis.clientRetryIntervalsMs", AWSLABS, _RETRIES),
        _refuse("kinesis.clientMaxRetryIntervalMs", AWSLABS, _RETRIES),
        _refuse("kinesis.subscribeToShard.timeoutSec", AWSLABS,
                "not configurable: EFO subscriptions are renewed and retried as docs/efo.md describes"),
        _refuse("kinesis.subscribeToShard.maxRetries", AWSLABS,
                "not configurable: EFO subscriptions are renewed and retried as docs/efo.md describes"),
        _refuse("kinesis.awsAccessKeyId", AWSLABS, _CREDENTIALS),
        _refuse("kinesis.awsSecretKey", AWSLABS, _CREDENTIALS),
        _refuse("kinesis.sessionToken", AWSLABS, _CREDENTIALS),
        _refuse("kinesis.credentialProviderClass", AWSLABS, _CREDENTIALS),
        _refuse("kinesis.credentialProviderParam", AWSLABS, _CREDENTIALS),
        _refuse("proxyAddress", AWSLABS, "set the HTTPS_PROXY environment variable on every node (botocore reads it)"),
        _refuse("proxyPort", AWSLABS, "set the HTTPS_PROXY environment variable on every node (botocore reads it)"),
        _refuse("proxyUsername", AWSLABS, "set the HTTPS_PROXY environment variable on every node (botocore reads it)"),
        _refuse("proxyPassword", AWSLABS, _CREDENTIALS + "; a proxy is set with HTTPS_PROXY on every node"),
    ]
)

PLANNED: dict[str, Refusal] = {}  # our names the parser does not know yet (none at present)


def display(key: str) -> str | None:
    """The other connector's spelling of a lower-case option key, if it is one of theirs."""
    entry = ALIASES.get(key) or REFUSED.get(key) or PLANNED.get(key)
    return entry.name if entry else None


def reject_foreign(opts: Mapping[str, str], known: Collection[str], spelled: Mapping[str, str] | None = None) -> None:
    """Fail on every other connector's name that has no exact counterpart here, naming what to use instead.

    ``opts`` has lower-case keys; ``spelled`` maps them back to the user's spelling for messages.
    """
    problems = []
    for key in sorted(opts):
        if key in known:
            continue
        entry = REFUSED.get(key) or PLANNED.get(key)
        alias = ALIASES.get(key)
        if alias is not None and not set(alias.targets) <= set(known):
            target = next(t for t in alias.targets if t not in known)
            entry = Refusal(alias.name, alias.origin, f"stands for our {PLANNED[target].name}, which is "
                            + PLANNED[target].advice)
        elif entry is None and alias is None and key.startswith("kinesis."):
            advice = ("this source has no sink" if key.startswith("kinesis.sink.")
                      else "has no counterpart here") + f"; see {GUIDE} for the names that do"
            entry = Refusal((spelled or {}).get(key, key), AWSLABS, advice)
        if entry is not None:
            problems.append(f"option '{entry.name}' ({entry.origin}) {entry.advice}")
    if problems:
        raise ConfigurationError(f"{'; '.join(problems)}. Other connectors' names: {GUIDE}")


def canonical(opts: Mapping[str, str], display_ours: Callable[[str], str]) -> tuple[dict[str, str], dict[str, str]]:
    """Our options with every alias replaced by our name and converted value, and {our key: alias name given}.

    An alias and our name (or two aliases) setting one option to different values fail naming both.
    """
    out = {key: value for key, value in opts.items() if key not in ALIASES}
    given: dict[str, str] = {}
    for key in sorted(k for k in opts if k in ALIASES):
        alias = ALIASES[key]
        for target, value in alias.convert(opts[key], alias.name).items():
            if target in out and not _agree(target, out[target], value):
                other = given.get(target, display_ours(target))
                raise ConfigurationError(
                    f"option '{alias.name}' ({alias.origin}; {display_ours(target)} = {value!r}) and option "
                    f"'{other}' = {out[target]!r} disagree: set one of them"
                )
            out[target] = value
            given[target] = alias.name
    return out, given


def _agree(target: str, a: str, b: str) -> bool:
    """Do two spellings of one option's value mean the same? Numbers, keywords and instants compare by value."""
    if a == b:
        return True
    if a.isdigit() and b.isdigit():
        return int(a) == int(b)
    if target == "startingtimestamp":
        try:
            return parse_timestamp(a) == parse_timestamp(b)
        except InvalidPositionError:
            return False
    if target == "initialposition":  # earliest and trim_horizon name one position
        kind = keyword_kind(a)
        return kind is not None and kind is keyword_kind(b)
    return target in _KEYWORD_VALUED and a.lower() == b.lower()


_KEYWORD_VALUED = frozenset({"initialposition", "consumermode", "failondataloss"})
