"""Per-request dependencies shared by the routers: the service, the tenant, paging parameters.

Owns how a route asks for its tenant (the rule itself lives in :mod:`responses_gateway.tenancy`)
and how list endpoints read ``after``/``limit``/``order`` (with OpenAI-style 400s) and shape their
``{"object": "list", ...}`` answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fastapi import Request

from responses_gateway.errors import InvalidRequestError
from responses_gateway.service import Gateway
from responses_gateway.tenancy import LOCAL_TENANT, TenancyPolicy, current_policy

__all__ = ["LOCAL_TENANT", "Page", "gateway_of", "list_object", "page_params", "tenant_of"]


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def tenant_of(request: Request) -> str:
    """The tenant a request acts for (see :mod:`responses_gateway.tenancy`).

    The policy is ``app.state.tenancy`` when the app was given one, else the environment's.

    Raises:
        AuthenticationError: the request carries no valid API key (401 ``invalid_api_key``).
    """
    policy = getattr(request.app.state, "tenancy", None)
    if not isinstance(policy, TenancyPolicy):
        policy = current_policy()
    return policy.resolve(event=request.scope.get("aws.event"), headers=request.headers)


@dataclass(frozen=True, slots=True)
class Page:
    after: str | None
    limit: int
    order: Literal["asc", "desc"]


def page_params(request: Request) -> Page:
    """``after``, ``limit`` (1-100, default 20) and ``order`` (default ``desc``) of a list call."""
    query = request.query_params
    raw_limit = query.get("limit", "20")
    try:
        limit = int(raw_limit)
    except ValueError:
        raise InvalidRequestError(
            f"Invalid type for 'limit': expected an integer, but got '{raw_limit}' instead.",
            param="limit",
            code="invalid_type",
        ) from None
    if not 1 <= limit <= 100:
        raise InvalidRequestError(
            f"Invalid 'limit': expected a value between 1 and 100, but got {limit} instead.",
            param="limit",
            code="invalid_value",
        )
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError(
            f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.",
            param="order",
            code="invalid_value",
        )
    return Page(after=query.get("after") or None, limit=limit, order=order)  # type: ignore[arg-type]


def list_object(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """The API's list shape."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0].get("id") if data else None,
        "last_id": data[-1].get("id") if data else None,
        "has_more": has_more,
    }
