"""Reads across tenants (``store.fanout``): merged pages never skip or repeat a row, whatever
the tenants' lists hold or where their reads stopped, and read a few rows per tenant; on both
stores, paging the merged request log, traces and conversations walks every tenant's rows once,
newest first; traces filter."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from responses_gateway.store.base import Conversation, Store, UsageCounts, UsageEntry
from responses_gateway.store.fanout import (
    TraceQuery,
    conversations_across,
    filtered_traces,
    merge_across,
    requests_across,
    traces_across,
)
from responses_gateway.usage.records import RequestQuery


class _Lists:
    """Tenants' lists in memory, read as a store reads them; ``empty_reads`` rows per read a
    filter examines without a match (a read that returns no row and a cursor)."""

    def __init__(self, rows: dict[str, list[str]], empty_reads: int = 0) -> None:
        self.rows = {t: sorted(r, reverse=True) for t, r in rows.items()}
        self.empty_reads = empty_reads
        self.reads: list[tuple[str, str | None, int]] = []

    async def __call__(
        self, tenant: str, before: str | None, limit: int
    ) -> tuple[list[tuple[str, str]], str | None]:
        self.reads.append((tenant, before, limit))
        older = [r for r in self.rows[tenant] if before is None or r < before]
        if self.empty_reads and older:
            self.empty_reads -= 1
            return [], older[0] + "~"  # examined its most, matched none: go on from here
        page = older[:limit]
        return [(r, f"{tenant}:{r}") for r in page], page[-1] if len(older) > limit else None


async def _walk(lists: _Lists, tenants: list[str], limit: int) -> list[str]:
    seen: list[str] = []
    before = None
    for _ in range(100):
        merged = await merge_across(tenants, lists, before=before, limit=limit)
        assert len(merged.rows) <= limit
        seen += merged.rows
        before = merged.next_cursor
        if before is None:
            return seen
    raise AssertionError("the pages never ended")


async def test_a_k_way_merge_walks_every_row_once_newest_first_reading_little() -> None:
    # one busy tenant and quiet ones; cursors are unique across tenants, as the stores' are
    hot = [f"{i:03d}#hot" for i in range(0, 300, 2)]
    quiet = {f"q{n}": [f"{i:03d}#q{n}" for i in range(n, 300, 97)] for n in range(1, 8)}
    rows = {"hot": hot, **quiet}
    lists = _Lists(rows)
    seen = await _walk(lists, sorted(rows), limit=10)
    everything = sorted((f"{t}:{r}" for t, found in rows.items() for r in found), reverse=True)
    assert seen == sorted(seen, key=lambda row: row.split(":")[1], reverse=True)
    assert sorted(seen) == sorted(everything) and len(seen) == len(set(seen))
    first = lists.reads[: len(rows)]
    assert {limit for _, _, limit in first} == {3}  # about twice the page's share of each
    pages = -(-len(everything) // 10)
    assert len(lists.reads) <= pages * (len(rows) + 2)  # a read per tenant, and few more


async def test_reads_that_find_nothing_end_the_page_where_they_stopped() -> None:
    lists = _Lists({"a": ["09", "05", "01"], "b": ["08", "07", "06", "04"]}, empty_reads=6)
    seen = await _walk(lists, ["a", "b"], limit=3)
    assert sorted(seen) == sorted(["a:09", "a:05", "a:01", "b:08", "b:07", "b:06", "b:04"])
    assert seen == sorted(seen, key=lambda row: row.split(":")[1], reverse=True)


def _entry(tenant: str, i: int, at_ms: int, status: str = "completed") -> UsageEntry:
    return UsageEntry(
        tenant=tenant,
        response_id=f"resp_{tenant}_{i:03d}",
        model="m",
        ended_at=at_ms // 1000,
        status=status,
        counts=UsageCounts(input_tokens=1, responses=1, cost_usd=Decimal(0)),
        extra={"ended_ms": at_ms},
    )


async def test_paging_every_tenants_log_walks_each_row_once_newest_first(
    store: Store, tenant: str, clock: Any
) -> None:
    tenants = [f"{tenant}-a", f"{tenant}-b", f"{tenant}-c"]
    base = int(clock() * 1000)
    written = []
    for i in range(21):
        entry = _entry(
            tenants[i % 3 if i < 15 else 0],
            i,
            base + i * 10,
            "refused" if i % 4 == 0 else "completed",
        )
        written.append(entry)
        await store.record_usage(entry)
    seen: list[str] = []
    before = None
    while True:
        page = await requests_across(
            store, tenants, before=before, after=None, limit=4, query=RequestQuery()
        )
        seen += [e.response_id for e in page.entries]
        before = page.next_cursor
        if before is None:
            break
    assert seen == [e.response_id for e in reversed(written)]
    refused = await requests_across(
        store,
        tenants,
        before=None,
        after=None,
        limit=50,
        query=RequestQuery(statuses=frozenset({"refused"})),
    )
    assert [e.response_id for e in refused.entries] == [
        e.response_id for e in reversed(written) if e.status == "refused"
    ]


async def test_traces_and_conversations_of_every_tenant_page_and_name_their_tenant(
    store: Store, tenant: str, clock: Any
) -> None:
    tenants = [f"{tenant}-x", f"{tenant}-y"]
    for i in range(5):
        owner = tenants[i % 2]
        await store.put_traces(
            owner, [{"object": "trace", "id": f"tr_{i}", "workflow_name": f"w{i}"}], []
        )
        await store.create_conversation(
            Conversation(tenant=owner, id=f"conv_{i}", created_at=int(clock()), expires_at=0), []
        )
        clock.advance(1)
    first = await traces_across(store, tenants, before=None, limit=3)
    rest = await traces_across(store, tenants, before=first.next_cursor, limit=3)
    assert [(t["id"], t["tenant"]) for t in first.traces + rest.traces] == [
        (f"tr_{i}", tenants[i % 2]) for i in reversed(range(5))
    ]
    assert rest.next_cursor is None
    page = await conversations_across(store, tenants, before=None, limit=10)
    assert [(c.id, c.tenant) for c in page.conversations] == [
        (f"conv_{i}", tenants[i % 2]) for i in reversed(range(5))
    ]
    odd = await filtered_traces(
        lambda before, limit: traces_across(store, tenants, before=before, limit=limit),
        TraceQuery(workflow="W3"),
        before=None,
        limit=10,
    )
    assert [t["id"] for t in odd.traces] == ["tr_3"]
