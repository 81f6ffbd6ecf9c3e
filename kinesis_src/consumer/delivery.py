"""Whether a queued batch goes to the application now (``Consumer.__anext__``), waits, or is dropped.

A batch goes out only from a holding that is still current and delivering,
and only while its reader is trusted (:meth:`.stream_reader.StreamReader.trusted`):
a worker whose own heartbeat is overdue (paused process, DynamoDB unreachable)
may already be declared dead, and one whose table view is stale may have been
stolen from unseen. The wait for trust ends as soon as the batch cannot
go out: its holding was released, lost or ended, or its unit was handed over
(a stopped coordinator never reads the table again, so its reader would never
be trusted again, and waiting on it would hold back every other unit's
batches). It also ends on the consumer's failure, which is raised, and when
the consumer stops.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .batch import Batch
from .shard_state import HeldShard
from .stream_reader import StreamReader

if TYPE_CHECKING:
    from .handout import Handout
    from .unit_readers import UnitReaders

TRUST_POLL_S = 0.05


async def deliverable(handout: Handout, units: UnitReaders, batch: Batch) -> tuple[StreamReader, HeldShard] | None:
    """The reader and holding to hand ``batch`` out from, once trusted; None to drop the batch."""
    while True:
        if handout.failure is not None:
            raise handout.failure
        reader, shard = units.holding_of(batch)
        if handout.stopping or reader is None or shard is None or not shard.state.delivering:
            return None
        if reader.trusted():
            return reader, shard
        await asyncio.sleep(TRUST_POLL_S)
