"""SSE transport of a loop run, with the stream commit rule and disconnect handling.

Owns when the HTTP response starts: nothing is sent until the first output item exists, so a
request the upstream refuses (an HTTP error, or a failure before any output) gets a real HTTP
status; afterwards failures travel as ``response.failed`` events. Owns what a client disconnect
does: the loop task is cancelled (it stores the response as ``cancelled`` and closes the
upstream stream) and left to finish that cleanup on its own.

Also owns holding a foreground loop to its invocation's time (``Timing.stream_until``: past it,
the action in flight is cut and the response ends ``incomplete``), and the foreground hand-over:
a loop that reaches its ``Timing.hand_over_at`` between two actions continues in the background
worker (:func:`responses_gateway.background.runs.hand_over`).
A streaming client then keeps receiving events from the log, each exactly once, until
``Timing.stream_until`` (it resumes with ``starting_after`` after that), and going away still
cancels the response; a buffered client gets the ``in_progress`` Response object and polls.
And :func:`stream_log`, the SSE answer that follows a background response's log.

Owns backpressure (:class:`_Outbox`): frames wait between the loop and the socket, counted in
bytes. Above ``Limits.stream_buffer_bytes`` the loop stops reading its upstream
(:data:`~responses_gateway.adapters.sse.FLOW_GATE`) until the socket has taken frames; a client
that takes nothing for ``Limits.stream_stall_seconds`` is treated as gone: the loop is cancelled
(the response is stored ``cancelled``, the upstream closed) and the stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Generator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from responses_gateway.adapters.sse import FLOW_GATE
from responses_gateway.api.deps import NO_LIMITS, Timing
from responses_gateway.api.limits import DEFAULT_LIMITS, Limits
from responses_gateway.background.log import follow
from responses_gateway.background.runs import cancel_handed_over, hand_over
from responses_gateway.loop import NullSink, run_loop
from responses_gateway.loop.events import ItemStarted, LoopEvent, Sink
from responses_gateway.service import Gateway, PreparedRun
from responses_gateway.sinks.sse import SSESink

__all__ = ["run_buffered", "run_streamed", "stream_log"]


logger = logging.getLogger(__name__)

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


class _Commit:
    """Whether the stream committed (its first output item opened, or the loop handed over),
    and a future the request awaits that completes then or when the loop ends first: no task
    of its own waits for either."""

    def __init__(self) -> None:
        self._committed = False
        self._decided: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def set(self) -> None:
        self._committed = True
        self.decide()

    def is_set(self) -> bool:
        return self._committed

    def decide(self, *_: Any) -> None:
        """Wake the request (the loop committed, or ended: a done callback of its task)."""
        if not self._decided.done():
            self._decided.set_result(None)

    def __await__(self) -> Generator[Any, None, None]:
        return self._decided.__await__()


class _CommitSink:
    """Forwards events to the SSE sink and notes when the first output item opened."""

    def __init__(self, inner: Sink, committed: _Commit) -> None:
        self._inner = inner
        self._committed = committed

    def emit(self, event: LoopEvent) -> None:
        if isinstance(event, ItemStarted):
            self._committed.set()
        self._inner.emit(event)


class _Outbox:
    """SSE frames on their way from the loop to the socket, with a byte count for
    backpressure. ``None`` ends the stream."""

    def __init__(self, limits: Limits) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.pending = 0
        self._high_water = limits.stream_buffer_bytes
        self._stall = float(limits.stream_stall_seconds)
        self._room = asyncio.Event()
        self._room.set()

    def put(self, frame: bytes | None) -> None:
        self.queue.put_nowait(frame)
        if frame:
            self.pending += len(frame)
            if self.pending > self._high_water:
                self._room.clear()

    def taken(self, size: int) -> None:
        """The socket accepted ``size`` bytes."""
        self.pending -= size
        if self.pending <= self._high_water:
            self._room.set()

    def gate(self) -> Awaitable[None] | None:
        """The loop's :data:`~responses_gateway.adapters.sse.FLOW_GATE`: nothing to wait for
        while the client keeps up, else :meth:`wait_for_room`."""
        return None if self._room.is_set() else self.wait_for_room()

    async def wait_for_room(self) -> None:
        """Return once the client is not behind; cancel the calling task (the loop) when it
        stays behind for the stall time."""
        if self._room.is_set():
            return
        try:
            await asyncio.wait_for(self._room.wait(), self._stall)
        except TimeoutError:
            logger.warning("a streaming client read nothing for %.0f s: cancelling", self._stall)
            task = asyncio.current_task()
            if task is not None:
                task.cancel()
            await asyncio.sleep(0)  # the cancellation lands here


async def _drain(outbox: _Outbox, task: asyncio.Task[Any]) -> AsyncIterator[bytes]:
    queue = outbox.queue
    try:
        while True:
            frame = await queue.get()
            if frame is None:
                return
            frames = [frame]
            ended = False
            while not queue.empty():
                more = queue.get_nowait()
                if more is None:
                    ended = True
                    break
                frames.append(more)
            data = b"".join(frames)
            yield data  # resumes once the socket took it
            outbox.taken(len(data))
            if ended:
                return
    finally:
        if not task.done():
            _abandon(task)


async def _follow_hand_over(
    gateway: Gateway,
    run: PreparedRun,
    sent: list[bytes],
    timing: Timing,
    outbox: _Outbox,
    committed: _Commit,
) -> None:
    """Hand the loop over, then stream its log to the client. A client that goes away
    cancels the response (as for any foreground response), once the hand-over is complete."""
    handing = asyncio.ensure_future(hand_over(gateway, run, sent))
    try:
        await asyncio.shield(handing)
        committed.set()
        frames = follow(
            gateway.store,
            run.tenant,
            run.state.response_id,
            len(sent) - 1,
            notifier=gateway.notifier,
            deadline=_follow_deadline(timing.stream_until),
        )
        async for frame in frames:
            await outbox.wait_for_room()
            outbox.put(frame)
    except asyncio.CancelledError:

        async def cancel_it() -> None:
            with contextlib.suppress(Exception):
                await handing
            await cancel_handed_over(gateway, run.tenant, run.state.response_id)

        await asyncio.shield(cancel_it())
        raise


def _within_invocation(run: PreparedRun, timing: Timing) -> None:
    """Hold ``run``'s loop to the invocation's time: its wall time (``max_loop_seconds``) ends
    at ``timing.stream_until`` at the latest, so an action still in flight there (a model call
    that stalls, a slow tool) is cut and the response ends ``incomplete`` with its events sent
    and stored, instead of being cut by the sandbox. Nothing changes outside Lambda."""
    if timing.stream_until is None:
        return
    started = run.state.started_at if run.state.started_at is not None else time.time()
    left = max(0.0, timing.stream_until - started)
    if left < run.ctx.limits.max_loop_seconds:
        run.ctx.limits = dataclasses.replace(run.ctx.limits, max_loop_seconds=left)


def _follow_deadline(until: float | None) -> float | None:
    """``until`` (wall clock) on the monotonic clock :func:`follow` uses."""
    return None if until is None else time.monotonic() + (until - time.time())


async def run_streamed(
    run: PreparedRun,
    gateway: Gateway | None = None,
    timing: Timing = NO_LIMITS,
    limits: Limits = DEFAULT_LIMITS,
) -> Response:
    """Run the loop and answer with SSE once the first output item exists."""
    outbox = _Outbox(limits)
    committed = _Commit()
    _within_invocation(run, timing)
    pause = timing.pause(run) if gateway is not None else None
    sent: list[bytes] = []

    def write(frame: bytes) -> None:
        outbox.put(frame)
        if pause is not None:
            sent.append(frame)  # the start of the log, should the loop hand over

    sse = SSESink(write, include_obfuscation=run.include_obfuscation)
    sink = run.observe(_CommitSink(sse, committed))

    async def run_to_end() -> None:
        FLOW_GATE.set(outbox.gate)  # this task's context only
        try:
            await run_loop(run.state, run.ctx, sink, pause=pause)
            if run.state.status != "in_progress" or gateway is None:
                return
            await _follow_hand_over(gateway, run, sent, timing, outbox, committed)
        finally:
            outbox.put(None)

    task = asyncio.create_task(run_to_end())
    task.add_done_callback(committed.decide)
    await committed
    if task.done() and not committed.is_set():
        error = task.exception()
        if error is not None:
            raise error
        if run.ctx.failure is not None:
            raise run.ctx.failure
    return StreamingResponse(
        _drain(outbox, task), media_type="text/event-stream", headers=_SSE_HEADERS
    )


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def run_buffered(
    run: PreparedRun,
    request: Request,
    gateway: Gateway | None = None,
    timing: Timing = NO_LIMITS,
) -> dict[str, Any] | bool:
    """Run the loop to its end for a non-streaming client; False if the client went away, True
    when it ended, or the ``in_progress`` Response object when it handed over to the worker.

    A client that disconnects cancels the response, exactly as a streaming one does. The loop
    runs in the request's own task; one watcher task listens for the disconnect and cancels it.
    """
    _within_invocation(run, timing)
    pause = timing.pause(run) if gateway is not None else None
    running = asyncio.current_task()
    assert running is not None
    left = False

    async def cancel_on_disconnect() -> None:
        nonlocal left
        await _disconnected(request)
        left = True
        running.cancel()

    watcher = asyncio.create_task(cancel_on_disconnect())
    try:
        await run_loop(run.state, run.ctx, run.observe(NullSink()), pause=pause)
    except asyncio.CancelledError:
        if left and running.uncancel() == 0:  # this watcher's cancellation, and no other
            return False
        raise
    finally:
        watcher.cancel()
    if gateway is not None and run.state.status == "in_progress":
        return await asyncio.shield(hand_over(gateway, run, []))
    return True


def stream_log(
    gateway: Gateway, tenant: str, response_id: str, after: int, timing: Timing = NO_LIMITS
) -> Response:
    """SSE of a background response's log after ``after``, following it to its end (or to
    ``timing.stream_until``). A client that goes away only stops its own stream: the response
    runs on."""
    frames = follow(
        gateway.store,
        tenant,
        response_id,
        after,
        notifier=gateway.notifier,
        deadline=_follow_deadline(timing.stream_until),
    )
    return StreamingResponse(frames, media_type="text/event-stream", headers=_SSE_HEADERS)
