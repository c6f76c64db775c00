"""The usage ledger of background runs: a worker retried after any crash counts its response
exactly once, and a cancelled run counts what it consumed."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.background.runs import cancel_run, start_background
from responses_gateway.background.worker import run_worker
from responses_gateway.service import Gateway
from responses_gateway.testing.mcp_servers import RunningMcpServer
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn, Usage

from .conftest import calc_tool


class Crash(Exception):
    """The injected death of a worker invocation."""


async def _queue(gateway: Gateway, tenant: str, body: dict[str, Any]) -> str:
    body = {"model": "scripted-chat", "background": True, **body}
    run = await gateway.prepare(body, tenant, api_key_id="key_bg")
    await start_background(gateway, run)
    return run.state.response_id


async def _counted(gateway: Gateway, tenant: str, response_id: str) -> Any:
    entry = await gateway.store.get_usage_entry(tenant, response_id)
    assert entry is not None
    return entry


async def test_a_worker_retried_after_each_checkpoint_counts_the_response_once(
    gateway: Gateway, upstream: ScriptedUpstream, calc: RunningMcpServer, tenant: str
) -> None:
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":2,"b":3}', "call_1")], usage=Usage(10, 4)),
        Turn(text="5.", usage=Usage(20, 2, cached_tokens=8)),
    )
    response_id = await _queue(gateway, tenant, {"input": "2+3?", "tools": [calc_tool(calc)]})
    crashed: set[int] = set()

    def crash(version: int) -> None:
        if version not in crashed:
            crashed.add(version)
            raise Crash(version)

    invocations = 0
    while True:
        invocations += 1
        try:
            if await run_worker(gateway, tenant, response_id, after_checkpoint=crash) == "done":
                break
        except Crash:
            continue
    assert invocations > 2
    entry = await _counted(gateway, tenant, response_id)
    record = await gateway.store.get_response(tenant, response_id)
    assert record is not None and record.status == "completed"
    assert (entry.counts.input_tokens, entry.counts.output_tokens) == (30, 6)
    assert entry.counts.cached_tokens == 8
    assert (entry.counts.model_calls, entry.counts.tool_calls) == (2, 1)
    assert (entry.api_key_id, entry.background, entry.status) == ("key_bg", True, "completed")
    spend = await gateway.store.get_spend(tenant, entry.ended_at)
    assert spend.day_tokens == 36


async def test_a_crash_after_the_ledger_write_never_counts_twice(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.push(Turn(text="Once.", usage=Usage(7, 3)))
    response_id = await _queue(gateway, tenant, {"input": "x"})
    persister_for = gateway.persister_for

    def dying(tenant: str, run: dict[str, Any]) -> Any:
        async def persist(*_: Any) -> None:
            raise Crash("after the claim")

        return persist

    monkeypatch.setattr(gateway, "persister_for", dying)
    with pytest.raises(Crash):
        await run_worker(gateway, tenant, response_id)
    monkeypatch.setattr(gateway, "persister_for", persister_for)
    assert await run_worker(gateway, tenant, response_id) == "done"
    assert await run_worker(gateway, tenant, response_id) == "done"  # a duplicate invocation
    spend = await gateway.store.get_spend(
        tenant, (await _counted(gateway, tenant, response_id)).ended_at
    )
    assert spend.day_tokens == 10


async def test_a_cancelled_run_counts_what_it_consumed(
    gateway: Gateway, upstream: ScriptedUpstream, calc: RunningMcpServer, tenant: str
) -> None:
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":1,"b":1}', "call_1")], usage=Usage(9, 1)),
    )
    response_id = await _queue(gateway, tenant, {"input": "1+1?", "tools": [calc_tool(calc)]})

    def stop_after_first(version: int) -> None:
        if version > 1:  # version 1 only says the run started
            raise Crash(version)

    with pytest.raises(Crash):  # the model call ran and was checkpointed, then the worker died
        await run_worker(gateway, tenant, response_id, after_checkpoint=stop_after_first)
    record = await gateway.store.get_response(tenant, response_id)
    assert record is not None
    ended = await cancel_run(gateway, record)
    assert ended["status"] == "cancelled"
    entry = await _counted(gateway, tenant, response_id)
    assert (entry.status, entry.counts.input_tokens, entry.counts.model_calls) == (
        "cancelled",
        9,
        1,
    )
