"""run_buffered: the loop of a non-streaming create runs in the request's own task; a client
that leaves cancels it (stored ``cancelled``, the upstream stream closed) and leaves no
cancellation behind; a cancellation from elsewhere still propagates. run_streamed: one task,
the loop's, and the answer once the stream committed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request

from responses_gateway.api.streaming import run_buffered, run_streamed
from responses_gateway.config import parse_config
from responses_gateway.service import Gateway, PreparedRun

CONFIG = {"providers": [{"name": "up", "base_url": "http://up.test/v1", "api": "responses"}]}


def _frame(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


DELTA = _frame(
    {
        "type": "response.output_text.delta",
        "output_index": 0,
        "item_id": "msg_up",
        "content_index": 0,
        "delta": "Hello",
    }
)
COMPLETED = _frame(
    {
        "type": "response.completed",
        "response": {
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hello"}]}],
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }
)


class _Upstream(httpx.AsyncByteStream):
    """One delta, then the end (``hang``: nothing more until the stream is closed)."""

    def __init__(self, hang: bool) -> None:
        self.hang = hang
        self.tasks: list[asyncio.Task[Any] | None] = []
        self.sent = asyncio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.tasks.append(asyncio.current_task())
        yield DELTA
        self.sent.set()
        if self.hang:
            await asyncio.Event().wait()
        yield COMPLETED

    async def aclose(self) -> None:
        self.closed = True


class _Ledger:
    """The store of ``store: false`` creates: the usage entry and nothing else."""

    def __init__(self) -> None:
        self.entries: list[Any] = []

    async def record_usage(self, entry: Any) -> bool:
        self.entries.append(entry)
        return True

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"store.{name} used")


async def _run(hang: bool = False) -> tuple[Gateway, PreparedRun, _Upstream]:
    upstream = _Upstream(hang)

    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=upstream)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    gateway = Gateway(parse_config(CONFIG, {}), client, _Ledger())  # type: ignore[arg-type]
    run = await gateway.prepare({"model": "m", "input": "Hi", "store": False}, "tenant")
    return gateway, run, upstream


def _request(gone: asyncio.Event) -> Request:
    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    return Request({"type": "http", "headers": []}, receive)


async def test_run_buffered_runs_the_loop_in_the_request_task() -> None:
    gateway, run, upstream = await _run()
    assert await run_buffered(run, _request(asyncio.Event()), gateway) is True
    assert upstream.tasks == [asyncio.current_task()]
    assert run.state.status == "completed"
    assert run.state.output[0]["content"][0]["text"] == "Hello"


async def test_run_buffered_leaves_no_task_running() -> None:
    gateway, run, _ = await _run()
    before = asyncio.all_tasks()
    assert await run_buffered(run, _request(asyncio.Event()), gateway) is True
    await asyncio.sleep(0)  # the watcher's cancellation is delivered
    assert asyncio.all_tasks() == before


async def test_run_buffered_client_leaving_cancels_the_response() -> None:
    gateway, run, upstream = await _run(hang=True)
    gone = asyncio.Event()
    running = asyncio.ensure_future(run_buffered(run, _request(gone), gateway))
    await upstream.sent.wait()
    gone.set()
    assert await running is False
    assert run.state.status == "cancelled"
    assert run.state.output[0]["status"] == "incomplete"
    assert run.state.output[0]["content"][0]["text"] == "Hello"
    assert upstream.closed
    assert [e.status for e in gateway.store.entries] == ["cancelled"]  # type: ignore[attr-defined]


async def test_run_buffered_client_leaving_leaves_the_request_task_uncancelled() -> None:
    gateway, run, upstream = await _run(hang=True)
    gone = asyncio.Event()

    async def handler() -> tuple[bool | dict[str, Any], int]:
        outcome = await run_buffered(run, _request(gone), gateway)
        task = asyncio.current_task()
        assert task is not None
        return outcome, task.cancelling()  # 0: later awaits of the request are not cancelled

    handling = asyncio.ensure_future(handler())
    await upstream.sent.wait()
    gone.set()
    assert await handling == (False, 0)


async def test_run_buffered_cancelled_from_elsewhere_raises_and_ends_the_response() -> None:
    gateway, run, upstream = await _run(hang=True)
    running = asyncio.ensure_future(run_buffered(run, _request(asyncio.Event()), gateway))
    await upstream.sent.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert run.state.status == "cancelled"
    assert upstream.closed


async def test_run_streamed_answers_once_committed_with_one_task_for_the_loop() -> None:
    gateway, run, upstream = await _run(hang=True)
    run.stream = True
    started: list[str] = []
    tasks: list[asyncio.Task[Any]] = []
    loop = asyncio.get_running_loop()

    def counting(loop: asyncio.AbstractEventLoop, coro: Any) -> asyncio.Task[Any]:
        started.append(coro.__qualname__)
        tasks.append(asyncio.Task(coro, loop=loop))
        return tasks[-1]

    loop.set_task_factory(counting)
    try:
        response = await run_streamed(run, gateway)
    finally:
        loop.set_task_factory(None)
    assert started == ["run_streamed.<locals>.run_to_end"]
    assert response.media_type == "text/event-stream"
    assert run.state.output[0]["type"] == "message"  # committed: the first item opened
    body = response.body_iterator  # type: ignore[attr-defined]
    first = await body.__anext__()
    assert first.startswith(b"event: response.created\n")
    await body.aclose()  # the client is gone: the loop is cancelled and stored as such
    await asyncio.wait(tasks)
    assert upstream.closed
    assert run.state.status == "cancelled"
