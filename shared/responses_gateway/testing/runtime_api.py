"""A stand-in for Lambda's Runtime API that keeps every chunk of a streamed response.

AWS's runtime interface emulator returns a streamed answer in one piece, so it cannot show
whether bytes left the function as they were produced. This stand-in serves the same API to a
runtime process (``AWS_LAMBDA_RUNTIME_API=<address>``): ``/next`` hands over the events
:meth:`RuntimeApiStandIn.invoke` queues (with the request id, deadline, ARN and trace headers
Lambda sends), and a response is recorded as it arrives: each chunk with its arrival time, the
trailers, an invocation error or an init error. ``leave_after`` closes a response's connection
once its bytes match, as Lambda does when API Gateway's client goes away.

Runs on its own event loop in a daemon thread, so synchronous tests drive it. Test-only: not
shipped in any layer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Chunk", "Recorded", "RuntimeApiStandIn"]

DELIMITER = b"\x00" * 8


@dataclass(frozen=True)
class Chunk:
    """One chunk of a streamed response, and when it arrived (``time.monotonic()``)."""

    at: float
    data: bytes


@dataclass
class Recorded:
    """What the runtime answered to one invocation."""

    request_id: str
    invoked_at: float
    """When ``/next`` handed the event over (``time.monotonic()``)."""
    headers: dict[str, str] = field(default_factory=dict)
    """The response request's headers (lower-case names)."""
    chunks: list[Chunk] = field(default_factory=list)
    trailers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    """An invocation error (``/error``): its JSON body and ``errorType`` header."""
    complete: bool = False
    """The body ended with its last chunk (not cut)."""
    left: bool = False
    """The stand-in closed the connection (``leave_after``)."""

    @property
    def body(self) -> bytes:
        return b"".join(c.data for c in self.chunks)

    @property
    def prelude(self) -> dict[str, Any]:
        """The metadata prelude of API Gateway's streaming format."""
        head, sep, _ = self.body.partition(DELIMITER)
        if not sep:
            raise AssertionError(f"no prelude delimiter in {self.body[:200]!r}")
        parsed: dict[str, Any] = json.loads(head)
        return parsed

    @property
    def payload(self) -> bytes:
        """What API Gateway streams to the client: the bytes after the delimiter."""
        return self.body.partition(DELIMITER)[2]

    @property
    def error_trailer(self) -> tuple[str, dict[str, Any]] | None:
        kind = self.trailers.get("lambda-runtime-function-error-type")
        if kind is None:
            return None
        body = self.trailers.get("lambda-runtime-function-error-body", "")
        return kind, json.loads(base64.b64decode(body)) if body else {}


@dataclass
class _Pending:
    request_id: str
    event: bytes
    deadline_ms: int
    leave_after: Callable[[bytes], bool] | None
    done: Future[Recorded]
    recorded: Recorded | None = None


