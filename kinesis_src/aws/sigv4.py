"""AWS Signature Version 4 for one kind of request: a JSON-protocol POST to ``/``.

Cheaper than botocore's signer for every GetRecords (docs/performance.md, "GetRecords per call");
tests/unit/test_sigv4.py holds it equal to botocore's ``SigV4Auth``."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime, timezone

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True)
class Keys:
    """One set of frozen credentials (botocore's ``get_frozen_credentials()`` gives them)."""

    access_key: str
    secret_key: str
    token: str | None = None


class JsonPostSigner:
    """Signs JSON POSTs to ``/`` of one host, region and service; keeps the day's signing key."""

    def __init__(self, host: str, region: str, service: str, content_type: str) -> None:
        self.host = host
        self.region = region
        self.service = service
        self.content_type = content_type
        self._derived: tuple[str, str, bytes] | None = None  # (secret, day, key)

    def headers(self, keys: Keys, target: str, body: bytes, now: datetime | None = None) -> dict[str, str]:
        """The request's headers, ``Authorization`` included, for ``X-Amz-Target: target``."""
        stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
        headers = {"content-type": self.content_type, "host": self.host, "x-amz-date": stamp,
                   "x-amz-target": target}
        if keys.token:
            headers["x-amz-security-token"] = keys.token
        names = sorted(headers)
        signed = ";".join(names)
        canonical = "\n".join(
            ("POST", "/", "", *(f"{name}:{headers[name]}" for name in names), "", signed,
             hashlib.sha256(body).hexdigest())
        )
        scope = f"{stamp[:8]}/{self.region}/{self.service}/aws4_request"
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(self._key(keys.secret_key, stamp[:8]), to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"{ALGORITHM} Credential={keys.access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
        )
        return headers

    def _key(self, secret: str, day: str) -> bytes:
        derived = self._derived
        if derived is None or derived[0] != secret or derived[1] != day:
            key = ("AWS4" + secret).encode()
            for part in (day, self.region, self.service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            derived = self._derived = (secret, day, key)
        return derived[2]
