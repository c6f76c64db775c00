"""The WebSocket route: ``GET /v1/responses`` upgraded to WebSocket mode, in the ASGI app.

Owns the transport of a :class:`~responses_gateway.sockets.Session` over a Starlette WebSocket:
the handshake (credentials and tenancy checked exactly as for HTTP, by
:func:`~responses_gateway.api.deps.tenant_of`; a refusal is the same 401 envelope as over HTTP
when the server can send one, else close code 1008), one text message per server event, in
order, the connection's time limit, and the end of the connection. What a message does belongs
to the session.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from responses_gateway.api.deps import gateway_of, identity_of
from responses_gateway.api.routes import RouteTable
from responses_gateway.errors import GatewayError

__all__ = ["router", "routes", "session_limits"]

routes = RouteTable()
__getattr__ = routes.module_getattr(__name__)

if TYPE_CHECKING:
    from fastapi import APIRouter

    from responses_gateway.sockets.session import Session, SessionLimits

    router: APIRouter
    """This route as a FastAPI router (built on first access)."""

_CLOSE_NORMAL = 1000
_CLOSE_POLICY = 1008


def session_limits(websocket: WebSocket) -> SessionLimits:
    """The app's limits (``app.state.socket_limits``), else the environment's."""
    from responses_gateway.sockets.session import SessionLimits  # the loop's: on first use

    limits = getattr(websocket.app.state, "socket_limits", None)
    return limits if isinstance(limits, SessionLimits) else SessionLimits.from_env()


async def _refuse(websocket: WebSocket, error: GatewayError) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        from responses_gateway.app import error_response

        await websocket.send_denial_response(error_response(error))
    else:
        await websocket.close(code=_CLOSE_POLICY, reason=error.message[:120])


async def _send_all(websocket: WebSocket, outbox: asyncio.Queue[bytes | None]) -> None:
    while (message := await outbox.get()) is not None:
        await websocket.send_text(message.decode())


async def _receive_all(websocket: WebSocket, session: Session) -> None:
    while True:
        message: Any = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("text")
        if data is None:
            data = message.get("bytes") or b""
        session.receive(data)
        await session.settle()  # a refused message's record and error event, before the next


@routes.websocket("/v1/responses")
async def responses_socket(websocket: WebSocket) -> None:
    try:
        identity = identity_of(websocket)
    except GatewayError as error:
        await _refuse(websocket, error)
        return
    from responses_gateway.sockets.session import Session

    await websocket.accept()
    limits = session_limits(websocket)
    outbox: asyncio.Queue[bytes | None] = asyncio.Queue()
    session = Session(
        gateway_of(websocket),
        identity.tenant,
        outbox.put_nowait,
        limits=limits,
        api_key_id=identity.api_key_id,
        client_headers=websocket.headers,
    )
    sender = asyncio.create_task(_send_all(websocket, outbox))
    receiver = asyncio.create_task(_receive_all(websocket, session))
    limit = asyncio.create_task(asyncio.sleep(limits.max_seconds))
    try:
        done, _ = await asyncio.wait({sender, receiver, limit}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        receiver.cancel()
        limit.cancel()
        await session.close()
    if limit in done and not sender.done():
        session.expire()
    outbox.put_nowait(None)
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await sender
        await websocket.close(code=_CLOSE_NORMAL)
    sender.cancel()
