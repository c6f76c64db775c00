"""One invocation of the streaming function: the app run against the event, its answer streamed.

Owns what happens between ``/next`` handing over an event and the response's last chunk:

- the event becomes an ASGI request (:func:`~.wire.asgi_request`) with a fresh context object
  (:class:`InvocationContext`, the one the app reads the deadline from); a non-REST event is an
  invocation error, reported before any byte;
- the answer's head goes out as API Gateway's metadata prelude the moment the app starts it, and
  each body part as its own chunk the moment the app sends it (the app waits while the
  connection has no room: backpressure reaches the loop);
- an exception before the first byte becomes a 500 with an OpenAI error envelope; after it, the
  error trailers (Lambda then reports a function error and API Gateway ends the stream);
- a connection that breaks (the client left, or API Gateway closed an idle stream) is a client
  disconnect for the app (``http.disconnect``: a running create is cancelled and stored so);
- the deadline: ``DEADLINE_MARGIN`` seconds before it, the app is told the client left, given
  ``GRACE`` seconds to end (its own margins end streams earlier: this is the last resort), then
  cancelled, and the response is ended, never cut by the sandbox.

Nothing outlives the invocation here: the scope, the context and the exchange are built per
event. Must not parse HTTP (:mod:`.wire`) or open connections (:mod:`.api`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.lambda_runtime.api import Invocation, ResponseStream, RuntimeApi
from responses_gateway.lambda_runtime.wire import EventError, asgi_request, prelude

__all__ = [
    "DEADLINE_MARGIN",
    "GRACE",
    "ASGIApp",
    "InvocationContext",
    "Outcome",
    "serve_invocation",
]

logger = logging.getLogger(__name__)

ASGIApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]

DEADLINE_MARGIN = 1.5
"""Seconds before the invocation's deadline the runtime tells the app the client left."""
GRACE = 0.75
"""Seconds the app then has to end its answer before it is cancelled."""

_TRACE_ENV = "_X_AMZN_TRACE_ID"
_JSON_HEADERS = [(b"content-type", b"application/json")]


@dataclass
class InvocationContext:
    """The Lambda context object of one invocation (the attributes the managed runtime's has)."""

    aws_request_id: str
    invoked_function_arn: str
    deadline_ms: int
    function_name: str = field(
        default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
    )
    function_version: str = field(
        default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
    )
    memory_limit_in_mb: str = field(
        default_factory=lambda: os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "")
    )
    log_group_name: str = field(
        default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
    )
    log_stream_name: str = field(
        default_factory=lambda: os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
    )

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


@dataclass(frozen=True)
class Outcome:
    """How an invocation ended (for logs and tests)."""

    status: int | None
    """The answer's HTTP status (None: no answer began)."""
    bytes_sent: int
    error: str | None = None
    """The error reported to Lambda (trailer or invocation error), if any."""
    client_left: bool = False
    deadline: bool = False
    """The runtime's own deadline guard had to stop the app."""


def _envelope(message: str, code: str | None) -> bytes:
    error = {"message": message, "type": "server_error", "param": None, "code": code}
    return json.dumps({"error": error}).encode()


