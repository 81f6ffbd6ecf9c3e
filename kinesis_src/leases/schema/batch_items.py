"""The Spark source's per-batch items: where each shard's read ended, and stored plans.

Attributes: docs/leases.md, "The table" and "Attributes". A progress item's lag and read costs
are optional: an item written without them reads as 0."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import InvalidPositionError
from ...positions import Position
from .keys import plan_part_key
from .values import ItemReader, number_value, string_value, strings_value

if TYPE_CHECKING:
    from ...aws.dynamodb import Item

SHARD_ID = "shardId"
END_POSITION = "endPosition"
SHARD_ENDED = "shardEnded"
CHILD_SHARD_IDS = "childShardIds"
RECORDS = "records"
RECORDED_AT = "recordedAt"
STOP_REASON = "stopReason"
MILLIS_BEHIND_LATEST = "millisBehindLatest"
BYTES = "bytes"
THROTTLES = "throttles"
RETRIES = "retries"
BODY = "body"
PARTS = "parts"


@dataclass(frozen=True)
class ShardProgress:
    """Where one shard's read in one micro-batch stopped."""

    shard_id: str
    end: Position
    shard_ended: bool = False
    child_shard_ids: tuple[str, ...] = ()
    records: int = 0
    stop_reason: str = ""  # why the read stopped (kinesis_src.retrieval.cursor.StopReason value); tells the planner
    millis_behind_latest: int | None = None  # lag at the end of the read, for query progress
    byte_count: int = 0  # record data read, for query progress
    throttles: int = 0  # throttled calls the read retried
    retries: int = 0  # calls the read retried (throttles included)

    def same_outcome(self, other: ShardProgress) -> bool:
        """Equal end and end-of-shard: what deterministic replay needs (counts may differ)."""
        return (self.shard_id, self.end, self.shard_ended) == (other.shard_id, other.end, other.shard_ended)


def progress_item(progress_key: Item, progress: ShardProgress, recorded_at_ms: int) -> Item:
    item: Item = {
        **progress_key,
        SHARD_ID: string_value(progress.shard_id),
        END_POSITION: string_value(json.dumps(progress.end.to_dict(), separators=(",", ":"))),
        SHARD_ENDED: {"BOOL": progress.shard_ended},
        CHILD_SHARD_IDS: strings_value(progress.child_shard_ids),
        RECORDS: number_value(progress.records),
        RECORDED_AT: number_value(recorded_at_ms),
        STOP_REASON: string_value(progress.stop_reason),
    }
    if progress.millis_behind_latest is not None:
        item[MILLIS_BEHIND_LATEST] = number_value(progress.millis_behind_latest)
    item.update({BYTES: number_value(progress.byte_count), THROTTLES: number_value(progress.throttles),
                 RETRIES: number_value(progress.retries)})
    return item


def progress_of(reader: ItemReader, item: Item) -> ShardProgress:
    text = reader.string(item, END_POSITION)
    try:
        end = Position.from_dict(json.loads(text))
    except (ValueError, TypeError, AttributeError, InvalidPositionError) as exc:
        raise reader.corrupt(item, END_POSITION, "a position as JSON", f"is {text!r} ({exc})") from None
    return ShardProgress(
        shard_id=reader.string(item, SHARD_ID),
        end=end,
        shard_ended=reader.boolean(item, SHARD_ENDED),
        child_shard_ids=reader.strings(item, CHILD_SHARD_IDS),
        records=reader.number(item, RECORDS),
        stop_reason=reader.string(item, STOP_REASON, optional=True),
        millis_behind_latest=reader.number(item, MILLIS_BEHIND_LATEST) if MILLIS_BEHIND_LATEST in item else None,
        byte_count=_count(reader, item, BYTES),
        throttles=_count(reader, item, THROTTLES),
        retries=_count(reader, item, RETRIES),
    )


def _count(reader: ItemReader, item: Item, name: str) -> int:
    """A read-cost count; 0 in an item written without one."""
    return reader.number(item, name) if name in item else 0


def plan_part_item(partition: str, digest: str, part: int, body: bytes, parts: int) -> Item:
    return {**plan_part_key(partition, digest, part), BODY: {"B": body}, PARTS: number_value(parts)}


def plan_parts(item: Item) -> int:
    """How many parts the plan this part belongs to has."""
    return int(item[PARTS]["N"])


def plan_body(item: Item) -> bytes:
    return bytes(item[BODY]["B"])

