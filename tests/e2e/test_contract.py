"""Every input item row, over every wire, end to end with the official SDK (issue #19).

For each input item type of the pinned SDK, a minimal instance (validated against the SDK's own
types) is sent through the gateway after a user message; the declared handling is checked
against what the scripted upstream received and what came back: relayed items reach a Responses
upstream with their type; lowered items reach a function wire as what their row says (a row's
``lower`` output, or the tool-kind table's function pairs); gateway rows answer without a 5xx.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from responses_gateway.protocol.contract import INPUT_ITEMS
from responses_gateway.testing.script import ScriptedUpstream, Turn
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

    sent = [r.json for r in upstream.model_requests()]
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
        seen = _shown(payload) if wire == "chat" else upstream.model_requests()[-1].prompt or ""
        item = next(i for i in items if i["type"] == name)
        result = hosted_seen(item) if name in HOSTED_ITEM_TYPES else None
        if result is not None:  # the tool-kind table replays it as a call and its result
            assert result in seen, f"{name} on {wire}: its result {result!r} not shown"
            return
        for lowered in row.lower(item):
            shown = lowered.get("content") or lowered.get("arguments") or lowered.get("output")
            assert _text(shown) in seen, f"{name} on {wire}: {lowered} not shown"


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


RESPONSES_ONLY = {
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {"mode": "auto"},
    "moderation": {"mode": "auto"},
}


def test_responses_only_fields_reach_a_responses_upstream_only(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(text="ok"))

    raw = client.responses.with_raw_response.create(
        model=model, input="go", extra_body=RESPONSES_ONLY
    )

    sent = upstream.model_requests()[-1].json
    relayed = {k: sent[k] for k in RESPONSES_ONLY if k in sent}
    assert relayed == (RESPONSES_ONLY if wire == "responses" else {})
    signal = raw.headers.get("x-gateway-omitted-fields")
    expected = "moderation,prompt_cache_options,prompt_cache_retention"
    assert signal == (None if wire == "responses" else expected)


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
