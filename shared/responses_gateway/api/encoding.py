"""Compressed request bodies: ``Content-Encoding: gzip`` / ``deflate`` / ``zstd``.

Owns undoing a request body's content codings (in the reverse order they were applied), with a
cap on the decoded size (the body cap of :mod:`responses_gateway.api.limits`, which reads the
body and calls :func:`decode_body`): a body that would decode past it is a 413 envelope as soon
as the cap is crossed (a decompression bomb costs the cap, never a stall or the memory it asks
for); a coding we do not know is a 415 envelope; a body that does not decode is a 400. zstd
uses the standard library's ``compression.zstd`` (Python 3.14+) or its backport
``backports.zstd`` (the ``zstd`` extra), imported only for zstd bodies; where neither is
installed (the default Lambda build, to stay within its size budget: ``ZSTD=1 sam build`` adds
it), zstd is a 415 too. It knows nothing about what the body means.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any

from responses_gateway.errors import InvalidRequestError

__all__ = [
    "BodyTooLargeError",
    "UnsupportedEncodingError",
    "decode_body",
]

_STEP = 1024 * 1024
_OFF_LOOP_BYTES = 256 * 1024
"""Compressed bodies larger than this are decoded on a worker thread."""


class BodyTooLargeError(InvalidRequestError):
    """The decoded body is larger than the gateway accepts (413)."""

    status_code = 413

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"The decompressed request body exceeds the limit of {limit} bytes.",
            code="request_too_large",
        )


class UnsupportedEncodingError(InvalidRequestError):
    """A ``Content-Encoding`` the gateway cannot decode (415)."""

    status_code = 415

    def __init__(self, encoding: str, detail: str = "use gzip, deflate, zstd or identity") -> None:
        super().__init__(
            f"Unsupported Content-Encoding '{encoding}': {detail}.",
            code="unsupported_content_encoding",
        )


def _malformed(encoding: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"The request body is not valid {encoding} data.", code="invalid_content_encoding"
    )


def _zlib(data: bytes, limit: int, wbits: int, encoding: str) -> bytes:
    out = bytearray()
    pending = data
    while pending:
        decoder = zlib.decompressobj(wbits)
        chunk = pending
        try:
            while chunk:
                out += decoder.decompress(chunk, _STEP)
                if len(out) > limit:
                    raise BodyTooLargeError(limit)
                chunk = decoder.unconsumed_tail
            out += decoder.flush()
        except zlib.error:
            raise _malformed(encoding) from None
        if len(out) > limit:
            raise BodyTooLargeError(limit)
        if not decoder.eof:
            raise _malformed(encoding)
        pending = decoder.unused_data  # gzip allows several members back to back
    return bytes(out)


def _gzip(data: bytes, limit: int) -> bytes:
    return _zlib(data, limit, 16 + zlib.MAX_WBITS, "gzip")


def _deflate(data: bytes, limit: int) -> bytes:
    return _zlib(data, limit, zlib.MAX_WBITS, "deflate")


def _zstd_module() -> Any:
    for name in ("compression.zstd", "backports.zstd"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise UnsupportedEncodingError(
        "zstd", "this deployment has no zstd decoder; use gzip or deflate"
    )


def _zstd(data: bytes, limit: int) -> bytes:
    zstd = _zstd_module()
    out = bytearray()
    pending = data
    try:
        while pending:  # one decompressor per frame
            decoder = zstd.ZstdDecompressor()
            chunk = pending
            while True:
                out += decoder.decompress(chunk, max_length=_STEP)
                chunk = b""
                if len(out) > limit:
                    raise BodyTooLargeError(limit)
                if decoder.eof:
                    pending = decoder.unused_data
                    break
                if decoder.needs_input:  # the frame ends before its end: truncated
                    raise _malformed("zstd")
    except zstd.ZstdError:
        raise _malformed("zstd") from None
    return bytes(out)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _gzip,
    "x-gzip": _gzip,
    "deflate": _deflate,
    "zstd": _zstd,
}


def decode_body(body: bytes, content_encoding: str | None, limit: int | None = None) -> bytes:
    """``body`` with its content codings undone (last applied, first undone).

    Raises:
        UnsupportedEncodingError: a coding is not gzip, deflate, zstd or identity (415).
        BodyTooLargeError: the decoded body would exceed ``limit`` bytes (413; default: the
            body cap of :mod:`responses_gateway.api.limits`).
        InvalidRequestError: the body is not valid data of its coding (400).
    """
    if limit is None:
        from responses_gateway.api.limits import DEFAULT_LIMITS

        limit = DEFAULT_LIMITS.max_body_bytes
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    for coding in codings:
        if coding != "identity" and coding not in _DECODERS:
            raise UnsupportedEncodingError(coding)
    for coding in reversed(codings):
        if coding != "identity":
            body = _DECODERS[coding](body, limit)
    return body
