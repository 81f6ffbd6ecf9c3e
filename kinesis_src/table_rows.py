"""Records back from rows in the source's schema: a ``read_table`` result, a Spark sink's Parquet files.

The CLI's ``read`` output, the workload checker's file-sink reader and the
tests all turn such rows into :class:`~kinesis_src.records.Record` objects
to compare them with what was put; this is the one place that knows which
column feeds which field.
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
