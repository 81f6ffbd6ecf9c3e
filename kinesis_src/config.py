"""Settings parsed once into frozen values, with the names users type.

Environment variables let the same program run against AWS or an emulator
without code changes: ``KINESIS_SRC_ENDPOINT_URL`` and
``KINESIS_SRC_DYNAMODB_ENDPOINT_URL`` (what ``localstack/launcher.py``
prints), and the usual ``AWS_REGION`` / ``AWS_DEFAULT_REGION``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import urlsplit

from .errors import ConfigurationError
from .retry import RetryPolicy

ENV_ENDPOINT_URL = "KINESIS_SRC_ENDPOINT_URL"
ENV_DYNAMODB_ENDPOINT_URL = "KINESIS_SRC_DYNAMODB_ENDPOINT_URL"
ENV_REGIONS = ("AWS_REGION", "AWS_DEFAULT_REGION")
ENV_DIRECT_GET_RECORDS = "KINESIS_SRC_DIRECT_GET_RECORDS"  # "0": the Consumer's GetRecords through aiobotocore


_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}")
_SESSION_NAME = re.compile(r"[\w+=,.@-]{2,64}")


@dataclass(frozen=True)
class CredentialSource:
    """Where credentials come from: a shared-config profile, and a role to assume with them.

    Only names travel (an ARN, a profile name, a session name, an external
    id, which AWS documents as not secret): each process resolves and
    refreshes its own credentials from them (:mod:`kinesis_src.aws.credentials`),
    so Spark executors assume the role themselves and no key is ever pickled.
    """

    profile: str | None = None
    role_arn: str | None = None
    role_session_name: str | None = None
    role_external_id: str | None = None
    sts_endpoint_url: str | None = None

    def __post_init__(self) -> None:
        if self.role_arn is not None and not _ROLE_ARN.fullmatch(self.role_arn):
            raise ConfigurationError(
                f"roleArn {self.role_arn!r} is not an IAM role ARN: expected arn:aws:iam::<12-digit account>:role/<name>"
            )
        if self.role_arn is None and (self.role_session_name or self.role_external_id or self.sts_endpoint_url):
            raise ConfigurationError(
                "roleSessionName, roleExternalId and stsEndpoint only apply with roleArn: set roleArn, or drop them"
            )
        if self.role_session_name is not None and not _SESSION_NAME.fullmatch(self.role_session_name):
            raise ConfigurationError(
                f"roleSessionName {self.role_session_name!r}: use 2-64 letters, digits and +=,.@_-"
            )
        if self.profile is not None and (not self.profile or self.profile != self.profile.strip()):
            raise ConfigurationError(f"profile {self.profile!r} is not a profile name")
        if self.sts_endpoint_url is not None:
            check_endpoint_url(self.sts_endpoint_url, "stsEndpoint")


@dataclass(frozen=True)
class AwsSettings:
    """Where and how to reach Kinesis and DynamoDB.

    Credentials themselves are deliberately absent: they come from botocore's
    default chain (environment, profile, instance role), optionally through a
    role to assume (``credentials``), so they are never copied into offsets,
    partitions, logs or error messages.

    ``direct_get_records``: the Consumer sends GetRecords over aiohttp with
    its own SigV4 signature instead of through aiobotocore (a third of the
    CPU per call; same endpoint, credentials and errors). False sends them
    through aiobotocore, as every other call is (``from_env``: also when
    ``KINESIS_SRC_DIRECT_GET_RECORDS=0``).
    """

    region: str
    endpoint_url: str | None = None
    dynamodb_endpoint_url: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    credentials: CredentialSource = field(default_factory=CredentialSource)
    direct_get_records: bool = True

    def __post_init__(self) -> None:
        if not self.region:
            raise ConfigurationError(
                "no AWS region: pass region=... (option 'region') or set AWS_REGION"
            )
        for name in ("endpoint_url", "dynamodb_endpoint_url"):
            url = getattr(self, name)
            if url is not None:
                check_endpoint_url(url, name)

    @property
    def effective_dynamodb_endpoint_url(self) -> str | None:
        """DynamoDB defaults to the Kinesis endpoint: LocalStack serves both on one port."""
        return self.dynamodb_endpoint_url or self.endpoint_url

    @classmethod
    def from_env(
        cls,
        region: str | None = None,
        endpoint_url: str | None = None,
        dynamodb_endpoint_url: str | None = None,
        environ: Mapping[str, str] | None = None,
        **kwargs: object,
    ) -> AwsSettings:
        """Explicit arguments win; otherwise the environment; otherwise AWS defaults."""
        env = os.environ if environ is None else environ
        region = region or region_from_env(env)
        if ENV_DIRECT_GET_RECORDS in env and "direct_get_records" not in kwargs:
            kwargs["direct_get_records"] = env_flag(env, ENV_DIRECT_GET_RECORDS)
        return cls(
            region=region,
            endpoint_url=endpoint_url or env.get(ENV_ENDPOINT_URL) or None,
            dynamodb_endpoint_url=dynamodb_endpoint_url or env.get(ENV_DYNAMODB_ENDPOINT_URL) or None,
            **kwargs,  # type: ignore[arg-type]
        )


_FLAG_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def env_flag(environ: Mapping[str, str], name: str) -> bool:
    """An on/off environment variable; any other value is refused, naming the variable."""
    value = environ[name].strip().lower()
    if value not in _FLAG_VALUES:
        raise ConfigurationError(f"{name}={environ[name]!r}: use 1 or 0 (also true/false, yes/no, on/off)")
    return _FLAG_VALUES[value]


def region_from_env(environ: Mapping[str, str]) -> str:
    """AWS_REGION, else AWS_DEFAULT_REGION, else empty (the caller reports it as missing)."""
    return next((environ[k] for k in ENV_REGIONS if environ.get(k)), "")


def check_endpoint_url(url: str, option: str) -> str:
    """Validate an endpoint URL before any client exists, so a typo fails at configuration time.

    Credentials in the URL (``user:password@``, a query or fragment) are
    refused, never redacted: endpoints are shown in logs and every error
    message, and a secret there would leak into all of them. The check runs
    first, so no later message echoes such a URL.
    """
    _reject_secrets_in_url(url, option)
    if url != url.strip() or any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise ConfigurationError(
            f"{option} {url!r} has leading/trailing whitespace or a control character; pass the URL without them"
        )
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{option} {url!r} is not an http(s) URL; expected e.g. http://127.0.0.1:4566"
        )
    try:
        _ = parts.port  # urlsplit checks the port only when it is read
    except ValueError:
        raise ConfigurationError(f"{option} {url!r} has an invalid port") from None
    return url


def _reject_secrets_in_url(url: str, option: str) -> None:
    parts = urlsplit(url)
    if "@" not in parts.netloc and not parts.query and not parts.fragment:
        return
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment="").geturl()
    raise ConfigurationError(
        f"{option} must not contain credentials (user:password@), a query or a fragment; use just "
        f"{bare!r}. AWS credentials come from botocore's default chain: AWS_ACCESS_KEY_ID / "
        "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance/container role (any dummy values for an emulator)."
    )
