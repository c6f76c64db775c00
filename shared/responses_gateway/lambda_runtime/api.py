"""The client side of Lambda's Runtime API, as the streaming function speaks it.

Owns the requests a runtime makes (``/2018-06-01/runtime/...``): the next invocation (a long
poll), a response posted as it is produced (``Lambda-Runtime-Function-Response-Mode:
streaming``, chunked, with the error trailers declared), an invocation error before any byte,
and an init error. One connection per request: the API is on loopback, and nothing survives
from one invocation to the next.

Must not interpret events or answers (:mod:`.wire` does) or know about the app.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass

from responses_gateway.lambda_runtime.wire import (
    ERROR_BODY_TRAILER,
    ERROR_TYPE_TRAILER,
    PRELUDE_CONTENT_TYPE,
    Answer,
    chunk,
    error_payload,
    last_chunk,
    read_answer,
    request_head,
)

__all__ = ["API_VERSION", "Invocation", "ResponseStream", "RuntimeApi", "RuntimeApiError"]

API_VERSION = "2018-06-01"


class RuntimeApiError(ConnectionError):
    """The Runtime API refused a request or could not be reached."""


@dataclass(frozen=True)
class Invocation:
    """One invocation, as ``/runtime/invocation/next`` hands it over."""

    request_id: str
    deadline_ms: int
    """When the invocation ends, in milliseconds since the epoch."""
    function_arn: str
    trace_id: str | None
    event: bytes
    """The event, as JSON text."""


class ResponseStream:
    """A response being posted: chunks go out as they are written, then :meth:`finish`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self.bytes_sent = 0
        """Payload bytes written so far."""
        self.gone = asyncio.Event()
        """Set when the Runtime API closed the connection (or answered) before the body ended:
        the client left, or Lambda ended the response."""
        self._early = b""
        self._watcher = asyncio.ensure_future(self._watch())

    async def _watch(self) -> None:
        """Nothing comes back while the body is being sent: anything that does (end of file,
        or an early answer) means the response is over."""
        with contextlib.suppress(ConnectionError, OSError):
            self._early = await self._reader.read(65536)
        self.gone.set()

    async def write(self, data: bytes) -> None:
        """Send ``data`` as one chunk, once the connection has room for it.

        Raises:
            ConnectionError: the connection is gone (the client left, or Lambda ended it).
        """
        if not data:
            return
        self._writer.write(chunk(data))
        await self._writer.drain()
        self.bytes_sent += len(data)

    async def finish(self, error: tuple[str, str] | None = None) -> Answer:
        """End the body (``error``: type and message, sent as the error trailers) and read
        the Runtime API's answer.

        Raises:
            ConnectionError: the connection is gone.
        """
        try:
            self._writer.write(last_chunk(error))
            await self._writer.drain()
            if not self._watcher.done():
                self._watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._watcher
            if not self._early:
                return await read_answer(self._reader)
            early = asyncio.StreamReader()
            early.feed_data(self._early + await self._reader.read())
            early.feed_eof()
            return await read_answer(early)
        finally:
            self.close()

    def close(self) -> None:
        """Drop the connection without ending the body."""
        self._watcher.cancel()
        with contextlib.suppress(Exception):
            self._writer.close()


class RuntimeApi:
    """The Runtime API at ``address`` (``AWS_LAMBDA_RUNTIME_API``: ``host:port``)."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"not a host:port address: {address!r}")
        self.host = host.strip("[]")
        self.port = int(port)
        self._authority = address

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.open_connection(self.host, self.port)
        except OSError as exc:
            raise RuntimeApiError(f"cannot reach the Runtime API: {exc}") from exc

    async def _request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: list[tuple[str, str]] | None = None,
    ) -> Answer:
        reader, writer = await self._connect()
        try:
            all_headers = [*(headers or []), ("Content-Length", str(len(body)))]
            target = f"/{API_VERSION}{path}"
            writer.write(request_head(method, target, self._authority, all_headers) + body)
            await writer.drain()
            return await read_answer(reader)
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def next(self) -> Invocation:
        """Wait for the next invocation.

        Raises:
            RuntimeApiError: the Runtime API answered with an error, or without a request id.
        """
        answer = await self._request("GET", "/runtime/invocation/next")
        request_id = answer.header("lambda-runtime-aws-request-id")
        if answer.status != 200 or not request_id:
            raise RuntimeApiError(f"next invocation: HTTP {answer.status}")
        deadline = answer.header("lambda-runtime-deadline-ms") or "0"
        return Invocation(
            request_id=request_id,
            deadline_ms=int(deadline) if deadline.isdigit() else 0,
            function_arn=answer.header("lambda-runtime-invoked-function-arn") or "",
            trace_id=answer.header("lambda-runtime-trace-id"),
            event=answer.body,
        )

    async def stream(self, request_id: str) -> ResponseStream:
        """Start posting the response of ``request_id``, streamed."""
        reader, writer = await self._connect()
        head = request_head(
            "POST",
            f"/{API_VERSION}/runtime/invocation/{request_id}/response",
            self._authority,
            [
                ("Lambda-Runtime-Function-Response-Mode", "streaming"),
                ("Transfer-Encoding", "chunked"),
                ("Content-Type", PRELUDE_CONTENT_TYPE),
                ("Trailer", f"{ERROR_TYPE_TRAILER}, {ERROR_BODY_TRAILER}"),
            ],
        )
        writer.write(head)
        return ResponseStream(reader, writer)

    async def _error(self, path: str, error_type: str, message: str) -> Answer:
        body = json.dumps(error_payload(error_type, message)).encode()
        return await self._request(
            "POST",
            path,
            body,
            [("Content-Type", "application/json"), (ERROR_TYPE_TRAILER, error_type)],
        )

    async def invocation_error(self, request_id: str, error_type: str, message: str) -> Answer:
        """Report that invocation ``request_id`` failed before its response began."""
        return await self._error(f"/runtime/invocation/{request_id}/error", error_type, message)

    async def init_error(self, error_type: str, message: str) -> Answer:
        """Report that the function could not initialize (Lambda then ends the environment)."""
        return await self._error("/runtime/init/error", error_type, message)
