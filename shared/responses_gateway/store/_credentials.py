"""Where the DynamoDB client's credentials come from.

Owns the sources and their order (:func:`credential_source`), which finds what botocore's chain
would find for the gateway's deployments, without importing botocore on the common paths:

1. credentials given explicitly (tests, the embedded endpoint's dummy ones);
2. ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` in the environment
   (what Lambda sets), read once, as botocore's environment provider does;
3. otherwise botocore's own chain (profiles, SSO, assume-role, container and instance roles),
   imported and resolved off the event loop on the first call; temporary credentials are
   refreshed off the loop when they near expiry (botocore's advisory window). For a loopback
   endpoint (moto, DynamoDB Local) where the chain finds nothing, the dummy ``local`` ones
   ``table.make_client`` uses too.

It must not log, echo or ``repr`` a secret, and never blocks the loop on the chain's file or
network reads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from responses_gateway.store._sigv4 import Credentials

__all__ = [
    "LOCAL_CREDENTIALS",
    "BotocoreCredentials",
    "CredentialSource",
    "NoCredentialsError",
    "StaticCredentials",
    "credential_source",
    "is_loopback",
]

LOCAL_CREDENTIALS = Credentials("local", "local")
"""The dummy credentials of a loopback endpoint when none are configured (as ``make_client``)."""

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class NoCredentialsError(Exception):
    """No credentials were found for a non-loopback endpoint (botocore's error of that name)."""


class CredentialSource(Protocol):
    async def get(self) -> Credentials:
        """The credentials to sign the next request with."""
        ...


class StaticCredentials:
    """Credentials that never change (explicit ones, or the environment's)."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    async def get(self) -> Credentials:
        return self._credentials


def _botocore_chain() -> Any:
    import botocore.session  # type: ignore[import-untyped]  # lazily: off the request path

    return botocore.session.get_session().get_credentials()


_UNRESOLVED: Any = object()


class BotocoreCredentials:
    """botocore's credential chain, or one botocore credentials object, read off the loop.

    ``resolve`` runs once, on a thread of the running loop's default executor, the first time
    credentials are asked for; it returns a botocore ``Credentials`` (or ``RefreshableCredentials``)
    or None. Refreshable credentials inside their refresh window are refreshed on that executor
    too; otherwise reading them is a lock and an attribute read.
    """

    def __init__(
        self,
        resolve: Callable[[], Any] = _botocore_chain,
        *,
        fallback: Credentials | None = None,
    ) -> None:
        self._resolve = resolve
        self._fallback = fallback
        self._lock = threading.Lock()
        self._source: Any = _UNRESOLVED
        self._last: tuple[Any, Credentials] | None = None

    @classmethod
    def of(cls, credentials: Any) -> BotocoreCredentials:
        """A source reading an already resolved botocore credentials object (or None)."""
        source = cls()
        source._source = credentials
        return source

    def _resolve_once(self) -> Any:
        with self._lock:
            if self._source is _UNRESOLVED:
                self._source = self._resolve()
            return self._source

    async def get(self) -> Credentials:
        source = self._source
        loop = asyncio.get_running_loop()
        if source is _UNRESOLVED:
            source = await loop.run_in_executor(None, self._resolve_once)
        if source is None:
            if self._fallback is not None:
                return self._fallback
            raise NoCredentialsError("Unable to locate credentials")
        refresh_needed = getattr(source, "refresh_needed", None)
        if refresh_needed is not None and refresh_needed():
            frozen = await loop.run_in_executor(None, source.get_frozen_credentials)
        else:
            frozen = source.get_frozen_credentials()
        last = self._last
        if last is not None and last[0] is frozen:
            return last[1]
        converted = Credentials(frozen.access_key, frozen.secret_key, frozen.token or None)
        self._last = (frozen, converted)
        return converted


def is_loopback(host: str) -> bool:
    """Whether an endpoint's host is this machine (where dummy credentials are fine)."""
    return host.strip("[]") in _LOOPBACK_HOSTS


def credential_source(
    env: Mapping[str, str], *, loopback: bool, explicit: tuple[str, str] | None = None
) -> CredentialSource:
    """The source for a client: explicit, then the environment, then botocore's chain (see the
    module docstring). ``AWS_CREDENTIAL_EXPIRATION`` in the environment leaves the environment's
    credentials to botocore, which re-reads them when they expire."""
    if explicit is not None:
        return StaticCredentials(Credentials(explicit[0], explicit[1]))
    key = env.get("AWS_ACCESS_KEY_ID")
    secret = env.get("AWS_SECRET_ACCESS_KEY")
    if key and secret and not env.get("AWS_CREDENTIAL_EXPIRATION"):
        token = env.get("AWS_SESSION_TOKEN") or env.get("AWS_SECURITY_TOKEN") or None
        return StaticCredentials(Credentials(key, secret, token))
    return BotocoreCredentials(fallback=LOCAL_CREDENTIALS if loopback else None)
