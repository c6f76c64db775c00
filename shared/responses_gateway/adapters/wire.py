"""Helpers every adapter needs to read an upstream answer safely.

Owns two small rules shared by all wire formats: upstream JSON is decoded so that no lone UTF-16
surrogate (a JSON escape like ``"\\ud83d"`` with no partner) survives into our own output, which
no UTF-8 encoder accepts; and which headers of an upstream HTTP error are passed on to the client
(``retry-after``, so the SDK's backoff honours the provider's). Nothing here parses a wire format.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx

__all__ = ["clean_surrogates", "finish_reading", "loads_json", "passed_headers"]

_TRAILER_WAIT = 0.5
"""Seconds to wait for the end of an upstream body once its terminal event arrived."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def clean_surrogates(value: Any) -> Any:
    """``value`` with every UTF-16 surrogate left in its strings replaced by U+FFFD.

    ``json.loads`` joins escaped surrogate pairs into one character, so any surrogate still in a
    decoded string is a lone one, which no UTF-8 encoder accepts.
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [clean_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {clean_surrogates(k): clean_surrogates(v) for k, v in value.items()}
    return value


def loads_json(text: str) -> Any:
    """Upstream JSON, decoded with lone surrogates replaced (see :func:`clean_surrogates`)."""
    value = json.loads(text)
    if _ESCAPED_SURROGATE.search(text) or _SURROGATE.search(text):
        return clean_surrogates(value)
    return value


_PASSED = ("retry-after", "retry-after-ms")


def passed_headers(response: httpx.Response) -> dict[str, str]:
    """The headers of an upstream error response that the client should see too."""
    return {name: response.headers[name] for name in _PASSED if name in response.headers}


async def finish_reading(events: AsyncIterator[Any]) -> None:
    """Read an upstream stream to its end after the terminal event, briefly.

    The body usually ends right after its terminal event (the chunked-encoding trailer is still
    in flight). Reading it lets the HTTP client put the connection back in its pool instead of
    closing it, which saves a TCP (and TLS) handshake on the next model call. An upstream that
    keeps the body open is given up on after a short wait; nothing it sends is used.
    """
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_TRAILER_WAIT):
            async for _ in events:
                pass
