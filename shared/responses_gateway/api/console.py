"""Routes of ``/v1/console``: the console's reads (request log, responses, conversations,
traces), tenant scoped, and ``/console``, its files.

Owns who may read which tenant's log (a key reads its own tenant; an operator key, see
:func:`~responses_gateway.api.usage.require_operator`, reads any tenant through ``?tenant=``,
and every tenant's lists at once with ``?tenant=*``: one read per known tenant, merged by
:mod:`responses_gateway.store.fanout`, each row naming its tenant),
the JSON shape of a request-log record, the request log's query parameters (turned into one
:class:`~responses_gateway.usage.records.RequestQuery` the store applies over the whole log),
what a response's page joins (its stored record, its request-log record, its trace, whether it
was deleted or expired), and a trace's join to its model calls. It reads only through the store
interface; it never writes. The files route answers ``GET`` and ``HEAD`` as
:func:`responses_gateway.console.serve` says (hashed URLs, ETags, gzip, security headers).
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from responses_gateway.api.deps import UntypedRoute, gateway_of, identity_of
from responses_gateway.errors import InvalidRequestError, NotFoundError, PermissionDeniedError
from responses_gateway.store.base import TracePage
from responses_gateway.store.fanout import (
    TraceQuery,
    conversations_across,
    filtered_traces,
    requests_across,
    traces_across,
)
from responses_gateway.usage.records import (
    HOUR_WIDTH,
    RequestPage,
    RequestQuery,
    UsageEntry,
    log_cursor,
)
from responses_gateway.usage.requestlog import UNAUTHENTICATED

__all__ = [
    "ALL_TENANTS",
    "STATUSES",
    "files",
    "is_operator",
    "known_tenants",
    "list_scope",
    "parse_request_query",
    "record_json",
    "router",
    "scoped_tenant",
]

router = APIRouter(prefix="/v1/console", route_class=UntypedRoute)
files = APIRouter(prefix="/console", route_class=UntypedRoute)
"""The console's static files: no key needed (they hold no data)."""

ALL_TENANTS = "*"
"""``?tenant=`` of an operator's list read covering every tenant."""
_TENANT_DAYS = 7
"""Days of hour rows the tenant list reads (tenants with traffic lately)."""

STATUSES = ("completed", "incomplete", "failed", "cancelled", "refused")
"""The statuses a request-log entry ends with (the status filter's choices)."""


@files.api_route("", methods=["GET", "HEAD"], include_in_schema=False)
async def console_root() -> Response:
    return RedirectResponse("/console/", status_code=308)


@files.api_route("/{name:path}", methods=["GET", "HEAD"], include_in_schema=False)
async def console_file(request: Request) -> Response:
    """A file of the console (the path read from the request: a typed ``{name:path}``
    parameter would make FastAPI import ``pydantic.v1`` on the first console request)."""
    from responses_gateway.console import serve  # the files are read on first use

    name = str(request.path_params["name"]) or "index.html"
    served = serve(
        name,
        version=request.query_params.get("v"),
        if_none_match=request.headers.get("if-none-match"),
        accept_encoding=request.headers.get("accept-encoding", ""),
        head=request.method == "HEAD",
    )
    if served is None:
        raise NotFoundError(f"No console file '{name}'.", param="name")
    return Response(served.body, status_code=served.status, headers=served.headers)


_MAX_LIMIT = 200
_MAX_JOINED = 100
"""Most responses a trace read joins to its spans."""


def _limit(request: Request, default: int = 50) -> int:
    try:
        limit = int(request.query_params.get("limit") or default)
    except ValueError:
        limit = 0
    if not 1 <= limit <= _MAX_LIMIT:
        raise InvalidRequestError(
            f"Invalid 'limit': expected an integer between 1 and {_MAX_LIMIT}.",
            param="limit",
            code="invalid_value",
        )
    return limit


def is_operator(request: Request) -> bool:
    """Whether the request's key is an operator's."""
    return identity_of(request).tenant in gateway_of(request).config.operators


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


async def list_scope(request: Request) -> tuple[str, list[str] | None]:
    """The scope of a list read: ``(tenant, None)`` for one tenant (:func:`scoped_tenant`), or
    ``("*", tenants)`` for an operator's ``?tenant=*``: every tenant :func:`known_tenants`
    finds."""
    if request.query_params.get("tenant") == ALL_TENANTS and is_operator(request):
        since = _seconds_to_ms(request.query_params.get("since"), "since")
        return ALL_TENANTS, await known_tenants(
            request, since=None if since is None else since // 1000
        )
    return scoped_tenant(request), None


