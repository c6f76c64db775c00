"""McpConnection over a scripted transport: negotiation (stateless probe, fallback to the
handshake), the envelope and headers of stateless requests, answers to the server's own
requests, cancellation notices, and malformed answers. The real transports and servers are
``test_remote.py``'s and ``test_client.py``'s."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from responses_gateway.mcp.rpc import (
    McpConnection,
    McpHttpStatusError,
    McpInvalidMessageError,
    McpRpcError,
    Message,
    MessageHandler,
)

Answer = Callable[[Message], Any]


class Scripted:
    """A transport whose answers come from ``answer(message)`` (a result dict, an error dict,
    an exception to raise, or ``None`` to never answer)."""

    def __init__(self, answer: Answer, handler: MessageHandler, *, per_request: bool) -> None:
        self.answer = answer
        self.handler = handler
        self.per_request = per_request
        self.requests: list[tuple[Message, dict[str, str]]] = []
        self.sent: list[Message] = []
        self.version: str | None = None
        self.opened = self.closed_calls = 0
        self.hold = asyncio.Event()
        self.sent_more = asyncio.Event()

    @property
    def closed(self) -> bool:
        return False

    @property
    def stream_per_request(self) -> bool:
        return self.per_request

    async def open(self) -> None:
        self.opened += 1

    def negotiated(self, version: str) -> None:
        self.version = version

    async def exchange(self, message: Message, headers: Mapping[str, str]) -> Message:
        self.requests.append((message, dict(headers)))
        answer = self.answer(message)
        if answer is None:
            await self.hold.wait()
        if isinstance(answer, Exception):
            raise answer
        if "error" in answer:
            return {"jsonrpc": "2.0", "id": message["id"], "error": answer["error"]}
        return {"jsonrpc": "2.0", "id": message["id"], "result": answer}

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        self.sent_more.set()

    async def aclose(self) -> None:
        self.closed_calls += 1


def connect(
    answer: Answer, *, probe: bool = True, per_request: bool = True
) -> tuple[McpConnection, Scripted]:
    made: list[Scripted] = []

    def make(handler: MessageHandler) -> Scripted:
        made.append(Scripted(answer, handler, per_request=per_request))
        return made[0]

    return McpConnection(make, probe=probe), made[0] if made else _never()


def _never() -> Scripted:
    raise AssertionError("the transport was not built")


def methods(transport: Scripted) -> list[str]:
    return [message["method"] for message, _ in transport.requests]


def legacy_server(message: Message) -> Any:
    """A server older than the stateless version."""
    if message["method"] == "server/discover":
        return {"error": {"code": -32601, "message": "Method not found"}}
    if message["method"] == "initialize":
        return {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "s"}}
    return {"tools": []}


def stateless_server(message: Message) -> Any:
    if message["method"] == "server/discover":
        return {"supportedVersions": ["2025-11-25", "2026-07-28"], "capabilities": {}}
    return {"tools": [], "echo": message.get("params")}


async def test_a_stateless_server_is_used_without_a_handshake() -> None:
    connection, transport = connect(stateless_server)
    await connection.open()
    result = await connection.request("tools/list")

    assert (connection.stateless, connection.protocol_version) == (True, "2026-07-28")
    assert methods(transport) == ["server/discover", "tools/list"]
    probe, probe_headers = transport.requests[0]
    assert probe["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert probe_headers == {"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}
    assert result["echo"]["_meta"]["io.modelcontextprotocol/clientInfo"] == {
        "name": "responses-gateway",
        "version": "1",
    }
    assert transport.requests[1][1]["mcp-method"] == "tools/list"
    assert transport.sent == []  # no notifications/initialized
    assert transport.version == "2026-07-28"


async def test_an_older_server_gets_the_handshake_after_the_probe() -> None:
    connection, transport = connect(legacy_server)
    await connection.open()
    await connection.request("tools/list")

    assert methods(transport) == ["server/discover", "initialize", "tools/list"]
    initialize = transport.requests[1][0]
    assert initialize["params"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "responses-gateway", "version": "1"},
    }
    assert transport.sent == [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    assert (connection.stateless, transport.version) == (False, "2025-06-18")
    listing, headers = transport.requests[2]
    assert "params" not in listing and headers == {}


@pytest.mark.parametrize(
    "refusal",
    [
        McpHttpStatusError(404, "Not Found"),
        McpRpcError(-32602, "bad params"),
        McpRpcError(-32022, "unsupported", {"supported": ["2025-11-25", "2026-01-01"]}),
    ],
)
async def test_a_refused_probe_falls_back_to_the_handshake(refusal: Exception) -> None:
    def server(message: Message) -> Any:
        return refusal if message["method"] == "server/discover" else legacy_server(message)

    connection, transport = connect(server)
    await connection.open()
    assert methods(transport) == ["server/discover", "initialize"]


async def test_a_probe_answer_without_the_stateless_version_falls_back() -> None:
    def server(message: Message) -> Any:
        if message["method"] == "server/discover":
            return {"supportedVersions": ["2025-11-25"]}
        return legacy_server(message)

    connection, transport = connect(server)
    await connection.open()
    assert methods(transport) == ["server/discover", "initialize"]


async def test_a_stateless_only_server_without_a_common_version_fails() -> None:
    error = McpRpcError(-32022, "unsupported", {"supported": ["2027-01-01"]})
    connection, transport = connect(lambda m: error)
    with pytest.raises(McpRpcError) as info:
        await connection.open()
    assert info.value.code == -32022
    assert methods(transport) == ["server/discover"]


async def test_the_sse_transport_skips_the_probe() -> None:
    connection, transport = connect(legacy_server, probe=False)
    await connection.open()
    assert methods(transport) == ["initialize"]


async def test_an_unknown_protocol_version_is_refused() -> None:
    def server(message: Message) -> Any:
        return {"protocolVersion": "1999-01-01"} if message["method"] == "initialize" else {}

    connection, _ = connect(server, probe=False)
    with pytest.raises(McpInvalidMessageError):
        await connection.open()


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ({"error": {"code": -32603, "message": "boom", "data": {"x": 1}}}, McpRpcError),
        ({"error": "not an object"}, McpInvalidMessageError),
        ({"error": {"code": "1", "message": "m"}}, McpInvalidMessageError),
        ({"error": {"code": True, "message": "m"}}, McpInvalidMessageError),
    ],
)
async def test_error_answers(answer: Any, error: type[Exception]) -> None:
    connection, _ = connect(lambda m: legacy_server(m) if m["method"] != "ping" else answer)
    await connection.open()
    with pytest.raises(error) as info:
        await connection.request("ping")
    if isinstance(info.value, McpRpcError):
        assert (info.value.code, info.value.message, info.value.data) == (-32603, "boom", {"x": 1})


async def test_a_result_that_is_not_an_object_is_malformed() -> None:
    connection, transport = connect(legacy_server)
    await connection.open()
    transport.answer = lambda m: ValueError("unused")
    with pytest.raises(ValueError):
        await connection.request("ping")

    async def not_an_object(message: Message, headers: Mapping[str, str]) -> Message:
        return {"jsonrpc": "2.0", "id": message["id"], "result": [1]}

    transport.exchange = not_an_object  # type: ignore[method-assign]
    with pytest.raises(McpInvalidMessageError):
        await connection.request("ping")


@pytest.mark.parametrize(
    ("request_", "answer"),
    [
        ({"method": "ping"}, {"result": {}}),
        (
            {"method": "sampling/createMessage", "params": {}},
            {"error": {"code": -32600, "message": "Sampling not supported"}},
        ),
        (
            {"method": "elicitation/create", "params": {}},
            {"error": {"code": -32600, "message": "Elicitation not supported"}},
        ),
        (
            {"method": "roots/list"},
            {"error": {"code": -32600, "message": "List roots not supported"}},
        ),
        ({"method": "tasks/get"}, {"error": {"code": -32601, "message": "Method not found"}}),
    ],
)
async def test_server_requests_are_answered_as_the_sdk_answers_them(
    request_: Message, answer: Message
) -> None:
    connection, transport = connect(legacy_server)
    await connection.handle_server_message({"jsonrpc": "2.0", "id": "s-1", **request_})
    assert transport.sent == [{"jsonrpc": "2.0", "id": "s-1", **answer}]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}},
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        {"jsonrpc": "2.0", "method": 3},
    ],
)
async def test_notifications_and_strays_are_ignored(message: Message) -> None:
    connection, transport = connect(legacy_server)
    await connection.handle_server_message(message)
    assert transport.sent == []


async def wait_for_sent(transport: Scripted, count: int) -> None:
    while len(transport.sent) < count:
        transport.sent_more.clear()
        await transport.sent_more.wait()


@pytest.mark.parametrize("per_request", [True, False])
async def test_a_handshake_request_that_times_out_is_cancelled_with_a_notice(
    per_request: bool,
) -> None:
    connection, transport = connect(
        lambda m: None if m["method"] == "tools/call" else legacy_server(m), per_request=per_request
    )
    await connection.open()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await connection.call_tool("hang", {})
    await wait_for_sent(transport, 2)
    call_id = transport.requests[-1][0]["id"]
    assert transport.sent[1] == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": call_id, "reason": "The client stopped waiting."},
    }
    await connection.aclose()
    assert transport.closed_calls == 1


async def test_a_stateless_request_over_http_is_cancelled_by_closing_its_stream_alone() -> None:
    connection, transport = connect(
        lambda m: None if m["method"] == "tools/call" else stateless_server(m)
    )
    await connection.open()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await connection.call_tool("hang", {})
    await connection.aclose()
    assert transport.sent == []


async def test_the_probe_and_the_handshake_are_never_cancelled_with_a_notice() -> None:
    connection, transport = connect(lambda m: None)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await connection.open()
    await connection.aclose()
    assert transport.sent == []


async def test_a_header_mismatch_lists_the_tools_and_calls_once_more_with_their_headers() -> None:
    schema = {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}}
    tools = [
        {"name": "lookup", "inputSchema": schema},
        {"name": "broken", "inputSchema": {"type": "object", "x-mcp-header": "Root"}},
    ]

    def server(message: Message) -> Any:
        method = message["method"]
        if method == "tools/list":
            return {"tools": tools}
        if method == "tools/call":
            if "Mcp-Param-R" not in transport.requests[-1][1]:
                return {"error": {"code": -32020, "message": "header mismatch"}}
            return {"content": [{"type": "text", "text": "ok"}]}
        return stateless_server(message)

    connection, transport = connect(server)
    await connection.open()
    result = await connection.call_tool("lookup", {"r": "eu"})

    assert result == {"content": [{"type": "text", "text": "ok"}]}
    assert methods(transport) == ["server/discover", "tools/call", "tools/list", "tools/call"]
    assert transport.requests[-1][1]["Mcp-Param-R"] == "eu"
    listed, _ = await connection.list_tools_page(None)
    assert [tool["name"] for tool in listed] == ["lookup"]  # invalid annotations: dropped


async def test_a_header_mismatch_at_a_handshake_version_is_an_error() -> None:
    def server(message: Message) -> Any:
        if message["method"] == "tools/call":
            return {"error": {"code": -32020, "message": "header mismatch"}}
        return legacy_server(message)

    connection, _ = connect(server)
    await connection.open()
    with pytest.raises(McpRpcError):
        await connection.call_tool("lookup", {})


async def test_a_request_for_input_is_a_malformed_answer() -> None:
    def server(message: Message) -> Any:
        if message["method"] == "tools/call":
            return {"resultType": "input_required", "inputRequests": {}}
        return stateless_server(message)

    connection, _ = connect(server)
    await connection.open()
    with pytest.raises(McpInvalidMessageError):
        await connection.call_tool("ask", {})


async def test_list_tools_page_reads_the_next_cursor() -> None:
    def server(message: Message) -> Any:
        cursor = (message.get("params") or {}).get("cursor")
        if message["method"] != "tools/list":
            return legacy_server(message)
        return {"tools": [{"name": "a"}], "nextCursor": "2"} if cursor is None else {"tools": []}

    connection, transport = connect(server)
    await connection.open()
    assert await connection.list_tools_page(None) == ([{"name": "a"}], "2")
    assert await connection.list_tools_page("2") == ([], None)
    assert transport.requests[-1][0]["params"] == {"cursor": "2"}
