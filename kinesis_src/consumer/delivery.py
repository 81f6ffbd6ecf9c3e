"""Whether a queued batch goes to the application now (``Consumer.__anext__``), waits, or drops.

Only from a current, delivering holding whose reader is trusted (heartbeat and table view fresh);
the wait ends once it cannot go out, so a handed-over unit never holds back others' batches."""

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
