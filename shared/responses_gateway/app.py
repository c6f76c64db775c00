"""The HTTP edge: the FastAPI app serving the Responses API.

Owns routes, the conversion of :class:`~responses_gateway.errors.GatewayError` (and any other
failure) into OpenAI error envelopes with the right status, ``x-request-id`` on every response,
and the SSE transport of streaming creates. It holds no loop logic: a create is prepared by
:class:`~responses_gateway.service.Gateway` and run by :func:`~responses_gateway.loop.run_loop`.

Streaming contract kept here: nothing is sent until the upstream accepted the first model call,
so a request the upstream refuses (429, 400, unreachable) gets a real HTTP error; once the stream
started, failures arrive as ``response.failed``. A client that disconnects cancels the loop task,
which closes the upstream connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from responses_gateway.adapters.select import PROCESS_LATCH, UpgradeLatch
from responses_gateway.config import GatewayConfig
from responses_gateway.errors import GatewayError, InternalError, InvalidRequestError
from responses_gateway.ids import new_id
from responses_gateway.loop import NullSink, render_response, run_loop
from responses_gateway.loop.events import LoopEvent, Sink, UpstreamResponding
from responses_gateway.service import Gateway, PreparedRun
from responses_gateway.sinks.sse import SSESink

__all__ = ["create_app", "error_response"]

logger = logging.getLogger(__name__)

_CLEANUPS: set[asyncio.Task[Any]] = set()
"""Loop tasks cancelled by a client disconnect, kept referenced until their cleanup ends."""

_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


def error_response(error: GatewayError, *, headers: dict[str, str] | None = None) -> JSONResponse:
    """An OpenAI error envelope for ``error`` with its status code."""
    return JSONResponse({"error": error.to_error()}, status_code=error.status_code, headers=headers)


class RequestIdMiddleware:
    """Adds ``x-request-id`` to every response (the caller's, if it sent one)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = None
        for name, value in scope.get("headers", ()):
            if name == b"x-request-id":
                request_id = value[:128]
                break
        rid = request_id or new_id("req").encode()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", rid)]
            await send(message)

        await self.app(scope, receive, send_with_id)


class _CommitSink:
    """Forwards events to the SSE sink and notes when the upstream accepted a call."""

    def __init__(self, inner: Sink, committed: asyncio.Event) -> None:
        self._inner = inner
        self._committed = committed

    def emit(self, event: LoopEvent) -> None:
        if isinstance(event, UpstreamResponding):
            self._committed.set()
        self._inner.emit(event)


async def _drain(
    queue: asyncio.Queue[bytes | None], task: asyncio.Task[Any]
) -> AsyncIterator[bytes]:
    try:
        while True:
            frame = await queue.get()
            if frame is None:
                return
            frames = [frame]
            while not queue.empty():
                more = queue.get_nowait()
                if more is None:
                    yield b"".join(frames)
                    return
                frames.append(more)
            yield b"".join(frames)
    finally:
        if not task.done():
            # The client is gone. Cancel the loop once and let its cleanup (closing the upstream
            # stream) run on its own: awaiting it here, inside the response's cancelled anyio
            # scope, would have anyio cancel the loop task again and again through this waiter.
            task.cancel()
            _CLEANUPS.add(task)
            task.add_done_callback(_CLEANUPS.discard)


async def _stream(run: PreparedRun) -> Response:
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    committed = asyncio.Event()
    sink = _CommitSink(
        SSESink(queue.put_nowait, include_obfuscation=run.include_obfuscation), committed
    )

    async def run_to_end() -> None:
        try:
            await run_loop(run.state, run.ctx, sink)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(run_to_end())
    waiter = asyncio.create_task(committed.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done() and not committed.is_set():
        error = task.exception()
        if error is not None:
            raise error
        if run.ctx.failure is not None:
            raise run.ctx.failure
    return StreamingResponse(
        _drain(queue, task), media_type="text/event-stream", headers=_SSE_HEADERS
    )


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise InvalidRequestError(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)",
            code="invalid_json",
        ) from exc


def create_app(
    config: GatewayConfig,
    *,
    client: httpx.AsyncClient | None = None,
    latch: UpgradeLatch = PROCESS_LATCH,
) -> FastAPI:
    """The Responses API app for ``config``.

    Args:
        config: providers and routing.
        client: the upstream HTTP client; by default one is opened with the app's lifespan.
        latch: where ``api: auto`` providers record their upgrade to Responses (process-wide
            by default; tests pass their own).
    """
    owned_client = client is None
    http = client or httpx.AsyncClient(
        timeout=httpx.Timeout(600.0, connect=10.0),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        trust_env=False,
    )
    service = Gateway(config, http, latch)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if owned_client:
                await http.aclose()

    app = FastAPI(
        title="responses-gateway",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.gateway = service

    @app.exception_handler(GatewayError)
    async def _gateway_error(_: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = GatewayError(str(exc.detail), status_code=exc.status_code)
        error.error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return error_response(error)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/responses")
    async def create_response(request: Request) -> Response:
        try:
            run = service.prepare(_parse_json(await request.body()))
            if run.stream:
                return await _stream(run)
            await run_loop(run.state, run.ctx, NullSink())
        except GatewayError:
            raise
        except Exception as exc:
            logger.exception("unhandled error in create")
            raise InternalError("The server had an error processing your request.") from exc
        if run.ctx.failure is not None:
            raise run.ctx.failure
        return JSONResponse(render_response(run.state))

    app.add_middleware(RequestIdMiddleware)
    return app
