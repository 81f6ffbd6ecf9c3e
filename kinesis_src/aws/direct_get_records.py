"""GetRecords straight over aiohttp: one signature (:mod:`.sigv4`), one POST, the body to decode.

The Consumer's cheaper path (docs/performance.md, "GetRecords per call"), taken where
:func:`wanted`; failures are raised as botocore raises them."""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.request
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit

import aiohttp
import botocore.httpsession
from botocore import parsers
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)

from ..config import AwsSettings
from ..errors import TruncatedResponseError
from .body_decode import from_parser
from .boundary import interceptor_active
from .sigv4 import JsonPostSigner, Keys

TARGET = "Kinesis_20131202.GetRecords"
CONTENT_TYPE = "application/x-amz-json-1.1"
USER_AGENT = "kinesis-src (direct GetRecords)"

KeySource = Callable[[], Awaitable["Keys | None"]]


def wanted(settings: AwsSettings, endpoint_url: str) -> bool:
    """Whether GetRecords may bypass botocore: the settings allow it, the endpoint has no path (this
    signer signs ``/`` only) and no interceptor is on (:func:`.boundary.interceptor_active`)."""
    if not settings.direct_get_records or urlsplit(endpoint_url).path not in ("", "/"):
        return False
    return not interceptor_active()


class DirectGetRecords:
    """Sends GetRecords to one endpoint; ``await open()`` before use, ``await close()`` after."""

    def __init__(self, endpoint_url: str, region: str, keys: KeySource, settings: AwsSettings,
                 max_connections: int, ca_bundle: str | None = None) -> None:
        parts = urlsplit(endpoint_url)
        default_port = {"http": 80, "https": 443}.get(parts.scheme)
        host = parts.hostname or ""
        self.url = f"{parts.scheme}://{parts.netloc}/"
        self._signer = JsonPostSigner(
            host if parts.port in (None, default_port) else f"{host}:{parts.port}", region, "kinesis", CONTENT_TYPE
        )
        self._keys = keys
        self._settings = settings
        self._max_connections = max_connections
        self._ca_bundle = ca_bundle
        self._session: aiohttp.ClientSession | None = None
        self._proxy: str | None = None

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=self._max_connections, ssl=_ssl_context(self.url, self._ca_bundle))
        timeout = aiohttp.ClientTimeout(sock_connect=self._settings.connect_timeout_s,
                                        sock_read=self._settings.read_timeout_s)
        self._proxy = _env_proxy(self.url)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout,
                                              skip_auto_headers=("User-Agent",))

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def get_records(self, iterator: str, limit: int) -> bytes:
        """The success body; a failure raised as botocore would raise it."""
        if self._session is None:
            raise RuntimeError("DirectGetRecords is not open")
        keys = await self._keys()
        if keys is None:
            raise NoCredentialsError()
        body = json.dumps({"ShardIterator": iterator, "Limit": limit}).encode()
        headers = self._signer.headers(keys, TARGET, body)
        headers["user-agent"] = USER_AGENT
        try:
            async with self._session.post(self.url, data=body, headers=headers, proxy=self._proxy) as response:
                raw = await response.read()
                status, answer_headers = response.status, response.headers
        except aiohttp.ClientPayloadError as exc:
            raise from_parser(TruncatedResponseError(
                "GetRecords response body ended before the length its Content-Length announced: "
                "the connection closed mid-answer"
            )) from exc
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise ReadTimeoutError(endpoint_url=self.url, error=exc) from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise ConnectionClosedError(endpoint_url=self.url, error=exc) from exc
        except aiohttp.ClientError as exc:
            raise EndpointConnectionError(endpoint_url=self.url, error=exc) from exc
        if status >= 300:
            raise client_error(status, answer_headers, raw)
        return raw


def client_error(status: int, headers: Any, body: bytes) -> ClientError:
    """The ClientError botocore raises for this answer, from botocore's own JSON error parser."""
    answer = {"status_code": status, "headers": {str(k).lower(): v for k, v in headers.items()}, "body": body}
    return ClientError(parsers.create_parser("json").parse(answer, None), "GetRecords")


def _env_proxy(url: str) -> str | None:
    """The ``HTTP(S)_PROXY`` for this endpoint unless ``NO_PROXY`` exempts it, read once (as botocore
    reads them), not per request as aiohttp's ``trust_env`` would."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass_environment(parts.hostname or ""):
        return None
    return urllib.request.getproxies_environment().get(parts.scheme)


def _ssl_context(url: str, ca_bundle: str | None) -> ssl.SSLContext | bool:
    """For https, the trust store botocore would use: the session's ``ca_bundle`` (``AWS_CA_BUNDLE``,
    the profile's setting), else botocore's default bundle."""
    if not url.startswith("https:"):
        return False
    return ssl.create_default_context(cafile=ca_bundle or botocore.httpsession.get_cert_path(True))