async def known_tenants(request: Request, *, since: int | None = None) -> list[str]:
    """The tenants an operator can pick, sorted: its own, those of the administered keys, and
    those with traffic in the last :data:`_TENANT_DAYS` days, or since ``since`` (Unix seconds)
    when that is earlier, up to the ledger's longest read (one read of their hour rows;
    refused requests with bad keys included, as ``(unauthenticated)``, last)."""
    identity = identity_of(request)
    now = int(time.time())
    start = now - now % HOUR_WIDTH - (_TENANT_DAYS - 1) * 86_400
    if since is not None:
        start = max(min(start, since - since % HOUR_WIDTH), now - now % 86_400 - 61 * 86_400)
    gateway = gateway_of(request)
    rows, keyed = await asyncio.gather(
        gateway.store.read_metrics(start, now + 1, width=HOUR_WIDTH), _key_tenants(request)
    )
    found = {identity.tenant, *keyed, *(row.tenant for row in rows)}
    found.discard("")
    ordered = sorted(found - {UNAUTHENTICATED})
    if UNAUTHENTICATED in found:
        ordered.append(UNAUTHENTICATED)
    return ordered


async def _key_tenants(request: Request) -> set[str]:
    """Tenants of the administered keys (none when keys are not administered here)."""
    from responses_gateway.api.admin import admin_call, key_admin_of
    from responses_gateway.errors import GatewayError

    try:
        admin = key_admin_of(request)
        found = await admin_call(admin, "list", None)
    except GatewayError:
        return set()
    return {info.tenant for info in found}


def _seconds_to_ms(raw: str | None, param: str) -> int | None:
    if not raw:
        return None
    try:
        return int(float(raw) * 1000)
    except ValueError:
        raise InvalidRequestError(
            f"Invalid '{param}': expected Unix seconds.", param=param, code="invalid_value"
        ) from None


def parse_request_query(params: Any) -> RequestQuery:
    """The request log's filters from query parameters: ``status`` (comma-separated, any
    case, from :data:`STATUSES`), ``model``, ``api_key_id``, ``deployment``, ``session``,
    ``since`` and ``until`` (Unix seconds), and ``q`` (a response id or text, see
    :attr:`~responses_gateway.usage.records.RequestQuery.text`).

    Raises:
        InvalidRequestError: an unknown status or a bad time (400, naming the parameter).
    """
    statuses = frozenset(
        part.strip().lower() for part in (params.get("status") or "").split(",") if part.strip()
    )
    unknown = sorted(statuses - set(STATUSES))
    if unknown:
        raise InvalidRequestError(
            f"Invalid 'status': '{unknown[0]}'. Use one of {', '.join(STATUSES)}.",
            param="status",
            code="invalid_value",
        )
    return RequestQuery(
        statuses=statuses,
        model=params.get("model") or None,
        api_key_id=params.get("api_key_id") or None,
        deployment=params.get("deployment") or None,
        session=params.get("session") or None,
        since_ms=_seconds_to_ms(params.get("since"), "since"),
        until_ms=_seconds_to_ms(params.get("until"), "until"),
        text=(params.get("q") or "").strip()[:200] or None,
    )


