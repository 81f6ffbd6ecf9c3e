"""Which option names the Spark source accepts, and the refusals that need only the names.

Unknown names fail (``spark.*`` is Spark's); an ``aws.*`` value would be pickled in plain text
into every partition; values with surrounding whitespace or control characters are refused.
"""

from __future__ import annotations

import unicodedata
from typing import Mapping

from ..errors import ConfigurationError
from . import aliases

INT_OPTIONS: dict[str, tuple[str, int, int]] = {
    # option name -> (field, minimum, maximum)
    "maxrecordsperfetch": ("max_records_per_fetch", 1, 10_000),
    "maxrecordspershard": ("max_records_per_shard", 1, 10_000_000),
    "maxfetchdurationms": ("max_fetch_duration_ms", 1, 3_600_000),
    "fetchintervalms": ("fetch_interval_ms", 0, 60_000),
    "idlepollintervalms": ("idle_poll_interval_ms", 100, 600_000),
    "shardspertask": ("shards_per_task", 1, 10_000),
    "maxrecordspertrigger": ("max_records_per_trigger", 1, 1_000_000_000),
}
BOOL_OPTIONS = {
    "failondataloss": "fail_on_data_loss",
    "preserveshardorder": "preserve_shard_order",
    "strictaggregation": "strict_aggregation",
    "requireconsumerderegistration": "require_consumer_deregistration",
}
STRING_OPTIONS = {
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
KNOWN_KEYS = frozenset(STRING_OPTIONS | set(INT_OPTIONS) | set(BOOL_OPTIONS) | {"path"})


def display(key: str) -> str:
    return next((name for name in KNOWN_OPTIONS if name.lower() == key), None) or aliases.display(key) or key


def reject_aws_options(opts: Mapping[str, str]) -> None:
    """Refuse ``aws.*`` options: keys and secrets would travel in plain text to every executor."""
    given = sorted(k for k in opts if k.startswith("aws."))
    if given:
        raise ConfigurationError(
            f"option(s) {', '.join(repr(k) for k in given)} not supported by format 'kinesis': AWS "
            "credentials come from botocore's default chain on the driver and on every executor "
            "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE with the shared "
            "config files, or an instance/container role); remove the option(s). Accepted options: "
            f"{', '.join(KNOWN_OPTIONS)}"
        )


def reject_unknown(opts: Mapping[str, str]) -> None:
    unknown = sorted(k for k in opts if k not in KNOWN_KEYS and k not in aliases.ALIASES and not k.startswith("spark."))
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) {', '.join(repr(u) for u in unknown)} for format 'kinesis'; "
            f"accepted options: {', '.join(KNOWN_OPTIONS)} (other connectors' names: {aliases.GUIDE})"
        )


def reject_untrimmed(opts: Mapping[str, str]) -> None:
    """Refuse rather than strip: ``"orders\\n"`` read from a file is a bug the user should see."""
    for key, value in opts.items():
        if key.startswith("spark."):
            continue  # Spark's, not ours to judge
        if value != value.strip() or any(unicodedata.category(c) == "Cc" for c in value):
            raise ConfigurationError(
                f"option '{display(key)}' = {value!r} has leading/trailing whitespace or a control "
                "character (newline, tab, NUL...); pass the value without them"
            )
