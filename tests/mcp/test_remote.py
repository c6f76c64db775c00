"""The HTTP transports (streamable HTTP, SSE) through McpClient, against the ``mcp`` SDK's own
servers on loopback and, for the corners a real server rarely takes, scripted answers.

The SDK servers are the oracle of the wire: what the client sends is recorded at the server
(``Wire``), and what the servers send back (event streams, JSON bodies, interleaved requests and
notifications, pages, resumable streams) must come out as the same results the SDK's client
gave. The scripted answers (``httpx.MockTransport`` behind the operator transport) cover
redirects, odd statuses, odd bodies and the SSE transport's endpoint check.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from responses_gateway.mcp import (
    McpClient,
    McpLimits,
    McpListError,
    McpPolicy,
    McpServer,
    McpSessions,
    ToolResult,
)
from responses_gateway.testing.faults import Call, Fault, FaultProxy
from responses_gateway.testing.mcp_servers import McpServerPool, create_mcp_app, read_body
from responses_gateway.testing.server import run_in_thread

LOCAL = McpPolicy(allow_http=True, allow_loopback=True)


class Wire:
    """ASGI wrapper recording every request: method, JSON-RPC method, and the MCP headers."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._lock = threading.Lock()
        self.seen: list[dict[str, Any]] = []

    def methods(self) -> list[str]:
        with self._lock:
            return [entry["rpc"] or entry["http"] for entry in self.seen]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        body, replay = await read_body(receive) if scope["method"] == "POST" else (b"", receive)
        try:
            rpc = json.loads(body).get("method") if body else None
        except (ValueError, AttributeError):
            rpc = None
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        with self._lock:
            self.seen.append(
                {
                    "http": scope["method"],
                    "rpc": rpc,
                    "session": headers.get("mcp-session-id"),
                    "version": headers.get("mcp-protocol-version"),
                    "mcp_method": headers.get("mcp-method"),
                    "last_event_id": headers.get("last-event-id"),
                }
            )
        await self._app(scope, replay, send)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[Wire, str]]]:
    """Serve an SDK test server behind a :class:`Wire`; returns ``(wire, url)``."""
    with_stack: list[Any] = []

    def start(kind: Any = "calc", transport: Any = "streamable_http", **options: Any) -> Any:
        wire = Wire(create_mcp_app(kind, transport, **options))
        running = run_in_thread(wire)
        with_stack.append(running)
        path = "/sse" if transport == "sse" else "/mcp"
        return wire, running.url + path

    yield start
    for running in with_stack:
        running.stop()


@pytest.fixture
def client() -> McpClient:
    return McpClient(LOCAL)


# --------------------------------------------------------------------------- the wire


async def test_an_older_server_gets_the_handshake_its_session_and_a_delete(
    serve: Callable[..., tuple[Wire, str]], client: McpClient
) -> None:
    wire, url = serve("calc", handshake_only=True)
    result = await client.call_tool(McpServer("calc", url), "add", {"a": 2, "b": 3})

    assert result == ToolResult("5.0")  # answered as an event stream
    assert wire.methods() == [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/call",
        "DELETE",
    ]
    session = wire.seen[2]["session"]
    assert session and wire.seen[1]["session"] is None
    assert all(entry["session"] == session for entry in wire.seen[2:])
    assert [entry["version"] for entry in wire.seen[1:]] == [None, *["2025-11-25"] * 3]


