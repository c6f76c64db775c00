"""Server-Sent Events from an MCP server, decoded from bytes under a size bound.

Owns :class:`SseDecoder`: the framing rules of the event-stream format (``event``, ``data``,
``id`` and ``retry`` fields, multi-line data, comments, CR/LF/CRLF line ends, a leading BOM, a
last event without its blank line) with the ``feed(chunk)`` / ``end()`` shape of httpx's
decoders, so it is tested without I/O. It keeps the last event id and the ``retry`` delay a
stream announced (what resuming a stream needs). It must not parse the JSON inside events (the
transports do) and must not hold more than ``max_event_bytes`` of one event or line.
"""

from __future__ import annotations

from dataclasses import dataclass

from responses_gateway.mcp.rpc import TOO_LARGE, McpTransportError

__all__ = ["SseDecoder", "SseEvent"]


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its type (``message`` when unnamed) and its data."""

    event: str
    data: str


class SseDecoder:
    """Turns byte chunks into :class:`SseEvent` values.

    Args:
        max_event_bytes: The most bytes one line, or one event's data, may hold; beyond it
            :meth:`feed` raises :class:`~responses_gateway.mcp.rpc.McpTransportError`.
    """

    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._pending = bytearray()
        """Bytes of a line not ended yet."""
        self._event = ""
        self._data: list[str] = []
        self._data_size = 0
        self._cr = False
        """The last chunk ended in CR: a LF that starts the next one belongs to it."""
        self._started = False
        self.last_event_id: str | None = None
        """The most recent ``id`` field (what a ``Last-Event-ID`` header resumes from)."""
        self.retry_ms: int | None = None
        """The most recent ``retry`` field: how long to wait before reconnecting."""

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode ``chunk``; return the events it completed."""
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        events: list[SseEvent] = []
        start = 0
        size = len(chunk)
        while start < size:
            cr = chunk.find(b"\r", start)
            lf = chunk.find(b"\n", start)
            if cr < 0 and lf < 0:
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            self._pending += chunk[start:end]
            self._line(bytes(self._pending), events)
            self._pending.clear()
            start = end + 1
            if chunk[end : end + 2] == b"\r\n":
                start += 1
        self._pending += chunk[start:]
        if len(self._pending) > self._max:
            raise McpTransportError(TOO_LARGE)
        return events

    def end(self) -> list[SseEvent]:
        """The stream ended: dispatch a last event that had no blank line after it."""
        events: list[SseEvent] = []
        if self._pending:
            self._line(bytes(self._pending), events)
            self._pending.clear()
        self._line(b"", events)
        return events

    def _line(self, raw: bytes, events: list[SseEvent]) -> None:
        line = raw.decode("utf-8", "replace")
        if not self._started:
            self._started = True
            line = line.removeprefix("\ufeff")
        if not line:
            if self._data:
                events.append(SseEvent(self._event or "message", "\n".join(self._data)))
            self._event, self._data, self._data_size = "", [], 0
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
            self._data_size += len(raw)
            if self._data_size > self._max:
                raise McpTransportError(TOO_LARGE)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
