"""The AWS event-stream framing (``application/vnd.amazon.eventstream``), decoded incrementally.

Owns :class:`EventStreamDecoder`: bytes in, whole :class:`EventMessage` frames out, each checked
as AWS frames them (a 12-byte prelude of total length, headers length and the prelude's CRC32,
then the headers, the payload and the CRC32 of everything before it). Bedrock's
``ConverseStream`` answers in this framing. Pure Python (``struct``, ``zlib``): no botocore on the
request path. A frame that breaks the framing is an
:class:`~responses_gateway.errors.UpstreamProtocolError`. Nothing here knows what a Bedrock event
means (:mod:`responses_gateway.adapters.bedrock` does).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.errors import UpstreamProtocolError

__all__ = ["MAX_MESSAGE_BYTES", "EventMessage", "EventStreamDecoder", "encode_message"]

_PRELUDE = 12
_CRC = 4
MAX_MESSAGE_BYTES = 24 * 1024 * 1024
"""The largest frame accepted (botocore's limits: 16 MiB payload, 128 KiB headers)."""


@dataclass(frozen=True, slots=True)
class EventMessage:
    """One decoded frame."""

    headers: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""

    @property
    def message_type(self) -> str:
        """``event``, ``exception`` or ``error`` (``:message-type``)."""
        return str(self.headers.get(":message-type") or "event")

    @property
    def event_type(self) -> str:
        """``:event-type`` (an event) or ``:exception-type`` (an exception)."""
        key = ":exception-type" if self.message_type == "exception" else ":event-type"
        return str(self.headers.get(key) or "")


def _fail(what: str) -> UpstreamProtocolError:
    return UpstreamProtocolError(f"The upstream model sent a broken AWS event stream: {what}.")


_FIXED: dict[int, tuple[str, int]] = {2: (">b", 1), 3: (">h", 2), 4: (">i", 4), 5: (">q", 8)}
"""Header value types of fixed size: byte, short, integer, long."""


def _headers(raw: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    at = 0
    try:
        while at < len(raw):
            size = raw[at]
            name = raw[at + 1 : at + 1 + size].decode("utf-8")
            at += 1 + size
            kind = raw[at]
            at += 1
            value: Any
            if kind in (0, 1):
                value = kind == 0
            elif kind in _FIXED or kind == 8:
                fmt, width = _FIXED.get(kind, (">q", 8))
                value = struct.unpack_from(fmt, raw, at)[0]
                at += width
            elif kind in (6, 7):
                (length,) = struct.unpack_from(">H", raw, at)
                data = raw[at + 2 : at + 2 + length]
                if len(data) != length:
                    raise _fail("a header value is cut short")
                value = data.decode("utf-8") if kind == 7 else bytes(data)
                at += 2 + length
            elif kind == 9:  # a uuid (AWS sends none in Bedrock's streams: imported when seen)
                import uuid

                value = str(uuid.UUID(bytes=bytes(raw[at : at + 16])))
                at += 16
            else:
                raise _fail(f"unknown header value type {kind}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, UpstreamProtocolError):
            raise
        raise _fail("unreadable headers") from exc
    return headers


class EventStreamDecoder:
    """Frames from a byte stream, as they complete (:meth:`feed`), in order."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    @property
    def pending(self) -> int:
        """Bytes received that do not complete a frame yet."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[EventMessage]:
        """Take ``data``; return the frames it completed.

        Raises:
            UpstreamProtocolError: a frame's CRC, lengths or headers are wrong.
        """
        self._buffer += data
        out: list[EventMessage] = []
        while len(self._buffer) >= _PRELUDE:
            total, header_length, prelude_crc = struct.unpack_from(">III", self._buffer, 0)
            if zlib.crc32(self._buffer[:8]) != prelude_crc:
                raise _fail("prelude checksum mismatch")
            if total > MAX_MESSAGE_BYTES or total < _PRELUDE + _CRC + header_length:
                raise _fail(f"impossible frame length {total}")
            if len(self._buffer) < total:
                break
            frame = bytes(self._buffer[:total])
            del self._buffer[:total]
            (message_crc,) = struct.unpack_from(">I", frame, total - _CRC)
            if zlib.crc32(frame[: total - _CRC]) != message_crc:
                raise _fail("message checksum mismatch")
            headers = _headers(frame[_PRELUDE : _PRELUDE + header_length])
            out.append(EventMessage(headers, frame[_PRELUDE + header_length : total - _CRC]))
        return out


def encode_message(headers: dict[str, str], payload: bytes) -> bytes:
    """One frame with string ``headers`` (the shape AWS's streams use), for scripted upstreams."""
    raw = bytearray()
    for name, value in headers.items():
        encoded_name, encoded_value = name.encode(), value.encode()
        raw += bytes([len(encoded_name)]) + encoded_name + b"\x07"
        raw += struct.pack(">H", len(encoded_value)) + encoded_value
    total = _PRELUDE + len(raw) + len(payload) + _CRC
    prelude = struct.pack(">II", total, len(raw))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + bytes(raw) + payload
    return body + struct.pack(">I", zlib.crc32(body))
