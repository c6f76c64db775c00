"""Talking to MCP servers: list their tools and call one, over the official ``mcp`` SDK.

Owns :class:`McpClient`, whose two operations each open one connection (streamable HTTP, the
legacy SSE transport, or stdio: a server process spawned for the operation and stopped after
it), run under a deadline and close it again, unless the caller passes the
:class:`McpSessions` of its run (one session per server, reused by every operation of the run
and closed when the run ends): :meth:`McpClient.list_tools`
returns :class:`ToolInfo` values or raises :class:`McpListError` (HTTP 424 /
``mcp_list_tools.failed``), :meth:`McpClient.call_tool` always returns a :class:`ToolResult`
whose ``error`` is one of the OpenAI ``mcp_call.error`` objects (``mcp_protocol_error``,
``mcp_tool_execution_error``, ``http_error``). Also owns :class:`McpServer` (one server as a
request describes it, or as the operator configured it, with its secrets) and the limits on
what a server may send back.

Every URL of a request's server goes through
:func:`responses_gateway.mcp.security.check_server_url` first and every connection through the
pinned transport. Operator-configured servers (``McpServer.trusted``) skip that address check:
the operator chose them, and they may be private by design. Only they may use stdio, and a stdio
process gets a minimal environment (see :func:`child_environment`), never the gateway's own
secrets. This module must not import the ``mcp`` SDK or ``httpx2`` at module level (``import
mcp`` costs ~0.6 s; only requests with MCP tools pay it), must not log or raise anything that
contains header values, the ``authorization`` token, a stdio server's ``env`` or a full URL, and
knows nothing about the agent loop, approvals or output items (see ``mcp.tools``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TextIO, TypeVar

from responses_gateway.errors import GatewayError, InvalidRequestError
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

if TYPE_CHECKING:
    import httpx2
    from mcp.client import Client
    from mcp_types import CallToolResult, Tool

__all__ = [
    "MAX_HEADERS",
    "MAX_HEADER_BYTES",
    "PROTECTED_HEADERS",
    "STDIO_INHERITED_ENV",
    "McpClient",
    "McpLimits",
    "McpListError",
    "McpServer",
    "McpSessions",
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
"""Variables a stdio server process inherits from the gateway on top of the SDK's own minimal
set (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``) and its configured ``env``."""

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

TIMEOUT_CODE = -32001
"""The JSON-RPC code of a request that timed out (the SDK's own code for it)."""
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

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

    def __post_init__(self) -> None:
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
    """The environment passed to a stdio server on top of the SDK's minimal set.

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
    which suits Lambda).

    Args:
        policy: Which URLs of request servers may be dialled; :meth:`McpPolicy.from_env` by
            default. Operator servers (``McpServer.trusted``) are not subject to it.
        limits: Size and time bounds; :class:`McpLimits` defaults otherwise.
        resolve: How host names are resolved (tests inject a fake DNS).
        inner_transport: Builds the transport that really connects, behind the pinning one
            (tests pass a spy); a fresh ``httpx2.AsyncHTTPTransport`` per operation otherwise.
        stdio_errlog: Where stdio servers' stderr goes; the gateway's stderr by default (or
            the null device when that is not a real file).
    """

    def __init__(
        self,
        policy: McpPolicy | None = None,
        *,
        limits: McpLimits | None = None,
        resolve: Resolver | None = None,
        inner_transport: Callable[[], httpx2.AsyncBaseTransport] | None = None,
        stdio_errlog: TextIO | None = None,
    ) -> None:
        self.policy = policy if policy is not None else McpPolicy.from_env()
        self.limits = limits if limits is not None else McpLimits()
        self._resolve = resolve
        self._inner_transport = inner_transport
        self._stdio_errlog = stdio_errlog

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

        async def call(client: Client, remaining: float) -> CallToolResult:
            return await _call(client, name, parsed, remaining)

        try:
            result = await self._run(server, target, deadline, call, sessions)
        except _Failure as failure:
            _log_failure("call_tool", server, failure, started)
            return ToolResult(None, failure.error)
        converted = self._convert_result(result)
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

    async def _list_all(self, client: Client, remaining: float) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor: str | None = None
        for _ in range(_MAX_LIST_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(_tool_info(tool) for tool in page.tools)
            if len(tools) > self.limits.max_tools:
                raise _Failure(
                    protocol_error(INTERNAL_ERROR, "The server lists too many tools."),
                    f"The server lists more than {self.limits.max_tools} tools.",
                    "mcp_protocol_error",
                )
            cursor = page.next_cursor
            if not cursor:
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
        operation: Callable[[Client, float], Awaitable[_T]],
        sessions: McpSessions | None = None,
    ) -> _T:
        """Connect, run ``operation`` and disconnect before ``deadline`` (or run it on the
        server's session in ``sessions``); raise ``_Failure``."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timeout_failure(server, 0.0)
        import anyio

        _load_sdk()
        if sessions is not None:
            return await sessions.session(self, server, target).run(operation, deadline)
        status = _StatusRecorder()
        try:
            with anyio.fail_after(remaining):
                async with self._connect(server, target, remaining, status) as client:
                    return await operation(client, remaining)
        except TimeoutError:
            raise _timeout_failure(server, remaining) from None
        except _Failure:
            raise
        except BaseExceptionGroup as group:
            matched, rest = group.split(Exception)
            if rest is not None:  # cancellation and friends travel on
                raise
            assert matched is not None
            _raise_failure(server, matched, status, remaining)
        except Exception as exc:
            _raise_failure(server, exc, status, remaining)

    def session_budget(self, remaining: float) -> float:
        """The read timeouts of a reused session: long enough for any operation of the run
        (each one is still bounded by its own deadline)."""
        return max(remaining, self.limits.list_timeout, self.limits.call_timeout)

    def _connect(
        self,
        server: McpServer,
        target: ResolvedTarget | None,
        remaining: float,
        status: _StatusRecorder,
    ) -> AbstractAsyncContextManager[Client]:
        """An async context manager yielding a connected ``mcp.Client``."""
        import httpx2
        from mcp.client import Client
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp_types import Implementation

        info = Implementation(name="responses-gateway", version="1")
        if server.resolved_transport == "stdio":
            return Client(
                self._stdio_transport(server),
                read_timeout_seconds=remaining,
                client_info=info,
                cache=None,
            )
        limits = self.limits
        default_timeout = httpx2.Timeout(remaining, connect=min(remaining, limits.connect_timeout))

        def http_client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            """Every HTTP client of the operation (the SSE transport builds its own through
            this factory): the server's headers, pinned, no proxies, no redirects."""
            inner = self._inner_transport() if self._inner_transport is not None else None
            transport = (
                pinned_transport(target, max_response_bytes=limits.max_response_bytes, inner=inner)
                if target is not None
                else bounded_transport(max_response_bytes=limits.max_response_bytes, inner=inner)
            )
            return httpx2.AsyncClient(
                headers=server.request_headers(),
                timeout=timeout if timeout is not None else default_timeout,
                transport=transport,
                trust_env=False,
                follow_redirects=False,
                event_hooks={"response": [status.record]},
            )

        if server.resolved_transport == "sse":
            transport = sse_client(
                server.url,
                timeout=min(remaining, limits.connect_timeout),
                sse_read_timeout=remaining,
                httpx_client_factory=http_client,
            )
            return Client(
                transport,
                mode="legacy",
                read_timeout_seconds=remaining,
                client_info=info,
                cache=None,
            )
        return _StreamableClient(
            http_client(),
            lambda http: Client(
                streamable_http_client(server.url, http_client=http),
                read_timeout_seconds=remaining,
                client_info=info,
                cache=None,
            ),
        )

    def _stdio_transport(self, server: McpServer) -> AbstractAsyncContextManager[Any]:
        """The SDK's stdio transport: spawns ``server.command`` in its own process group with a
        minimal environment; leaving it closes stdin, then terminates the group if need be."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=server.command or "",
            args=list(server.args),
            env=child_environment(server.env),
        )
        errlog = self._stdio_errlog if self._stdio_errlog is not None else _stderr()
        return stdio_client(params, errlog=errlog)

    def _convert_result(self, result: CallToolResult) -> ToolResult:
        blocks = [
            block.model_dump(mode="json", by_alias=True, exclude_none=True)
            for block in result.content
        ]
        if result.is_error:
            return ToolResult(None, tool_execution_error(self._truncate_blocks(blocks)))
        parts = [
            block["text"] if block.get("type") == "text" else json.dumps(block) for block in blocks
        ]
        if not parts and result.structured_content is not None:
            parts.append(json.dumps(result.structured_content))
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

_Job = tuple[Callable[["Client", float], Awaitable[Any]], float, "asyncio.Future[Any]"]
"""An operation handed to a session: what to run, its ``time.monotonic()`` deadline, and the
future its caller awaits."""


class McpSessions:
    """The open MCP sessions of one agent-loop run: at most one per server.

    Every listing and call of the run that passes it reuses the server's session (opened on
    first use, or again after its connection failed); :meth:`aclose` closes them all and must be
    called when the run ends, however it ends. One instance belongs to one run: it holds a
    request's live connections, so it is never shared between requests or tenants. It imports
    nothing heavy and opens nothing until used.
    """

    def __init__(self) -> None:
        self._open: dict[tuple[str, bool, str, str | None], _Session] = {}

    def session(
        self, client: McpClient, server: McpServer, target: ResolvedTarget | None
    ) -> _Session:
        """The server's open session, or a new one (not yet connected)."""
        key = (server.label, server.trusted, server.url, server.command)
        session = self._open.get(key)
        if session is None or session.closed:
            session = self._open[key] = _Session(client, server, target)
        return session

    async def aclose(self) -> None:
        """Close every session (operations still running fail); the instance stays usable."""
        sessions, self._open = list(self._open.values()), {}
        if sessions:
            await asyncio.gather(*(session.aclose() for session in sessions))


