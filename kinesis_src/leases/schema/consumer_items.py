"""The Consumer's own items: its last stream list, the ordering mode, and key-range claims.

The stream list only feeds a log line; the claims' ``version`` item also holds the unit map
(:mod:`kinesis_src.consumer.unit_registry`). Keys and items: docs/leases.md, "The table"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .keys import TTL_ATTRIBUTE, ordering_key, range_claim_key, stream_list_key
from .values import number_value, string_value, strings_value

if TYPE_CHECKING:
    from ...aws.dynamodb import Item

STREAMS = "streams"
ORDERING = "ordering"
WORKER_ID = "workerId"
RANGE_START = "rangeStart"
RANGE_END = "rangeEnd"
SESSION = "session"
HEARTBEAT = "heartbeat"
CLAIM_ORDER = "claimOrder"
VERSION = "version"
UNITS = "units"
SPLITS = "splits"


def stream_list_item(application: str, streams: tuple[str, ...]) -> Item:
    return {**stream_list_key(application), STREAMS: strings_value(streams)}


def streams_of(item: Item) -> tuple[str, ...]:
    return tuple(v["S"] for v in item[STREAMS]["L"])


def ordering_item(application: str, stream: str, ordering: str, worker_id: str) -> Item:
    return {**ordering_key(application, stream), ORDERING: string_value(ordering), WORKER_ID: string_value(worker_id)}


def recorded_ordering(item: Item) -> tuple[str | None, str | None]:
    """The ordering mode an item records and who recorded it (None for what it lacks)."""
    return item.get(ORDERING, {}).get("S"), item.get(WORKER_ID, {}).get("S")


def range_claim_item(application: str, stream: str, worker_id: str, start: int, end: int,
                     session: str, heartbeat: int, order: int, ttl_s: int) -> Item:
    """One worker's claim of the key range ``start``-``end`` (claim number ``order``)."""
    return {
        **range_claim_key(application, stream, worker_id),
        WORKER_ID: string_value(worker_id),
        RANGE_START: string_value(str(start)),
        RANGE_END: string_value(str(end)),
        SESSION: string_value(session),
        HEARTBEAT: number_value(heartbeat),
        CLAIM_ORDER: number_value(order),
        TTL_ATTRIBUTE: number_value(ttl_s),
    }


def range_claim_fields(item: Item) -> tuple[str, int, int, str, int, int]:
    """(worker id, range start, range end, session, heartbeat, claim order) of a claim item."""
    return (item[WORKER_ID]["S"], int(item[RANGE_START]["S"]), int(item[RANGE_END]["S"]), item[SESSION]["S"],
            int(item[HEARTBEAT]["N"]), int(item[CLAIM_ORDER]["N"]))
