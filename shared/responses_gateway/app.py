"""The HTTP edge: the app serving the Responses and Conversations APIs.

Owns the app factory, the conversion of :class:`~responses_gateway.errors.GatewayError` (and any
other failure) into OpenAI error envelopes with the right status, and ``x-request-id`` on every
response. Routes live in :mod:`responses_gateway.api` (WebSocket mode's upgrade of
``GET /v1/responses`` too); the loop, adapters and store hold all the
logic. Nothing here decides what a request does.

The app is a Starlette app: its routes answer exactly as FastAPI's did, without importing FastAPI
(:mod:`responses_gateway.api.mount`); FastAPI serves the console's routes, loaded on the first
request under their prefixes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

# First, before anything imports httpx: import it without its command-line interface (a
# cold-start saving; see the module).
import responses_gateway.coldstart  # noqa: F401

# isort: split

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from responses_gateway.adapters.latch import PROCESS_LATCH, UpgradeLatch
from responses_gateway.api import conversations, prompts, responses, usage, websocket
from responses_gateway.api.doors import endpoint_of
from responses_gateway.api.limits import Limits
from responses_gateway.api.mount import app_routes, fastapi_mounted
from responses_gateway.api.routes import RouteTable
from responses_gateway.background.launcher import DeferredLauncher, Launcher
from responses_gateway.config import GatewayConfig
from responses_gateway.errors import GatewayError, InternalError
from responses_gateway.ids import new_id
from responses_gateway.service import Gateway
from responses_gateway.store.base import Store
from responses_gateway.tenancy import Identity
from responses_gateway.upstream_http import upstream_http_client
from responses_gateway.usage.requestlog import UNAUTHENTICATED

if TYPE_CHECKING:
    from responses_gateway.sockets.session import SessionLimits

__all__ = [
    "CREATE_PATH",
    "EXCEPTION_HANDLERS",
    "ROUTE_TABLES",
    "create_app",
    "error_response",
    "preload_create_path",
]

logger = logging.getLogger(__name__)


def error_response(error: GatewayError) -> JSONResponse:
    """An OpenAI error envelope for ``error`` with its status code and headers."""
    return JSONResponse(
        {"error": error.to_error()}, status_code=error.status_code, headers=error.headers or None
    )


class EdgeMiddleware:
    """Adds ``x-request-id`` to every response (the caller's, if it sent one) and turns any
    unexpected exception into a 500 envelope, so no failure escapes without both."""

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
        state = scope.setdefault("state", {})  # request.state: what a refusal's record reads
        state["request_id"] = rid.decode("utf-8", "replace")
        state["started_ms"] = int(time.time() * 1000)
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", rid)]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            logger.exception("unhandled error")
            if started:
                raise
            error = InternalError("The server had an error processing your request.")
            await error_response(error)(scope, receive, send_with_id)


async def _log_refusal(request: Request, error: GatewayError) -> None:
    """The request-log record of a create refused before its loop ran (after that, the loop's
    ending writes the record)."""
    state = request.state
    if getattr(state, "prepared", False):
        return
    identity: Identity | None = getattr(state, "identity", None)
    gateway: Gateway = request.app.state.gateway
    await gateway.log_refused(
        tenant=identity.tenant if identity is not None else UNAUTHENTICATED,
        request_id=getattr(state, "request_id", "") or new_id("req"),
        api_key_id=identity.api_key_id if identity is not None else "",
        body=getattr(state, "body", None),  # the raw JSON its door read, if it got that far
        error=error,
        started_ms=getattr(state, "started_ms", 0) or int(time.time() * 1000),
        client_headers=request.headers,
    )


CONSOLE_PREFIXES = ("/v1/console/", "/v1/traces/", "/console")
"""Paths the console's routes serve (its data reads, the trace ingest, its files)."""


class LazyRoutes(BaseRoute):
    """Routes under ``prefixes`` whose modules load on the first request there, so the cold
    start never imports them (the console costs nothing until someone opens it)."""

    def __init__(self, prefixes: tuple[str, ...], load: Callable[[], ASGIApp]) -> None:
        self.prefixes = prefixes
        self._load = load
        self._app: ASGIApp | None = None

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]  # what the app's own routes match, as Starlette does
        if scope["type"] == "http" and path.startswith(self.prefixes):
            return Match.FULL, {}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            self._app = self._load()
        await self._app(scope, receive, send)


def _console_routes() -> ASGIApp:
    """The console's routes (FastAPI), their JSON answers gzipped when the client accepts it
    (the files route compresses its own)."""
    from responses_gateway.coldstart import import_fastapi

    import_fastapi()
    from fastapi import APIRouter
    from starlette.middleware.gzip import GZipMiddleware

    from responses_gateway.api import admin, console, overview, traces

    router = APIRouter()
    for part in (console.router, overview.router, admin.router, traces.router, console.files):
        router.include_router(part)
    return GZipMiddleware(fastapi_mounted(router), minimum_size=1024, compresslevel=6)


_EDGE = RouteTable()
"""The app's own route: the readiness check (the Lambda Web Adapter waits for it)."""


