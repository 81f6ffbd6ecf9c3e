"""Credentials for every client kinesis-src creates: botocore's chain, a profile, an assumed role.

Each process assumes the role itself and botocore renews it before it expires. Nothing here is
pickled, logged or written anywhere."""

from __future__ import annotations

import functools
from typing import Any

import botocore.session
from botocore.credentials import (
    AssumeRoleCredentialFetcher,
    CredentialProvider,
    DeferredRefreshableCredentials,
)

from ..config import CredentialSource
from ..errors import AccessDeniedError, ConfigurationError

ROLE_DURATION_S = 3600
DEFAULT_SESSION_NAME = "kinesis-src"
_METHOD = "kinesis-src-assume-role"


def configure(session: botocore.session.Session, source: CredentialSource, region: str) -> botocore.session.Session:
    """Apply the profile and the role to ``session`` (a new session kinesis-src owns)."""
    _use_profile(session, source)
    if source.role_arn is not None:
        base = _profile_session(botocore.session.Session(), source)
        provider = _RoleProvider(base, source, region)
        session.get_component("credential_provider").insert_before("env", provider)
    return session


def configure_aio(session: Any, source: CredentialSource, region: str) -> Any:
    """:func:`configure` for aiobotocore sessions (imported here: sync clients never import it)."""
    from aiobotocore.session import AioSession

    _use_profile(session, source)
    if source.role_arn is not None:
        base = _profile_session(AioSession(), source)
        provider = _AioRoleProvider(base, source, region)
        session.get_component("credential_provider").insert_before("env", provider)
    return session


def _use_profile(session: botocore.session.Session, source: CredentialSource) -> None:
    if source.profile is None:
        return
    if source.profile not in session.available_profiles:
        raise ConfigurationError(
            f"AWS profile {source.profile!r} is not in the shared config or credentials files "
            "(AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/): check the profile name"
        )
    session.set_config_variable("profile", source.profile)


def _profile_session(session: Any, source: CredentialSource) -> Any:
    """The session whose credentials assume the role: the profile's, or the default chain's."""
    _use_profile(session, source)
    return session


def _assume_args(source: CredentialSource) -> dict[str, Any]:
    args: dict[str, Any] = {
        "RoleSessionName": source.role_session_name or DEFAULT_SESSION_NAME,
        "DurationSeconds": ROLE_DURATION_S,
    }
    if source.role_external_id is not None:
        args["ExternalId"] = source.role_external_id
    return args


def _fetcher_args(base: Any, source: CredentialSource, region: str, credentials: Any) -> dict[str, Any]:
    """What botocore's and aiobotocore's assume-role fetchers both take: STS from ``base``, the role, its args."""
    return {
        "client_creator": functools.partial(base.create_client, region_name=region, endpoint_url=source.sts_endpoint_url),
        "source_credentials": credentials,
        "role_arn": source.role_arn,
        "extra_args": _assume_args(source),
    }


def _no_source(source: CredentialSource) -> AccessDeniedError:
    return AccessDeniedError(
        f"no AWS credentials to assume role {source.role_arn!r} with: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, a profile, or run where an instance/container role is available"
    )


class _RoleProvider(CredentialProvider):
    """The assumed role, renewed by botocore before it expires."""

    METHOD = _METHOD
    CANONICAL_NAME = "kinesis-src-assume-role"

    def __init__(self, base: botocore.session.Session, source: CredentialSource, region: str) -> None:
        super().__init__()
        self._base = base
        self._source = source
        self._region = region

    def load(self) -> DeferredRefreshableCredentials:
        credentials = self._base.get_credentials()
        if credentials is None:
            raise _no_source(self._source)
        fetcher = AssumeRoleCredentialFetcher(**_fetcher_args(self._base, self._source, self._region, credentials))
        return DeferredRefreshableCredentials(refresh_using=fetcher.fetch_credentials, method=self.METHOD)


class _AioRoleProvider(CredentialProvider):  # aiobotocore's resolver awaits load()
    METHOD = _METHOD
    CANONICAL_NAME = "kinesis-src-assume-role"

    def __init__(self, base: Any, source: CredentialSource, region: str) -> None:  # an AioSession
        super().__init__()
        self._base = base
        self._source = source
        self._region = region

    async def load(self) -> Any:  # AioDeferredRefreshableCredentials
        from aiobotocore.credentials import (
            AioAssumeRoleCredentialFetcher,
            AioDeferredRefreshableCredentials,
        )

        credentials = await self._base.get_credentials()
        if credentials is None:
            raise _no_source(self._source)
        fetcher = AioAssumeRoleCredentialFetcher(**_fetcher_args(self._base, self._source, self._region, credentials))
        return AioDeferredRefreshableCredentials(refresh_using=fetcher.fetch_credentials, method=self.METHOD)
