"""One WebSocket-mode connection's session: client messages in, server messages out.

Owns the client events of the mode (a table of handlers by ``type``: ``response.create``; every
other type is an ``error`` event), the per-stream rule (one response at a time per
``stream_id``; each stream's latest response is kept in the connection's memory), the warm-up
(``generate: false``), the ``error`` events for bad messages (too large, not JSON, invalid
create, busy stream), each with its request-log record (status ``refused``, as an HTTP create
refused before its loop: :meth:`Gateway.log_refused`, its rate limit, never the message), the
connection's ending (a client that leaves cancels its responses, as an HTTP disconnect does; the
connection limit ends with ``websocket_connection_limit_reached``).

Every create runs through :meth:`Gateway.prepare` and :func:`run_loop` with a
:class:`~responses_gateway.sinks.websocket.WebSocketSink`: nothing here builds events or decides
what a response does. A response's messages obey HTTP streaming's commit rule: they are held
until its first output item opens, and a response that fails before that (an upstream's 400,
say) is the socket's ``error`` event with the failure's status instead, as an HTTP client gets a
status rather than ``response.failed``. It never touches the transport: ``send`` receives each
server message's bytes, in order, and the transport delivers them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from responses_gateway.errors import GatewayError, InternalError, InvalidRequestError
from responses_gateway.ids import new_id
from responses_gateway.loop import run_loop
from responses_gateway.loop.events import ItemStarted, LoopEvent, ResponseFinished, Sink
from responses_gateway.loop.state import LoopState
from responses_gateway.service import Gateway, PreparedRun
from responses_gateway.sinks.websocket import WebSocketSink, encode_message, error_event
from responses_gateway.sockets.memory import DEFAULT_STREAM, ConnectionMemory, LocalMemory
from responses_gateway.sockets.rules import invalid_create

__all__ = [
    "MAX_MESSAGE_BYTES_ENV",
    "MAX_SECONDS_ENV",
    "HandOver",
    "Session",
    "SessionLimits",
    "connection_limit_error",
]

logger = logging.getLogger(__name__)

MAX_SECONDS_ENV = "GATEWAY_WS_MAX_SECONDS"
MAX_MESSAGE_BYTES_ENV = "GATEWAY_WS_MAX_MESSAGE_BYTES"

_SOCKET_ONLY_FIELDS = ("type", "stream_id", "generate", "stream")
"""Fields of a ``response.create`` that are not part of the HTTP create body (``stream`` is
implicit on the socket)."""


@dataclass(frozen=True, slots=True)
class SessionLimits:
    """How long a connection lives and how large a client message may be."""

    max_seconds: float = 3600.0
    """The connection limit (OpenAI's is 60 minutes)."""
    max_message_bytes: int = 12 * 1024 * 1024
    """Larger client messages get an ``error`` event (below the server's own frame limit, 16 MiB
    for uvicorn, past which the transport closes the connection with 1009)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SessionLimits:
        env = os.environ if env is None else env
        default = cls()
        seconds = env.get(MAX_SECONDS_ENV)
        size = env.get(MAX_MESSAGE_BYTES_ENV)
        return cls(
            max_seconds=float(seconds) if seconds else default.max_seconds,
            max_message_bytes=int(size) if size else default.max_message_bytes,
        )


def connection_limit_error(limits: SessionLimits) -> InvalidRequestError:
    """The error that ends a connection at its time limit."""
    minutes = limits.max_seconds / 60
    return InvalidRequestError(
        f"Responses websocket connection limit reached ({minutes:g} minutes). Create a new "
        "websocket connection to continue.",
        code="websocket_connection_limit_reached",
    )


HandOver = Callable[[PreparedRun, str | None, list[bytes]], Awaitable[None]]
"""Continues a run that paused (``run.state`` still ``in_progress``) elsewhere, given its stream
and the messages already sent; the stream stays busy until that continuation ends it."""


class _StreamSink:
    """Forwards loop events to the socket sink and frees the stream just before the terminal
    event leaves, so a client that answers it at once finds the stream idle (and, since the
    loop's persist step ran before, the response in the connection's memory)."""

    def __init__(self, inner: Sink, on_finish: Callable[[], None]) -> None:
        self._inner = inner
        self._on_finish = on_finish

    def emit(self, event: LoopEvent) -> None:
        if isinstance(event, ResponseFinished):
            self._on_finish()
        self._inner.emit(event)


class _Held:
    """One response's messages, held until it commits (its first output item opens)."""

    def __init__(self, send: Callable[[bytes], None]) -> None:
        self._send = send
        self._held: list[bytes] | None = []

    @property
    def committed(self) -> bool:
        return self._held is None

    def send(self, message: bytes) -> None:
        if self._held is None:
            self._send(message)
        else:
            self._held.append(message)

    def commit(self) -> None:
        held, self._held = self._held, None
        for message in held or ():
            self._send(message)


class _CommitSink:
    """Commits the held messages when the first output item opens, then forwards."""

    def __init__(self, inner: Sink, held: _Held) -> None:
        self._inner = inner
        self._held = held

    def emit(self, event: LoopEvent) -> None:
        if isinstance(event, ItemStarted):
            self._held.commit()
        self._inner.emit(event)


class Session:
    """The state of one connection: its tenant, memory, and the response running on each stream.

    Args:
        gateway: the service that prepares and runs creates.
        tenant: who the connection authenticated as (checked on the handshake).
        send: called with each server message's bytes, in order; must not block.
        memory: the connection's memory (in process by default).
        limits: message size and connection lifetime.
        pause: for a prepared run, when its loop must stop between two actions (None: never),
            e.g. near the end of a Lambda invocation.
        hand_over: what continues a paused run (required with ``pause``).
    """

    def __init__(
        self,
        gateway: Gateway,
        tenant: str,
        send: Callable[[bytes], None],
        *,
        memory: ConnectionMemory | None = None,
        limits: SessionLimits | None = None,
        pause: Callable[[PreparedRun], Callable[[LoopState], bool] | None] | None = None,
        hand_over: HandOver | None = None,
        api_key_id: str = "",
        client_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.gateway = gateway
        self.tenant = tenant
        self.api_key_id = api_key_id
        """The key the handshake presented (the usage ledger groups by it)."""
        self.client_headers = dict(client_headers or {})
        """The handshake's headers the request log reads client ids from (Codex's
        ``session_id``, ...); see :func:`~responses_gateway.usage.ledger.client_ids`."""
        self.memory: ConnectionMemory = memory if memory is not None else LocalMemory()
        self.limits = limits or SessionLimits()
        self._send = send
        self._pause = pause
        self._hand_over = hand_over
        self._running: dict[str, asyncio.Task[None]] = {}
        self._refusing: set[asyncio.Task[None]] = set()
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "response.create": self._create,
        }

    @property
    def running(self) -> dict[str, asyncio.Task[None]]:
        """The task running on each busy stream."""
        return dict(self._running)

    def receive(self, message: str | bytes) -> None:
        """Handle one client message. Never raises: a bad message gets an ``error`` event and
        leaves the connection and its other streams as they were. Called from the event loop,
        the event follows the refusal's request-log write (:meth:`settle` waits for both)."""
        size = len(message.encode() if isinstance(message, str) else message)
        if size > self.limits.max_message_bytes:
            self.refuse(
                InvalidRequestError(
                    f"The message is {size} bytes; messages may be at most "
                    f"{self.limits.max_message_bytes} bytes.",
                    code="message_too_large",
                    status_code=413,
                )
            )
            return
        try:
            event = json.loads(message)
        except ValueError:
            self.refuse(
                InvalidRequestError(
                    "We could not parse the JSON body of your message: every client message "
                    "must be one JSON object.",
                    code="invalid_json",
                )
            )
            return
        if not isinstance(event, dict):
            self.refuse(
                InvalidRequestError("A message must be a JSON object.", code="invalid_type")
            )
            return
        handler = self._handlers.get(str(event.get("type")))
        if handler is None:
            self.refuse(
                InvalidRequestError(
                    f"Unsupported event type {event.get('type')!r}: this gateway accepts "
                    "'response.create'.",
                    param="type",
                    code="unsupported_event_type",
                ),
                event,
            )
            return
        handler(event)

    def refuse(self, error: GatewayError, event: dict[str, Any] | None = None) -> None:
        """Answer a message refused before any run was prepared: its request-log record
        (status ``refused``, the error's type, code and param; the model and client ids of
        ``event``, the parsed message, when there is one; never the message), then its
        ``error`` event. Without a running event loop the event goes out alone."""
        stream_id = _stream_of(event) if event is not None else None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._error(error, stream_id)
            return
        task = loop.create_task(self._refused(error, stream_id, event, int(time.time() * 1000)))
        self._refusing.add(task)
        task.add_done_callback(self._refusing.discard)

    async def _refused(
        self, error: GatewayError, stream_id: str | None, event: Any, started_ms: int
    ) -> None:
        try:
            await self.gateway.log_refused(
                tenant=self.tenant,
                request_id=new_id("req"),
                api_key_id=self.api_key_id,
                body=event,
                error=error,
                started_ms=started_ms,
                client_headers=self.client_headers,
                transport="websocket",
            )
        finally:
            self._error(error, stream_id)

    async def settle(self) -> None:
        """Wait until every refusal so far is logged and its ``error`` event sent."""
        while pending := [task for task in self._refusing if not task.done()]:
            await asyncio.wait(pending)  # not gather: a cancelled caller leaves them running

    def _error(self, error: GatewayError, stream_id: str | None = None) -> None:
        self._send(encode_message(error_event(error, stream_id)))

    def _create(self, event: dict[str, Any]) -> None:
        stream_id = _stream_of(event)
        invalid = invalid_create(event)
        if invalid is not None:
            self.refuse(invalid, event)
            return
        key = stream_id if stream_id is not None else DEFAULT_STREAM
        if key in self._running:
            self.refuse(
                InvalidRequestError(
                    "A response is already in progress on this stream; wait for its terminal "
                    "event before the next response.create, or use another stream_id.",
                    param="stream_id",
                    code="stream_busy",
                ),
                event,
            )
            return
        body = {k: v for k, v in event.items() if k not in _SOCKET_ONLY_FIELDS}
        body.pop("background", None)
        body["stream"] = True
        generate = event.get("generate", True) is not False
        task = asyncio.create_task(self._run(key, stream_id, body, generate))
        self._running[key] = task
        task.add_done_callback(lambda done: self._free(key, done))

    def _free(self, key: str, task: asyncio.Task[Any] | None) -> None:
        if task is not None and self._running.get(key) is task:
            del self._running[key]

    async def _run(
        self, key: str, stream_id: str | None, body: dict[str, Any], generate: bool
    ) -> None:
        task = asyncio.current_task()
        started_ms = int(time.time() * 1000)
        try:
            run = await self.gateway.prepare(
                body,
                self.tenant,
                api_key_id=self.api_key_id,
                client_headers=self.client_headers,
                memory=self.memory,
                stream_id=key,
                generate=generate,
            )
        except GatewayError as error:
            await self.gateway.log_refused(  # before the error event: the client sees both
                tenant=self.tenant,
                request_id=new_id("req"),
                api_key_id=self.api_key_id,
                body=body,
                error=error,
                started_ms=started_ms,
                client_headers=self.client_headers,
                transport="websocket",
            )
            self._free(key, task)
            await self.memory.release(key)
            previous = body.get("previous_response_id")
            if isinstance(previous, str) and previous:  # a failed continuation evicts its base
                await self.memory.forget(previous)
            self._error(error, stream_id)
            return
        except Exception:
            logger.exception("could not prepare a socket create")
            self._free(key, task)
            await self.memory.release(key)
            self._error(InternalError("The server had an error processing your request."))
            return
        pause = self._pause(run) if self._pause is not None else None
        sent: list[bytes] = []
        send = self._send
        if pause is not None:

            def send(message: bytes) -> None:
                sent.append(message)  # the start of the log, should the loop hand over
                self._send(message)

        held = _Held(send)
        sink = WebSocketSink(
            held.send, stream_id=stream_id, include_obfuscation=run.include_obfuscation
        )
        try:
            stream_sink = run.observe(
                _StreamSink(_CommitSink(sink, held), lambda: self._free(key, task))
            )
            await run_loop(run.state, run.ctx, stream_sink, pause=pause)
            if not held.committed and run.state.status == "failed" and run.ctx.failure:
                self._error(run.ctx.failure, stream_id)  # its messages never leave
                return
            held.commit()
            if run.state.status == "in_progress" and self._hand_over is not None:
                await self._hand_over(run, stream_id, sent)
        except Exception:  # the loop fails responses itself; this is a bug, not a request error
            logger.exception("socket response %s failed", run.state.response_id)
            self._free(key, task)
            await self.memory.release(key)
            if not sink.closed:
                self._error(InternalError("The server had an error processing your request."))

    def expire(self) -> None:
        """The connection reached its time limit: its last message is the limit's error."""
        self._error(connection_limit_error(self.limits))

    async def close(self) -> None:
        """The connection ended: cancel the responses still running (each is stored as
        ``cancelled`` with its partial output, when stored) and wait for that cleanup and for
        the refusals' request-log writes."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self.settle()


def _stream_of(event: dict[str, Any]) -> str | None:
    value = event.get("stream_id")
    return value if isinstance(value, str) else None
