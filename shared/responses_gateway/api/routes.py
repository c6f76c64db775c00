"""Route declarations that import no web framework: what each route module serves.

Owns :class:`RouteTable` (a route module's routes, declared with ``@routes.get(...)``-style
decorators) and :class:`RouteSpec` (one route: path, methods, endpoint, and for a route that
takes a JSON body, its :class:`Door`: the body model every request is validated against before
the handler runs, see :mod:`responses_gateway.api.doors`). The app serves a table's routes with
Starlette alone (:mod:`responses_gateway.api.mount`);
:meth:`RouteTable.api_router` builds the FastAPI router of the same routes (what a module's
``router`` attribute returns: the deployment checks read it).

Must not import FastAPI or Starlette at import: a cold start never pays for FastAPI. It holds
declarations only: no request is handled here.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from fastapi import APIRouter

__all__ = ["Door", "RouteSpec", "RouteTable", "build_api_router", "path_param_names"]

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Door:
    """What a route that takes a JSON body declares about it."""

    model: str
    """The body model, ``"module:Name"`` (imported on the first request: a cold start never
    builds a model its function serves no request of)."""
    empty: bool = False
    """Whether an empty body stands for ``{}`` (else it is OpenAI's ``invalid_json`` 400)."""
    guard: Callable[[Any], Any] | None = None
    """Called with the request after authentication and before the body is read (an operator
    check: a 403 comes before any 400 about the body)."""


@dataclass(frozen=True, slots=True)
class RouteSpec:
    """One route of a table."""

    path: str
    """The full path (the table's prefix included), in Starlette's ``{param}`` syntax."""
    endpoint: Callable[..., Any]
    """``endpoint(request, **path_params)`` for HTTP routes, ``endpoint(websocket)`` for a
    WebSocket route."""
    methods: tuple[str, ...]
    """HTTP methods (exactly these: a ``GET`` route does not answer ``HEAD``, as in FastAPI);
    empty for a WebSocket route."""
    door: Door | None = None
    """The route's body, when it takes one: the endpoint is then called as
    ``endpoint(request, body, **path_params)`` with the validated model."""

    @property
    def websocket(self) -> bool:
        """Whether this is a WebSocket route."""
        return not self.methods


class RouteTable:
    """The routes of one route module, in declaration order (the order routes match in)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.specs: list[RouteSpec] = []

    def _add(
        self, path: str, methods: tuple[str, ...], door: Door | None = None
    ) -> Callable[[Endpoint], Endpoint]:
        def decorator(endpoint: Endpoint) -> Endpoint:
            self.specs.append(RouteSpec(self.prefix + path, endpoint, methods, door))
            return endpoint

        return decorator

    def get(self, path: str) -> Callable[[Endpoint], Endpoint]:
        """Declare a ``GET`` route."""
        return self._add(path, ("GET",))

    def post(self, path: str, body: Door | None = None) -> Callable[[Endpoint], Endpoint]:
        """Declare a ``POST`` route; ``body``: the JSON body it takes (validated before the
        endpoint runs, which gets the model as its second argument)."""
        return self._add(path, ("POST",), body)

    def put(self, path: str) -> Callable[[Endpoint], Endpoint]:
        """Declare a ``PUT`` route."""
        return self._add(path, ("PUT",))

    def delete(self, path: str) -> Callable[[Endpoint], Endpoint]:
        """Declare a ``DELETE`` route."""
        return self._add(path, ("DELETE",))

    def websocket(self, path: str) -> Callable[[Endpoint], Endpoint]:
        """Declare a WebSocket route."""
        return self._add(path, ())

    def module_getattr(self, module: str) -> Callable[[str], Any]:
        """A route module's ``__getattr__``: its ``router`` is :meth:`api_router`, built on first
        access (the deployment checks read it; serving never needs it)."""

        def module_attribute(name: str) -> Any:
            if name == "router":
                return self.api_router()
            raise AttributeError(f"module {module!r} has no attribute {name!r}")

        return module_attribute

    def api_router(self) -> APIRouter:
        """Every route of the table as one FastAPI router (built once; imports FastAPI)."""
        return _shared_api_router(tuple(self.specs))


def path_param_names(
    path: str, endpoint: Callable[..., Any], *, body: bool = False
) -> list[str] | None:
    """The parameters of ``endpoint(request, **path_params)`` (``endpoint(request, body,
    **path_params)`` when ``body``) that name path segments of ``path`` ([] when it takes
    nothing else), or None when it takes anything else."""
    skipped = ("request", "body") if body else ("request",)
    names = [name for name in inspect.signature(endpoint).parameters if name not in skipped]
    if any("{" + name + "}" not in path for name in names):
        return None
    return names


@functools.cache
def _shared_api_router(specs: tuple[RouteSpec, ...]) -> APIRouter:
    return build_api_router(specs)


def build_api_router(specs: Iterable[RouteSpec]) -> APIRouter:
    """A FastAPI router serving ``specs`` in order: HTTP routes as
    :class:`~responses_gateway.api.untyped.UntypedRoute` (no response model, path parameters
    read from the request, a declared body validated first: :func:`~.doors.served`),
    WebSocket routes as FastAPI's."""
    from responses_gateway.coldstart import import_fastapi

    import_fastapi()  # first: FastAPI's OpenAPI models stay unbuilt
    from fastapi import APIRouter

    from responses_gateway.api.doors import served
    from responses_gateway.api.untyped import UntypedRoute

    router = APIRouter(route_class=UntypedRoute)
    for spec in specs:
        if spec.websocket:
            router.add_api_websocket_route(spec.path, spec.endpoint)
        else:
            router.add_api_route(
                spec.path, served(spec), methods=list(spec.methods), name=spec.endpoint.__name__
            )
    return router
