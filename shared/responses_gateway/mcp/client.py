"""Talking to MCP servers: list their tools and call one, over the gateway's own MCP client.

Owns :class:`McpClient`, whose two operations each open one connection (streamable HTTP, the
legacy SSE transport, or stdio: a server process spawned for the operation and stopped after
it), run under a deadline and close it again, unless the caller passes the
:class:`McpSessions` of its run (one session per server, reused by every operation of the run
and closed when the run ends; for an operator stdio server marked ``shared``, the session the
process's :class:`SharedMcpSessions` keeps across runs, whose process outlives them and stops
with the app): :meth:`McpClient.list_tools`
returns :class:`ToolInfo` values or raises :class:`McpListError` (HTTP 424 /
``mcp_list_tools.failed``), :meth:`McpClient.call_tool` always returns a :class:`ToolResult`
whose ``error`` is one of the OpenAI ``mcp_call.error`` objects (``mcp_protocol_error``,
``mcp_tool_execution_error``, ``http_error``). Also owns :class:`McpServer` (one server as a
request describes it, or as the operator configured it, with its secrets) and the limits on
what a server may send back.

The protocol is spoken by :mod:`.rpc` (the handshake and JSON-RPC) over :mod:`.remote`
(streamable HTTP, SSE; on the gateway's ``httpx``) or :mod:`.stdio`: the ``mcp`` SDK is not
imported (it is the test suite's oracle and test servers only). Every URL of a request's server
goes through :func:`responses_gateway.mcp.security.check_server_url` first and every connection
through the pinned transport. Operator-configured servers (``McpServer.trusted``) skip that
address check: the operator chose them, and they may be private by design. Only they may use
stdio, and a stdio process gets a minimal environment (see :func:`child_environment`), never the
gateway's own secrets. This module must not log or raise anything that contains header values,
the ``authorization`` token, a stdio server's ``env`` or a full URL, and knows nothing about the
agent loop, approvals or output items (see ``mcp.tools``).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO, TypeVar

import httpx

from responses_gateway.errors import GatewayError, InvalidRequestError
from responses_gateway.mcp.remote import SseTransport, StreamableHttpTransport
from responses_gateway.mcp.rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    REQUEST_TIMEOUT as TIMEOUT_CODE,
    McpConnectError,
    McpConnection,
    McpConnectionError,
    McpHttpStatusError,
    McpInvalidMessageError,
    McpRpcError,
    McpTransportError,
)
from responses_gateway.mcp.security import (
    McpPolicy,
    McpUrlRefusedError,
    ResolvedTarget,
    Resolver,
    bounded_transport,
    check_server_url,
    install_log_redaction,
    pinned_transport,
    redact_url,
)

__all__ = [
    "MAX_HEADERS",
    "MAX_HEADER_BYTES",
    "PROTECTED_HEADERS",
    "SHARED_TIMEOUTS_BEFORE_RETIRING",
    "STDIO_INHERITED_ENV",
    "McpClient",
    "McpLimits",
    "McpListError",
    "McpServer",
    "McpSessions",
    "SharedMcpSessions",
    "ToolInfo",
    "ToolResult",
    "TransportKind",
    "child_environment",
    "http_error",
    "protocol_error",
    "tool_execution_error",
]

logger = logging.getLogger(__name__)

TransportKind = Literal["streamable_http", "sse", "auto", "stdio"]
"""``auto`` picks ``sse`` when the URL path ends in ``/sse`` and streamable HTTP otherwise;
``stdio`` spawns ``McpServer.command`` (operator servers only)."""

STDIO_INHERITED_ENV = ("LANG", "LC_ALL", "LC_CTYPE")
"""Variables a stdio server process inherits from the gateway on top of the minimal set every
server gets (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``: the ``mcp`` SDK's,
:data:`responses_gateway.mcp.stdio.BASE_ENV`) and its configured ``env``."""

MAX_HEADERS = 32
"""The most headers a request may set for one server (``authorization`` included)."""
MAX_HEADER_BYTES = 16 * 1024
"""The most bytes of header names and values a request may set for one server."""
PROTECTED_HEADERS = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers the transport owns; user ``headers`` may not set them (nor any ``mcp-*`` header)."""

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_BAD_VALUE_CHARS = re.compile(r"[\r\n\x00]")

_MAX_LIST_PAGES = 20

