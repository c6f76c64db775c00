"""Who a request acts for: the tenant rule, local API keys and the API Gateway authorizer.

Owns the one rule that names a request's tenant (every stored response and conversation is
scoped by it, so a record created by one tenant is invisible to another):

1. **Behind API Gateway** the tenant is the API key id, ``requestContext.identity.apiKeyId``.
   The request context is read from the Lambda event Mangum keeps in the ASGI scope
   (``scope["aws.event"]``: it comes from Lambda, never from the client), or, under the Lambda Web
   Adapter, from the ``x-amzn-request-context`` header. That header is trusted only when
   ``GATEWAY_TRUST_LAMBDA_CONTEXT=1`` (the template sets it): the adapter overwrites whatever a
   client sent under that name, but a local client could forge it. In that deployed mode a
   request without an API key id is refused (401) instead of falling back to a local tenant.
2. **Locally** (``responses-gateway serve``): with no keys configured everyone is ``local``; with
   ``GATEWAY_API_KEYS`` (or ``GATEWAY_API_KEYS_FILE``) a request must carry
   ``Authorization: Bearer <key>``, compared in constant time, and acts for the key's tenant.

Key entries are ``key:tenant`` (the tenant follows the last ``:``; a bare ``key`` acts for
``local``), separated by commas in ``GATEWAY_API_KEYS`` and by commas or newlines in the file,
where ``#`` starts a comment. Only SHA-256 digests of keys are kept in memory; nothing here logs,
and no key ever appears in an error message or a ``repr``.

Also owns the REQUEST authorizer the template puts in front of the API (:func:`authorize`): it
hands the bearer token to API Gateway as the API key (``usageIdentifierKey``), so the official
``openai`` SDK authenticates with ``api_key=<API Gateway key>`` unchanged, and API Gateway checks
the key against the usage plan. This module must stay importable without FastAPI or boto3 (the
authorizer function loads nothing else) and must not know about routes or the store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from responses_gateway.errors import GatewayError

__all__ = [
    "KEYS_ENV",
    "KEYS_FILE_ENV",
    "LOCAL_TENANT",
    "REQUEST_CONTEXT_HEADER",
    "TRUST_ENV",
    "AuthenticationError",
    "AuthorizerDenied",
    "Identity",
    "KeyRing",
    "TenancyConfigError",
    "TenancyPolicy",
    "api_key_id",
    "authorize",
    "bearer_token",
    "key_id_of",
    "valid_tenant",
    "current_policy",
    "parse_keys",
]

LOCAL_TENANT = "local"
"""The tenant of a gateway that serves without API keys (local runs)."""

TRUST_ENV = "GATEWAY_TRUST_LAMBDA_CONTEXT"
"""Set to ``1`` (only) under the Lambda Web Adapter: trust ``x-amzn-request-context``."""
KEYS_ENV = "GATEWAY_API_KEYS"
"""Local API keys: ``key:tenant`` entries separated by commas."""
KEYS_FILE_ENV = "GATEWAY_API_KEYS_FILE"
"""A file of local API keys: ``key:tenant`` entries, one a line (or comma separated)."""
REQUEST_CONTEXT_HEADER = "x-amzn-request-context"
"""The header the Lambda Web Adapter fills with API Gateway's request context (JSON)."""

_TENANT = re.compile(r"[A-Za-z0-9._@-]{1,128}")
_TRUE = frozenset({"1", "true", "yes", "on"})


class AuthenticationError(GatewayError):
    """The request carries no valid API key (401 ``invalid_api_key``)."""

    status_code = 401
    error_type = "invalid_request_error"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid_api_key")
        self.headers["www-authenticate"] = "Bearer"


class TenancyConfigError(ValueError):
    """``GATEWAY_API_KEYS`` / ``GATEWAY_API_KEYS_FILE`` is malformed (the message never quotes a
    key)."""


_MISSING_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)
_WRONG_KEY = "Incorrect API key provided."
_NO_KEY_ID = "The request did not come through an API key: API Gateway must require one."


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def _key_id(digest: bytes) -> str:
    return "key_" + digest[:8].hex()


def valid_tenant(name: str) -> bool:
    """Whether ``name`` may be a tenant: 1-128 of ``A-Z a-z 0-9 . _ @ -``."""
    return _TENANT.fullmatch(name) is not None


