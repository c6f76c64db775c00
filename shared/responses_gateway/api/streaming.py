"""SSE transport of a loop run, with the stream commit rule and disconnect handling.

Owns when the HTTP response starts: nothing is sent until the first output item exists, so a
request the upstream refuses (an HTTP error, or a failure before any output) gets a real HTTP
status; afterwards failures travel as ``response.failed`` events. Owns what a client disconnect
does: the loop task is cancelled (it stores the response as ``cancelled`` and closes the
upstream stream) and left to finish that cleanup on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from responses_gateway.loop import NullSink, run_loop
from responses_gateway.loop.events import ItemStarted, LoopEvent, Sink
from responses_gateway.service import PreparedRun
from responses_gateway.sinks.sse import SSESink

__all__ = ["run_buffered", "run_streamed"]

_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

_CLEANUPS: set[asyncio.Task[Any]] = set()
"""Loop tasks cancelled by a client disconnect, referenced until their cleanup ends. They hold
no tenant data beyond their own request and leave the set when done."""


def _abandon(task: asyncio.Task[Any]) -> None:
    # Cancel once and let the cleanup (store "cancelled", close the upstream) run on its own:
    # awaiting it inside the response's cancelled anyio scope would have anyio cancel the loop
    # task again and again through this waiter.
    task.cancel()
    _CLEANUPS.add(task)
    task.add_done_callback(_CLEANUPS.discard)


class _CommitSink:
    """Forwards events to the SSE sink and notes when the first output item opened."""

    def __init__(self, inner: Sink, committed: asyncio.Event) -> None:
        self._inner = inner
        self._committed = committed

    def emit(self, event: LoopEvent) -> None:
        if isinstance(event, ItemStarted):
            self._committed.set()
        self._inner.emit(event)


async def _drain(
    queue: asyncio.Queue[bytes | None], task: asyncio.Task[Any]
) -> AsyncIterator[bytes]:
    try:
        while True:
            frame = await queue.get()
            if frame is None:
                return
            frames = [frame]
            while not queue.empty():
                more = queue.get_nowait()
                if more is None:
                    yield b"".join(frames)
                    return
                frames.append(more)
            yield b"".join(frames)
    finally:
        if not task.done():
            _abandon(task)


async def run_streamed(run: PreparedRun) -> Response:
    """Run the loop and answer with SSE once the first output item exists."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    committed = asyncio.Event()
    sse = SSESink(queue.put_nowait, include_obfuscation=run.include_obfuscation)
    sink = _CommitSink(sse, committed)

    async def run_to_end() -> None:
        try:
            await run_loop(run.state, run.ctx, sink)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(run_to_end())
    waiter = asyncio.create_task(committed.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done() and not committed.is_set():
        error = task.exception()
        if error is not None:
            raise error
        if run.ctx.failure is not None:
            raise run.ctx.failure
    return StreamingResponse(
        _drain(queue, task), media_type="text/event-stream", headers=_SSE_HEADERS
    )


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def run_buffered(run: PreparedRun, request: Request) -> bool:
    """Run the loop to its end for a non-streaming client; False if the client went away.

    A client that disconnects cancels the response, exactly as a streaming one does.
    """
    task = asyncio.create_task(run_loop(run.state, run.ctx, NullSink()))
    watcher = asyncio.create_task(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False
    task.result()
    return True