_T = TypeVar("_T")


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class McpServer:
    """One MCP server: a request's, or one the operator configured (``trusted``).

    ``headers``, ``authorization``, ``args`` and ``env`` are secrets. A remote server has a
    ``url``; a stdio server (``transport="stdio"``, operator servers only) has a ``command``.

    Constructing it validates the headers: at most :data:`MAX_HEADERS`, :data:`MAX_HEADER_BYTES`
    in total, valid names and values, none of :data:`PROTECTED_HEADERS` or ``mcp-*``, and no
    ``Authorization`` header when ``authorization`` is given too.

    Raises:
        InvalidRequestError: (from the constructor) the headers break one of those rules; the
            message names the header, never its value.
        ValueError: (from the constructor) a stdio server without ``command``, that is not
            ``trusted`` or has a ``url`` or headers; a remote server without ``url`` or with a
            ``command``. These are programming errors, never a request's.
    """

    label: str
    url: str = field(default="", repr=False)
    transport: TransportKind = "auto"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    authorization: str | None = field(default=None, repr=False)
    """An OAuth access token, sent as ``Authorization: Bearer <token>``."""
    command: str | None = None
    """The executable of a stdio server."""
    args: tuple[str, ...] = field(default=(), repr=False)
    """The arguments of a stdio server's command."""
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra environment variables of a stdio server's process."""
    trusted: bool = False
    """Configured by the operator: dialled without the SSRF checks of :class:`McpPolicy` (it may
    be private by design), and the only kind that may use stdio."""
    shared: bool = False
    """An operator stdio server declared shareable: runs given a :class:`SharedMcpSessions`
    use its one session (one process) instead of their own."""

    def __post_init__(self) -> None:
        if self.shared and self.transport != "stdio":
            raise ValueError("only stdio MCP servers may be shared")
        if self.transport == "stdio":
            if not self.command:
                raise ValueError("a stdio MCP server needs a command")
            if not self.trusted:
                raise ValueError("only operator-configured (trusted) MCP servers may use stdio")
            if self.url or self.headers or self.authorization is not None:
                raise ValueError("a stdio MCP server has no url, headers or authorization")
            return
        if not self.url:
            raise ValueError("a remote MCP server needs a url")
        if self.command is not None or self.args or self.env:
            raise ValueError("command, args and env only apply to stdio MCP servers")
        _check_headers(self.headers, self.authorization)

    @property
    def resolved_transport(self) -> Literal["streamable_http", "sse", "stdio"]:
        """The transport used: ``auto`` means SSE for URLs whose path ends in ``/sse``."""
        if self.transport != "auto":
            return self.transport
        path = _url_path(self.url).rstrip("/")
        return "sse" if path.endswith("/sse") else "streamable_http"

    @property
    def display(self) -> str:
        """The server for logs: the redacted URL, or ``stdio:<program name>``."""
        if self.transport == "stdio":
            return f"stdio:{os.path.basename(self.command or '')}"
        return redact_url(self.url)

    def request_headers(self) -> dict[str, str]:
        """The headers sent with every request to this server (secrets included)."""
        headers = dict(self.headers)
        if self.authorization is not None:
            token = self.authorization.strip()
            headers["Authorization"] = (
                token if token[:7].lower() == "bearer " else f"Bearer {token}"
            )
        return headers

    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in logs or messages (header values, the token, the
        stdio process's configured environment values)."""
        values = [*self.headers.values(), *self.env.values()]
        if self.authorization is not None:
            values.append(self.authorization)
            values.append(self.authorization.strip())
        return tuple(v for v in values if len(v) >= 4)

    def __repr__(self) -> str:
        if self.transport == "stdio":
            return f"McpServer(label={self.label!r}, command={self.command!r})"
        return f"McpServer(label={self.label!r}, url={redact_url(self.url)!r})"


def child_environment(
    configured: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment passed to a stdio server on top of the minimal set every server gets.

    :data:`STDIO_INHERITED_ENV` from ``environ`` (the gateway's environment by default) where set,
    then ``configured`` (the operator's ``env``), which wins. Nothing else of the gateway's
    environment (its keys, tokens, AWS credentials) reaches the child.
    """
    source = os.environ if environ is None else environ
    env = {name: source[name] for name in STDIO_INHERITED_ENV if source.get(name)}
    env.update(configured)
    return env


@dataclass(frozen=True, slots=True)
class McpLimits:
    """Bounds on one server's answers and default time budgets."""

    max_tools: int = 512
    """A listing with more tools than this fails (``McpListError``)."""
    max_output_chars: int = 100_000
    """Longer tool output (or error text) is cut here and ends with a truncation marker."""
    max_response_bytes: int = 8 * 1024 * 1024
    """A single HTTP response body larger than this fails the operation."""
    connect_timeout: float = 10.0
    """Seconds to establish a TCP/TLS connection (within the deadline)."""
    list_timeout: float = 30.0
    """The budget of :meth:`McpClient.list_tools` when no deadline is given."""
    call_timeout: float = 120.0
    """The budget of :meth:`McpClient.call_tool` when no deadline is given."""


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool a server listed (or an ``mcp_list_tools`` item in context recorded)."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    annotations: dict[str, Any] | None = None
    """MCP tool annotations in their wire form (``{"readOnlyHint": true, ...}``)."""

    @property
    def read_only(self) -> bool:
        """Whether the server marked the tool read-only (``readOnlyHint``)."""
        if not self.annotations:
            return False
        for key in ("readOnlyHint", "read_only_hint", "read_only"):
            if key in self.annotations:
                return self.annotations[key] is True
        return False


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call: ``output`` text, or an OpenAI ``mcp_call.error`` object."""

    output: str | None
    error: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Whether the call succeeded (``error`` is ``None``)."""
        return self.error is None


def protocol_error(code: int, message: str) -> dict[str, Any]:
    """``{"type":"mcp_protocol_error","code","message"}``: a JSON-RPC level failure."""
    return {"type": "mcp_protocol_error", "code": code, "message": message}


def tool_execution_error(content: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"type":"mcp_tool_execution_error","content":[...]}``: the tool reported ``isError``."""
    return {"type": "mcp_tool_execution_error", "content": content}


def http_error(code: int, message: str) -> dict[str, Any]:
    """``{"type":"http_error","code","message"}``: the server could not be reached or answered
    with an HTTP error status (``code`` is that status; 502 when no status was received)."""
    return {"type": "http_error", "code": code, "message": message}


class McpListError(GatewayError):
    """An MCP server's tools could not be listed: the request fails with HTTP 424.

    ``message`` is OpenAI's wording (``Error retrieving tool list from MCP server: '<label>'.
    ...``) and doubles as the ``error`` string of a failed ``mcp_list_tools`` item. ``code`` is
    ``http_error``, ``mcp_protocol_error``, ``timeout`` or ``url_not_allowed``.
    """

    status_code = 424
    error_type = "external_connector_error"

    def __init__(self, server_label: str, detail: str, *, code: str) -> None:
        message = f"Error retrieving tool list from MCP server: '{server_label}'. {detail}"
        super().__init__(message, code=code, param="tools")
        self.server_label = server_label
        self.detail = detail
        """The reason alone, without the server label."""


# --------------------------------------------------------------------------- the client


class McpClient:
    """Lists and calls tools on MCP servers; a request's servers under an SSRF policy.

    One instance can serve many requests concurrently; it holds no connection between
    operations (each one connects, or spawns a stdio server, does its work and disconnects,
    which suits Lambda), unless the caller passes the :class:`McpSessions` of its run.

    Args:
        policy: Which URLs of request servers may be dialled; :meth:`McpPolicy.from_env` by
            default. Operator servers (``McpServer.trusted``) are not subject to it.
        limits: Size and time bounds; :class:`McpLimits` defaults otherwise.
        resolve: How host names are resolved (tests inject a fake DNS).
        inner_transport: Builds the transport that really connects, behind the pinning one
            (tests pass a spy); a fresh ``httpx`` HTTP transport per connection otherwise.
        stdio_errlog: Where stdio servers' stderr goes; the gateway's stderr by default (or
            the null device when that is not a real file).
    """

    def __init__(
        self,
        policy: McpPolicy | None = None,
        *,
        limits: McpLimits | None = None,
        resolve: Resolver | None = None,
        inner_transport: Callable[[], httpx.AsyncBaseTransport] | None = None,
        stdio_errlog: TextIO | None = None,
    ) -> None:
        self.policy = policy if policy is not None else McpPolicy.from_env()
        self.limits = limits if limits is not None else McpLimits()
        self._resolve = resolve
        self._inner_transport = inner_transport
        self._stdio_errlog = stdio_errlog
        self._closing: set[asyncio.Task[None]] = set()
        """Connections being closed: a close runs to its end even when its caller is
        cancelled (a stdio server must not outlive its run)."""

    async def list_tools(
        self,
        server: McpServer,
        *,
        deadline: float | None = None,
        sessions: McpSessions | None = None,
    ) -> list[ToolInfo]:
        """Every tool ``server`` lists (all pages), in the server's order.

        Args:
            server: The server to ask.
            deadline: A ``time.monotonic()`` value by which the listing must be done;
                :attr:`McpLimits.list_timeout` from now by default.
            sessions: The run's open sessions (the server's is opened or reused); without
                them the listing has a connection of its own.

        Raises:
            McpListError: the URL is refused, the server cannot be reached, answers with an
                HTTP error or a JSON-RPC error, lists more than :attr:`McpLimits.max_tools`
                tools, or does not finish before the deadline.
        """
        started = time.monotonic()
        if deadline is None:
            deadline = started + self.limits.list_timeout
        try:
            target = await self._target(server)
        except McpUrlRefusedError as exc:
            raise McpListError(server.label, exc.message, code="url_not_allowed") from None
        try:
            tools = await self._run(server, target, deadline, self._list_all, sessions)
        except _Failure as failure:
            _log_failure("list_tools", server, failure, started)
            raise McpListError(server.label, failure.summary, code=failure.code) from None
        logger.info(
            "mcp list_tools %r (%s): %d tools in %.1f ms",
            server.label,
            server.display,
            len(tools),
            (time.monotonic() - started) * 1000,
        )
        return tools

    async def call_tool(
        self,
        server: McpServer,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        *,
        deadline: float | None = None,
        sessions: McpSessions | None = None,
    ) -> ToolResult:
        """Call tool ``name`` on ``server``; failures become ``ToolResult.error``, never raise.

        Args:
            server: The server to call.
            name: The tool's name on the server (not the name the model saw).
            arguments: A JSON object, or the model's JSON text of one (``""`` means ``{}``).
                Anything else gives an ``mcp_protocol_error`` (-32602) without dialling.
            deadline: A ``time.monotonic()`` value by which the call must be done;
                :attr:`McpLimits.call_timeout` from now by default.
            sessions: The run's open sessions (the server's is opened or reused); without
                them the call has a connection of its own.
        """
        started = time.monotonic()
        if deadline is None:
            deadline = started + self.limits.call_timeout
        parsed = _parse_arguments(arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        try:
            target = await self._target(server)
        except McpUrlRefusedError as exc:
            return ToolResult(None, http_error(403, exc.message))

        async def call(connection: McpConnection, remaining: float) -> dict[str, Any]:
            return await connection.call_tool(name, parsed)

        try:
            result = await self._run(server, target, deadline, call, sessions)
            converted = self._convert_result(result)
        except _Failure as failure:
            _log_failure("call_tool", server, failure, started)
            return ToolResult(None, failure.error)
        logger.info(
            "mcp call_tool %r on %r: %s in %.1f ms",
            name,
            server.label,
            "ok" if converted.ok else "tool error",
            (time.monotonic() - started) * 1000,
        )
        return converted

    # ----------------------------------------------------------------------- internals

    async def _target(self, server: McpServer) -> ResolvedTarget | None:
        """The checked address of a request's server; ``None`` for operator servers (not
        checked: stdio, or a URL the operator chose).

        Raises:
            McpUrlRefusedError: the policy refuses the URL.
        """
        if server.trusted:
            return None
        return await check_server_url(server.url, self.policy, resolve=self._resolve)

    async def _list_all(self, connection: McpConnection, remaining: float) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            listed, cursor = await connection.list_tools_page(cursor)
            tools.extend(_tool_info(tool) for tool in listed)
            if len(tools) > self.limits.max_tools:
                raise _Failure(
                    protocol_error(INTERNAL_ERROR, "The server lists too many tools."),
                    f"The server lists more than {self.limits.max_tools} tools.",
                    "mcp_protocol_error",
                )
            if cursor is None:
                return tools
        raise _Failure(
            protocol_error(INTERNAL_ERROR, "The server's tool listing does not end."),
            f"The server's tool listing has more than {_MAX_LIST_PAGES} pages.",
            "mcp_protocol_error",
        )

    async def _run(
        self,
        server: McpServer,
        target: ResolvedTarget | None,
        deadline: float,
        operation: _Operation[_T],
        sessions: McpSessions | None = None,
    ) -> _T:
        """Connect, run ``operation`` and disconnect before ``deadline`` (or run it on the
        server's session in ``sessions``); raise ``_Failure``."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timeout_failure(server, 0.0)
        _redact_logs()
        if sessions is not None:
            return await sessions.session(self, server, target).run(operation, deadline)
        connection = self._connection(server, target, remaining)

        async def work() -> _T:
            await connection.open()
            return await operation(connection, remaining)

        try:
            return await _bounded(server, remaining, work())
        finally:
            await self._close(connection)

    def session_budget(self, remaining: float) -> float:
        """The HTTP timeouts of a reused session: long enough for any operation of the run
        (each one is still bounded by its own deadline)."""
        return max(remaining, self.limits.list_timeout, self.limits.call_timeout)

    def _connection(
        self, server: McpServer, target: ResolvedTarget | None, budget: float
    ) -> McpConnection:
        """A connection to ``server`` (not open yet) whose HTTP timeouts are ``budget``."""
        limits = self.limits
        kind = server.resolved_transport
        if kind == "stdio":
            from responses_gateway.mcp.stdio import StdioTransport, spawn_environment

            env = spawn_environment(child_environment(server.env))
            errlog = self._stdio_errlog if self._stdio_errlog is not None else _stderr()
            command, args = server.command or "", server.args
            return McpConnection(
                lambda handler: StdioTransport(
                    command, args, env, errlog, handler, max_line_bytes=limits.max_response_bytes
                )
            )
        inner = self._inner_transport() if self._inner_transport is not None else None
        transport = (
            pinned_transport(target, max_response_bytes=limits.max_response_bytes, inner=inner)
            if target is not None
            else bounded_transport(max_response_bytes=limits.max_response_bytes, inner=inner)
        )
        http = httpx.AsyncClient(
            headers=server.request_headers(),
            timeout=httpx.Timeout(budget, connect=min(budget, limits.connect_timeout)),
            transport=transport,
            trust_env=False,
            follow_redirects=False,
        )
        remote = SseTransport if kind == "sse" else StreamableHttpTransport
        url = server.url
        return McpConnection(
            lambda handler: remote(http, url, handler, max_event_bytes=limits.max_response_bytes),
            probe=kind != "sse",  # the SSE transport predates the stateless version
        )

    async def _close(self, connection: McpConnection) -> None:
        """Close ``connection`` in a task of its own, which a cancelled caller does not stop."""
        task = asyncio.get_running_loop().create_task(connection.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        await asyncio.wait({task})

    def _convert_result(self, result: dict[str, Any]) -> ToolResult:
        content = result.get("content", [])
        if not isinstance(content, list) or not all(_is_block(block) for block in content):
            raise McpInvalidMessageError("malformed tools/call content")
        blocks = [{k: v for k, v in block.items() if v is not None} for block in content]
        if result.get("isError") is True:
            return ToolResult(None, tool_execution_error(self._truncate_blocks(blocks)))
        parts = [
            block["text"] if block.get("type") == "text" else json.dumps(block) for block in blocks
        ]
        structured = result.get("structuredContent")
        if not parts and structured is not None:
            parts.append(json.dumps(structured))
        return ToolResult(_truncate("\n".join(parts), self.limits.max_output_chars))

    def _truncate_blocks(self, blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        budget = self.limits.max_output_chars
        kept: list[dict[str, Any]] = []
        for block in blocks:
            text = block.get("text") if block.get("type") == "text" else json.dumps(block)
            size = len(text) if isinstance(text, str) else 0
            if size <= budget:
                kept.append(block)
                budget -= size
                continue
            kept.append({"type": "text", "text": _truncate(str(text), max(budget, 0))})
            break
        return kept


# --------------------------------------------------------------------------- run sessions


class McpSessions:
    """The open MCP sessions of one agent-loop run: at most one per server.

    Every listing and call of the run that passes it reuses the server's session (opened on
    first use, or again after its connection ended); :meth:`aclose` closes them all and must be
    called when the run ends, however it ends. One instance belongs to one run: it holds a
    request's live connections, so it is never shared between requests or tenants. It imports
    nothing heavy and opens nothing until used. A server marked ``shared`` is the exception
    when the run is given the process's :class:`SharedMcpSessions`: its session is that pool's,
    which this run uses but does not close.
    """

    def __init__(self, shared: SharedMcpSessions | None = None) -> None:
        self._open: dict[tuple[str, bool, str, str | None], _Session] = {}
        self._ended: list[_Session] = []
        """Sessions whose connection ended, replaced, still to be closed (a process reaped)."""
        self._shared = shared

    def session(
        self, client: McpClient, server: McpServer, target: ResolvedTarget | None
    ) -> _Session:
        """The server's open session, or a new one (not yet connected)."""
        if server.shared and self._shared is not None:
            pooled = self._shared.session(client, server)
            if pooled is not None:
                return pooled
        key = (server.label, server.trusted, server.url, server.command)
        session = self._open.get(key)
        if session is None or session.closed:
            if session is not None:
                self._ended.append(session)
            session = self._open[key] = _Session(client, server, target)
        return session

    async def aclose(self) -> None:
        """Close every session (operations still running fail); the instance stays usable.
        A cancelled caller does not stop the closing."""
        sessions = [*self._open.values(), *self._ended]
        self._open, self._ended = {}, []
        if sessions:
            loop = asyncio.get_running_loop()
            await asyncio.wait({loop.create_task(session.aclose()) for session in sessions})


SHARED_TIMEOUTS_BEFORE_RETIRING = 2
"""Operations on a shared session that time out in a row before it is replaced: a process that
hangs (stopped, deadlocked) would otherwise fail every later call of every run. The operations
still running on it then fail ("The MCP session was closed.")."""


class SharedMcpSessions:
    """The sessions of operator stdio servers marked ``shared``, kept across runs.

    One instance belongs to one gateway process and one event loop (the loop of the server
    that serves it: uvicorn's, or a Lambda container's): a run on that loop gets the server's
    session from here (one process, started by the first operation that needs it, or again
    after it exited), and every run's operations share it, as one run's concurrent calls share
    its session. Runs on another loop (a test's, or a loop per invocation) get None and open
    their own. Nothing of a request is kept: the server was configured by the operator, who
    declared it free of per-run state; each operation still runs under its own deadline and a
    cancelled caller cancels only its operation. :meth:`aclose` (the app's shutdown) stops
    every process; a process left running when a Lambda environment ends dies with it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._open: dict[tuple[str, str | None, tuple[str, ...]], _Session] = {}
        self._closing: set[asyncio.Task[None]] = set()
        """Ended sessions being reaped (their process waited for), and the pool's own close."""
        self._closed = False

    def session(self, client: McpClient, server: McpServer) -> _Session | None:
        """The server's shared session (a new one, not yet connected, when it has none or its
        process ended); None off the pool's loop or once it is closed."""
        if self._closed or asyncio.get_running_loop() is not self._loop:
            return None
        key = (server.label, server.command, server.args)
        session = self._open.get(key)
        if session is None or session.closed:
            if session is not None:
                self._reap(session)
            session = self._open[key] = _Session(client, server, None, shared=True)
        return session

    def _reap(self, session: _Session) -> None:
        task = self._loop.create_task(session.aclose(), context=contextvars.Context())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every session and wait for their processes to end (idempotent)."""
        self._closed = True
        sessions, self._open = list(self._open.values()), {}
        for session in sessions:
            self._reap(session)
        while self._closing:
            await asyncio.wait(set(self._closing))


class _Session:
    """One server's session within an :class:`McpSessions` (or a :class:`SharedMcpSessions`).

    The first operation connects (a task of its own, within that operation's deadline; the
    operations arriving meanwhile wait for it); each operation then runs in a task of its own
    under its own deadline, so a timed-out or failed operation fails alone, and a caller that is
    cancelled cancels only its operation. :meth:`aclose` cancels the operations still running
    (their callers get "The MCP session was closed.") and disconnects. The session counts as
    closed once its connection could not be made or has ended (a stdio server that exited, an
    SSE stream that dropped, a session the server ended): the run's next operation then gets a
    new one.
    """

    def __init__(
        self,
        client: McpClient,
        server: McpServer,
        target: ResolvedTarget | None,
        *,
        shared: bool = False,
    ):
        self._client = client
        self._server = server
        self._target = target
        self._opening: asyncio.Task[McpConnection] | None = None
        self._operations: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._shared = shared
        """Outlives the runs that use it: its connection is opened under a budget of its own
        (each caller still waits only until its own deadline), and it retires after
        :data:`SHARED_TIMEOUTS_BEFORE_RETIRING` timeouts in a row (a hung process)."""
        self._timeouts = 0
        """Operations that timed out since the last one that did not."""

    @property
    def closed(self) -> bool:
        """Closed, or its connection failed or ended: the next operation needs a new session."""
        opening = self._opening
        if self._closed or self._timeouts >= SHARED_TIMEOUTS_BEFORE_RETIRING:
            return True
        if opening is None or not opening.done():
            return False
        if opening.cancelled() or opening.exception() is not None:
            return True
        return opening.result().closed

    async def run(self, operation: _Operation[_T], deadline: float) -> _T:
        """Run ``operation`` on this session by ``deadline``; raise ``_Failure``."""
        if self._closed:
            raise _session_closed()
        task = asyncio.get_running_loop().create_task(self._do(operation, deadline))
        self._operations.add(task)
        task.add_done_callback(self._operations.discard)
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.cancelled():
            raise _session_closed()
        return task.result()

    async def _do(self, operation: _Operation[_T], deadline: float) -> _T:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timeout_failure(self._server, 0.0)

        async def work() -> _T:
            if self._opening is None:
                # A shared session's connection (its reader task) outlives this run: it starts
                # in an empty context, so it carries none of this request's (log ids, tenant),
                # and under a budget of its own, so this run's deadline is not everyone's.
                budget = self._client.limits.list_timeout if self._shared else remaining
                self._opening = asyncio.get_running_loop().create_task(
                    self._open(budget), context=contextvars.Context() if self._shared else None
                )
            connection = await asyncio.shield(self._opening)
            return await operation(connection, remaining)

        try:
            result = await _bounded(self._server, remaining, work())
        except _Failure as failure:
            opened = self._opening is not None and self._opening.done()
            if self._shared and opened and failure.code == "timeout":
                self._timeouts += 1  # a slow start is the start's budget's business
            raise
        self._timeouts = 0
        return result

    async def _open(self, remaining: float) -> McpConnection:
        """Connect within ``remaining`` seconds (the first operation's, or a shared session's
        own budget)."""
        client = self._client
        connection = client._connection(
            self._server, self._target, client.session_budget(remaining)
        )
        try:
            async with asyncio.timeout(remaining):
                await connection.open()
        except BaseException:
            await client._close(connection)
            raise
        return connection

    async def aclose(self) -> None:
        """Cancel the operations still running, then disconnect (idempotent)."""
        self._closed = True
        running = set(self._operations)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        opening = self._opening
        if opening is None:
            return
        if not opening.done():
            opening.cancel()
            await asyncio.wait({opening})
        if opening.cancelled() or opening.exception() is not None:
            return
        await self._client._close(opening.result())


# --------------------------------------------------------------------------- helpers


_Operation = Callable[[McpConnection, float], Awaitable[_T]]
"""What runs on a connection: it gets the connection and the seconds left."""


class _Failure(Exception):
    """An operation failed; carries the ``mcp_call.error`` object and a listing summary."""

    def __init__(self, error: dict[str, Any], summary: str, code: str) -> None:
        super().__init__(summary)
        self.error = error
        self.summary = summary
        self.code = code


async def _bounded(server: McpServer, remaining: float, work: Awaitable[_T]) -> _T:
    """Await ``work`` within ``remaining`` seconds; every failure becomes a ``_Failure``."""
    try:
        async with asyncio.timeout(remaining):
            return await work
    except TimeoutError:
        raise _timeout_failure(server, remaining) from None
    except _Failure:
        raise
    except McpConnectionError as exc:
        raise _as_failure(server, exc, remaining) from None
    except Exception as exc:
        logger.warning("unexpected MCP client error for %r: %s", server.label, type(exc).__name__)
        message = "The MCP client failed."
        raise _Failure(
            protocol_error(INTERNAL_ERROR, message), message, "mcp_protocol_error"
        ) from None


def _as_failure(server: McpServer, exc: McpConnectionError, budget: float) -> _Failure:
    """The ``mcp_call.error`` (and listing summary) of a connection error."""
    if isinstance(exc, McpHttpStatusError):
        return _http_failure(exc.status, exc.reason)
    if isinstance(exc, McpRpcError):
        if exc.code == TIMEOUT_CODE:
            return _timeout_failure(server, budget)
        message = _scrub(exc.message, server)
        return _Failure(
            protocol_error(exc.code, message),
            f"MCP error {exc.code}: {message}",
            "mcp_protocol_error",
        )
    if isinstance(exc, McpConnectError):
        message = (
            "Could not start the MCP server."
            if server.resolved_transport == "stdio"
            else "Could not connect to the MCP server."
        )
        return _Failure(http_error(502, message), message, "http_error")
    if isinstance(exc, McpTransportError):
        message = str(exc)
        return _Failure(http_error(502, message), message, "http_error")
    message = "The MCP server sent an invalid response."
    return _Failure(protocol_error(INTERNAL_ERROR, message), message, "mcp_protocol_error")


def _session_closed() -> _Failure:
    message = "The MCP session was closed."
    return _Failure(http_error(502, message), message, "http_error")


_devnull: TextIO | None = None


def _stderr() -> TextIO:
    """The gateway's stderr when it is a real file (a child process needs a descriptor), else
    the null device (opened once)."""
    global _devnull
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        if _devnull is None:
            _devnull = open(os.devnull, "w")  # noqa: SIM115 - kept for the process's life
        return _devnull


_logs_redacted = False


def _redact_logs() -> None:
    """Attach URL redaction to the HTTP client's loggers (once), before the first MCP request."""
    global _logs_redacted
    if not _logs_redacted:
        install_log_redaction()
        _logs_redacted = True


def _is_block(block: Any) -> bool:
    """A content block: an object with a string ``type`` (and a string ``text`` for text)."""
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        return False
    return block["type"] != "text" or isinstance(block.get("text"), str)


def _tool_info(tool: Any) -> ToolInfo:
    if not isinstance(tool, dict):
        raise McpInvalidMessageError("a listed tool is not an object")
    name, schema = tool.get("name"), tool.get("inputSchema")
    description, annotations = tool.get("description"), tool.get("annotations")
    if not isinstance(name, str) or not isinstance(schema, dict):
        raise McpInvalidMessageError("a listed tool has no name or input schema")
    if description is not None and not isinstance(description, str):
        raise McpInvalidMessageError("a listed tool's description is not a string")
    if annotations is not None and not isinstance(annotations, dict):
        raise McpInvalidMessageError("a listed tool's annotations are not an object")
    return ToolInfo(
        name=name,
        input_schema=schema,
        description=description,
        annotations=(
            {k: v for k, v in annotations.items() if v is not None}
            if annotations is not None
            else None
        ),
    )


def _parse_arguments(arguments: Mapping[str, Any] | str | None) -> dict[str, Any] | ToolResult:
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            value = json.loads(arguments)
        except ValueError:
            return ToolResult(None, protocol_error(INVALID_PARAMS, "Arguments are not valid JSON."))
        if not isinstance(value, dict):
            return ToolResult(
                None, protocol_error(INVALID_PARAMS, "Arguments must be a JSON object.")
            )
        return value
    if isinstance(arguments, Mapping):
        return dict(arguments)
    return ToolResult(None, protocol_error(INVALID_PARAMS, "Arguments must be a JSON object."))


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[truncated {len(text) - limit} characters]"


def _url_path(url: str) -> str:
    from urllib.parse import urlsplit

    try:
        return urlsplit(url).path
    except ValueError:
        return ""


def _check_headers(headers: Mapping[str, str], authorization: str | None) -> None:
    count = len(headers) + (1 if authorization is not None else 0)
    if count > MAX_HEADERS:
        raise InvalidRequestError(
            f"Too many MCP headers: at most {MAX_HEADERS} are allowed.", param="tools"
        )
    size = 0
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise InvalidRequestError(
                f"Invalid MCP header name: {str(name)[:64]!r}.", param="tools"
            )
        lowered = name.lower()
        if lowered in PROTECTED_HEADERS or lowered.startswith("mcp-"):
            raise InvalidRequestError(
                f"The MCP header {name!r} is set by the gateway and cannot be overridden.",
                param="tools",
            )
        if lowered == "authorization" and authorization is not None:
            raise InvalidRequestError(
                "Set either 'authorization' or an 'Authorization' header for an MCP server, "
                "not both.",
                param="tools",
            )
        if not isinstance(value, str) or _BAD_VALUE_CHARS.search(value):
            raise InvalidRequestError(f"Invalid value for the MCP header {name!r}.", param="tools")
        size += len(name) + len(value)
    if authorization is not None:
        if _BAD_VALUE_CHARS.search(authorization) or not authorization.strip():
            raise InvalidRequestError("Invalid MCP 'authorization' value.", param="tools")
        size += len(authorization)
    if size > MAX_HEADER_BYTES:
        raise InvalidRequestError(
            f"MCP headers are too large: at most {MAX_HEADER_BYTES} bytes are allowed.",
            param="tools",
        )


def _timeout_failure(server: McpServer, seconds: float) -> _Failure:
    message = f"The MCP server '{server.label}' did not answer within {seconds:.1f}s."
    return _Failure(
        protocol_error(TIMEOUT_CODE, message), f"Timed out after {seconds:.1f}s.", "timeout"
    )


def _http_failure(code: int, reason: str) -> _Failure:
    message = f"Http status code: {code}" + (f" ({reason})" if reason else "")
    return _Failure(http_error(code, message), message, "http_error")


def _scrub(text: str, server: McpServer) -> str:
    for secret in server.secrets():
        text = text.replace(secret, "[redacted]")
    return text


def _log_failure(operation: str, server: McpServer, failure: _Failure, started: float) -> None:
    logger.warning(
        "mcp %s %r (%s) failed after %.1f ms: %s",
        operation,
        server.label,
        server.display,
        (time.monotonic() - started) * 1000,
        _scrub(failure.summary, server),
    )
