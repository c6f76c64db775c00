"""Server-side state end to end: stored responses, chains, input items, deletion, cancellation.

Driven with the official SDK against the served gateway; the store is a real DynamoDB endpoint
(moto's server). Upstream transcripts are asserted exactly: a chain must replay its history in
order, lowered for the model, and never grow faster than the conversation does.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.bedrock import as_chat
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn

from .conftest import UPSTREAM_KEY, Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _sent_items(upstream: ScriptedUpstream) -> list[dict[str, Any]]:
    """The last upstream request's transcript, in Responses item terms, ids dropped."""
    body = as_chat(upstream.model_requests()[-1])  # Bedrock's Converse: as chat
    if "messages" in body:
        return body["messages"]  # type: ignore[no-any-return]
    return [{k: v for k, v in item.items() if k != "id"} for item in body["input"]]


def _sent_prompt(upstream: ScriptedUpstream) -> str:
    """The last harmony prompt after its system message."""
    prompt = upstream.model_requests()[-1].prompt
    assert prompt is not None
    system, end, rest = prompt.partition("<|end|>")
    assert system.startswith("<|start|>system<|message|>You are ChatGPT") and end
    return rest


def _sent_text(upstream: ScriptedUpstream) -> str:
    """Everything the last upstream request showed the model, as text."""
    request = upstream.model_requests()[-1]
    return request.prompt if request.prompt is not None else json.dumps(request.json)


def test_three_turn_chain_with_function_calls_replays_exact_transcript(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("get_weather", '{"city":"Oslo"}', "call_1")]))
    first = client.responses.create(
        model=model,
        input="Weather in Oslo?",
        instructions="First instructions.",
        tools=[WEATHER],  # type: ignore[list-item]
    )
    call_id = first.output[0].call_id  # type: ignore[union-attr]
    assert call_id == "call_1" or wire == "harmony"  # harmony calls carry no id of their own
    upstream.push(Turn(text="Oslo is cold."))
    second = client.responses.create(
        model=model,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call_id, "output": "-5C"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.previous_response_id == first.id
    upstream.push(Turn(text="Bring a coat."))
    third = client.responses.create(
        model=model, previous_response_id=second.id, input="What should I wear?"
    )
    assert third.output_text == "Bring a coat."
    assert third.instructions is None

    if wire == "harmony":  # the third call has no tools and no instructions: no developer message
        assert _sent_prompt(upstream) == (
            "<|start|>user<|message|>Weather in Oslo?<|end|>"
            "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
            '<|message|>{"city":"Oslo"}<|call|>'
            "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>-5C<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Oslo is cold.<|end|>"
            "<|start|>user<|message|>What should I wear?<|end|><|start|>assistant"
        )
        return
    sent = _sent_items(upstream)
    if wire in ("chat", "bedrock"):
        assert sent == [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "-5C"},
            {"role": "assistant", "content": "Oslo is cold."},
            {"role": "user", "content": "What should I wear?"},
        ]
    else:
        assert sent == [
            _user("Weather in Oslo?"),
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Oslo"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "-5C"},
            {
                "type": "message",
                "role": "assistant",
                "content": [
                    {
                        "type": "output_text",
                        "text": "Oslo is cold.",
                        "annotations": [],
                        "logprobs": [],
                    }
                ],
            },
            _user("What should I wear?"),
        ]
        assert "instructions" not in upstream.model_requests()[-1].json