async def test_a_stateless_server_gets_a_probe_and_its_requests_only(
    serve: Callable[..., tuple[Wire, str]], client: McpClient
) -> None:
    wire, url = serve("calc", stateless=True)
    tools = await client.list_tools(McpServer("calc", url))

    assert [tool.name for tool in tools] == ["add", "divide", "repeat"]
    assert wire.methods() == ["server/discover", "tools/list"]
    assert [(e["version"], e["mcp_method"]) for e in wire.seen] == [
        ("2026-07-28", "server/discover"),
        ("2026-07-28", "tools/list"),
    ]


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"json_response": True, "handshake_only": True}, id="json-handshake"),
        pytest.param({"json_response": True}, id="json-stateless"),
        pytest.param({"handshake_only": True, "stateless": True}, id="sse-stream-no-session"),
    ],
)
async def test_json_and_streamed_answers_give_the_same_results(
    serve: Callable[..., tuple[Wire, str]], client: McpClient, options: dict[str, Any]
) -> None:
    _, url = serve("calc", **options)
    server = McpServer("calc", url)
    tools = await client.list_tools(server)
    added = await client.call_tool(server, "add", {"a": 1, "b": 2})
    failed = await client.call_tool(server, "divide", {"a": 1, "b": 0})

    assert [tool.name for tool in tools] == ["add", "divide", "repeat"]
    assert tools[0].annotations == {"readOnlyHint": True, "idempotentHint": True}
    assert added == ToolResult("3.0")
    assert failed.error == {
        "type": "mcp_tool_execution_error",
        "content": [{"type": "text", "text": "Error executing tool divide: division by zero"}],
    }


@pytest.mark.parametrize("handshake_only", [False, True])
async def test_a_paged_listing_is_read_to_its_end(
    serve: Callable[..., tuple[Wire, str]], client: McpClient, handshake_only: bool
) -> None:
    wire, url = serve("paged", handshake_only=handshake_only)
    tools = await client.list_tools(McpServer("paged", url))

    assert [tool.name for tool in tools] == [f"t{i}" for i in range(7)]
    assert wire.methods().count("tools/list") == 3


async def test_a_paged_listing_past_the_tool_limit_fails(
    serve: Callable[..., tuple[Wire, str]],
) -> None:
    _, url = serve("paged")
    with pytest.raises(McpListError, match="more than 4 tools"):
        await McpClient(LOCAL, limits=McpLimits(max_tools=4)).list_tools(McpServer("p", url))


@pytest.mark.parametrize(
    ("transport", "options"),
    [
        pytest.param("streamable_http", {"handshake_only": True}, id="streamable"),
        pytest.param("sse", {}, id="sse"),
    ],
)
async def test_server_messages_inside_a_call_are_answered_as_the_sdk_answers_them(
    serve: Callable[..., tuple[Wire, str]],
    client: McpClient,
    transport: str,
    options: dict[str, Any],
) -> None:
    # The tool logs, pings the client and asks it for input before it answers.
    _, url = serve("chatty", transport, **options)
    result = await client.call_tool(McpServer("chatty", url), "chatty", {})
    assert result == ToolResult("pinged; elicitation: -32600 Elicitation not supported")


async def test_a_stream_closed_before_its_answer_is_resumed_from_its_last_event(
    serve: Callable[..., tuple[Wire, str]], client: McpClient
) -> None:
    wire, url = serve("polling", handshake_only=True)
    result = await client.call_tool(McpServer("polling", url), "poll", {})

    assert result == ToolResult("answered after the stream closed")
    resumed = [entry for entry in wire.seen if entry["http"] == "GET"]
    assert len(resumed) == 1 and resumed[0]["last_event_id"]
    assert resumed[0]["session"] == wire.seen[-1]["session"]


async def test_a_session_over_sse_is_bounded_per_event_not_per_stream(
    serve: Callable[..., tuple[Wire, str]],
) -> None:
    _, url = serve("calc", "sse")
    client = McpClient(LOCAL, limits=McpLimits(max_response_bytes=3000))
    server, sessions = McpServer("calc", url), McpSessions()
    outputs = [
        await client.call_tool(server, "repeat", {"text": "x", "times": 1000}, sessions=sessions)
        for _ in range(4)
    ]
    too_big = await client.call_tool(
        server, "repeat", {"text": "x", "times": 5000}, sessions=sessions
    )
    await sessions.aclose()

    assert [result.output for result in outputs] == ["x" * 1000] * 4
    assert too_big.error == {
        "type": "http_error",
        "code": 502,
        "message": "The MCP server's answer exceeded the gateway's size limit.",
    }


