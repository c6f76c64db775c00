"""McpClient against real MCP servers (the SDK's own) on loopback.

Covers both transports (streamable HTTP, stateful and stateless, and legacy SSE), every failure
shape of ``mcp_call.error`` (checked against the ``openai`` SDK's ``McpCall`` model), deadlines,
secrets that must never reach logs or messages, and the lazy import of the SDK.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
from typing import Any

import pytest
from openai.types.responses.response_output_item import McpCall

from responses_gateway.errors import InvalidRequestError
from responses_gateway.mcp import (
    McpClient,
    McpLimits,
    McpListError,
    McpPolicy,
    McpServer,
    ToolInfo,
    ToolResult,
)
from responses_gateway.testing.mcp_servers import (
    MCP_TEST_TOKEN,
    McpServerPool,
    start_mcp_server,
)

LOCAL = McpPolicy(allow_http=True, allow_loopback=True)

TRANSPORTS = [
    pytest.param("streamable_http", False, id="streamable-stateful"),
    pytest.param("streamable_http", True, id="streamable-stateless"),
    pytest.param("sse", False, id="sse"),
]


def as_mcp_call(result: ToolResult) -> McpCall:
    """The ``mcp_call`` item a result becomes, validated by the openai SDK's own model."""
    return McpCall.model_validate(
        {
            "id": "mcp_1",
            "type": "mcp_call",
            "server_label": "calc",
            "name": "tool",
            "arguments": "{}",
            "output": result.output,
            "error": result.error,
            "status": "completed" if result.ok else "failed",
        }
    )


# --------------------------------------------------------------------------- listing


@pytest.mark.parametrize(("transport", "stateless"), TRANSPORTS)
async def test_list_tools_calc_server_returns_tools_with_annotations(
    mcp_servers: McpServerPool, client: McpClient, transport: Any, stateless: bool
) -> None:
    server = mcp_servers.get("calc", transport, stateless=stateless)
    tools = await client.list_tools(McpServer("calc", server.url))
    assert [tool.name for tool in tools] == ["add", "divide", "repeat"]
    add = tools[0]
    assert add.description == "Add two numbers."
    assert add.annotations == {"readOnlyHint": True, "idempotentHint": True}
    assert add.read_only
    assert not tools[1].read_only
    assert add.input_schema["type"] == "object"
    assert set(add.input_schema["properties"]) == {"a", "b"}


