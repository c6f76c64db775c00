"""Real MCP servers on loopback for tests, built with the official ``mcp`` SDK.

Owns a few small servers, each served over streamable HTTP (``/mcp``, stateful or stateless) or
the legacy SSE transport (``/sse``) by :func:`start_mcp_server`, in a uvicorn thread started with
:func:`responses_gateway.testing.server.run_in_thread` (readiness is observed, never slept on):

- ``calc``: ``add`` (annotated ``readOnlyHint``), ``divide`` (dividing by zero is a tool error),
  ``repeat`` (long output on demand);
- ``echo_auth``: ``echo_headers`` answers with the ``Authorization``, ``Host`` and ``X-Custom``
  headers the server received;
- ``failing``: listing tools answers a JSON-RPC error, and so does calling ``protocol_error``
  (the ``calc`` tools work);
- ``search``: backends for the hosted tools, all deterministic: ``search(query)`` answers
  web-search-like results with a URL (``web_search``), ``find_files(query)`` a JSON list of one
  file result (``file_search``), ``run_python(code)`` JSON logs, or a tool error when the code
  contains ``raise`` (``code_interpreter``), ``draw(prompt)`` a JSON base64 image, revised
  prompt and one partial image (``image_generation``);
- ``hanging``: ``hang`` never returns until the server stops (or :meth:`HangControl.release`);
- ``auth_required``: the ``calc`` tools, behind HTTP 401 unless ``Authorization: Bearer
  <MCP_TEST_TOKEN>`` is sent;
- ``paged``: seven tools ``t0``..``t6`` listed three per page (``nextCursor``);
- ``chatty``: ``chatty`` sends a log notification, pings the client and asks it for input
  (elicitation) on the call's own stream before answering with what the client said;
- ``polling``: ``poll`` closes the call's event stream before answering (the server keeps its
  events, numbered, so the client resumes the stream with ``Last-Event-ID``).

Options: ``stateless`` (streamable HTTP without sessions), ``json_response`` (answers as JSON
bodies, not event streams) and ``handshake_only`` (the server answers ``server/discover`` with
"method not found", as servers older than the stateless protocol version do, so clients fall
back to the ``initialize`` handshake; ``chatty`` and ``polling`` only work that way).

:class:`SessionCounter` wraps any of their apps to count sessions, connections and their ends.

DNS-rebinding protection of the SDK is off, so tests can send any ``Host`` header (the gateway's
pinned transport keeps the URL's host name while dialling loopback). Importing this module
imports the SDK; production code never imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import warnings
from types import TracebackType
from typing import Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    EmptyResult,
    JSONRPCMessage,
    ListToolsResult,
    PingRequest,
    Tool as McpToolDefinition,
    ToolAnnotations,
)
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from responses_gateway.testing.server import RunningServer, run_in_thread

__all__ = [
    "MCP_TEST_TOKEN",
    "CallLog",
    "HangControl",
    "McpServerKind",
    "McpServerPool",
    "McpTransport",
    "MemoryEventStore",
    "RunningMcpServer",
    "SessionCounter",
    "create_mcp_app",
    "read_body",
    "start_mcp_server",
]

McpServerKind = Literal[
    "calc",
    "echo_auth",
    "failing",
    "hanging",
    "auth_required",
    "search",
    "paged",
    "chatty",
    "polling",
]
McpTransport = Literal["streamable_http", "sse"]

MCP_TEST_TOKEN = "mcp-test-token-7c1e0b"
"""The bearer token the ``auth_required`` server accepts."""

_NO_REBINDING_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


class HangControl:
    """Lets tests see that ``hang`` was entered and release every hanging call (thread-safe)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        """Set once a ``hang`` call reached the server."""
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._released = False

    async def wait(self) -> None:
        """Block the calling tool until :meth:`release` (runs in the server's loop)."""
        event = asyncio.Event()
        with self._lock:
            if self._released:
                return
            self._waiters.append((asyncio.get_running_loop(), event))
        self.started.set()
        await event.wait()

    def release(self) -> None:
        """Let every current and future ``hang`` call return."""
        with self._lock:
            self._released = True
            waiters, self._waiters = self._waiters, []
        for loop, event in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)


