"""Gateway: per-process adapters, and the tasks a plain ``store: false`` create costs (none to
prepare it; one for its ending's shielded write)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Generator
from typing import Any

import httpx

from responses_gateway.config import parse_config
from responses_gateway.loop import NullSink, run_loop
from responses_gateway.service import Gateway

CONFIG = {
    "providers": [
        {"name": "a", "base_url": "http://a.test/v1", "api": "responses", "prefixes": ["a/"]},
        {"name": "b", "base_url": "http://b.test/v1", "api": "chat", "prefixes": ["b/"]},
    ]
}

_ANSWER = "".join(
    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n"
    for e in [
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"},
        {
            "type": "response.completed",
            "response": {"output": [], "usage": {"input_tokens": 1, "output_tokens": 1}},
        },
    ]
).encode()


class _Ledger:
    async def record_usage(self, entry: Any) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"store.{name} used")


def _gateway() -> Gateway:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_ANSWER)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return Gateway(parse_config(CONFIG, {}), client, _Ledger())  # type: ignore[arg-type]


class _Counting:
    """A task factory that counts the tasks started while it is installed."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def __call__(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any] | Generator[Any]
    ) -> asyncio.Task[Any]:
        self.started.append(getattr(coro, "__qualname__", repr(coro)))
        return asyncio.Task(coro, loop=loop)


async def test_adapter_for_builds_one_adapter_per_provider() -> None:
    gateway = _gateway()
    first = await gateway.prepare({"model": "a/x", "input": "Hi"}, "t1")
    second = await gateway.prepare({"model": "a/y", "input": "Hi"}, "t2")
    other = await gateway.prepare({"model": "b/x", "input": "Hi"}, "t1")
    assert first.ctx.adapter is second.ctx.adapter
    assert other.ctx.adapter is not first.ctx.adapter
    assert (first.ctx.adapter.wire, other.ctx.adapter.wire) == ("responses", "chat")
    provider, _ = gateway.config.route("a/x")
    assert gateway.adapter_for(provider) is first.ctx.adapter


async def test_prepare_without_budget_or_context_starts_no_task() -> None:
    gateway = _gateway()
    counting = _Counting()
    loop = asyncio.get_running_loop()
    loop.set_task_factory(counting)
    try:
        run = await gateway.prepare({"model": "a/x", "input": "Hi", "store": False}, "t")
    finally:
        loop.set_task_factory(None)
    assert counting.started == []
    assert run.state.upstream_input[0]["content"] == [{"type": "input_text", "text": "Hi"}]


async def test_unstored_run_ending_starts_only_its_shielded_write() -> None:
    gateway = _gateway()
    run = await gateway.prepare({"model": "a/x", "input": "Hi", "store": False}, "t")
    counting = _Counting()
    loop = asyncio.get_running_loop()
    loop.set_task_factory(counting)
    try:
        await run_loop(run.state, run.ctx, NullSink())
    finally:
        loop.set_task_factory(None)
    assert run.state.status == "completed"
    assert counting.started == ["Gateway._persister.<locals>.persist"]


async def test_the_shared_mcp_pool_needs_a_serving_loop_and_a_shared_server() -> None:
    shared = {
        **CONFIG,
        "mcp_servers": [{"server_label": "t", "command": "time-server", "shared": True}],
    }
    plain = {**CONFIG, "mcp_servers": [{"server_label": "t", "command": "time-server"}]}
    client = httpx.AsyncClient()
    loop = asyncio.get_running_loop()
    gateway = Gateway(parse_config(shared, {}), client, _Ledger())  # type: ignore[arg-type]
    without = Gateway(parse_config(plain, {}), client, _Ledger())  # type: ignore[arg-type]
    without.keep_shared_mcp(loop)

    assert gateway.shared_mcp() is None  # no serving loop: runs keep their own sessions
    assert without.shared_mcp() is None  # nothing to share
    gateway.keep_shared_mcp(loop)
    pool = gateway.shared_mcp()
    assert pool is not None and gateway.shared_mcp() is pool
    await gateway.close_shared_mcp()
    assert gateway.shared_mcp() is None
    await client.aclose()


async def test_the_wires_refusing_a_request_reach_its_loop_and_a_continued_run() -> None:
    gateway = _gateway()
    body = {"model": "a/x", "input": "Hi", "store": False, "prompt_cache_retention": "24h"}

    run = await gateway.prepare(body, "t")

    assert run.ctx.refused_wires == frozenset({"bedrock", "chat", "harmony"})
    assert run.run["refused_wires"] == ["bedrock", "chat", "harmony"]  # for a continuation
    continued = gateway.live_context("t", run.state, run.run, persist=run.ctx.persist)
    assert continued.refused_wires == run.ctx.refused_wires
    plain = await gateway.prepare({"model": "a/x", "input": "Hi", "store": False}, "t")
    assert plain.ctx.refused_wires == frozenset() and plain.run["refused_wires"] == []
