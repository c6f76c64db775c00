"""The background worker driven one invocation at a time: checkpoints, crash safety, the
journal, cancel, the watchdog and the state machine's event contract (``entry.work``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from responses_gateway.background.entry import work
from responses_gateway.background.journal import INTERRUPTED
from responses_gateway.background.log import follow
from responses_gateway.background.records import current_response
from responses_gateway.background.runs import (
    WORKER_LOST,
    cancel_run,
    end_if_lost,
    start_background,
)
from responses_gateway.background.worker import run_worker
from responses_gateway.service import Gateway
from responses_gateway.testing.mcp_servers import RunningMcpServer
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import RecordingLauncher, calc_tool


class Crash(Exception):
    """The injected death of a worker invocation."""


def _multi_step(upstream: ScriptedUpstream) -> None:
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":2,"b":3}', "call_1")]),
        Turn(tool_calls=[ToolCall("calc__divide", '{"a":10,"b":4}', "call_2")]),
        Turn(text="5 and 2.5."),
    )


def _shape(output: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            item["type"],
            item.get("name"),
            item.get("arguments"),
            item.get("output"),
            item.get("error"),
            [part.get("text") for part in item.get("content") or []],
        )
        for item in output
    ]


EXPECTED = [
    ("mcp_list_tools", None, None, None, None, []),
    ("mcp_call", "add", '{"a":2,"b":3}', "5.0", None, []),
    ("mcp_call", "divide", '{"a":10,"b":4}', "2.5", None, []),
    ("message", None, None, None, None, ["5 and 2.5."]),
]


async def _queue(gateway: Gateway, tenant: str, body: dict[str, Any]) -> str:
    body = {"model": "scripted-chat", "background": True, "stream": True, **body}
    run = await gateway.prepare(body, tenant)
    queued = await start_background(gateway, run)
    assert queued["status"] == "queued"
    return run.state.response_id


async def _drive(
    gateway: Gateway, tenant: str, response_id: str, hook: Callable[[int], None] | None = None
) -> int:
    """Invoke the worker until it is done, as the state machine's retries would; return the
    number of invocations."""
    invocations = 0
    while True:
        invocations += 1
        try:
            status = await run_worker(gateway, tenant, response_id, after_checkpoint=hook)
        except Crash:
            continue
        if status == "done":
            return invocations
        assert invocations < 20


async def _log(gateway: Gateway, tenant: str, response_id: str) -> list[dict[str, Any]]:
    frames = [f async for f in follow(gateway.store, tenant, response_id, -1, poll_interval=0)]
    return parse_sse(b"".join(frames))


async def _record(gateway: Gateway, tenant: str, response_id: str) -> dict[str, Any]:
    record = await gateway.store.get_response(tenant, response_id)
    assert record is not None
    return record.response


async def test_a_clean_run_checkpoints_every_action_and_logs_a_valid_stream(
    gateway: Gateway,
    launcher: RecordingLauncher,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    tenant: str,
) -> None:
    _multi_step(upstream)
    calc.log.clear()
    response_id = await _queue(gateway, tenant, {"input": "Compute", "tools": [calc_tool(calc)]})
    assert launcher.started == [(tenant, response_id, 0)]
    versions: list[int] = []

    assert await _drive(gateway, tenant, response_id, versions.append) == 1
    # started (in_progress), then CallLlm, ExecuteTools, CallLlm, ExecuteTools, CallLlm
    assert versions == [1, 2, 3, 4, 5, 6]
    record = await _record(gateway, tenant, response_id)
    assert record["status"] == "completed"
    assert _shape(record["output"]) == EXPECTED
    events = await _log(gateway, tenant, response_id)
    assert [e["type"] for e in events[:3]] == [
        "response.created",
        "response.queued",
        "response.in_progress",
    ]
    assert check_stream(events) == record
    assert [name for name, _ in calc.log.calls] == ["add", "divide"]


@pytest.mark.parametrize("crash_after", [1, 2, 3, 4, 5, 6])
async def test_a_worker_killed_between_actions_resumes_with_the_same_output(
    gateway: Gateway,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    tenant: str,
    crash_after: int,
) -> None:
    _multi_step(upstream)
    calc.log.clear()
    response_id = await _queue(gateway, tenant, {"input": "Compute", "tools": [calc_tool(calc)]})

    def crash(version: int) -> None:
        if version == crash_after:
            raise Crash(version)

    assert await _drive(gateway, tenant, response_id, crash) == 2
    record = await _record(gateway, tenant, response_id)
    assert (record["status"], _shape(record["output"])) == ("completed", EXPECTED)
    assert [name for name, _ in calc.log.calls] == ["add", "divide"]  # none ran twice
    assert len(upstream.model_requests()) == 3
    events = await _log(gateway, tenant, response_id)
    assert check_stream(events) == record  # each event once, numbered without gaps


async def _queue_and_die_at_first_tool_outcome(
    gateway: Gateway,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    recorded: bool,
) -> dict[str, Any]:
    """Run the multi-step loop with the worker dying at the first tool outcome, just after
    (``recorded``) or just before journaling it; retry until done; return the record."""
    _multi_step(upstream)
    calc.log.clear()
    response_id = await _queue(gateway, tenant, {"input": "Compute", "tools": [calc_tool(calc)]})
    store = gateway.store
    journal_finish = store.journal_finish
    deaths: list[str] = []

    async def dying(tenant: str, response_id: str, key: str, outcome: Any) -> None:
        if recorded or deaths:
            await journal_finish(tenant, response_id, key, outcome)
        if not deaths:
            deaths.append(key)
            raise Crash(key)

    monkeypatch.setattr(store, "journal_finish", dying)
    assert await _drive(gateway, tenant, response_id) == 2
    record = await _record(gateway, tenant, response_id)
    assert check_stream(await _log(gateway, tenant, response_id)) == record
    assert [name for name, _ in calc.log.calls] == ["add", "divide"]  # none ran twice
    return record


async def test_a_worker_killed_after_recording_a_tool_result_never_runs_it_again(
    gateway: Gateway,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = await _queue_and_die_at_first_tool_outcome(
        gateway, upstream, calc, tenant, monkeypatch, recorded=True
    )
    assert _shape(record["output"]) == EXPECTED


async def test_a_call_whose_result_was_lost_fails_honestly_instead_of_running_twice(
    gateway: Gateway,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = await _queue_and_die_at_first_tool_outcome(
        gateway, upstream, calc, tenant, monkeypatch, recorded=False
    )
    add = record["output"][1]
    assert (add["name"], add["status"], add["error"], add.get("output")) == (
        "add",
        "failed",
        INTERRUPTED,
        None,
    )
    assert _shape(record["output"])[2:] == EXPECTED[2:]


async def test_the_worker_stops_for_the_state_machine_when_its_time_runs_low(
    gateway: Gateway, upstream: ScriptedUpstream, calc: RunningMcpServer, tenant: str
) -> None:
    _multi_step(upstream)
    response_id = await _queue(gateway, tenant, {"input": "Compute", "tools": [calc_tool(calc)]})
    event: dict[str, Any] = {"tenant": tenant, "response_id": response_id, "generation": 0}
    event["iteration"] = 0
    statuses = []
    while True:
        event = await work(gateway, event, remaining=lambda: 10.0, margin=60.0)
        statuses.append(event["status"])
        if event["status"] == "done":
            break
    assert statuses == ["continue"] * 5 + ["done"]  # one action per invocation
    assert event == {
        "tenant": tenant,
        "response_id": response_id,
        "generation": 0,
        "iteration": 6,
        "status": "done",
    }
    record = await _record(gateway, tenant, response_id)
    assert _shape(record["output"]) == EXPECTED
    assert check_stream(await _log(gateway, tenant, response_id)) == record


async def test_cancel_while_queued_ends_it_and_the_worker_does_nothing(
    gateway: Gateway, launcher: RecordingLauncher, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(Turn(text="never"))
    response_id = await _queue(gateway, tenant, {"input": "x"})
    record = await gateway.store.get_response(tenant, response_id)
    assert record is not None

    cancelled = await cancel_run(gateway, record)
    assert (cancelled["status"], cancelled["output"], cancelled["error"]) == ("cancelled", [], None)
    assert launcher.stopped == [(tenant, response_id, 0)]
    assert await run_worker(gateway, tenant, response_id) == "done"
    assert upstream.model_requests() == []
    assert await _record(gateway, tenant, response_id) == cancelled
    events = await _log(gateway, tenant, response_id)
    assert [e["type"] for e in events] == ["response.created", "response.queued", "response.failed"]
    assert events[-1]["response"] == cancelled
    again = await gateway.store.get_response(tenant, response_id)
    assert again is not None and await cancel_run(gateway, again) == cancelled


async def test_the_watchdog_fails_a_run_whose_worker_was_lost(
    gateway: Gateway, upstream: ScriptedUpstream, calc: RunningMcpServer, tenant: str
) -> None:
    _multi_step(upstream)
    response_id = await _queue(gateway, tenant, {"input": "Compute", "tools": [calc_tool(calc)]})

    def crash(version: int) -> None:
        if version > 1:  # after the first action (version 1 only says the run started)
            raise Crash(version)

    with pytest.raises(Crash):
        await run_worker(gateway, tenant, response_id, after_checkpoint=crash)
    ids = {"tenant": tenant, "response_id": response_id, "generation": 0}
    answer = await work(
        gateway, {**ids, "mode": "fail", "error": {"Error": "States.Timeout", "Cause": ""}}
    )
    assert answer == {**ids, "iteration": 0, "status": "done"}
    record = await _record(gateway, tenant, response_id)
    assert (record["status"], record["error"]) == ("failed", WORKER_LOST)
    assert [item["type"] for item in record["output"]] == ["mcp_list_tools", "mcp_call"]
    assert record["output"][1]["status"] == "incomplete"
    events = await _log(gateway, tenant, response_id)
    assert events[-1]["type"] == "response.failed"
    assert check_stream(events) == record
    assert await run_worker(gateway, tenant, response_id) == "done"
    assert len(upstream.model_requests()) == 1


async def test_a_run_past_the_background_time_limit_ends_failed(
    gateway: Gateway, upstream: ScriptedUpstream, calc: RunningMcpServer, tenant: str
) -> None:
    _multi_step(upstream)
    response_id = await _queue(gateway, tenant, {"input": "Compute", "tools": [calc_tool(calc)]})
    ticks = iter([0.0, 0.0, 1e12])  # at the start, after action 1, after action 2

    def clock() -> float:
        return next(ticks)

    status = await run_worker(gateway, tenant, response_id, max_seconds=60.0, clock=clock)
    assert status == "done"
    record = await _record(gateway, tenant, response_id)
    assert record["status"] == "failed"
    assert record["error"] == {
        "code": "server_error",
        "message": "The response ran longer than this gateway allows for background "
        "responses (60 seconds).",
    }
    assert [item["type"] for item in record["output"]] == ["mcp_list_tools", "mcp_call"]
    assert record["output"][1]["output"] == "5.0"  # the finished action is kept
    assert len(upstream.model_requests()) == 1
    assert check_stream(await _log(gateway, tenant, response_id)) == record


async def test_a_cancel_that_only_flagged_the_checkpoint_is_finished_by_the_worker(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(Turn(text="never"))
    response_id = await _queue(gateway, tenant, {"input": "x"})
    assert await gateway.store.request_cancel(tenant, response_id)  # then the canceller died

    assert await run_worker(gateway, tenant, response_id) == "done"
    record = await _record(gateway, tenant, response_id)
    assert (record["status"], record["output"]) == ("cancelled", [])
    assert (await _log(gateway, tenant, response_id))[-1]["response"] == record
    assert upstream.model_requests() == []


async def test_no_tool_starts_after_a_cancel_landing_right_after_a_checkpoint(
    gateway: Gateway,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    tenant: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _multi_step(upstream)
    calc.log.clear()
    response_id = await _queue(gateway, tenant, {"input": "Compute", "tools": [calc_tool(calc)]})
    store = gateway.store
    write = store.put_checkpoint

    async def then_cancel(checkpoint: Any, *, expected_version: int | None) -> None:
        await write(checkpoint, expected_version=expected_version)
        if checkpoint.version == 2:  # the model asked for a tool; a cancel arrives now
            assert await store.request_cancel(tenant, response_id)

    monkeypatch.setattr(store, "put_checkpoint", then_cancel)
    assert await run_worker(gateway, tenant, response_id) == "done"
    record = await _record(gateway, tenant, response_id)
    assert record["status"] == "cancelled"
    assert (record["output"][1]["type"], record["output"][1]["status"]) == (
        "mcp_call",
        "incomplete",
    )
    assert calc.log.calls == []


async def test_a_crash_between_the_terminal_claim_and_the_record_is_settled_on_retry(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream.push(Turn(text="Claimed."))
    response_id = await _queue(gateway, tenant, {"input": "x"})
    persister_for = gateway.persister_for

    def dying(tenant: str, run: dict[str, Any]) -> Any:
        async def persist(*_: Any) -> None:
            raise Crash("after the claim")

        return persist

    monkeypatch.setattr(gateway, "persister_for", dying)
    with pytest.raises(Crash):
        await run_worker(gateway, tenant, response_id)
    assert (await _record(gateway, tenant, response_id))["status"] == "queued"

    monkeypatch.setattr(gateway, "persister_for", persister_for)
    assert await run_worker(gateway, tenant, response_id) == "done"
    record = await _record(gateway, tenant, response_id)
    assert record["status"] == "completed"
    assert record["output"][0]["content"][0]["text"] == "Claimed."
    assert check_stream(await _log(gateway, tenant, response_id)) == record
    assert len(upstream.model_requests()) == 1


async def test_a_background_response_created_without_stream_logs_only_its_terminal(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(Turn(text="Quiet."))
    run = await gateway.prepare(
        {"model": "scripted-chat", "background": True, "input": "x"}, tenant
    )
    await start_background(gateway, run)
    response_id = run.state.response_id
    assert await run_worker(gateway, tenant, response_id) == "done"
    read = await gateway.store.read_events(tenant, response_id, -1)
    assert read.events == []
    assert read.terminal is not None
    assert read.terminal.response == await _record(gateway, tenant, response_id)
    assert read.terminal.frame.startswith("event: response.completed\n")


async def test_a_read_long_after_any_worker_could_run_ends_a_lost_run(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    response_id = await _queue(gateway, tenant, {"input": "x"})  # its worker never runs
    record = await gateway.store.get_response(tenant, response_id)
    assert record is not None
    fresh = await end_if_lost(gateway, record, record.response)
    assert fresh["status"] == "queued"  # recent: a worker may still pick it up

    old = {**record.response, "created_at": 0}
    ended = await end_if_lost(gateway, record, old)
    assert (ended["status"], ended["error"]) == ("failed", WORKER_LOST)
    assert await _record(gateway, tenant, response_id) == ended
    assert upstream.model_requests() == []


async def _die_mid_answer(gateway: Gateway, tenant: str, response_id: str) -> None:
    """Run the worker until a batch of the model's answer is logged, then kill it there."""
    with gateway.notifier.subscribe(tenant, response_id) as grew:
        worker = asyncio.create_task(run_worker(gateway, tenant, response_id))
        await asyncio.wait_for(grew.wait(), 30)  # a batch past the checkpoint landed
    worker.cancel()
    with pytest.raises(asyncio.CancelledError):
        await worker
    read = await gateway.store.read_events(tenant, response_id, 1)
    assert [json.loads(f.split("data: ", 1)[1])["type"] for _, f in read.events][:2] == [
        "response.in_progress",
        "response.output_item.added",
    ]


