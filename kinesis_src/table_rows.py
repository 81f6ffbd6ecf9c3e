"""Records back from rows in the source's schema: ``read_table``'s, a Spark sink's Parquet files.

The one place that knows which column feeds which :class:`~kinesis_src.records.Record` field.
"""


from __future__ import annotations

from typing import Any, Mapping

from .records import Record


def record_of_row(row: Mapping[str, Any]) -> Record:
    """One row (``partitionKey``, ``data``, ``sequenceNumber``, ...) as the Record it was made from."""
    return Record(
        partition_key=row["partitionKey"],
        data=row["data"],
        sequence_number=row["sequenceNumber"],
        sub_sequence_number=row["subSequenceNumber"],
        shard_id=row["shardId"],
        approximate_arrival_timestamp=row["approximateArrivalTimestamp"],
    )


def records_of_table(table: Any) -> list[Record]:
    """A pyarrow table in the source's schema (``read_table``'s, a Spark sink's) as Records, in row order."""
    return [record_of_row(row) for row in table.to_pylist()]
