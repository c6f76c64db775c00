"""One MCP connection as a JSON-RPC 2.0 peer: negotiation, requests, and the server's messages.

Owns :class:`McpConnection`, which speaks the Model Context Protocol over any :class:`Transport`
the way the ``mcp`` SDK's client does by default (``mode="auto"``): it first asks
``server/discover`` whether the server speaks the stateless version ``2026-07-28`` (then every
request carries its envelope and headers, see :mod:`.modern`, and nothing else is negotiated);
otherwise it runs the ``initialize`` handshake (offering :data:`LATEST_PROTOCOL_VERSION`,
accepting any of :data:`HANDSHAKE_PROTOCOL_VERSIONS`), tells the transport the version (sent as
the ``mcp-protocol-version`` header over HTTP) and sends ``notifications/initialized``. It then
numbers requests and matches their answers. What the server sends on its own is answered as the
SDK's client answers it by default: ``ping`` with an empty result, sampling, elicitation and
roots requests with "not supported" errors, anything else with "method not found";
notifications (progress, logging, list changes) are ignored. A request whose caller gives up
(deadline, cancellation) is followed by a best-effort ``notifications/cancelled`` (at the
stateless version over HTTP, closing the request's stream is the cancellation).

Also owns the typed errors the transports raise (:class:`McpConnectionError` and its subclasses),
which :mod:`responses_gateway.mcp.client` turns into OpenAI ``mcp_call.error`` objects. Nothing
here knows about HTTP, processes, OpenAI items or deadlines (callers bound operations with
``asyncio.timeout``), and nothing here logs a message's content.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Protocol

from responses_gateway.mcp.modern import (
    MODERN_PROTOCOL_VERSION,
    HeaderMap,
    envelope,
    header_map,
    request_headers,
)

__all__ = [
    "CONNECTION_CLOSED",
    "ChannelTransport",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LATEST_PROTOCOL_VERSION",
    "METHOD_NOT_FOUND",
    "REQUEST_TIMEOUT",
    "TOO_LARGE",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "McpConnectError",
    "McpConnection",
    "McpConnectionError",
    "McpHttpStatusError",
    "McpInvalidMessageError",
    "McpRpcError",
    "McpTransportError",
    "Message",
    "MessageHandler",
    "Transport",
    "Waiting",
    "classify",
    "encode",
    "same_id",
]

logger = logging.getLogger(__name__)

Message = dict[str, Any]
"""One JSON-RPC message as decoded from JSON."""

MessageHandler = Callable[[Message], Awaitable[None]]
"""Receives what the server sends that is not the answer a transport is waiting for."""

HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The protocol versions the ``initialize`` handshake may settle on."""
LATEST_PROTOCOL_VERSION = HANDSHAKE_PROTOCOL_VERSIONS[-1]
"""The version the client offers."""

CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

TOO_LARGE = "The MCP server's answer exceeded the gateway's size limit."
"""The error message of an answer (a body, an event, a stdio line) over the size bound."""

_CLIENT_INFO = {"name": "responses-gateway", "version": "1"}
_UNSUPPORTED = {
    "sampling/createMessage": "Sampling not supported",
    "elicitation/create": "Elicitation not supported",
    "roots/list": "List roots not supported",
}
"""Server requests the client declines, with the SDK's default answers (``INVALID_REQUEST``)."""
_MAX_PAGES = 20
_CANCEL_WRITE_TIMEOUT = 2.0
_CLOSE_WAIT = 0.5
"""How long closing waits for ``notifications/cancelled`` still being sent."""


# --------------------------------------------------------------------------- errors


class McpConnectionError(Exception):
    """Base of what a connection or its transport raises on purpose.

    ``McpConnectionError`` ├── McpRpcError (the server answered an error, or the connection
    closed: ``code``, ``message``) ├── McpHttpStatusError (an HTTP error status: ``status``,
    ``reason``) ├── McpConnectError (could not connect, or start the server process) ├──
    McpTransportError (the connection failed later, or an answer was too large) └──
    McpInvalidMessageError (the server sent something that is not the protocol).
    """


class McpRpcError(McpConnectionError):
    """A JSON-RPC error answer (or one standing for it, such as a closed connection)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"MCP error {code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class McpHttpStatusError(McpConnectionError):
    """The server answered with an HTTP status that carries no JSON-RPC error."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}".strip())
        self.status = status
        self.reason = reason


