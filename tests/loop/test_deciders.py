"""decide_* on hand-built state: no I/O, no adapter."""

from __future__ import annotations

from typing import Any

from responses_gateway.loop import (
    CallLlm,
    ExecuteTools,
    Finish,
    InterruptForApproval,
    LoopState,
    decide_after_call_llm,
    decide_after_execute_tools,
)
from responses_gateway.loop.driver import decide_start
from responses_gateway.loop.limits import LoopLimits
from responses_gateway.loop.state import CallOwner


def _state(
    output: list[dict[str, Any]],
    *,
    turn_start: int = 0,
    stop: str = "stop",
    owners: dict[int, CallOwner] | None = None,
) -> LoopState:
    state = LoopState(response_id="resp_1", created_at=1, model="m", request={}, upstream_input=[])
    state.output = output
    state.turn_start = turn_start
    state.last_stop = stop  # type: ignore[assignment]
    state.owners = dict(owners or {})
    return state


def _call(name: str) -> dict[str, Any]:
    return {"type": "function_call", "name": name, "arguments": "{}", "call_id": f"call_{name}"}


def _mcp(status: str = "in_progress") -> dict[str, Any]:
    return {"type": "mcp_call", "id": "mcp_1", "server_label": "s", "name": "t", "status": status}


APPROVAL = {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "s", "name": "t"}
MESSAGE = {"type": "message", "role": "assistant", "content": []}


def test_decide_after_call_llm_text_only_finishes_completed() -> None:
    assert decide_after_call_llm(_state([MESSAGE])) == Finish("completed")


def test_decide_after_call_llm_length_finishes_incomplete_max_output_tokens() -> None:
    assert decide_after_call_llm(_state([MESSAGE], stop="length")) == Finish(
        "incomplete", reason="max_output_tokens"
    )


def test_decide_after_call_llm_length_with_pending_gateway_call_runs_nothing() -> None:
    assert decide_after_call_llm(_state([_mcp()], stop="length", owners={0: "mcp"})) == Finish(
        "incomplete", reason="max_output_tokens"
    )


def test_decide_after_call_llm_content_filter_finishes_incomplete() -> None:
    assert decide_after_call_llm(_state([MESSAGE], stop="content_filter")) == Finish(
        "incomplete", reason="content_filter"
    )


def test_decide_after_call_llm_client_function_calls_finish_completed() -> None:
    state = _state([_call("get_weather"), _call("get_time")], owners={0: "client", 1: "client"})
    assert decide_after_call_llm(state) == Finish("completed")


def test_decide_after_call_llm_announced_gateway_calls_execute() -> None:
    owners: dict[int, CallOwner] = {1: "mcp", 2: "client", 3: "mcp"}
    state = _state([MESSAGE, _mcp(), _call("get_weather"), _mcp()], owners=owners)
    assert decide_after_call_llm(state) == ExecuteTools((1, 3))


def test_decide_after_call_llm_an_upstreams_call_never_runs_whatever_its_status() -> None:
    for status in ("in_progress", "completed", "calling", "failed"):
        state = _state([_mcp(status), MESSAGE], owners={0: "upstream"})
        assert decide_after_call_llm(state) == Finish("completed")


def test_decide_after_call_llm_gateway_calls_run_before_approvals_interrupt() -> None:
    assert decide_after_call_llm(_state([_mcp(), APPROVAL], owners={0: "mcp"})) == ExecuteTools(
        (0,)
    )


def test_decide_after_call_llm_gateway_calls_with_no_model_call_left_end_incomplete() -> None:
    state = _state([_mcp()], owners={0: "mcp"})
    state.llm_calls = 3

    assert decide_after_call_llm(state, LoopLimits(max_model_calls=3)) == Finish(
        "incomplete", reason="max_model_calls"
    )
    assert decide_after_call_llm(state, LoopLimits(max_model_calls=4)) == ExecuteTools((0,))


def test_decide_after_call_llm_approval_request_interrupts() -> None:
    assert decide_after_call_llm(_state([MESSAGE, APPROVAL])) == InterruptForApproval((1,))


def test_decide_after_call_llm_only_looks_at_the_latest_turn() -> None:
    assert decide_after_call_llm(_state([_mcp(), APPROVAL, MESSAGE], turn_start=2)) == Finish(
        "completed"
    )


