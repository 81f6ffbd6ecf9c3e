"""Each Spark source option's value, checked alone: streams, region, names, numbers, start, end.

Errors name the option as spelt and the accepted values; combined checks: :mod:`.options`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Mapping

from lineage import KeyRange, KeyRangeError

from ..config import check_endpoint_url, region_from_env
from ..errors import ConfigurationError, InvalidPositionError
from ..positions import START_KEYWORDS, Position, PositionKind, keyword_kind, parse_timestamp
from ..stream_ref import StreamRef, parse_list

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def streams(opts: Mapping[str, str]) -> tuple[StreamRef, ...]:
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
    return StreamRef(name(text, option))


def region(opts: Mapping[str, str], streams: tuple[StreamRef, ...], env: Mapping[str, str]) -> str:
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


def key_range(opts: Mapping[str, str]) -> KeyRange | None:
    if "hashkeyrange" not in opts:
        return None
    try:
        return KeyRange.parse(opts["hashkeyrange"], "option 'hashKeyRange'")
    except KeyRangeError as exc:
        raise ConfigurationError(str(exc)) from None


def name(value: str, display: str) -> str:
    if not _NAME.match(value):
        raise ConfigurationError(
            f"option '{display}' = {value!r} must be 1-128 characters of letters, digits, '_', '-', '.'"
        )
    return value


def url(value: str | None, display: str) -> str | None:
    return check_endpoint_url(value, f"option '{display}'") if value else None


def integer(text: str, display: str, low: int, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigurationError(f"option '{display}' = {text!r} is not an integer") from None
    if not low <= value <= high:
        raise ConfigurationError(f"option '{display}' = {value} is out of range {low}..{high}")
    return value


def boolean(text: str, display: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigurationError(f"option '{display}' = {text!r} must be true or false")


def timestamp(opts: Mapping[str, str], key: str, display: str) -> datetime | None:
    if key not in opts:
        return None
    try:
        return parse_timestamp(opts[key])
    except InvalidPositionError as exc:
        raise ConfigurationError(f"option '{display}': {exc}") from None


def initial_position(opts: Mapping[str, str], batch: bool) -> Position:
    """``initialPosition`` (a keyword) and, for ``at_timestamp``, ``startingTimestamp``: each needs the other."""
    text = opts.get("initialposition", "trim_horizon" if batch else "latest")
    if text.startswith("{"):
        raise ConfigurationError(
            f"option 'initialPosition' = {text!r}: Databricks' JSON form is not accepted (its Java date "
            "patterns are not interpreted); use .option('initialPosition', 'at_timestamp')"
            ".option('startingTimestamp', '<ISO-8601>'), e.g. 2020-06-25T10:23:45-07:00"
        )
    kind = keyword_kind(text)
    if kind is None:
        raise ConfigurationError(
            f"option 'initialPosition' = {text!r}; accepted values: {', '.join(START_KEYWORDS)}"
        )
    start = timestamp(opts, "startingtimestamp", "startingTimestamp")
    if start is not None and kind is not PositionKind.AT_TIMESTAMP:
        raise ConfigurationError(
            "option 'startingTimestamp' needs option 'initialPosition' = 'at_timestamp' "
            f"(got {text!r})"
        )
    if start is None and kind is PositionKind.AT_TIMESTAMP:
        raise ConfigurationError(
            "option 'initialPosition' = 'at_timestamp' needs option 'startingTimestamp' "
            "(ISO-8601, e.g. 2026-01-31T12:00:00Z)"
        )
    return Position.parse(text, start)


def ending_latest(opts: Mapping[str, str], batch: bool) -> bool:
    text = opts.get("endingposition")
    if text is None:
        return batch and "endingtimestamp" not in opts
    if text.strip().lower() != "latest":
        raise ConfigurationError(f"option 'endingPosition' = {text!r}; accepted value: latest")
    return True
