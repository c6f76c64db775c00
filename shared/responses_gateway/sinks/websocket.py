"""Loop events to WebSocket-mode server events: one JSON text message per event.

Owns only the framing of WebSocket mode: the same event dicts as the SSE sink (built by
:class:`~responses_gateway.sinks.sse.SSESink`, which this sink extends by overriding its
``_frame`` and ``_frame_json``), encoded as compact JSON, with the ``stream_id`` of the
``response.create`` that started them; and the shape of the socket's ``error`` event. It never
sends anything itself: ``write`` receives each message's UTF-8 bytes, and the transport (a local
socket, or API Gateway's ``PostToConnection``) delivers them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from responses_gateway.errors import GatewayError
from responses_gateway.sinks.sse import SSESink

__all__ = ["WebSocketSink", "encode_message", "error_event"]

_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode_message(event: dict[str, Any]) -> bytes:
    """One WebSocket message: the event as compact JSON in UTF-8."""
    return _encode_json(event).encode()


def error_event(error: GatewayError, stream_id: str | None = None) -> dict[str, Any]:
    """The socket's ``error`` event for a request error: ``{"type": "error", "status",
    "error": {"type", "code", "message", "param"}}`` (plus ``stream_id`` when the create
    named one; an error without a code gets the contract's code for its status, since both specs
    type the socket error's ``code`` as a string). The connection stays open after it."""
    from responses_gateway.protocol.contract import failure_code

    nested = error.to_error()
    if nested.get("code") is None:  # both specs' socket error carries a string code
        nested["code"] = failure_code(error.status_code, None)
    event: dict[str, Any] = {"type": "error", "status": error.status_code, "error": nested}
    if stream_id is not None:
        event["stream_id"] = stream_id
    return event


class WebSocketSink(SSESink):
    """A :class:`~responses_gateway.loop.events.Sink` writing WebSocket-mode messages.

    Args:
        write: Called once per event with its message's bytes (an ``OSError`` closes the sink).
        stream_id: Added to every event when the create named a stream.
        include_obfuscation: As for :class:`SSESink`.
    """

    __slots__ = ("_stream_id",)

    def __init__(
        self,
        write: Callable[[bytes], None],
        *,
        stream_id: str | None = None,
        include_obfuscation: bool = False,
    ) -> None:
        super().__init__(write, include_obfuscation=include_obfuscation)
        self._stream_id = stream_id

    def _frame(self, event_type: str, data: dict[str, Any]) -> bytes:
        if self._stream_id is not None:
            data["stream_id"] = self._stream_id
        return encode_message(data)

    def _frame_json(self, event_type: str, json_text: str) -> bytes:
        if self._stream_id is not None:  # the same key, last, as _frame adds it
            json_text = f'{json_text[:-1]},"stream_id":{_encode_json(self._stream_id)}}}'
        return json_text.encode()
