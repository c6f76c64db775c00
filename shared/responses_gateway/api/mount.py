"""The app's routes, served by Starlette alone, answering exactly as FastAPI's routes did.

Owns how :class:`~responses_gateway.api.routes.RouteTable` declarations become the app's routes
(:func:`app_routes`) and what serving one means. For the gateway's untyped handlers FastAPI's
route does only this: the handler gets the request (and its ``str`` path parameters), a
``Response`` it returns is sent as is, any other value as JSON (``jsonable_encoder``'s output,
which for the plain JSON values the handlers return is the value itself), and its methods are
exactly the declared ones (no implicit ``HEAD``). :class:`HandlerRoute` does the same without
importing FastAPI (a cold start then never pays for it). FastAPI still serves the console's
routes, mounted on their first request (:func:`fastapi_mounted`).

Must not import FastAPI at import, nor decide anything about a request: the handlers do (and
a route's declared body is validated by :mod:`responses_gateway.api.doors`, for Starlette's routes
and FastAPI's alike).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from responses_gateway.api.doors import served
from responses_gateway.api.routes import RouteSpec, RouteTable

__all__ = [
    "HandlerRoute",
    "HandlerWebSocketRoute",
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


class HandlerRoute(Route):
    """An HTTP route serving one of the gateway's handlers, as FastAPI's route would (its
    declared body validated first: :func:`~responses_gateway.api.doors.served`)."""

    def __init__(self, spec: RouteSpec) -> None:
        endpoint = spec.endpoint
        handler = served(spec)

        async def handle(request: Request) -> Response:
            return json_answer(await handler(request))

        super().__init__(spec.path, handle, methods=spec.methods, name=endpoint.__name__)
        self.endpoint = endpoint  # what ``scope["endpoint"]`` names, as under FastAPI
        self.methods = set(spec.methods)  # exactly these, as FastAPI's routes (no HEAD)


class HandlerWebSocketRoute(WebSocketRoute):
    """A WebSocket route serving one of the gateway's handlers (it takes the ``WebSocket``)."""

    def __init__(self, spec: RouteSpec) -> None:
        super().__init__(spec.path, spec.endpoint, name=spec.endpoint.__name__)


def app_routes(tables: Iterable[RouteTable]) -> list[BaseRoute]:
    """The routes of ``tables``, in order."""
    return [
        HandlerWebSocketRoute(spec) if spec.websocket else HandlerRoute(spec)
        for table in tables
        for spec in table.specs
    ]


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