async def test_a_worker_killed_mid_answer_is_replaced_by_a_clean_retry(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(Turn(text="a b c d e f g", hold_after=4), Turn(text="Fresh answer."))
    response_id = await _queue(gateway, tenant, {"input": "x"})
    await _die_mid_answer(gateway, tenant, response_id)

    assert await run_worker(gateway, tenant, response_id) == "done"
    record = await _record(gateway, tenant, response_id)
    assert record["output"][0]["content"][0]["text"] == "Fresh answer."
    events = await _log(gateway, tenant, response_id)
    assert check_stream(events) == record  # the dead attempt's events are gone
    assert "a" not in [e.get("delta") for e in events]


async def test_the_watchdog_after_a_death_mid_answer_leaves_a_consistent_log(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(Turn(text="a b c d e f g", hold_after=4))
    response_id = await _queue(gateway, tenant, {"input": "x"})
    await _die_mid_answer(gateway, tenant, response_id)

    ids = {"tenant": tenant, "response_id": response_id, "generation": 0}
    await work(gateway, {**ids, "mode": "fail", "error": {"Error": "States.Timeout"}})
    record = await _record(gateway, tenant, response_id)
    assert (record["status"], record["output"]) == ("failed", [])
    events = await _log(gateway, tenant, response_id)
    assert [e["type"] for e in events] == ["response.created", "response.queued", "response.failed"]
    assert events[-1]["response"] == record


async def test_an_execution_stopped_from_outside_ends_its_response_through_eventbridge(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    response_id = await _queue(gateway, tenant, {"input": "x"})
    ids = {"tenant": tenant, "response_id": response_id, "generation": 0, "iteration": 0}
    event = {
        "version": "0",
        "source": "aws.states",
        "detail-type": "Step Functions Execution Status Change",
        "detail": {
            "executionArn": f"arn:aws:states:us-east-1:123456789012:execution:gw:{response_id}",
            "status": "ABORTED",
            "input": json.dumps(ids),
        },
    }
    answer = await work(gateway, event)
    assert answer["status"] == "done"
    record = await _record(gateway, tenant, response_id)
    assert (record["status"], record["error"]) == ("failed", WORKER_LOST)
    assert await work(gateway, event) == answer  # again: already ended, unchanged
    assert await _record(gateway, tenant, response_id) == record
    assert upstream.model_requests() == []


async def test_a_run_reads_in_progress_from_the_moment_its_first_model_call_starts(
    gateway: Gateway, upstream: ScriptedUpstream, tenant: str
) -> None:
    upstream.push(Turn(text="a b c d e f g", hold_after=2))
    response_id = await _queue(gateway, tenant, {"input": "x"})
    record = await gateway.store.get_response(tenant, response_id)
    assert record is not None
    assert (await current_response(gateway.store, record))["status"] == "queued"

    worker = asyncio.create_task(run_worker(gateway, tenant, response_id))
    await asyncio.to_thread(upstream.wait_for_requests, 1, 30)  # the model call is under way
    try:
        now = await current_response(gateway.store, record)
        assert (now["status"], now["output"]) == ("in_progress", [])
        assert record.status == "queued"  # the record itself is not rewritten
    finally:
        worker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await worker
