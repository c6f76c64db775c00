"""Agent traces (TraceStore) on both stores: tenant scoping, newest-first pages, spans before
their trace, oversized spans; on DynamoDB, one Query per page."""

from __future__ import annotations

import pytest

from responses_gateway.store._traces import MAX_SPAN_BYTES
from responses_gateway.store.base import Store
from responses_gateway.store.dynamo import DynamoStore


def _span(trace_id: str, span_id: str, started: str, **data: object) -> dict[str, object]:
    return {
        "object": "trace.span",
        "id": span_id,
        "trace_id": trace_id,
        "parent_id": None,
        "started_at": started,
        "ended_at": started,
        "span_data": {"type": "response", **data},
        "error": None,
    }


async def test_traces_round_trip_per_tenant(store: Store, tenant: str) -> None:
    late = _span("trace_1", "span_b", "2026-01-01T00:00:02Z", response_id="resp_2")
    early = _span("trace_1", "span_a", "2026-01-01T00:00:01Z", response_id="resp_1")
    await store.put_traces(tenant, [], [late])  # spans may arrive before their trace
    trace = {"object": "trace", "id": "trace_1", "workflow_name": "wf", "group_id": "g"}
    await store.put_traces(tenant, [trace], [early])
    found, spans = await store.get_trace(tenant, "trace_1")
    assert found == trace
    assert [s["id"] for s in spans] == ["span_a", "span_b"]
    assert await store.get_trace(f"{tenant}-other", "trace_1") == (None, [])
    page = await store.list_traces(tenant)
    assert [(t["id"], t["workflow_name"], t["group_id"]) for t in page.traces] == [
        ("trace_1", "wf", "g")
    ]
    assert page.next_cursor is None


async def test_trace_pages_newest_first(store: Store, tenant: str, clock: object) -> None:
    for i in range(3):
        await store.put_traces(tenant, [{"object": "trace", "id": f"trace_{i}"}], [])
        clock.advance(1)  # type: ignore[attr-defined]
    first = await store.list_traces(tenant, limit=2)
    assert [t["id"] for t in first.traces] == ["trace_2", "trace_1"]
    rest = await store.list_traces(tenant, before=first.next_cursor, limit=2)
    assert [t["id"] for t in rest.traces] == ["trace_0"] and rest.next_cursor is None


async def test_oversized_span_keeps_its_ids_and_type(store: Store, tenant: str) -> None:
    huge = _span("trace_big", "span_big", "2026-01-01T00:00:00Z", response_id="resp_9")
    huge["span_data"]["input"] = "x" * (MAX_SPAN_BYTES + 1)  # type: ignore[index]
    await store.put_traces(tenant, [], [huge])
    _, spans = await store.get_trace(tenant, "trace_big")
    assert spans[0]["span_data"] == {
        "type": "response",
        "response_id": "resp_9",
        "truncated": True,
    }
    assert spans[0]["id"] == "span_big" and spans[0]["trace_id"] == "trace_big"


@pytest.mark.dynamodb_only
async def test_trace_page_is_one_query_and_one_batch_of_tallies(
    store: DynamoStore, tenant: str
) -> None:
    await store.put_traces(tenant, [{"object": "trace", "id": "trace_q"}], [])
    store.meter.reset()
    page = await store.list_traces(tenant, limit=2)
    assert [t["id"] for t in page.traces] == ["trace_q"]
    assert store.meter.snapshot()["list_traces"].round_trips == 2


async def test_trace_list_shows_each_traces_figures(store: Store, tenant: str) -> None:
    root = _span("trace_f", "span_root", "2026-01-01T00:00:00.000000+00:00")
    root["span_data"] = {"type": "agent", "name": "Agent"}
    root["ended_at"] = "2026-01-01T00:00:02.500000+00:00"
    call = _span("trace_f", "span_call", "2026-01-01T00:00:00.100000+00:00", response_id="r1")
    call["span_data"]["usage"] = {"input_tokens": 30, "output_tokens": 5}  # type: ignore[index]
    tool = _span("trace_f", "span_tool", "2026-01-01T00:00:01+00:00")
    tool["span_data"] = {"type": "function", "name": "add"}
    tool["error"] = {"message": "Error running tool", "data": {}}
    guard = _span("trace_f", "span_guard", "2026-01-01T00:00:01.5+00:00")
    guard["span_data"] = {"type": "guardrail", "name": "no_math", "triggered": True}
    quiet = _span("trace_f", "span_ok", "2026-01-01T00:00:02+00:00")
    quiet["span_data"] = {"type": "guardrail", "name": "ok", "triggered": False}
    await store.put_traces(tenant, [], [call, tool])  # spans first, in two batches
    await store.put_traces(tenant, [{"object": "trace", "id": "trace_f"}], [guard, quiet, root])
    await store.put_traces(tenant, [{"object": "trace", "id": "trace_empty"}], [])
    page = await store.list_traces(tenant)
    figures = {
        t["id"]: (t["spans"], t["errors"], t["tokens"], t["duration_ms"]) for t in page.traces
    }
    assert figures == {"trace_f": (5, 2, 35, 2500), "trace_empty": (0, 0, 0, None)}
    (listed,) = [t for t in page.traces if t["id"] == "trace_f"]
    assert listed["started_at"] == "2026-01-01T00:00:00.000000+00:00"
    assert listed["ended_at"] == "2026-01-01T00:00:02.500000+00:00"


async def test_a_response_span_links_its_response_to_the_trace(store: Store, tenant: str) -> None:
    span = _span("trace_l", "span_r", "2026-01-01T00:00:00Z", response_id="resp_linked")
    await store.put_traces(tenant, [], [span])
    assert await store.trace_of_response(tenant, "resp_linked") == "trace_l"
    assert await store.trace_of_response(tenant, "resp_other") is None
    assert await store.trace_of_response(f"{tenant}-x", "resp_linked") is None