class _Session:
    """One server's session within an :class:`McpSessions`, owned by one task.

    The SDK's transports and ``mcp.Client`` hold anyio task groups, which the same task must
    enter and leave. ``_serve`` is that task: it connects (within the first operation's
    deadline), runs every operation handed to :meth:`run` in a child task under that
    operation's own deadline (a timed-out or failed operation fails alone), and disconnects
    (closing the stdio process, if any) when :meth:`aclose` asks or the connection fails; the
    operations still waiting then fail with the connection's error. It owns nothing else.
    """

    def __init__(self, client: McpClient, server: McpServer, target: ResolvedTarget | None):
        self._client = client
        self._server = server
        self._target = target
        self._status = _StatusRecorder()
        self._jobs: asyncio.Queue[_Job | None] = asyncio.Queue()
        self._waiting: set[asyncio.Future[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self.closed = False
        """Disconnected, or asked to: the next operation needs a new session."""

    async def run(self, operation: Callable[[Client, float], Awaitable[_T]], deadline: float) -> _T:
        """Run ``operation`` on this session by ``deadline``; raise ``_Failure``."""
        if self._task is None:
            self._task = asyncio.create_task(self._serve())
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        self._waiting.add(future)
        self._jobs.put_nowait((operation, deadline, future))
        try:
            return await future
        finally:
            self._waiting.discard(future)

    async def aclose(self) -> None:
        """Disconnect once the operations already handed over have started (they are
        cancelled) and wait for it."""
        self.closed = True
        if self._task is None:
            return
        self._jobs.put_nowait(None)
        await asyncio.wait({self._task})

    async def _serve(self) -> None:
        import anyio

        job = await self._jobs.get()
        if job is None:
            return
        remaining = job[1] - time.monotonic()
        budget = self._client.session_budget(remaining)
        failure: _Failure | None = None
        try:
            connection = self._client._connect(self._server, self._target, budget, self._status)
            with anyio.CancelScope(deadline=anyio.current_time() + remaining) as connecting:
                async with (
                    connection as client,
                    anyio.create_task_group() as group,
                ):
                    connecting.deadline = math.inf
                    while job is not None:
                        group.start_soon(self._do, client, job)
                        job = await self._jobs.get()
                    group.cancel_scope.cancel()
            if connecting.cancelled_caught:
                failure = _timeout_failure(self._server, max(remaining, 0.0))
        except BaseExceptionGroup as group_error:
            matched, rest = group_error.split(Exception)
            if rest is not None:  # cancellation and friends travel on
                raise
            assert matched is not None
            failure = _as_failure(self._server, matched, self._status, remaining)
        except Exception as exc:
            failure = _as_failure(self._server, exc, self._status, remaining)
        finally:
            self.closed = True
            if failure is None:
                failure = _Failure(
                    http_error(502, "The MCP session was closed."),
                    "The MCP session was closed.",
                    "http_error",
                )
            for future in self._waiting:
                if not future.done():
                    future.set_exception(failure)

    async def _do(self, client: Client, job: _Job) -> None:
        import anyio

        operation, deadline, future = job
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise _timeout_failure(self._server, 0.0)
            with anyio.fail_after(remaining):
                result = await operation(client, remaining)
        except TimeoutError:
            failure = _timeout_failure(self._server, remaining)
        except Exception as exc:
            failure = _as_failure(self._server, exc, self._status, remaining)
        else:
            if not future.done():
                future.set_result(result)
            return
        if not future.done():
            future.set_exception(failure)


# --------------------------------------------------------------------------- helpers


class _Failure(Exception):
    """An operation failed; carries the ``mcp_call.error`` object and a listing summary."""

    def __init__(self, error: dict[str, Any], summary: str, code: str) -> None:
        super().__init__(summary)
        self.error = error
        self.summary = summary
        self.code = code


class _StatusRecorder:
    """Remembers the status of the latest POST that failed at the HTTP level.

    The SDK turns such a response into a stand-in JSON-RPC error and drops the status, unless
    the body carries a JSON-RPC error of its own (servers may answer one with a 4xx status):
    then that error is the better report and no status is recorded.
    """

    def __init__(self) -> None:
        self.status: int | None = None
        self.reason = ""

    async def record(self, response: httpx2.Response) -> None:
        if response.request.method != "POST":
            return
        self.status = None
        if response.status_code < 400:
            return
        if "json" in response.headers.get("content-type", ""):
            body = await response.aread()  # kept by the response: the SDK reads it again
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            if isinstance(message, dict) and isinstance(message.get("error"), dict):
                return
        self.status = response.status_code
        self.reason = response.reason_phrase


class _StreamableClient:
    """``async with``: an ``httpx2.AsyncClient`` and the ``mcp.Client`` that uses it."""

    def __init__(self, http: httpx2.AsyncClient, make: Callable[[httpx2.AsyncClient], Client]):
        self._http = http
        self._make = make
        self._client: Client | None = None

    async def __aenter__(self) -> Client:
        await self._http.__aenter__()
        try:
            self._client = self._make(self._http)
            return await self._client.__aenter__()
        except BaseException:
            await self._http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            if self._client is not None:
                await self._client.__aexit__(*exc_info)
        finally:
            await self._http.__aexit__(None, None, None)


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


_sdk_loaded = False


def _load_sdk() -> None:
    """Import the SDK (once) and attach URL redaction to its loggers."""
    global _sdk_loaded
    if _sdk_loaded:
        return
    # The imports are the point: the SDK's loggers must exist before redaction is attached.
    import mcp.client.sse  # noqa: F401
    import mcp.client.stdio  # noqa: F401
    import mcp.client.streamable_http  # noqa: F401

    install_log_redaction()
    _sdk_loaded = True


async def _call(
    client: Client, name: str, arguments: dict[str, Any], read_timeout: float
) -> CallToolResult:
    """``tools/call`` as one request.

    ``Client.call_tool`` would follow a successful call with a ``tools/list`` of its own (to
    validate structured output against the tool's output schema, which the gateway does not
    use): a second round trip per call. Only when the server answers ``HEADER_MISMATCH`` (it
    wants ``Mcp-Param-*`` headers, which the SDK derives from a listing) is the SDK's own
    re-list-and-resend path taken.
    """
    from mcp.shared.exceptions import MCPError
    from mcp_types import HEADER_MISMATCH, CallToolRequest, CallToolRequestParams, CallToolResult

    request = CallToolRequest(params=CallToolRequestParams(name=name, arguments=arguments))
    try:
        return await client.session.send_request(
            request, CallToolResult, request_read_timeout_seconds=read_timeout
        )
    except MCPError as exc:
        if exc.code != HEADER_MISMATCH:
            raise
    return await client.call_tool(name, arguments, read_timeout_seconds=read_timeout)


def _tool_info(tool: Tool) -> ToolInfo:
    annotations = (
        tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        if tool.annotations is not None
        else None
    )
    return ToolInfo(
        name=tool.name,
        input_schema=dict(tool.input_schema),
        description=tool.description,
        annotations=annotations,
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


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _raise_failure(
    server: McpServer, exc: BaseException, status: _StatusRecorder, budget: float
) -> NoReturn:
    """Turn whatever the SDK raised into a ``_Failure`` (the most telling leaf wins)."""
    import httpx2
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    leaves = list(_leaves(exc))
    for leaf in leaves:
        if isinstance(leaf, _Failure):
            raise leaf
    for leaf in leaves:
        if isinstance(leaf, httpx2.HTTPStatusError):
            code, reason = leaf.response.status_code, leaf.response.reason_phrase
            raise _http_failure(code, reason)
    if status.status is not None:
        raise _http_failure(status.status, status.reason)
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            if leaf.code == TIMEOUT_CODE:
                raise _timeout_failure(server, budget) from None
            message = _scrub(leaf.message, server)
            raise _Failure(
                protocol_error(leaf.code, message),
                f"MCP error {leaf.code}: {message}",
                "mcp_protocol_error",
            )
    for leaf in leaves:
        if isinstance(leaf, httpx2.ConnectTimeout | httpx2.ConnectError | OSError):
            message = (
                "Could not start the MCP server."
                if server.resolved_transport == "stdio"
                else "Could not connect to the MCP server."
            )
            raise _Failure(http_error(502, message), message, "http_error")
    for leaf in leaves:
        if isinstance(leaf, httpx2.TimeoutException):
            raise _timeout_failure(server, budget) from None
    for leaf in leaves:
        if isinstance(leaf, httpx2.TransportError):
            message = "The connection to the MCP server failed."
            raise _Failure(http_error(502, message), message, "http_error")
    for leaf in leaves:
        if isinstance(leaf, ValidationError | RuntimeError | ValueError):
            message = "The MCP server sent an invalid response."
            raise _Failure(protocol_error(INTERNAL_ERROR, message), message, "mcp_protocol_error")
    first = leaves[0] if leaves else exc
    logger.warning("unexpected MCP client error for %r: %s", server.label, type(first).__name__)
    message = "The MCP client failed."
    raise _Failure(protocol_error(INTERNAL_ERROR, message), message, "mcp_protocol_error")


def _as_failure(
    server: McpServer, exc: BaseException, status: _StatusRecorder, budget: float
) -> _Failure:
    """What :func:`_raise_failure` would raise for ``exc``."""
    try:
        _raise_failure(server, exc, status, budget)
    except _Failure as failure:
        return failure


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
