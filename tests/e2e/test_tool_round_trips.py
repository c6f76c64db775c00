"""Every tool item type round-trips to the model on the next turn, in all three forms.

For each kind the model calls its lowered function (chat and harmony), the client answers with
the kind's output item, and the next turn goes through ``previous_response_id``, a
conversation, or the whole history sent back. The follow-up's upstream payload must show the
call under its exposed name with the same arguments and the answer as its tool result, and the
follow-up's stored input items must be exactly what the client sent. (Hosted kinds run by
backends: see ``test_hosted_backends.py``.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from responses_gateway.adapters.responses_api import _STATUS_KEPT as STATUS_KEPT
from responses_gateway.protocol.resources import stored_item
from responses_gateway.testing import hosted
from responses_gateway.testing.harmony import read_prompt
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn

from .conftest import MODELS

NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents.",
    "tools": [
        {
            "type": "function",
            "name": "close_agent",
            "description": "Close an agent.",
            "parameters": {
                "type": "object",
                "properties": {"target": {"type": "string"}},
                "required": ["target"],
            },
        }
    ],
}
SHELL_OUTPUT = [{"stdout": "a\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
SCREENSHOT = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="}


@dataclass(frozen=True)
class Kind:
    tools: list[dict[str, Any]]
    exposed: str
    arguments: dict[str, Any]
    """The model's call."""
    item_type: str
    answer: dict[str, Any]
    """The client's output item (``call_id`` added by the test)."""
    seen: str
    """The tool result the model reads on the next turn."""
    replayed: dict[str, Any] | None = None
    """The call's arguments on the next turn, when they differ from the model's."""


KINDS: dict[str, Kind] = {
    "function_call+namespace": Kind(
        [NAMESPACE],
        "multi_agent_v1__close_agent",
        {"target": "a"},
        "function_call",
        {"type": "function_call_output", "output": "closed"},
        "closed",
    ),
    "custom_tool_call": Kind(
        [{"type": "custom", "name": "run", "description": "Run it."}],
        "run",
        {"input": "hello"},
        "custom_tool_call",
        {"type": "custom_tool_call_output", "output": "ran"},
        "ran",
    ),
    "shell_call": Kind(
        [{"type": "shell"}],
        "shell",
        {"commands": ["ls"]},
        "shell_call",
        {"type": "shell_call_output", "output": SHELL_OUTPUT},
        json.dumps(SHELL_OUTPUT),
    ),
    "local_shell_call": Kind(
        [{"type": "local_shell"}],
        "local_shell",
        {"command": ["ls"]},
        "local_shell_call",
        {"type": "local_shell_call_output", "output": "a\n"},
        "a\n",
        replayed={"command": ["ls"], "env": {}},
    ),
    "apply_patch_call": Kind(
        [{"type": "apply_patch"}],
        "apply_patch",
        {"type": "create_file", "path": "a.txt", "diff": "+hi"},
        "apply_patch_call",
        {"type": "apply_patch_call_output", "status": "completed", "output": "done"},
        "completed: done",
    ),
    "computer_call": Kind(
        [
            {
                "type": "computer_use_preview",
                "display_width": 8,
                "display_height": 8,
                "environment": "linux",
            }
        ],  # fmt: skip
        "computer",
        {"action": {"type": "screenshot"}},
        "computer_call",
        {"type": "computer_call_output", "output": SCREENSHOT},
        json.dumps(SCREENSHOT),
    ),
    "tool_search_call": Kind(
        [{"type": "tool_search", "execution": "client"}],
        "tool_search",
        {"query": "agent"},
        "tool_search_call",
        {
            "type": "tool_search_output",
            "execution": "client",
            "status": "completed",
            "tools": [NAMESPACE],
        },  # fmt: skip
        "Loaded tools: multi_agent_v1",
    ),
}
FORMS = ["previous_response_id", "conversation", "history"]
STORED_GO = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
"""The user's ``"go"`` as stored (string content normalized to parts)."""


