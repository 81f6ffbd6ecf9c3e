"""What every AWS client of kinesis-src shares: session, client config, error translation.

botocore's retries are off: every call goes through :func:`kinesis_src.retry.call_with_retry`,
so one backoff policy and one final error naming the resource and endpoint."""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from typing import Any, Awaitable, Callable, TypeVar

import botocore.handlers
import botocore.session
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)
from urllib3.exceptions import IncompleteRead as URLLib3IncompleteRead

from ..config import AwsSettings
from ..errors import (
    AccessDeniedError,
    ConfigurationError,
    EndpointUnreachableError,
    InvalidRequestError,
    IteratorExpiredError,
    KinesisSourceError,
    ResourceNotFoundError,
    ServiceUnavailableError,
    ThrottledError,
    TruncatedResponseError,
)
from ..retry import RetryPolicy, acall_with_retry, call_with_retry
from .botocore_internals import client_parser_factory, parser_settings, set_client_parser_factory
from .credentials import configure
from .decode import FROM_PARSER, FastResponseParserFactory, check_before_parse

T = TypeVar("T")

_THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "KMSThrottlingException",
    }
)
_ACCESS_CODES = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "KMSAccessDeniedException",
    }
)
_SERVER_CODES = frozenset(
    {"InternalFailure", "InternalFailureException", "InternalServerError", "ServiceUnavailable"}
)
_INVALID_CODES = frozenset(
    {"InvalidArgumentException", "ValidationException", "SerializationException", "ResourceInUseException"}
)


class _SharedSession(botocore.session.Session):
    """A botocore session that several threads may create clients from: one lock serialises what it
    resolves lazily (components, credentials) on ``create_client``."""

    def __init__(self) -> None:
        super().__init__()
        self._create_lock = threading.Lock()

    def create_client(self, *args: Any, **kwargs: Any) -> Any:
        with self._create_lock:
            return super().create_client(*args, **kwargs)


_SESSIONS: OrderedDict[tuple[Any, ...], botocore.session.Session] = OrderedDict()
_SESSIONS_LOCK = threading.Lock()
_SESSIONS_KEPT = 8


def new_session(settings: AwsSettings | None = None) -> botocore.session.Session:
    """The process's botocore session for these settings (fast GetRecords parser, profile and role),
    shared by every client. A new process, ``AWS_*`` environment or botocore built-in handler (moto
    registers one on import) gets a new one."""
    key = (
        os.getpid(),
        None if settings is None else (settings.credentials, settings.region),
        tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))),
        len(botocore.handlers.BUILTIN_HANDLERS),
    )
    with _SESSIONS_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = _build_session(settings)
            while len(_SESSIONS) > _SESSIONS_KEPT:
                _SESSIONS.popitem(last=False)
        else:
            _SESSIONS.move_to_end(key)
        return session


def millisecond_timestamps(session: Any) -> Any:
    """Have the session's Kinesis clients send AT_TIMESTAMP with its milliseconds, not whole seconds
    (docs/compatibility.md). Applies to sessions kinesis-src makes, not a caller's."""
    session.register("creating-serializer.kinesis", _milliseconds, unique_id="kinesis-src-ms-timestamps")
    return session


def _milliseconds(serializer_kwargs: dict[str, Any], **_: Any) -> None:
    serializer_kwargs["timestamp_precision"] = "millisecond"


def _build_session(settings: AwsSettings | None) -> botocore.session.Session:
    session = millisecond_timestamps(_SharedSession())
    session.register_component("response_parser_factory", FastResponseParserFactory())
    if settings is not None:
        configure(session, settings.credentials, settings.region)
    return session


_CHECKS_ID = "kinesis-src-check-before-parse"


def use_fast_parser(client: BaseClient) -> BaseClient:
    """Make this one client parse GetRecords the fast way, whichever session created it: the factory
    goes on the client, never on a caller's session. Where botocore forbids that,
    :func:`.decode.check_before_parse` runs instead: slower, same results."""
    if not install_parser_factory(client, FastResponseParserFactory):
        client.meta.events.register("before-parse.kinesis", check_before_parse, unique_id=_CHECKS_ID)
    return client


def install_parser_factory(client: BaseClient, factory_class: type[FastResponseParserFactory]) -> bool:
    """Put a ``factory_class`` parser factory on this one client unless one is there; False (nothing
    changed) where botocore forbids it. The old factory's settings carry over where readable."""
    current = client_parser_factory(client)
    if current is None:
        return False
    if not isinstance(current, factory_class):
        settings = current.settings if isinstance(current, FastResponseParserFactory) else parser_settings(current)
        set_client_parser_factory(client, factory_class(**settings))
    return True


def client_config(settings: AwsSettings) -> Config:
    return Config(
        region_name=settings.region,
        connect_timeout=settings.connect_timeout_s,
        read_timeout=settings.read_timeout_s,
        retries={"total_max_attempts": 1},  # ours, not botocore's: see module docstring
        max_pool_connections=32,
        user_agent_appid="kinesis-src",
    )