class CallLog:
    """The tool calls a server executed, in order, as ``(tool, arguments)`` (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[tuple[str, dict[str, object]]] = []

    def record(self, tool: str, **arguments: object) -> None:
        with self._lock:
            self._calls.append((tool, arguments))

    @property
    def calls(self) -> list[tuple[str, dict[str, object]]]:
        with self._lock:
            return list(self._calls)

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()


class RunningMcpServer:
    """An MCP server in a uvicorn thread; stop it with :meth:`stop` or ``with``."""

    def __init__(
        self,
        server: RunningServer,
        kind: McpServerKind,
        transport: McpTransport,
        hang: HangControl,
        log: CallLog | None = None,
    ) -> None:
        self._server = server
        self.log = log or CallLog()
        """The tool calls this server executed (``calc`` tools)."""
        self.kind: McpServerKind = kind
        self.transport: McpTransport = transport
        self.hang = hang
        """Observe and release calls of the ``hang`` tool (``hanging`` servers)."""

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return self._server.url

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self._server.port

    @property
    def url(self) -> str:
        """The MCP endpoint: ``<base_url>/mcp`` (streamable HTTP) or ``<base_url>/sse``."""
        return self.base_url + ("/sse" if self.transport == "sse" else "/mcp")

    def stop(self) -> None:
        """Release hanging calls, then shut the server down and join its thread. Idempotent."""
        self.hang.release()
        self._server.stop()

    def __enter__(self) -> RunningMcpServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RunningMcpServer(kind={self.kind!r}, url={self.url!r})"


class _FailingServer(MCPServer):
    """An MCP server whose ``tools/list`` answers a JSON-RPC error."""

    async def list_tools(self) -> list[McpToolDefinition]:
        raise MCPError(INTERNAL_ERROR, "tool listing is broken on purpose")


class _PagedServer(MCPServer):
    """Lists its tools three per page, the cursor being the index of the page's first tool."""

    async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        tools = await self.list_tools()
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + 3
        return ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )


class _Name(BaseModel):
    name: str


class MemoryEventStore(EventStore):
    """Keeps every event of a server's streams, numbered, for clients that resume one."""

    def __init__(self) -> None:
        self._events: list[tuple[str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        self._events.append((stream_id, message))
        return str(len(self._events))

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        after = int(last_event_id)
        if not 0 < after <= len(self._events):
            return None
        stream = self._events[after - 1][0]
        for number, (stream_id, message) in enumerate(self._events[after:], start=after + 1):
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, str(number)))
        return stream


def _add_calc_tools(server: MCPServer, log: CallLog) -> None:
    @server.tool(
        description="Add two numbers.",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    )
    def add(a: float, b: float) -> float:
        log.record("add", a=a, b=b)
        return a + b

    @server.tool(description="Divide a by b.")
    def divide(a: float, b: float) -> float:
        log.record("divide", a=a, b=b)
        if b == 0:
            raise ToolError("division by zero")
        return a / b

    @server.tool(
        description="Repeat text a number of times.",
        annotations=ToolAnnotations(read_only_hint=True),
    )
    def repeat(text: str, times: int) -> str:
        log.record("repeat", text=text, times=times)
        return text * times