@_EDGE.get("/health")
async def health(request: Request) -> dict[str, str]:
    return {"status": "ok"}


ROUTE_TABLES = (
    _EDGE,
    responses.routes,
    conversations.routes,
    usage.routes,
    prompts.routes,
    websocket.routes,
)
"""The app's routes, in the order they match (the console's come after, loaded on first use)."""


CREATE_PATH = (
    "responses_gateway.api.create",
    "responses_gateway.adapters.select",
    "responses_gateway.usage.metrics",
)
"""The modules only a create needs (the request models, the loop, the adapters, the sinks, with
what they import, and the health counters its ledger write adds), which the app imports on the
first create: the buffered function serves none and never imports them."""


def preload_create_path() -> None:
    """Import :data:`CREATE_PATH` now: what a function that serves creates does at init, so its
    first create does not pay for them."""
    import importlib

    from responses_gateway.coldstart import import_anyio_backend

    for module in CREATE_PATH:
        importlib.import_module(module)
    import_anyio_backend()  # httpcore's locks and connections, Starlette's streaming answer


async def _gateway_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, GatewayError)
    if endpoint_of(request.scope.get("endpoint")) is responses.create_response:
        await _log_refusal(request, exc)
    return error_response(exc)


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    error = GatewayError(str(exc.detail), status_code=exc.status_code)
    error.error_type = "invalid_request_error" if exc.status_code < 500 else "server_error"
    return error_response(error)


EXCEPTION_HANDLERS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    GatewayError: _gateway_error,
    StarletteHTTPException: _http_error,
}
"""How the app answers errors: a :class:`GatewayError` as its envelope (a refused create is
also logged), Starlette's 404/405 as the same envelope."""


def _default_launcher(gateway: Gateway) -> Launcher:
    """Step Functions when the environment names a state machine (made on first use: see
    :class:`DeferredLauncher`), else the local runner."""
    from responses_gateway.background.local import LocalLauncher

    if not os.environ.get("BACKGROUND_STATE_MACHINE_ARN", "").strip():
        return LocalLauncher.for_gateway(gateway)

    def step_functions() -> Launcher:
        from responses_gateway.background.stepfunctions import StepFunctionsLauncher

        launcher = StepFunctionsLauncher.from_env()
        return launcher if launcher is not None else LocalLauncher.for_gateway(gateway)

    return DeferredLauncher(step_functions)


def _watching(launcher: Launcher | None) -> contextlib.AbstractAsyncContextManager[None]:
    """The in-process runner taking over runs a dead process left (see
    :meth:`LocalLauncher.watching`); nothing for other launchers."""
    from responses_gateway.background.local import LocalLauncher

    if isinstance(launcher, LocalLauncher):
        return launcher.watching()
    return contextlib.nullcontext()


def create_app(
    config: GatewayConfig,
    store: Store,
    *,
    client: httpx.AsyncClient | None = None,
    latch: UpgradeLatch = PROCESS_LATCH,
    mcp_policy: Any = None,
    launcher: Launcher | None = None,
    foreground_budget: float | None = None,
    socket_limits: SessionLimits | None = None,
    limits: Limits | None = None,
) -> Starlette:
    """The API app for ``config``, keeping state in ``store``.

    Args:
        config: providers and routing.
        store: where responses and conversations live.
        client: the upstream HTTP client; by default one is opened with the app's lifespan.
        latch: where ``api: auto`` providers record their upgrade to Responses (process-wide
            by default; tests pass their own).
        mcp_policy: which MCP server URLs may be dialled (an ``McpPolicy``; from the
            environment by default).
        launcher: what runs background responses: by default the Step Functions state
            machine named by ``BACKGROUND_STATE_MACHINE_ARN``, else the in-process runner.
        foreground_budget: seconds a foreground loop may run before it hands over to the
            background worker (besides the Lambda invocation's own deadline).
        socket_limits: WebSocket mode's connection lifetime and message size (from
            ``GATEWAY_WS_MAX_SECONDS`` / ``GATEWAY_WS_MAX_MESSAGE_BYTES`` by default).
        limits: request body caps (``GATEWAY_MAX_*`` variables by default).
    """
    owned_client = client is None
    http = client or upstream_http_client()

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        # The serving loop: shared MCP servers' processes live on it until shutdown.
        gateway.keep_shared_mcp(asyncio.get_running_loop())
        try:
            async with _watching(gateway.launcher):
                yield
        finally:
            try:
                await gateway.close_shared_mcp()
            finally:
                if owned_client:
                    await http.aclose()

    app = Starlette(
        routes=[*app_routes(ROUTE_TABLES), LazyRoutes(CONSOLE_PREFIXES, _console_routes)],
        middleware=[Middleware(EdgeMiddleware)],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    gateway = Gateway(
        config, http, store, latch, mcp_policy=mcp_policy, foreground_budget=foreground_budget
    )
    gateway.launcher = launcher or _default_launcher(gateway)
    app.state.gateway = gateway
    if socket_limits is not None:
        app.state.socket_limits = socket_limits
    app.state.limits = limits or Limits.from_env()
    return app
