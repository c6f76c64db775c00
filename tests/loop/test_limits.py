"""The loop's bounds on hand-built state: caps, wall time, tool budget, no progress, a forced
``tool_choice`` spent once honoured, and the configuration of the limits."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.loop.limits import (
    LoopLimits,
    decide_within_limits,
    effective_tool_choice,
    no_progress,
    parse_loop_limits,
    tool_budget,
)
from responses_gateway.loop.state import (
    CallLlm,
    CallOwner,
    Compact,
    ExecuteTools,
    Finish,
    LoopState,
    Truncate,
)


def _state(request: dict[str, Any] | None = None, *, started_at: float = 1000.0) -> LoopState:
    state = LoopState(
        response_id="resp_1", created_at=1, model="m", request=request or {}, upstream_input=[]
    )
    state.started_at = started_at
    return state


def _mcp(label: str = "calc", name: str = "add", **fields: Any) -> dict[str, Any]:
    return {"type": "mcp_call", "id": "mcp_1", "server_label": label, "name": name, **fields}


def _with(state: LoopState, items: list[dict[str, Any]], owners: dict[int, CallOwner]) -> LoopState:
    state.output = items
    state.owners = owners
    return state


# -- decide_within_limits -------------------------------------------------------------------


def test_decide_within_limits_model_call_under_the_cap_runs() -> None:
    state = _state()
    state.llm_calls = 2
    assert decide_within_limits(state, CallLlm(), LoopLimits(max_model_calls=3), 1000.0) == (
        CallLlm()
    )


def test_decide_within_limits_model_call_at_the_cap_ends_incomplete() -> None:
    state = _state()
    state.llm_calls = 3
    limits = LoopLimits(max_model_calls=3)
    for action in (CallLlm(), Compact("threshold")):  # a compaction is a model call too
        assert decide_within_limits(state, action, limits, 1000.0) == Finish(
            "incomplete", reason="max_model_calls"
        )


def test_decide_within_limits_other_actions_run_at_the_model_call_cap() -> None:
    state = _state()
    state.llm_calls = 3
    limits = LoopLimits(max_model_calls=3)
    for action in (ExecuteTools((0,)), Truncate(1)):
        assert decide_within_limits(state, action, limits, 1000.0) == action


def test_decide_within_limits_past_the_wall_time_nothing_runs_but_the_ending() -> None:
    state = _state(started_at=1000.0)
    limits = LoopLimits(max_loop_seconds=60)
    for action in (CallLlm(), ExecuteTools((0,)), Truncate(1)):
        assert decide_within_limits(state, action, limits, 1059.9) == action
        assert decide_within_limits(state, action, limits, 1060.0) == Finish(
            "incomplete", reason="max_loop_seconds"
        )
    ending = Finish("completed")
    assert decide_within_limits(state, ending, limits, 9999.0) == ending


def test_decide_within_limits_a_loop_not_yet_begun_has_its_whole_wall_time() -> None:
    state = _state()
    state.started_at = None
    assert decide_within_limits(state, CallLlm(), LoopLimits(max_loop_seconds=1), 1e9) == (
        CallLlm()
    )


# -- tool_budget ----------------------------------------------------------------------------


def test_tool_budget_is_the_operators_cap_lowered_by_the_request() -> None:
    limits = LoopLimits(max_tool_calls=5)
    assert tool_budget(_state(), limits) == 5
    assert tool_budget(_state({"max_tool_calls": 2}), limits) == 2
    assert tool_budget(_state({"max_tool_calls": 50}), limits) == 5


# -- no_progress ------------------------------------------------------------------------------


def _round(n: int, result: str, arguments: str = "{}") -> list[dict[str, Any]]:
    return [
        {"type": "message", "id": f"msg_{n}", "role": "assistant", "content": []},
        _mcp(id=f"mcp_{n}", arguments=arguments, output=result, status="completed"),
    ]


def test_no_progress_needs_two_rounds() -> None:
    state = _with(_state(), _round(1, "5"), {1: "mcp"})
    state.turns = [0]
    assert not no_progress(state)


def test_no_progress_identical_rounds_but_their_ids_repeat_themselves() -> None:
    state = _with(_state(), [*_round(1, "5"), *_round(2, "5")], {1: "mcp", 3: "mcp"})
    state.turns = [0, 2]
    assert no_progress(state)


@pytest.mark.parametrize(("result", "arguments"), [("6", "{}"), ("5", '{"a": 1}')])
def test_no_progress_another_result_or_other_arguments_is_progress(
    result: str, arguments: str
) -> None:
    items = [*_round(1, "5"), *_round(2, result, arguments)]
    state = _with(_state(), items, {1: "mcp", 3: "mcp"})
    state.turns = [0, 2]
    assert not no_progress(state)


def test_no_progress_a_round_without_gateway_calls_is_never_a_repeat() -> None:
    message = {"type": "message", "role": "assistant", "content": []}
    state = _with(_state(), [message, dict(message)], {})
    state.turns = [0, 1]
    assert not no_progress(state)


# -- effective_tool_choice ------------------------------------------------------------------


@pytest.mark.parametrize(
    "choice",
    [
        "required",
        {"type": "mcp", "server_label": "calc", "name": "add"},
        {"type": "mcp", "server_label": "calc"},
    ],
)
def test_effective_tool_choice_forced_is_spent_once_a_gateway_call_honoured_it(
    choice: Any,
) -> None:
    state = _state({"tool_choice": choice})
    assert effective_tool_choice(state) == choice
    _with(state, [_mcp(status="completed")], {0: "mcp"})
    assert effective_tool_choice(state) == "auto"


def test_effective_tool_choice_another_tools_call_does_not_spend_a_named_choice() -> None:
    choice = {"type": "mcp", "server_label": "calc", "name": "add"}
    state = _with(_state({"tool_choice": choice}), [_mcp(name="mul")], {0: "mcp"})
    assert effective_tool_choice(state) == choice
    _with(state, [_mcp(label="other")], {0: "mcp"})
    assert effective_tool_choice(state) == choice


def test_effective_tool_choice_an_upstreams_call_does_not_spend_it() -> None:
    state = _with(_state({"tool_choice": "required"}), [_mcp()], {0: "upstream"})
    assert effective_tool_choice(state) == "required"


def test_effective_tool_choice_backed_hosted_choice_is_spent_by_its_kinds_call() -> None:
    search = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    state = _with(_state({"tool_choice": {"type": "web_search"}}), [search], {0: "backend"})
    assert effective_tool_choice(state) == "auto"
    state.request["tool_choice"] = {"type": "file_search"}
    assert effective_tool_choice(state) == {"type": "file_search"}


def test_effective_tool_choice_allowed_tools_required_becomes_auto_keeping_its_list() -> None:
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "mcp"}]}
    state = _with(_state({"tool_choice": choice}), [_mcp()], {0: "mcp"})
    assert effective_tool_choice(state) == {**choice, "mode": "auto"}


@pytest.mark.parametrize(
    "choice", [None, "auto", "none", {"type": "allowed_tools", "mode": "auto", "tools": []}]
)
def test_effective_tool_choice_unforced_choices_pass_unchanged(choice: Any) -> None:
    state = _with(_state({"tool_choice": choice}), [_mcp()], {0: "mcp"})
    assert effective_tool_choice(state) == choice


# -- parse_loop_limits ----------------------------------------------------------------------


def test_parse_loop_limits_sets_what_the_table_names_on_its_base() -> None:
    base = LoopLimits(max_model_calls=10, max_tool_calls=4, max_loop_seconds=30.0)
    assert parse_loop_limits({}, "provider 'p'", base) is base
    assert parse_loop_limits({"max_model_calls": 3, "max_loop_seconds": 1.5}, "p", base) == (
        LoopLimits(max_model_calls=3, max_tool_calls=4, max_loop_seconds=1.5)
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_model_calls", 0),
        ("max_model_calls", 2.5),
        ("max_tool_calls", True),
        ("max_tool_calls", "3"),
        ("max_loop_seconds", -1),
        ("max_loop_seconds", "60"),
    ],
)
def test_parse_loop_limits_refuses_what_is_not_a_positive_number(key: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"provider 'p': {key} must be a positive"):
        parse_loop_limits({key: value}, "provider 'p'", LoopLimits())


def test_every_reason_the_limits_end_a_response_with_is_a_named_gateway_reason() -> None:
    from responses_gateway.loop.limits import MAX_LOOP_SECONDS, MAX_MODEL_CALLS, NO_PROGRESS
    from responses_gateway.protocol.contract import GATEWAY_INCOMPLETE_REASONS

    assert {MAX_MODEL_CALLS, MAX_LOOP_SECONDS, NO_PROGRESS} <= set(GATEWAY_INCOMPLETE_REASONS)
