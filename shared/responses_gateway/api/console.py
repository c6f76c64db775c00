"""Routes of ``/v1/console``: the console's reads (request log, responses, conversations,
traces), tenant scoped.

Owns who may read which tenant's log (a key reads its own tenant; an operator key, see
:func:`~responses_gateway.api.usage.require_operator`, reads any tenant through ``?tenant=``),
the JSON shape of a request-log record, and the filters applied to one page of the log. It reads
only through :class:`~responses_gateway.store.base.LedgerStore`; it never writes. Stored
responses, their input items and conversations are read through the public APIs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from responses_gateway.api.deps import UntypedRoute, gateway_of, identity_of
from responses_gateway.errors import InvalidRequestError, NotFoundError, PermissionDeniedError
from responses_gateway.usage.records import UsageEntry

__all__ = ["FILTERS", "files", "record_json", "router", "scoped_tenant"]

router = APIRouter(prefix="/v1/console", route_class=UntypedRoute)
files = APIRouter(prefix="/console", route_class=UntypedRoute)
"""The console's static files: no key needed (they hold no data)."""


@files.get("", include_in_schema=False)
async def console_root() -> Response:
    return RedirectResponse("/console/", status_code=308)


@files.get("/{name:path}", include_in_schema=False)
async def console_file(request: Request) -> Response:
    """A file of the console (the path read from the request: a typed ``{name:path}``
    parameter would make FastAPI import ``pydantic.v1`` on the first console request)."""
    from responses_gateway.console import asset  # the files are read on first use

    name = str(request.path_params["name"])
    found = asset(name or "index.html")
    if found is None:
        raise NotFoundError(f"No console file '{name}'.", param="name")
    body, media = found
    return Response(body, media_type=media, headers={"cache-control": "no-cache"})


_MAX_LIMIT = 200
_MAX_JOINED = 100
"""Most responses a trace read joins to its spans."""


def _limit(request: Request) -> int:
    try:
        limit = int(request.query_params.get("limit") or 50)
    except ValueError:
        limit = 0
    if not 1 <= limit <= _MAX_LIMIT:
        raise InvalidRequestError(
            f"Invalid 'limit': expected an integer between 1 and {_MAX_LIMIT}.",
            param="limit",
            code="invalid_value",
        )
    return limit


def _session_of(record: dict[str, Any]) -> set[str]:
    client = record.get("client") or {}
    return {str(value) for value in client.values()}


FILTERS: dict[str, Any] = {
    "model": lambda record, value: record["model"] == value,
    "status": lambda record, value: record["status"] == value,
    "api_key_id": lambda record, value: record["api_key_id"] == value,
    "session": lambda record, value: value in _session_of(record),
}
"""Query parameter → predicate over a record (:func:`record_json`); ``session`` matches any of
the client's ids (session, thread, turn, request or trace id)."""


def scoped_tenant(request: Request) -> str:
    """The tenant whose records a console read returns: ``?tenant=`` for operator keys, the
    key's own tenant otherwise.

    Raises:
        AuthenticationError: no valid key (401).
        PermissionDeniedError: a non-operator key asked for another tenant (403).
    """
    identity = identity_of(request)
    asked = request.query_params.get("tenant") or identity.tenant
    if asked != identity.tenant and identity.tenant not in gateway_of(request).config.operators:
        raise PermissionDeniedError(
            "You have insufficient permissions for this operation: only operator keys read "
            "other tenants.",
            code="insufficient_permissions",
        )
    return asked


def record_json(entry: UsageEntry) -> dict[str, Any]:
    """A request-log record as the console reads it."""
    counts = entry.counts
    return {
        **entry.extra,
        "object": "gateway.request",
        "deployment": entry.extra.get("deployment", ""),
        "id": entry.response_id,
        "tenant": entry.tenant,
        "ended_at": entry.ended_at,
        "model": entry.model,
        "status": entry.status,
        "api_key_id": entry.api_key_id,
        "background": entry.background,
        "usage": {
            "input_tokens": counts.input_tokens,
            "cached_tokens": counts.cached_tokens,
            "output_tokens": counts.output_tokens,
            "reasoning_tokens": counts.reasoning_tokens,
            "total_tokens": counts.total_tokens,
            "model_calls": counts.model_calls,
            "tool_calls": counts.tool_calls,
            "cost_usd": format(counts.cost_usd, "f"),
        },
    }


@router.get("/me")
async def whoami(request: Request) -> dict[str, Any]:
    identity = identity_of(request)
    operators = gateway_of(request).config.operators
    return {
        "tenant": identity.tenant,
        "api_key_id": identity.api_key_id,
        "operator": identity.tenant in operators,
    }


@router.get("/requests")
async def list_requests(request: Request) -> dict[str, Any]:
    tenant = scoped_tenant(request)
    params = request.query_params
    limit = _limit(request)
    page = await gateway_of(request).store.list_requests(
        tenant, before=params.get("before") or None, limit=limit
    )
    wanted = [(FILTERS[name], params[name]) for name in FILTERS if params.get(name)]
    data = [record_json(entry) for entry in page.entries]
    data = [r for r in data if all(match(r, value) for match, value in wanted)]
    return {
        "object": "list",
        "tenant": tenant,
        "data": data,
        "next_cursor": page.next_cursor,
        "has_more": page.next_cursor is not None,
    }