def key_id_of(key: str) -> str:
    """The public id of a local API key (``key_`` + 16 hex digits of its SHA-256): what the
    usage API and the access log show instead of the key."""
    return _key_id(_digest(key))


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a request acts for: its tenant, and the id of the API key it used."""

    tenant: str
    api_key_id: str = ""
    """API Gateway's key id when deployed, :func:`key_id_of` the key locally, empty when the
    gateway serves without keys."""


@dataclass(frozen=True, slots=True)
class KeyRing:
    """Configured local API keys (as SHA-256 digests) and the tenant each one acts for."""

    entries: tuple[tuple[bytes, str], ...] = field(repr=False)

    def __repr__(self) -> str:
        return f"KeyRing({len(self.entries)} keys)"

    def tenant_for(self, key: str) -> str | None:
        """The tenant of ``key``, or None. Every entry is compared, in constant time each, so the
        answer takes the same time whichever key matched (or none)."""
        found = self.lookup(key)
        return found.tenant if found is not None else None

    def lookup(self, key: str) -> Identity | None:
        """The tenant and key id of ``key``, or None (constant time per entry, as
        :meth:`tenant_for`)."""
        presented = _digest(key)
        found: Identity | None = None
        for digest, tenant in self.entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = Identity(tenant, _key_id(digest))
        return found


def parse_keys(text: str, *, source: str = KEYS_ENV, allow_empty: bool = False) -> KeyRing:
    """A :class:`KeyRing` from ``key:tenant`` entries separated by commas or newlines.

    ``allow_empty``: no entry is a ring that refuses every key (a key file whose last key was
    revoked) instead of an error.

    Raises:
        TenancyConfigError: an empty key, a malformed tenant, a key listed twice, or no entry.
    """
    entries: list[tuple[bytes, str]] = []
    seen: set[bytes] = set()
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.split("#", 1)[0] if source != KEYS_ENV else raw_line
        for raw in line.split(","):
            entry = raw.strip()
            if not entry:
                continue
            key, sep, tenant = entry.rpartition(":")
            if not sep:
                key, tenant = entry, LOCAL_TENANT
            key = key.strip()
            tenant = tenant.strip()
            where = f"{source} (line {number})" if source != KEYS_ENV else source
            if not key:
                raise TenancyConfigError(f"{where}: an entry has an empty key")
            if not _TENANT.fullmatch(tenant):
                raise TenancyConfigError(
                    f"{where}: tenant {tenant!r} must be 1-128 of A-Z a-z 0-9 . _ @ -"
                )
            digest = _digest(key)
            if digest in seen:
                raise TenancyConfigError(f"{where}: a key is listed twice")
            seen.add(digest)
            entries.append((digest, tenant))
    if not entries and not allow_empty:
        raise TenancyConfigError(f"{source} is set but lists no key")
    return KeyRing(tuple(entries))


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def api_key_id(request_context: Any) -> str | None:
    """``identity.apiKeyId`` of an API Gateway (REST) request context, if it names one."""
    if not isinstance(request_context, Mapping):
        return None
    identity = request_context.get("identity")
    if not isinstance(identity, Mapping):
        return None
    key_id = identity.get("apiKeyId")
    return key_id if isinstance(key_id, str) and key_id else None


def _header_context(value: str | None) -> Any:
    if not value:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class TenancyPolicy:
    """How this process names tenants (see the module docstring)."""

    keys: KeyRing | None = None
    """Local API keys; None = no keys (everyone is ``local`` outside API Gateway)."""
    trust_lambda_context: bool = False
    """Deployed behind the Lambda Web Adapter: trust ``x-amzn-request-context`` and require an
    API key id."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TenancyPolicy:
        """The policy ``GATEWAY_TRUST_LAMBDA_CONTEXT``, ``GATEWAY_API_KEYS`` and
        ``GATEWAY_API_KEYS_FILE`` describe.

        Raises:
            TenancyConfigError: malformed keys, both key sources set, or an unreadable file.
        """
        env = os.environ if env is None else env
        inline = env.get(KEYS_ENV, "").strip()
        path = env.get(KEYS_FILE_ENV, "").strip()
        if inline and path:
            raise TenancyConfigError(f"set {KEYS_ENV} or {KEYS_FILE_ENV}, not both")
        keys: KeyRing | None = None
        if inline:
            keys = parse_keys(inline)
        elif path:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise TenancyConfigError(
                    f"cannot read {KEYS_FILE_ENV} {path}: {exc.strerror}"
                ) from None
            keys = parse_keys(text, source=f"{KEYS_FILE_ENV} {path}", allow_empty=True)
        trust = env.get(TRUST_ENV, "").strip().lower() in _TRUE
        return cls(keys=keys, trust_lambda_context=trust)

    def resolve(self, *, event: Any = None, headers: Mapping[str, str]) -> str:
        """The tenant of a request (:meth:`identify`'s tenant).

        Raises:
            AuthenticationError: no usable API key.
        """
        return self.identify(event=event, headers=headers).tenant

    def identify(self, *, event: Any = None, headers: Mapping[str, str]) -> Identity:
        """The tenant and API key id of a request.

        Args:
            event: the Lambda event (Mangum's ``scope["aws.event"]``), or None outside Mangum.
            headers: the request headers (lower-case names, as Starlette's ``Headers`` give them).

        Raises:
            AuthenticationError: no usable API key.
        """
        context: Any = None
        if isinstance(event, Mapping):
            context = event.get("requestContext")
        elif self.trust_lambda_context:
            context = _header_context(headers.get(REQUEST_CONTEXT_HEADER))
        key_id = api_key_id(context)
        if key_id is not None:
            return Identity(key_id, key_id)
        if self.trust_lambda_context:
            raise AuthenticationError(_NO_KEY_ID)
        if self.keys is None:
            return Identity(LOCAL_TENANT)
        token = bearer_token(headers.get("authorization"))
        if token is None:
            raise AuthenticationError(_MISSING_KEY)
        found = self.keys.lookup(token)
        if found is None:
            raise AuthenticationError(_WRONG_KEY)
        return found