class RuntimeApiStandIn:
    """The Runtime API on ``127.0.0.1:<port>``; use as a context manager or call :meth:`stop`."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._queue: asyncio.Queue[_Pending] | None = None
        self._by_id: dict[str, _Pending] = {}
        self._server: asyncio.Server | None = None
        self.init_error: dict[str, Any] | None = None
        self.init_error_seen = threading.Event()
        self.waiting_for_next = threading.Event()
        """Set while a runtime waits on ``/next`` (it is initialized and idle)."""
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)
        assert self._server is not None
        self.port: int = self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        """``AWS_LAMBDA_RUNTIME_API``'s value."""
        return f"127.0.0.1:{self.port}"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._queue = asyncio.Queue()
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

        self._loop.run_until_complete(start())
        ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            current = asyncio.current_task()
            for task in asyncio.all_tasks():
                if task is not current:
                    task.cancel()

        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> RuntimeApiStandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def invoke(
        self,
        event: Any,
        *,
        timeout_s: float = 900.0,
        leave_after: Callable[[bytes], bool] | None = None,
    ) -> Future[Recorded]:
        """Queue ``event`` (JSON-able, or raw ``bytes``) for the runtime's next ``/next``; the
        future holds the recorded answer once it ended (or the connection closed)."""
        raw = event if isinstance(event, bytes) else json.dumps(event).encode()
        pending = _Pending(
            request_id=str(uuid.uuid4()),
            event=raw,
            deadline_ms=int((time.time() + timeout_s) * 1000),
            leave_after=leave_after,
            done=Future(),
        )

        def put() -> None:
            assert self._queue is not None
            self._by_id[pending.request_id] = pending
            self._queue.put_nowait(pending)

        self._loop.call_soon_threadsafe(put)
        return pending.done

    # -- the HTTP side -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        path = target.removeprefix("/2018-06-01")
        try:
            if method == "GET" and path == "/runtime/invocation/next":
                await self._next(writer)
            elif method == "POST" and path.startswith("/runtime/invocation/"):
                request_id, _, action = path.removeprefix("/runtime/invocation/").partition("/")
                await self._answer(request_id, action, headers, reader, writer)
            elif method == "POST" and path == "/runtime/init/error":
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.init_error = {
                    **json.loads(body or b"{}"),
                    "header": headers.get("lambda-runtime-function-error-type"),
                }
                self.init_error_seen.set()
                await self._reply(writer, 202, b'{"status":"OK"}')
            else:
                await self._reply(writer, 404, b'{"errorType":"NotFound"}')
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _reply(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, extra: str = ""
    ) -> None:
        head = (
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()

    async def _next(self, writer: asyncio.StreamWriter) -> None:
        assert self._queue is not None
        self.waiting_for_next.set()
        pending = await self._queue.get()
        self.waiting_for_next.clear()
        pending.recorded = Recorded(request_id=pending.request_id, invoked_at=time.monotonic())
        extra = (
            f"Lambda-Runtime-Aws-Request-Id: {pending.request_id}\r\n"
            f"Lambda-Runtime-Deadline-Ms: {pending.deadline_ms}\r\n"
            "Lambda-Runtime-Invoked-Function-Arn: "
            "arn:aws:lambda:us-east-1:123456789012:function:streaming\r\n"
            "Lambda-Runtime-Trace-Id: Root=1-6920a1b0-0f1e2d3c4b5a69788796a5b4;Sampled=0\r\n"
        )
        await self._reply(writer, 200, pending.event, extra)

    async def _answer(
        self,
        request_id: str,
        action: str,
        headers: dict[str, str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        pending = self._by_id.get(request_id)
        if pending is None or pending.recorded is None:
            await self._reply(writer, 400, b'{"errorType":"InvalidRequestID"}')
            return
        recorded = pending.recorded
        recorded.headers = headers
        try:
            if action == "error":
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                recorded.error = {
                    **json.loads(body or b"{}"),
                    "header": headers.get("lambda-runtime-function-error-type"),
                }
                recorded.complete = True
            elif headers.get("transfer-encoding", "").lower() == "chunked":
                if await self._read_chunks(recorded, pending, reader):
                    recorded.left = True
                    return
            else:
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                recorded.chunks.append(Chunk(time.monotonic(), body))
                recorded.complete = True
            await self._reply(writer, 202, b'{"status":"OK"}')
        finally:
            self._by_id.pop(request_id, None)
            if not pending.done.done():
                pending.done.set_result(recorded)

    async def _read_chunks(
        self, recorded: Recorded, pending: _Pending, reader: asyncio.StreamReader
    ) -> bool:
        """Read a chunked body into ``recorded``; True when the stand-in left early."""
        seen = bytearray()
        while True:
            size_line = await reader.readline()
            if not size_line:
                return False  # cut: complete stays False
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while line := (await reader.readline()).strip():
                    name, _, value = line.decode("latin-1").partition(":")
                    recorded.trailers[name.strip().lower()] = value.strip()
                recorded.complete = True
                return False
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            recorded.chunks.append(Chunk(time.monotonic(), data))
            seen += data
            if pending.leave_after is not None and pending.leave_after(bytes(seen)):
                return True
