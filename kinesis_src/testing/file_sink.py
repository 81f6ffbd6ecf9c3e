"""Reading back what a Spark file sink committed, batch by batch, as Records.

The example Spark job and the Spark tests check their parquet sink with the
order checker; this turns the sink back into the Records it holds.
"""

from __future__ import annotations

import json
import os

from ..records import Record
from ..table_rows import records_of_table


def read_file_sink(path: str) -> list[list[Record]]:
    """Records a Spark file sink committed, one list per micro-batch in batch order.

    Uses the sink's own log (``_spark_metadata``), which is what makes the
    file sink exactly-once: files of a batch that was never committed are
    ignored, as any Spark reader of the directory would. Needs the log not
    compacted (``spark.sql.streaming.fileSink.log.compactInterval`` larger
    than the number of batches) to keep batch boundaries.
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