_cached: tuple[tuple[str, ...], TenancyPolicy] | None = None


def _file_marker(path: str) -> str:
    try:
        info = os.stat(path.strip())
    except OSError:
        return "missing"
    return f"{info.st_mtime_ns}:{info.st_size}:{info.st_ino}"


def current_policy(env: Mapping[str, str] | None = None) -> TenancyPolicy:
    """The process's policy from the environment, rebuilt only when the variables change or
    the keys file changes (one ``stat`` per call: a key revoked in the file stops working on
    the next request).

    Raises:
        TenancyConfigError: as :meth:`TenancyPolicy.from_env`.
    """
    global _cached
    env = os.environ if env is None else env
    path = env.get(KEYS_FILE_ENV, "")
    marker = (
        env.get(TRUST_ENV, ""),
        env.get(KEYS_ENV, ""),
        path,
        _file_marker(path) if path.strip() else "",
    )
    cached = _cached
    if cached is not None and cached[0] == marker:
        return cached[1]
    policy = TenancyPolicy.from_env(env)
    _cached = (marker, policy)
    return policy


# -- the API Gateway REQUEST authorizer ------------------------------------------------------


class AuthorizerDenied(Exception):
    """Raised by :func:`authorize`; Lambda reports its message, ``Unauthorized``, and API Gateway
    answers 401 (the ``UNAUTHORIZED`` gateway response)."""

    def __init__(self) -> None:
        super().__init__("Unauthorized")


def _header(headers: Any, name: str) -> str | None:
    if not isinstance(headers, Mapping):
        return None
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == name and isinstance(value, str):
            return value
    return None


def _api_resource(method_arn: str) -> str:
    # arn:aws:execute-api:region:account:api-id/stage/VERB/path -> .../api-id/stage/*
    prefix, _, path = method_arn.partition("/")
    stage = path.split("/", 1)[0]
    if not prefix or not stage:
        raise AuthorizerDenied()
    return f"{prefix}/{stage}/*"


def authorize(event: Mapping[str, Any]) -> dict[str, Any]:
    """Answer an API Gateway REQUEST authorizer event: allow the whole stage and name the bearer
    token as the request's API key. API Gateway then rejects keys it does not know (403), applies
    the key's usage plan and puts the key's id in ``requestContext.identity.apiKeyId``.

    The policy covers every method of the stage so one cached answer serves all routes.

    Raises:
        AuthorizerDenied: no ``Authorization: Bearer`` header (API Gateway answers 401).
    """
    token = bearer_token(_header(event.get("headers"), "authorization"))
    method_arn = event.get("methodArn")
    if token is None or not isinstance(method_arn, str):
        raise AuthorizerDenied()
    return {
        "principalId": "api-key",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow",
                    "Resource": _api_resource(method_arn),
                }
            ],
        },
        "usageIdentifierKey": token,
    }
