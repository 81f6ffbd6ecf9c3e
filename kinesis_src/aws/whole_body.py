"""Response bodies read in one ``read()``, for Spark tasks' large GetRecords bodies.

Wraps one client's HTTP session (:mod:`.botocore_internals`) and raises what botocore raises; a
body cut short is returned partial, for :func:`.decode.check_complete` to raise as retriable."""

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
