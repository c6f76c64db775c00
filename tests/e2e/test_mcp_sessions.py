"""One MCP session per server per run, through the gateway: the run's listing and every call
share it, and it ends with the run (normally, after a failed call, at an approval interrupt,
when the client leaves mid-call).

The server is the ``calc`` server over the legacy SSE transport behind
:class:`~responses_gateway.testing.mcp_servers.SessionCounter`, whose event stream lives exactly
as long as the client's session, so the server observably sees each session end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.mcp_servers import HangControl, SessionCounter, create_mcp_app
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import run_in_thread
from responses_gateway.testing.stream_check import parse_sse

from .conftest import Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")


@pytest.fixture
def counted() -> Iterator[tuple[SessionCounter, str]]:
    counter = SessionCounter(create_mcp_app("calc", "sse"))
    with run_in_thread(counter) as server:
        yield counter, f"{server.url}/sse"


def _tool(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": url,
        "require_approval": "never",
        **extra,
    }


def _call(tool: str, arguments: str, call_id: str) -> ToolCall:
    return ToolCall(f"calc__{tool}", arguments, call_id)


def test_a_listing_and_two_calls_use_one_session_that_ends_with_the_run(
    client: openai.OpenAI,
    upstream: ScriptedUpstream,
    counted: tuple[SessionCounter, str],
    model: str,
) -> None:
    counter, url = counted
    upstream.push(
        Turn(tool_calls=[_call("add", '{"a":1,"b":2}', "c1")]),
        Turn(tool_calls=[_call("divide", '{"a":1,"b":0}', "c2")]),
        Turn(tool_calls=[_call("add", '{"a":3,"b":4}', "c3")]),
        Turn(text="done"),
    )
    response = client.responses.create(model=model, input="sums", tools=[_tool(url)])  # type: ignore[list-item]

    assert [i.type for i in response.output] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
        "mcp_call",
        "message",
    ]
    calls = response.output[1:4]
    assert [c.output for c in calls] == ["3.0", None, "7.0"]  # type: ignore[union-attr]
    assert calls[1].error is not None  # type: ignore[union-attr]
    assert counter.wait_closed(1) == (1, 1)
    assert counter.handshakes == 1


def test_an_approval_interrupt_ends_the_session_and_the_approved_run_opens_its_own(
    client: openai.OpenAI,
    upstream: ScriptedUpstream,
    counted: tuple[SessionCounter, str],
    model: str,
) -> None:
    counter, url = counted
    tool = _tool(url, require_approval="always")
    upstream.push(Turn(tool_calls=[_call("add", '{"a":5,"b":5}', "c1")]), Turn(text="It is 10."))
    first = client.responses.create(model=model, input="5+5", tools=[tool])  # type: ignore[list-item]

    assert [i.type for i in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    assert counter.wait_closed(1) == (1, 1)

    approval = {
        "type": "mcp_approval_response",
        "approval_request_id": first.output[1].id,
        "approve": True,
    }
    second = client.responses.create(
        model=model,
        input=[approval],  # type: ignore[list-item]
        tools=[tool],  # type: ignore[list-item]
        previous_response_id=first.id,
    )

    assert [i.type for i in second.output] == ["mcp_call", "message"]
    assert second.output[0].output == "10.0"  # type: ignore[union-attr]
    assert counter.wait_closed(2) == (2, 2)
    assert counter.handshakes == 2


def test_a_client_leaving_mid_call_cancels_the_run_and_ends_its_session(
    stack: Stack, upstream: ScriptedUpstream, http: httpx.Client, model: str
) -> None:
    hang = HangControl()
    counter = SessionCounter(create_mcp_app("hanging", "sse", hang=hang))
    with run_in_thread(counter) as running:
        tool = {
            "type": "mcp",
            "server_label": "slow",
            "server_url": f"{running.url}/sse",
            "require_approval": "never",
        }
        upstream.push(Turn(tool_calls=[ToolCall("slow__hang", "{}", "c1")]), Turn(text="never"))
        body = {"model": model, "input": "hang", "tools": [tool], "stream": True}
        with http.stream("POST", "/responses", json=body) as answer:
            lines = answer.iter_lines()
            first = next(line for line in lines if line.startswith("data:"))
            response_id = parse_sse(f"event: response.created\n{first}\n\n")[0]["response"]["id"]
            assert hang.started.wait(10)
            assert counter.streams_ended == 0
        stack.wait_for_status(response_id, "cancelled")  # the client left
        assert counter.wait_closed(1) == (1, 1)
        assert counter.handshakes == 1
        hang.release()


def test_a_background_run_ends_its_session_too(
    client: openai.OpenAI,
    upstream: ScriptedUpstream,
    stack: Stack,
    counted: tuple[SessionCounter, str],
    model: str,
) -> None:
    counter, url = counted
    upstream.push(
        Turn(tool_calls=[_call("add", '{"a":1,"b":2}', "c1")]),
        Turn(tool_calls=[_call("add", '{"a":3,"b":4}', "c2")]),
        Turn(text="done"),
    )
    queued = client.responses.create(
        model=model,
        input="sums",
        tools=[_tool(url)],  # type: ignore[list-item]
        background=True,
    )

    done = stack.wait_for_status(queued.id, "completed")
    assert [i.get("output") for i in done["output"] if i["type"] == "mcp_call"] == ["3.0", "7.0"]
    assert counter.wait_closed(1) == (1, 1)
    assert counter.handshakes == 1
