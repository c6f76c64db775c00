"""Incremental Server-Sent Events decoding for upstream streams.

Owns the SSE framing rules (``event:``/``data:`` fields, multi-line data, comments, CR/LF/CRLF line
ends, a final event with no trailing blank line) and nothing else: it yields raw event names and
data strings; adapters parse the JSON. :class:`SSEDecoder` has the ``decode(chunk)`` / ``flush()``
shape of httpx's decoders so it can be tested without any I/O; :func:`aiter_sse` runs it over an
httpx response.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

import httpx

from responses_gateway.errors import UpstreamTransportError

__all__ = ["SSEDecoder", "ServerSentEvent", "aiter_sse"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event: its ``event`` name (``message`` when unnamed) and ``data``."""

    event: str
    data: str


class SSEDecoder:
    """Turns text chunks into :class:`ServerSentEvent` values, holding partial lines."""

    def __init__(self) -> None:
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._pending_cr = False

    def decode(self, chunk: str) -> list[ServerSentEvent]:
        """Feed a chunk of text; return the events it completed."""
        if self._pending_cr and chunk.startswith("\n"):
            chunk = chunk[1:]
        self._pending_cr = chunk.endswith("\r")
        text = self._buffer + chunk
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._buffer = lines.pop()
        events: list[ServerSentEvent] = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: dispatch whatever is pending (a last event may lack its blank line)."""
        events: list[ServerSentEvent] = []
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
        elif name == "event":
            self._event = value
        return None


async def aiter_sse(response: httpx.Response) -> AsyncGenerator[ServerSentEvent, None]:
    """Decode an httpx streaming response into events; a dropped connection raises.

    A clean end of stream flushes the decoder (so a missing final blank line or a missing
    ``[DONE]`` loses nothing); a connection that breaks mid-body raises
    :class:`~responses_gateway.errors.UpstreamTransportError`.
    """
    decoder = SSEDecoder()
    try:
        async for chunk in response.aiter_text():
            for event in decoder.decode(chunk):
                yield event
    except httpx.TransportError as exc:
        raise UpstreamTransportError(
            f"The upstream model connection failed mid-stream: {type(exc).__name__}"
        ) from exc
    for event in decoder.flush():
        yield event
