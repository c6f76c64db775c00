"""FastAPI's route class for the gateway's handlers: :class:`UntypedRoute`.

Owns how a handler becomes a FastAPI route when FastAPI serves it: the console's routes, and the
``router`` of each route module (:meth:`responses_gateway.api.routes.RouteTable.api_router`).
Imports FastAPI: the cold start and the app's own routes never import this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from responses_gateway.api.routes import path_param_names
from responses_gateway.coldstart import import_fastapi

import_fastapi()  # before anything else imports FastAPI: its OpenAPI models stay unbuilt

# isort: split

from fastapi.routing import APIRoute  # noqa: E402
from starlette.requests import Request  # noqa: E402

__all__ = ["UntypedRoute"]


class UntypedRoute(APIRoute):
    """A route whose return annotation is not a response model.

    The gateway's handlers return finished JSON values (or a ``Response``); FastAPI would
    otherwise build a pydantic field per route from the annotation at import (pulling in
    ``pydantic.v1`` for its compatibility check, a cold-start cost) and validate and
    re-serialise every answer through it (a per-request cost). Without one, the answer goes
    through ``jsonable_encoder``: the same JSON for these plain values.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model"] = None
        kwargs.setdefault("name", endpoint.__name__)
        super().__init__(path, _path_params_from_request(path, endpoint), **kwargs)


def _path_params_from_request(path: str, endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """``endpoint(request, **path_params)`` as an endpoint taking only the request.

    FastAPI builds a pydantic field per declared parameter (and imports ``pydantic.v1`` for
    the first one, ~17 ms of a cold start); a path segment is a ``str`` that needs no
    validation, so the handlers' ``str`` path parameters are passed from
    ``request.path_params`` instead. Endpoints with any other parameter are left as they are.
    """
    names = path_param_names(path, endpoint)
    if not names:
        return endpoint

    async def endpoint_with_path_params(request: Request) -> Any:
        params = request.path_params
        return await endpoint(request, **{name: params[name] for name in names})

    return endpoint_with_path_params