class _Exchange:
    """The ASGI ``receive``/``send`` pair of one invocation, writing to its response stream."""

    def __init__(self, body: bytes, stream: ResponseStream) -> None:
        self._body: bytes | None = body
        self._stream = stream
        self.head: tuple[int, list[tuple[bytes, bytes]]] | None = None
        self.complete = False
        self.broken = False
        self.leaving = asyncio.Event()

    async def receive(self) -> MutableMapping[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.leaving.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if self.broken:
            return  # as a server does once its client is gone: the app learns it from receive
        kind = message["type"]
        if kind == "http.response.start":
            if self.head is not None:
                raise RuntimeError("http.response.start sent twice")
            headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            self.head = (int(message["status"]), headers)
            await self.write(prelude(self.head[0], headers))
        elif kind == "http.response.body":
            if self.head is None:
                raise RuntimeError("http.response.body sent before http.response.start")
            if self.complete:
                return
            await self.write(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                self.complete = True

    async def write(self, data: bytes) -> None:
        try:
            await self._stream.write(data)
        except (ConnectionError, OSError):
            self.broken = True
            self.leaving.set()

    async def watch(self) -> None:
        """Turn the connection closing under the answer into a client disconnect."""
        await self._stream.gone.wait()
        if not self.complete:
            self.broken = True
            self.leaving.set()


async def _run_app(
    app: ASGIApp, scope: dict[str, Any], exchange: _Exchange, deadline_ms: int
) -> tuple[BaseException | None, bool]:
    """Run the app to its end or to the deadline guard: (its exception, whether the guard
    stopped it)."""
    task = asyncio.ensure_future(app(scope, exchange.receive, exchange.send))
    watcher = asyncio.ensure_future(exchange.watch())
    try:
        return await _until_deadline(task, exchange, deadline_ms)
    finally:
        watcher.cancel()


async def _until_deadline(
    task: asyncio.Future[None], exchange: _Exchange, deadline_ms: int
) -> tuple[BaseException | None, bool]:
    left = deadline_ms / 1000 - time.time() - DEADLINE_MARGIN
    done, _ = await asyncio.wait({task}, timeout=max(0.0, left))
    stopped = False
    if not done:
        stopped = True
        exchange.leaving.set()
        done, _ = await asyncio.wait({task}, timeout=GRACE)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            return None, True
    if task.cancelled():
        return asyncio.CancelledError(), stopped
    return task.exception(), stopped


async def serve_invocation(app: ASGIApp, api: RuntimeApi, invocation: Invocation) -> Outcome:
    """Serve ``invocation`` with ``app`` and post its answer to ``api``, streamed."""
    if invocation.trace_id:
        os.environ[_TRACE_ENV] = invocation.trace_id
    else:
        os.environ.pop(_TRACE_ENV, None)
    context = InvocationContext(
        aws_request_id=invocation.request_id,
        invoked_function_arn=invocation.function_arn,
        deadline_ms=invocation.deadline_ms,
    )
    try:
        scope, body = asgi_request(json.loads(invocation.event), context)
    except (EventError, ValueError) as exc:
        message = str(exc) if isinstance(exc, EventError) else "the event is not JSON"
        await api.invocation_error(invocation.request_id, "Runtime.InvalidEvent", message)
        return Outcome(status=None, bytes_sent=0, error="Runtime.InvalidEvent")
    stream = await api.stream(invocation.request_id)
    exchange = _Exchange(body, stream)
    try:
        error, stopped = await _run_app(app, scope, exchange, invocation.deadline_ms)
    finally:
        exchange.leaving.set()  # whatever still listens for a disconnect ends now
    if error is not None and not isinstance(error, asyncio.CancelledError):
        logger.error("the app failed", exc_info=error)
    if exchange.broken:
        stream.close()
        return Outcome(
            status=exchange.head[0] if exchange.head else None,
            bytes_sent=stream.bytes_sent,
            client_left=True,
            deadline=stopped,
        )
    reported: tuple[str, str] | None = None
    if exchange.head is None:
        # Nothing sent yet: the client gets a real status and an OpenAI error envelope.
        if stopped:
            status, answer = 504, _envelope("The request timed out.", "timeout")
        else:
            message = "The server had an error while processing your request."
            status, answer = 500, _envelope(message, None)
        await exchange.write(prelude(status, _JSON_HEADERS))
        await exchange.write(answer)
        exchange.head = (status, _JSON_HEADERS)
    elif error is not None and not isinstance(error, asyncio.CancelledError):
        reported = (f"Runtime.{type(error).__name__}", "the app failed after its answer began")
    elif stopped and not exchange.complete:
        reported = ("Runtime.DeadlineReached", "the invocation ended before the answer did")
    try:
        answer_status = (await stream.finish(reported)).status
    except ConnectionError:
        return Outcome(exchange.head[0], stream.bytes_sent, reported and reported[0], True, stopped)
    if answer_status >= 300:
        logger.error("the Runtime API refused the response: HTTP %s", answer_status)
    return Outcome(
        status=exchange.head[0],
        bytes_sent=stream.bytes_sent,
        error=reported[0] if reported else None,
        deadline=stopped,
    )
