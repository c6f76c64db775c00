"""Routes of the console's figures: ``/v1/console/overview`` (health, spend and latency over a
range), ``/v1/console/usage`` (tokens and cost per day or hour, JSON or CSV), and what its pages
offer to pick from: ``/v1/console/tenants`` and ``/v1/console/models``.

Owns who sees which figures: an operator key sees every tenant (or one, ``?tenant=``) and the
deployments' live health; any other key sees its own tenant only, whatever it asks. The figures
come from the ledger's pre-aggregated rows (``LedgerStore.read_metrics`` and ``read_usage``:
reads bounded by the range and the number of tenants, models and keys, never by traffic) and
:mod:`responses_gateway.usage.overview` turns them into the answer. It never writes.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from responses_gateway.api.console import is_operator, known_tenants, scoped_tenant
from responses_gateway.api.deps import UntypedRoute, gateway_of, identity_of
from responses_gateway.usage.overview import (
    build_overview,
    build_usage,
    usage_csv,
    usage_window as parse_usage_window,
    window as parse_window,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/console", route_class=UntypedRoute)

_TENANT_DAYS = 7
"""Days of hour rows the tenant list reads (tenants with traffic lately)."""


def _figures_tenant(request: Request) -> str | None:
    """The tenant whose figures to show: an operator's ``?tenant=`` (none: every tenant), or
    the key's own tenant."""
    if is_operator(request):
        return request.query_params.get("tenant") or None
    return scoped_tenant(request)


async def _deployments(request: Request, seen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The deployments of the rows, and for an operator every configured one with its live
    health (one read of the shared health entries)."""
    if not is_operator(request):
        return seen
    gateway = gateway_of(request)
    by_id = {d["id"]: dict(d) for d in seen}
    for route in gateway.config.routes.values():
        for deployment in route.deployments:
            entry = by_id.setdefault(
                deployment.id, {"id": deployment.id, "answered": 0, "failed": 0}
            )
            entry["model"] = route.model
            entry["configured"] = True
    ids = [d for d, entry in by_id.items() if entry.get("configured")]
    health = await gateway.store.read_health(ids) if ids else {}
    now = time.time()
    for deployment_id, entry in by_id.items():
        found = health.get(deployment_id)
        entry["cooldown_until"] = (
            found.cooldown_until if found is not None and found.cooldown_until > now else None
        )
        entry["recent_failures"] = found.fails if found is not None else 0
    return sorted(by_id.values(), key=lambda d: d["id"])


@router.get("/overview")
async def overview(request: Request) -> dict[str, Any]:
    """Request rate, error rate, latency and time-to-first-token percentiles, tokens and cost
    over ``range`` (``1h``, ``6h``, ``24h``, ``7d``, ``30d``), per bucket and in all, broken
    down by tenant, key, model and deployment."""
    tenant = _figures_tenant(request)
    span = parse_window(request.query_params.get("range") or "24h", int(time.time()))
    rows = await gateway_of(request).store.read_metrics(span.start, span.end, width=span.width)
    answer = build_overview(rows, span, tenant=tenant)
    answer["deployments"] = await _deployments(request, answer["deployments"])
    answer["operator"] = is_operator(request)
    return answer


@router.get("/usage")
async def usage(request: Request) -> Any:
    """Tokens and cost per UTC day (``width=1d``) or hour (``1h``) from ``start`` to ``end``
    (Unix seconds; default the last 7 days), per ``group`` (``tenant``, ``api_key_id``,
    ``model``); ``format=csv`` answers the table as CSV."""
    params = request.query_params
    tenant = _figures_tenant(request)
    span, width = parse_usage_window(
        params.get("start"), params.get("end"), params.get("width"), int(time.time())
    )
    rows = await gateway_of(request).store.read_usage(span.start, span.end)
    table = build_usage(rows, span, group=params.get("group") or None, tenant=tenant)
    if params.get("format") == "csv":
        name = f"usage-{width}-{span.start}-{span.end}.csv"
        return Response(
            usage_csv(table),
            media_type="text/csv; charset=utf-8",
            headers={"content-disposition": f'attachment; filename="{name}"'},
        )
    return table


@router.get("/tenants")
async def tenants(request: Request) -> dict[str, Any]:
    """The tenants an operator can pick (:func:`~responses_gateway.api.console.known_tenants`);
    a tenant key gets its own only."""
    identity = identity_of(request)
    if not is_operator(request):
        return {"object": "list", "data": [identity.tenant]}
    return {"object": "list", "data": await known_tenants(request)}


@router.get("/models")
async def models(request: Request) -> dict[str, Any]:
    """The model names the configuration serves (providers' names, routes), and whether any
    other name goes somewhere (a default or catch-all provider, or prefixes)."""
    identity_of(request)  # a key is needed, as for every console read
    config = gateway_of(request).config
    names: dict[str, str] = {}
    for route in config.routes:
        names.setdefault(route, "route")
    prefixes: list[str] = []
    any_name = False
    for provider in config.providers:
        for model in provider.models:
            names.setdefault(model, provider.name)
        prefixes += [f"{prefix}*" for prefix in provider.prefixes]
        any_name = any_name or provider.catch_all
    return {
        "object": "list",
        "data": [{"id": name, "provider": owner} for name, owner in sorted(names.items())],
        "prefixes": sorted(set(prefixes)),
        "any_name": any_name,
    }
