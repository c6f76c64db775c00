"""A third-party MCP server through the gateway: ``mcp-server-time`` (PyPI) as an
operator-configured stdio server, selected by ``server_label`` alone.

The gateway here is its own app (its config names the ``time`` server) in front of the session's
scripted model upstream and DynamoDB; its MCP policy is the strict production one, which
operator servers are not subject to. The client is the official ``openai`` SDK.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses.response_output_item import McpCall, McpListTools

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import MODELS, Stack, wire_provider

OPERATOR_ENV_SECRET = "operator-only-value-5b2f"
"""Set in the time server's configured ``env``: it must never reach a response or the store."""

TIME_TOOL: dict[str, Any] = {"type": "mcp", "server_label": "time", "require_approval": "never"}


@pytest.fixture(scope="module")
def gateway(stack: Stack) -> Iterator[RunningServer]:
    config = parse_config(
        {
            "providers": [
                wire_provider(wire, model, stack.upstream_server.url)
                for wire, model in MODELS.items()
            ],
            "mcp_servers": [
                {
                    "server_label": "time",
                    "command": sys.executable,
                    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                    "env": {"OPERATOR_TOKEN": OPERATOR_ENV_SECRET},
                }
            ],
        },
        {},
    )
    app = create_app(config, stack.open_store(), mcp_policy=McpPolicy())
    with run_in_thread(app) as server:
        yield server


@pytest.fixture
def time_client(gateway: RunningServer, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="sk-client", max_retries=0) as c:
        yield c


def _script(upstream: ScriptedUpstream) -> None:
    call = ToolCall("time__get_current_time", '{"timezone":"UTC"}', "call_time")
    upstream.push(Turn(tool_calls=[call]), Turn(text="It is a fine time."))


def _check_call_output(output: str) -> None:
    answer = json.loads(output)
    assert answer["timezone"] == "UTC"
    assert datetime.fromisoformat(answer["datetime"]).utcoffset() is not None
    assert '"timezone": "UTC"' in output


def test_operator_stdio_server_answers_through_the_gateway(
    stack: Stack, time_client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    _script(upstream)
    response = time_client.responses.create(
        model=MODELS["chat"],
        input="What time is it?",
        tools=[TIME_TOOL],  # type: ignore[list-item]
    )

    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    listing, call, _ = response.output
    assert isinstance(listing, McpListTools) and isinstance(call, McpCall)
    assert listing.server_label == "time"
    assert [t.name for t in listing.tools] == ["get_current_time", "convert_time"]
    assert (call.server_label, call.name, call.error, call.status) == (
        "time",
        "get_current_time",
        None,
        "completed",
    )
    _check_call_output(call.output or "")
    assert response.output_text == "It is a fine time."
    echoed = response.tools[0].model_dump()
    assert echoed["server_label"] == "time" and echoed["server_url"] is None

    offered = upstream.model_requests()[0].json["tools"]
    names = [t.get("name") or t["function"]["name"] for t in offered]
    assert names == ["time__get_current_time", "time__convert_time"]
    assert OPERATOR_ENV_SECRET not in response.model_dump_json()
    assert OPERATOR_ENV_SECRET not in stack.scan_table()


def test_streamed_operator_call_passes_the_stream_contract(
    gateway: RunningServer, upstream: ScriptedUpstream
) -> None:
    _script(upstream)
    body = {
        "model": MODELS["responses"],
        "input": "What time is it?",
        "tools": [TIME_TOOL],
        "stream": True,
    }
    answer = httpx.post(f"{gateway.url}/v1/responses", json=body, timeout=60)
    events = parse_sse(answer.content)
    final = check_stream(events)
    assert [item["type"] for item in final["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    assert final["output"][0]["tools"][0]["name"] == "get_current_time"
    _check_call_output(final["output"][1]["output"])
    kinds = [event["type"] for event in events]
    assert "response.mcp_list_tools.completed" in kinds and "response.mcp_call.completed" in kinds


def test_an_unknown_label_without_server_url_is_a_400(
    time_client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        time_client.responses.create(
            model=MODELS["chat"],
            input="hi",
            tools=[{"type": "mcp", "server_label": "calendar"}],
        )
    assert (info.value.param, info.value.code) == (
        "tools[0].server_url",
        "missing_required_parameter",
    )
    assert upstream.model_requests() == []
