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
FIXTURE = FIXTURES / "loop_state_v3.json"


def _roundtrip(state: LoopState) -> LoopState:
    return LoopState.from_json(json.loads(json.dumps(state.to_json())))


def test_from_json_frozen_v3_fixture_round_trips_exactly() -> None:
    data = json.loads(FIXTURE.read_text())
    state = LoopState.from_json(data)
    assert state.next_action == ExecuteTools((2,))
    assert state.owners == {1: "client", 2: "mcp", 3: "upstream"}
    assert state.turns == [0, 2] and state.started_at == 1767225601.5
    assert state.passthrough == {"prompt_cache_retention": "24h"}
    assert state.to_json() == data


def test_from_json_frozen_v2_fixture_upgrades_to_v3_with_owners_from_item_types() -> None:
    v2 = json.loads((FIXTURES / "loop_state_v2.json").read_text())
    state = LoopState.from_json(v2)
    assert state.schema_version == 3
    assert state.owners == {1: "client"}  # its function_call; the reasoning is no call
    assert state.turns == [0] and state.started_at is None and state.passthrough == {}
    assert state.to_json() == {
        **v2,
        "schema_version": 3,
        "passthrough": {},
        "owners": {"1": "client"},
        "turns": [0],
        "started_at": None,
    }


def test_from_json_v2_pending_hosted_call_is_the_backends_and_a_finished_one_the_upstreams() -> (
    None
):
    v2 = json.loads((FIXTURES / "loop_state_v2.json").read_text())
    v2["output"] = [
        {"id": "ws_1", "type": "web_search_call", "status": "completed"},
        {"id": "ws_2", "type": "web_search_call", "status": "in_progress"},
        {"id": "mcp_1", "type": "mcp_call", "status": "in_progress"},
    ]
    v2["next_action"] = {"kind": "execute_tools", "output_indexes": [1, 2]}
    state = LoopState.from_json(v2)
    assert state.owners == {0: "upstream", 1: "backend", 2: "mcp"}


def test_from_json_frozen_v1_fixture_upgrades_to_v3() -> None:
    v1 = json.loads((FIXTURES / "loop_state_v1.json").read_text())
    state = LoopState.from_json(v1)
    assert state.schema_version == 3 and state.include == []
    assert state.to_json() == {
        **v1,
        "schema_version": 3,
        "include": [],
        "passthrough": {},
        "owners": {"1": "client"},
        "turns": [0],
        "started_at": None,
    }


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
