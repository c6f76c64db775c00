"""The event log: batching at action boundaries, replay after a cursor, following to the end."""

from __future__ import annotations

import asyncio

from responses_gateway.background.log import KEEP_ALIVE, EventLog, LogNotifier, follow
from responses_gateway.service import Gateway
from responses_gateway.store.base import Terminal


def _frame(seq: int) -> bytes:
    return f'event: e\ndata: {{"sequence_number":{seq}}}\n\n'.encode()


async def test_frames_are_logged_in_order_and_the_terminal_is_kept_apart(
    gateway: Gateway, tenant: str
) -> None:
    store = gateway.store
    log = EventLog(store, tenant, "resp_log", first_seq=2)
    for seq in (2, 3, 4):
        log.write(_frame(seq))
    assert log.next_seq == 5
    assert log.take_last() == _frame(4).decode()
    await log.flush()
    await log.close()
    read = await store.read_events(tenant, "resp_log", -1)
    assert read.events == [(2, _frame(2).decode()), (3, _frame(3).decode())]
    assert (await store.read_events(tenant, "resp_log", 2)).events == [(3, _frame(3).decode())]


async def test_follow_replays_then_stops_at_its_deadline_without_a_terminal(
    gateway: Gateway, tenant: str
) -> None:
    await gateway.store.append_events(tenant, "resp_dl", 0, [_frame(0).decode()])
    frames = [
        f
        async for f in follow(gateway.store, tenant, "resp_dl", -1, deadline=0.0, clock=lambda: 1.0)
    ]
    assert frames == [_frame(0)]


async def test_a_follower_is_woken_by_new_batches_and_ends_with_the_terminal(
    gateway: Gateway, tenant: str
) -> None:
    store, notifier = gateway.store, LogNotifier()
    received: list[bytes] = []
    first_read = asyncio.Event()
    real_read = store.read_events

    async def observed(*args: object) -> object:
        result = await real_read(*args)  # type: ignore[arg-type]
        first_read.set()
        return result

    async def consume() -> None:
        frames = follow(store, tenant, "resp_f", 0, notifier=notifier, poll_interval=60)
        async for frame in frames:
            received.append(frame)

    store.read_events = observed  # type: ignore[method-assign]
    follower = asyncio.create_task(consume())
    await first_read.wait()
    await store.append_events(tenant, "resp_f", 0, [_frame(0).decode(), _frame(1).decode()])
    notifier.notify(tenant, "resp_f")
    terminal = Terminal(2, _frame(2).decode(), {"id": "resp_f"})
    assert await store.claim_terminal(tenant, "resp_f", terminal) is None
    notifier.notify(tenant, "resp_f")
    await asyncio.wait_for(follower, 30)
    assert received == [_frame(1), _frame(2)]  # after cursor 0, then the terminal


async def test_a_boundary_flush_waits_for_a_background_write_in_flight(
    gateway: Gateway, tenant: str
) -> None:
    store = gateway.store
    append = store.append_events
    writing, release = asyncio.Event(), asyncio.Event()

    async def slow_append(*args: object) -> None:
        if not writing.is_set():
            writing.set()
            await release.wait()  # the background write is still in flight
        await append(*args)  # type: ignore[arg-type]

    store.append_events = slow_append  # type: ignore[method-assign]
    log = EventLog(store, tenant, "resp_inflight", first_seq=0)
    log.write(_frame(0))
    log.write(_frame(1))
    await writing.wait()
    log.write(_frame(2))
    asyncio.get_running_loop().call_soon(release.set)  # runs once the boundary flush waits
    await log.flush()
    read = await store.read_events(tenant, "resp_inflight", -1)
    assert [seq for seq, _ in read.events] == [0, 1, 2]
    assert log.next_seq == 3


async def test_an_idle_follower_sends_keep_alive_comments(gateway: Gateway, tenant: str) -> None:
    await gateway.store.append_events(tenant, "resp_idle", 0, [_frame(0).decode()])
    ticks = [0.0, 1.0, 20.0, 20.0, 21.0, 21.0, 40.0, 40.0, 99.0]

    def clock() -> float:  # each call reads the next tick; the last one stays
        return ticks.pop(0) if len(ticks) > 1 else ticks[0]

    frames = [
        f
        async for f in follow(
            gateway.store,
            tenant,
            "resp_idle",
            -1,
            poll_interval=0,
            deadline=99.0,
            clock=clock,
            heartbeat=15.0,
        )
    ]
    assert frames == [_frame(0), KEEP_ALIVE, KEEP_ALIVE]