class _Primed:
    """How many ``tools/call`` event streams have sent their priming event (the event id a
    client resumes from): ``poll`` closes its stream only after its own was sent, or the SDK's
    server may close it first and the client has nothing to resume from."""

    def __init__(self) -> None:
        self.sent = 0
        self._waiters: list[asyncio.Event] = []

    def mark(self) -> None:
        self.sent += 1
        for waiter in self._waiters:
            waiter.set()
        self._waiters.clear()

    async def wait_for(self, count: int, *, at_most: float = 10.0) -> None:
        """Until ``count`` streams were primed (bounded: a client too old to resume gets no
        priming event, and its call then goes on after ``at_most`` seconds)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(at_most):
                while self.sent < count:
                    waiter = asyncio.Event()
                    self._waiters.append(waiter)
                    await waiter.wait()


def _observe_priming(app: ASGIApp, primed: _Primed) -> ASGIApp:
    """Count the ``tools/call`` answers whose event stream sent its first event."""

    async def observed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        calls = b"tools/call" in body
        seen = False

        async def watch(message: Message) -> None:
            nonlocal seen
            await send(message)
            event = message["type"] == "http.response.body" and b"id:" in message.get("body", b"")
            if calls and not seen and event:
                seen = True
                primed.mark()

        await app(scope, replay, watch)

    return observed


def _build_server(
    kind: McpServerKind, control: HangControl, log: CallLog, primed: _Primed | None = None
) -> MCPServer:
    server: MCPServer
    if kind == "failing":
        server = _FailingServer("failing", log_level="WARNING")
    elif kind == "paged":
        server = _PagedServer("paged", log_level="WARNING")
    else:
        server = MCPServer(kind, log_level="WARNING")
    if kind in ("calc", "auth_required", "failing"):
        _add_calc_tools(server, log)
    if kind == "failing":

        @server.tool(description="Answer with a JSON-RPC error instead of a result.")
        def protocol_error() -> str:
            raise MCPError(INVALID_PARAMS, "rejected on purpose")

    elif kind == "echo_auth":

        @server.tool(description="Report the request headers the server received.")
        def echo_headers(ctx: Context) -> str:
            headers = ctx.headers or {}
            return json.dumps(
                {
                    "authorization": headers.get("authorization"),
                    "host": headers.get("host"),
                    "x_custom": headers.get("x-custom"),
                }
            )

    elif kind == "search":

        @server.tool(description="Search the web.")
        def search(query: str) -> str:
            log.record("search", query=query)
            slug = "-".join(query.split())
            return f"1. {query}: https://example.com/{slug}"

        @server.tool(description="Search the files.")
        def find_files(query: str) -> str:
            log.record("find_files", query=query)
            return json.dumps(
                [{"file_id": "file_1", "filename": "notes.md", "score": 0.5, "text": query}]
            )

        @server.tool(description="Run Python code.")
        def run_python(code: str) -> str:
            log.record("run_python", code=code)
            if "raise" in code:
                raise ToolError("Traceback: boom")
            return json.dumps({"logs": f"ran {len(code)} chars\n"})

        @server.tool(description="Draw an image.")
        def draw(prompt: str) -> str:
            log.record("draw", prompt=prompt)
            image = {"result": "iVBORw0KGgo=", "revised_prompt": f"{prompt}, watercolor"}
            return json.dumps({**image, "partial_images": ["iVBO"]})

    elif kind == "hanging":

        @server.tool(description="Never return (until the server stops).")
        async def hang() -> str:
            await control.wait()
            return "released"

    elif kind == "paged":
        for index in range(7):
            server.tool(name=f"t{index}", description=f"Tool {index}.")(_constant(index))

    elif kind == "chatty":

        @server.tool(description="Log, ping the client and ask it for input, then answer.")
        async def chatty(ctx: Context) -> str:
            with warnings.catch_warnings():  # logging is deprecated at the stateless version
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.info("working on it")
            related = ServerMessageMetadata(related_request_id=ctx.request_id)
            await ctx.session.send_request(PingRequest(), EmptyResult, metadata=related)
            try:
                await ctx.elicit("Your name?", _Name)
                elicited = "accepted"
            except MCPError as exc:
                elicited = f"{exc.error.code} {exc.error.message}"
            return f"pinged; elicitation: {elicited}"

    elif kind == "polling":
        calls = [0]

        @server.tool(description="Close the call's stream, then answer.")
        async def poll(ctx: Context) -> str:
            calls[0] += 1
            if primed is not None:  # its stream's priming event left first (see _Primed)
                await primed.wait_for(calls[0])
            await ctx.close_sse_stream()
            return "answered after the stream closed"

    return server


def _constant(index: int) -> Any:
    def tool() -> int:
        return index

    return tool


def _require_token(app: ASGIApp, token: str) -> ASGIApp:
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            body = b'{"error":"unauthorized"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return guarded


_HANDSHAKES = frozenset({"initialize", "server/discover"})
"""The first request of a session: ``server/discover`` (2026 protocol) or ``initialize``."""


class SessionCounter:
    """ASGI wrapper around an MCP app (thread-safe): counts handshakes (sessions opened), the
    TCP connections requests came over, and the legacy SSE streams that were opened and that
    ended (the server saw the client go): :meth:`wait_closed` blocks until enough ended."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._changed = threading.Condition()
        self.handshakes = 0
        self.streams_opened = 0
        self.streams_ended = 0
        self.connections: set[object] = set()

    def _bump(self, field: str) -> None:
        with self._changed:
            setattr(self, field, getattr(self, field) + 1)
            self._changed.notify_all()

    def wait_closed(self, streams: int) -> tuple[int, int]:
        """``(opened, ended)`` SSE streams once ``streams`` have ended (or after 10 s)."""
        with self._changed:
            self._changed.wait_for(lambda: self.streams_ended >= streams, timeout=10)
            return self.streams_opened, self.streams_ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        with self._changed:
            self.connections.add(tuple(scope.get("client") or ()))
        if scope["method"] == "GET" and scope["path"].endswith("/sse"):
            self._bump("streams_opened")
            try:
                await self._app(scope, receive, send)
            finally:
                self._bump("streams_ended")
            return
        if scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        if method in _HANDSHAKES:
            self._bump("handshakes")
        await self._app(scope, replay, send)


