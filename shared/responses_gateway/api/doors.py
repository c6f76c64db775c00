"""Every door of the app: a route's handler as served, its declared body validated first.

Owns :func:`served`: a :class:`~responses_gateway.api.routes.RouteSpec`'s endpoint as one taking
only the request, which Starlette's routes (:mod:`responses_gateway.api.mount`) and FastAPI's
(:meth:`~responses_gateway.api.routes.RouteTable.api_router`) both call. For a route declaring a
:class:`~responses_gateway.api.routes.Door` (a create, ``input_tokens``, ``compact``, the
conversation writes, prompt versions), before the handler runs: the caller is authenticated
(401 before anything is read), the door's guard runs (an operator check: 403), the body is read
under the size and structure limits (413, 400) with its raw JSON left in ``request.state.body``
(a refusal's request-log record reads it), and validated against the door's model by the one
parser (:func:`~responses_gateway.protocol.request.parse_body`: a 400 naming the ``param``
path, worded like OpenAI's), on a thread when the body is large. The handler gets the validated
model: no route can take a body without it, and no door validates its own way.

Decides nothing about what a request does (the handlers and the service do). The body models are
imported on a door's first request, never at import.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from responses_gateway.api.deps import identity_of
from responses_gateway.api.limits import off_loop_if_large, read_json
from responses_gateway.api.routes import Door, RouteSpec, path_param_names

__all__ = ["body_model", "endpoint_of", "read_body", "served"]

Served = Callable[[Request], Awaitable[Any]]


@functools.cache
def body_model(reference: str) -> Any:
    """The model class ``"module:Name"`` names (imported once)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def _path_params(spec: RouteSpec) -> list[str]:
    """The endpoint's parameters besides the request (and body): each must name a segment."""
    names = path_param_names(spec.path, spec.endpoint, body=spec.door is not None)
    if names is None:
        raise TypeError(
            f"route {spec.path}: {spec.endpoint.__name__} takes more than path parameters"
        )
    return names


async def read_body(request: Request, door: Door) -> Any:
    """The request's body, validated against ``door``'s model (see the module docstring).

    Raises:
        GatewayError: 401 (no valid key), the guard's refusal, 413 (too large) or 400 (not
            JSON, a structural limit, or a field or item the model refuses).
    """
    from responses_gateway.protocol.request import parse_body  # a body's first request

    identity_of(request)
    if door.guard is not None:
        door.guard(request)
    data, size = await read_json(request, allow_empty=door.empty)
    request.state.body = data
    model = body_model(door.model)
    return await off_loop_if_large(size, parse_body, model, {} if data is None else data)


def served(spec: RouteSpec) -> Served:
    """``spec``'s endpoint as served: ``await served(spec)(request)`` is the handler's answer."""
    endpoint = spec.endpoint
    names = _path_params(spec)
    door = spec.door

    async def handle(request: Request) -> Any:
        params = {name: request.path_params[name] for name in names}
        if door is None:
            return await endpoint(request, **params)
        return await endpoint(request, await read_body(request, door), **params)

    handle.__name__ = endpoint.__name__
    handle.gateway_endpoint = endpoint  # type: ignore[attr-defined]  # see endpoint_of
    return handle


def endpoint_of(scope_endpoint: Any) -> Any:
    """The gateway handler a route's ``scope["endpoint"]`` serves (FastAPI's routes name the
    :func:`served` wrapper there, Starlette's the handler itself)."""
    return getattr(scope_endpoint, "gateway_endpoint", scope_endpoint)
