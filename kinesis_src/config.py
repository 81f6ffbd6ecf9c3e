"""Settings parsed once into frozen values, with the names users type.

``from_env`` reads ``KINESIS_SRC_ENDPOINT_URL`` etc.: one program runs on AWS or an emulator.
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

    Only names travel, never a key: :mod:`kinesis_src.aws.credentials` resolves them per process.
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

    Credentials are deliberately absent: they come from botocore's default chain, optionally
    through a role to assume (``credentials``), so they never reach offsets, logs or errors.
    ``direct_get_records``: the Consumer signs GetRecords itself over aiohttp; False (or
    ``KINESIS_SRC_DIRECT_GET_RECORDS=0``) uses aiobotocore (docs/consumer.md, "Fetching").
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

    Credentials, a query or a fragment are refused first, never redacted, so no message echoes them.
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
