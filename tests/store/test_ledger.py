"""The usage ledger and budgets (store._ledger) against moto: exact counters, idempotency,
concurrency, hour buckets, spend totals, limits, and the units one recorded response costs."""

from __future__ import annotations

import asyncio
from decimal import Decimal

from responses_gateway.store.base import BudgetLimits, UsageCounts, UsageEntry
from responses_gateway.store.dynamo import DynamoStore

from .conftest import START

HOUR = 3600
T0 = int(START) - int(START) % 86_400  # midnight UTC of the clock's day


def entry(
    tenant: str,
    rid: str,
    *,
    at: int = T0 + 5 * HOUR,
    model: str = "m1",
    key: str = "k1",
    tokens: tuple[int, int] = (10, 5),
    cost: str = "0.001",
) -> UsageEntry:
    return UsageEntry(
        tenant=tenant,
        response_id=rid,
        model=model,
        ended_at=at,
        status="completed",
        api_key_id=key,
        counts=UsageCounts(
            input_tokens=tokens[0],
            cached_tokens=2,
            output_tokens=tokens[1],
            reasoning_tokens=1,
            model_calls=2,
            tool_calls=1,
            responses=1,
            cost_usd=Decimal(cost),
        ),
    )


async def test_record_usage_counts_once_per_response(store: DynamoStore, tenant: str) -> None:
    assert await store.record_usage(entry(tenant, "resp_1")) is True
    assert await store.record_usage(entry(tenant, "resp_1")) is False  # a retried writer
    buckets = [b for b in await store.read_usage(T0, T0 + 86_400) if b.tenant == tenant]
    assert len(buckets) == 1
    counts = buckets[0].counts
    assert (counts.input_tokens, counts.cached_tokens, counts.output_tokens) == (10, 2, 5)
    assert (counts.reasoning_tokens, counts.model_calls, counts.tool_calls) == (1, 2, 1)
    assert (counts.responses, counts.cost_usd) == (1, Decimal("0.001"))
    assert buckets[0].hour_start == T0 + 5 * HOUR
    assert (buckets[0].model, buckets[0].api_key_id) == ("m1", "k1")
    spend = await store.get_spend(tenant, T0 + 6 * HOUR)
    assert (spend.day_tokens, spend.month_tokens) == (15, 15)
    assert spend.day_cost_usd == spend.month_cost_usd == Decimal("0.001")
    logged = await store.get_usage_entry(tenant, "resp_1")
    assert logged is not None and logged.counts == entry(tenant, "resp_1").counts


async def test_record_usage_concurrent_responses_sum_exactly(
    store: DynamoStore, tenant: str
) -> None:
    results = await asyncio.gather(
        *(store.record_usage(entry(tenant, f"resp_{i}", tokens=(i, 1))) for i in range(20))
    )
    assert all(results)
    buckets = [b for b in await store.read_usage(T0, T0 + 86_400) if b.tenant == tenant]
    assert sum(b.counts.input_tokens for b in buckets) == sum(range(20))
    assert sum(b.counts.responses for b in buckets) == 20
    spend = await store.get_spend(tenant, T0)
    assert spend.day_tokens == sum(range(20)) + 20
    assert spend.day_cost_usd == Decimal("0.020")


async def test_read_usage_splits_hours_models_and_keys(store: DynamoStore, tenant: str) -> None:
    await store.record_usage(entry(tenant, "a", at=T0 + 1 * HOUR, model="m1", key="k1"))
    await store.record_usage(entry(tenant, "b", at=T0 + 1 * HOUR + 59, model="m2", key="k1"))
    await store.record_usage(entry(tenant, "c", at=T0 + 3 * HOUR, model="m1", key="k#2"))
    await store.record_usage(entry(tenant, "d", at=T0 + 86_400 + 10, model="m1", key="k1"))
    rows = {
        (b.hour_start - T0, b.model, b.api_key_id)
        for b in await store.read_usage(T0, T0 + 2 * 86_400)
        if b.tenant == tenant
    }
    assert rows == {
        (HOUR, "m1", "k1"),
        (HOUR, "m2", "k1"),
        (3 * HOUR, "m1", "k#2"),
        (86_400, "m1", "k1"),
    }
    later = [b for b in await store.read_usage(T0 + 2 * HOUR, T0 + 86_400) if b.tenant == tenant]
    assert [(b.hour_start - T0, b.api_key_id) for b in later] == [(3 * HOUR, "k#2")]


async def test_spend_is_per_day_and_month(store: DynamoStore, tenant: str) -> None:
    await store.record_usage(entry(tenant, "a", at=T0 + HOUR))
    await store.record_usage(entry(tenant, "b", at=T0 + 86_400 + HOUR))
    day2 = await store.get_spend(tenant, T0 + 86_400 + 2 * HOUR)
    assert day2.day_tokens == 15
    assert day2.month_tokens == 30  # 2023-11-14 and 2023-11-15: one month
    next_month = T0 + 20 * 86_400  # December
    assert (await store.get_spend(tenant, next_month)).month_tokens == 0


async def test_budget_limits_round_trip(store: DynamoStore, tenant: str) -> None:
    assert await store.get_budget(tenant) is None
    limits = BudgetLimits(daily_tokens=100, monthly_cost_usd=Decimal("2.5"))
    await store.put_budget(tenant, limits)
    assert await store.get_budget(tenant) == limits
    await store.put_budget(tenant, None)
    assert await store.get_budget(tenant) is None


async def test_record_usage_costs_one_round_trip_and_bounded_units(
    store: DynamoStore, tenant: str
) -> None:
    store.meter.reset()
    await store.record_usage(entry(tenant, "units"))
    units = store.meter.snapshot()["record_usage"]
    assert units.round_trips == 1
    assert units.write_units == 10  # 5 items of under 1 KB, billed twice in a transaction


async def test_request_log_pages_newest_first_per_tenant(store: DynamoStore, tenant: str) -> None:
    for i in range(5):
        logged = entry(tenant, f"resp_log{i}", at=T0 + i)
        logged.extra = {"ended_ms": (T0 + i) * 1000 + 7, "client": {"thread_id": "t1"}}
        await store.record_usage(logged)
    await store.record_usage(entry(f"{tenant}-other", "resp_elsewhere"))
    store.meter.reset()
    first = await store.list_requests(tenant, limit=2)
    assert store.meter.snapshot()["list_requests"].round_trips == 1
    assert [e.response_id for e in first.entries] == ["resp_log4", "resp_log3"]
    assert first.entries[0].extra["client"] == {"thread_id": "t1"}
    assert first.entries[0].counts.total_tokens == 15
    second = await store.list_requests(tenant, before=first.next_cursor, limit=2)
    assert [e.response_id for e in second.entries] == ["resp_log2", "resp_log1"]
    last = await store.list_requests(tenant, before=second.next_cursor, limit=2)
    assert [e.response_id for e in last.entries] == ["resp_log0"]
    assert last.next_cursor is None
    assert (await store.list_requests(f"{tenant}-nobody")).entries == []


async def test_request_log_without_ms_orders_by_seconds(store: DynamoStore, tenant: str) -> None:
    await store.record_usage(entry(tenant, "resp_b", at=T0 + 2))
    await store.record_usage(entry(tenant, "resp_a", at=T0 + 9))
    page = await store.list_requests(tenant)
    assert [e.response_id for e in page.entries] == ["resp_a", "resp_b"]
    assert page.next_cursor is None
