"""uvicorn's WebSocket protocol, imported when the first socket connects.

Owns :class:`LazyWebSocketProtocol`, the ``ws`` setting ``serve`` and the test servers give
uvicorn: uvicorn imports its WebSocket implementation (the ``websockets`` package, about 0.1 s)
when the server starts, which would tax every cold start, including those of processes that
never see an upgrade. This class defers that import to the first upgrade request. It knows
nothing about what the app does with the socket.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["LazyWebSocketProtocol"]


class LazyWebSocketProtocol(asyncio.Protocol):
    """Builds uvicorn's sans-I/O ``websockets`` protocol for each upgrade, importing it the
    first time (``uvicorn.Config(ws=LazyWebSocketProtocol)``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from uvicorn.protocols.websockets.websockets_sansio_impl import (
            WebSocketsSansIOProtocol,
        )

        return WebSocketsSansIOProtocol(*args, **kwargs)
