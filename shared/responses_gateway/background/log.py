"""The event log of a background response: writing it while the loop runs, and following it.

Owns :class:`EventLog` (the ``write`` target of an :class:`~responses_gateway.sinks.sse.SSESink`:
frames are buffered and appended to the store in batches, by a flusher task while an action runs
and completely at every action boundary, so a checkpoint never names events that are not logged),
:func:`follow` (replay after a cursor, then follow new events until the terminal event) and
:class:`LogNotifier` (wakes followers in this process when a batch lands, so a local run streams
without polling delay; a deployed follower in another Lambda polls).

It decides nothing about the loop and never interprets frames beyond passing them on.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator

from responses_gateway.store.base import BackgroundStore

__all__ = ["HEARTBEAT_INTERVAL", "KEEP_ALIVE", "EventLog", "LogNotifier", "follow"]

FLUSH_INTERVAL = 0.05
"""Seconds a frame may wait in the buffer while an action runs (the log's streaming latency)."""
HEARTBEAT_INTERVAL = 15.0
"""Seconds of silence after which a follower sends :data:`KEEP_ALIVE`."""
KEEP_ALIVE = b": keep-alive\n\n"
"""An SSE comment: keeps an idle stream open, ignored by clients."""


class LogNotifier:
    """Wakes the followers of a response when its log grows (in this process only).

    One per gateway (never module-level): entries exist only while someone follows.
    """

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], set[asyncio.Event]] = {}

    def notify(self, tenant: str, response_id: str) -> None:
        for event in self._waiting.get((tenant, response_id), ()):
            event.set()

    @contextlib.contextmanager
    def subscribe(self, tenant: str, response_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever the response's log grows, while the block runs."""
        key = (tenant, response_id)
        event = asyncio.Event()
        self._waiting.setdefault(key, set()).add(event)
        try:
            yield event
        finally:
            events = self._waiting[key]
            events.discard(event)
            if not events:
                del self._waiting[key]


class EventLog:
    """Buffers the frames of one worker invocation and appends them to the store in order.

    Args:
        store: where batches go.
        tenant, response_id: whose log.
        first_seq: the sequence number of the first frame this log will receive.
        notifier: told after every batch lands.
        keep: log the frames (False for a response nobody can stream: only the numbering is
            kept, so the terminal's sequence number stays right).
    """

    def __init__(
        self,
        store: BackgroundStore,
        tenant: str,
        response_id: str,
        first_seq: int,
        notifier: LogNotifier | None = None,
        *,
        keep: bool = True,
    ) -> None:
        self._store = store
        self._tenant = tenant
        self._id = response_id
        self._pending: list[str] = []
        self._next = first_seq
        """Sequence number of the first pending frame."""
        self._notifier = notifier
        self._keep = keep
        self._lock = asyncio.Lock()
        self._now = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None

    @property
    def next_seq(self) -> int:
        """The sequence number the next frame will have (logged or pending)."""
        return self._next + len(self._pending)

    def write(self, frame: bytes) -> None:
        """Take one frame (called by the SSE sink, synchronously)."""
        self._pending.append(frame.decode())
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    def take_last(self) -> str:
        """Remove and return the newest pending frame (the terminal frame, logged apart)."""
        return self._pending.pop()

    async def _flush_later(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._now.wait(), FLUSH_INTERVAL)
        try:
            await self._flush_pending()
        except Exception as error:  # surfaced by the next flush() at the action boundary
            self._failure = error

    async def _flush_pending(self) -> None:
        async with self._lock:
            if not self._pending:
                return
            frames, first = self._pending, self._next
            self._pending = []
            self._next = first + len(frames)
            if not self._keep:
                return
            await self._store.append_events(self._tenant, self._id, first, frames)
        if self._notifier is not None:
            self._notifier.notify(self._tenant, self._id)

    async def flush(self) -> None:
        """Log every pending frame (an action boundary); raises a failed background flush.

        A background flush in flight is awaited, never cancelled: its frames have left the
        buffer, and cutting its write short would lose them while the numbering counts them.
        """
        if self._flusher is not None and not self._flusher.done():
            self._now.set()  # skip the rest of its wait
            await self._flusher
            self._now.clear()
        self._flusher = None
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure
        await self._flush_pending()

    async def close(self) -> None:
        """Stop the flusher without logging what is pending (the invocation is abandoned)."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher


async def follow(
    store: BackgroundStore,
    tenant: str,
    response_id: str,
    after: int,
    *,
    notifier: LogNotifier | None = None,
    poll_interval: float = 0.5,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    heartbeat: float | None = HEARTBEAT_INTERVAL,
) -> AsyncIterator[bytes]:
    """Frames logged after sequence number ``after`` (-1: from the start), then new ones as
    they land, ending with the terminal event (or at ``deadline`` on ``clock``, without it, so
    the client resumes with ``starting_after``).

    The terminal frame is always the last one sent, even if numbered frames raced past it (a
    cancel that landed while the worker was still logging): a follower always sees an ending.
    While nothing new arrives (a long tool call), an SSE comment goes out every ``heartbeat``
    seconds, so proxies and API Gateway do not close an idle stream; clients ignore comments.
    """
    cursor = after
    quiet_since = clock()
    with contextlib.ExitStack() as stack:
        grew = stack.enter_context(notifier.subscribe(tenant, response_id)) if notifier else None
        while True:
            if grew is not None:
                grew.clear()  # before reading: a batch landing during the read wakes us
            read = await store.read_events(tenant, response_id, cursor)
            for seq, frame in read.events:
                yield frame.encode()
                cursor = seq
                quiet_since = clock()
            terminal = read.terminal
            if terminal is not None:
                if terminal.sequence_number > after:
                    yield terminal.frame.encode()
                return
            if deadline is not None and clock() >= deadline:
                return
            if heartbeat is not None and clock() - quiet_since >= heartbeat:
                yield KEEP_ALIVE
                quiet_since = clock()
            wait = poll_interval
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - clock()))
            if grew is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(grew.wait(), wait)
            else:
                await asyncio.sleep(wait)
