"""Every input item row, over every wire, end to end with the official SDK (issue #19).

For each input item type of the pinned SDK, a minimal instance (validated against the SDK's own
types) is sent through the gateway after a user message; the declared handling is checked
against what the scripted upstream received and what came back: relayed items reach a Responses
upstream with their type; lowered items reach a function wire as what their row says (a row's
``lower`` output, or the tool-kind table's function pairs); gateway rows answer without a 5xx.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest

from responses_gateway.protocol.contract import CREATE_FIELDS, INPUT_ITEMS
from responses_gateway.testing.bedrock import as_chat
from responses_gateway.testing.script import RecordedRequest, ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.sdk_instances import INPUT_INSTANCES, validated
from responses_gateway.tool_kinds import HOSTED_ITEM_TYPES, hosted_seen

USER = {"type": "message", "role": "user", "content": "go"}


def test_every_instance_is_valid_for_the_sdk_and_every_row_has_one() -> None:
    assert set(INPUT_INSTANCES) == set(INPUT_ITEMS)
    assert {name: errors for name, errors in validated().items() if errors} == {}


def _send(client: openai.OpenAI, model: str, items: list[dict[str, Any]]) -> tuple[int, str]:
    try:
        client.responses.create(model=model, input=[USER, *items], store=False)  # type: ignore[list-item]
    except openai.APIStatusError as exc:
        body = exc.response.json()
        assert set(body["error"]) >= {"message", "type", "param", "code"}
        return exc.status_code, str(body["error"]["message"])
    return 200, ""


@pytest.mark.parametrize("name", sorted(INPUT_INSTANCES))
def test_input_item_handling_matches_its_row(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str, name: str
) -> None:
    upstream.push(Turn(text="ok"), Turn(text="ok"))
    handling = INPUT_ITEMS[name].on(wire)
    items = INPUT_INSTANCES[name]

    status, error = _send(client, model, items)

    sent = [as_chat(r) for r in upstream.model_requests()]  # Bedrock's Converse: as chat
    if handling.fate == "refused":
        assert status == 400
        assert sent == []
        return
    if handling.fate == "gateway":
        assert status < 500
        return
    assert status == 200, f"{name} on {wire}: {handling}: {error}"
    payload = sent[-1]
    if handling.fate == "relayed":
        assert name in [item.get("type") for item in payload["input"]]
        return
    assert name not in [m.get("type") for m in payload.get("messages") or []]
    row = INPUT_ITEMS[name]
    if row.lower is not None:
        function_wire = wire in ("chat", "bedrock")
        seen = _shown(payload) if function_wire else upstream.model_requests()[-1].prompt or ""
        item = next(i for i in items if i["type"] == name)
        result = hosted_seen(item) if name in HOSTED_ITEM_TYPES else None
        if result is not None:  # the tool-kind table replays it as a call and its result
            assert result in seen, f"{name} on {wire}: its result {result!r} not shown"
            return
        for lowered in row.lower(item):
            shown = lowered.get("content") or lowered.get("arguments") or lowered.get("output")
            text = _text(shown)
            if wire == "bedrock" and lowered.get("arguments"):  # Converse sends parsed JSON
                text = json.dumps(json.loads(text), separators=(",", ":"))
            assert text in seen, f"{name} on {wire}: {lowered} not shown"


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part.get("text") or "") for part in value)
    return str(value)


def _shown(payload: dict[str, Any]) -> str:
    """Everything a chat model reads: message contents and tool call arguments."""
    shown: list[str] = []
    for message in payload["messages"]:
        shown.append(_text(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            shown.append(call["function"]["arguments"])
    return "\n".join(shown)


def test_a_refused_tool_is_a_400_naming_it_before_any_model_call(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(text="ok"))
    tools: Any = [{"type": "programmatic_tool_calling"}]

    status, error = _send_tools(client, model, tools)

    if wire == "responses":
        assert status == 200
        assert upstream.model_requests()[-1].json["tools"] == tools
    else:
        assert (status, upstream.model_requests()) == (400, [])
        assert "programmatic_tool_calling" in error


def _send_tools(client: openai.OpenAI, model: str, tools: Any) -> tuple[int, str]:
    try:
        client.responses.create(model=model, input="go", tools=tools)
    except openai.BadRequestError as exc:
        assert exc.body["param"] == "tools[0].type"  # type: ignore[index]
        return 400, str(exc.message)
    return 200, ""


PING: Any = {"type": "function", "name": "ping", "parameters": {"type": "object"}}
PONG: Any = {"type": "function", "name": "pong", "parameters": {"type": "object"}}
PLACE: Any = {
    "type": "json_schema",
    "name": "place",
    "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
ONLY_PONG: Any = {
    "type": "allowed_tools",
    "mode": "required",
    "tools": [{"type": "function", "name": "pong"}],
}


def _prompt(r: RecordedRequest) -> str:
    return r.prompt or ""


FIELD_CASES: dict[
    str, tuple[dict[str, Any], Turn, dict[str, Callable[[RecordedRequest], bool]]]
] = {
    "tool_choice": (
        {"tools": [PING, PONG], "tool_choice": ONLY_PONG},
        Turn(tool_calls=[ToolCall("pong", "{}")]),
        {
            "chat": lambda r: (
                r.json["tool_choice"] == "required"
                and [t["function"]["name"] for t in r.json["tools"]] == ["pong"]
            ),
            "harmony": lambda r: (
                "type pong = " in _prompt(r)
                and "type ping" not in _prompt(r)
                and "Call one of the functions now" in _prompt(r)
            ),
            "bedrock": lambda r: (
                r.json["toolConfig"]["toolChoice"] == {"any": {}}
                and [t["toolSpec"]["name"] for t in r.json["toolConfig"]["tools"]] == ["pong"]
            ),
        },
    ),
    "parallel_tool_calls": (
        {"tools": [PING], "parallel_tool_calls": False},
        Turn(tool_calls=[ToolCall("ping", "{}"), ToolCall("ping", "{}")]),
        {
            "chat": lambda r: r.json["parallel_tool_calls"] is False,
            "harmony": lambda r: True,  # the answer is checked: one call surfaced
            "bedrock": lambda r: True,  # the answer is read: one call surfaced
        },
    ),
    "text": (
        {"text": {"format": PLACE}},
        Turn(text='{"city": "Oslo"}'),
        {
            "chat": lambda r: r.json["response_format"]["type"] == "json_schema",
            "harmony": lambda r: "# Response Formats\n\n## place" in _prompt(r),
            "bedrock": lambda r: (
                r.json["outputConfig"]["textFormat"]["structure"]["jsonSchema"]["name"] == "place"
            ),
        },
    ),
    "top_logprobs": (
        {"top_logprobs": 2},
        Turn(text="ok"),
        {
            "chat": lambda r: r.json["logprobs"] is True and r.json["top_logprobs"] == 2,
            "harmony": lambda r: r.json["logprobs"] == 2,
        },
    ),
}
"""Create fields whose rows say how each function wire lowers them: the request, the scripted
answer, and what the upstream must have received on each lowering wire."""


@pytest.mark.parametrize("name", sorted(FIELD_CASES))
def test_create_field_handling_matches_its_row(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str, name: str
) -> None:
    params, turn, checks = FIELD_CASES[name]
    upstream.push(turn)
    handling = CREATE_FIELDS[name].on(wire)
    if handling.fate == "refused":  # e.g. top_logprobs on Bedrock: a 400 naming it
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(model=model, input="go", **params)
        assert raised.value.body["param"] == name  # type: ignore[index]
        assert upstream.model_requests() == []
        return

    response = client.responses.create(model=model, input="go", **params)

    sent = upstream.model_requests()[-1]
    assert handling.fate in ("relayed", "lowered") or (name, wire) in (
        ("parallel_tool_calls", "harmony"),  # applied by the gateway: read to its first call
        ("parallel_tool_calls", "bedrock"),  # applied by the gateway: the first toolUse only
    ), (name, wire)
    if wire == "responses":
        assert sent.json[name] == params[name]
    else:
        assert checks[wire](sent), (name, wire, sent.json)
    if name == "parallel_tool_calls":  # chat and responses servers enforce it themselves
        assert len(response.output) == (1 if wire in ("harmony", "bedrock") else 2)


IMAGE_URL = "https://example.com/cat.png"
INPUT_IMAGE_URL: Any = ["message.input_image.image_url"]


def _image_message() -> Any:
    return {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is it?"},
            {"type": "input_image", "image_url": IMAGE_URL, "detail": "auto"},
        ],
    }


def _image_urls(items: Any) -> list[Any]:
    return [p.image_url for i in items for p in i.content or [] if p.type == "input_image"]


@pytest.mark.parametrize("wire", ["chat", "responses"])
def test_input_image_urls_are_shown_by_input_items_only_when_included(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str, wire: str
) -> None:
    upstream.push(Turn(text="A cat."))

    response = client.responses.create(
        model=model, input=[_image_message()], include=INPUT_IMAGE_URL
    )

    sent = upstream.model_requests()[-1].json
    if wire == "responses":  # relayed
        assert "message.input_image.image_url" in sent["include"]
    items = client.responses.input_items.list(response.id)
    assert _image_urls(items) == [None]
    items = client.responses.input_items.list(response.id, include=INPUT_IMAGE_URL)
    assert _image_urls(items) == [IMAGE_URL]


def test_input_image_urls_of_conversation_items_only_when_included(
    client: openai.OpenAI,
) -> None:
    conversation = client.conversations.create(items=[_image_message()])

    added = client.conversations.items.create(
        conversation.id, items=[_image_message()], include=INPUT_IMAGE_URL
    )
    listed = client.conversations.items.list(conversation.id)
    included = client.conversations.items.list(conversation.id, include=INPUT_IMAGE_URL)
    one = client.conversations.items.retrieve(listed.data[0].id, conversation_id=conversation.id)

    assert _image_urls(added.data) == [IMAGE_URL]
    assert _image_urls(listed.data) == [None, None]
    assert _image_urls(included.data) == [IMAGE_URL, IMAGE_URL]
    assert _image_urls([one]) == [None]