def translate(error: Exception, what: str, endpoint: str) -> KinesisSourceError:
    """Map a botocore exception to the kinesis-src error a caller can act on."""
    if isinstance(error, KinesisSourceError):
        if getattr(error, FROM_PARSER, False):  # raised inside botocore's parse step: name the call here
            return type(error)(f"{what} at {endpoint}: {error}")
        return error
    if isinstance(error, ClientError):
        return _translate_client_error(error, what, endpoint)
    cut = _cut_body(error) if isinstance(error, ConnectionClosedError) else None
    if cut is not None:
        return TruncatedResponseError(
            f"{what} at {endpoint}: response body ended after {cut[0]} bytes, {cut[1]} short of the Content-Length "
            "it announced: the connection closed mid-answer"
        )
    if isinstance(error, (BotoConnectionError, ConnectionClosedError, ReadTimeoutError, HTTPClientError)):
        return EndpointUnreachableError(
            f"{what}: no answer from {endpoint} ({type(error).__name__}). Check that the endpoint "
            "is running and reachable, and the endpointUrl/region settings."
        )
    if isinstance(error, (NoCredentialsError, PartialCredentialsError)):
        return AccessDeniedError(
            f"{what}: no usable AWS credentials ({error}). Set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY or AWS_PROFILE; for a local emulator any dummy values work."
        )
    if isinstance(error, NoRegionError):
        return ConfigurationError(f"{what}: no AWS region; set option 'region' or AWS_REGION")
    if isinstance(error, BotoCoreError):
        return KinesisSourceError(f"{what} against {endpoint} failed: {error}")
    raise error


def _cut_body(error: BaseException) -> tuple[int, int] | None:
    """(bytes read, bytes missing) when a connection closed inside a body short of its
    Content-Length (botocore reading the body itself: ConnectionClosedError from IncompleteRead)."""
    cause: BaseException | None = error
    for _ in range(8):
        if cause is None:
            return None
        if isinstance(cause, URLLib3IncompleteRead) and isinstance(cause.partial, int):
            return cause.partial, int(cause.expected or 0)
        cause = cause.__cause__ or cause.__context__
    return None


def _translate_client_error(error: ClientError, what: str, endpoint: str) -> KinesisSourceError:
    info = error.response.get("Error", {})
    code = str(info.get("Code", "Unknown"))
    message = str(info.get("Message", "")).strip()
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    detail = f"{what}: {code}: {message}" if message else f"{what}: {code}"
    if code == "ExpiredIteratorException":
        return IteratorExpiredError(detail)
    if code in _THROTTLING_CODES:
        return ThrottledError(detail)
    if code in _ACCESS_CODES or code == "AccessDenied" or status == 403:
        return _access_denied(what, code, message)
    if code == "ResourceNotFoundException":
        return ResourceNotFoundError(f"{detail} (endpoint {endpoint})")
    if code in _SERVER_CODES or status >= 500:
        return ServiceUnavailableError(f"{detail} (HTTP {status} from {endpoint})")
    if code in _INVALID_CODES:
        return InvalidRequestError(detail)
    return KinesisSourceError(f"{detail} (HTTP {status} from {endpoint})")


_NOT_AUTHORIZED = re.compile(r"not authorized to perform:? ([A-Za-z0-9-]+:[A-Za-z0-9]+)")


def _access_denied(what: str, code: str, message: str) -> AccessDeniedError:
    """Name the IAM action that is missing where AWS (or an emulator's bare 403 body) says which."""
    action = _NOT_AUTHORIZED.search(message)
    if action:
        return AccessDeniedError(
            f"{what}: the credentials are not allowed to call {action.group(1)} ({code}). Grant it: "
            "docs/iam.md lists the policy each engine and mode needs."
        )
    shown = message if message and not message.startswith("<") else "access denied"
    return AccessDeniedError(
        f"{what}: {code}: {shown}. Check the credentials and that they allow this call on this resource "
        "(docs/iam.md lists the policy each engine and mode needs)."
    )


def interceptor_active() -> bool:
    """A ``before-send`` handler in botocore's built-in list is on (moto registers one on import and
    sets its ``enabled`` while a mock runs): requests must then go through botocore's own client, where
    it answers them, and never over a connection of ours or aiobotocore's."""
    return any(
        str(entry[0]).startswith("before-send") and getattr(entry[1], "enabled", True)
        for entry in botocore.handlers.BUILTIN_HANDLERS
    )


def call(what: str, endpoint: str, policy: RetryPolicy, fn: Callable[[], T]) -> T:
    """Run one AWS call with translation and the retry policy."""

    def attempt() -> T:
        try:
            return fn()
        except Exception as exc:  # translated, never swallowed
            raise translate(exc, what, endpoint) from exc

    return call_with_retry(attempt, what, policy)


async def acall(what: str, endpoint: str, policy: RetryPolicy, fn: Callable[[], Awaitable[T]]) -> T:
    """:func:`call` for aiobotocore coroutines: the same translation, the same retry policy."""

    async def attempt() -> T:
        try:
            return await fn()
        except Exception as exc:  # translated, never swallowed
            raise translate(exc, what, endpoint) from exc

    return await acall_with_retry(attempt, what, policy)
