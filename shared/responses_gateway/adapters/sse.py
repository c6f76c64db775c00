"""Incremental Server-Sent Events decoding for upstream streams.

Owns the SSE framing rules (``event:``/``data:`` fields, multi-line data, comments, CR/LF/CRLF line
ends, a final event with no trailing blank line) and nothing else: it yields raw event names and
data strings; adapters parse the JSON. :class:`SSEDecoder` has the ``decode(chunk)`` / ``flush()``
shape of httpx's decoders so it can be tested without any I/O; :func:`aiter_sse` runs it over an
httpx response.

Bounds (an upstream is not trusted to end or to frame sensibly): a partial line is held as a list
of pieces (a line trickled a byte at a time costs linear time), an event or line over
``GATEWAY_MAX_UPSTREAM_EVENT_BYTES`` (default 8 MiB) and a stream over
``GATEWAY_MAX_UPSTREAM_STREAM_BYTES`` (default 64 MiB of text per model call) end the call with
:class:`~responses_gateway.errors.UpstreamProtocolError` (a 502, or ``response.failed`` once
streaming), instead of growing memory without end.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass

import httpx

from responses_gateway.errors import UpstreamProtocolError, UpstreamTransportError

__all__ = [
    "FLOW_GATE",
    "DEFAULT_MAX_EVENT_CHARS",
    "DEFAULT_MAX_STREAM_CHARS",
    "SSEDecoder",
    "ServerSentEvent",
    "aiter_sse",
]

DEFAULT_MAX_EVENT_CHARS = 8 * 1024 * 1024
DEFAULT_MAX_STREAM_CHARS = 64 * 1024 * 1024


FLOW_GATE: ContextVar[Callable[[], Awaitable[None]] | None] = ContextVar("FLOW_GATE", default=None)
"""Awaited before each upstream chunk is read, when set: the consumer of the loop's events
(a streaming response's outbox) blocks here while its client is behind, so a slow reader slows
the upstream read instead of growing a buffer."""


def _cap(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its ``event`` name (``message`` when unnamed) and ``data``."""

    event: str
    data: str


class SSEDecoder:
    """Turns text chunks into :class:`ServerSentEvent` values, holding partial lines."""

    def __init__(self, max_event_chars: int = DEFAULT_MAX_EVENT_CHARS) -> None:
        self._buffer = ""
        self._pieces: list[str] = []
        """Chunks of a line still open, not yet joined to ``_buffer``."""
        self._held = 0
        """Characters of the open line and of the event being built."""
        self._event = ""
        self._data: list[str] = []
        self._pending_cr = False
        self._max = max_event_chars

    def _check(self, size: int) -> None:
        if size > self._max:
            raise UpstreamProtocolError(
                f"The upstream model sent an event larger than {self._max} characters."
            )

    def decode(self, chunk: str) -> list[ServerSentEvent]:
        """Feed a chunk of text; return the events it completed.

        Raises:
            UpstreamProtocolError: a line or event grew past ``max_event_chars``.
        """
        if self._pending_cr and chunk.startswith("\n"):
            chunk = chunk[1:]
        self._pending_cr = chunk.endswith("\r")
        if "\n" not in chunk and "\r" not in chunk:
            self._pieces.append(chunk)
            self._held += len(chunk)
            self._check(self._held)
            return []
        text = "".join([self._buffer, *self._pieces, chunk])
        self._pieces = []
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._buffer = lines.pop()
        self._held = len(self._buffer) + sum(len(d) for d in self._data)
        self._check(self._held)
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: dispatch whatever is pending (a last event may lack its blank line)."""
        events: list[ServerSentEvent] = []
        self._buffer += "".join(self._pieces)
        self._pieces = []
        if self._buffer:
            event = self._line(self._buffer)
            self._buffer = ""
            if event is not None:
                events.append(event)
        event = self._line("")
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not self._data and not self._event:
                return None
            event = ServerSentEvent(self._event or "message", "\n".join(self._data))
            self._event = ""
            self._data = []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._check(sum(len(d) for d in self._data))
        elif name == "event":
            self._event = value
        return None


async def aiter_sse(response: httpx.Response) -> AsyncGenerator[ServerSentEvent, None]:
    """Decode an httpx streaming response into events; a dropped connection raises.

    A clean end of stream flushes the decoder (so a missing final blank line or a missing
    ``[DONE]`` loses nothing); a connection that breaks mid-body raises
    :class:`~responses_gateway.errors.UpstreamTransportError`.
    """
    decoder = SSEDecoder(_cap("GATEWAY_MAX_UPSTREAM_EVENT_BYTES", DEFAULT_MAX_EVENT_CHARS))
    budget = _cap("GATEWAY_MAX_UPSTREAM_STREAM_BYTES", DEFAULT_MAX_STREAM_CHARS)
    gate = FLOW_GATE.get()
    try:
        async for chunk in response.aiter_text():
            if gate is not None:
                await gate()
            budget -= len(chunk)
            if budget < 0:
                raise UpstreamProtocolError(
                    "The upstream model stream exceeded the gateway's size limit."
                )
            for event in decoder.decode(chunk):
                yield event
    except httpx.TransportError as exc:
        raise UpstreamTransportError(
            f"The upstream model connection failed mid-stream: {type(exc).__name__}"
        ) from exc
    for event in decoder.flush():
        yield event
