"""uvicorn's WebSocket protocol, imported when the first socket connects.

Owns :class:`LazyWebSocketProtocol`, the ``ws`` setting ``serve`` and the test servers give
uvicorn: uvicorn imports its WebSocket implementation (the ``websockets`` package, about 0.1 s)
when the server starts, which would tax every cold start, including those of processes that
never see an upgrade. This class defers that import to the first upgrade request. On an
installation without ``websockets`` (a dependency since WebSocket mode is Codex's default
transport, but a ``--no-deps`` install or a trimmed bundle can lack it), the upgrade is refused
with a clear HTTP answer, :data:`UNAVAILABLE_STATUS` and an OpenAI error envelope naming what to
install, instead of dying inside uvicorn. It knows nothing about what the app does with the
socket.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

__all__ = ["UNAVAILABLE_MESSAGE", "UNAVAILABLE_STATUS", "LazyWebSocketProtocol"]

logger = logging.getLogger(__name__)

UNAVAILABLE_STATUS = 501
UNAVAILABLE_MESSAGE = (
    "WebSocket mode is not available on this server: its installation lacks the 'websockets' "
    "package. Install it with: pip install 'responses-gateway[websocket]' (or use HTTP: "
    "POST /v1/responses with stream: true)."
)


class LazyWebSocketProtocol(asyncio.Protocol):
    """Builds uvicorn's sans-I/O ``websockets`` protocol for each upgrade, importing it the
    first time (``uvicorn.Config(ws=LazyWebSocketProtocol)``); without ``websockets``, a
    :class:`_RefusedUpgrade` instead."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            from uvicorn.protocols.websockets.websockets_sansio_impl import (
                WebSocketsSansIOProtocol,
            )
        except ImportError as exc:
            logger.warning("refusing a WebSocket upgrade: %s", exc)
            return _RefusedUpgrade()
        return WebSocketsSansIOProtocol(*args, **kwargs)


def _refusal() -> bytes:
    body = json.dumps(
        {
            "error": {
                "message": UNAVAILABLE_MESSAGE,
                "type": "server_error",
                "param": None,
                "code": "websocket_unavailable",
            }
        }
    ).encode()
    head = (
        f"HTTP/1.1 {UNAVAILABLE_STATUS} Not Implemented\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class _RefusedUpgrade(asyncio.Protocol):
    """Takes over an upgrade request's connection (as uvicorn hands it to a WebSocket
    protocol), answers it with the refusal and closes it."""

    def __init__(self) -> None:
        self._transport: Any = None  # asyncio's or uvloop's TCP transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(_refusal())
        transport.close()
