"""The events of one SubscribeToShard event stream, for both fan-out clients.

Decoded from the raw messages where botocore exposes them, else from its public parse: the same
events, slower (:mod:`.botocore_internals`; docs/performance.md, "botocore internals")."""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator

from .botocore_internals import aio_event_messages, araise_event_error, event_messages, raise_event_error
from .fanout_errors import named_error
from .fanout_model import FanOutEvent, decoded_event, event_from, is_error_message

_EVENT = "SubscribeToShardEvent"


def stream_events(stream: Any) -> Iterator[FanOutEvent]:
    """The events of a botocore event stream, in order; its error messages raised."""
    messages = event_messages(stream)
    if messages is None:
        with named_error(None):
            yield from (event_from(parsed[_EVENT]) for parsed in stream if _EVENT in parsed)
        return
    for message in messages:
        event = decoded_event(message)
        if event is not None:
            yield event
        elif is_error_message(message):
            with named_error(message):
                raise_event_error(stream, message)


async def astream_events(stream: Any) -> AsyncIterator[FanOutEvent]:
    """:func:`stream_events` for an aiobotocore event stream."""
    messages = aio_event_messages(stream)
    if messages is None:
        with named_error(None):
            async for parsed in stream:
                if _EVENT in parsed:
                    yield event_from(parsed[_EVENT])
        return
    async for message in messages:
        event = decoded_event(message)
        if event is not None:
            yield event
        elif is_error_message(message):
            with named_error(message):
                await araise_event_error(stream, message)
