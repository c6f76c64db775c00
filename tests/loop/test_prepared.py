"""prepare_input and model_transcript: canonical items, control items kept from the model."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

import pytest

from responses_gateway.errors import InvalidRequestError
from responses_gateway.loop import LoopState, prepare_input
from responses_gateway.loop.prepared import model_transcript


@pytest.fixture(autouse=True)
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    numbers = count(1)
    monkeypatch.setattr(
        "responses_gateway.loop.prepared.new_id", lambda prefix: f"{prefix}_{next(numbers)}"
    )
    yield


def test_prepare_input_string_becomes_user_message() -> None:
    prepared = prepare_input("hi")
    assert prepared.upstream_input == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
            "id": "msg_1",
        }
    ]
    assert prepared.items == prepared.upstream_input
    assert prepared.control_items == []


def test_prepare_input_typeless_messages_are_canonicalized() -> None:
    prepared = prepare_input(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    )
    assert prepared.upstream_input == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "q"}],
            "id": "msg_1",
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "a", "annotations": []}],
            "id": "msg_2",
        },
    ]


def test_prepare_input_control_items_are_split_off() -> None:
    approval = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    listing = {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "s", "tools": []}
    prepared = prepare_input([{"role": "user", "content": "q"}, listing, approval])
    assert prepared.control_items == [listing, {**approval, "id": "mcpa_2"}]
    assert [i["type"] for i in prepared.upstream_input] == ["message"]
    assert [i["id"] for i in prepared.items] == ["msg_1", "mcpl_1", "mcpa_2"]


def test_prepare_input_keeps_client_ids() -> None:
    prepared = prepare_input([{"type": "message", "id": "msg_mine", "role": "user", "content": []}])
    assert prepared.items[0]["id"] == "msg_mine"


def test_prepare_input_reference_to_context_item_is_dropped() -> None:
    prepared = prepare_input(
        [{"type": "item_reference", "id": "mcpr_9"}, {"id": "msg_8"}],
        context_ids=frozenset({"mcpr_9", "msg_8"}),
    )
    assert prepared.items == [] and prepared.upstream_input == []


def test_prepare_input_unresolvable_item_reference_is_400() -> None:
    with pytest.raises(InvalidRequestError) as info:
        prepare_input([{"role": "user", "content": "q"}, {"type": "item_reference", "id": "x"}])
    assert info.value.param == "input[1]"
    assert info.value.code == "item_not_found"


def test_model_transcript_lowers_mcp_calls_and_drops_control_items() -> None:
    state = LoopState(
        response_id="resp_1",
        created_at=1,
        model="m",
        request={},
        upstream_input=[{"type": "message", "role": "user", "content": "q"}],
    )
    state.output = [
        {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "s", "tools": []},
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "name": "add",
            "arguments": '{"a":1}',
            "output": "2",
            "error": None,
            "server_label": "s",
        },
        {
            "type": "mcp_call",
            "id": "mcp_2",
            "name": "div",
            "arguments": "{}",
            "output": None,
            "error": "division by zero",
            "server_label": "s",
        },
    ]
    assert model_transcript(state) == [
        {"type": "message", "role": "user", "content": "q"},
        {"type": "function_call", "call_id": "mcp_1", "name": "add", "arguments": '{"a":1}'},
        {"type": "function_call_output", "call_id": "mcp_1", "output": "2"},
        {"type": "function_call", "call_id": "mcp_2", "name": "div", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "mcp_2", "output": "division by zero"},
    ]
