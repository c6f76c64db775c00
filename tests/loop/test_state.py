"""LoopState: JSON round trip, schema versioning, actions, usage accumulation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.loop import (
    CallLlm,
    ExecuteTools,
    Finish,
    InterruptForApproval,
    LoopState,
    NextAction,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"
FIXTURE = FIXTURES / "loop_state_v2.json"


def _roundtrip(state: LoopState) -> LoopState:
    return LoopState.from_json(json.loads(json.dumps(state.to_json())))


def test_from_json_frozen_v2_fixture_round_trips_exactly() -> None:
    data = json.loads(FIXTURE.read_text())
    state = LoopState.from_json(data)
    assert state.next_action == ExecuteTools((1,))
    assert state.include == ["reasoning.encrypted_content"]
    assert state.to_json() == data


def test_from_json_frozen_v1_fixture_upgrades_to_v2() -> None:
    v1 = json.loads((FIXTURES / "loop_state_v1.json").read_text())
    state = LoopState.from_json(v1)
    assert state.schema_version == 2 and state.include == []
    assert state.to_json() == {**v1, "schema_version": 2, "include": []}


@pytest.mark.parametrize(
    "action",
    [
        CallLlm(),
        ExecuteTools((0, 2)),
        InterruptForApproval((3,)),
        Finish("completed"),
        Finish("incomplete", reason="max_output_tokens"),
        Finish("failed", error={"code": "server_error", "message": "boom"}),
    ],
)
def test_to_json_every_action_round_trips(action: NextAction) -> None:
    state = LoopState(response_id="resp_x", created_at=1, model="m", request={}, upstream_input=[])
    state.set_next_action(action)
    assert _roundtrip(state).next_action == action
    assert _roundtrip(state).to_json() == state.to_json()


def test_from_json_unknown_schema_version_is_rejected() -> None:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    data["schema_version"] = 99
    with pytest.raises(ValueError, match="schema version 99"):
        LoopState.from_json(data)


def test_take_next_action_leaves_finish_behind() -> None:
    state = LoopState(response_id="resp_x", created_at=1, model="m", request={}, upstream_input=[])
    assert state.take_next_action() == CallLlm()
    assert state.next_action == Finish()


def test_add_usage_sums_calls_and_details() -> None:
    state = LoopState(response_id="resp_x", created_at=1, model="m", request={}, upstream_input=[])
    state.add_usage(None)
    assert state.usage is None
    state.add_usage(
        {
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "output_tokens_details": {"reasoning_tokens": 2},
        }
    )
    state.add_usage(
        {
            "input_tokens": 20,
            "output_tokens": 1,
            "total_tokens": 21,
            "input_tokens_details": {"cached_tokens": 8},
        }
    )
    assert state.usage == {
        "input_tokens": 30,
        "output_tokens": 6,
        "total_tokens": 36,
        "input_tokens_details": {"cached_tokens": 8},
        "output_tokens_details": {"reasoning_tokens": 2},
    }
