"""A fault-injecting HTTP/1.1 proxy on loopback, scriptable per call, for reliability tests.

Owns :class:`FaultProxy`: it listens on ``127.0.0.1``, reads each request (head and
``content-length`` body), decides by its script what happens to that call, and records it. Calls
no rule matches are forwarded to the target untouched. Each call uses its own connection to the
target, and the proxy answers with ``connection: close``, so every call is one connection and a
fault never leaks into the next call. Faults (:class:`Fault` ``action``):

- ``respond``: answer without forwarding (``status``, ``body``, ``headers``), e.g. DynamoDB's
  throttling errors (:func:`dynamo_error`) or a 500;
- ``reset``: reset the client's connection before forwarding (nothing reached the target);
- ``reset_after``: forward, let the target act, then reset the client before any response byte
  (the "it succeeded but the answer was lost" case that makes retries dangerous);
- ``stall``: hold the connection open and answer nothing (until the client gives up);
- ``delay``: wait ``seconds`` then forward;
- ``cut``: forward and relay the first ``limit`` response bytes, then reset;
- ``stall_after``: relay the first ``limit`` response bytes, then go silent;
- ``trickle``: relay the response ``chunk`` bytes at a time, ``seconds`` apart;
- ``stream``: answer with ``status`` and the byte chunks of ``body_factory()`` (oversized
  events, never-ending streams), then close.

It runs on its own event loop in a daemon thread, like :func:`~.server.run_in_thread`; its
:meth:`FaultProxy.stop` closes every connection it holds. It is test code: production paths never
import it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

__all__ = [
    "Call",
    "Fault",
    "FaultProxy",
    "dynamo_error",
    "dynamo_op",
]

Action = Literal[
    "respond", "reset", "reset_after", "stall", "delay", "cut", "stall_after", "trickle", "stream"
]


@dataclass(slots=True)
class Call:
    """One request seen by the proxy."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    action: str = "forward"
    """What the proxy did with it (a fault's action, or ``forward``)."""

    @property
    def dynamo_op(self) -> str:
        """The DynamoDB operation (``PutItem``...) from ``x-amz-target``, or ``""``."""
        return self.headers.get("x-amz-target", "").rpartition(".")[2]


@dataclass(slots=True)
class Fault:
    """One rule of a proxy's script: calls matching ``match`` after the first ``skip`` ones get
    ``action``, ``times`` times (None: forever)."""

    action: Action
    match: Callable[[Call], bool] = lambda _: True
    skip: int = 0
    times: int | None = 1
    status: int = 500
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    limit: int = 0
    chunk: int = 1
    body_factory: Callable[[], Iterator[bytes]] | None = None
    seen: int = 0
    applied: int = 0

    def take(self, call: Call) -> bool:
        """Whether this rule applies to ``call`` (counting it)."""
        if not self.match(call):
            return False
        self.seen += 1
        if self.seen <= self.skip or (self.times is not None and self.applied >= self.times):
            return False
        self.applied += 1
        return True


def dynamo_op(*operations: str) -> Callable[[Call], bool]:
    """A matcher for DynamoDB calls of these operations (``"PutItem"``, ``"Query"``...)."""
    wanted = frozenset(operations)
    return lambda call: call.dynamo_op in wanted


_DYNAMO_ERRORS = {
    "ProvisionedThroughputExceededException": "com.amazonaws.dynamodb.v20120810#",
    "ThrottlingException": "com.amazon.coral.availability#",
    "RequestLimitExceeded": "com.amazonaws.dynamodb.v20120810#",
    "InternalServerError": "com.amazonaws.dynamodb.v20120810#",
}


def dynamo_error(code: str, message: str = "injected by the fault proxy") -> Fault:
    """A ``respond`` fault with DynamoDB's JSON error body for ``code`` (400 for throttling,
    500 for ``InternalServerError``); set ``match``/``skip``/``times`` on the result."""
    status = 500 if code == "InternalServerError" else 400
    body = json.dumps({"__type": _DYNAMO_ERRORS[code] + code, "message": message}).encode()
    return Fault(
        "respond",
        status=status,
        body=body,
        headers={"content-type": "application/x-amz-json-1.0"},
    )


