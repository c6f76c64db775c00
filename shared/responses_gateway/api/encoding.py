"""Compressed request bodies: ``Content-Encoding: gzip`` / ``deflate`` / ``zstd``.

Owns reading a request body and undoing its content codings (in the reverse order they were
applied), with a cap on the decoded size: a body that would decode past
:data:`MAX_DECODED_BYTES` (``GATEWAY_MAX_BODY_BYTES``) is a 413 envelope as soon as the cap is
crossed (a decompression bomb costs the cap, never a stall or the memory it asks for); a coding
we do not know is a 415 envelope; a body that does not decode is a 400. zstd uses the standard
library's ``compression.zstd`` (Python 3.14+) or its backport ``backports.zstd`` (the ``zstd``
extra), imported only for zstd bodies; where neither is installed (the default Lambda build, to
stay within its size budget: ``ZSTD=1 sam build`` adds it), zstd is a 415 too. It knows nothing
about what the body means.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import zlib
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from responses_gateway.errors import InvalidRequestError

__all__ = [
    "MAX_DECODED_BYTES",
    "BodyTooLargeError",
    "UnsupportedEncodingError",
    "decode_body",
    "read_body",
]

MAX_DECODED_BYTES = int(os.environ.get("GATEWAY_MAX_BODY_BYTES") or 64 * 1024 * 1024)
"""The largest decoded request body accepted (default 64 MiB)."""
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


def decode_body(body: bytes, content_encoding: str | None, limit: int = MAX_DECODED_BYTES) -> bytes:
    """``body`` with its content codings undone (last applied, first undone).

    Raises:
        UnsupportedEncodingError: a coding is not gzip, deflate, zstd or identity (415).
        BodyTooLargeError: the decoded body would exceed ``limit`` bytes (413).
        InvalidRequestError: the body is not valid data of its coding (400).
    """
    codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
    for coding in codings:
        if coding != "identity" and coding not in _DECODERS:
            raise UnsupportedEncodingError(coding)
    for coding in reversed(codings):
        if coding != "identity":
            body = _DECODERS[coding](body, limit)
    return body


async def read_body(request: Request) -> bytes:
    """The request's body, decoded per its ``Content-Encoding`` (see :func:`decode_body`)."""
    body = await request.body()
    encoding = request.headers.get("content-encoding")
    if not encoding:
        return body
    if len(body) > _OFF_LOOP_BYTES:
        return await asyncio.to_thread(decode_body, body, encoding)
    return decode_body(body, encoding)
