"""Every private botocore/aiobotocore member kinesis-src reaches, checked once, with a fallback.

No other module names one (test_private_botocore_names.py). A missing one costs speed, never
correctness (docs/performance.md, "botocore internals")."""

from __future__ import annotations

import enum
import inspect
import logging
import threading
from typing import Any, AsyncIterator, Callable, Iterator

from botocore import parsers

log = logging.getLogger(__name__)


class Internal(enum.Enum):
    """A private botocore/aiobotocore member the read path uses where it can; the value names it."""

    PARSE_SHAPE = "botocore ResponseParser._parse_shape(shape, node)"
    CLIENT_PARSER = "botocore BaseClient._endpoint._response_parser_factory"
    PARSER_SETTINGS = "botocore ResponseParserFactory._defaults"
    HTTP_SESSION = "botocore BaseClient._endpoint.http_session"
    EVENT_MESSAGES = "botocore EventStream._event_generator and _parse_event"
    AIO_EVENT_MESSAGES = "aiobotocore AioEventStream._event_generator and _parse_event"


FALLBACKS: dict[Internal, str] = {
    Internal.PARSE_SHAPE: "answers other than GetRecords are checked as JSON, then parsed again by botocore",
    Internal.CLIENT_PARSER: (
        "a client of a caller's session keeps botocore's parser, with the body checks and the GetRecords "
        "decode run from its public before-parse event"
    ),
    Internal.PARSER_SETTINGS: "a caller's session's parser settings (e.g. a timestamp parser) are not carried over",
    Internal.HTTP_SESSION: "response bodies are read the way botocore reads them (64 KiB chunks, then joined)",
    Internal.EVENT_MESSAGES: "SubscribeToShard events are parsed by botocore through the public iteration",
    Internal.AIO_EVENT_MESSAGES: "SubscribeToShard events are parsed by aiobotocore through the public iteration",
}


# -- the checks -------------------------------------------------------------------------------------


def _has_parse_shape(parser: Any) -> bool:
    method = getattr(parser, "_parse_shape", None)
    return callable(method) and list(inspect.signature(method).parameters) == ["shape", "node"]


def _endpoint(client: Any) -> Any:
    return getattr(client, "_endpoint", None)


def _has_client_parser(client: Any) -> bool:
    factory = getattr(_endpoint(client), "_response_parser_factory", None)
    return isinstance(factory, parsers.ResponseParserFactory)


def _has_parser_settings(factory: Any) -> bool:
    return isinstance(getattr(factory, "_defaults", None), dict)


def _has_http_session(client: Any) -> bool:
    return callable(getattr(getattr(_endpoint(client), "http_session", None), "send", None))


def _has_event_messages(stream: Any) -> bool:
    messages = getattr(stream, "_event_generator", None)
    return inspect.isgenerator(messages) and callable(getattr(stream, "_parse_event", None))


def _has_aio_event_messages(stream: Any) -> bool:
    messages = getattr(stream, "_event_generator", None)
    return inspect.isasyncgen(messages) and inspect.iscoroutinefunction(getattr(stream, "_parse_event", None))


_CHECKS: dict[Internal, Callable[[Any], bool]] = {
    Internal.PARSE_SHAPE: _has_parse_shape,
    Internal.CLIENT_PARSER: _has_client_parser,
    Internal.PARSER_SETTINGS: _has_parser_settings,
    Internal.HTTP_SESSION: _has_http_session,
    Internal.EVENT_MESSAGES: _has_event_messages,
    Internal.AIO_EVENT_MESSAGES: _has_aio_event_messages,
}
_found: dict[Internal, bool] = {}
_found_lock = threading.Lock()


def present(internal: Internal, owner: Any) -> bool:
    """Whether ``internal`` is there, as expected, on ``owner``: checked once per process (a
    release's objects all have the same members); a missing one is logged once with its fallback."""
    found = _found.get(internal)
    if found is not None:
        return found
    with _found_lock:
        if internal not in _found:
            try:
                _found[internal] = bool(_CHECKS[internal](owner))
            except (TypeError, ValueError):  # a signature inspect cannot read: not the shape we know
                _found[internal] = False
            if not _found[internal]:
                log.info("this botocore lacks %s: %s (slower, same results)", internal.value, FALLBACKS[internal])
        return _found[internal]


# -- PARSE_SHAPE --------------------------------------------------------------------------------------


def parse_shape(parser: Any, shape: Any, doc: Any) -> Any | None:
    """botocore's model walk over an already decoded JSON ``doc``; None where this botocore lacks it."""
    if not present(Internal.PARSE_SHAPE, parser):
        return None
    return parser._parse_shape(shape, doc)


# -- CLIENT_PARSER, PARSER_SETTINGS -------------------------------------------------------------------


def client_parser_factory(client: Any) -> Any | None:
    """The parser factory of this one client; None where this botocore keeps it elsewhere."""
    if not present(Internal.CLIENT_PARSER, client):
        return None
    return client._endpoint._response_parser_factory


def set_client_parser_factory(client: Any, factory: Any) -> bool:
    """Give this one client its own parser factory; False (nothing changed) where this botocore cannot."""
    if not present(Internal.CLIENT_PARSER, client):
        return False
    client._endpoint._response_parser_factory = factory
    return True


def parser_settings(factory: Any) -> dict[str, Any]:
    """The keyword arguments a botocore parser factory gives its parsers; {} where they cannot be read."""
    if not present(Internal.PARSER_SETTINGS, factory):
        return {}
    return dict(factory._defaults)


# -- HTTP_SESSION ----------------------------------------------------------------------------------------


def wrap_http_session(client: Any, wrap: Callable[[Any], Any]) -> bool:
    """Replace this one client's HTTP session by ``wrap(session)``; False (nothing changed) where it cannot."""
    if not present(Internal.HTTP_SESSION, client):
        return False
    endpoint = client._endpoint
    endpoint.http_session = wrap(endpoint.http_session)
    return True



# -- EVENT_MESSAGES, AIO_EVENT_MESSAGES ---------------------------------------------------------------


def event_messages(stream: Any) -> Iterator[Any] | None:
    """A botocore event stream's raw messages, below its parse; None where this botocore lacks them."""
    if not present(Internal.EVENT_MESSAGES, stream):
        return None
    generator: Iterator[Any] = stream._event_generator
    return generator


def raise_event_error(stream: Any, message: Any) -> None:
    """Have botocore parse an error or exception message of ``stream``: it raises it as EventStreamError."""
    stream._parse_event(message)


def aio_event_messages(stream: Any) -> AsyncIterator[Any] | None:
    """:func:`event_messages` for aiobotocore's event stream."""
    if not present(Internal.AIO_EVENT_MESSAGES, stream):
        return None
    generator: AsyncIterator[Any] = stream._event_generator
    return generator


async def araise_event_error(stream: Any, message: Any) -> None:
    """:func:`raise_event_error` for aiobotocore's event stream."""
    await stream._parse_event(message)