def record_json(entry: UsageEntry) -> dict[str, Any]:
    """A request-log record as the console reads it (``cursor``: its place in the log, what a
    live tail passes as ``after``)."""
    counts = entry.counts
    return {
        **entry.extra,
        "object": "gateway.request",
        "deployment": entry.extra.get("deployment", ""),
        "id": entry.response_id,
        "cursor": log_cursor(entry),
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
    gateway = gateway_of(request)
    return {
        "tenant": identity.tenant,
        "api_key_id": identity.api_key_id,
        "operator": identity.tenant in gateway.config.operators,
        "budgets_enforced": gateway.config.budgets is not None,
    }


@router.get("/requests")
async def list_requests(request: Request) -> dict[str, Any]:
    """A page of the tenant's request log, newest first, filtered by the store over the whole
    log (``before``: an older page; ``after``: only what is newer than that cursor)."""
    tenant, tenants = await list_scope(request)
    params = request.query_params
    query = parse_request_query(params)
    store = gateway_of(request).store
    before, after = params.get("before") or None, params.get("after") or None
    if query.text and _RECORD_ID.fullmatch(query.text) and before is None and after is None:
        page = await _one_record(store, tenants or [tenant], query)
    elif tenants is None:
        page = await store.list_requests(
            tenant, before=before, after=after, limit=_limit(request), query=query
        )
    else:
        page = await requests_across(
            store, tenants, before=before, after=after, limit=_limit(request), query=query
        )
    return {
        "object": "list",
        "tenant": tenant,
        "data": [record_json(entry) for entry in page.entries],
        "next_cursor": page.next_cursor,
        "has_more": page.next_cursor is not None,
        "examined": page.examined,
    }


_RECORD_ID = re.compile(r"(?:resp|req)_[A-Za-z0-9]{8,}")
"""What a search for one record by its id looks like (a response's or a refused request's)."""


async def _one_record(store: Any, tenants: list[str], query: RequestQuery) -> RequestPage:
    """A search by record id: its entry read by key in each tenant of the scope (no scan),
    kept when the query's other filters keep it."""
    rid = str(query.text)
    found = await asyncio.gather(*(store.get_usage_entry(t, rid) for t in tenants))
    entries = [e for e in found if e is not None and query.matches(e)]
    for entry in entries:
        entry.content = None  # a page never carries content
    return RequestPage(entries, None, len([e for e in found if e is not None]))


@router.get("/requests/{response_id}")
async def get_request(request: Request, response_id: str) -> dict[str, Any]:
    tenant = scoped_tenant(request)
    entry = await gateway_of(request).store.get_usage_entry(tenant, response_id)
    if entry is None:
        raise NotFoundError(f"No request-log record for '{response_id}'.", param="response_id")
    return _with_content(entry)


def _with_content(entry: UsageEntry) -> dict[str, Any]:
    """One record's read: the record, and its ``content`` when it was logged (the tenant is in
    ``request_log.content_tenants``; ``{"input", "output", "request", "truncated"}``)."""
    record = record_json(entry)
    if entry.content is not None:
        record["content"] = entry.content
    return record


def _storage(stored: bool, entry: UsageEntry | None, retention_days: int | None) -> str:
    """Where a response's record stands: ``stored``; ``not_stored`` (``store: false``);
    ``refused`` (no response ran); ``deleted`` or ``expired`` (it was stored and is gone)."""
    if stored:
        return "stored"
    if entry is None or entry.status == "refused":
        return "refused" if entry is not None else "unknown"
    if entry.extra.get("stored") is False:
        return "not_stored"
    duration = entry.extra.get("duration_ms")
    started = entry.ended_at - (duration // 1000 if isinstance(duration, int) else 0)
    if retention_days is not None and time.time() >= started + retention_days * 86_400:
        return "expired"
    return "deleted"


@router.get("/responses/{response_id}")
async def get_response(request: Request, response_id: str) -> dict[str, Any]:
    """A response as its page shows it, in one call: the stored record (its response, own
    input items, chain, conversation; None when not stored), its request-log record (None while
    it runs), the trace whose span names it, and ``storage`` (``stored``, ``not_stored``,
    ``deleted``, ``expired``, ``refused``); 404 only when neither record exists."""
    tenant = scoped_tenant(request)
    store = gateway_of(request).store
    record, entry, trace_id = await asyncio.gather(
        store.get_response(tenant, response_id),
        store.get_usage_entry(tenant, response_id),
        store.trace_of_response(tenant, response_id),
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
        "trace_id": trace_id,
        "storage": _storage(record is not None, entry, getattr(store, "retention_days", None)),
    }


@router.get("/conversations")
async def list_conversations(request: Request) -> dict[str, Any]:
    """The tenant's conversations, newest first (one store read per page)."""
    tenant, tenants = await list_scope(request)
    store = gateway_of(request).store
    before = request.query_params.get("before") or None
    if tenants is None:
        page = await store.list_conversations(tenant, before=before, limit=_limit(request))
    else:
        page = await conversations_across(store, tenants, before=before, limit=_limit(request))
    return {
        "object": "list",
        "tenant": tenant,
        "data": [{**c.to_object(), "tenant": c.tenant} for c in page.conversations],
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
    """A page of the tenant's traces (or every tenant's), most recently received first, each
    with its figures (spans, errors, tokens, duration) and tenant; ``workflow`` (text of its
    name), ``errors=1`` (only failed ones), ``since`` and ``until`` (Unix seconds) filter."""
    tenant, tenants = await list_scope(request)
    store = gateway_of(request).store
    params = request.query_params

    async def read(before: str | None, limit: int) -> TracePage:
        if tenants is not None:
            return await traces_across(store, tenants, before=before, limit=limit)
        page = await store.list_traces(tenant, before=before, limit=limit)
        return TracePage([{**t, "tenant": tenant} for t in page.traces], page.next_cursor)

    query = TraceQuery(
        workflow=(params.get("workflow") or "").strip() or None,
        errors=params.get("errors") in ("1", "true"),
        since_ms=_seconds_to_ms(params.get("since"), "since"),
        until_ms=_seconds_to_ms(params.get("until"), "until"),
    )
    page = await filtered_traces(
        read, query, before=params.get("before") or None, limit=_limit(request)
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
    ``gateway``: its request-log record (status, tokens, cost, deployment) and, when stored,
    its input items, output and usage."""
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
    found, entries = await asyncio.gather(
        store.get_responses(tenant, ids), store.get_usage_entries(tenant, ids)
    )
    records = {r.id: r for r in found}
    logged = {e.response_id: e for e in entries}
    for span in spans:
        rid = (span.get("span_data") or {}).get("response_id")
        joined: dict[str, Any] = {}
        if rid in logged:
            joined["request"] = record_json(logged[rid])
        if rid in records:
            record = records[rid]
            joined.update(
                {
                    "input_items": record.input_items,
                    "output": record.output,
                    "status": record.status,
                    "usage": record.response.get("usage"),
                }
            )
        if joined:
            span["gateway"] = joined
    return {"object": "gateway.trace", "tenant": tenant, "trace": trace, "spans": spans}