async def test_a_request_server_answer_over_the_limit_fails(
    serve: Callable[..., tuple[Wire, str]],
) -> None:
    _, url = serve("calc")
    client = McpClient(LOCAL, limits=McpLimits(max_response_bytes=2000))
    result = await client.call_tool(McpServer("calc", url), "repeat", {"text": "a", "times": 5000})
    assert result.error is not None
    assert (result.error["type"], result.error["code"]) == ("http_error", 502)


async def test_a_dropped_connection_mid_answer_is_an_http_error_and_not_retried(
    mcp_servers: McpServerPool, client: McpClient
) -> None:
    running = mcp_servers.get("calc", handshake_only=True)

    def tool_call(call: Call) -> bool:
        return b'"tools/call"' in call.body

    with FaultProxy.start(running.base_url) as proxy:
        proxy.script(Fault("cut", match=tool_call, limit=40))
        result = await client.call_tool(McpServer("calc", f"{proxy.url}/mcp"), "add", {})
        calls = [call for call in proxy.calls if tool_call(call)]

    assert result.error == {
        "type": "http_error",
        "code": 502,
        "message": "The connection to the MCP server failed.",
    }
    assert len(calls) == 1


# --------------------------------------------------------------------------- scripted answers


Handler = Callable[[httpx.Request], httpx.Response]


def scripted(handler: Handler, **limits: Any) -> McpClient:
    """A client whose connections get ``handler``'s answers (operator servers: no DNS)."""
    return McpClient(
        LOCAL,
        limits=McpLimits(**limits),
        inner_transport=lambda: httpx.MockTransport(handler),
    )


def operator(url: str = "http://mcp.internal/mcp", transport: Any = "auto") -> McpServer:
    return McpServer("op", url, transport=transport, trusted=True)


def rpc(request: httpx.Request) -> dict[str, Any]:
    return dict(json.loads(request.content)) if request.content else {}


def answer(request: httpx.Request, result: Any, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": rpc(request)["id"], "result": result}
    return httpx.Response(200, json=body, headers=headers)


def older_server(tools: Callable[[httpx.Request], httpx.Response]) -> Handler:
    """Refuses the probe, accepts the handshake (session ``s1``), then asks ``tools``."""

    def handle(request: httpx.Request) -> httpx.Response:
        method = rpc(request).get("method")
        if method == "server/discover":
            return httpx.Response(404)
        if method == "initialize":
            version = {"protocolVersion": "2025-03-26", "capabilities": {}}
            return answer(request, version, **{"mcp-session-id": "s1"})
        if method == "notifications/initialized" or request.method == "DELETE":
            return httpx.Response(202)
        return tools(request)

    return handle


async def test_a_same_origin_307_is_followed_with_its_body() -> None:
    paths: list[str] = []

    def tools(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        if request.url.path == "/mcp":
            return httpx.Response(307, headers={"location": "/mcp/"})
        return answer(request, {"tools": [{"name": "a", "inputSchema": {}}]})

    listed = await scripted(older_server(tools)).list_tools(operator())
    assert [tool.name for tool in listed] == ["a"]
    assert paths == ["/mcp", "/mcp/"]


@pytest.mark.parametrize(
    ("status", "location"),
    [
        (302, "/mcp/"),  # would turn the POST into a GET
        (307, "http://elsewhere.internal/mcp"),  # another origin
        (308, "https://mcp.internal/mcp"),  # another scheme
    ],
)
async def test_other_redirects_are_not_followed(status: int, location: str) -> None:
    def tools(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers={"location": location})

    result = await scripted(older_server(tools)).call_tool(operator(), "a", {})
    assert result.error is not None
    assert (result.error["type"], result.error["code"]) == ("http_error", status)


async def test_an_http_error_carrying_a_json_rpc_error_is_that_error() -> None:
    def tools(request: httpx.Request) -> httpx.Response:
        error = {"code": -32602, "message": "Unknown tool: a"}
        return httpx.Response(400, json={"jsonrpc": "2.0", "id": None, "error": error})

    result = await scripted(older_server(tools)).call_tool(operator(), "a", {})
    assert result.error == {
        "type": "mcp_protocol_error",
        "code": -32602,
        "message": "Unknown tool: a",
    }


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (
            httpx.Response(202),
            {
                "type": "mcp_protocol_error",
                "code": -32600,
                "message": "The MCP server accepted the request without answering.",
            },
        ),
        (
            httpx.Response(200, text="hello", headers={"content-type": "text/plain"}),
            {
                "type": "mcp_protocol_error",
                "code": -32603,
                "message": "The MCP server sent an invalid response.",
            },
        ),
        (
            httpx.Response(200, json={"jsonrpc": "2.0", "id": 999, "result": {}}),
            {
                "type": "mcp_protocol_error",
                "code": -32603,
                "message": "The MCP server sent an invalid response.",
            },
        ),
        (
            httpx.Response(500, json={"detail": "oops"}),
            {
                "type": "http_error",
                "code": 500,
                "message": "Http status code: 500 (Internal Server Error)",
            },
        ),
    ],
)
async def test_odd_answers_to_a_call(response: httpx.Response, error: dict[str, Any]) -> None:
    result = await scripted(older_server(lambda request: response)).call_tool(operator(), "a", {})
    assert result.error == error