@router.get("/requests/{response_id}")
async def get_request(request: Request, response_id: str) -> dict[str, Any]:
    tenant = scoped_tenant(request)
    entry = await gateway_of(request).store.get_usage_entry(tenant, response_id)
    if entry is None:
        raise NotFoundError(f"No request-log record for '{response_id}'.", param="response_id")
    return _with_content(entry)


def _with_content(entry: UsageEntry) -> dict[str, Any]:
    """One record's read: the record, and its ``content`` when it was logged (the tenant is in
    ``request_log.content_tenants``; ``{"input", "output", "truncated"}``)."""
    record = record_json(entry)
    if entry.content is not None:
        record["content"] = entry.content
    return record


@router.get("/responses/{response_id}")
async def get_response(request: Request, response_id: str) -> dict[str, Any]:
    """A response as the timeline page shows it, in one call: the stored record (its response,
    own input items, chain, conversation; None when not stored) and its request-log record
    (None while it runs); 404 only when neither exists."""
    tenant = scoped_tenant(request)
    store = gateway_of(request).store
    record, entry = await asyncio.gather(
        store.get_response(tenant, response_id), store.get_usage_entry(tenant, response_id)
    )
    if record is None and entry is None:
        raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
    stored = None
    if record is not None:
        stored = {
            "response": record.response,
            "input_items": record.input_items,
            "chain": record.chain,
            "conversation_id": record.conversation_id,
        }
    return {
        "object": "gateway.response_view",
        "tenant": tenant,
        "stored": stored,
        "request": _with_content(entry) if entry is not None else None,
    }


@router.get("/conversations")
async def list_conversations(request: Request) -> dict[str, Any]:
    """The tenant's conversations, newest first (one store read per page)."""
    tenant = scoped_tenant(request)
    page = await gateway_of(request).store.list_conversations(
        tenant, before=request.query_params.get("before") or None, limit=_limit(request)
    )
    return {
        "object": "list",
        "tenant": tenant,
        "data": [c.to_object() for c in page.conversations],
        "next_cursor": page.next_cursor,
        "has_more": page.next_cursor is not None,
    }


@router.get("/conversations/{conversation_id}/items")
async def conversation_items(request: Request, conversation_id: str) -> dict[str, Any]:
    """A page of a conversation's items, oldest first (``after``: the last item id of the
    page before), as stored (tool results whole); the conversation itself with it."""
    tenant = scoped_tenant(request)
    store = gateway_of(request).store
    conversation = await store.get_conversation(tenant, conversation_id)
    if conversation is None:
        raise NotFoundError(
            f"Conversation with id '{conversation_id}' not found.", param="conversation_id"
        )
    try:
        page = await store.list_items(
            tenant,
            conversation_id,
            after=request.query_params.get("after") or None,
            limit=_limit(request),
            order="asc",
        )
    except LookupError:
        raise NotFoundError(
            f"Conversation with id '{conversation_id}' not found.", param="conversation_id"
        ) from None
    return {
        "object": "list",
        "tenant": tenant,
        "conversation": conversation.to_object(),
        "data": page.data,
        "has_more": page.has_more,
        "last_id": page.data[-1].get("id") if page.data else None,
    }


@router.get("/traces")
async def list_traces(request: Request) -> dict[str, Any]:
    tenant = scoped_tenant(request)
    page = await gateway_of(request).store.list_traces(
        tenant, before=request.query_params.get("before") or None, limit=_limit(request)
    )
    return {
        "object": "list",
        "tenant": tenant,
        "data": page.traces,
        "next_cursor": page.next_cursor,
        "has_more": page.next_cursor is not None,
    }


@router.get("/traces/{trace_id}")
async def get_trace(request: Request, trace_id: str) -> dict[str, Any]:
    """A trace with its spans; each ``response`` span whose response the gateway served gains
    ``gateway``: the stored input items and output, or the request-log record when not stored."""
    tenant = scoped_tenant(request)
    store = gateway_of(request).store
    trace, spans = await store.get_trace(tenant, trace_id)
    if trace is None and not spans:
        raise NotFoundError(f"Trace with id '{trace_id}' not found.", param="trace_id")
    ids = list(
        dict.fromkeys(
            str(rid) for span in spans if (rid := (span.get("span_data") or {}).get("response_id"))
        )
    )[:_MAX_JOINED]
    records = {r.id: r for r in await store.get_responses(tenant, ids)}
    missing = [rid for rid in ids if rid not in records]
    entries = await asyncio.gather(*(store.get_usage_entry(tenant, rid) for rid in missing))
    logged = {rid: e for rid, e in zip(missing, entries, strict=True) if e is not None}
    for span in spans:
        rid = (span.get("span_data") or {}).get("response_id")
        if rid in records:
            record = records[rid]
            span["gateway"] = {
                "input_items": record.input_items,
                "output": record.output,
                "status": record.status,
                "usage": record.response.get("usage"),
            }
        elif rid in logged:
            span["gateway"] = {"request": record_json(logged[rid])}
    return {"object": "gateway.trace", "tenant": tenant, "trace": trace, "spans": spans}