def test_chain_through_every_item_type_lowers_mcp_and_keeps_control_items_back(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    listing = {
        "type": "mcp_list_tools",
        "id": "mcpl_1",
        "server_label": "calc",
        "tools": [{"name": "add", "input_schema": {"type": "object"}}],
    }
    ok_call = {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "calc",
        "name": "add",
        "arguments": '{"a":1,"b":2}',
        "output": "3",
        "error": None,
    }
    failed_call = {**ok_call, "id": "mcp_2", "output": None, "error": "division by zero"}
    approval = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "calc",
        "name": "add",
        "arguments": "{}",
    }
    upstream.push(Turn(reasoning="Thinking.", text="Noted.", reasoning_summary=["Sum."]))
    first = client.responses.create(
        model=model,
        input=[_user("Compute"), listing, ok_call, failed_call, approval],  # type: ignore[list-item]
    )
    assert [i.type for i in first.output] == ["reasoning", "message"]
    upstream.push(Turn(text="Done."))
    client.responses.create(model=model, previous_response_id=first.id, input="Next")

    if wire == "harmony":  # the reasoning before the final answer is dropped by the renderer
        call = (
            "<|start|>assistant to=functions.calc__add<|channel|>commentary <|constrain|>json"
            '<|message|>{"a":1,"b":2}<|call|>'
        )
        output = "<|start|>functions.calc__add to=assistant<|channel|>commentary<|message|>"
        assert _sent_prompt(upstream) == (
            "<|start|>user<|message|>Compute<|end|>"
            f"{call}{output}3<|end|>{call}{output}division by zero<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Noted.<|end|>"
            "<|start|>user<|message|>Next<|end|><|start|>assistant"
        )
        return
    sent = _sent_items(upstream)
    if wire in ("chat", "bedrock"):
        assert sent == [
            {"role": "user", "content": "Compute"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "mcp_1",
                        "type": "function",
                        "function": {"name": "calc__add", "arguments": '{"a":1,"b":2}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "mcp_1", "content": "3"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "mcp_2",
                        "type": "function",
                        "function": {"name": "calc__add", "arguments": '{"a":1,"b":2}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "mcp_2", "content": "division by zero"},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "Next"},
        ]
    else:
        types = [item["type"] for item in sent]
        assert types == [
            "message",
            "function_call",
            "function_call_output",
            "function_call",
            "function_call_output",
            "message",
            "message",
        ]  # reasoning without encrypted content cannot go back to a stateless upstream
        assert sent[4] == {
            "type": "function_call_output",
            "call_id": "mcp_2",
            "output": "division by zero",
        }


def test_chaining_immediately_sees_the_previous_response(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    previous = None
    for n in range(5):
        upstream.push(Turn(text=f"answer {n}"))
        previous = client.responses.create(
            model=model, input=f"q{n}", previous_response_id=previous.id if previous else None
        )
    assert _sent_text(upstream).count("answer") == 4


def test_store_false_then_chaining_is_400(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="not kept"))
    response = client.responses.create(model=model, input="Hi", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model=model, input="Hi", previous_response_id=response.id)
    assert info.value.body == {
        "message": f"Previous response with id '{response.id}' not found.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }


def test_retrieve_returns_the_created_object_and_delete_removes_it(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="keep me"))
    created = http.post("/responses", json={"model": model, "input": "Hi"}).json()
    assert http.get(f"/responses/{created['id']}").json() == created

    deleted = client.responses.delete(created["id"])
    assert deleted is None  # the SDK returns None; check the wire body too
    gone = http.get(f"/responses/{created['id']}")
    assert gone.status_code == 404
    assert gone.json() == {
        "error": {
            "message": f"Response with id '{created['id']}' not found.",
            "type": "invalid_request_error",
            "param": "response_id",
            "code": None,
        }
    }
    assert http.delete(f"/responses/{created['id']}").status_code == 404
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=model, input="Hi", previous_response_id=created["id"])


def test_delete_wire_body(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="x"))
    rid = http.post("/responses", json={"model": "scripted-chat", "input": "Hi"}).json()["id"]
    assert http.delete(f"/responses/{rid}").json() == {
        "id": rid,
        "object": "response",
        "deleted": True,
    }


def test_input_items_paginate_in_both_orders_like_the_sdk_pager(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="ok"))
    inputs = [{"role": "user", "content": f"m{n}"} for n in range(5)]
    response = client.responses.create(model="scripted-chat", input=inputs)  # type: ignore[arg-type]

    desc = list(client.responses.input_items.list(response.id, limit=2))
    texts = [item.content[0].text for item in desc]  # type: ignore[union-attr]
    assert texts == ["m4", "m3", "m2", "m1", "m0"]
    asc = list(client.responses.input_items.list(response.id, limit=2, order="asc"))
    assert [item.id for item in asc] == [item.id for item in reversed(desc)]
    assert all(item.id and item.id.startswith("msg_") for item in asc)

    page = client.responses.input_items.list(response.id, limit=2, order="asc")
    assert (page.first_id, page.last_id, page.has_more) == (asc[0].id, asc[1].id, True)


