"""Rows in the source's schema back to Records: every column feeds its field, in row order."""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa

from kinesis_src.records import Record
from kinesis_src.table_rows import record_of_row, records_of_table

T0 = datetime(2026, 11, 23, 14, 41, 6, tzinfo=timezone.utc)
RECORDS = [
    Record(partition_key="k1", data=b"one", sequence_number="101", sub_sequence_number=0, shard_id="shardId-000000000000",
           approximate_arrival_timestamp=T0),
    Record(partition_key="k2", data=b"", sequence_number="102", sub_sequence_number=3, shard_id="shardId-000000000001",
           approximate_arrival_timestamp=T0),
]


def row_of(record: Record) -> dict[str, object]:
    return {"partitionKey": record.partition_key, "data": record.data, "sequenceNumber": record.sequence_number,
            "subSequenceNumber": record.sub_sequence_number, "shardId": record.shard_id,
            "approximateArrivalTimestamp": record.approximate_arrival_timestamp, "stream": "orders"}


def test_a_row_becomes_the_record_it_was_made_from() -> None:
    assert [record_of_row(row_of(r)) for r in RECORDS] == RECORDS


def test_a_table_becomes_its_records_in_row_order() -> None:
    table = pa.Table.from_pylist([row_of(r) for r in reversed(RECORDS)])
    assert records_of_table(table) == list(reversed(RECORDS))
