"""The overview's metrics rows and the request log's filtered reads, on both stores: health
counters in hour and five-minute rows (responses and refused requests), filters applied over the
whole log with a cursor to go on, live-tail reads, batch entry reads; on DynamoDB, the units a
day of five-minute rows costs to read."""

from __future__ import annotations

from decimal import Decimal

import pytest

from responses_gateway.store import _ledger
from responses_gateway.store.base import Store, UsageCounts, UsageEntry
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.usage.metrics import entry_stats
from responses_gateway.usage.records import (
    FINE_WIDTH,
    HOUR_WIDTH,
    REQUEST_SCAN,
    RequestQuery,
    log_cursor,
)

from .conftest import START

DAY = 86_400
T0 = int(START) - int(START) % DAY


def logged(
    tenant: str,
    rid: str,
    at_ms: int,
    *,
    status: str = "completed",
    model: str = "m1",
    key: str = "k1",
    duration: int = 120,
    deployment: str = "",
    failed_on: str = "",
    thread: str = "",
) -> UsageEntry:
    extra: dict[str, object] = {"ended_ms": at_ms, "duration_ms": duration, "ttft_ms": 40}
    if deployment:
        extra["deployment"] = deployment
    if failed_on:
        extra["attempts_failed"] = [{"deployment": failed_on, "kind": "server_error"}]
    if thread:
        extra["client"] = {"thread_id": thread}
    counted = status != "refused"
    return UsageEntry(
        tenant=tenant,
        response_id=rid,
        model=model,
        ended_at=at_ms // 1000,
        status=status,
        api_key_id=key,
        counts=UsageCounts(
            input_tokens=10 if counted else 0,
            output_tokens=5 if counted else 0,
            model_calls=int(counted),
            responses=int(counted),
            cost_usd=Decimal("0.002") if counted else Decimal(0),
        ),
        extra=extra,
    )


async def write(store: Store, entry: UsageEntry) -> None:
    if entry.status == "refused":
        await store.log_request(entry)
    else:
        assert await store.record_usage(entry)


async def test_metrics_rows_hold_counters_of_responses_and_refusals(
    store: Store, tenant: str
) -> None:
    at = (T0 + 5 * 3600 + 7 * 60) * 1000  # 05:07 UTC
    await write(store, logged(tenant, "r1", at, duration=120, deployment="d1"))
    await write(store, logged(tenant, "r2", at + 1000, status="failed", duration=1234))
    await write(store, logged(tenant, "r3", at + 2000, deployment="d2", failed_on="d1"))
    refused = logged(tenant, "q1", at + 3000, status="refused", duration=3)
    refused.extra["refusals_dropped"] = 4
    await write(store, refused)

    for width, start in ((HOUR_WIDTH, T0 + 5 * 3600), (FINE_WIDTH, T0 + 5 * 3600 + 300)):
        rows = [
            r for r in await store.read_metrics(T0, T0 + DAY, width=width) if r.tenant == tenant
        ]
        assert [(r.hour_start, r.width, r.model, r.api_key_id) for r in rows] == [
            (start, width, "m1", "k1")
        ]
        (row,) = rows
        assert (row.counts.input_tokens, row.counts.responses) == (30, 3)
        assert row.counts.cost_usd == Decimal("0.006")
        assert row.stats == {
            "s:completed": 2,
            "s:failed": 1,
            "s:refused": 5,  # the one written and the four its gate dropped
            "l:117": 2,  # 120 ms, binned
            "l:1217": 1,  # 1234 ms
            "l:3": 1,
            "t:38": 4,  # 40 ms
            "d:d1": 1,
            "d:d2": 1,
            "x:d1": 1,
            "o:failover": 1,
        }
    assert not [
        r
        for r in await store.read_metrics(T0, T0 + 5 * 3600, width=HOUR_WIDTH)
        if r.tenant == tenant
    ]  # the hours before hold nothing of this tenant
    assert not [
        r
        for r in await store.read_metrics(T0 + 5 * 3600 + 600, T0 + DAY, width=FINE_WIDTH)
        if r.tenant == tenant
    ]  # nor the five minutes after


async def test_metrics_rows_are_per_bucket_model_and_key(store: Store, tenant: str) -> None:
    base = (T0 + 3600) * 1000
    await write(store, logged(tenant, "a", base, model="m1", key="k1"))
    await write(store, logged(tenant, "b", base + 301_000, model="m1", key="k1"))
    await write(store, logged(tenant, "c", base + 2000, model="m2", key="k#2"))
    fine = {
        (r.hour_start - T0, r.model, r.api_key_id, r.stats["s:completed"])
        for r in await store.read_metrics(T0, T0 + DAY, width=FINE_WIDTH)
        if r.tenant == tenant
    }
    assert fine == {(3600, "m1", "k1", 1), (3900, "m1", "k1", 1), (3600, "m2", "k#2", 1)}
    hours = {
        (r.hour_start - T0, r.model, r.stats["s:completed"])
        for r in await store.read_metrics(T0, T0 + DAY, width=HOUR_WIDTH)
        if r.tenant == tenant
    }
    assert hours == {(3600, "m1", 2), (3600, "m2", 1)}


