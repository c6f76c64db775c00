"""WebSocket mode with the rest of the contract: gateway-run MCP tools with an approval answered
by the next create (``store: false``, from the connection's memory), and reasoning blobs kept
with ``include: ["reasoning.encrypted_content"]`` across a socket chain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.stream_check import check_socket_stream

from .conftest import Stack

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


@pytest.fixture
def connection(stack: Stack, upstream: ScriptedUpstream) -> Iterator[Any]:
    client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    with client.responses.connect() as connection:
        yield connection


def _response(connection: Any) -> tuple[dict[str, Any], list[str]]:
    events = [json.loads(connection.recv_bytes())]
    while events[-1]["type"] not in TERMINAL:
        assert events[-1]["type"] != "error", events[-1]
        events.append(json.loads(connection.recv_bytes()))
    return check_socket_stream(events), [e["type"] for e in events]


def test_mcp_approval_answered_by_the_next_socket_create(
    connection: Any, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    tool = {"type": "mcp", "server_label": "calc", "server_url": calc.url}  # approval required
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a": 2, "b": 3}', "call_1")]),
        Turn(text="The sum is 5"),
    )
    connection.send(
        {
            "type": "response.create",
            "model": model,
            "input": "2+3?",
            "tools": [tool],
            "store": False,
        }
    )
    asked, _ = _response(connection)
    [request] = [i for i in asked["output"] if i["type"] == "mcp_approval_request"]
    assert request["name"] == "add" and json.loads(request["arguments"]) == {"a": 2, "b": 3}
    connection.send(
        {
            "type": "response.create",
            "model": model,
            "previous_response_id": asked["id"],
            "input": [
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": request["id"],
                    "approve": True,
                }
            ],
            "tools": [tool],
            "store": False,
        }
    )
    answered, types = _response(connection)
    [call] = [i for i in answered["output"] if i["type"] == "mcp_call"]
    assert call["approval_request_id"] == request["id"]
    assert call["output"] == "5.0"
    assert answered["output"][-1]["content"][0]["text"] == "The sum is 5"
    assert "response.mcp_call.completed" in types


def test_reasoning_blob_is_included_and_carried_on_a_socket_chain(
    connection: Any, upstream: ScriptedUpstream
) -> None:
    upstream.push(
        Turn(text="first", reasoning="thinking", encrypted_content="blob-1"),
        Turn(text="second"),
    )
    create = {
        "type": "response.create",
        "model": "scripted-responses",
        "include": ["reasoning.encrypted_content"],
        "store": False,
    }
    connection.send({**create, "input": "think"})
    first, _ = _response(connection)
    [reasoning] = [i for i in first["output"] if i["type"] == "reasoning"]
    # the upstream's own blob reaches the client sealed by the gateway (see loop/reasoning.py)
    assert reasoning["encrypted_content"].startswith("rgw1.")
    assert "blob-1" not in reasoning["encrypted_content"]
    connection.send({**create, "input": "again", "previous_response_id": first["id"]})
    second, _ = _response(connection)
    assert second["output"][-1]["content"][0]["text"] == "second"
    sent = upstream.model_requests()[-1].json
    assert "blob-1" in json.dumps(sent["input"])  # the blob went back upstream from memory