async def read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that replays its messages to the app behind
    (for wrappers that look at a request before passing it on)."""
    messages: list[Message] = []
    body = b""
    while True:
        message = await receive()
        messages.append(message)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return body, replay


def _handshake_only(app: ASGIApp) -> ASGIApp:
    """Answer ``server/discover`` with "method not found" (a server older than the stateless
    protocol version); every other request goes to ``app``."""

    async def older(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "server/discover":
            answer = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": request.get("id"),
                    "error": {"code": -32601, "message": "Method not found"},
                }
            ).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer})
            return
        await app(scope, replay, send)

    return older


def create_mcp_app(
    kind: McpServerKind = "calc",
    transport: McpTransport = "streamable_http",
    *,
    stateless: bool = False,
    json_response: bool = False,
    handshake_only: bool = False,
    hang: HangControl | None = None,
    log: CallLog | None = None,
) -> ASGIApp:
    """The ASGI app of one test server (streamable HTTP at ``/mcp``, SSE at ``/sse``)."""
    primed = _Primed() if kind == "polling" and transport != "sse" else None
    server = _build_server(kind, hang or HangControl(), log or CallLog(), primed)
    app: ASGIApp
    if transport == "sse":
        app = server.sse_app(transport_security=_NO_REBINDING_CHECK)
    else:
        polling = kind == "polling"
        app = server.streamable_http_app(
            stateless_http=stateless,
            json_response=json_response,
            transport_security=_NO_REBINDING_CHECK,
            event_store=MemoryEventStore() if polling else None,
            retry_interval=10 if polling else None,
        )
    if primed is not None:
        app = _observe_priming(app, primed)
    if handshake_only:
        app = _handshake_only(app)
    if kind == "auth_required":
        app = _require_token(app, MCP_TEST_TOKEN)
    return app


def start_mcp_server(
    kind: McpServerKind = "calc",
    transport: McpTransport = "streamable_http",
    *,
    stateless: bool = False,
    json_response: bool = False,
    handshake_only: bool = False,
    host: str = "127.0.0.1",
    port: int = 0,
) -> RunningMcpServer:
    """Serve one test server on loopback in a thread; return once it accepts connections.

    Args:
        kind: Which server (see the module docstring).
        transport: ``streamable_http`` (endpoint ``/mcp``) or ``sse`` (endpoint ``/sse``).
        stateless: Serve streamable HTTP without sessions (the SDK's ``stateless_http``).
        json_response: Answer requests with JSON bodies instead of event streams.
        handshake_only: Refuse ``server/discover`` (see the module docstring).
        host: The interface to bind.
        port: The port; 0 picks a free one.
    """
    hang, log = HangControl(), CallLog()
    app = create_mcp_app(
        kind,
        transport,
        stateless=stateless,
        json_response=json_response,
        handshake_only=handshake_only,
        hang=hang,
        log=log,
    )
    running = run_in_thread(app, host=host, port=port, graceful_timeout=2)
    return RunningMcpServer(running, kind, transport, hang, log)


class McpServerPool:
    """Starts each ``(kind, transport, stateless)`` server once, on first use (e.g. per session).

    ``pool.get("calc", "sse").url`` starts or reuses a server; :meth:`stop` stops them all.
    """

    def __init__(self) -> None:
        self._running: dict[tuple[McpServerKind, McpTransport, bool, bool, bool], RunningMcpServer]
        self._running = {}
        self._lock = threading.Lock()

    def get(
        self,
        kind: McpServerKind = "calc",
        transport: McpTransport = "streamable_http",
        *,
        stateless: bool = False,
        json_response: bool = False,
        handshake_only: bool = False,
    ) -> RunningMcpServer:
        """The running server of that kind, started now if needed."""
        key = (kind, transport, stateless, json_response, handshake_only)
        with self._lock:
            if key not in self._running:
                self._running[key] = start_mcp_server(
                    kind,
                    transport,
                    stateless=stateless,
                    json_response=json_response,
                    handshake_only=handshake_only,
                )
            return self._running[key]

    def stop(self) -> None:
        """Stop every server started so far."""
        with self._lock:
            running, self._running = list(self._running.values()), {}
        for server in running:
            server.stop()