async def test_read_metrics_refuses_ranges_past_its_rows_days(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.read_metrics(T0, T0 + 4 * DAY, width=FINE_WIDTH)
    with pytest.raises(ValueError):
        await store.read_metrics(T0, T0 + 63 * DAY, width=HOUR_WIDTH)
    assert await store.read_metrics(T0, T0, width=FINE_WIDTH) == []


async def test_usage_report_rows_keep_only_responses(store: Store, tenant: str) -> None:
    refused = logged(tenant, "q", (T0 + 60) * 1000, status="refused")
    await write(store, refused)
    assert not [r for r in await store.read_usage(T0, T0 + DAY) if r.tenant == tenant]
    (row,) = [
        r for r in await store.read_metrics(T0, T0 + DAY, width=HOUR_WIDTH) if r.tenant == tenant
    ]
    assert row.stats == entry_stats(refused) and row.counts.responses == 0


async def test_a_status_filter_finds_refusals_across_the_whole_log(
    store: Store, tenant: str
) -> None:
    # As issue #30's log: two refused records among the oldest, past the newest page of 100.
    for i in range(150):
        status = "refused" if i in (3, 10) else "completed"
        await write(store, logged(tenant, f"r{i:03d}", (T0 + i) * 1000, status=status))
    page = await store.list_requests(
        tenant, limit=100, query=RequestQuery(statuses=frozenset({"refused"}))
    )
    assert [e.response_id for e in page.entries] == ["r010", "r003"]
    assert page.next_cursor is None and page.examined == 150
    unfiltered = await store.list_requests(tenant, limit=100)
    assert len(unfiltered.entries) == 100 and unfiltered.next_cursor is not None


async def test_a_filtered_read_stops_after_its_scan_and_goes_on_from_its_cursor(
    store: Store, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scan = 60  # REQUEST_SCAN's role, smaller: the same paging with fewer writes
    assert REQUEST_SCAN == 1000
    monkeypatch.setattr(_ledger, "REQUEST_SCAN", scan)
    total = scan + 20
    for i in range(total):
        model = "rare" if i in (0, 5) else "common"
        await write(store, logged(tenant, f"r{i:05d}", (T0 + i) * 1000, model=model))
    query = RequestQuery(model="rare")
    first = await store.list_requests(tenant, limit=50, query=query)
    assert first.entries == [] and first.examined == scan
    assert first.next_cursor is not None  # searched this far
    rest = await store.list_requests(tenant, before=first.next_cursor, limit=50, query=query)
    assert [e.response_id for e in rest.entries] == ["r00005", "r00000"]
    assert rest.next_cursor is None and rest.examined == 20


async def test_filters_combine_with_a_time_range(store: Store, tenant: str) -> None:
    for i in range(6):
        await write(
            store,
            logged(
                tenant,
                f"r{i}",
                (T0 + i * 60) * 1000,
                status="failed" if i % 2 else "completed",
                deployment="east" if i < 3 else "west",
                failed_on="west" if i == 1 else "",
                thread="t-a" if i < 4 else "t-b",
                key="k1" if i != 2 else "k2",
            ),
        )

    async def ids(**conditions: object) -> list[str]:
        page = await store.list_requests(tenant, query=RequestQuery(**conditions))  # type: ignore[arg-type]
        return [e.response_id for e in page.entries]

    assert await ids(statuses=frozenset({"failed"})) == ["r5", "r3", "r1"]
    assert await ids(deployment="west") == ["r5", "r4", "r3", "r1"]  # answered or failed there
    assert await ids(session="t-b") == ["r5", "r4"]
    assert await ids(api_key_id="k2") == ["r2"]
    window = {"since_ms": (T0 + 60) * 1000, "until_ms": (T0 + 240) * 1000}
    assert await ids(**window) == ["r3", "r2", "r1"]
    assert await ids(statuses=frozenset({"completed"}), **window) == ["r2"]
    assert await ids(since_ms=(T0 + 60) * 1000 + 1) == ["r5", "r4", "r3", "r2"]


async def test_a_live_tail_reads_only_what_is_newer(store: Store, tenant: str) -> None:
    entries = [logged(tenant, f"r{i}", (T0 + i) * 1000) for i in range(5)]
    for e in entries[:3]:
        await write(store, e)
    newest = log_cursor(entries[2])
    assert (await store.list_requests(tenant, after=newest)).entries == []
    for e in entries[3:]:
        await write(store, e)
    page = await store.list_requests(tenant, after=newest)
    assert [e.response_id for e in page.entries] == ["r4", "r3"]
    assert page.next_cursor is None and page.examined == 2
    gap = await store.list_requests(tenant, after=newest, limit=1)
    assert [e.response_id for e in gap.entries] == ["r4"]
    assert gap.next_cursor == log_cursor(entries[4])  # the rest of the gap: before it, after r2
    filled = await store.list_requests(tenant, after=newest, before=gap.next_cursor)
    assert [e.response_id for e in filled.entries] == ["r3"]


async def test_usage_entries_are_read_in_one_batch(store: Store, tenant: str) -> None:
    for i in range(3):
        await write(store, logged(tenant, f"r{i}", (T0 + i) * 1000))
    found = await store.get_usage_entries(tenant, ["r2", "missing", "r0", "r2"])
    assert [e.response_id for e in found] == ["r2", "r0"]
    assert await store.get_usage_entries(f"{tenant}-other", ["r0"]) == []


@pytest.mark.dynamodb_only
async def test_a_day_of_five_minute_rows_is_one_eventually_consistent_query(
    store: DynamoStore, tenant: str
) -> None:
    day = T0 - 2 * DAY  # a day no other test writes
    for i in range(12):
        await write(store, logged(tenant, f"r{i}", (day + i * 300) * 1000))
    store.meter.reset()
    rows = await store.read_metrics(day, day + DAY, width=FINE_WIDTH)
    assert len([r for r in rows if r.tenant == tenant]) == 12
    units = store.meter.snapshot()["read_metrics"]
    assert units.round_trips == 1
    assert units.read_units <= 2  # 12 rows of about 300 bytes: one 4 KB unit, at half price