def test_decide_after_execute_tools_no_client_calls_calls_llm_again() -> None:
    assert decide_after_execute_tools(_state([_mcp("completed")])) == CallLlm()


def test_decide_after_execute_tools_client_calls_in_turn_finish_completed() -> None:
    state = _state([_mcp("completed"), _call("get_weather")], owners={0: "mcp", 1: "client"})
    assert decide_after_execute_tools(state) == Finish("completed")


def test_decide_after_execute_tools_approvals_in_turn_interrupt() -> None:
    state = _state([_mcp("completed"), APPROVAL, _call("f")])
    assert decide_after_execute_tools(state) == InterruptForApproval((1,))


def test_decide_start_without_approvals_calls_llm() -> None:
    assert decide_start(()) == CallLlm()


def test_decide_start_with_approvals_executes_them_first() -> None:
    assert decide_start(("mcpr_1", "mcpr_2")) == ExecuteTools(approved=("mcpr_1", "mcpr_2"))


SERVER_SEARCH = {
    "type": "tool_search_call",
    "id": "tsc_1",
    "call_id": "call_ts",
    "arguments": {"query": "x"},
    "execution": "server",
    "status": "in_progress",
}


def test_decide_after_call_llm_gateway_run_tool_calls_execute_next() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "status": "in_progress", "action": {}}

    state = _state([SERVER_SEARCH, search], owners={0: "search", 1: "backend"})
    assert decide_after_call_llm(state) == ExecuteTools((0, 1))


def test_decide_after_call_llm_every_backed_hosted_call_executes_next() -> None:
    calls = [
        {"type": kind, "id": f"h_{i}", "status": "in_progress"}
        for i, kind in enumerate(
            ["file_search_call", "code_interpreter_call", "image_generation_call"]
        )
    ]
    finished = {"type": "file_search_call", "id": "h_9", "status": "completed"}
    owners: dict[int, CallOwner] = {0: "backend", 1: "backend", 2: "backend", 3: "upstream"}

    assert decide_after_call_llm(_state([*calls, finished], owners=owners)) == ExecuteTools(
        (0, 1, 2)
    )
    assert decide_after_execute_tools(_state([finished], owners={0: "backend"})) == CallLlm()


def test_decide_after_call_llm_relayed_hosted_calls_left_in_progress_finish_completed() -> None:
    calls = [
        {"type": kind, "id": f"h_{i}", "status": "in_progress"}
        for i, kind in enumerate(
            [
                "web_search_call",
                "file_search_call",
                "code_interpreter_call",
                "image_generation_call",
                "tool_search_call",
            ]
        )
    ]
    owners: dict[int, CallOwner] = dict.fromkeys(range(len(calls)), "upstream")

    assert decide_after_call_llm(_state([*calls, MESSAGE], owners=owners)) == Finish("completed")


def test_decide_after_call_llm_client_tool_search_and_custom_calls_finish() -> None:
    client = {**SERVER_SEARCH, "execution": "client", "status": "completed"}
    custom = {"type": "custom_tool_call", "call_id": "c", "name": "x", "input": ""}

    assert decide_after_call_llm(_state([client, custom])) == Finish("completed")


def test_decide_after_execute_tools_server_search_answered_calls_the_model_again() -> None:
    answered = [{**SERVER_SEARCH, "status": "completed"}, {"type": "tool_search_output"}]

    assert decide_after_execute_tools(_state(answered)) == CallLlm()


def test_decide_after_execute_tools_returns_lowered_client_calls_to_the_client() -> None:
    shell = {"type": "shell_call", "call_id": "c", "action": {}, "status": "completed"}

    state = _state([_mcp("completed"), shell], owners={0: "mcp", 1: "client"})
    assert decide_after_execute_tools(state) == Finish("completed")


def _round(output: int, result: str) -> list[dict[str, Any]]:
    return [
        {"type": "reasoning", "id": f"rs_{output}", "summary": [], "encrypted_content": "x"},
        {**_mcp("completed"), "id": f"mcp_{output}", "arguments": '{"a": 2}', "output": result},
    ]


def test_decide_after_execute_tools_a_round_repeating_the_last_one_ends_no_progress() -> None:
    state = _state([*_round(1, "5"), *_round(2, "5")], turn_start=2)
    state.turns = [0, 2]
    state.owners = {1: "mcp", 3: "mcp"}

    assert decide_after_execute_tools(state) == Finish("incomplete", reason="no_progress")


