"""Size and shape limits of request bodies at the HTTP edge: the one place every cap lives.

Owns :class:`Limits` (the caps, from the environment), reading a body with the size cap enforced
while it streams in (a 413 before an oversized body is held in memory, from ``content-length``
when the client sends one), parsing JSON off the event loop when the body is large (one thread
per large body, at most :data:`PARALLEL_LARGE_PARSES` at once, so other clients keep being served
and memory stays bounded), and the structural checks that need no schema: nesting depth, string
length, the number of ``input`` items and ``tools``. Every breach is an OpenAI-style 400 (413 for
the size) naming the offending ``param``. It must not validate fields' meaning: that is
:mod:`responses_gateway.protocol.request`.

Request decompression (``Content-Encoding``) must count decoded bytes against the same cap: call
:meth:`Limits.check_body_size` with the running decoded size (it raises the same 413).

Environment (defaults in brackets):

- ``GATEWAY_MAX_BODY_BYTES`` [5 MiB]: request body size. Under Lambda's 6 MB synchronous
  invocation payload, which also carries the event envelope; API Gateway's own cap is 10 MB.
- ``GATEWAY_MAX_INPUT_ITEMS`` [4096]: items in ``input``.
- ``GATEWAY_MAX_TOOLS`` [128]: entries in ``tools``.
- ``GATEWAY_MAX_JSON_DEPTH`` [64]: nesting of arrays and objects.
- ``GATEWAY_MAX_STRING_CHARS`` [10485760]: characters in any one string (OpenAI's cap).
- ``GATEWAY_STREAM_BUFFER_BYTES`` [1 MiB]: SSE bytes a streaming response may hold for a client
  that reads slower than the model writes; past it the loop stops reading the upstream until the
  client catches up (backpressure).
- ``GATEWAY_STREAM_STALL_SECONDS`` [60]: how long a stream may stay blocked on a client that
  reads nothing; then the response is cancelled exactly as if the client had disconnected.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from responses_gateway.errors import InvalidRequestError, PayloadTooLargeError

__all__ = [
    "DEFAULT_LIMITS",
    "LARGE_BODY_BYTES",
    "PARALLEL_LARGE_PARSES",
    "Limits",
    "check_structure",
    "limits_of",
    "load_json",
    "off_loop_if_large",
    "read_body",
    "read_json",
]

LARGE_BODY_BYTES = 256 * 1024
"""Bodies above this size are parsed and checked on a thread, not on the event loop."""
PARALLEL_LARGE_PARSES = 2
"""Large bodies parsed at once per process (the others wait their turn)."""

_INVALID_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
    "your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was "
    "not valid JSON. If you have trouble figuring out how to fix this, please contact us through "
    "our help center at help.openai.com.)"
)
_JSON_RECURSION = "recursion limit exceeded"
"""What the JSON parser says past its own fixed depth (200); reported as too deep."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The caps a request body must fit (see the module docstring for the variables)."""

    max_body_bytes: int = 5 * 1024 * 1024
    max_input_items: int = 4096
    max_tools: int = 128
    max_json_depth: int = 64
    max_string_chars: int = 10_485_760
    stream_buffer_bytes: int = 1024 * 1024
    stream_stall_seconds: int = 60

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        """The limits set by ``GATEWAY_MAX_*`` variables; unset ones keep their defaults.

        Raises:
            ValueError: a variable is not a positive integer.
        """
        env = os.environ if env is None else env
        values: dict[str, int] = {}
        for name, field in _ENV.items():
            raw = (env.get(name) or "").strip()
            if not raw:
                continue
            try:
                value = int(raw)
            except ValueError:
                value = 0
            if value < 1:
                raise ValueError(f"{name} must be a positive integer, got {raw!r}")
            values[field] = value
        return cls(**values)

    def check_body_size(self, size: int) -> None:
        """Raise the 413 when ``size`` bytes (raw or decoded) are over the cap."""
        if size > self.max_body_bytes:
            raise PayloadTooLargeError(
                f"Request body too large: the maximum size is {self.max_body_bytes} bytes.",
                code="request_body_too_large",
            )


_ENV = {
    "GATEWAY_MAX_BODY_BYTES": "max_body_bytes",
    "GATEWAY_MAX_INPUT_ITEMS": "max_input_items",
    "GATEWAY_MAX_TOOLS": "max_tools",
    "GATEWAY_MAX_JSON_DEPTH": "max_json_depth",
    "GATEWAY_MAX_STRING_CHARS": "max_string_chars",
    "GATEWAY_STREAM_BUFFER_BYTES": "stream_buffer_bytes",
    "GATEWAY_STREAM_STALL_SECONDS": "stream_stall_seconds",
}

DEFAULT_LIMITS = Limits()

_LARGE_PARSES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)
"""One semaphore per event loop (tests run several loops in one process)."""


