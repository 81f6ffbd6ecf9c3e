"""Response bodies read in one ``read()``, for the clients whose bodies are large (Spark tasks' GetRecords).

botocore reads a body as ``b"".join(raw.stream())``: 64 KiB reads through
urllib3, then a join that copies the whole body once more; for a 4 MB
GetRecords page that is ~0.3-0.5 µs a record of 200 B, about a tenth of a
Spark task's CPU per record (docs/performance.md). One ``read()`` of the
whole body fills one buffer.

The wrapper goes around one client's HTTP session (never a shared one). It
asks the session not to read the body (``stream_output``), then reads it
itself and maps errors the way botocore's session does, so callers see the
same exceptions. The response it returns is a new ``AWSResponse`` whose raw
stream yields that one buffer: botocore's own ``content`` joins a single
chunk, which is the buffer itself. Reaching a client's HTTP session is
private to botocore (:mod:`.botocore_internals`); where a release keeps it
elsewhere, the client reads bodies botocore's way. One difference needs care: a body cut short by the
connection, which botocore's chunked reads return short (then
:func:`.decode.check_complete` raises the retriable
``TruncatedResponseError``), makes a whole read raise ``IncompleteRead``; its
partial body is returned here instead, so the same check sees it.
tests/unit/test_aws.py runs the truncation tests on both kinds of client.
"""

from __future__ import annotations

import http.client
from typing import Any, Iterator

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.client import BaseClient
from botocore.exceptions import (
    ConnectionClosedError,
    HTTPClientError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.exceptions import ProtocolError
from urllib3.exceptions import ReadTimeoutError as URLLib3ReadTimeoutError
from urllib3.exceptions import SSLError as URLLib3SSLError

from .botocore_internals import wrap_http_session


class WholeBodySession:
    """A client's HTTP session whose non-streaming responses are read with one ``read()``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def send(self, request: AWSPreparedRequest) -> AWSResponse:
        if request.stream_output:  # event streams (SubscribeToShard) stay botocore's
            return self.inner.send(request)
        request.stream_output = True
        try:
            response = self.inner.send(request)
        finally:
            request.stream_output = False
        body = read_whole(response, request)
        return AWSResponse(response.url, response.status_code, response.headers, WholeBody(body, response.raw))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class WholeBody:
    """A response's raw stream, already read: ``stream()`` yields the body as one chunk."""

    def __init__(self, body: bytes, raw: Any) -> None:
        self.body = body
        self.raw = raw

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        yield self.body

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def read_whole(response: AWSResponse, request: AWSPreparedRequest) -> bytes:
    """The body in one read, or what arrived before the connection broke; errors as botocore raises them."""
    try:
        return response.raw.read() or b""
    except URLLib3ReadTimeoutError as exc:
        raise ReadTimeoutError(endpoint_url=request.url, error=exc) from exc
    except ProtocolError as exc:
        partial = _partial_body(exc)
        if partial is not None:
            return partial  # shorter than its Content-Length: check_complete names it TruncatedResponseError
        raise ConnectionClosedError(error=exc, request=request, endpoint_url=request.url) from exc
    except URLLib3SSLError as exc:
        raise SSLError(endpoint_url=request.url, error=exc) from exc
    except Exception as exc:  # what botocore's session maps every other failure to
        raise HTTPClientError(error=exc) from exc


def _partial_body(error: ProtocolError) -> bytes | None:
    for cause in (*error.args, error.__cause__):
        if isinstance(cause, http.client.IncompleteRead) and isinstance(cause.partial, bytes):
            return cause.partial
    return None


def read_bodies_whole(client: BaseClient) -> BaseClient:
    """Make this one client read response bodies in one read; idempotent. Where this botocore does not
    let a client's HTTP session be reached, the client is left as it is (botocore's chunked reads)."""
    wrap_http_session(client, _whole)
    return client


def _whole(session: Any) -> Any:
    return session if isinstance(session, WholeBodySession) else WholeBodySession(session)
