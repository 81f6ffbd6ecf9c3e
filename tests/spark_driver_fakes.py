"""The Spark stream driver's lease-table collaborators, faked, for unit tests that plan without DynamoDB.

:class:`RecordedEnds` stands in for the progress log (the batch ends the
tasks recorded), :class:`NoClaim` for the query claim; :func:`stream_reader`
is a :class:`KinesisStreamReader` whose driver uses both on a given Kinesis
(the shared fake), with or without a plan store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kinesis_src.spark.driver import StreamDriver
from kinesis_src.spark.options import parse_options
from kinesis_src.spark.plan_store import PlanStore
from kinesis_src.spark.planner import BatchEnd

if TYPE_CHECKING:  # the 4.2+ reader: imported by stream_reader() only, so PySpark 4.0/4.1 can load the fakes
    from kinesis_src.spark.stream import KinesisStreamReader


class RecordedEnds:
    """The progress log: the ends the tasks recorded, per batch."""

    def __init__(self, ends: dict[int, dict[str, BatchEnd]]) -> None:
        self.by_batch = ends

    def ends(self, run: str, batch: int) -> dict[str, BatchEnd]:
        return dict(self.by_batch.get(batch, {}))

    def purge_before(self, run: str, batch: int, shard_ids: object = None) -> None:
        pass


class NoClaim:
    """A query claim that is always granted."""

    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass


def stream_reader(kinesis: Any, ends: dict[int, dict[str, BatchEnd]], *, plans: PlanStore | None = None,
                  **options: str) -> KinesisStreamReader:
    """A stream reader of stream "orders" on ``kinesis`` with ``ends`` as the recorded batch ends."""
    from kinesis_src.spark.stream import KinesisStreamReader  # noqa: PLC0415  (see the import above)

    opts = parse_options({"streamName": "orders", "region": "us-east-1", **options}, batch=False, environ={})
    reader = KinesisStreamReader(opts)
    reader._driver = StreamDriver(opts, kinesis=kinesis, progress=RecordedEnds(ends), claim=NoClaim(), plans=plans)
    return reader
