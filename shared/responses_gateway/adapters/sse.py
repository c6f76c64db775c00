"""Incremental Server-Sent Events decoding for upstream streams, on bytes.

Owns the SSE framing rules (``event:``/``data:`` fields, multi-line data, comments, CR/LF/CRLF line
ends, a final event with no trailing blank line) and nothing else: it yields raw event names and
data strings; adapters parse the JSON. :class:`SSEDecoder` has the ``decode(chunk)`` / ``flush()``
shape of httpx's decoders so it can be tested without any I/O; :func:`aiter_sse` runs it over an
httpx response.

Framing works on the bytes as they arrive (line ends are ASCII in every encoding an event stream
may use): an event's data is decoded to text once, when the event is dispatched, with the
response's charset (UTF-8 unless it names another; undecodable bytes become U+FFFD, as httpx's
text decoding does). The body is read with ``aiter_raw`` when it has no ``Content-Encoding`` (no
decoder and no text layer between the socket and the framing), else with ``aiter_bytes``.

Bounds (an upstream is not trusted to end or to frame sensibly): a partial line is held as a list
of pieces (a line trickled a byte at a time costs linear time), an event or line over
``GATEWAY_MAX_UPSTREAM_EVENT_BYTES`` (default 8 MiB) and a stream over
``GATEWAY_MAX_UPSTREAM_STREAM_BYTES`` (default 64 MiB per model call) end the call with
:class:`~responses_gateway.errors.UpstreamProtocolError` (a 502, or ``response.failed`` once
streaming), instead of growing memory without end.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
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
    "cause_of",
]

DEFAULT_MAX_EVENT_CHARS = 8 * 1024 * 1024
DEFAULT_MAX_STREAM_CHARS = 64 * 1024 * 1024


FLOW_GATE: ContextVar[Callable[[], Awaitable[None] | None] | None] = ContextVar(
    "FLOW_GATE", default=None
)
"""Called before each upstream chunk is read, when set: None while the consumer of the loop's
events (a streaming response's outbox) keeps up, else an awaitable that blocks while its
client is behind, so a slow reader slows the upstream read instead of growing a buffer."""


def _cap(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its ``event`` name (``message`` when unnamed) and ``data``."""

    event: str
    data: str


class SSEDecoder:
    """Turns byte chunks into :class:`ServerSentEvent` values, holding partial lines.

    Args:
        max_event_chars: the largest line or event held, in bytes (the name predates bytes).
        encoding: how event names and data are decoded to text (undecodable bytes: U+FFFD).

    A ``str`` chunk is taken as its UTF-8 bytes (tests, text sources).
    """

    def __init__(
        self, max_event_chars: int = DEFAULT_MAX_EVENT_CHARS, encoding: str = "utf-8"
    ) -> None:
        self._buffer = b""
        self._pieces: list[bytes] = []
        """Chunks of a line still open, not yet joined to ``_buffer``."""
        self._held = 0
        """Bytes of the open line and of the event being built."""
        self._event = b""
        self._data: list[bytes] = []
        self._data_size = 0
        """Bytes in ``_data``."""
        self._pending_cr = False
        self._max = max_event_chars
        self._encoding = encoding

    def _check(self, size: int) -> None:
        if size > self._max:
            raise UpstreamProtocolError(
                f"The upstream model sent an event larger than {self._max} bytes."
            )

    def decode(self, chunk: bytes | str) -> list[ServerSentEvent]:
        """Feed a chunk; return the events it completed.

        Raises:
            UpstreamProtocolError: a line or event grew past ``max_event_chars``.
        """
        if isinstance(chunk, str):
            chunk = chunk.encode()
        if self._pending_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._pending_cr = chunk[-1:] == b"\r"
        if b"\n" not in chunk and b"\r" not in chunk:
            self._pieces.append(chunk)
            self._held += len(chunk)
            self._check(self._held)
            return []
        if self._buffer or self._pieces:
            chunk = b"".join([self._buffer, *self._pieces, chunk])
            self._pieces = []
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        self._buffer = lines.pop()
        self._held = len(self._buffer) + self._data_size
        self._check(self._held)
        events: list[ServerSentEvent] = []
        for line in lines:
            if not line:
                if self._data or self._event:
                    events.append(self._dispatch())
            elif line.startswith(b"data:"):  # the common fields first, without partition
                value = line[6:] if line[5:6] == b" " else line[5:]
                self._data.append(value)
                self._data_size += len(value)
                if self._data_size > self._max:
                    self._check(self._data_size)
            elif line.startswith(b"event:"):
                self._event = line[7:] if line[6:7] == b" " else line[6:]
            else:
                self._field(line)
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: dispatch whatever is pending (a last event may lack its blank line)."""
        self._buffer += b"".join(self._pieces)
        self._pieces = []
        if self._buffer:
            self._field(self._buffer)
            self._buffer = b""
        return [self._dispatch()] if self._data or self._event else []

    def _field(self, line: bytes) -> None:
        if line[0] == _COLON:  # a comment
            return
        name, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._data_size += len(value)
            self._check(self._data_size)
        elif name == b"event":
            self._event = value

    def _dispatch(self) -> ServerSentEvent:
        data = self._data
        raw = data[0] if len(data) == 1 else b"\n".join(data)
        event = self._event.decode(self._encoding, "replace") if self._event else "message"
        self._event = b""
        self._data = []
        self._data_size = 0
        return ServerSentEvent(event, raw.decode(self._encoding, "replace"))


_COLON = ord(":")


def _chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive: raw when it has no content coding (nothing to undo)
    and is still unread (a body already read in full is served by ``aiter_bytes``)."""
    coding = response.headers.get("content-encoding")
    if not response.is_stream_consumed and (coding is None or coding.strip() in ("", "identity")):
        return response.aiter_raw()
    return response.aiter_bytes()


async def aiter_sse(response: httpx.Response) -> AsyncGenerator[ServerSentEvent, None]:
    """Decode an httpx streaming response into events; a dropped connection raises.

    A clean end of stream flushes the decoder (so a missing final blank line or a missing
    ``[DONE]`` loses nothing); a connection that breaks mid-body raises
    :class:`~responses_gateway.errors.UpstreamTransportError`.
    """
    decoder = SSEDecoder(
        _cap("GATEWAY_MAX_UPSTREAM_EVENT_BYTES", DEFAULT_MAX_EVENT_CHARS),
        response.encoding or "utf-8",
    )
    budget = _cap("GATEWAY_MAX_UPSTREAM_STREAM_BYTES", DEFAULT_MAX_STREAM_CHARS)
    gate = FLOW_GATE.get()
    try:
        async for chunk in _chunks(response):
            if gate is not None:
                waiting = gate()
                if waiting is not None:
                    await waiting
            budget -= len(chunk)
            if budget < 0:
                raise UpstreamProtocolError(
                    "The upstream model stream exceeded the gateway's size limit."
                )
            for event in decoder.decode(chunk):
                yield event
    except httpx.TransportError as exc:
        raise UpstreamTransportError(
            f"The upstream model connection failed mid-stream: {cause_of(exc)}"
        ) from exc
    for event in decoder.flush():
        yield event


def cause_of(exc: BaseException) -> str:
    """An HTTP client failure as the cause a message names: its class, and its own words."""
    said = str(exc).strip()
    return f"{type(exc).__name__} ({said})" if said else type(exc).__name__