def _transcript(payload: dict[str, Any]) -> list[dict[str, Any]]:
    if "messages" in payload:
        return list(payload["messages"])
    prompt = read_prompt(payload)
    assert prompt is not None
    return list(prompt.chat_view["messages"])


def _input_items(http: httpx.Client, response_id: str) -> list[dict[str, Any]]:
    listed = http.get(f"/responses/{response_id}/input_items", params={"order": "asc"})
    assert listed.status_code == 200, listed.text
    return list(listed.json()["data"])


def _without_id(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "id"}


def _as_input(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k not in ("id", "status")}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("wire", ["chat", "harmony"])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_tool_items_round_trip_to_the_next_turn(
    http: httpx.Client, upstream: ScriptedUpstream, name: str, wire: str, form: str
) -> None:
    kind = KINDS[name]
    model = MODELS[wire]
    conversation = http.post("/conversations", json={}).json()["id"]
    first_body: dict[str, Any] = {"model": model, "input": "go", "tools": kind.tools}
    if form == "conversation":
        first_body["conversation"] = conversation
    upstream.push(Turn(tool_calls=[ToolCall(kind.exposed, json.dumps(kind.arguments), "call_1")]))
    first = http.post("/responses", json=first_body).json()
    assert first["status"] == "completed", first
    (call,) = first["output"]
    assert call["type"] == kind.item_type
    call_id = call["call_id"]
    answer = {**kind.answer, "call_id": call_id}

    follow: dict[str, Any] = {"model": model, "tools": kind.tools}
    if form == "previous_response_id":
        follow |= {"previous_response_id": first["id"], "input": [answer]}
    elif form == "conversation":
        follow |= {"conversation": conversation, "input": [answer]}
    else:
        follow["input"] = [{"type": "message", "role": "user", "content": "go"}, call, answer]
    upstream.push(Turn(text="ok"))
    second = http.post("/responses", json=follow)

    assert second.status_code == 200, second.text
    assert second.json()["status"] == "completed"
    transcript = _transcript(upstream.model_requests()[-1].json)
    arguments = json.dumps(kind.replayed or kind.arguments)
    if wire == "chat":
        assert transcript == [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": kind.exposed, "arguments": arguments},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": kind.seen},
        ]
    else:
        assert [m["role"] for m in transcript] == ["user", "assistant", "tool"]
        assert transcript[2]["content"] == kind.seen
        prompt = read_prompt(upstream.model_requests()[-1].json)
        assert prompt is not None and f"to=functions.{kind.exposed}" in prompt.text
    stored = _input_items(http, second.json()["id"])
    if form == "history":
        assert [i["type"] for i in stored] == ["message", kind.item_type, kind.answer["type"]]
        assert stored[1] == stored_item(call)
        assert _without_id(stored[2]) == _without_id(stored_item(answer))
    else:
        assert [_without_id(i) for i in stored] == [_without_id(stored_item(answer))]