_REASONS = {200: "OK", 400: "Bad Request", 429: "Too Many Requests", 500: "Internal Server Error"}


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0), not FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _closing_head(head: bytes) -> bytes:
    """A request or response head with ``connection: close`` (and no keep-alive)."""
    lines = head.split(b"\r\n")
    kept = [
        line
        for line in lines[1:]
        if line and not line.lower().startswith((b"connection:", b"keep-alive:"))
    ]
    return b"\r\n".join([lines[0], *kept, b"connection: close", b"", b""])


class FaultProxy:
    """An HTTP proxy to ``target_host:target_port`` applying a script of :class:`Fault` rules."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.calls: list[Call] = []
        self._rules: list[Fault] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._open = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self.port = 0

    @classmethod
    def start(cls, target_url: str) -> FaultProxy:
        """A running proxy in front of ``http://host:port``."""
        host, _, port = target_url.removeprefix("http://").rstrip("/").partition(":")
        proxy = cls(host, int(port))
        proxy._thread.start()
        proxy._ready.wait(10)
        return proxy

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        """Client connections the proxy is serving right now (leak checks)."""
        return self._open

    def script(self, *rules: Fault) -> None:
        """Replace the script (and forget recorded calls)."""
        with self._lock:
            self._rules = list(rules)
            self.calls = []

    def _choose(self, call: Call) -> Fault | None:
        with self._lock:
            self.calls.append(call)
            for rule in self._rules:
                if rule.take(call):
                    call.action = rule.action
                    return rule
        return None

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(serve())
        self._loop.run_forever()

    def stop(self) -> None:
        """Close the listener and every connection, then stop the thread."""

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self._open += 1
        try:
            await self._serve_one(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._open -= 1
            self._writers.discard(writer)
            if not writer.transport.is_closing():
                writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        body = await reader.readexactly(length) if length else b""
        call = Call(method, path, headers, body)
        rule = self._choose(call)
        action = rule.action if rule else "forward"
        if rule is not None and action in _BEFORE_FORWARD:
            await _BEFORE_FORWARD[action](rule, reader, writer)
            return
        if rule is not None and action == "delay":
            await asyncio.sleep(rule.seconds)
        await self._forward(_closing_head(head) + body, rule, reader, writer)

    async def _forward(
        self,
        request: bytes,
        rule: Fault | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        try:
            up_writer.write(request)
            await up_writer.drain()
            if rule is not None and rule.action == "reset_after":
                await up_reader.read()  # the target has acted on it; the answer is lost
                _reset(writer)
                return
            head = await up_reader.readuntil(b"\r\n\r\n")
            await self._relay(_closing_head(head), up_reader, rule, reader, writer)
        finally:
            up_writer.close()

    async def _relay(
        self,
        head: bytes,
        up_reader: asyncio.StreamReader,
        rule: Fault | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        action = rule.action if rule else "forward"
        writer.write(head)
        sent = 0
        while True:
            size = rule.chunk if rule is not None and action == "trickle" else 65536
            data = await up_reader.read(size)
            if not data:
                break
            if rule is not None and action in ("cut", "stall_after"):
                data = data[: max(0, rule.limit - sent)]
            writer.write(data)
            await writer.drain()
            sent += len(data)
            if rule is not None and action in ("cut", "stall_after") and sent >= rule.limit:
                if action == "cut":
                    _reset(writer)
                    return
                await reader.read()  # silent until the client (or stop()) closes it
                return
            if rule is not None and action == "trickle":
                await asyncio.sleep(rule.seconds)
        await writer.drain()


async def _respond(rule: Fault, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    headers = {"content-length": str(len(rule.body)), **rule.headers}
    reason = _REASONS.get(rule.status, "Error")
    lines = [f"HTTP/1.1 {rule.status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    head = "\r\n".join([*lines, "connection: close", "", ""]).encode("latin-1")
    writer.write(head + rule.body)
    await writer.drain()


async def _reset_now(rule: Fault, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    _reset(writer)


async def _stall(rule: Fault, reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
    await reader.read()  # silent until the client (or stop()) closes the connection


async def _stream(rule: Fault, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    reason = _REASONS.get(rule.status, "OK")
    head = (
        f"HTTP/1.1 {rule.status} {reason}\r\ncontent-type: text/event-stream\r\n"
        "connection: close\r\n\r\n"
    )
    writer.write(head.encode("latin-1"))
    for chunk in rule.body_factory() if rule.body_factory is not None else ():
        writer.write(chunk)
        await writer.drain()


_BEFORE_FORWARD = {"respond": _respond, "reset": _reset_now, "stall": _stall, "stream": _stream}
