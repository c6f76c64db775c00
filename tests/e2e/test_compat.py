"""What real clients send, end to end: Codex-shaped requests, compressed bodies, the sealed
reasoning round trip of stateless clients, ``item_reference`` without ``previous_response_id``,
and raw reasoning shown as summaries.

Driven with the official SDK (or raw HTTP where the SDK cannot say it: compressed bodies, Codex's
exact JSON) against the served gateway and the scripted upstreams; upstream payloads and store
reads are asserted exactly.
"""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from backports import zstd

from responses_gateway.store.base import StoredResponse
from responses_gateway.testing.bedrock import signature_of
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import CHAT_REPLAY_MODEL, MODELS, Stack

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "codex"
ENCRYPTED = ["reasoning.encrypted_content"]
CHAT_KEYS = {"model", "messages", "tools", "tool_choice", "stream", "stream_options"}
MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}
SHELL = {
    "type": "function",
    "name": "shell",
    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
}


def _codex(name: str, model: str) -> dict[str, Any]:
    """A captured Codex body, its model replaced and only its function tools kept (the other
    tool types are another part of the gateway)."""
    data = json.loads((FIXTURES / f"compat-{name}.json").read_text())
    body: dict[str, Any] = copy.deepcopy(data.get("body", data))
    body["model"] = model
    body["tools"] = [t for t in body.get("tools") or [] if t.get("type") == "function"]
    return body


def _post_sse(http: httpx.Client, body: bytes, **headers: str) -> tuple[int, list[dict[str, Any]]]:
    answer = http.post(
        "/responses", content=body, headers={"content-type": "application/json", **headers}
    )
    if answer.status_code != 200:
        return answer.status_code, [answer.json()]
    return 200, parse_sse(answer.content)


# -- what Codex sends -----------------------------------------------------------------------


def test_codex_first_request_reaches_a_chat_server_with_only_chat_fields(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="hi"))
    body = _codex("family-a-first-request", MODELS["chat"])
    assert {"client_metadata", "prompt_cache_key", "include"} <= set(body)
    status, events = _post_sse(http, json.dumps(body).encode())

    assert status == 200
    assert check_stream(events)["output"][0]["content"][0]["text"] == "hi"
    sent = upstream.model_requests()[-1].json
    assert set(sent) == CHAT_KEYS  # parallel_tool_calls: true is the default, not sent
    assert sent["tool_choice"] == "auto"
    assert [m["role"] for m in sent["messages"]] == ["system", "system", "user", "user"]
    assert all(set(m) <= MESSAGE_KEYS for m in sent["messages"])
    assert sent["messages"][3] == {"role": "user", "content": "say hi"}
    assert [t["function"]["name"] for t in sent["tools"]] == [t["name"] for t in body["tools"]]


def test_codex_view_image_output_becomes_a_tool_message_and_a_user_image(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="A tiny image."))
    body = _codex("family-b-view-image-output", CHAT_REPLAY_MODEL)
    output = body["input"][-1]["output"]
    image = next(p for p in output if p["type"] == "input_image")
    status, events = _post_sse(http, json.dumps(body).encode())

    assert status == 200
    check_stream(events)
    sent = upstream.model_requests()[-1].json
    assert set(sent) == CHAT_KEYS | {"reasoning_effort", "verbosity"}
    assert sent["verbosity"] == "low" and sent["reasoning_effort"] == "medium"
    assert all(set(m) <= MESSAGE_KEYS for m in sent["messages"])
    assert sent["messages"][-3:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_db6cdb2c98bc",
                    "type": "function",
                    "function": {"name": "view_image", "arguments": '{"path": "img.png"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_db6cdb2c98bc",
            "content": "(The result is the attached content in the next message.)",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "image_url",
                    "image_url": {"url": image["image_url"], "detail": image["detail"]},
                }
            ],
        },
    ]


