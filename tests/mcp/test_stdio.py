"""McpClient over stdio, and operator (trusted) servers that skip the SSRF address check.

The stdio server is ``tests/mcp/stdio_server.py`` (no SDK, so a spawn costs a bare interpreter):
each operation spawns it, talks over its stdin/stdout and stops it. Covers listing and calling,
the child's minimal environment, every failure shape (cannot start, exits at once, never
answers, tool error, too many tools), output bounds, and the constructor rules of stdio servers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from openai.types.responses.response_output_item import McpCall

from responses_gateway.mcp import (
    McpClient,
    McpLimits,
    McpListError,
    McpPolicy,
    McpServer,
    McpSessions,
    ToolResult,
    child_environment,
)
from responses_gateway.testing.mcp_servers import McpServerPool

SERVER_SCRIPT = str(Path(__file__).with_name("stdio_server.py"))

STRICT = McpPolicy()
"""The production policy: https only, public addresses only."""


def stdio(mode: str = "", **extra: Any) -> McpServer:
    args = (SERVER_SCRIPT, mode) if mode else (SERVER_SCRIPT,)
    return McpServer(
        "local", transport="stdio", command=sys.executable, args=args, trusted=True, **extra
    )


def as_mcp_call(result: ToolResult) -> McpCall:
    return McpCall.model_validate(
        {
            "id": "mcp_1",
            "type": "mcp_call",
            "server_label": "local",
            "name": "tool",
            "arguments": "{}",
            "output": result.output,
            "error": result.error,
            "status": "completed" if result.ok else "failed",
        }
    )


async def test_lists_and_calls_tools_over_stdio() -> None:
    client = McpClient(STRICT)
    tools = await client.list_tools(stdio())
    assert [t.name for t in tools] == ["echo", "env", "fail", "big", "hang"]
    assert tools[0].read_only and tools[0].description == "Echo text back."
    result = await client.call_tool(stdio(), "echo", '{"text": "hello"}')
    assert result == ToolResult("hello")
    as_mcp_call(result)


async def test_the_child_gets_a_minimal_environment_plus_its_configured_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UPSTREAM_API_KEY", "sk-gateway-secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-gateway-secret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    server = stdio(env={"TIME_TOKEN": "operator-value", "LANG": "en_US.UTF-8"})
    result = await McpClient(STRICT).call_tool(server, "env", {})
    env = json.loads(result.output or "")
    assert env["TIME_TOKEN"] == "operator-value"
    assert env["LANG"] == "en_US.UTF-8"  # configured values win over inherited ones
    assert "PATH" in env
    assert not {"UPSTREAM_API_KEY", "AWS_SECRET_ACCESS_KEY"} & set(env)
    allowed = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE"}
    assert set(env) <= allowed | {"TIME_TOKEN"}


def test_child_environment_inherits_only_locale_variables() -> None:
    environ = {"LANG": "C.UTF-8", "LC_ALL": "", "OPENAI_API_KEY": "sk-x", "PATH": "/bin"}
    assert child_environment({"A": "1"}, environ) == {"LANG": "C.UTF-8", "A": "1"}


async def test_a_tool_error_is_an_execution_error_and_output_is_bounded() -> None:
    client = McpClient(STRICT, limits=McpLimits(max_output_chars=100))
    failed = await client.call_tool(stdio(), "fail", {})
    assert failed.error == {
        "type": "mcp_tool_execution_error",
        "content": [{"type": "text", "text": "it failed on purpose"}],
    }
    as_mcp_call(failed)
    big = await client.call_tool(stdio(), "big", {"size": 5000})
    assert big.output is not None and big.output.startswith("x" * 100)
    assert big.output.endswith("[truncated 4900 characters]")


async def test_a_server_that_never_answers_times_out_within_the_deadline() -> None:
    client = McpClient(STRICT)
    started = time.monotonic()
    result = await client.call_tool(stdio(), "hang", {}, deadline=time.monotonic() + 1.0)
    assert result.error is not None
    assert (result.error["type"], result.error["code"]) == ("mcp_protocol_error", -32001)
    assert time.monotonic() - started < 3.0  # the child exits when its stdin closes
    as_mcp_call(result)


async def test_a_command_that_cannot_start_is_a_502_http_error() -> None:
    missing = McpServer("local", transport="stdio", command="/nonexistent/mcp-server", trusted=True)
    client = McpClient(STRICT)
    with pytest.raises(McpListError) as info:
        await client.list_tools(missing)
    assert info.value.code == "http_error"
    assert info.value.message == (
        "Error retrieving tool list from MCP server: 'local'. Could not start the MCP server."
    )
    result = await client.call_tool(missing, "echo", {})
    assert result.error == {
        "type": "http_error",
        "code": 502,
        "message": "Could not start the MCP server.",
    }


async def test_a_server_that_exits_at_once_is_a_protocol_error() -> None:
    client = McpClient(STRICT)
    with pytest.raises(McpListError) as info:
        await client.list_tools(stdio("exit"))
    assert info.value.code == "mcp_protocol_error"
    result = await client.call_tool(stdio("exit"), "echo", {})
    assert result.error is not None and result.error["type"] == "mcp_protocol_error"


async def test_too_many_tools_fail_the_listing() -> None:
    client = McpClient(STRICT, limits=McpLimits(max_tools=10))
    with pytest.raises(McpListError, match="more than 10 tools"):
        await client.list_tools(stdio("many"))


async def test_errors_and_logs_never_show_configured_env_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = McpServer(
        "local",
        transport="stdio",
        command=sys.executable,
        args=(SERVER_SCRIPT, "exit"),
        env={"TOKEN": "stdio-env-secret"},
        trusted=True,
    )
    assert "stdio-env-secret" in server.secrets()
    assert "stdio-env-secret" not in repr(server) and SERVER_SCRIPT not in repr(server)
    with caplog.at_level("DEBUG"):
        result = await McpClient(STRICT).call_tool(server, "echo", {})
    assert "stdio-env-secret" not in json.dumps(result.error)
    assert "stdio-env-secret" not in caplog.text


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"transport": "stdio", "command": "x"}, "trusted"),
        ({"transport": "stdio", "trusted": True}, "needs a command"),
        ({"transport": "stdio", "command": "x", "url": "https://x", "trusted": True}, "no url"),
        ({"transport": "auto"}, "needs a url"),
        ({"url": "https://x/mcp", "command": "x"}, "only apply to stdio"),
    ],
)
def test_stdio_server_rules(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        McpServer("s", **kwargs)


async def test_operator_servers_skip_the_address_check(mcp_servers: McpServerPool) -> None:
    url = mcp_servers.get("calc").url  # http on loopback: refused by the strict policy
    client = McpClient(STRICT)
    with pytest.raises(McpListError) as info:
        await client.list_tools(McpServer("calc", url))
    assert info.value.code == "url_not_allowed"
    tools = await client.list_tools(McpServer("calc", url, trusted=True))
    assert [t.name for t in tools] == ["add", "divide", "repeat"]
    result = await client.call_tool(McpServer("calc", url, trusted=True), "add", {"a": 1, "b": 2})
    assert result == ToolResult("3.0")


async def test_operator_servers_keep_the_response_size_bound(mcp_servers: McpServerPool) -> None:
    client = McpClient(STRICT, limits=McpLimits(max_response_bytes=2000))
    server = McpServer("calc", mcp_servers.get("calc").url, trusted=True)
    result = await client.call_tool(server, "repeat", {"text": "a", "times": 10_000})
    assert result.error is not None and result.error["type"] == "http_error"


async def test_server_requests_over_stdio_are_answered_as_the_sdk_answers_them() -> None:
    result = await McpClient(STRICT).call_tool(stdio(), "ask", {})
    assert json.loads(result.output or "") == [
        {"jsonrpc": "2.0", "id": "srv-1", "result": {}},
        {
            "jsonrpc": "2.0",
            "id": "srv-2",
            "error": {"code": -32600, "message": "Elicitation not supported"},
        },
    ]


async def test_a_banner_line_that_is_not_json_is_skipped() -> None:
    tools = await McpClient(STRICT).list_tools(stdio("noisy"))
    assert tools[0].name == "echo"


async def test_a_line_over_the_size_limit_fails_the_call() -> None:
    client = McpClient(STRICT, limits=McpLimits(max_response_bytes=1000))
    assert (await client.call_tool(stdio(), "big", {"size": 500})).ok
    result = await client.call_tool(stdio(), "big", {"size": 5000})
    assert result.error == {
        "type": "http_error",
        "code": 502,
        "message": "The MCP server's answer exceeded the gateway's size limit.",
    }


async def test_a_call_that_times_out_is_cancelled_with_a_notice() -> None:
    client, server, sessions = McpClient(STRICT), stdio(), McpSessions()
    timed_out = await client.call_tool(
        server, "hang", {}, deadline=time.monotonic() + 0.3, sessions=sessions
    )
    seen = await client.call_tool(server, "cancelled", {}, sessions=sessions)
    await sessions.aclose()

    assert timed_out.error is not None and timed_out.error["code"] == -32001
    [notice] = json.loads(seen.output or "")
    assert notice["reason"] == "The client stopped waiting."
    assert isinstance(notice["requestId"], int)


async def test_a_third_party_sdk_server_over_stdio_lists_and_calls_in_one_process() -> None:
    server = McpServer(
        "time",
        transport="stdio",
        command=sys.executable,
        args=("-m", "mcp_server_time", "--local-timezone", "UTC"),
        env={"PYTHONPATH": os.pathsep.join(sys.path)},
        trusted=True,
    )
    client, sessions = McpClient(STRICT), McpSessions()
    tools = await client.list_tools(server, sessions=sessions)
    now = await client.call_tool(server, "get_current_time", {"timezone": "UTC"}, sessions=sessions)
    await sessions.aclose()

    assert {"get_current_time", "convert_time"} <= {tool.name for tool in tools}
    assert json.loads(now.output or "")["timezone"] == "UTC"
