"""The request-log part of a usage entry (usage.ledger): client ids from body and headers, and
the fields the service's log adds."""

from __future__ import annotations

from responses_gateway.loop.state import LoopState
from responses_gateway.usage.ledger import client_ids, usage_entry
from responses_gateway.usage.pricing import PriceTable


def test_client_ids_take_the_body_over_headers_and_cut_long_values() -> None:
    headers = {"session-id": "s-header", "thread-id": "t-header", "x-client-request-id": "r1"}
    body = {"thread_id": "t-body", "turn_id": "u1", "x-codex-turn-metadata": "{}", "n": 3}
    assert client_ids([body, None], headers) == {
        "session_id": "s-header",
        "thread_id": "t-body",
        "turn_id": "u1",
        "client_request_id": "r1",
    }
    assert client_ids([{"trace_id": "x" * 500}], {}) == {"trace_id": "x" * 200}
    assert client_ids([], {}) == {}


def test_usage_entry_carries_the_log_duration_and_client_tool_calls() -> None:
    state = LoopState(response_id="resp_1", created_at=0, model="m", request={}, upstream_input=[])
    state.output = [
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": ""},
        {"type": "message", "role": "assistant", "content": []},
    ]
    log = {
        "provider": "chat",
        "wire": "chat",
        "stored": False,
        "client": {"thread_id": "t1"},
        "started_ms": 1_000,
    }
    entry = usage_entry(
        state,
        tenant="a",
        api_key_id="k",
        prices=PriceTable(),
        ended_at=2,
        log=log,
        ended_ms=2_500,
    )
    assert entry.extra == {
        "provider": "chat",
        "wire": "chat",
        "stored": False,
        "client": {"thread_id": "t1"},
        "ended_ms": 2_500,
        "duration_ms": 1_500,
        "client_tool_calls": 2,
    }