def test_fields_a_chat_server_would_reject_are_never_forwarded(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="ok"))
    body = {
        "model": MODELS["chat"],
        "stream": True,
        "stream_options": {"include_obfuscation": False},
        "client_metadata": {"session_id": "s"},
        "prompt_cache_key": "k",
        "safety_identifier": "u1",
        "include": ENCRYPTED,
        "reasoning": {"effort": "low", "context": "all_turns"},
        "text": {"verbosity": "high"},
        "some_future_field": {"x": 1},
        "input": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hi"}],
                "internal_chat_message_metadata_passthrough": {"a": 1},
            },
            {
                "type": "message",
                "id": "msg_2",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
                ],
            },
            {"type": "message", "id": "msg_3", "role": "user", "content": "Again"},
        ],
    }
    status, events = _post_sse(http, json.dumps(body).encode())
    assert status == 200
    check_stream(events)
    assert upstream.model_requests()[-1].json == {
        "model": MODELS["chat"],
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "Again"},
        ],
        "reasoning_effort": "low",
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.parametrize("wire", ["responses", "harmony", "bedrock"])
def test_codex_requests_are_accepted_over_the_other_wires(
    http: httpx.Client, upstream: ScriptedUpstream, wire: str
) -> None:
    upstream.push(Turn(text="hi"), Turn(text="seen"))
    # gpt-oss reads text only: on harmony the image of a view_image result becomes a note
    names = ["family-a-first-request", "family-b-view-image-output"]
    for name in names:
        status, events = _post_sse(http, json.dumps(_codex(name, MODELS[wire])).encode())
        assert status == 200, events
        check_stream(events)
    if wire == "responses":
        sent = upstream.model_requests()[-1].json
        assert "client_metadata" not in sent and sent["text"]["verbosity"] == "low"
    elif wire == "bedrock":  # the view_image result: an image block in the toolResult
        messages = upstream.model_requests()[-1].json["messages"]
        results = [b["toolResult"] for m in messages for b in m["content"] if "toolResult" in b]
        assert any("image" in part for result in results for part in result["content"])
    else:
        prompt = upstream.model_requests()[-1].prompt or ""
        assert "[An image was attached here; this model reads text only" in prompt


# -- compressed bodies ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("zstd", zstd.compress)],
)
def test_compressed_bodies_are_accepted(
    http: httpx.Client, upstream: ScriptedUpstream, encoding: str, compress: Any
) -> None:
    upstream.push(Turn(text="ok"))
    body = json.dumps({"model": MODELS["chat"], "input": "Hello", "stream": True}).encode()
    status, events = _post_sse(http, compress(body), **{"content-encoding": encoding})
    assert status == 200
    assert check_stream(events)["status"] == "completed"
    assert upstream.model_requests()[-1].json["messages"] == [{"role": "user", "content": "Hello"}]


def test_decompression_bomb_is_a_413_envelope_and_unknown_coding_a_415(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    bomb = gzip.compress(b" " * (80 * 1024 * 1024))
    status, (error,) = _post_sse(http, bomb, **{"content-encoding": "gzip"})
    assert status == 413
    assert error["error"]["code"] == "request_too_large"
    assert error["error"]["type"] == "invalid_request_error"
    status, (error,) = _post_sse(http, b"{}", **{"content-encoding": "br"})
    assert status == 415
    assert error["error"]["code"] == "unsupported_content_encoding"
    assert upstream.model_requests() == []


# -- reasoning round trip for stateless clients -----------------------------------------------


def _replayed(output: list[Any]) -> list[dict[str, Any]]:
    """Output items as Codex sends them back: reasoning with ``content: null``."""
    items = []
    for item in output:
        data = item.model_dump(exclude_none=True)
        if data["type"] == "reasoning":
            data["content"] = None
        items.append(data)
    return items


def _turn(
    client: openai.OpenAI, model: str, history: list[dict[str, Any]], text: str
) -> list[dict[str, Any]]:
    history.append({"type": "message", "role": "user", "content": text})
    response = client.responses.create(
        model=model, input=history, store=False, include=ENCRYPTED, tools=[SHELL]
    )
    history += _replayed(response.output)
    return history


@pytest.mark.parametrize("wire", ["chat", "harmony", "bedrock"])
def test_reasoning_round_trip_over_three_turns_restores_the_chain_of_thought(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str
) -> None:
    model = CHAT_REPLAY_MODEL if wire == "chat" else MODELS[wire]
    upstream.push(
        Turn(reasoning="Plan A: list files.", tool_calls=[ToolCall("shell", '{"cmd":"ls"}', "c1")]),
        Turn(reasoning="Files seen, answer.", text="Two files."),
        Turn(reasoning="Third thought.", text="Bye."),
    )
    history = _turn(client, model, [], "List files")
    reasoning = history[1]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"].startswith("rgw1.")
    assert "Plan A" not in reasoning["encrypted_content"]
    call_id = history[2]["call_id"]  # harmony names calls itself
    history.append({"type": "function_call_output", "call_id": call_id, "output": "a b"})
    response = client.responses.create(
        model=model, input=history, store=False, include=ENCRYPTED, tools=[SHELL]
    )
    history += _replayed(response.output)
    sent = upstream.model_requests()[-1]
    if wire == "chat":
        assert sent.json["messages"][1] == {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Plan A: list files.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"cmd":"ls"}'},
                }
            ],
        }
    elif wire == "bedrock":  # the model's own signature, unsealed (the upstream checks it)
        thought = {"text": "Plan A: list files.", "signature": signature_of("Plan A: list files.")}
        assert sent.json["messages"][1] == {
            "role": "assistant",
            "content": [
                {"reasoningContent": {"reasoningText": thought}},
                {"toolUse": {"toolUseId": "c1", "name": "shell", "input": {"cmd": "ls"}}},
            ],
        }
    else:  # the turn in progress: its chain of thought goes back to the model
        assert sent.prompt is not None
        assert "<|channel|>analysis<|message|>Plan A: list files.<|end|>" in sent.prompt
    _turn(client, model, history, "Thanks")
    third = upstream.model_requests()[-1]
    if wire == "bedrock":
        thoughts = [
            b["reasoningContent"]["reasoningText"]["text"]
            for m in third.json["messages"]
            for b in m["content"]
            if "reasoningContent" in b
        ]
        assert thoughts == ["Plan A: list files.", "Files seen, answer."]
    if wire == "chat":
        assert [m.get("reasoning_content") for m in third.json["messages"][1:]] == [
            "Plan A: list files.",
            None,
            "Files seen, answer.",
            None,
        ]
    assert len(upstream.model_requests()) == 3


