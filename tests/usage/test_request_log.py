"""The request-log part of a usage entry (usage.ledger): client ids from body and headers, the
fields the service's log adds, time to first token, refused requests' entries and the gate that
bounds their writes, and the bounded content kept for named tenants (usage.requestlog)."""

from __future__ import annotations

import hashlib
from typing import Any

from responses_gateway.loop.events import ItemStarted, TextDelta
from responses_gateway.loop.state import LoopState
from responses_gateway.store._codec import encode_json
from responses_gateway.usage.ledger import REFUSED, client_ids, refused_entry, usage_entry
from responses_gateway.usage.pricing import PriceTable
from responses_gateway.usage.requestlog import (
    FirstOutputSink,
    RefusalGate,
    log_refused,
    logged_content,
)


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


def test_usage_entry_turns_the_first_token_instant_into_ttft() -> None:
    state = LoopState(response_id="resp_2", created_at=0, model="m", request={}, upstream_input=[])
    log = {"started_ms": 1_000, "first_token_ms": 1_240, "deployment": "", "transport": "http"}
    entry = usage_entry(
        state, tenant="a", api_key_id="", prices=PriceTable(), ended_at=2, log=log, ended_ms=1_900
    )
    assert entry.extra == {
        "transport": "http",
        "ttft_ms": 240,
        "ended_ms": 1_900,
        "duration_ms": 900,
        "client_tool_calls": 0,
    }


def test_refused_entry_keeps_the_error_as_its_client_got_it() -> None:
    error = {
        "message": "Missing required parameter: 'x'." + "!" * 600,
        "type": "invalid_request_error",
        "param": "x",
        "code": "c",
    }
    entry = refused_entry(
        tenant="t",
        request_id="req_1",
        api_key_id="k",
        model="m",
        status_code=400,
        error=error,
        started_ms=1_000,
        ended_ms=1_003,
        log={"client": {"thread_id": "th"}, "transport": ""},
    )
    assert (entry.status, entry.ended_at, entry.counts.total_tokens) == (REFUSED, 1, 0)
    assert entry.extra == {
        "client": {"thread_id": "th"},
        "http_status": 400,
        "error_type": "invalid_request_error",
        "error_code": "c",
        "error_param": "x",
        "error_message": ("Missing required parameter: 'x'." + "!" * 600)[:500],
        "ended_ms": 1_003,
        "duration_ms": 3,
    }


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_refusal_gate_bounds_each_tenant_and_the_process_and_counts_what_it_drops() -> None:
    clock = _Clock()
    gate = RefusalGate(per_tenant=1, tenant_burst=2, per_process=10, process_burst=3, clock=clock)
    assert [gate.admit("a") for _ in range(3)] == [0, 0, None]  # a's burst is 2
    assert gate.admit("b") == 1  # written, carrying the one refusal dropped before it
    assert gate.admit("c") is None  # the process's burst of 3 is spent
    clock.now += 1.0  # a earns one token, the process ten
    assert gate.admit("a") == 1
    assert gate.admit("a") is None


async def test_log_refused_writes_one_record_or_none_and_never_raises() -> None:
    written: list[Any] = []

    class Store:
        async def log_request(self, entry: Any) -> None:
            if entry.tenant == "broken":
                raise RuntimeError("store down")
            written.append(entry)

    gate = RefusalGate(tenant_burst=1)
    options: dict[str, Any] = {
        "request_id": "req_x",
        "api_key_id": "",
        "model": "",
        "status_code": 401,
        "error": {"type": "invalid_request_error", "code": "invalid_api_key"},
        "started_ms": 0,
    }
    assert await log_refused(Store(), gate, tenant="t", **options) is True
    assert await log_refused(Store(), gate, tenant="t", **options) is False  # over the burst
    assert await log_refused(Store(), gate, tenant="broken", **options) is False
    assert [e.response_id for e in written] == ["req_x"]


def test_first_output_sink_notes_the_first_token_once_and_passes_every_event_on() -> None:
    seen: list[Any] = []

    class Sink:
        def emit(self, event: Any) -> None:
            seen.append(event)

    log: dict[str, Any] = {}
    sink = FirstOutputSink(Sink(), log)
    started = ItemStarted(0, {"type": "message"})
    delta = TextDelta(0, "msg_1", 0, "output_text", "hi")
    sink.emit(started)
    assert "first_token_ms" not in log
    sink.emit(delta)
    first = log["first_token_ms"]
    sink.emit(delta)
    assert log == {"first_token_ms": first} and seen == [started, delta, delta]


def _message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_logged_content_keeps_small_items_whole_without_headers() -> None:
    call = {"type": "mcp_call", "server_label": "s", "headers": {"x": "1"}, "output": "ok"}
    tool = {"type": "mcp_list_tools", "Authorization": "Bearer t", "tools": []}
    content = logged_content([_message("hi")], [call, tool])
    assert content == {
        "input": [_message("hi")],
        "output": [
            {"type": "mcp_call", "server_label": "s", "output": "ok"},
            {"type": "mcp_list_tools", "tools": []},
        ],
        "request": {},
        "truncated": False,
    }


def test_logged_content_keeps_the_requests_parameters_without_secrets() -> None:
    request = {
        "instructions": "Be brief.",
        "temperature": 0.2,
        "tools": [{"type": "mcp", "server_label": "s", "authorization": "Bearer t"}],
    }
    content = logged_content([_message("hi")], [], request=request)
    assert content["request"] == {
        "instructions": "Be brief.",
        "temperature": 0.2,
        "tools": [{"type": "mcp", "server_label": "s"}],
    }
    noise = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(1600))
    squeezed = logged_content([_message("hi")], [], request={"instructions": noise}, limit=2_000)
    assert squeezed["truncated"] is True and squeezed["input"] == [_message("hi")]


def test_logged_content_cuts_long_strings_then_old_input_keeping_output_and_says_so() -> None:
    noise = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(1600))  # 100 KB
    content = logged_content([_message(noise)], [_message("out")], limit=20_000)
    assert content["truncated"] is True
    assert content["input"] == [_message(noise[:8192])]
    assert content["output"] == [_message("out")]
    many = [_message(f"{i}-" + noise[: 100 + i]) for i in range(3000)]
    content = logged_content(many, [_message("out")], limit=4_000)
    assert content["truncated"] is True and content["output"] == [_message("out")]
    assert content["input"] and content["input"][-1] == _message(f"2999-{noise[: 128 - 5]}")
    assert len(encode_json(content)[0]) <= 4_000


def test_a_failed_entry_keeps_its_error_message_and_the_clients_status() -> None:
    state = LoopState(response_id="resp_f", created_at=0, model="m", request={}, upstream_input=[])
    state.status = "failed"
    state.error = {"code": "server_error", "message": "MCP server 'calc' failed: " + "x" * 900}
    entry = usage_entry(
        state,
        tenant="t",
        api_key_id="",
        prices=PriceTable(),
        ended_at=1,
        log={"deployment": [], "attempts_failed": []},
        http_status=424,
    )
    assert entry.extra["http_status"] == 424 and entry.extra["error_code"] == "server_error"
    assert entry.extra["error_message"].startswith("MCP server 'calc' failed")
    assert len(entry.extra["error_message"]) == 500
    assert "attempts_failed" not in entry.extra and "deployment" not in entry.extra
