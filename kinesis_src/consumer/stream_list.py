"""Which streams an application read last time: the log line for a stream added or removed.

The item serves the log alone: leases are per stream, so an added stream starts at the initial
position and a removed one keeps its checkpoints (docs/consumer.md, "Several streams")."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..leases.schema.consumer_items import stream_list_item, streams_of
from ..leases.schema.keys import stream_list_key

if TYPE_CHECKING:
    from ..aws.async_dynamodb import AsyncDynamoDB

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamListChange:
    added: tuple[str, ...]
    removed: tuple[str, ...]


async def note_stream_list(dynamodb: AsyncDynamoDB, table_name: str, application: str,
                           streams: tuple[str, ...]) -> StreamListChange:
    """Record ``streams`` as the application's list; log and return what changed since the last record."""
    item = await dynamodb.get_item(table_name, stream_list_key(application))
    before = streams_of(item) if item is not None else None
    if before != streams:
        await dynamodb.put_item(table_name, stream_list_item(application, streams))
    if before is None:
        return StreamListChange((), ())
    change = StreamListChange(
        tuple(s for s in streams if s not in before), tuple(s for s in before if s not in streams)
    )
    for stream in change.added:
        log.info("application %r now reads stream %r too: it starts at the initial position", application, stream)
    for stream in change.removed:
        log.warning(
            "application %r no longer reads stream %r (left out of stream_name); its leases and checkpoints "
            "stay in table %r and are used again if it is added back", application, stream, table_name,
        )
    return change