RESPONSES_CALLS: dict[str, tuple[Turn, dict[str, Any]]] = {
    "function_call+namespace": (
        Turn(tool_calls=[ToolCall("close_agent", '{"target": "a"}', "call_r", "multi_agent_v1")]),
        {"type": "function_call_output", "output": "closed"},
    ),
    "custom_tool_call": (
        Turn(relayed_items=[hosted.custom_tool_call("ctc_r", "call_r", "run", ["hel", "lo"])]),
        {"type": "custom_tool_call_output", "output": "ran"},
    ),
    "shell_call": (
        Turn(relayed_items=[hosted.shell_call("sh_r", "call_r", ["ls"])]),
        {"type": "shell_call_output", "output": SHELL_OUTPUT},
    ),
    "tool_search_call": (
        Turn(relayed_items=[hosted.tool_search_call("tsc_r", "call_r", {"query": "agent"})]),
        {
            "type": "tool_search_output",
            "execution": "client",
            "status": "completed",
            "tools": [NAMESPACE],
        },  # fmt: skip
    ),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", sorted(RESPONSES_CALLS))
def test_tool_items_round_trip_unchanged_over_the_responses_wire(
    http: httpx.Client, upstream: ScriptedUpstream, name: str, form: str
) -> None:
    turn, reply = RESPONSES_CALLS[name]
    tools = KINDS[name].tools
    conversation = http.post("/conversations", json={}).json()["id"]
    first_body: dict[str, Any] = {"model": "scripted-responses", "input": "go", "tools": tools}
    if form == "conversation":
        first_body["conversation"] = conversation
    upstream.push(turn)
    first = http.post("/responses", json=first_body).json()
    (call,) = first["output"]
    answer = {**reply, "call_id": call["call_id"]}
    follow: dict[str, Any] = {"model": "scripted-responses", "tools": tools}
    if form == "previous_response_id":
        follow |= {"previous_response_id": first["id"], "input": [answer]}
    elif form == "conversation":
        follow |= {"conversation": conversation, "input": [answer]}
    else:
        follow["input"] = [{"type": "message", "role": "user", "content": "go"}, call, answer]
    upstream.push(Turn(text="ok"))

    second = http.post("/responses", json=follow)

    assert second.status_code == 200, second.text
    sent = upstream.model_requests()[-1].json["input"]
    assert [i["type"] for i in sent] == ["message", call["type"], answer["type"]]
    # sent as input items: as stored, less their ids and statuses
    assert [_as_input(i) for i in sent[1:]] == [_as_input(call), _as_input(answer)]
    for got, given in zip(sent[1:], [call, answer], strict=True):  # the client's status, relayed
        if given["type"] in STATUS_KEPT and "status" in given:
            assert got["status"] == given["status"], given["type"]
    stored = _input_items(http, second.json()["id"])
    expected = [answer] if form != "history" else [STORED_GO, call, answer]
    assert [_without_id(i) for i in stored] == [_without_id(stored_item(i)) for i in expected]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("wire", ["chat", "harmony"])
def test_additional_tools_stay_callable_on_later_turns_and_never_reach_the_model(
    http: httpx.Client, upstream: ScriptedUpstream, wire: str, form: str
) -> None:
    model = MODELS[wire]
    lookup = {
        "type": "function",
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    }
    extra = {"type": "additional_tools", "role": "developer", "tools": [lookup]}
    user = {"type": "message", "role": "user", "content": "go"}
    conversation = http.post("/conversations", json={}).json()["id"]
    first_body: dict[str, Any] = {"model": model, "input": [extra, user]}
    if form == "conversation":
        first_body["conversation"] = conversation
    upstream.push(Turn(tool_calls=[ToolCall("lookup", '{"word": "cat"}', "call_1")]))
    first = http.post("/responses", json=first_body).json()
    (call,) = first["output"]
    assert (call["type"], call["name"]) == ("function_call", "lookup")
    answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "a pet"}
    follow: dict[str, Any] = {"model": model}
    if form == "previous_response_id":
        follow |= {"previous_response_id": first["id"], "input": [answer]}
    elif form == "conversation":
        follow |= {"conversation": conversation, "input": [answer]}
    else:
        follow["input"] = [extra, user, call, answer]
    upstream.push(Turn(text="ok"))

    second = http.post("/responses", json=follow)

    assert second.status_code == 200, second.text
    payload = upstream.model_requests()[-1].json
    if wire == "chat":
        assert [t["function"]["name"] for t in payload["tools"]] == ["lookup"]
    else:
        prompt = read_prompt(payload)
        assert prompt is not None
        assert [t["function"]["name"] for t in prompt.chat_view["tools"]] == ["lookup"]
    transcript = _transcript(payload)
    assert [m["role"] for m in transcript] == ["user", "assistant", "tool"]
    assert transcript[2]["content"] == "a pet"
    stored = _input_items(http, second.json()["id"])
    expected = [answer] if form != "history" else [extra, STORED_GO, call, answer]
    assert [_without_id(i) for i in stored] == [_without_id(stored_item(i)) for i in expected]
