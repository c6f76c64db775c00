"""The driver end to end with an in-test adapter: event order, endings, step-by-step resume."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from responses_gateway.adapters.base import ModelCall
from responses_gateway.errors import InternalError, UpstreamStatusError
from responses_gateway.loop import LoopContext, LoopState, run_loop, step
from responses_gateway.loop.driver import build_model_call
from responses_gateway.loop.events import LoopEvent, ResponseFinished, ResponseStarted
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import Finish, TurnResult
from responses_gateway.protocol.request import echo_fields, parse_create_request


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [type(e).__name__ for e in self.events]


Script = Callable[[ModelCall, OutputWriter], TurnResult]


class ScriptAdapter:
    wire = "test"

    def __init__(self, *turns: Script) -> None:
        self.turns = list(turns)
        self.calls: list[ModelCall] = []

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        self.calls.append(call)
        return self.turns.pop(0)(call, out)


def say(text: str, stop: str = "stop") -> Script:
    def turn(call: ModelCall, out: OutputWriter) -> TurnResult:
        out.upstream_responding()
        message = out.message(item_id="msg_1")
        message.text(text)
        if stop == "stop":
            message.finish()
        return TurnResult(stop=stop, usage={"input_tokens": 3, "output_tokens": 2})  # type: ignore[arg-type]

    return turn


def _state(**request: Any) -> LoopState:
    return LoopState(
        response_id="resp_1",
        created_at=1,
        model="demo",
        request=request,
        upstream_input=[{"type": "message", "role": "user", "content": "hi"}],
    )


async def test_run_loop_text_emits_started_items_finished() -> None:
    sink = Recorder()
    state = await run_loop(_state(), LoopContext(ScriptAdapter(say("Hello")), "up"), sink)
    assert sink.types() == [
        "ResponseStarted",
        "UpstreamResponding",
        "ItemStarted",
        "PartStarted",
        "TextDelta",
        "PartFinished",
        "ItemFinished",
        "ResponseFinished",
    ]
    started = sink.events[0]
    assert isinstance(started, ResponseStarted)
    assert started.response["status"] == "in_progress" and started.response["output"] == []
    finished = sink.events[-1]
    assert isinstance(finished, ResponseFinished)
    assert finished.response["status"] == "completed"
    assert finished.response["output"][0]["content"][0]["text"] == "Hello"
    assert finished.response["usage"] == {
        "input_tokens": 3,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 5,
    }
    assert state.llm_calls == 1 and state.completed_at is not None


async def test_run_loop_length_closes_message_incomplete() -> None:
    sink = Recorder()
    state = await run_loop(_state(), LoopContext(ScriptAdapter(say("Hel", "length")), "up"), sink)
    response = state_response(sink)
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["output"][0]["status"] == "incomplete"
    assert state.completed_at is None


def state_response(sink: Recorder) -> dict[str, Any]:
    event = sink.events[-1]
    assert isinstance(event, ResponseFinished)
    return event.response


async def test_run_loop_upstream_429_fails_and_keeps_error_for_edge() -> None:
    def refuse(call: ModelCall, out: OutputWriter) -> TurnResult:
        raise UpstreamStatusError(429, "Rate limit reached", code="rate_limit_exceeded")

    sink = Recorder()
    ctx = LoopContext(ScriptAdapter(refuse), "up")
    await run_loop(_state(), ctx, sink)
    assert isinstance(ctx.failure, UpstreamStatusError) and ctx.failure.status_code == 429
    response = state_response(sink)
    assert response["status"] == "failed"
    assert response["error"] == {"code": "rate_limit_exceeded", "message": "Rate limit reached"}
    assert sink.types() == ["ResponseStarted", "ResponseFinished"]


async def test_run_loop_adapter_bug_fails_with_internal_error_and_closes_items() -> None:
    def crash(call: ModelCall, out: OutputWriter) -> TurnResult:
        out.message(item_id="msg_1").text("partial")
        raise KeyError("bug")

    sink = Recorder()
    ctx = LoopContext(ScriptAdapter(crash), "up")
    await run_loop(_state(), ctx, sink)
    assert isinstance(ctx.failure, InternalError)
    response = state_response(sink)
    assert response["status"] == "failed"
    assert response["output"][0]["status"] == "incomplete"
    assert response["error"]["code"] == "server_error"


async def test_step_one_action_at_a_time_resumes_from_json() -> None:
    sink = Recorder()
    state = _state()
    adapter = ScriptAdapter(say("Hello"))
    assert await step(state, LoopContext(adapter, "up"), sink) is False
    assert state.next_action == Finish("completed")
    resumed = LoopState.from_json(json.loads(json.dumps(state.to_json())))
    assert await step(resumed, LoopContext(adapter, "up"), sink) is True
    assert resumed.status == "completed"
    assert sink.types().count("ResponseStarted") == 1


def test_build_model_call_passes_only_what_the_client_set() -> None:
    state = _state(
        instructions="Be brief.",
        temperature=None,
        top_p=0.5,
        max_output_tokens=50,
        parallel_tool_calls=True,
        tool_choice="auto",
        reasoning={"effort": None, "summary": None},
        text={"format": {"type": "text"}},
        tools=[{"type": "function", "name": "f", "parameters": {}}],
    )
    call = build_model_call(state, LoopContext(ScriptAdapter(), "upstream-model"))
    assert call.model == "upstream-model"
    assert call.instructions == "Be brief."
    assert call.params == {"top_p": 0.5, "max_output_tokens": 50}
    assert call.tools == [{"type": "function", "name": "f", "parameters": {}}]
    assert call.tool_choice == "auto"
    assert call.input == [{"type": "message", "role": "user", "content": "hi"}]


def _parsed_state(**body: Any) -> LoopState:
    request = echo_fields(parse_create_request({"model": "m", "input": "hi", **body}))
    return _state(**request)


def test_forwarded_settings_unset_are_not_sent_though_the_response_shows_defaults() -> None:
    """What we forward: only what the client set (the Response shows OpenAI's effective values
    for the rest: tests/loop/test_render.py)."""
    call = build_model_call(_parsed_state(), LoopContext(ScriptAdapter(), "m"))
    assert call.params == {}


def test_forwarded_settings_set_are_sent_as_set() -> None:
    settings = {
        "temperature": 0.2,
        "top_p": 0.9,
        "top_logprobs": 3,
        "presence_penalty": 0.5,
        "frequency_penalty": -1.0,
        "max_tool_calls": 4,
    }
    call = build_model_call(_parsed_state(**settings), LoopContext(ScriptAdapter(), "m"))
    assert call.params == settings


def test_build_model_call_without_tools_sends_no_tool_choice() -> None:
    state = _state(
        tool_choice="required",
        parallel_tool_calls=False,
        reasoning={"effort": "high", "summary": None},
        text={"format": {"type": "json_object"}},
    )
    call = build_model_call(state, LoopContext(ScriptAdapter(), "m"))
    assert call.tools == [] and call.tool_choice is None
    assert call.params == {
        "reasoning": {"effort": "high"},
        "text": {"format": {"type": "json_object"}},
    }


def test_build_model_call_passes_the_clients_include() -> None:
    state = _state()
    state.include = ["reasoning.encrypted_content", "message.output_text.logprobs"]
    call = build_model_call(state, LoopContext(ScriptAdapter(), "m"))
    assert call.params == {
        "include": ["reasoning.encrypted_content", "message.output_text.logprobs"]
    }


async def test_run_loop_pauses_between_actions_and_a_later_run_finishes_it() -> None:
    asked: list[str] = []

    def pause(state: LoopState) -> bool:
        asked.append(type(state.next_action).__name__)
        return True

    sink = Recorder()
    ctx = LoopContext(ScriptAdapter(say("Hello")), "up")
    state = await run_loop(_state(), ctx, sink, pause=pause)
    assert (state.status, asked, state.next_action) == ("in_progress", ["Finish"], Finish())
    assert "ResponseFinished" not in sink.types()

    resumed = LoopState.from_json(json.loads(json.dumps(state.to_json())))
    await run_loop(resumed, ctx, sink, pause=pause)
    assert resumed.status == "completed"
    assert asked == ["Finish"]  # never asked after the last action
    assert sink.types()[-1] == "ResponseFinished"


class _Meter:
    """A context meter that lets every call through and keeps the calls it measured."""

    def __init__(self) -> None:
        self.measured: list[ModelCall] = []

    async def limits(self, call: ModelCall) -> Any:
        from responses_gateway.context.meter import ContextLimits

        return ContextLimits()

    async def measure(self, call: ModelCall, wire: str, limits: Any) -> None:
        self.measured.append(call)


async def test_run_loop_with_a_meter_calls_the_model_with_the_call_it_measured() -> None:
    adapter = ScriptAdapter(say("Hello"))
    meter = _Meter()
    ctx = LoopContext(adapter, "up", meter=meter)  # type: ignore[arg-type]
    await run_loop(_state(), ctx, Recorder())
    assert len(meter.measured) == 1
    assert adapter.calls[0] is meter.measured[0]  # built once, not again for the call
