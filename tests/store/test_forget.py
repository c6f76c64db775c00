"""Deleting forgets, on both stores: deleting a response removes what was logged of its items
(its request-log record's content, the content of the trace spans naming it) and keeps its
record and counters; deleting a conversation does the same for the responses whose turns it
holds; the spans of other responses stay whole."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

from responses_gateway.store.base import (
    Conversation,
    Store,
    StoredResponse,
    UsageCounts,
    UsageEntry,
)

SECRET = "the-user-said-pineapple"


def _entry(tenant: str, rid: str, at: int) -> UsageEntry:
    return UsageEntry(
        tenant=tenant,
        response_id=rid,
        model="m",
        ended_at=at,
        status="completed",
        counts=UsageCounts(input_tokens=7, output_tokens=3, responses=1, cost_usd=Decimal("0.5")),
        content={
            "input": [{"type": "message", "content": SECRET}],
            "output": [],
            "truncated": False,
        },
    )


def _span(rid: str, span_id: str) -> dict[str, Any]:
    return {
        "object": "trace.span",
        "id": span_id,
        "trace_id": "trace_f",
        "parent_id": None,
        "started_at": "2026-01-01T00:00:00Z",
        "ended_at": "2026-01-01T00:00:01Z",
        "span_data": {"type": "response", "response_id": rid, "input": [SECRET], "output": SECRET},
        "error": {"message": "tool failed", "data": {"echo": SECRET}},
    }


async def _seed(store: Store, tenant: str, rid: str, at: int) -> None:
    await store.put_response(
        StoredResponse(
            tenant=tenant,
            id=rid,
            response={"id": rid, "status": "completed", "output": []},
            input_items=[{"id": f"msg_{rid}", "type": "message", "content": SECRET}],
            expires_at=at + 86_400,
        )
    )
    assert await store.record_usage(_entry(tenant, rid, at)) is True


async def test_deleting_a_response_forgets_its_logged_content_and_keeps_counters(
    store: Store, tenant: str, clock: Any
) -> None:
    at = int(clock())
    await _seed(store, tenant, "resp_gone", at)
    await _seed(store, tenant, "resp_kept", at)
    await store.put_traces(
        tenant,
        [{"object": "trace", "id": "trace_f"}],
        [_span("resp_gone", "span_gone"), _span("resp_kept", "span_kept")],
    )
    before = await store.read_usage(at - at % 3600, at + 3600)

    assert await store.delete_response(tenant, "resp_gone") is True

    entry = await store.get_usage_entry(tenant, "resp_gone")
    assert entry is not None and entry.content is None
    assert entry.counts.total_tokens == 10  # the record and its counters stay
    assert await store.read_usage(at - at % 3600, at + 3600) == before
    _, spans = await store.get_trace(tenant, "trace_f")
    by_id = {s["id"]: s for s in spans}
    assert by_id["span_gone"]["span_data"] == {
        "type": "response",
        "response_id": "resp_gone",
        "deleted": True,
    }
    assert by_id["span_gone"]["error"] == {"message": "tool failed"}
    assert SECRET not in json.dumps(by_id["span_gone"])
    assert SECRET in json.dumps(by_id["span_kept"])  # another response's span stays whole
    kept = await store.get_usage_entry(tenant, "resp_kept")
    assert kept is not None and kept.content is not None
    assert await store.get_items(tenant, ["msg_resp_gone"]) == {}


async def test_deleting_a_conversation_forgets_the_content_of_its_turns(
    store: Store, tenant: str, clock: Any
) -> None:
    at = int(clock())
    conversation = Conversation(tenant=tenant, id="conv_f", created_at=at, expires_at=at + 86_400)
    await store.create_conversation(conversation, [])
    await _seed(store, tenant, "resp_turn", at)
    await store.append_items(
        tenant,
        "conv_f",
        [{"id": "msg_t", "type": "message", "content": SECRET}],
        once_key="resp_turn",
    )
    await store.put_traces(tenant, [], [_span("resp_turn", "span_turn")])

    assert await store.delete_conversation(tenant, "conv_f") is True

    entry = await store.get_usage_entry(tenant, "resp_turn")
    assert entry is not None and entry.content is None
    _, spans = await store.get_trace(tenant, "trace_f")
    assert SECRET not in json.dumps(spans)


async def test_deleting_what_has_no_logged_content_changes_nothing(
    store: Store, tenant: str
) -> None:
    now = int(time.time())
    plain = _entry(tenant, "resp_plain", now)
    plain.content = None
    assert await store.record_usage(plain) is True
    assert await store.delete_response(tenant, "resp_plain") is False  # never stored
    assert await store.get_usage_entry(tenant, "resp_plain") == plain
