"""LocalStack's dummy credentials, for tests that start or probe a LocalStack of their own.

LocalStack derives the account from the access key: ``test`` is account
000000000000, the one the launcher's readiness probe signs for.
"""

from __future__ import annotations

import pytest

LOCALSTACK_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                  "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}


def use_localstack_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put LocalStack's dummy key and region in the environment, without a session token or profile to mix in."""
    for key, value in LOCALSTACK_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