class McpConnectError(McpConnectionError):
    """The server could not be reached (or its process could not be started)."""


class McpTransportError(McpConnectionError):
    """The connection failed after it was made; ``str(error)`` is safe to show a user."""

    def __init__(self, message: str = "The connection to the MCP server failed.") -> None:
        super().__init__(message)


class McpInvalidMessageError(McpConnectionError):
    """The server sent something that is not a valid answer of the protocol."""


# --------------------------------------------------------------------------- transport seam


class Transport(Protocol):
    """How a connection's messages travel (streamable HTTP, the SSE transport, stdio).

    ``exchange`` sends a request and returns its answer (a result or error message); whatever
    else arrives meanwhile goes to the handler given at construction. ``closed`` turns true
    when the transport can carry nothing more (the server ended its stream or process, or
    ended the session): the owner then needs a new connection.
    """

    @property
    def closed(self) -> bool: ...

    @property
    def stream_per_request(self) -> bool:
        """Each request has a stream of its own, which closing cancels (streamable HTTP)."""

    async def open(self) -> None:
        """Connect (or spawn the server). Raises :class:`McpConnectionError`."""

    async def exchange(self, message: Message, headers: Mapping[str, str]) -> Message:
        """Send request ``message`` (with ``headers`` where there are headers) and return the
        answer with its ``id``."""

    async def send(self, message: Message) -> None:
        """Send a notification, or an answer to one of the server's requests."""

    def negotiated(self, version: str) -> None:
        """The protocol version the handshake settled on."""

    async def aclose(self) -> None:
        """Disconnect (end the session, stop the process); never raises."""


def classify(message: Any) -> str:
    """``"response"``, ``"request"``, ``"notification"`` or ``"invalid"`` for a decoded message."""
    if not isinstance(message, dict):
        return "invalid"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "invalid"
        return "request" if "id" in message else "notification"
    if "id" in message and ("result" in message or "error" in message):
        return "response"
    return "invalid"


def encode(message: Message) -> bytes:
    """A message as compact JSON: ASCII only (so never a raw newline: also a valid stdio line)."""
    return json.dumps(message, separators=(",", ":")).encode()


def same_id(message: Message, ident: int) -> bool:
    """Whether ``message`` answers request ``ident`` (``true`` is not ``1`` here)."""
    value = message.get("id")
    return type(value) is int and value == ident


class Waiting:
    """Requests waiting for an answer that arrives on a shared channel (an event stream, a
    process's stdout): one future per request id. Once :meth:`fail` was called every waiting and
    later request fails with that error."""

    def __init__(self) -> None:
        self._futures: dict[int, asyncio.Future[Message]] = {}
        self.failure: McpConnectionError | None = None

    async def wait(self, ident: int, sending: Coroutine[Any, Any, None]) -> Message:
        """Send (awaiting ``sending``) and wait for the answer to ``ident``."""
        if self.failure is not None:
            sending.close()
            raise self.failure
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._futures[ident] = future
        try:
            await sending
            return await future
        finally:
            self._futures.pop(ident, None)

    def resolve(self, message: Message) -> None:
        """Hand ``message`` to the request it answers (stray answers are dropped)."""
        ident = message.get("id")
        future = self._futures.pop(ident, None) if type(ident) is int else None
        if future is not None and not future.done():
            future.set_result(message)

    def fail(self, failure: McpConnectionError) -> None:
        """The channel is gone: fail every waiting request, and every later one."""
        if self.failure is None:
            self.failure = failure
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(self.failure)


class ChannelTransport:
    """What the transports whose answers arrive on one shared channel (the SSE transport's event
    stream, a stdio server's stdout) have in common: answers matched to requests by id
    (:class:`Waiting`), closed once the channel failed, no stream per request and no version
    header. A subclass sends (``send``), reads the channel and hands each message it carries to
    :meth:`_received`."""

    def __init__(self) -> None:
        self._waiting = Waiting()

    async def _received(self, data: str | bytes, on_message: MessageHandler) -> None:
        """One message off the channel: an answer goes to its waiting request, the server's own
        requests and notifications to ``on_message`` (whose failure to answer ends nothing);
        what is not JSON is skipped, as the SDK's client does (it answers no request)."""
        try:
            message = json.loads(data)
        except ValueError:
            logger.debug("an MCP server sent a message that is not JSON")
            return
        kind = classify(message)
        if kind == "response":
            self._waiting.resolve(message)
        elif kind != "invalid":
            with contextlib.suppress(McpConnectionError):
                await on_message(message)

    @property
    def closed(self) -> bool:
        return self._waiting.failure is not None

    @property
    def stream_per_request(self) -> bool:
        return False

    def negotiated(self, version: str) -> None:
        """Nothing to do: the channel carries no version header."""

    async def send(self, message: Message) -> None:
        raise NotImplementedError

    async def exchange(self, message: Message, headers: Mapping[str, str]) -> Message:
        return await self._waiting.wait(message["id"], self.send(message))


