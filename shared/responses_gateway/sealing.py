"""Sealed blobs: state the gateway hands to a client and must get back untouched.

Owns the one way the gateway makes an opaque string out of its own data (a reasoning item's
``encrypted_content``, a compaction item's ``encrypted_content``...) and opens it again:
AES-256-GCM with the *purpose* (what the blob is for) and the *tenant* bound as associated data,
so a blob made for one purpose or one tenant never opens as another, and any change to it is
detected. Each blob names the key that sealed it (``kid``), so several keys can be configured: the
first seals, all open, and a rotated-out key keeps old blobs readable until it is removed.

Blob layout (ASCII, URL-safe): ``rgw1.<kid>.<base64url(nonce[12] || ciphertext || tag[16])>``;
the plaintext is the payload as compact JSON.

Keys, read once (first use, or :func:`configure` at startup), first match wins:

- ``GATEWAY_SEALING_KEYS``: ``kid:base64key,kid2:base64key`` (each key 32 bytes, standard or
  URL-safe base64; ``kid`` is 1-32 of ``[A-Za-z0-9_-]``);
- ``GATEWAY_SEALING_KEYS_FILE``: a file holding the same text (commas or newlines);
- ``GATEWAY_SEALING_KEYS_PARAMETER`` (SSM SecureString) or ``GATEWAY_SEALING_KEYS_SECRET``
  (Secrets Manager), read through Powertools Parameters: the same text, or a JSON object with
  ``keys`` (the same text) or with ``kid`` + ``secret`` (any string of 32+ characters, such as
  the one the SAM template generates; the key is HKDF-SHA256 of it);
- nothing: a random key for this process only, logged once as *ephemeral* (blobs then do not
  survive a restart and do not open in another process). Fine locally, where the default store
  is in-process too; a deployment must configure keys (the SAM template does).

Must not: log or echo a key or a payload, or decide what goes into a payload (callers do).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from responses_gateway.errors import InvalidRequestError

__all__ = [
    "KEYS_ENV",
    "KEYS_FILE_ENV",
    "KEYS_PARAMETER_ENV",
    "KEYS_SECRET_ENV",
    "Keyring",
    "SealedBlobError",
    "SealingConfigError",
    "configure",
    "keyring_from_env",
    "looks_sealed",
    "parse_keys",
    "seal",
    "unseal",
]

KEYS_ENV = "GATEWAY_SEALING_KEYS"
KEYS_FILE_ENV = "GATEWAY_SEALING_KEYS_FILE"
KEYS_PARAMETER_ENV = "GATEWAY_SEALING_KEYS_PARAMETER"
KEYS_SECRET_ENV = "GATEWAY_SEALING_KEYS_SECRET"

_VERSION = "rgw1"
_NONCE_BYTES = 12
_TAG_BYTES = 16
_KEY_BYTES = 32
_KID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_AAD_PREFIX = b"responses-gateway/sealed/v1\x00"
_HKDF_INFO = b"responses-gateway sealing key v1"

logger = logging.getLogger(__name__)


class SealedBlobError(InvalidRequestError):
    """A sealed blob that does not open: forged, altered, made for another tenant or purpose, or
    sealed with a key this gateway no longer has. HTTP 400 ``invalid_encrypted_content``; the
    caller sets ``param`` (e.g. ``input[3].encrypted_content``) where it knows it."""

    def __init__(self, message: str = "", *, param: str | None = None) -> None:
        super().__init__(
            message or "The encrypted content could not be verified or decrypted.",
            code="invalid_encrypted_content",
            param=param,
        )


class SealingConfigError(ValueError):
    """The sealing keys are misconfigured (raised at startup or first use; names no key)."""


@dataclass(frozen=True, slots=True)
class Keyring:
    """The configured keys, in order: the first seals, every one opens."""

    keys: tuple[tuple[str, bytes], ...] = field(repr=False)
    ephemeral: bool = False
    """True when no key was configured and a random per-process key is in use."""

    def __post_init__(self) -> None:
        if not self.keys:
            raise SealingConfigError("a keyring needs at least one key")

    @property
    def kids(self) -> tuple[str, ...]:
        return tuple(kid for kid, _ in self.keys)

    def __repr__(self) -> str:
        return f"Keyring(kids={self.kids!r}, ephemeral={self.ephemeral})"


def _decode_key(kid: str, material: str) -> bytes:
    text = material.strip()
    padded = text + "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise SealingConfigError(f"sealing key {kid!r} is not valid base64") from None
    if len(raw) != _KEY_BYTES:
        raise SealingConfigError(f"sealing key {kid!r} must be {_KEY_BYTES} bytes (AES-256)")
    return raw


def parse_keys(text: str) -> Keyring:
    """A keyring from ``kid:base64key`` entries separated by commas or newlines.

    Raises:
        SealingConfigError: an entry is malformed, a key is not 32 bytes, or a kid repeats.
    """
    keys: list[tuple[str, bytes]] = []
    for entry in re.split(r"[,\n]", text):
        entry = entry.strip()
        if not entry:
            continue
        kid, sep, material = entry.partition(":")
        kid = kid.strip()
        if not sep or not _KID.fullmatch(kid):
            raise SealingConfigError(
                "sealing keys must be 'kid:base64key' entries (kid: 1-32 of A-Z a-z 0-9 _ -)"
            )
        if any(kid == known for known, _ in keys):
            raise SealingConfigError(f"sealing key id {kid!r} appears twice")
        keys.append((kid, _decode_key(kid, material)))
    if not keys:
        raise SealingConfigError("no sealing key given")
    return Keyring(tuple(keys))


def _derived(kid: str, secret: str) -> Keyring:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    if not _KID.fullmatch(kid):
        raise SealingConfigError("the sealing secret's kid is malformed")
    if len(secret) < 32:
        raise SealingConfigError("the sealing secret must be at least 32 characters")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=_KEY_BYTES, salt=None, info=_HKDF_INFO)
    return Keyring(((kid, hkdf.derive(secret.encode("utf-8"))),))


def _from_stored(value: Any, where: str) -> Keyring:
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str) or not value.strip():
        raise SealingConfigError(f"{where} holds no sealing keys")
    text = value.strip()
    if not text.startswith("{"):
        return parse_keys(text)
    try:
        document = json.loads(text)
    except ValueError:
        raise SealingConfigError(f"{where} is not valid JSON") from None
    if isinstance(document, dict) and isinstance(document.get("keys"), str):
        return parse_keys(document["keys"])
    if (
        isinstance(document, dict)
        and isinstance(document.get("kid"), str)
        and isinstance(document.get("secret"), str)
    ):
        return _derived(document["kid"], document["secret"])
    raise SealingConfigError(f"{where} must hold 'keys', or 'kid' and 'secret'")


def _from_aws(parameter: str, secret: str) -> Keyring:
    if parameter and secret:
        raise SealingConfigError(f"set {KEYS_PARAMETER_ENV} or {KEYS_SECRET_ENV}, not both")
    where = f"SSM parameter {parameter}" if parameter else f"secret {secret}"
    from responses_gateway.aws_values import read_value

    try:
        value: Any = (
            read_value("parameter", parameter) if parameter else read_value("secret", secret)
        )
    except ImportError as exc:
        raise SealingConfigError("reading the sealing keys needs aws-lambda-powertools") from exc
    except Exception as exc:
        raise SealingConfigError(
            f"cannot read the sealing keys from {where}: {type(exc).__name__}"
        ) from None
    return _from_stored(value, where)


def keyring_from_env(env: Mapping[str, str]) -> Keyring:
    """The keyring ``env`` configures (see the module docstring), or a fresh ephemeral one.

    Raises:
        SealingConfigError: a configured source is unreadable or malformed.
    """
    if env.get(KEYS_ENV, "").strip():
        return parse_keys(env[KEYS_ENV])
    path = env.get(KEYS_FILE_ENV, "").strip()
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SealingConfigError(f"cannot read {KEYS_FILE_ENV}: {exc.strerror}") from None
        return parse_keys(text)
    parameter = env.get(KEYS_PARAMETER_ENV, "").strip()
    secret = env.get(KEYS_SECRET_ENV, "").strip()
    if parameter or secret:
        return _from_aws(parameter, secret)
    logger.warning(
        "no sealing keys configured (%s): using an ephemeral per-process key; encrypted_content "
        "the gateway hands out will not open after a restart or in another process",
        KEYS_ENV,
    )
    return Keyring((("ephemeral", secrets.token_bytes(_KEY_BYTES)),), ephemeral=True)


_lock = threading.Lock()
_keyring: Keyring | None = None


def configure(keyring: Keyring | Mapping[str, str] | None = None) -> Keyring:
    """Install the process's keyring: a :class:`Keyring`, or one read from an environment
    mapping (default ``os.environ``). Called at startup to fail fast; tests use it to swap keys.

    Raises:
        SealingConfigError: the configured keys are unreadable or malformed.
    """
    global _keyring
    ring = keyring if isinstance(keyring, Keyring) else keyring_from_env(keyring or os.environ)
    with _lock:
        _keyring = ring
    return ring


def _current() -> Keyring:
    ring = _keyring
    if ring is not None:
        return ring
    with _lock:
        if _keyring is None:
            return _install_from_environ()
        return _keyring


def _install_from_environ() -> Keyring:
    global _keyring
    ring = keyring_from_env(os.environ)
    _keyring = ring
    return ring


def _aad(purpose: str, tenant: str, kid: str) -> bytes:
    return b"\x00".join(
        (_AAD_PREFIX, purpose.encode("utf-8"), tenant.encode("utf-8"), kid.encode("ascii"))
    )


def looks_sealed(blob: object) -> bool:
    """Whether ``blob`` has the shape of a sealed blob (says nothing about whether it opens)."""
    return isinstance(blob, str) and blob.startswith(_VERSION + ".")


def seal(purpose: str, payload: Mapping[str, Any], *, tenant: str) -> str:
    """An opaque, authenticated, encrypted string holding ``payload`` (JSON-serialisable), which
    only :func:`unseal` with the same ``purpose`` and ``tenant`` opens."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    kid, key = _current().keys[0]
    nonce = secrets.token_bytes(_NONCE_BYTES)
    plaintext = json.dumps(dict(payload), separators=(",", ":"), ensure_ascii=False)
    sealed = AESGCM(key).encrypt(nonce, plaintext.encode("utf-8"), _aad(purpose, tenant, kid))
    body = base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode("ascii")
    return f"{_VERSION}.{kid}.{body}"


def unseal(purpose: str, blob: str, *, tenant: str) -> dict[str, Any]:
    """The payload :func:`seal` put in ``blob``.

    Raises:
        SealedBlobError: ``blob`` is not one of ours, was altered, was sealed for another purpose
            or tenant, or names a key this gateway does not have.
    """
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not isinstance(blob, str):
        raise SealedBlobError()
    version, _, rest = blob.partition(".")
    kid, _, body = rest.partition(".")
    if version != _VERSION or not _KID.fullmatch(kid) or not body:
        raise SealedBlobError()
    key = dict(_current().keys).get(kid)
    if key is None:
        raise SealedBlobError()
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise SealedBlobError() from None
    if len(raw) < _NONCE_BYTES + _TAG_BYTES:
        raise SealedBlobError()
    try:
        plaintext = AESGCM(key).decrypt(
            raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _aad(purpose, tenant, kid)
        )
    except InvalidTag:
        raise SealedBlobError() from None
    try:
        payload = json.loads(plaintext)
    except ValueError:
        raise SealedBlobError() from None
    if not isinstance(payload, dict):
        raise SealedBlobError()
    return payload
