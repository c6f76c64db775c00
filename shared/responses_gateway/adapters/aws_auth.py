"""AWS Signature Version 4 for model calls: an ``httpx.Auth`` signing each request as botocore does.

Owns :class:`SigV4`, which signs a request for one region and service (``bedrock`` for Bedrock's
runtime and its OpenAI-compatible endpoints) with the runtime's own credentials: the standard
chain of :func:`responses_gateway.store._credentials.credential_source` (the environment, which is
the function's role on Lambda; then botocore's chain for profiles, SSO, container and instance
roles, resolved off the event loop and refreshed before expiry), so no key is ever configured. The
signature itself is the DynamoDB client's (:class:`responses_gateway.store._sigv4.Signer`); this
module adds what a REST request needs on top: the canonical URI (the path percent-encoded once
more, as botocore does for every service but S3) and the canonical query string. Only ``host``,
``content-type`` and the ``x-amz-*`` headers are signed, so a proxy adding headers cannot break
the signature. botocore is imported only when the environment holds no credentials.

It never logs, echoes or ``repr``\\ s a secret, and sends nothing itself.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, Callable, Generator
from urllib.parse import quote

import httpx

from responses_gateway.errors import UpstreamError
from responses_gateway.store._credentials import (
    CredentialSource,
    NoCredentialsError,
    credential_source,
    is_loopback,
)
from responses_gateway.store._sigv4 import Signer, amz_date, payload_hash

__all__ = ["SIGNED_HEADERS", "SigV4", "canonical_query", "canonical_uri"]

SIGNED_HEADERS = ("host", "content-type")
"""Headers signed besides the ``x-amz-*`` ones the signer adds."""


def canonical_uri(raw_path: str) -> str:
    """The canonical URI of an already-encoded request path (botocore: ``quote(path, '/~')``)."""
    return quote(raw_path or "/", safe="/~")


def canonical_query(raw_query: str) -> str:
    """The canonical query string: each ``name=value`` encoded, sorted."""
    if not raw_query:
        return ""
    pairs = []
    for part in raw_query.split("&"):
        name, _, value = part.partition("=")
        pairs.append((quote(name, safe="-_.~"), quote(value, safe="-_.~")))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


class SigV4(httpx.Auth):
    """Signs each request with SigV4 for ``region`` and ``service``.

    Args:
        region: the signing region (the endpoint's region).
        service: the signing name (``bedrock`` for ``bedrock-runtime``).
        source: where credentials come from (default: the standard chain, chosen on first use
            from the environment and whether the endpoint is this machine).
        clock: Unix seconds (tests pin it).
    """

    requires_request_body = True

    def __init__(
        self,
        region: str,
        service: str = "bedrock",
        source: CredentialSource | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.region = region
        self.service = service
        self._source = source
        self._clock = clock
        self._signer = Signer(region, service)

    def __repr__(self) -> str:
        return f"SigV4(region={self.region!r}, service={self.service!r})"

    def _credentials(self, host: str) -> CredentialSource:
        if self._source is None:
            self._source = credential_source(os.environ, loopback=is_loopback(host))
        return self._source

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        raise RuntimeError("SigV4 signs requests of an async client only")

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        await self.sign(request)
        yield request

    async def sign(self, request: httpx.Request) -> None:
        """Add ``X-Amz-Date``, ``X-Amz-Security-Token`` and ``Authorization`` to ``request``.

        Raises:
            UpstreamError: the runtime has no AWS credentials (a 502: the deployment's fault).
        """
        try:
            credentials = await self._credentials(request.url.host).get()
        except NoCredentialsError:
            raise UpstreamError(
                "No AWS credentials were found to sign the model call with (environment, "
                "profile, container or instance role)."
            ) from None
        path, _, query = request.url.raw_path.decode("ascii").partition("?")
        headers = {"host": request.headers.get("host") or request.url.netloc.decode("ascii")}
        if "content-type" in request.headers:
            headers["content-type"] = request.headers["content-type"]
        signed = self._signer.sign(
            method=request.method,
            path=canonical_uri(path),
            query=canonical_query(query),
            headers=headers,
            body_hash=payload_hash(request.content),
            credentials=credentials,
            timestamp=amz_date(self._clock()),
        )
        for name in ("X-Amz-Date", "X-Amz-Security-Token", "Authorization"):
            if name in signed:
                request.headers[name] = signed[name]
