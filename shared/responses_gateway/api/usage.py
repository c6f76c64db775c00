"""Routes of ``/v1/organization/usage``: the operator's view of the usage ledger.

Owns ``GET /v1/organization/usage/completions`` (OpenAI's shape, see
:mod:`responses_gateway.usage.report`) and who may call it: only keys of a tenant listed as an
operator (``operators`` in the configuration, or ``GATEWAY_OPERATOR_TENANTS``); any other valid
key gets 403. The report covers every tenant (a tenant is a ``project_id``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from responses_gateway.api.deps import gateway_of, identity_of
from responses_gateway.api.routes import RouteTable
from responses_gateway.errors import PermissionDeniedError
from responses_gateway.usage.report import build_page, parse_query

__all__ = ["require_operator", "router", "routes"]

routes = RouteTable("/v1/organization/usage")
__getattr__ = routes.module_getattr(__name__)

if TYPE_CHECKING:
    from fastapi import APIRouter

    router: APIRouter
    """These routes as one FastAPI router (built on first access)."""


def require_operator(request: Request) -> str:
    """The operator tenant of a request.

    Raises:
        AuthenticationError: no valid key (401).
        PermissionDeniedError: a valid key of a tenant that is not an operator (403).
    """
    identity = identity_of(request)
    if identity.tenant not in gateway_of(request).config.operators:
        raise PermissionDeniedError(
            "You have insufficient permissions for this operation: the operator endpoints "
            "(usage, prompts) need an operator key.",
            code="insufficient_permissions",
        )
    return identity.tenant


@routes.get("/completions")
async def usage_completions(request: Request) -> dict[str, Any]:
    require_operator(request)
    params = {key: request.query_params.getlist(key) for key in request.query_params}
    query = parse_query(params, now=int(time.time()))
    rows = await gateway_of(request).store.read_usage(*query.read_range())
    return build_page(query, rows)
