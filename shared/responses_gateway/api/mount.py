"""The app's routes: hot routes served by Starlette alone, every other route by FastAPI, loaded
on first use.

Owns how :class:`~responses_gateway.api.routes.RouteTable` declarations become the app's routes
(:func:`app_routes`) and what serving a hot route means. A hot route (:class:`HotRoute`,
:class:`HotWebSocketRoute`) answers exactly as FastAPI's route would for the gateway's untyped
handlers: the handler gets the request (and its ``str`` path parameters), a ``Response`` it
returns is sent as is, any other value as JSON (``jsonable_encoder``'s output, which for the
plain JSON values the handlers return is the value itself); methods are exactly the declared ones
(no implicit ``HEAD``). Every other route is a :class:`DeferredRoute`: it matches like the route
it stands for (so 404, 405 and slash redirects come out as before) and hands the request to
:class:`FastApiRoutes`, which imports FastAPI and builds its routers the first time one is
needed.

Must not import FastAPI at import, nor decide anything about a request: the handlers do.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from responses_gateway.api.routes import RouteSpec, RouteTable, shared_api_router

__all__ = [
    "DeferredRoute",
    "FastApiRoutes",
    "HotRoute",
    "HotWebSocketRoute",
    "app_routes",
    "fastapi_mounted",
    "json_answer",
]


def json_answer(value: Any) -> Response:
    """A handler's answer as FastAPI sends it for a route without a response model."""
    if isinstance(value, Response):
        return value
    try:
        return JSONResponse(value)
    except TypeError:  # not plain JSON (a model, a date, a Decimal): FastAPI's encoder
        from responses_gateway.coldstart import import_fastapi

        import_fastapi()
        from fastapi.encoders import jsonable_encoder

        return JSONResponse(jsonable_encoder(value))


def _path_params(spec: RouteSpec) -> list[str]:
    """The endpoint's parameters besides the request: each must name a path segment."""
    names = [name for name in inspect.signature(spec.endpoint).parameters if name != "request"]
    unknown = [name for name in names if "{" + name + "}" not in spec.path]
    if unknown:
        raise TypeError(f"hot route {spec.path}: {unknown} are not path parameters")
    return names


class HotRoute(Route):
    """An HTTP route served without FastAPI, answering as FastAPI's route would."""

    def __init__(self, spec: RouteSpec) -> None:
        endpoint = spec.endpoint
        names = _path_params(spec)

        async def handle(request: Request) -> Response:
            if names:
                params = request.path_params
                value = await endpoint(request, **{name: params[name] for name in names})
            else:
                value = await endpoint(request)
            return json_answer(value)

        super().__init__(spec.path, handle, methods=spec.methods, name=endpoint.__name__)
        self.endpoint = endpoint  # what ``scope["endpoint"]`` names, as under FastAPI
        self.methods = set(spec.methods)  # exactly these, as FastAPI's routes (no HEAD)


class HotWebSocketRoute(WebSocketRoute):
    """A WebSocket route served without FastAPI (the handler takes the ``WebSocket``)."""

    def __init__(self, spec: RouteSpec) -> None:
        super().__init__(spec.path, spec.endpoint, name=spec.endpoint.__name__)


def fastapi_mounted(router: ASGIApp) -> ASGIApp:
    """``router`` (a FastAPI router) as the gateway's Starlette app serves it: with the exit
    stack FastAPI's own app puts in every request's scope, and FastAPI's handlers for its
    validation errors registered beside the app's own handlers."""
    from fastapi.exception_handlers import (
        request_validation_exception_handler,
        websocket_request_validation_exception_handler,
    )
    from fastapi.exceptions import RequestValidationError, WebSocketRequestValidationError
    from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware

    defaults: dict[Any, Any] = {
        RequestValidationError: request_validation_exception_handler,
        WebSocketRequestValidationError: websocket_request_validation_exception_handler,
    }
    stacked = AsyncExitStackMiddleware(router)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        handlers = scope.get("starlette.exception_handlers")
        if handlers is not None:
            for kind, handler in defaults.items():
                handlers[0].setdefault(kind, handler)
        await stacked(scope, receive, send)

    return app


class FastApiRoutes:
    """The routes FastAPI serves, built the first time a request needs one of them."""

    def __init__(self, specs: Iterable[RouteSpec]) -> None:
        self._specs = tuple(specs)
        self._app: ASGIApp | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        """Whether FastAPI's routes exist yet."""
        return self._app is not None

    def _load(self) -> ASGIApp:
        with self._lock:
            if self._app is None:
                self._app = fastapi_mounted(shared_api_router(self._specs))
            return self._app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app or self._load()
        await app(scope, receive, send)


class DeferredRoute(BaseRoute):
    """Stands for a route FastAPI serves: matches as that route would, and hands a request it
    matches to ``served_by`` (which routes it again, to the same route)."""

    def __init__(self, spec: RouteSpec, served_by: ASGIApp) -> None:
        self.path = spec.path
        self._served_by = served_by
        self._pattern: BaseRoute
        if spec.websocket:
            self._pattern = WebSocketRoute(spec.path, _never)
        else:
            route = Route(spec.path, _never, methods=spec.methods)
            route.methods = set(spec.methods)  # exactly these, as FastAPI's routes (no HEAD)
            self._pattern = route

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, _ = self._pattern.matches(scope)
        return match, {}  # FastAPI's router fills in the endpoint and path parameters

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._served_by(scope, receive, send)


async def _never(_: Any) -> None:  # pragma: no cover - a pattern's endpoint, never called
    raise AssertionError("a deferred route's pattern is never served")


def app_routes(tables: Iterable[RouteTable]) -> list[BaseRoute]:
    """The routes of ``tables``, in order: hot ones served by Starlette, the others deferred to
    one :class:`FastApiRoutes` shared by all of them."""
    specs = [spec for table in tables for spec in table.specs]
    fastapi_routes = FastApiRoutes(spec for spec in specs if not spec.hot)
    routes: list[BaseRoute] = []
    for spec in specs:
        if not spec.hot:
            routes.append(DeferredRoute(spec, fastapi_routes))
        elif spec.websocket:
            routes.append(HotWebSocketRoute(spec))
        else:
            routes.append(HotRoute(spec))
    return routes