def limits_of(request: Request) -> Limits:
    """The app's limits (``app.state.limits``), or the defaults."""
    limits = getattr(request.app.state, "limits", None)
    return limits if isinstance(limits, Limits) else DEFAULT_LIMITS


async def read_body(request: Request, limits: Limits) -> bytes:
    """The request body, never more than ``limits.max_body_bytes`` of it held, with its
    ``Content-Encoding`` undone (:func:`responses_gateway.api.encoding.decode_body`, under the
    same cap).

    Raises:
        PayloadTooLargeError: ``content-length`` or the bytes received exceed the cap.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        limits.check_body_size(int(declared))
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        limits.check_body_size(len(body))
    encoding = request.headers.get("content-encoding")
    if not encoding:
        return bytes(body)
    from responses_gateway.api.encoding import decode_body

    # the same cap holds for the decoded body: a decompression bomb stops at it (413)
    return await off_loop_if_large(  # type: ignore[no-any-return]
        len(body), decode_body, bytes(body), encoding, limits.max_body_bytes
    )


def _too_long(param: str | None, size: int, limit: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"Invalid '{param or 'body'}': string too long. Expected a string with maximum length "
        f"{limit}, but got a string with length {size} instead.",
        param=param,
        code="string_above_max_length",
    )


def _too_deep(param: str | None, limit: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"Invalid '{param or 'body'}': nested too deeply. Expected at most {limit} levels of "
        "nested arrays and objects.",
        param=param,
        code="json_nesting_too_deep",
    )


def _array_too_long(param: str, size: int, limit: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"Invalid '{param}': array too long. Expected an array with maximum length {limit}, "
        f"but got an array with length {size} instead.",
        param=param,
        code="array_above_max_length",
    )


def _path(parent: str | None, segment: str | int) -> str:
    if isinstance(segment, int):
        return f"{parent or ''}[{segment}]"
    return f"{parent}.{segment}" if parent else segment


def check_structure(value: Any, limits: Limits) -> None:
    """Check nesting depth, string lengths, and the size of top-level ``input`` and ``tools``.

    The walk is iterative (no recursion limit) and visits each value once.

    Raises:
        InvalidRequestError: the first breach found, with its ``param`` path.
    """
    if isinstance(value, dict):
        for name, limit in (("input", limits.max_input_items), ("tools", limits.max_tools)):
            items = value.get(name)
            if isinstance(items, list) and len(items) > limit:
                raise _array_too_long(name, len(items), limit)
    pending: list[tuple[Any, str | None, int]] = [(value, None, 0)]
    while pending:
        node, param, depth = pending.pop()
        if isinstance(node, str):
            if len(node) > limits.max_string_chars:
                raise _too_long(param, len(node), limits.max_string_chars)
            continue
        if isinstance(node, dict):
            children: Any = node.items()
        elif isinstance(node, list):
            children = enumerate(node)
        else:
            continue
        if depth >= limits.max_json_depth:
            raise _too_deep(param, limits.max_json_depth)
        for segment, child in children:
            if isinstance(child, dict | list | str):
                pending.append((child, _path(param, segment), depth + 1))


def load_json(body: bytes, limits: Limits) -> Any:
    """Parse ``body`` and check its structure (synchronous: large bodies go to a thread).

    Raises:
        InvalidRequestError: not JSON (OpenAI's ``invalid_json``), or a structural breach.
    """
    from pydantic_core import from_json  # imported on the first body (the buffered function's
    # reads have none; the functions serving creates have it from pydantic at init)

    try:
        value = from_json(body)
    except ValueError as exc:
        if _JSON_RECURSION in str(exc):
            raise _too_deep(None, limits.max_json_depth) from None
        raise InvalidRequestError(_INVALID_JSON, code="invalid_json") from None
    check_structure(value, limits)
    return value


async def off_loop_if_large(size: int, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` inline for a small body, else on a thread (bounded parallelism)."""
    if size <= LARGE_BODY_BYTES:
        return fn(*args)
    loop = asyncio.get_running_loop()
    gate = _LARGE_PARSES.get(loop)
    if gate is None:
        gate = _LARGE_PARSES[loop] = asyncio.Semaphore(PARALLEL_LARGE_PARSES)
    async with gate:
        return await asyncio.to_thread(fn, *args)


async def read_json(request: Request, *, allow_empty: bool = False) -> tuple[Any, int]:
    """The body as checked JSON and its size in bytes; an empty body is ``None`` when
    ``allow_empty``, else OpenAI's ``invalid_json`` 400."""
    limits = limits_of(request)
    body = await read_body(request, limits)
    if not body.strip():
        if allow_empty:
            return None, len(body)
        raise InvalidRequestError(_INVALID_JSON, code="invalid_json")
    return await off_loop_if_large(len(body), load_json, body, limits), len(body)