def test_retrieve_with_stream_true_of_a_foreground_response_is_400(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="x"))
    rid = http.post("/responses", json={"model": "scripted-chat", "input": "Hi"}).json()["id"]
    answer = http.get(f"/responses/{rid}", params={"stream": "true"})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "stream"


def test_large_input_and_output_round_trip_intact(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    image = "data:image/png;base64," + base64.b64encode(os.urandom(3_750_000)).decode()
    assert len(image) > 5_000_000
    big_text = ("lorem ipsum dolor sit amet " * 80_000)[:2_000_000]
    upstream.push(Turn(text=big_text, chunk_size=65_536))
    created = http.post(
        "/responses",
        json={
            "model": "scripted-responses",
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "Describe"},
                        {"type": "input_image", "image_url": image, "detail": "auto"},
                    ],
                }
            ],
        },
        timeout=120,
    ).json()
    assert created["output"][0]["content"][0]["text"] == big_text
    again = client.responses.retrieve(created["id"])
    assert again.output_text == big_text
    include: Any = ["message.input_image.image_url"]
    items = list(client.responses.input_items.list(created["id"], include=include))
    assert items[0].content[1].image_url == image  # type: ignore[union-attr]


def test_client_disconnect_leaves_a_cancelled_record_with_partial_output(
    stack: Stack, client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="one two three four five six", hold_after=5))
    response_id = None
    with (
        httpx.Client(base_url=stack.base_url, timeout=30) as raw,
        raw.stream(
            "POST", "/responses", json={"model": model, "input": "Hi", "stream": True}
        ) as streamed,
    ):
        for line in streamed.iter_lines():
            if line.startswith("data: ") and response_id is None:
                response_id = json.loads(line[6:])["response"]["id"]
            if line == "event: response.output_text.delta":
                break
    assert response_id is not None
    upstream.wait_for_disconnects(1, timeout=10)
    record = stack.wait_for_status(response_id, "cancelled")
    assert record["output"][0]["type"] == "message"
    assert record["output"][0]["status"] == "incomplete"
    assert record["output"][0]["content"][0]["text"].startswith("one")
    assert record["error"] is None


def test_stored_records_never_hold_secrets(
    stack: Stack, client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="fine"))
    client.responses.create(model=model, input="Hi", metadata={"k": "v"})
    dump = stack.scan_table()
    assert dump  # something was stored
    assert UPSTREAM_KEY not in dump
    assert "sk-client" not in dump


def test_expired_records_are_invisible_before_ttl_deletes_them(
    stack: Stack, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    import time

    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.testing.server import run_in_thread

    upstream.push(Turn(text="old"))
    rid = http.post("/responses", json={"model": "scripted-chat", "input": "Hi"}).json()["id"]
    conversation = http.post("/conversations", json={}).json()["id"]

    later = stack.open_store(clock=lambda: time.time() + 31 * 86400)
    config = parse_config({"providers": [{"base_url": stack.upstream_server.url + "/v1"}]})
    with (
        run_in_thread(create_app(config, later)) as server,
        httpx.Client(base_url=server.url + "/v1", timeout=30) as future,
    ):
        assert future.get(f"/responses/{rid}").status_code == 404
        assert future.get(f"/conversations/{conversation}").status_code == 404
        chained = future.post(
            "/responses", json={"model": "m", "input": "Hi", "previous_response_id": rid}
        )
        assert chained.status_code == 400
        assert chained.json()["error"]["code"] == "previous_response_not_found"
    assert http.get(f"/responses/{rid}").status_code == 200  # still there for "now"