# --------------------------------------------------------------------------- the connection


class McpConnection:
    """An open MCP session over a transport (see the module docstring).

    Args:
        make_transport: Builds the transport, given the handler for the server's own messages.
        probe: Try the stateless version first (``server/discover``), falling back to
            ``initialize`` when the server does not speak it (as the SDK's ``mode="auto"``);
            ``False`` goes straight to ``initialize`` (the legacy SSE transport).

    ``await open()`` first; :meth:`request`, :meth:`list_tools_page` and :meth:`call_tool` may
    then run concurrently. :meth:`aclose` closes the transport (and waits a moment for
    cancellation notices still being sent).
    """

    def __init__(
        self, make_transport: Callable[[MessageHandler], Transport], *, probe: bool = True
    ) -> None:
        self._transport = make_transport(self.handle_server_message)
        self._probe = probe
        self._next_id = 0
        self._courtesy: set[asyncio.Task[None]] = set()
        self._header_maps: dict[str, HeaderMap] = {}
        self.protocol_version: str | None = None
        """What the negotiation settled on."""
        self.stateless = False
        """The stateless version: every request carries its envelope, nothing else is kept."""

    @property
    def closed(self) -> bool:
        """The transport can carry nothing more: a new connection is needed."""
        return self._transport.closed

    async def open(self) -> None:
        """Connect and negotiate: ``server/discover`` (when probing), else ``initialize``.

        Raises:
            McpConnectionError: the transport failed, the server answered an error, or it chose
                a protocol version this client does not speak (:class:`McpInvalidMessageError`).
        """
        await self._transport.open()
        if self._probe and await self._discover():
            return
        result = await self._request(
            "initialize",
            {
                "protocolVersion": LATEST_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": _CLIENT_INFO,
            },
            {},
            cancellable=False,  # the specification: initialize is never cancelled
        )
        version = result.get("protocolVersion")
        if not isinstance(version, str) or version not in HANDSHAKE_PROTOCOL_VERSIONS:
            raise McpInvalidMessageError("unsupported protocol version")
        self.protocol_version = version
        self._transport.negotiated(version)
        await self._transport.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def _discover(self) -> bool:
        """Whether the server speaks the stateless version (then adopted). Any error answer
        means it does not, except one saying it speaks stateless versions only."""
        params = {"_meta": envelope(_CLIENT_INFO)}
        headers = request_headers("server/discover", params, {})
        try:
            result = await self._request("server/discover", params, headers, cancellable=False)
        except McpRpcError as exc:
            supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
            stateless_only = isinstance(supported, list) and not any(
                v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported
            )
            if exc.code == UNSUPPORTED_PROTOCOL_VERSION and stateless_only:
                raise  # a stateless-only server with no version in common
            return False
        except McpHttpStatusError:
            return False
        versions = result.get("supportedVersions")
        if not isinstance(versions, list) or MODERN_PROTOCOL_VERSION not in versions:
            return False
        self.stateless = True
        self.protocol_version = MODERN_PROTOCOL_VERSION
        self._transport.negotiated(MODERN_PROTOCOL_VERSION)
        return True

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its ``result`` object.

        Raises:
            McpRpcError: the server answered with an error.
            McpConnectionError: the transport failed, or the answer is malformed.
        """
        headers: dict[str, str] = {}
        if self.stateless:
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), **envelope(_CLIENT_INFO)}
            headers = request_headers(method, params, self._header_maps)
        return await self._request(method, params, headers, cancellable=True)

    async def list_tools_page(self, cursor: str | None) -> tuple[list[Any], str | None]:
        """One page of ``tools/list``: the tools and the next cursor (``None`` at the end).

        At the stateless version, tools whose ``x-mcp-header`` annotations are invalid are
        dropped (the specification's rule) and the others' annotations are remembered for
        :meth:`call_tool`.
        """
        page = await self.request("tools/list", {"cursor": cursor} if cursor else None)
        tools = page.get("tools")
        if not isinstance(tools, list):
            raise McpInvalidMessageError("tools/list without tools")
        if self.stateless:
            tools = [tool for tool in tools if self._remember(tool)]
        next_cursor = page.get("nextCursor")
        return tools, next_cursor if isinstance(next_cursor, str) and next_cursor else None

    def _remember(self, tool: Any) -> bool:
        if not isinstance(tool, dict):
            return True  # the caller refuses the listing
        name, annotations = tool.get("name"), header_map(tool.get("inputSchema"))
        if annotations is None:
            logger.warning("dropping MCP tool %r: invalid x-mcp-header annotations", name)
            if isinstance(name, str):
                self._header_maps.pop(name, None)
            return False
        if isinstance(name, str):
            self._header_maps[name] = annotations
        return True

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``tools/call``. A server that wants ``Mcp-Param-*`` headers for a tool this
        connection has not listed answers ``HEADER_MISMATCH``: the tools are listed, and the
        call sent once more (as the SDK does).

        Raises:
            McpRpcError: the server answered with an error.
            McpConnectionError: the transport failed, or the answer is malformed (a request
                for input, which the gateway cannot give, counts as malformed).
        """
        params = {"name": name, "arguments": arguments}
        try:
            result = await self.request("tools/call", params)
        except McpRpcError as exc:
            if not self.stateless or exc.code != HEADER_MISMATCH:
                raise
            cursor: str | None = None
            for _ in range(_MAX_PAGES):
                _, cursor = await self.list_tools_page(cursor)
                if cursor is None:
                    break
            result = await self.request("tools/call", params)
        if result.get("resultType") == "input_required":
            raise McpInvalidMessageError("the server asked for input")
        return result

    async def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        headers: dict[str, str],
        *,
        cancellable: bool,
    ) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        message: Message = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        try:
            answer = await self._transport.exchange(message, headers)
        except asyncio.CancelledError:
            if cancellable:
                self._cancel_later(ident)
            raise
        error = answer.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise McpInvalidMessageError("malformed error")
            code, text = error.get("code"), error.get("message")
            if type(code) is not int or not isinstance(text, str):
                raise McpInvalidMessageError("malformed error")
            raise McpRpcError(code, text, error.get("data"))
        result = answer.get("result")
        if not isinstance(result, dict):
            raise McpInvalidMessageError("the result is not an object")
        return result

    async def handle_server_message(self, message: Message) -> None:
        """Answer a request of the server (as the SDK's client does by default); notifications
        and stray answers are ignored."""
        if classify(message) != "request":
            return
        method = message["method"]
        answer: Message = {"jsonrpc": "2.0", "id": message["id"]}
        if method == "ping":
            answer["result"] = {}
        elif method in _UNSUPPORTED:
            answer["error"] = {"code": INVALID_REQUEST, "message": _UNSUPPORTED[method]}
        else:
            answer["error"] = {"code": METHOD_NOT_FOUND, "message": "Method not found"}
        await self._transport.send(answer)

    def _cancel_later(self, ident: int) -> None:
        """Tell the server that nobody waits for request ``ident`` any more (best effort). At
        the stateless version over HTTP, closing the request's stream (already done) says it."""
        if self._transport.closed or (self.stateless and self._transport.stream_per_request):
            return
        notice = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": ident, "reason": "The client stopped waiting."},
        }

        async def send() -> None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_CANCEL_WRITE_TIMEOUT):
                    await self._transport.send(notice)

        task = asyncio.get_running_loop().create_task(send())
        self._courtesy.add(task)
        task.add_done_callback(self._courtesy.discard)

    async def aclose(self) -> None:
        """Close the transport (never raises)."""
        if self._courtesy:
            await asyncio.wait(set(self._courtesy), timeout=_CLOSE_WAIT)
            for task in list(self._courtesy):
                task.cancel()
        try:
            await self._transport.aclose()
        except Exception as exc:  # closing must not fail the operation that already has its answer
            # the type only: an HTTP error's message carries the server's full URL
            logger.debug("closing an MCP transport failed: %s", type(exc).__name__)
