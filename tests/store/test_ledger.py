"""The usage ledger and budgets: contract tests run against both stores (DynamoDB on moto and
SQLite): exact counters, idempotency, concurrency, hour buckets, spend totals, limits, logged
content; plus the units one recorded response costs on DynamoDB (``dynamodb_only``)."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from responses_gateway.store.base import BudgetLimits, Store, UsageCounts, UsageEntry
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


async def test_record_usage_counts_once_per_response(store: Store, tenant: str) -> None:
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


async def test_record_usage_concurrent_responses_sum_exactly(store: Store, tenant: str) -> None:
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


async def test_read_usage_splits_hours_models_and_keys(store: Store, tenant: str) -> None:
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


async def test_spend_is_per_day_and_month(store: Store, tenant: str) -> None:
    await store.record_usage(entry(tenant, "a", at=T0 + HOUR))
    await store.record_usage(entry(tenant, "b", at=T0 + 86_400 + HOUR))
    day2 = await store.get_spend(tenant, T0 + 86_400 + 2 * HOUR)
    assert day2.day_tokens == 15
    assert day2.month_tokens == 30  # 2023-11-14 and 2023-11-15: one month
    next_month = T0 + 20 * 86_400  # December
    assert (await store.get_spend(tenant, next_month)).month_tokens == 0


async def test_budget_limits_round_trip(store: Store, tenant: str) -> None:
    assert await store.get_budget(tenant) is None
    limits = BudgetLimits(daily_tokens=100, monthly_cost_usd=Decimal("2.5"))
    await store.put_budget(tenant, limits)
    assert await store.get_budget(tenant) == limits
    await store.put_budget(tenant, None)
    assert await store.get_budget(tenant) is None


@pytest.mark.dynamodb_only
async def test_record_usage_costs_one_round_trip_and_bounded_units(
    store: DynamoStore, tenant: str
) -> None:
    store.meter.reset()
    await store.record_usage(entry(tenant, "units"))
    units = store.meter.snapshot()["record_usage"]
    assert units.round_trips == 1
    assert units.write_units == 12  # 6 items of under 1 KB, billed twice in a transaction


CONTENT = {
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ],
    "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "yo"}]}
    ],
    "truncated": False,
}


async def test_logged_content_is_read_with_one_record_never_with_a_page(
    store: Store, tenant: str
) -> None:
    with_content = entry(tenant, "with")
    with_content.content = CONTENT
    assert await store.record_usage(with_content) is True
    assert await store.record_usage(entry(tenant, "without", at=T0 + 5 * HOUR + 1)) is True
    logged = await store.get_usage_entry(tenant, "with")
    assert logged is not None and logged.content == CONTENT
    assert logged == with_content
    plain = await store.get_usage_entry(tenant, "without")
    assert plain is not None and plain.content is None
    page = await store.list_requests(tenant, limit=10)
    assert [(e.response_id, e.content) for e in page.entries] == [("without", None), ("with", None)]


@pytest.mark.dynamodb_only
async def test_logged_content_costs_its_compressed_size_in_units(
    store: DynamoStore, tenant: str
) -> None:
    text = " ".join(f"word{i}" for i in range(6000))  # ~60 KB raw, compresses to about 13 KB
    logged = entry(tenant, "big")
    logged.content = {
        "input": [{"type": "message", "content": text}],
        "output": [],
        "truncated": False,
    }
    store.meter.reset()
    await store.record_usage(logged)
    units = store.meter.snapshot()["record_usage"]
    from responses_gateway.store._codec import encode_json

    blob = encode_json(logged.content)[0]
    assert units.write_units == 12 + 2 * (len(blob) // 1024 + 1)  # the marker grows by the blob
    assert (await store.get_usage_entry(tenant, "big")) == logged


async def test_record_usage_again_with_other_counts_changes_nothing(
    store: Store, tenant: str
) -> None:
    assert await store.record_usage(entry(tenant, "once", tokens=(10, 5))) is True
    assert await store.record_usage(entry(tenant, "once", tokens=(1000, 1000), cost="9")) is False
    (bucket,) = [b for b in await store.read_usage(T0, T0 + 86_400) if b.tenant == tenant]
    assert (bucket.counts.input_tokens, bucket.counts.output_tokens) == (10, 5)
    assert (bucket.counts.responses, bucket.counts.cost_usd) == (1, Decimal("0.001"))
    spend = await store.get_spend(tenant, T0 + 5 * HOUR)
    assert (spend.day_tokens, spend.month_tokens, spend.day_cost_usd) == (15, 15, Decimal("0.001"))
    logged = await store.get_usage_entry(tenant, "once")
    assert logged == entry(tenant, "once", tokens=(10, 5))


async def test_concurrent_records_of_one_response_count_it_once(store: Store, tenant: str) -> None:
    results = await asyncio.gather(*(store.record_usage(entry(tenant, "same")) for _ in range(10)))
    assert sorted(results) == [False] * 9 + [True]
    spend = await store.get_spend(tenant, T0)
    assert (spend.day_tokens, spend.day_cost_usd) == (15, Decimal("0.001"))


async def test_get_spend_carries_the_tenants_own_limits_and_zeros_when_unused(
    store: Store, tenant: str
) -> None:
    empty = await store.get_spend(tenant, T0)
    assert (empty.day_tokens, empty.month_tokens, empty.limits) == (0, 0, None)
    assert empty.day_cost_usd == empty.month_cost_usd == Decimal(0)
    limits = BudgetLimits(
        daily_tokens=10,
        monthly_tokens=1000,
        daily_cost_usd=Decimal("0.5"),
        monthly_cost_usd=Decimal("12.25"),
    )
    await store.put_budget(tenant, limits)
    await store.record_usage(entry(tenant, "a"))
    spend = await store.get_spend(tenant, T0 + 23 * HOUR)
    assert spend.limits == limits
    assert (spend.day_tokens, spend.month_tokens) == (15, 15)
    assert (await store.get_spend(f"{tenant}-other", T0)).limits is None
    await store.put_budget(tenant, BudgetLimits())  # empty limits remove them
    assert await store.get_budget(tenant) is None


async def test_usage_entries_and_totals_are_per_tenant(store: Store, tenant: str) -> None:
    other = f"{tenant}-b"
    await store.record_usage(entry(tenant, "shared_id"))
    assert await store.record_usage(entry(other, "shared_id", tokens=(1, 1))) is True
    assert await store.get_usage_entry(f"{tenant}-c", "shared_id") is None
    assert (await store.get_spend(tenant, T0)).day_tokens == 15
    assert (await store.get_spend(other, T0)).day_tokens == 2
    rows = {(b.tenant, b.counts.input_tokens) for b in await store.read_usage(T0, T0 + 86_400)}
    assert {(tenant, 10), (other, 1)} <= rows


async def test_read_usage_longer_than_the_limit_raises_value_error(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.read_usage(T0, T0 + 63 * 86_400)
    assert await store.read_usage(T0 + 10, T0 + 10) == []


async def test_request_log_pages_newest_first_per_tenant(store: Store, tenant: str) -> None:
    for i in range(5):
        logged = entry(tenant, f"resp_log{i}", at=T0 + i)
        logged.extra = {"ended_ms": (T0 + i) * 1000 + 7, "client": {"thread_id": "t1"}}
        await store.record_usage(logged)
    await store.record_usage(entry(f"{tenant}-other", "resp_elsewhere"))
    first = await store.list_requests(tenant, limit=2)
    assert [e.response_id for e in first.entries] == ["resp_log4", "resp_log3"]
    assert first.entries[0].extra["client"] == {"thread_id": "t1"}
    assert first.entries[0].counts.total_tokens == 15
    second = await store.list_requests(tenant, before=first.next_cursor, limit=2)
    assert [e.response_id for e in second.entries] == ["resp_log2", "resp_log1"]
    last = await store.list_requests(tenant, before=second.next_cursor, limit=2)
    assert [e.response_id for e in last.entries] == ["resp_log0"]
    assert last.next_cursor is None
    assert (await store.list_requests(f"{tenant}-nobody")).entries == []


async def test_request_log_without_ms_orders_by_seconds(store: Store, tenant: str) -> None:
    await store.record_usage(entry(tenant, "resp_b", at=T0 + 2))
    await store.record_usage(entry(tenant, "resp_a", at=T0 + 9))
    page = await store.list_requests(tenant)
    assert [e.response_id for e in page.entries] == ["resp_a", "resp_b"]
    assert page.next_cursor is None


@pytest.mark.dynamodb_only
async def test_request_log_page_is_one_query(store: DynamoStore, tenant: str) -> None:
    for i in range(3):
        await store.record_usage(entry(tenant, f"resp_q{i}", at=T0 + i))
    store.meter.reset()
    page = await store.list_requests(tenant, limit=2)
    assert len(page.entries) == 2
    assert store.meter.snapshot()["list_requests"].round_trips == 1


async def test_log_request_lists_a_refused_request_without_counting_it(
    store: Store, tenant: str
) -> None:
    await store.record_usage(entry(tenant, "resp_counted", at=T0 + 1))
    refused = UsageEntry(
        tenant=tenant,
        response_id="req_refused",
        model="m1",
        ended_at=T0 + 2,
        status="refused",
        counts=UsageCounts(),
        api_key_id="k1",
        extra={"http_status": 400, "error_code": "invalid_value", "ended_ms": (T0 + 2) * 1000},
    )
    await store.log_request(refused)
    page = await store.list_requests(tenant)
    assert [e.response_id for e in page.entries] == ["req_refused", "resp_counted"]
    assert page.entries[0] == refused
    assert await store.get_usage_entry(tenant, "req_refused") == refused
    spend = await store.get_spend(tenant, T0 + 3)
    assert spend.day_tokens == 15  # the counted response only
    rows = [b for b in await store.read_usage(T0, T0 + 86_400) if b.tenant == tenant]
    assert sum(b.counts.responses for b in rows) == 1


@pytest.mark.dynamodb_only
async def test_log_request_is_one_batch_of_two_small_items_and_two_row_adds(
    store: DynamoStore, tenant: str
) -> None:
    store.meter.reset()
    await store.log_request(
        UsageEntry(
            tenant=tenant,
            response_id="req_u",
            model="",
            ended_at=T0,
            status="refused",
            counts=UsageCounts(),
        )
    )
    units = store.meter.snapshot()["log_request"]
    assert (units.round_trips, units.write_units) == (3, 4)  # in parallel: hour and 5-min rows
