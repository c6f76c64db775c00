"""prepare_input and model_transcript: canonical items, control items kept from the model."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

import pytest

from responses_gateway.errors import InvalidRequestError
from responses_gateway.loop import LoopState, prepare_input
from responses_gateway.loop.prepared import (
    check_call_outputs,
    model_transcript,
    plan_approvals,
    to_model_items,
)


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
        {"type": "function_call", "call_id": "mcp_1", "name": "s__add", "arguments": '{"a":1}'},
        {"type": "function_call_output", "call_id": "mcp_1", "output": "2"},
        {"type": "function_call", "call_id": "mcp_2", "name": "s__div", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "mcp_2", "output": "division by zero"},
    ]


REQUEST = {
    "type": "mcp_approval_request",
    "id": "mcpr_1",
    "server_label": "calc",
    "name": "add",
    "arguments": '{"a":1}',
}


def test_to_model_items_denied_approval_tells_the_model_why() -> None:
    denial = {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_1",
        "approve": False,
        "reason": "too risky",
    }
    assert to_model_items([REQUEST, denial, dict(denial)]) == [
        {"type": "function_call", "call_id": "mcpr_1", "name": "calc__add", "arguments": '{"a":1}'},
        {
            "type": "function_call_output",
            "call_id": "mcpr_1",
            "output": "The user denied this tool call. Reason: too risky",
        },
    ]


def test_to_model_items_approved_request_shows_only_through_its_mcp_call() -> None:
    approval = {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    call = {
        "type": "mcp_call",
        "id": "mcp_9",
        "server_label": "calc",
        "name": "add",
        "arguments": '{"a":1}',
        "output": "1",
        "error": None,
        "approval_request_id": "mcpr_1",
    }
    assert [i["type"] for i in to_model_items([REQUEST, approval, call])] == [
        "function_call",
        "function_call_output",
    ]


def test_to_model_items_error_objects_become_their_text() -> None:
    call = {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "s",
        "name": "t",
        "arguments": "{}",
        "output": None,
        "error": {
            "type": "mcp_tool_execution_error",
            "content": [{"type": "text", "text": "division by zero"}],
        },
    }
    assert to_model_items([call])[1]["output"] == "division by zero"


def _answer(approve: bool, request_id: str = "mcpr_1") -> dict[str, object]:
    return {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": approve}


def test_plan_approvals_previous_response_form_approves_once() -> None:
    assert plan_approvals([REQUEST], [_answer(True), _answer(True)]) == ("mcpr_1",)


def test_plan_approvals_replayed_history_form() -> None:
    assert plan_approvals([], [REQUEST, _answer(True)]) == ("mcpr_1",)


def test_plan_approvals_denied_runs_nothing() -> None:
    assert plan_approvals([REQUEST], [_answer(False)]) == ()


def test_plan_approvals_already_executed_request_is_not_rerun() -> None:
    executed = {"type": "mcp_call", "id": "mcp_1", "approval_request_id": "mcpr_1"}
    assert plan_approvals([REQUEST, _answer(True), executed], [_answer(True)]) == ()


def test_plan_approvals_unknown_request_is_400() -> None:
    with pytest.raises(InvalidRequestError) as info:
        plan_approvals([REQUEST], [{"role": "user"}, _answer(True, "mcpr_forged")])
    assert info.value.param == "input[1].approval_request_id"
    assert info.value.message == "No approval request with id 'mcpr_forged' was found."


# -- check_call_outputs: a tool output answers a call of the transcript, on every wire ---------


def _call(call_id: str, kind: str = "function_call") -> dict[str, object]:
    return {"type": kind, "call_id": call_id, "name": "f", "arguments": "{}"}


def _output(call_id: str, kind: str = "function_call_output") -> dict[str, object]:
    return {"type": kind, "call_id": call_id, "output": "ok"}


@pytest.mark.parametrize(
    "items",
    [
        [_call("c1"), _output("c1")],
        [_output("c1"), _call("c1")],  # placed after its call by the chat wire, as before
        [_call("c1", "custom_tool_call"), _output("c1", "custom_tool_call_output")],
        [{"type": "function_call_output", "output": "no call id"}],
        [{"type": "compaction", "encrypted_content": "x"}, _output("hidden")],
        [{"role": "user", "content": "hi"}],
    ],
    ids=["answered", "call-later", "custom", "no-call-id", "after-compaction", "no-outputs"],
)
def test_check_call_outputs_accepts_outputs_with_their_calls(
    items: list[dict[str, object]],
) -> None:
    check_call_outputs(items)


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            [_call("c1"), _output("c2")],
            "No function call found for function_call_output with call_id 'c2'.",
        ),
        (
            [_output("c1", "custom_tool_call_output")],
            "No tool call found for custom_tool_call_output with call_id 'c1'.",
        ),
        (
            [_output("c1"), _output("c1")],  # an output is no call
            "No function call found for function_call_output with call_id 'c1'.",
        ),
    ],
)
def test_check_call_outputs_refuses_an_output_answering_no_call(
    items: list[dict[str, object]], message: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        check_call_outputs(items)
    assert (caught.value.message, caught.value.param, caught.value.status_code) == (
        message,
        "input",
        400,
    )
