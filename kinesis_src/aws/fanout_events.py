"""The events of one SubscribeToShard event stream, for :class:`.fanout.FanOut` and :class:`.async_fanout.AsyncFanOut`.

Events are decoded the fast way from the stream's raw messages
(:func:`.fanout_model.decoded_event`); an error or exception message is
handed to botocore's event parser, which raises it, named by
:func:`.fanout_errors.named_error`. Raw messages are private to botocore
(:mod:`.botocore_internals`); where a release lacks them, the stream's public
iteration gives botocore's parse of each event instead, converted by
:func:`.fanout_model.event_from`: the same events at a higher decode cost
(docs/performance.md, "botocore internals"), and an exception type
botocore's model does not list is named "(no code)".
"""

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
