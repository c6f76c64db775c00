"""MCP server faults, injected by a proxy in front of a real MCP server: a tool call whose answer
is lost is never run again (the model sees an error), a stalled server ends within the call
budget, and the response completes with the model's next turn."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.reliability.conftest import MCP_TIMEOUT, MODEL, Stack, wait_until

from responses_gateway.testing.faults import Call, Fault, FaultProxy
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ToolCall, Turn


@pytest.fixture(scope="module")
def calc() -> Iterator[tuple[RunningMcpServer, FaultProxy]]:
    with start_mcp_server("calc") as server, FaultProxy.start(server.base_url) as proxy:
        yield server, proxy


def _tool_call(call: Call) -> bool:
    return b'"tools/call"' in call.body


def _run(http: httpx.Client, proxy: FaultProxy) -> dict[str, Any]:
    tool = {
        "type": "mcp",
        "server_label": "calc",
        "server_url": f"{proxy.url}/mcp",
        "require_approval": "never",
    }
    answer = http.post("/responses", json={"model": MODEL, "input": "add", "tools": [tool]})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.parametrize("action", ["reset_after", "stall"])
def test_lost_or_stalled_mcp_call_runs_once_and_the_model_sees_an_error(
    http: httpx.Client,
    fresh: Stack,
    calc: tuple[RunningMcpServer, FaultProxy],
    action: Any,
) -> None:
    server, proxy = calc
    server.log.clear()
    proxy.script(Fault(action, match=_tool_call))
    fresh.upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a": 1, "b": 2}', "call_1")]),
        Turn(text="could not add"),
    )
    response = _run(http, proxy)
    assert response["status"] == "completed"
    [listing, mcp_call, message] = response["output"]
    assert (listing["type"], mcp_call["type"], message["type"]) == (
        "mcp_list_tools",
        "mcp_call",
        "message",
    )
    assert mcp_call["error"] and mcp_call["output"] is None
    assert server.log.calls == ([("add", {"a": 1, "b": 2})] if action == "reset_after" else [])
    assert [c.action for c in proxy.calls if _tool_call(c)] == [action]  # never sent twice
    wait_until(lambda: proxy.open_connections == 0, timeout=MCP_TIMEOUT + 10)


def test_mcp_call_through_a_trickling_proxy_succeeds(
    http: httpx.Client, fresh: Stack, calc: tuple[RunningMcpServer, FaultProxy]
) -> None:
    server, proxy = calc
    server.log.clear()
    proxy.script(Fault("trickle", match=_tool_call, chunk=16, seconds=0.001))
    fresh.upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a": 2, "b": 3}', "call_1")]),
        Turn(text="5"),
    )
    response = _run(http, proxy)
    mcp_call = response["output"][1]
    assert (mcp_call["output"], mcp_call["error"]) == ("5.0", None)
    assert server.log.calls == [("add", {"a": 2, "b": 3})]
