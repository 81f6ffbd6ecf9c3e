"""Reading back what a Spark file sink committed, batch by batch, as Records."""

from __future__ import annotations

import json
import os

from ..records import Record
from ..table_rows import records_of_table


def read_file_sink(path: str) -> list[list[Record]]:
    """Records a Spark file sink committed, one list per micro-batch in batch order.

    From the sink's ``_spark_metadata`` log, which must stay uncompacted (docs/testing.md).
    """

    import pyarrow.parquet as pq

    log_dir = os.path.join(path, "_spark_metadata")
    batches = sorted(int(n) for n in os.listdir(log_dir) if n.isdigit())
    out: list[list[Record]] = []
    for batch in batches:
        with open(os.path.join(log_dir, str(batch))) as handle:
            lines = handle.read().splitlines()[1:]  # first line is the log version
        records: list[Record] = []
        for entry in map(json.loads, lines):
            if entry.get("action") != "add":
                continue
            table = pq.read_table(entry["path"].removeprefix("file://"))
            records.extend(records_of_table(table))
        out.append(records)
    return out
