"""An operator's reads across tenants: each tenant's list read and merged into one
newest-first page (the "All tenants" scope of the console's request log, traces and
conversations).

Owns how per-tenant lists merge so that paging the merged list neither skips nor repeats a row
and reads little: every list the store keeps is ordered by a cursor that means the same in every
tenant's list (the request log's ``<end ms>#<response id>``, the trace index's ``<received
ms>#<trace id>``, conversations' ``<created s>#<id>``), so one ``before`` bound serves every
tenant. :func:`merge_across` is a k-way merge: a first read of a few rows per tenant (about twice
the page's share of each), then a row is taken only while no tenant that may hold a newer one
has run out of read rows; such a tenant is read again (at most :data:`ROUNDS` times per page:
then the page ends at the highest point a tenant's read stopped, which the next page starts
from). Each row gains its ``tenant``.

Reads go through the store interface only, at most :data:`CONCURRENCY` at a time: at least one
bounded read per tenant and page (see benchmarks/README.md, ``console_tenants.py``). It never
writes and knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from responses_gateway.store.base import Conversation, ConversationPage, Store, TracePage
from responses_gateway.usage.records import RequestPage, RequestQuery, UsageEntry, log_cursor

__all__ = [
    "CONCURRENCY",
    "ROUNDS",
    "TRACE_SCAN",
    "Merged",
    "TenantRead",
    "TraceQuery",
    "conversations_across",
    "filtered_traces",
    "merge_across",
    "requests_across",
    "traces_across",
]

CONCURRENCY = 16
"""Most tenant reads in flight at once."""
ROUNDS = 4
"""Most times one page reads again the tenants that ran out of read rows."""
TRACE_SCAN = 500
"""Most traces one filtered trace read examines (a page that stops there carries a cursor)."""
_TRACE_BATCH = 100

Row = TypeVar("Row")
P = TypeVar("P")


@dataclass(slots=True)
class Merged(Generic[Row]):
    """One merged page: its rows newest first, the cursor of the next (older) page, and how
    many tenant reads it took."""

    rows: list[Row]
    next_cursor: str | None
    reads: int = 0


TenantRead = Callable[[str, str | None, int], Awaitable[tuple[list[tuple[str, Row]], str | None]]]
"""``read(tenant, before, limit)``: at most ``limit`` of the tenant's ``(cursor, row)`` pairs
older than ``before``, newest first, and the cursor the read stopped at (None: nothing older is
left). A read may return fewer rows than ``limit`` and still a cursor (a filtered read that
examined its most)."""


async def merge_across(
    tenants: Sequence[str], read: TenantRead[Row], *, before: str | None, limit: int
) -> Merged[Row]:
    """At most ``limit`` rows of every tenant older than ``before``, newest first."""
    limit = max(1, limit)
    first = max(2, min(limit, -(-2 * limit // max(1, len(tenants)))))
    buffers: dict[str, deque[tuple[str, Row]]] = {}
    stops: dict[str, str | None] = {}
    reads = 0

    async def fill(names: Sequence[str], size: int, start: dict[str, str | None]) -> None:
        nonlocal reads
        found = await _each(names, lambda t: read(t, start[t], size))
        reads += len(names)
        for tenant, (rows, stop) in zip(names, found, strict=True):
            buffers.setdefault(tenant, deque()).extend(rows)
            stops[tenant] = stop

    await fill(tenants, first, dict.fromkeys(tenants, before))
    out: list[tuple[str, Row]] = []
    rounds = 0
    while len(out) < limit:
        empty = [t for t in tenants if not buffers[t] and stops[t] is not None]
        if empty and rounds < ROUNDS:
            rounds += 1
            await fill(empty, max(first, limit - len(out)), stops)
            continue
        if empty:  # out of rounds: end the page where the furthest of them stopped
            floor = max(str(stops[t]) for t in empty)
            while len(out) < limit and (head := _newest(buffers)) and head[0] >= floor:
                out.append(buffers[head[1]].popleft())
            if len(out) == limit:
                break
            return Merged([row for _, row in out], floor, reads)
        head = _newest(buffers)
        if head is None:
            return Merged([row for _, row in out], None, reads)
        out.append(buffers[head[1]].popleft())
    more = any(buffers.values()) or any(stop is not None for stop in stops.values())
    return Merged([row for _, row in out], out[-1][0] if more else None, reads)


def _newest(buffers: dict[str, deque[tuple[str, Row]]]) -> tuple[str, str] | None:
    """The newest buffered row's cursor and its tenant, or None when none is left."""
    heads = [(rows[0][0], tenant) for tenant, rows in buffers.items() if rows]
    return max(heads) if heads else None


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
    examined = 0

    async def read(
        tenant: str, start: str | None, size: int
    ) -> tuple[list[tuple[str, UsageEntry]], str | None]:
        nonlocal examined
        page = await store.list_requests(tenant, before=start, after=after, limit=size, query=query)
        examined += page.examined
        return [(log_cursor(e), e) for e in page.entries], page.next_cursor

    merged = await merge_across(tenants, read, before=before, limit=limit)
    return RequestPage(merged.rows, merged.next_cursor, examined)


async def traces_across(
    store: Store, tenants: Sequence[str], *, before: str | None, limit: int
) -> TracePage:
    """One page of every listed tenant's traces, most recently received first, each naming
    its ``tenant``."""

    async def read(
        tenant: str, start: str | None, size: int
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        page = await store.list_traces(tenant, before=start, limit=size)
        rows = [(_trace_cursor(t), {**t, "tenant": tenant}) for t in page.traces]
        return rows, page.next_cursor

    merged = await merge_across(tenants, read, before=before, limit=limit)
    return TracePage(merged.rows, merged.next_cursor)


def _trace_cursor(summary: dict[str, Any]) -> str:
    """A trace summary's place in the trace index (as both stores key it)."""
    return f"{int(summary.get('received_ms') or 0):013d}#{summary.get('id')}"


async def conversations_across(
    store: Store, tenants: Sequence[str], *, before: str | None, limit: int
) -> ConversationPage:
    """One page of every listed tenant's conversations, newest first (each keeps its
    ``tenant``)."""

    async def read(
        tenant: str, start: str | None, size: int
    ) -> tuple[list[tuple[str, Conversation]], str | None]:
        page = await store.list_conversations(tenant, before=start, limit=size)
        rows = [(f"{c.created_at:010d}#{c.id}", c) for c in page.conversations]
        return rows, page.next_cursor

    merged = await merge_across(tenants, read, before=before, limit=limit)
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
