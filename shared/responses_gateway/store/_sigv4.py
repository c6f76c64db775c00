"""AWS Signature Version 4 for the DynamoDB client's requests (pure Python: ``hmac``, ``hashlib``).

Owns the canonical request, the string to sign, the signing key and the ``Authorization`` header,
as botocore's ``SigV4Auth`` computes them for a JSON-protocol ``POST`` (every header given is
signed; the payload is always hashed). The signing key is derived once per day, region, service
and secret and kept on the :class:`Signer` (never at module level). It must not send anything,
and it never logs or returns a secret: only the signature and the access key id leave it, as in
any signed request.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ALGORITHM", "Credentials", "Signer", "amz_date", "payload_hash"]

ALGORITHM = "AWS4-HMAC-SHA256"


@dataclass(frozen=True, slots=True)
class Credentials:
    """One set of AWS credentials; its ``repr`` shows the access key id only."""

    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:
        return f"Credentials(access_key={self.access_key!r}, secret_key=<hidden>, token=<hidden>)"


def amz_date(seconds: float) -> str:
    """``YYYYMMDDTHHMMSSZ`` (UTC) for a Unix time."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(seconds))


def payload_hash(body: bytes) -> str:
    """The hex SHA-256 of a request body (hashed once per call, reused by every attempt)."""
    return hashlib.sha256(body).hexdigest()


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


class Signer:
    """Signs requests for one region and service."""

    def __init__(self, region: str, service: str = "dynamodb") -> None:
        self.region = region
        self.service = service
        self._key: tuple[str, str, bytes] | None = None
        """(secret, day, signing key) of the last signature."""

    def _signing_key(self, secret: str, day: str) -> bytes:
        cached = self._key
        if cached is not None and cached[0] == secret and cached[1] == day:
            return cached[2]
        key = _hmac(f"AWS4{secret}".encode(), day)
        for part in (self.region, self.service, "aws4_request"):
            key = _hmac(key, part)
        self._key = (secret, day, key)
        return key

    def sign(
        self,
        *,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body_hash: str,
        credentials: Credentials,
        timestamp: str,
        query: str = "",
    ) -> dict[str, str]:
        """The headers to send: ``headers`` (which must include ``host``) plus ``X-Amz-Date``,
        ``X-Amz-Security-Token`` (temporary credentials) and ``Authorization``.

        ``path`` is the request's canonical URI (``/`` for DynamoDB) and ``query`` its canonical
        query string (none for DynamoDB).
        """
        signed = {name.lower(): " ".join(value.split()) for name, value in headers.items()}
        signed["x-amz-date"] = timestamp
        if credentials.token:
            signed["x-amz-security-token"] = credentials.token
        names = sorted(signed)
        signed_names = ";".join(names)
        canonical = "\n".join(
            [
                method.upper(),
                path,
                query,
                "".join(f"{name}:{signed[name]}\n" for name in names),
                signed_names,
                body_hash,
            ]
        )
        day = timestamp[:8]
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        string_to_sign = "\n".join(
            [ALGORITHM, timestamp, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        signature = hmac.new(
            self._signing_key(credentials.secret_key, day), string_to_sign.encode(), hashlib.sha256
        ).hexdigest()
        out = dict(headers)
        out["X-Amz-Date"] = timestamp
        if credentials.token:
            out["X-Amz-Security-Token"] = credentials.token
        out["Authorization"] = (
            f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
            f"SignedHeaders={signed_names}, Signature={signature}"
        )
        return out