def test_decide_after_execute_tools_a_round_with_another_result_calls_the_model() -> None:
    state = _state([*_round(1, "5"), *_round(2, "6")], turn_start=2)
    state.turns = [0, 2]
    state.owners = {1: "mcp", 3: "mcp"}

    assert decide_after_execute_tools(state) == CallLlm()


# -- context: compaction and truncation before a model call -----------------------------------

from responses_gateway.context.meter import ContextLimits  # noqa: E402
from responses_gateway.context.tokens import TokenCount  # noqa: E402
from responses_gateway.loop.driver import (  # noqa: E402
    decide_after_compact,
    decide_before_call_llm,
)
from responses_gateway.loop.state import Compact, Truncate  # noqa: E402


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def _transcript_state() -> LoopState:
    state = _state([])
    state.upstream_input = [_user("x " * 200), _user("y " * 200), _user("latest")]
    return state


def test_decide_before_call_llm_unmeasured_calls_now() -> None:
    assert decide_before_call_llm(_transcript_state(), ContextLimits(window=10), None) is None


def test_decide_before_call_llm_over_threshold_compacts() -> None:
    limits = ContextLimits(window=1000, compact_threshold=300)
    action = decide_before_call_llm(_transcript_state(), limits, TokenCount(400, "upstream"))
    assert action == Compact("threshold")


def test_decide_before_call_llm_just_compacted_never_compacts_twice() -> None:
    state = _transcript_state()
    state.output = [{"type": "compaction", "id": "cmp_1", "encrypted_content": "x"}]
    limits = ContextLimits(window=1000, compact_threshold=300)
    assert decide_before_call_llm(state, limits, TokenCount(400, "upstream")) is None


def test_decide_before_call_llm_over_window_disabled_fails_context_length() -> None:
    action = decide_before_call_llm(
        _transcript_state(), ContextLimits(window=300), TokenCount(301, "upstream")
    )
    assert isinstance(action, Finish) and action.outcome == "failed"
    assert action.error is not None and action.error["code"] == "context_length_exceeded"


def test_decide_before_call_llm_reserve_counts_against_the_window() -> None:
    limits = ContextLimits(window=300, reserve=100)
    action = decide_before_call_llm(_transcript_state(), limits, TokenCount(250, "o200k"))
    assert isinstance(action, Finish) and action.outcome == "failed"


def test_decide_before_call_llm_over_window_auto_truncates_oldest() -> None:
    limits = ContextLimits(window=250, truncation="auto")
    action = decide_before_call_llm(_transcript_state(), limits, TokenCount(400, "upstream"))
    assert action == Truncate(1)


def test_decide_before_call_llm_auto_with_nothing_left_to_drop_fails() -> None:
    state = _state([])
    state.upstream_input = [_user("only " * 400)]
    limits = ContextLimits(window=100, truncation="auto")
    action = decide_before_call_llm(state, limits, TokenCount(400, "upstream"))
    assert isinstance(action, Finish) and action.outcome == "failed"


def test_decide_start_compaction_trigger_last_compacts_for_the_client() -> None:
    assert decide_start((), [_user("hi"), {"type": "compaction_trigger"}]) == Compact("client")
    assert decide_start((), [{"type": "compaction_trigger"}, _user("hi")]) == CallLlm()


def test_decide_after_compact_client_trigger_finishes_threshold_calls_model() -> None:
    assert decide_after_compact(_state([]), Compact("client")) == Finish("completed")
    assert decide_after_compact(_state([]), Compact("threshold")) == CallLlm()


def test_decide_within_budget_without_a_budget_calls_the_model() -> None:
    from responses_gateway.loop.driver import decide_within_budget
    from responses_gateway.usage.budget import BudgetStatus

    assert decide_within_budget(_state([]), None) == CallLlm()
    assert decide_within_budget(_state([]), BudgetStatus()) == CallLlm()


def test_decide_within_budget_spent_budget_finishes_incomplete() -> None:
    from responses_gateway.loop.driver import decide_within_budget
    from responses_gateway.usage.budget import BudgetStatus

    action = decide_within_budget(_state([MESSAGE]), BudgetStatus("daily_tokens"))
    assert action == Finish("incomplete", reason="budget_exceeded")