def test_reasoning_round_trip_over_responses_gives_the_upstream_its_own_blob(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    model = MODELS["responses"]
    upstream.push(
        Turn(reasoning_summary=["Thinking."], encrypted_content="gAAAA-upstream-1", text="One."),
        Turn(text="Two."),
    )
    history = _turn(client, model, [], "Hi")
    blob = history[1]["encrypted_content"]
    assert blob.startswith("rgw1.") and blob != "gAAAA-upstream-1"
    _turn(client, model, history, "Again")
    sent = upstream.model_requests()[-1].json["input"]
    assert [i["encrypted_content"] for i in sent if i.get("type") == "reasoning"] == [
        "gAAAA-upstream-1"
    ]


def test_forged_or_foreign_blob_is_a_400(client: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    for blob in ("gAAAA-not-ours", "rgw1.k1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"):
        with pytest.raises(openai.BadRequestError) as caught:
            client.responses.create(
                model=MODELS["chat"],
                store=False,
                input=[
                    {"type": "message", "role": "user", "content": "Hi"},
                    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": blob},
                ],
            )
        error = caught.value.body
        assert isinstance(error, dict)
        assert (error["code"], error["param"]) == (
            "invalid_encrypted_content",
            "input[1].encrypted_content",
        )
    assert upstream.model_requests() == []


def test_reasoning_with_null_content_and_blob_is_accepted(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="ok"))
    response = client.responses.create(
        model=MODELS["chat"],
        store=False,
        input=[
            {"type": "message", "role": "user", "content": "Hi"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": None,
                "encrypted_content": None,
            },
            {"type": "message", "role": "assistant", "content": "Hello"},
            {"type": "message", "role": "user", "content": "Again"},
        ],
    )
    assert response.output_text == "ok"


# -- item_reference without previous_response_id ------------------------------------------------


def test_item_references_resolve_from_the_store_in_one_read(
    client: openai.OpenAI, upstream: ScriptedUpstream, stack: Stack
) -> None:
    assert stack.store is not None
    upstream.push(
        Turn(reasoning="Need ls.", text="Listing.", tool_calls=[ToolCall("shell", "{}", "c1")]),
        Turn(text="Done."),
    )
    first = client.responses.create(model=CHAT_REPLAY_MODEL, input="Go", tools=[SHELL])
    ids = [item.id for item in first.output]
    assert [i.split("_")[0] for i in ids] == ["rs", "msg", "fc"]
    stack.store.meter.reset()
    second = client.responses.create(
        model=CHAT_REPLAY_MODEL,
        tools=[SHELL],
        input=[
            {"type": "message", "role": "user", "content": "Go"},
            *({"type": "item_reference", "id": i} for i in ids),
            {"type": "function_call_output", "call_id": "c1", "output": "a"},
        ],
    )
    assert second.output_text == "Done."
    reads = stack.store.meter.snapshot()["get_items"]
    assert reads.round_trips == 1
    assert upstream.model_requests()[-1].json["messages"] == [
        {"role": "user", "content": "Go"},
        {
            "role": "assistant",
            "content": "Listing.",
            "reasoning_content": "Need ls.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
    ]
    items = client.responses.input_items.list(second.id)
    assert [i.id for i in items.data][::-1][1:4] == ids


def test_item_reference_outside_the_chain_resolves_with_previous_response_id(
    client: openai.OpenAI, upstream: ScriptedUpstream, stack: Stack
) -> None:
    assert stack.store is not None
    upstream.push(Turn(text="Elsewhere."), Turn(text="Chain start."), Turn(text="Both seen."))
    elsewhere = client.responses.create(model=MODELS["chat"], input="Unrelated")
    start = client.responses.create(model=MODELS["chat"], input="Begin")
    stack.store.meter.reset()
    client.responses.create(
        model=MODELS["chat"],
        previous_response_id=start.id,
        input=[
            {"type": "item_reference", "id": start.output[0].id},  # in the chain: dropped
            {"type": "item_reference", "id": elsewhere.output[0].id},  # from the index
            {"type": "message", "role": "user", "content": "Go on"},
        ],
    )
    assert stack.store.meter.snapshot()["get_items"].round_trips == 1
    assert upstream.model_requests()[-1].json["messages"] == [
        {"role": "user", "content": "Begin"},
        {"role": "assistant", "content": "Chain start."},
        {"role": "assistant", "content": "Elsewhere."},
        {"role": "user", "content": "Go on"},
    ]


def _reference_error(client: openai.OpenAI, item_id: str) -> dict[str, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model=MODELS["chat"], input=[{"type": "item_reference", "id": item_id}]
        )
    body = caught.value.body
    assert isinstance(body, dict)
    return body


def test_item_reference_to_another_tenant_or_a_deleted_response_is_item_not_found(
    client: openai.OpenAI, upstream: ScriptedUpstream, stack: Stack
) -> None:
    assert stack.store is not None
    other = StoredResponse(
        tenant="someone-else",
        id="resp_foreign",
        response={"id": "resp_foreign", "status": "completed", "output": []},
        input_items=[{"type": "message", "id": "msg_foreign", "role": "user", "content": "x"}],
    )
    asyncio.run(stack.store.put_response(other))
    assert _reference_error(client, "msg_foreign") == {
        "message": "Item with id 'msg_foreign' not found.",
        "type": "invalid_request_error",
        "param": "input[0]",
        "code": "item_not_found",
    }
    upstream.push(Turn(text="Kept."))
    kept = client.responses.create(model=MODELS["chat"], input="Remember")
    client.responses.delete(kept.id)
    assert _reference_error(client, kept.output[0].id)["code"] == "item_not_found"


# -- raw reasoning shown as summaries -----------------------------------------------------------


@pytest.mark.parametrize("wire", ["chat", "harmony", "bedrock"])
def test_raw_reasoning_streams_as_summary_events_through_the_strict_helper(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, wire: str
) -> None:
    turn = Turn(reasoning="Consider the sky.", text="Blue.")
    upstream.push(turn, turn)
    request: dict[str, Any] = {
        "model": MODELS[wire],
        "input": "Sky?",
        "reasoning": {"summary": "auto"},
    }
    with client.responses.stream(**request) as stream:
        summary = [e.delta for e in stream if e.type == "response.reasoning_summary_text.delta"]
        final = stream.get_final_response()
    assert "".join(summary) == "Consider the sky."
    reasoning = final.output[0]
    assert reasoning.type == "reasoning"
    assert [s.text for s in reasoning.summary] == ["Consider the sky."]
    assert reasoning.content is not None and reasoning.content[0].text == "Consider the sky."

    answer = http.post("/responses", json={**request, "stream": True})
    events = parse_sse(answer.content)
    check_stream(events)
    reasoning_events = [
        e["type"].removeprefix("response.") for e in events if e.get("output_index") == 0
    ]
    deltas = (len(reasoning_events) - 8) // 2  # the scripted upstream splits text by words
    assert reasoning_events == [
        "output_item.added",
        "content_part.added",
        "reasoning_summary_part.added",
        *["reasoning_text.delta", "reasoning_summary_text.delta"] * deltas,
        "reasoning_text.done",
        "content_part.done",
        "reasoning_summary_text.done",
        "reasoning_summary_part.done",
        "output_item.done",
    ]
    assert deltas >= 3
