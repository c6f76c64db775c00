"""Reads across tenants (``store.fanout``): merged pages never skip or repeat a row, whatever
the tenants' pages held or where their reads stopped; on both stores, paging the merged request
log, traces and conversations walks every tenant's rows once, newest first; traces filter."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from responses_gateway.store.base import Conversation, Store, UsageCounts, UsageEntry
from responses_gateway.store.fanout import (
    TraceQuery,
    conversations_across,
    filtered_traces,
    merge_pages,
    requests_across,
    traces_across,
)
from responses_gateway.usage.records import RequestQuery


def test_merge_keeps_rows_at_or_above_the_highest_stop_and_goes_on_from_it() -> None:
    a = ([("09", "a9"), ("07", "a7")], "07")  # a full page: older rows of a may exist
    b = ([("08", "b8"), ("05", "b5"), ("03", "b3")], None)  # b read to its end
    merged = merge_pages([a, b], limit=10)
    assert merged.rows == ["a9", "b8", "a7"] and merged.next_cursor == "07"
    assert merge_pages([a, b], limit=2).rows == ["a9", "b8"]
    assert merge_pages([a, b], limit=2).next_cursor == "08"
    assert merge_pages([([], None), b], limit=10).next_cursor is None


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
