"""Selecting operator-configured MCP servers: the rules of ``select_server`` and the request
registry (``gateway_tools.McpToolRegistry``) running an operator stdio server.

Rules under test: a request tool with no ``server_url`` selects the operator server of its
``server_label`` (unknown label: 400 on ``tools[i].server_url``); ``headers``/``authorization`` are
rejected for operator servers; a ``server_url`` is always the request's own server (checked
by the SSRF policy) even when its label is an operator label; ``allowed_tools`` and
``require_approval`` of the request still apply.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.config import OperatorMcpServer, ToolBackend
from responses_gateway.errors import InvalidRequestError
from responses_gateway.gateway_tools import McpBackend, McpToolRegistry
from responses_gateway.loop.events import LoopEvent
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState
from responses_gateway.mcp import McpClient, McpPolicy, McpServer, select_server
from responses_gateway.mcp.client import ToolResult
from responses_gateway.protocol.request import McpTool

SERVER_SCRIPT = str(Path(__file__).with_name("stdio_server.py"))

LOCAL_STDIO = OperatorMcpServer(
    server_label="local",
    transport="stdio",
    command=sys.executable,
    args=(SERVER_SCRIPT,),
    env={"TOKEN": "operator-env-secret"},
)
REMOTE = OperatorMcpServer(
    server_label="docs",
    transport="streamable_http",
    url="http://10.0.0.5:8000/mcp",
    headers={"Authorization": "Bearer operator-token"},
)
OPERATORS = {s.server_label: s for s in (LOCAL_STDIO, REMOTE)}


def mcp_tool(label: str, **fields: Any) -> McpTool:
    """A request's ``mcp`` tool, parsed by the request model. Without ``server_url`` it is
    parsed with a placeholder URL that is then removed: these rules are the registry's, and do
    not depend on whether the request parser accepts a label alone."""
    if "server_url" in fields:
        return McpTool.model_validate({"type": "mcp", "server_label": label, **fields})
    body = {"type": "mcp", "server_label": label, "server_url": "https://placeholder.invalid"}
    return McpTool.model_validate({**body, **fields}).model_copy(update={"server_url": None})


class Events:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)


def test_a_label_alone_selects_the_operator_stdio_server() -> None:
    server = select_server(mcp_tool("local"), OPERATORS, index=0)
    assert server == McpServer(
        "local",
        transport="stdio",
        command=sys.executable,
        args=(SERVER_SCRIPT,),
        env={"TOKEN": "operator-env-secret"},
        trusted=True,
    )


def test_a_label_alone_selects_the_operator_remote_server_with_its_headers() -> None:
    server = select_server(mcp_tool("docs"), OPERATORS, index=0)
    assert (server.url, server.transport, server.trusted) == (
        "http://10.0.0.5:8000/mcp",
        "streamable_http",
        True,
    )
    assert server.request_headers() == {"Authorization": "Bearer operator-token"}


def test_an_unknown_label_without_server_url_is_a_400_on_server_url() -> None:
    with pytest.raises(InvalidRequestError) as info:
        select_server(mcp_tool("nope"), OPERATORS, index=3)
    error = info.value
    assert (error.status_code, error.param, error.code) == (
        400,
        "tools[3].server_url",
        "missing_required_parameter",
    )
    assert "'nope'" in error.message and "docs" not in error.message  # labels are not listed


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"headers": {"X-Key": "user-secret"}}, "tools[1].headers"),
        ({"authorization": "user-token"}, "tools[1].authorization"),
    ],
)
def test_request_credentials_for_an_operator_server_are_rejected(
    fields: dict[str, Any], param: str
) -> None:
    with pytest.raises(InvalidRequestError) as info:
        select_server(mcp_tool("docs", **fields), OPERATORS, index=1)
    assert (info.value.param, info.value.code) == (param, "invalid_value")
    assert "user-secret" not in info.value.message and "user-token" not in info.value.message


def test_empty_request_headers_are_fine_for_an_operator_server() -> None:
    assert select_server(mcp_tool("docs", headers={}), OPERATORS, index=0).trusted


def test_a_server_url_is_always_the_requests_own_server_even_with_an_operator_label() -> None:
    tool = mcp_tool("docs", server_url="https://mcp.example.com/mcp", authorization="user-token")
    server = select_server(tool, OPERATORS, index=0)
    assert (server.url, server.trusted) == ("https://mcp.example.com/mcp", False)
    assert server.request_headers() == {"Authorization": "Bearer user-token"}


def test_connectors_are_not_supported() -> None:
    with pytest.raises(InvalidRequestError) as info:
        select_server(mcp_tool("docs", connector_id="connector_gmail"), OPERATORS, index=2)
    assert (info.value.param, info.value.code) == (
        "tools[2].connector_id",
        "unsupported_parameter",
    )


def test_registry_error_params_index_the_requests_whole_tool_list() -> None:
    tools = [{"type": "function", "name": "f"}, mcp_tool("local"), mcp_tool("missing")]
    with pytest.raises(InvalidRequestError) as info:
        McpToolRegistry(tools, McpClient(McpPolicy()), [], OPERATORS.values())
    assert info.value.param == "tools[2].server_url"


def test_registry_without_operator_servers_rejects_a_label_alone() -> None:
    with pytest.raises(InvalidRequestError) as info:
        McpToolRegistry([mcp_tool("local")], McpClient(McpPolicy()), [])
    assert info.value.param == "tools[0].server_url"


async def test_registry_lists_and_calls_an_operator_stdio_server_under_request_rules() -> None:
    tool = mcp_tool(
        "local",
        allowed_tools=["echo", "env"],
        require_approval={"never": {"tool_names": ["echo"]}},
    )
    registry = McpToolRegistry([tool], McpClient(McpPolicy()), [], [LOCAL_STDIO])
    state = LoopState(response_id="resp_1", created_at=1, model="m", request={}, upstream_input=[])
    await registry.prepare(state, OutputWriter(state, Events(), registry))

    listing = state.output[0]
    assert (listing["type"], listing["server_label"], listing["error"]) == (
        "mcp_list_tools",
        "local",
        None,
    )
    assert [t["name"] for t in listing["tools"]] == ["echo", "env"]  # allowed_tools applied
    assert [t["name"] for t in registry.model_tools()] == ["local__echo", "local__env"]
    echo, env = registry.lookup("local__echo"), registry.lookup("local__env")
    assert echo is not None and not echo.needs_approval
    assert env is not None and env.needs_approval  # require_approval still applies

    outcome = await registry.execute(
        {"server_label": "local", "name": "echo", "arguments": '{"text": "hi"}'}
    )
    assert (outcome.output, outcome.error) == ("hi", None)
    assert "operator-env-secret" not in repr(registry.model_tools()) + repr(state.output)


class _RecordingClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call_tool(self, server: McpServer, name: str, arguments: Any) -> Any:
        self.calls.append((name, arguments))
        return ToolResult(output="ok")


@pytest.mark.parametrize(
    ("kind", "argument", "item", "sent"),
    [
        ("web_search", None, {"action": {"type": "search", "query": "q"}}, {"query": "q"}),
        ("file_search", "text", {"queries": ["a", "b"]}, {"text": "a b"}),
        ("code_interpreter", None, {"code": "print(1)"}, {"code": "print(1)"}),
        ("image_generation", "description", {"revised_prompt": "cat"}, {"description": "cat"}),
    ],
)
async def test_backend_calls_its_tool_with_the_kinds_value_under_the_configured_argument(
    kind: str, argument: str | None, item: dict[str, Any], sent: dict[str, Any]
) -> None:
    client = _RecordingClient()
    config = ToolBackend(kind, "docs", "tool", argument)
    backend = McpBackend(config, REMOTE, client)  # type: ignore[arg-type]

    outcome = await backend.run({"type": f"{kind}_call", "id": "h_1", **item})

    assert client.calls == [("tool", sent)]
    assert (outcome.output, outcome.error) == ("ok", None)
