"""An operator's reads across tenants: one list read per tenant, merged into one newest-first
page (the "All tenants" scope of the console's request log, traces and conversations).

Owns how per-tenant pages merge so that paging the merged list neither skips nor repeats a
row: every list the store keeps is ordered by a cursor that means the same in every tenant's
list (the request log's ``<end ms>#<response id>``, the trace index's ``<received
ms>#<trace id>``, conversations' ``<created s>#<id>``), so one ``before`` bound serves every
tenant, and the merged page keeps only rows at or above the highest point any tenant's read
stopped at (below it, that tenant's rows are not known yet). Each row gains its ``tenant``.

Reads go through the store interface only, at most :data:`CONCURRENCY` at a time; the cost is
one bounded read per tenant (see benchmarks/README.md, "Cross-tenant reads"). It never writes
and knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from responses_gateway.store.base import ConversationPage, Store, TracePage
from responses_gateway.usage.records import RequestPage, RequestQuery, UsageEntry, log_cursor

__all__ = [
    "CONCURRENCY",
    "TRACE_SCAN",
    "Merged",
    "TraceQuery",
    "conversations_across",
    "filtered_traces",
    "merge_pages",
    "requests_across",
    "traces_across",
]

CONCURRENCY = 16
"""Most tenant reads in flight at once."""
TRACE_SCAN = 500
"""Most traces one filtered trace read examines (a page that stops there carries a cursor)."""
_TRACE_BATCH = 100

Row = TypeVar("Row")
P = TypeVar("P")


@dataclass(slots=True)
class Merged(Generic[Row]):
    """One merged page: its rows newest first, and the cursor of the next (older) page."""

    rows: list[Row]
    next_cursor: str | None


def merge_pages(
    pages: Sequence[tuple[list[tuple[str, Row]], str | None]], limit: int
) -> Merged[Row]:
    """Merge per-tenant pages (each: ``(cursor, row)`` pairs newest first and the cursor its
    read stopped at, None when it read to the end) into at most ``limit`` rows.

    Rows below the highest stop are left for the next page, whose ``before`` is that stop (a
    ``before`` bound is exclusive, and the row at a stop belongs to this page)."""
    stops = [stop for _, stop in pages if stop is not None]
    floor = max(stops) if stops else None
    rows = sorted(
        (pair for found, _ in pages for pair in found if floor is None or pair[0] >= floor),
        key=lambda pair: pair[0],
        reverse=True,
    )
    if len(rows) > limit:
        return Merged([row for _, row in rows[:limit]], rows[limit - 1][0])
    return Merged([row for _, row in rows], floor)


async def _each(tenants: Sequence[str], read: Callable[[str], Awaitable[P]]) -> list[P]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(tenant: str) -> P:
        async with gate:
            return await read(tenant)

    return list(await asyncio.gather(*(one(t) for t in tenants)))


async def requests_across(
    store: Store,
    tenants: Sequence[str],
    *,
    before: str | None,
    after: str | None,
    limit: int,
    query: RequestQuery,
) -> RequestPage:
    """One page of every listed tenant's request log, newest first (``examined``: summed)."""

    async def read(tenant: str) -> RequestPage:
        return await store.list_requests(
            tenant, before=before, after=after, limit=limit, query=query
        )

    pages = await _each(tenants, read)
    merged: Merged[UsageEntry] = merge_pages(
        [([(log_cursor(e), e) for e in page.entries], page.next_cursor) for page in pages], limit
    )
    return RequestPage(merged.rows, merged.next_cursor, sum(page.examined for page in pages))


async def traces_across(
    store: Store, tenants: Sequence[str], *, before: str | None, limit: int
) -> TracePage:
    """One page of every listed tenant's traces, most recently received first, each naming
    its ``tenant``."""

    async def read(tenant: str) -> tuple[str, TracePage]:
        return tenant, await store.list_traces(tenant, before=before, limit=limit)

    pages = await _each(tenants, read)
    merged: Merged[dict[str, Any]] = merge_pages(
        [
            ([(_trace_cursor(t), {**t, "tenant": tenant}) for t in page.traces], page.next_cursor)
            for tenant, page in pages
        ],
        limit,
    )
    return TracePage(merged.rows, merged.next_cursor)


def _trace_cursor(summary: dict[str, Any]) -> str:
    """A trace summary's place in the trace index (as both stores key it)."""
    return f"{int(summary.get('received_ms') or 0):013d}#{summary.get('id')}"


async def conversations_across(
    store: Store, tenants: Sequence[str], *, before: str | None, limit: int
) -> ConversationPage:
    """One page of every listed tenant's conversations, newest first (each keeps its
    ``tenant``)."""
    pages = await _each(
        tenants, lambda tenant: store.list_conversations(tenant, before=before, limit=limit)
    )
    merged = merge_pages(
        [
            ([(f"{c.created_at:010d}#{c.id}", c) for c in page.conversations], page.next_cursor)
            for page in pages
        ],
        limit,
    )
    return ConversationPage(merged.rows, merged.next_cursor)


@dataclass(frozen=True, slots=True)
class TraceQuery:
    """What a trace list keeps: every condition set must hold (None/False: any)."""

    workflow: str | None = None
    """Text in the workflow name, in any case."""
    errors: bool = False
    """Only traces with an error span or a triggered guardrail."""
    since_ms: int | None = None
    """Traces received at or after this instant (Unix milliseconds)."""
    until_ms: int | None = None
    """Traces received before this instant."""

    @property
    def filters(self) -> bool:
        return bool(self.workflow or self.errors)

    def start(self, before: str | None) -> str | None:
        """The ``before`` a read starts from: the page's, or the end of the time range."""
        if self.until_ms is None:
            return before
        bound = f"{self.until_ms:013d}"
        return bound if before is None else min(before, bound)

    def matches(self, summary: dict[str, Any]) -> bool:
        name = str(summary.get("workflow_name") or "").lower()
        if self.workflow and self.workflow.lower() not in name:
            return False
        return not self.errors or int(summary.get("errors") or 0) > 0


async def filtered_traces(
    read: Callable[[str | None, int], Awaitable[TracePage]],
    query: TraceQuery,
    *,
    before: str | None,
    limit: int,
) -> TracePage:
    """A page of the traces ``query`` keeps, newest first, from ``read(before, limit)`` (one
    tenant's list, or :func:`traces_across`): reads in batches until ``limit`` match, the time
    range ends, or :data:`TRACE_SCAN` were examined (then the cursor goes on from there)."""
    if not query.filters and query.since_ms is None:
        return await read(query.start(before), limit)
    cursor = query.start(before)
    kept: list[dict[str, Any]] = []
    examined = 0
    while True:
        page = await read(cursor, limit if not query.filters else _TRACE_BATCH)
        for summary in page.traces:
            if query.since_ms is not None and int(summary.get("received_ms") or 0) < query.since_ms:
                return TracePage(kept, None)
            examined += 1
            if query.matches(summary):
                kept.append(summary)
                if len(kept) == limit:
                    return TracePage(kept, _trace_cursor(summary))
        cursor = page.next_cursor
        if cursor is None:
            return TracePage(kept, None)
        if examined >= TRACE_SCAN:
            return TracePage(kept, cursor)