async def test_a_session_the_server_ended_is_replaced_by_a_new_one() -> None:
    ended = {"s1": False}
    initializations: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        method = rpc(request).get("method")
        session = request.headers.get("mcp-session-id")
        if method == "server/discover":
            return httpx.Response(404)
        if method == "initialize":
            new = f"s{len(initializations) + 1}"
            initializations.append(new)
            version = {"protocolVersion": "2025-11-25", "capabilities": {}}
            return answer(request, version, **{"mcp-session-id": new})
        if method == "notifications/initialized" or request.method == "DELETE":
            return httpx.Response(202)
        if session == "s1" and ended["s1"]:
            return httpx.Response(404)
        ended["s1"] = True
        return answer(request, {"content": [{"type": "text", "text": session}]})

    client, sessions = scripted(handle), McpSessions()
    first = await client.call_tool(operator(), "a", {}, sessions=sessions)
    lost = await client.call_tool(operator(), "a", {}, sessions=sessions)
    again = await client.call_tool(operator(), "a", {}, sessions=sessions)
    await sessions.aclose()

    assert (first.output, again.output) == ("s1", "s2")
    assert lost.error == {
        "type": "http_error",
        "code": 404,
        "message": "Http status code: 404 (Not Found)",
    }
    assert initializations == ["s1", "s2"]


def sse_server(endpoint: str, *, answers: bool = True) -> Handler:
    """A legacy SSE server: the stream names ``endpoint``; POSTs are accepted (their answers
    do not matter here: the endpoint check comes first)."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            stream = f"event: endpoint\ndata: {endpoint}\n\n".encode()
            return httpx.Response(
                200, content=stream, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(202)

    return handle


@pytest.mark.parametrize("endpoint", ["http://evil.internal/messages", "https://mcp.internal/m"])
async def test_an_sse_endpoint_on_another_origin_is_refused(endpoint: str) -> None:
    client = scripted(sse_server(endpoint))
    with pytest.raises(McpListError) as info:
        await client.list_tools(operator("http://mcp.internal/sse"))
    assert info.value.code == "mcp_protocol_error"
    assert "invalid response" in info.value.message


async def test_an_sse_stream_that_ends_before_its_endpoint_fails_the_listing() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=b": nothing\n\n", headers={"content-type": "text/event-stream"}
        )

    with pytest.raises(McpListError) as info:
        await scripted(handle).list_tools(operator("http://mcp.internal/sse"))
    assert info.value.message.endswith("MCP error -32000: Connection closed")


async def test_an_sse_stream_refused_with_a_status_is_that_status() -> None:
    with pytest.raises(McpListError) as info:
        await scripted(lambda request: httpx.Response(403)).list_tools(
            operator("http://mcp.internal/sse")
        )
    assert info.value.message.endswith("Http status code: 403 (Forbidden)")
