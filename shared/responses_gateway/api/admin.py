"""Routes of ``/v1/console/keys`` and ``/v1/console/budgets``: the console's Keys and Budgets
pages (``/v1/console/budgets/all``: every tenant's spend against its limits).

Owns who may administer keys and budgets (operator keys, see
:func:`~responses_gateway.api.usage.require_operator`; a tenant's own key may read its own
budget and spend), the JSON shapes of keys and budgets, and where keys are administered:
``app.state.key_admin`` when the app was given one, else the local key file
(``GATEWAY_API_KEYS_FILE``, :class:`~responses_gateway.keys.LocalKeyFile`, which the gateway
re-reads on the next request), else the API Gateway keys of the deployed stack
``GATEWAY_KEYS_STACK`` names (:class:`~responses_gateway.keys.StackKeys`: its usage plans are
found on the first key call and kept on ``app.state``; boto3 is imported then, and every call
runs in a worker thread). Keys listed in ``GATEWAY_API_KEYS`` are configuration and are not
administered here. A key's value is in the create answer only, never in a listing or a log
line. A listing marks the key the request was signed with (``current``), which cannot revoke
itself, and says when each key was created and last used (the hour of its newest request in the
ledger's hour rows of the last 7 days: one Query per day). Budgets are read and written through
:class:`~responses_gateway.store.base.LedgerStore`; when the gateway does not enforce them, the
answer says so and how to turn enforcement on.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from responses_gateway.api.console import known_tenants, scoped_tenant
from responses_gateway.api.deps import UntypedRoute, gateway_of, identity_of
from responses_gateway.api.limits import read_json
from responses_gateway.api.usage import require_operator
from responses_gateway.errors import GatewayError, InvalidRequestError, NotFoundError
from responses_gateway.keys import (
    KeyInfo,
    KeysError,
    KeysUnavailableError,
    LocalKeyFile,
    StackKeys,
)
from responses_gateway.tenancy import KEYS_FILE_ENV
from responses_gateway.usage.budget import BudgetError, parse_limits
from responses_gateway.usage.metrics import STATUS
from responses_gateway.usage.records import HOUR_WIDTH, BudgetLimits

__all__ = ["ENFORCE_HINT", "KEYS_STACK_ENV", "admin_call", "key_admin_of", "router"]

router = APIRouter(prefix="/v1/console", route_class=UntypedRoute)

_LIMIT_NAMES = ("daily_tokens", "monthly_tokens", "daily_cost_usd", "monthly_cost_usd")

KEYS_STACK_ENV = "GATEWAY_KEYS_STACK"
"""The deployed stack whose API Gateway keys the Keys page administers (the template sets it)."""

ENFORCE_HINT = (
    "This gateway does not enforce budgets: limits are saved but no request is refused for "
    "them. Turn enforcement on with GATEWAY_ENFORCE_BUDGETS=1 (responses-gateway serve "
    "--enforce-budgets does the same) or a [budgets] table in the configuration, then "
    "restart the gateway."
)
"""What a budget answer says when the configuration enforces none."""
_LAST_USED_DAYS = 7


def key_admin_of(request: Request) -> Any:
    """Where this app administers keys: ``app.state.key_admin``, else the key file the
    tenancy environment names (``app.state.tenancy_env`` or the process's), else the stack
    ``GATEWAY_KEYS_STACK`` names (kept as ``app.state.key_admin`` from then on).

    Raises:
        InvalidRequestError: keys come from ``GATEWAY_API_KEYS`` (400
            ``keys_not_administered``).
    """
    state = request.app.state
    admin = getattr(state, "key_admin", None)
    if admin is not None:
        return admin
    env: Mapping[str, str] = getattr(state, "tenancy_env", None) or os.environ
    path = env.get(KEYS_FILE_ENV, "").strip()
    if path:
        return LocalKeyFile(path)
    stack = env.get(KEYS_STACK_ENV, "").strip()
    if stack:
        state.key_admin = StackKeys(stack, region=env.get("AWS_REGION") or None)
        return state.key_admin
    raise InvalidRequestError(
        "This gateway does not administer API keys: set GATEWAY_API_KEYS_FILE to a key file "
        "(locally); a deployed stack administers its API Gateway keys (GATEWAY_KEYS_STACK).",
        code="keys_not_administered",
    )


async def admin_call(admin: Any, method: str, *args: Any) -> Any:
    """``admin.<method>(*args)`` in a worker thread (key stores block: files, boto3).

    Raises:
        GatewayError: the stack's keys cannot be found (500 ``keys_unavailable``).
    """
    try:
        return await asyncio.to_thread(getattr(admin, method), *args)
    except KeysUnavailableError as exc:
        raise GatewayError(str(exc), code="keys_unavailable") from None


def _key_json(
    info: KeyInfo, current: str = "", last_used: dict[str, int] | None = None
) -> dict[str, Any]:
    return {
        "object": "gateway.api_key",
        "id": info.key_id,
        "tenant": info.tenant,
        "enabled": info.enabled,
        "name": info.name,
        "created_at": info.created_at,
        "last_used_at": (last_used or {}).get(info.key_id),
        "current": bool(current) and info.key_id == current,
    }


async def _last_used(request: Request) -> dict[str, int]:
    """Key id -> start of the newest hour with a request of the key (responses or refusals),
    from the ledger's hour rows of the last :data:`_LAST_USED_DAYS` days."""
    now = int(time.time())
    start = now - now % HOUR_WIDTH - (_LAST_USED_DAYS - 1) * 86_400
    rows = await gateway_of(request).store.read_metrics(start, now + 1, width=HOUR_WIDTH)
    found: dict[str, int] = {}
    for row in rows:
        used = row.counts.responses or any(
            count for name, count in row.stats.items() if name.startswith(STATUS)
        )
        if used and row.api_key_id and row.hour_start > found.get(row.api_key_id, -1):
            found[row.api_key_id] = row.hour_start
    return found


def _tenant_param(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(
            "Missing required parameter: 'tenant'.",
            param="tenant",
            code="missing_required_parameter",
        )
    return value


@router.get("/keys")
async def list_keys(request: Request) -> dict[str, Any]:
    """The administered keys (of ``?tenant=``, or all), with their creation and last use; the
    signed-in key is ``current``."""
    require_operator(request)
    admin = key_admin_of(request)
    tenant = request.query_params.get("tenant") or None
    reading = asyncio.ensure_future(_last_used(request))  # beside the listing
    try:
        found = await admin_call(admin, "list", tenant)
    except BaseException:
        reading.cancel()  # no ledger read outlives a failed listing
        raise
    used = await reading
    current = identity_of(request).api_key_id
    return {"object": "list", "data": [_key_json(info, current, used) for info in found]}


@router.post("/keys")
async def create_key(request: Request) -> JSONResponse:
    """A new key for ``{"tenant": ..., "name": ...}`` (the name optional); its ``value`` is
    in this answer only."""
    require_operator(request)
    admin = key_admin_of(request)
    body, _ = await read_json(request)
    tenant = _tenant_param(body.get("tenant") if isinstance(body, dict) else None)
    name = body.get("name") if isinstance(body, dict) else None
    if name is not None and not isinstance(name, str):
        raise InvalidRequestError("Invalid 'name': expected a string.", param="name")
    try:
        created = await admin_call(admin, "create", tenant, name or "")
    except KeysError as exc:
        raise InvalidRequestError(str(exc), param="tenant", code="invalid_value") from None
    return JSONResponse(
        {**_key_json(created.info), "value": created.value},
        status_code=201,
        headers={"cache-control": "no-store"},
    )


@router.delete("/keys/{key_id}")
async def revoke_key(request: Request, key_id: str) -> dict[str, Any]:
    """Revoke a key of ``?tenant=``; never the key the request is signed with (400
    ``cannot_revoke_own_key``: the console would lock itself out)."""
    require_operator(request)
    if key_id == identity_of(request).api_key_id:
        raise InvalidRequestError(
            "This is the key you are signed in with: revoking it would lock you out. Sign in "
            "with another operator key to revoke it.",
            param="key_id",
            code="cannot_revoke_own_key",
        )
    admin = key_admin_of(request)
    tenant = _tenant_param(request.query_params.get("tenant"))
    try:
        removed = await admin_call(admin, "revoke", tenant, key_id)
    except KeysError:
        raise NotFoundError(f"No key '{key_id}' of tenant '{tenant}'.", param="key_id") from None
    return {"object": "gateway.api_key.deleted", "id": key_id, "deleted": bool(removed)}


def _limits_json(limits: BudgetLimits | None) -> dict[str, Any] | None:
    if limits is None:
        return None
    out: dict[str, Any] = {}
    for name in _LIMIT_NAMES:
        value = getattr(limits, name)
        out[name] = format(value, "f") if isinstance(value, Decimal) else value
    return out


async def _budget_view(request: Request, tenant: str) -> dict[str, Any]:
    gateway = gateway_of(request)
    spend = await gateway.store.get_spend(tenant, int(time.time()))
    policy = gateway.config.budgets
    return {
        "object": "gateway.budget",
        "tenant": tenant,
        "enforced": policy is not None,
        "enforcement": None if policy is not None else ENFORCE_HINT,
        "own": _limits_json(spend.limits),
        "effective": _limits_json(policy.limits_for(tenant, spend.limits)) if policy else None,
        "spend": {
            "day_tokens": spend.day_tokens,
            "day_cost_usd": format(spend.day_cost_usd, "f"),
            "month_tokens": spend.month_tokens,
            "month_cost_usd": format(spend.month_cost_usd, "f"),
        },
    }


@router.get("/budgets")
async def get_budget(request: Request) -> dict[str, Any]:
    """The tenant's own limits, the limits in effect and its UTC day and month spend."""
    return await _budget_view(request, scoped_tenant(request))


@router.get("/budgets/all")
async def all_budgets(request: Request) -> dict[str, Any]:
    """Every known tenant's spend against the limits in effect for it (operators only), the
    tenants over or near a limit first (:func:`~responses_gateway.usage.standing.standing`):
    one spend read per tenant, at most 16 at a time."""
    require_operator(request)
    from responses_gateway.usage.standing import STATES, standing

    gateway = gateway_of(request)
    policy = gateway.config.budgets
    now = int(time.time())
    gate = asyncio.Semaphore(16)

    async def one(tenant: str) -> dict[str, Any]:
        async with gate:
            spend = await gateway.store.get_spend(tenant, now)
        limits = policy.limits_for(tenant, spend.limits) if policy else spend.limits
        row = standing(tenant, spend, limits)
        row["own"] = spend.limits is not None
        return row

    rows = await asyncio.gather(*(one(t) for t in await known_tenants(request)))
    rows.sort(key=lambda r: (STATES.index(r["state"]), -(r["share"] or 0), r["tenant"]))
    return {
        "object": "list",
        "enforced": policy is not None,
        "enforcement": None if policy is not None else ENFORCE_HINT,
        "data": rows,
    }


@router.put("/budgets")
async def put_budget(request: Request) -> dict[str, Any]:
    """Replace the tenant's own limits (``null`` or absent: no limit of that kind; all absent
    removes them, so the configuration's limits apply)."""
    require_operator(request)
    tenant = _tenant_param(request.query_params.get("tenant"))
    body, _ = await read_json(request)
    try:
        limits = parse_limits(body, "budget")
    except BudgetError as exc:
        raise InvalidRequestError(str(exc), param="budget", code="invalid_value") from None
    await gateway_of(request).store.put_budget(tenant, limits)
    return await _budget_view(request, tenant)
