"""MCP over HTTP on ``httpx``: the streamable HTTP transport and the legacy HTTP+SSE transport.

Owns :class:`StreamableHttpTransport` (each message is a ``POST`` to the endpoint; a request's
answer comes back as JSON or as an event stream, in which the server may first send requests
and notifications of its own; the ``mcp-session-id`` the server gives at ``initialize`` and the
negotiated ``mcp-protocol-version`` go on every later message; a stream that ends before its
answer is resumed with ``GET`` and ``Last-Event-ID`` when the server numbered its events; the
session is ended with ``DELETE`` at close) and :class:`SseTransport` (a long-lived ``GET``
stream whose first ``endpoint`` event names where to ``POST`` messages, same origin only; every
answer arrives on the stream). Redirects are followed only within the endpoint's origin and only
when they keep the method (307/308 for a ``POST``), as the ``mcp`` SDK does.

Both take an ``httpx.AsyncClient`` that the caller built (headers, timeouts, and the pinned or
bounded transport of :mod:`responses_gateway.mcp.security`) and close it. They turn ``httpx``
failures into :mod:`responses_gateway.mcp.rpc` errors and never put a URL, a header or a body in
an error or a log record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from responses_gateway.mcp.rpc import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    TOO_LARGE,
    ChannelTransport,
    McpConnectError,
    McpConnectionError,
    McpHttpStatusError,
    McpInvalidMessageError,
    McpRpcError,
    McpTransportError,
    Message,
    MessageHandler,
    classify,
    encode,
    same_id,
)
from responses_gateway.mcp.security import UNBOUNDED_STREAM, ResponseTooLargeError
from responses_gateway.mcp.sse_decoder import SseDecoder, SseEvent

__all__ = ["SseTransport", "StreamableHttpTransport"]

logger = logging.getLogger(__name__)

_MAX_REDIRECTS = 5
_MAX_RESUMES = 2
"""Reconnections in a row that bring no new event before a stream is given up."""
_DEFAULT_RETRY_MS = 1000
_CLOSE_TIMEOUT = 2.0
"""Seconds the ``DELETE`` that ends a session may take."""
_STREAM_HEADERS = {"accept": "text/event-stream", "cache-control": "no-store"}
_JSON = {"content-type": "application/json"}


class StreamableHttpTransport:
    """The streamable HTTP transport of one session (see the module docstring).

    Args:
        http: The client to send with (closed by :meth:`aclose`).
        url: The MCP endpoint.
        on_message: Receives the server's own requests and notifications.
        max_event_bytes: The most bytes of one answer (JSON body or event).
    """

    def __init__(
        self, http: httpx.AsyncClient, url: str, on_message: MessageHandler, *, max_event_bytes: int
    ) -> None:
        self._http = http
        self._url = url
        self._on_message = on_message
        self._max = max_event_bytes
        self._session_id: str | None = None
        self._version: str | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stream_per_request(self) -> bool:
        return True

    async def open(self) -> None:
        """Nothing to do: the first ``POST`` connects."""

    def negotiated(self, version: str) -> None:
        self._version = version

    def _headers(self, *extra: Mapping[str, str]) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream"}
        if self._session_id is not None:
            headers["mcp-session-id"] = self._session_id
        if self._version is not None:
            headers["mcp-protocol-version"] = self._version
        for more in extra:
            headers.update(more)
        return headers

    async def exchange(self, message: Message, headers: Mapping[str, str]) -> Message:
        ident = message["id"]
        with _http_errors():
            request = self._http.build_request(
                "POST", self._url, content=encode(message), headers=self._headers(_JSON, headers)
            )
            response = await _send(self._http, request)
            decoder: SseDecoder | None = None
            try:
                if response.status_code == 202:
                    raise McpRpcError(
                        INVALID_REQUEST, "The MCP server accepted the request without answering."
                    )
                if not response.is_success:
                    return await self._failed(response, ident)
                if message["method"] == "initialize":
                    self._session_id = response.headers.get("mcp-session-id") or None
                kind = _content_type(response)
                if kind == "application/json":
                    return _answer(await _read(response, self._max), ident)
                if kind != "text/event-stream":
                    raise McpInvalidMessageError("unexpected content type")
                decoder = SseDecoder(self._max)
                answer = await self._answer_in_stream(response, decoder, ident)
                if answer is not None:
                    return answer
            finally:
                await response.aclose()
            return await self._resume(decoder, ident)

    async def _failed(self, response: httpx.Response, ident: int) -> Message:
        """An error status: the JSON-RPC error the body carries, if any (a server may answer
        one with a 4xx), else :class:`McpHttpStatusError`. A 404 for a session means the server
        ended it: the transport is closed, so the next operation starts a new session."""
        if response.status_code == 404 and self._session_id is not None:
            self._closed = True
        if response.status_code >= 400 and _content_type(response) == "application/json":
            try:
                body: Any = json.loads(await _read(response, self._max))
            except (ValueError, McpTransportError):
                body = None
            if isinstance(body, dict) and isinstance(body.get("error"), dict):
                return {"jsonrpc": "2.0", "id": ident, "error": body["error"]}
        raise McpHttpStatusError(response.status_code, response.reason_phrase)

    async def _answer_in_stream(
        self, response: httpx.Response, decoder: SseDecoder, ident: int
    ) -> Message | None:
        """Read events until the answer to ``ident``; ``None`` when the stream ends first."""
        async for chunk in response.aiter_bytes():
            for event in decoder.feed(chunk):
                answer = await self._event(event, ident)
                if answer is not None:
                    return answer
        for event in decoder.end():
            answer = await self._event(event, ident)
            if answer is not None:
                return answer
        return None

    async def _event(self, event: SseEvent, ident: int) -> Message | None:
        if event.event != "message" or not event.data:
            return None  # a priming event (an id for resuming, no data) or another event type
        message = _decode(event.data)
        kind = classify(message)
        if kind == "response":
            return message if same_id(message, ident) else None
        if kind == "invalid":
            raise McpInvalidMessageError("not a JSON-RPC message")
        with contextlib.suppress(McpConnectionError):  # a failed reply fails the server's request
            await self._on_message(message)
        return None

    async def _resume(self, decoder: SseDecoder | None, ident: int) -> Message:
        """The answer's stream ended without it: reconnect with ``Last-Event-ID`` (after the
        server's ``retry`` delay) while the server numbers its events and the attempts bring
        new ones."""
        attempts = 0
        while decoder is not None and decoder.last_event_id is not None:
            if attempts == _MAX_RESUMES:
                break
            attempts += 1
            last = decoder.last_event_id
            delay = decoder.retry_ms if decoder.retry_ms is not None else _DEFAULT_RETRY_MS
            await asyncio.sleep(delay / 1000)
            resumed = SseDecoder(self._max)
            resumed.retry_ms = decoder.retry_ms
            headers = self._headers({**_STREAM_HEADERS, "last-event-id": last})
            request = self._http.build_request("GET", self._url, headers=headers)
            with _http_errors():
                response = await _send(self._http, request)
                try:
                    if not response.is_success:
                        break
                    answer = await self._answer_in_stream(response, resumed, ident)
                finally:
                    await response.aclose()
            if answer is not None:
                return answer
            if resumed.last_event_id is None:
                resumed.last_event_id = last
            elif resumed.last_event_id != last:
                attempts = 0
            decoder = resumed
        raise McpRpcError(CONNECTION_CLOSED, "The MCP server ended the stream without an answer.")

    async def send(self, message: Message) -> None:
        with _http_errors():
            request = self._http.build_request(
                "POST", self._url, content=encode(message), headers=self._headers(_JSON)
            )
            response = await _send(self._http, request)
            try:
                await _read(response, self._max)
            finally:
                await response.aclose()
        if not response.is_success:  # the SDK's client ignores these too
            logger.debug("an MCP notification or reply got HTTP %d", response.status_code)

    async def aclose(self) -> None:
        try:
            if self._session_id is not None and not self._closed:
                with contextlib.suppress(httpx.HTTPError):
                    await self._http.delete(
                        self._url, headers=self._headers(), timeout=_CLOSE_TIMEOUT
                    )
        finally:
            self._closed = True
            await self._http.aclose()


class SseTransport(ChannelTransport):
    """The legacy HTTP+SSE transport of one session (see the module docstring).

    Args:
        http: The client to send with (closed by :meth:`aclose`).
        url: The SSE endpoint (the ``GET`` stream).
        on_message: Receives the server's own requests and notifications.
        max_event_bytes: The most bytes of one event (the stream as a whole is not bounded:
            it lives as long as the session).
    """

    def __init__(
        self, http: httpx.AsyncClient, url: str, on_message: MessageHandler, *, max_event_bytes: int
    ) -> None:
        super().__init__()
        self._http = http
        self._url = url
        self._on_message = on_message
        self._max = max_event_bytes
        self._endpoint: asyncio.Future[str] | None = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Open the stream and wait for its ``endpoint`` event."""
        loop = asyncio.get_running_loop()
        self._endpoint = loop.create_future()
        self._reader = loop.create_task(self._read())
        await self._endpoint

    async def _read(self) -> None:
        assert self._endpoint is not None
        failure: McpConnectionError = McpRpcError(CONNECTION_CLOSED, "Connection closed")
        try:
            with _http_errors():
                timeout = self._http.timeout
                request = self._http.build_request(
                    "GET",
                    self._url,
                    headers=_STREAM_HEADERS,
                    timeout=httpx.Timeout(
                        None, connect=timeout.connect, write=timeout.write, pool=timeout.pool
                    ),  # no read timeout: the stream idles between operations
                    extensions={UNBOUNDED_STREAM: True},
                )
                response = await _send(self._http, request)
                try:
                    if not response.is_success:
                        raise McpHttpStatusError(response.status_code, response.reason_phrase)
                    decoder = SseDecoder(self._max)
                    async for chunk in response.aiter_bytes():
                        for event in decoder.feed(chunk):
                            await self._event(event)
                    for event in decoder.end():
                        await self._event(event)
                finally:
                    await response.aclose()
        except McpConnectionError as exc:
            failure = exc
        except TimeoutError:
            failure = McpTransportError()
        finally:
            self._waiting.fail(failure)
            if not self._endpoint.done():
                self._endpoint.set_exception(failure)

    async def _event(self, event: SseEvent) -> None:
        assert self._endpoint is not None
        if event.event == "endpoint":
            if not self._endpoint.done():
                self._endpoint.set_result(self._check_endpoint(event.data))
            return
        if event.event == "message" and event.data:
            await self._received(event.data, self._on_message)

    def _check_endpoint(self, data: str) -> str:
        endpoint = urljoin(self._url, data.strip())
        given, told = urlsplit(self._url), urlsplit(endpoint)
        if (given.scheme, given.netloc) != (told.scheme, told.netloc):
            raise McpInvalidMessageError("the endpoint is on another origin")
        return endpoint

    async def send(self, message: Message) -> None:
        assert self._endpoint is not None and self._endpoint.done()
        if self._waiting.failure is not None:
            raise self._waiting.failure
        with _http_errors():
            request = self._http.build_request(
                "POST",
                self._endpoint.result(),
                content=encode(message),
                headers=_JSON,
            )
            response = await _send(self._http, request)
            try:
                await _read(response, self._max)
            finally:
                await response.aclose()
        if not response.is_success:
            raise McpHttpStatusError(response.status_code, response.reason_phrase)

    async def aclose(self) -> None:
        try:
            if self._reader is not None:
                self._reader.cancel()
                await asyncio.wait({self._reader})
        finally:
            self._waiting.fail(McpRpcError(CONNECTION_CLOSED, "Connection closed"))
            await self._http.aclose()


# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _http_errors() -> Iterator[None]:
    """``httpx`` failures as connection errors (their messages may hold URLs: dropped)."""
    try:
        yield
    except ResponseTooLargeError:
        raise McpTransportError(TOO_LARGE) from None
    except (httpx.ConnectError, httpx.ConnectTimeout):
        raise McpConnectError("could not connect") from None
    except httpx.TimeoutException:
        raise TimeoutError from None
    except httpx.RequestError:
        raise McpTransportError() from None


async def _send(http: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """Send ``request`` (streamed), following redirects that stay on its origin and keep its
    method; any other redirect response is returned as it is."""
    for _ in range(_MAX_REDIRECTS):
        response = await http.send(request, stream=True)
        follow = response.next_request
        if follow is None or not _may_follow(request, follow):
            return response
        await response.aclose()
        request = follow
    return await http.send(request, stream=True)


def _may_follow(sent: httpx.Request, follow: httpx.Request) -> bool:
    a, b = sent.url, follow.url
    return (
        follow.method == sent.method
        and (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)
        and (not b.userinfo or b.userinfo == a.userinfo)
    )


def _content_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


async def _read(response: httpx.Response, limit: int) -> bytes:
    """The (decoded) body, failing past ``limit`` bytes (a compressed body is bounded too)."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise McpTransportError(TOO_LARGE)
    return bytes(body)


def _decode(data: str | bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise McpInvalidMessageError("not JSON") from None


def _answer(body: bytes, ident: int) -> Message:
    message = _decode(body)
    if classify(message) != "response" or not same_id(message, ident):
        raise McpInvalidMessageError("not the answer to the request")
    assert isinstance(message, dict)
    return message