async def test_list_tools_explicit_transport_overrides_url_guess(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    server = mcp_servers.get("calc", "sse")
    url = server.base_url + "/sse?client=test"
    tools = await client.list_tools(McpServer("calc", url, transport="sse"))
    assert len(tools) == 3


async def test_list_tools_failing_server_raises_list_error(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    server = mcp_servers.get("failing")
    with pytest.raises(McpListError) as info:
        await client.list_tools(McpServer("broken", server.url))
    error = info.value
    assert error.status_code == 424
    assert error.to_error() == {
        "message": "Error retrieving tool list from MCP server: 'broken'. "
        "MCP error -32603: tool listing is broken on purpose",
        "type": "external_connector_error",
        "param": "tools",
        "code": "mcp_protocol_error",
    }


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_list_tools_unauthorized_raises_http_401_list_error(
    mcp_servers: McpServerPool, client: McpClient, transport: Any
) -> None:
    server = mcp_servers.get("auth_required", transport)
    with pytest.raises(McpListError) as info:
        await client.list_tools(McpServer("auth", server.url, authorization="wrong-token"))
    assert info.value.code == "http_error"
    assert info.value.message.endswith("Http status code: 401 (Unauthorized)")
    assert "wrong-token" not in str(info.value)


async def test_list_tools_with_token_on_auth_server_succeeds(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    server = mcp_servers.get("auth_required")
    tools = await client.list_tools(McpServer("auth", server.url, authorization=MCP_TEST_TOKEN))
    assert len(tools) == 3


async def test_list_tools_unreachable_port_raises_list_error(
    client: McpClient, unused_port: int
) -> None:
    with pytest.raises(McpListError) as info:
        await client.list_tools(McpServer("gone", f"http://127.0.0.1:{unused_port}/mcp"))
    assert info.value.code == "http_error"
    assert "Could not connect" in info.value.message


async def test_list_tools_wrong_path_raises_http_404_list_error(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    server = mcp_servers.get("calc")
    with pytest.raises(McpListError) as info:
        await client.list_tools(McpServer("calc", server.base_url + "/nothing-here"))
    assert "Http status code: 404" in info.value.message


async def test_list_tools_more_tools_than_limit_raises_list_error(
    mcp_servers: McpServerPool,
) -> None:
    client = McpClient(LOCAL, limits=McpLimits(max_tools=2))
    with pytest.raises(McpListError, match="more than 2 tools"):
        await client.list_tools(McpServer("calc", mcp_servers.get("calc").url))


async def test_list_tools_past_deadline_raises_timeout_list_error(
    mcp_servers: McpServerPool, client: McpClient, dialled: list[Any]
) -> None:
    server = McpServer("calc", mcp_servers.get("calc").url)
    with pytest.raises(McpListError) as info:
        await client.list_tools(server, deadline=time.monotonic() - 1)
    assert info.value.code == "timeout"
    assert dialled == []


# --------------------------------------------------------------------------- calling


@pytest.mark.parametrize(("transport", "stateless"), TRANSPORTS)
async def test_call_tool_add_returns_text_output(
    mcp_servers: McpServerPool, client: McpClient, transport: Any, stateless: bool
) -> None:
    server = mcp_servers.get("calc", transport, stateless=stateless)
    result = await client.call_tool(McpServer("calc", server.url), "add", {"a": 2, "b": 3})
    assert result == ToolResult(output="5.0", error=None)
    assert as_mcp_call(result).output == "5.0"


async def test_call_tool_json_text_arguments_parsed(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    server = McpServer("calc", mcp_servers.get("calc").url)
    result = await client.call_tool(server, "add", '{"a": 1.5, "b": 1}')
    assert result.output == "2.5"


@pytest.mark.parametrize(("transport", "stateless"), TRANSPORTS)
async def test_call_tool_divide_by_zero_gives_tool_execution_error(
    mcp_servers: McpServerPool, client: McpClient, transport: Any, stateless: bool
) -> None:
    server = mcp_servers.get("calc", transport, stateless=stateless)
    result = await client.call_tool(McpServer("calc", server.url), "divide", {"a": 1, "b": 0})
    assert result.output is None
    assert result.error == {
        "type": "mcp_tool_execution_error",
        "content": [{"type": "text", "text": "Error executing tool divide: division by zero"}],
    }
    assert as_mcp_call(result).error is not None


async def test_call_tool_json_rpc_error_gives_protocol_error(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    server = McpServer("broken", mcp_servers.get("failing").url)
    result = await client.call_tool(server, "protocol_error", {})
    assert result.error == {
        "type": "mcp_protocol_error",
        "code": -32602,
        "message": "rejected on purpose",
    }
    as_mcp_call(result)


async def test_call_tool_unknown_tool_gives_tool_execution_error(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    result = await client.call_tool(McpServer("calc", mcp_servers.get("calc").url), "nope", {})
    assert result.error is not None
    assert result.error["type"] == "mcp_tool_execution_error"


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"text"', "42"])
async def test_call_tool_malformed_arguments_give_protocol_error_without_dialling(
    client: McpClient, dialled: list[Any], arguments: str
) -> None:
    result = await client.call_tool(McpServer("calc", "http://127.0.0.1:9/mcp"), "add", arguments)
    assert result.error is not None
    assert result.error["type"] == "mcp_protocol_error"
    assert result.error["code"] == -32602
    as_mcp_call(result)
    assert dialled == []


@pytest.mark.parametrize("arguments", ["", None, {}])
async def test_call_tool_empty_arguments_sent_as_empty_object(
    mcp_servers: McpServerPool, client: McpClient, arguments: Any
) -> None:
    server = McpServer("echo", mcp_servers.get("echo_auth").url)
    result = await client.call_tool(server, "echo_headers", arguments)
    assert result.ok


async def test_call_tool_long_output_truncated_with_marker(mcp_servers: McpServerPool) -> None:
    client = McpClient(LOCAL, limits=McpLimits(max_output_chars=100))
    server = McpServer("calc", mcp_servers.get("calc").url)
    result = await client.call_tool(server, "repeat", {"text": "ab", "times": 500})
    assert result.output == "ab" * 50 + "\n[truncated 900 characters]"


async def test_call_tool_hanging_tool_times_out_within_deadline(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    running = mcp_servers.get("hanging")
    started = time.monotonic()
    result = await client.call_tool(
        McpServer("slow", running.url), "hang", {}, deadline=started + 0.5
    )
    elapsed = time.monotonic() - started
    assert running.hang.started.is_set()
    assert result.error == {
        "type": "mcp_protocol_error",
        "code": -32001,
        "message": "The MCP server 'slow' did not answer within 0.5s.",
    }
    assert 0.45 <= elapsed < 1.5
    as_mcp_call(result)


async def test_call_tool_unreachable_port_gives_http_error(
    client: McpClient, unused_port: int
) -> None:
    server = McpServer("gone", f"http://127.0.0.1:{unused_port}/mcp")
    result = await client.call_tool(server, "add", {"a": 1, "b": 2})
    assert result.error == {
        "type": "http_error",
        "code": 502,
        "message": "Could not connect to the MCP server.",
    }
    as_mcp_call(result)


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_call_tool_unauthorized_gives_http_error_with_status(
    mcp_servers: McpServerPool, client: McpClient, transport: Any
) -> None:
    server = McpServer("auth", mcp_servers.get("auth_required", transport).url)
    result = await client.call_tool(server, "add", {"a": 1, "b": 2})
    assert result.error == {
        "type": "http_error",
        "code": 401,
        "message": "Http status code: 401 (Unauthorized)",
    }
    as_mcp_call(result)


async def test_call_tool_proxy_environment_ignored(
    mcp_servers: McpServerPool, client: McpClient, unused_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = f"http://127.0.0.1:{unused_port}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    result = await client.call_tool(McpServer("calc", mcp_servers.get("calc").url), "add", {})
    assert result.error is not None  # reached the server: missing arguments are a tool error
    assert result.error["type"] == "mcp_tool_execution_error"


async def test_call_tool_cancelled_task_propagates_cancellation(client: McpClient) -> None:
    with start_mcp_server("hanging") as running:
        task = asyncio.create_task(client.call_tool(McpServer("slow", running.url), "hang", {}))
        assert await asyncio.to_thread(running.hang.started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# --------------------------------------------------------------------------- secrets


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_call_tool_echo_auth_receives_bearer_token_and_custom_header(
    mcp_servers: McpServerPool, client: McpClient, transport: Any
) -> None:
    running = mcp_servers.get("echo_auth", transport)
    server = McpServer(
        "echo", running.url, headers={"X-Custom": "custom-value"}, authorization="tok-abc-123"
    )
    result = await client.call_tool(server, "echo_headers", {})
    assert result.output is not None
    assert json.loads(result.output) == {
        "authorization": "Bearer tok-abc-123",
        "host": f"127.0.0.1:{running.port}",
        "x_custom": "custom-value",
    }


async def test_call_tool_authorization_with_bearer_prefix_not_doubled(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    server = McpServer("echo", mcp_servers.get("echo_auth").url, authorization="Bearer tok-xyz")
    result = await client.call_tool(server, "echo_headers", {})
    assert json.loads(result.output or "{}")["authorization"] == "Bearer tok-xyz"


async def test_operations_secrets_never_logged_or_raised(
    mcp_servers: McpServerPool, client: McpClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token, header_secret, query_secret = "sk-token-5b7e", "hdr-secret-91ac", "qs-secret-77d0"
    texts: list[str] = []

    def server(url: str) -> McpServer:
        return McpServer(
            "s",
            f"{url}?api_key={query_secret}",
            headers={"X-Api-Key": header_secret},
            authorization=token,
        )

    echo = await client.call_tool(server(mcp_servers.get("echo_auth").url), "echo_headers", {})
    assert token in (echo.output or "")  # the server did receive it
    for kind in ("auth_required", "failing", "hanging"):
        url = mcp_servers.get(kind).url
        result = await client.call_tool(server(url), "hang", {}, deadline=time.monotonic() + 0.3)
        texts.append(repr(result))
        try:
            await client.list_tools(server(url), deadline=time.monotonic() + 0.3)
        except McpListError as exc:
            texts.extend([str(exc), repr(exc), json.dumps(exc.to_error())])
    texts.append(repr(server("http://127.0.0.1:9/mcp")))
    records = list(caplog.records)
    logged = "\n".join(r.getMessage() for r in records)
    assert any(r.name == "httpx" for r in records)  # request lines (with URLs) were logged
    for secret in (token, header_secret, query_secret):
        assert secret not in logged
        assert all(secret not in text for text in texts)


# --------------------------------------------------------------------------- server config


def test_server_protected_header_refused() -> None:
    for name in ("Host", "mcp-session-id", "MCP-Protocol-Version", "Content-Type", "Accept"):
        with pytest.raises(InvalidRequestError, match="cannot be overridden"):
            McpServer("s", "https://x.example/mcp", headers={name: "v"})


def test_server_any_mcp_prefixed_header_refused() -> None:
    with pytest.raises(InvalidRequestError):
        McpServer("s", "https://x.example/mcp", headers={"Mcp-Param-Region": "eu"})


def test_server_too_many_headers_refused() -> None:
    headers = {f"X-H{i}": "v" for i in range(33)}
    with pytest.raises(InvalidRequestError, match="Too many"):
        McpServer("s", "https://x.example/mcp", headers=headers)


def test_server_oversized_headers_refused_without_echoing_value() -> None:
    value = "s3cr3t" * 3000
    with pytest.raises(InvalidRequestError) as info:
        McpServer("s", "https://x.example/mcp", headers={"X-Big": value})
    assert "s3cr3t" not in info.value.message


@pytest.mark.parametrize("value", ["a\r\nX-Injected: 1", "a\nb", "nul\x00"])
def test_server_header_value_with_control_characters_refused(value: str) -> None:
    with pytest.raises(InvalidRequestError) as info:
        McpServer("s", "https://x.example/mcp", headers={"X-Key": value})
    assert value not in info.value.message


def test_server_invalid_header_name_refused() -> None:
    with pytest.raises(InvalidRequestError, match="header name"):
        McpServer("s", "https://x.example/mcp", headers={"Bad Name": "v"})


def test_server_authorization_twice_refused() -> None:
    with pytest.raises(InvalidRequestError, match="not both"):
        McpServer("s", "https://x.example/mcp", headers={"authorization": "a"}, authorization="b")


def test_server_repr_hides_secrets_and_query() -> None:
    server = McpServer(
        "s", "https://x.example/mcp?key=q-secret", headers={"X-K": "h-secret"}, authorization="t"
    )
    assert repr(server) == "McpServer(label='s', url='https://x.example/mcp')"


@pytest.mark.parametrize(
    ("url", "transport"),
    [
        ("https://x.example/mcp", "streamable_http"),
        ("https://x.example/sse", "sse"),
        ("https://x.example/v1/sse/?a=1", "sse"),
        ("https://x.example/sse/mcp", "streamable_http"),
    ],
)
def test_server_auto_transport_follows_url_path(url: str, transport: str) -> None:
    assert McpServer("s", url).resolved_transport == transport


def test_server_user_authorization_header_sent_as_is() -> None:
    server = McpServer("s", "https://x.example/mcp", headers={"Authorization": "Basic abc"})
    assert server.request_headers() == {"Authorization": "Basic abc"}


# --------------------------------------------------------------------------- import cost


def test_import_mcp_package_does_not_import_sdk() -> None:
    code = (
        "import sys\n"
        "import responses_gateway.mcp, responses_gateway.mcp.client\n"
        "import responses_gateway.mcp.security, responses_gateway.mcp.tools\n"
        "loaded = [m for m in ('mcp', 'mcp_types', 'httpx2', 'httpcore2') if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_tool_info_read_only_reads_hint_variants() -> None:
    schema: dict[str, Any] = {"type": "object"}
    assert ToolInfo("a", schema, annotations={"readOnlyHint": True}).read_only
    assert ToolInfo("a", schema, annotations={"read_only": True}).read_only
    assert not ToolInfo("a", schema, annotations={"readOnlyHint": "yes"}).read_only
    assert not ToolInfo("a", schema).read_only
