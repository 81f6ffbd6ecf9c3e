"""Where the tests' Kinesis and DynamoDB are: the environment's, or the embedded emulators.

The order: docs/testing.md, "Where the endpoints come from". Stdlib only (the plugin imports it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENV_ENDPOINT_URL = "KINESIS_SRC_ENDPOINT_URL"  # same names as kinesis_src.config (not imported: it pulls in boto3)
ENV_DYNAMODB_ENDPOINT_URL = "KINESIS_SRC_DYNAMODB_ENDPOINT_URL"
ENV_ISOLATED = "KINESIS_SRC_ISOLATED"
ENV_ALLOW_UNISOLATED = "KINESIS_SRC_ALLOW_UNISOLATED"
TRUE_WORDS = ("1", "true", "yes", "on")
AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"
AWS_ENDPOINT_URL_KINESIS = "AWS_ENDPOINT_URL_KINESIS"
AWS_ENDPOINT_URL_DYNAMODB = "AWS_ENDPOINT_URL_DYNAMODB"

DEFAULT_REGION = "us-east-1"
DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}


class EndpointsUnavailable(RuntimeError):
    """Neither endpoints in the environment nor a way to start the emulators; the message says what to do."""


@dataclass(frozen=True)
class Endpoints:
    """The endpoints tests use; ``source``: ``"environment"`` or ``"embedded"`` (started)."""

    kinesis: str
    dynamodb: str
    region: str = DEFAULT_REGION
    source: str = "environment"
    details: str = field(default="", compare=False)

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Variables for a pipeline under test: endpoints, region, dummy credentials if none."""
        base = os.environ if base is None else base
        out = {ENV_ENDPOINT_URL: self.kinesis, ENV_DYNAMODB_ENDPOINT_URL: self.dynamodb}
        if not (base.get("AWS_REGION") or base.get("AWS_DEFAULT_REGION")) or self.source == "embedded":
            out.update(AWS_REGION=self.region, AWS_DEFAULT_REGION=self.region)
        if self.source == "embedded" or not (base.get("AWS_ACCESS_KEY_ID") or base.get("AWS_PROFILE")):
            out.update(DUMMY_CREDENTIALS)
        return out


def endpoints_from_environ(environ: Mapping[str, str] | None = None) -> Endpoints | None:
    """The endpoints the environment names, or None when it names none (then the emulators are started)."""
    env = os.environ if environ is None else environ

    def first(*names: str) -> tuple[str, str] | None:
        return next(((name, env[name]) for name in names if env.get(name)), None)

    kinesis = first(ENV_ENDPOINT_URL, AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL)
    if kinesis is None:
        return None
    dynamodb = first(ENV_DYNAMODB_ENDPOINT_URL, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL) or kinesis
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    return Endpoints(
        kinesis=kinesis[1], dynamodb=dynamodb[1], region=region, source="environment",
        details=f"Kinesis from {kinesis[0]}, DynamoDB from {dynamodb[0]}",
    )


def unisolated_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``KINESIS_SRC_ALLOW_UNISOLATED`` opts in to emulators outside a private network namespace."""
    env = os.environ if environ is None else environ
    return env.get(ENV_ALLOW_UNISOLATED, "").strip().lower() in TRUE_WORDS


def unavailable_message(reason: str) -> str:
    return (
        f"no Kinesis endpoint for kinesis_src.testing: {reason}. Either point the tests at running "
        f"endpoints ({ENV_ENDPOINT_URL}=http://127.0.0.1:4566, plus {ENV_DYNAMODB_ENDPOINT_URL} if DynamoDB "
        f"is elsewhere; or {AWS_ENDPOINT_URL} for LocalStack), or run the tests under "
        "`python -m kinesis_src.testing isolated -- python -m pytest ...` (Linux: a private network namespace) "
        "so the embedded emulators can start, or, where namespaces are unavailable (macOS, some CI runners), "
        f"set {ENV_ALLOW_UNISOLATED}=1 to start them anyway (they then listen on every network interface "
        "while the tests run; see docs/testing.md)"
    )


@contextlib.contextmanager
def embedded_endpoints(*, require_isolation: bool = True, environ: Mapping[str, str] | None = None) -> Iterator[Endpoints]:
    """Start kinesis-mock and DynamoDB Local from the installed package; stop them on exit.

    They bind every interface, so they start only in ``isolated`` or with
    ``KINESIS_SRC_ALLOW_UNISOLATED=1``; else :class:`EndpointsUnavailable` says what to do.
    """

    env = os.environ if environ is None else environ
    if require_isolation and env.get(ENV_ISOLATED) != "1" and not unisolated_allowed(env):
        raise EndpointsUnavailable(unavailable_message(
            f"none is set in the environment, and the emulators bind all network interfaces, so they start "
            f"only inside `python -m kinesis_src.testing isolated` ({ENV_ISOLATED}=1 is not set) "
            f"or with {ENV_ALLOW_UNISOLATED}=1"))
    from . import emulators as kit  # stdlib only; deferred so that environment endpoints never touch it

    emulators = kit.Emulators(kinesis=True, dynamodb=True)
    try:
        emulators.start()
    except (kit.ToolMissingError, kit.InstallError) as exc:  # no node/java, or npm ci offline: say what to do
        raise EndpointsUnavailable(unavailable_message(f"the embedded emulators cannot start: {exc}")) from exc
    try:
        yield Endpoints(
            kinesis=emulators.kinesis_endpoint, dynamodb=emulators.dynamodb_endpoint,
            region=kit.DEFAULT_REGION, source="embedded",
            details=(f"kinesis-mock and DynamoDB Local started by {Path(kit.__file__).resolve().parent} "
                     f"from {emulators.node_modules}"),
        )
    finally:
        emulators.stop()


@contextlib.contextmanager
def endpoints(*, require_isolation: bool = True) -> Iterator[Endpoints]:
    """The environment's endpoints if it names any, else the embedded emulators for the ``with`` block."""
    found = endpoints_from_environ()
    if found is not None:
        yield found
        return
    with embedded_endpoints(require_isolation=require_isolation) as started:
        yield started

