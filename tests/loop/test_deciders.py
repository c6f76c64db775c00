"""decide_after_* on hand-built state: no I/O, no adapter."""

from __future__ import annotations

from typing import Any

from responses_gateway.loop import (
    NO_GATEWAY_TOOLS,
    CallLlm,
    ExecuteTools,
    Finish,
    InterruptForApproval,
    LoopState,
    decide_after_call_llm,
    decide_after_execute_tools,
)


class FakeTools:
    """Gateway owns `lookup` and `delete`; `delete` needs approval."""

    def model_tools(self) -> list[dict[str, Any]]:
        return []

    def is_gateway_owned(self, name: str) -> bool:
        return name in {"lookup", "delete"}

    def needs_approval(self, name: str) -> bool:
        return name == "delete"

    async def execute(self, call: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("not used")


def _state(output: list[dict[str, Any]], *, turn_start: int = 0, stop: str = "stop") -> LoopState:
    state = LoopState(response_id="resp_1", created_at=1, model="m", request={}, upstream_input=[])
    state.output = output
    state.turn_start = turn_start
    state.last_stop = stop  # type: ignore[assignment]
    return state


def _call(name: str) -> dict[str, Any]:
    return {"type": "function_call", "name": name, "arguments": "{}", "call_id": f"call_{name}"}


MESSAGE = {"type": "message", "role": "assistant", "content": []}


def test_decide_after_call_llm_text_only_finishes_completed() -> None:
    assert decide_after_call_llm(_state([MESSAGE]), NO_GATEWAY_TOOLS) == Finish("completed")


def test_decide_after_call_llm_length_finishes_incomplete_max_output_tokens() -> None:
    state = _state([MESSAGE], stop="length")
    assert decide_after_call_llm(state, NO_GATEWAY_TOOLS) == Finish(
        "incomplete", reason="max_output_tokens"
    )


def test_decide_after_call_llm_length_with_pending_gateway_call_still_incomplete() -> None:
    state = _state([_call("lookup")], stop="length")
    assert decide_after_call_llm(state, FakeTools()) == Finish(
        "incomplete", reason="max_output_tokens"
    )


def test_decide_after_call_llm_content_filter_finishes_incomplete() -> None:
    state = _state([MESSAGE], stop="content_filter")
    assert decide_after_call_llm(state, NO_GATEWAY_TOOLS) == Finish(
        "incomplete", reason="content_filter"
    )


def test_decide_after_call_llm_client_function_calls_finish_completed() -> None:
    state = _state([_call("get_weather"), _call("get_time")])
    assert decide_after_call_llm(state, FakeTools()) == Finish("completed")


def test_decide_after_call_llm_gateway_calls_execute_tools() -> None:
    state = _state([MESSAGE, _call("lookup"), _call("get_weather"), _call("lookup")])
    assert decide_after_call_llm(state, FakeTools()) == ExecuteTools((1, 3))


def test_decide_after_call_llm_call_needing_approval_interrupts() -> None:
    state = _state([_call("lookup"), _call("delete")])
    assert decide_after_call_llm(state, FakeTools()) == InterruptForApproval((1,))


def test_decide_after_call_llm_only_looks_at_the_latest_turn() -> None:
    state = _state([_call("lookup"), MESSAGE], turn_start=1)
    assert decide_after_call_llm(state, FakeTools()) == Finish("completed")


def test_decide_after_execute_tools_no_client_calls_calls_llm_again() -> None:
    state = _state([_call("lookup"), _call("lookup")])
    assert decide_after_execute_tools(state, FakeTools()) == CallLlm()


def test_decide_after_execute_tools_client_calls_in_turn_finish_completed() -> None:
    state = _state([_call("lookup"), _call("get_weather")])
    assert decide_after_execute_tools(state, FakeTools()) == Finish("completed")
