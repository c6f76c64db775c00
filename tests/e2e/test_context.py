"""Compaction, truncation, context-length errors and token counts over every upstream wire.

A second gateway (same fake upstream, same table) serves models with small configured context
windows; the official SDK drives both. The summary request of a compaction is recognised by its
instructions (the harmony prompt is decoded to text to find them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.loop.compaction import SUMMARY_INSTRUCTIONS, SUMMARY_PREFIX
from responses_gateway.testing.bedrock import as_chat
from responses_gateway.testing.script import RecordedRequest, ScriptedUpstream, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import MODELS, UPSTREAM_KEY, Stack

SMALL = {
    "chat": "small-chat",
    "responses": "small-responses",
    "harmony": "small-harmony",
    "bedrock": "small-bedrock",
}
"""Models with a configured window of :data:`WINDOW` tokens, one per wire."""
WINDOW = 600


@pytest.fixture(scope="module")
def small_gateway(stack: Stack) -> Iterator[RunningServer]:
    base = f"{stack.upstream_server.url}/v1"
    providers: list[dict[str, Any]] = [
        {
            "name": f"small-{wire}",
            "base_url": base,
            "api": wire,
            "api_key": UPSTREAM_KEY,
            "models": [model],
            "context_window": WINDOW,
        }
        for wire, model in SMALL.items()
        if wire != "bedrock"
    ]
    providers.append(  # signed, not keyed; the runtime endpoint has no /v1
        {
            "name": "small-bedrock",
            "base_url": stack.upstream_server.url,
            "api": "bedrock",
            "aws_region": "us-east-1",
            "models": [SMALL["bedrock"]],
            "context_window": WINDOW,
        }
    )
    providers.append({"name": "agents", "base_url": base, "api": "chat", "models": ["gpt-4.1"]})
    config = parse_config({"providers": providers})
    assert stack.store is not None
    server = run_in_thread(create_app(config, stack.store, latch=stack.latch))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def small(small_gateway: RunningServer, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{small_gateway.url}/v1", api_key="sk-client", max_retries=0) as c:
        yield c


def _sent_text(request: RecordedRequest) -> str:
    """Everything a model request showed the model, as text."""
    if request.prompt is not None:
        return request.prompt
    return json.dumps(request.json, ensure_ascii=False)


def _is_summary_request(body: dict[str, Any], wire: str) -> bool:
    if wire == "harmony":
        from responses_gateway._vocab import harmony_encoding

        prompt = body.get("prompt")
        text = harmony_encoding().decode(prompt) if isinstance(prompt, list) else str(prompt)
        return SUMMARY_INSTRUCTIONS[:40] in text
    return SUMMARY_INSTRUCTIONS[:40] in json.dumps(body)


def _history() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "My name is Ada and I like tea."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
        {"role": "user", "content": "Remember the number 42."},
    ]


# -- POST /responses/compact ------------------------------------------------------------------


def test_compact_through_the_loop_then_reuse(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    if wire == "responses":
        pytest.skip("the Responses upstream compacts natively: see the passthrough test")
    upstream.push(Turn(text="Ada likes tea; remember 42."), Turn(text="Your number is 42."))
    compacted = client.responses.compact(model=model, input=_history())  # type: ignore[arg-type]

    assert compacted.object == "response.compaction"
    kinds = [(item.type, getattr(item, "role", None)) for item in compacted.output]
    assert kinds == [("message", "user"), ("message", "user"), ("compaction", None)]
    blob = compacted.output[-1]
    assert blob.type == "compaction" and blob.id.startswith("cmp_")
    assert "Ada likes tea; remember 42." not in blob.encrypted_content  # sealed, not plain
    summary_request = upstream.model_requests()[0]
    assert _is_summary_request(summary_request.json, wire)
    assert "Remember the number 42." in _sent_text(summary_request)
    assert "tools" not in summary_request.json
    assert compacted.usage.input_tokens > 0

    reused = [item.model_dump(exclude_none=True) for item in compacted.output]
    answer = client.responses.create(
        model=model, input=[*reused, {"role": "user", "content": "What is my number?"}]
    )
    assert answer.output_text == "Your number is 42."
    sent = _sent_text(upstream.model_requests()[1])
    assert SUMMARY_PREFIX.strip() in sent and "Ada likes tea; remember 42." in sent
    assert blob.encrypted_content not in sent


def test_compact_keeps_user_messages_as_item_resources(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    if wire == "responses":
        pytest.skip("the Responses upstream compacts natively: see the passthrough test")
    if wire == "bedrock":
        pytest.skip("Bedrock takes images as bytes: a URL is refused (tests/adapters/test_bedrock)")
    upstream.push(Turn(text="An image was shown."))
    image = {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": None}
    compacted = client.responses.with_raw_response.compact(
        model=model,
        input=[{"role": "user", "content": [image]}],  # type: ignore[list-item]
    )
    output = json.loads(compacted.text)["output"]

    assert [item["type"] for item in output] == ["message", "compaction"]
    assert output[0]["content"] == [
        {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"}
    ]
    assert (output[0]["role"], output[0]["status"]) == ("user", "completed")


def test_compact_passes_through_a_native_responses_upstream(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    model = MODELS["responses"]
    upstream.push(Turn(text="Still 42."))
    compacted = client.responses.compact(model=model, input=_history())  # type: ignore[arg-type]

    assert upstream.compactions == 1
    native = upstream.requests[-1]
    assert native.path == "/v1/responses/compact"
    assert native.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert native.json["model"] == model and len(native.json["input"]) == 3
    assert compacted.output[-1].type == "compaction"
    opaque = compacted.output[-1].encrypted_content
    assert opaque.startswith("upstream-opaque-")

    reused = [item.model_dump(exclude_none=True) for item in compacted.output]
    client.responses.create(model=model, input=[*reused, {"role": "user", "content": "Number?"}])
    sent = upstream.model_requests()[-1].json["input"]
    assert {"type": "compaction", "id": compacted.output[-1].id, "encrypted_content": opaque} in [
        {k: v for k, v in item.items() if k in ("type", "id", "encrypted_content")} for item in sent
    ]


@pytest.mark.parametrize("kind", ["chat", "harmony"])
def test_forged_or_foreign_compaction_blob_is_400(
    http: httpx.Client, upstream: ScriptedUpstream, kind: str
) -> None:
    forged = {"type": "compaction", "encrypted_content": "rgw1.k1.AAAAforged"}
    answer = http.post(
        "/responses",
        json={"model": MODELS[kind], "input": [forged, {"role": "user", "content": "hi"}]},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_encrypted_content"
    assert upstream.model_requests() == []


# -- compaction_trigger (Codex remote compaction) and the stream ------------------------------


def test_compaction_trigger_streams_exactly_one_compaction_item(
    http: httpx.Client, client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(text="Ada, tea, 42."), Turn(text="It is 42."))
    body = {
        "model": model,
        "stream": True,
        "input": [*_history(), {"type": "compaction_trigger"}],
    }
    events = parse_sse(http.post("/responses", json=body).content)
    final = check_stream(events)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.compaction.compacting",
        "response.output_item.done",
        "response.completed",
    ]
    assert [item["type"] for item in final["output"]] == ["compaction"]
    item = final["output"][0]
    assert set(item) == {"id", "type", "encrypted_content"}
    assert len(upstream.model_requests()) == 1
    assert _is_summary_request(upstream.model_requests()[0].json, wire)

    # Codex's next turn: the compaction item at the head of the input.
    nxt = client.responses.create(
        model=model, input=[item, {"role": "user", "content": "The number?"}]
    )
    assert nxt.output_text == "It is 42."
    sent = _sent_text(upstream.model_requests()[-1])
    assert "Ada, tea, 42." in sent and "Remember the number 42." not in sent


def test_strict_stream_helper_over_a_streamed_compaction(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(text="summary"))
    with client.responses.stream(
        model=model,
        input=[*_history(), {"type": "compaction_trigger"}],  # type: ignore[list-item]
    ) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.compaction.compacting" in types
    assert [item.type for item in final.output] == ["compaction"]


# -- truncation ---------------------------------------------------------------------------------

_MODEL_PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/completions")


def _model_calls(upstream: ScriptedUpstream) -> list[RecordedRequest]:
    return [
        r
        for r in upstream.model_requests()
        if r.path in _MODEL_PATHS or r.path.startswith("/model/")
    ]


def _words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def _long_input() -> list[dict[str, Any]]:
    return [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": _words(250, "old")},
        {"role": "assistant", "content": _words(250, "older-answer")},
        {"type": "function_call", "call_id": "call_a", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_a", "output": _words(200, "result")},
        {"role": "assistant", "content": _words(100, "middle")},
        {"role": "user", "content": "latest question"},
    ]


def test_truncation_auto_drops_oldest_keeping_pairs_and_instructions(
    small: openai.OpenAI, upstream: ScriptedUpstream, wire: str
) -> None:
    upstream.push(Turn(text="fits"))
    answer = small.responses.create(
        model=SMALL[wire],
        instructions="Answer in one word.",
        input=_long_input(),  # type: ignore[arg-type]
        truncation="auto",
    )
    assert answer.output_text == "fits"
    assert answer.usage is not None and answer.usage.input_tokens <= WINDOW
    sent = _sent_text(_model_calls(upstream)[0])
    assert "Be brief." in sent and "Answer in one word." in sent and "latest question" in sent
    assert "old0 " not in sent  # the oldest message went first
    assert ("call_a" in sent) == ("result0" in sent)  # a call never without its output


def test_truncation_disabled_over_the_window_is_400_before_any_model_call(
    small: openai.OpenAI, upstream: ScriptedUpstream, wire: str
) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        small.responses.create(model=SMALL[wire], input=_long_input())  # type: ignore[arg-type]
    assert raised.value.code == "context_length_exceeded"
    assert raised.value.body["param"] == "input"  # type: ignore[index]
    assert _model_calls(upstream) == []


# -- upstream context-length errors -----------------------------------------------------------

WORDINGS = {
    "vllm": {
        "object": "error",
        "message": "This model's maximum context length is 4096 tokens. However, you requested "
        "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length "
        "of the messages or completion.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    },
    "llama.cpp": {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        }
    },
    "openrouter": {
        "error": {
            "message": "This endpoint's maximum context length is 8192 tokens. However, you "
            "requested about 9000 tokens (9000 of text input). Please reduce the length of "
            'either one, or use the "middle-out" transform to compress your prompt '
            "automatically.",
            "code": 400,
        }
    },
    "bedrock": {"message": "Input is too long for requested model."},
    "bedrock-anthropic": {
        "message": "The model returned the following errors: input length and `max_tokens` "
        "exceed context limit: 190000 + 20000 > 200000, decrease input length or `max_tokens` "
        "and try again"
    },
    "bedrock-nova": {
        "message": "Too many input tokens. Max input tokens: 300000, request input "
        "token count: 300001"
    },
    "openai": {
        "error": {
            "message": "Your input exceeds the context window of this model. Please adjust "
            "your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    },
}


def test_upstream_context_length_errors_map_to_one_openai_error(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    seen = []
    for body in WORDINGS.values():
        upstream.push(Turn(status=400, error_body=body))
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(model=model, input="hi")
        seen.append(raised.value.body)
    assert seen == [
        {
            "message": "Your input exceeds the context window of this model. Please adjust "
            "your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    ] * len(WORDINGS)


def test_other_upstream_400s_are_not_mistaken_for_context_length(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn.http_error(400, "temperature must be at most 2", param="temperature"))
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model=model, input="hi")
    assert raised.value.code != "context_length_exceeded"


# -- token counts -------------------------------------------------------------------------------


def test_input_tokens_equal_the_upstream_tokenizer(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    body: dict[str, Any] = {
        "model": model,
        "instructions": "You count words.",
        "input": [
            {"role": "user", "content": "one two three four"},
            {"role": "assistant", "content": "five six"},
            {"role": "user", "content": "seven eight nine ten eleven"},
        ],
    }
    if wire == "bedrock":
        pytest.skip("Bedrock's CountTokens is not called yet: its counts are estimates")
    raw = client.responses.input_tokens.with_raw_response.count(**body)
    counted = raw.parse()
    assert raw.headers["x-token-count-source"] == ("harmony" if wire == "harmony" else "upstream")
    upstream.push(Turn(text="ok"))
    created = client.responses.create(**body)
    assert created.usage is not None
    assert counted.input_tokens == created.usage.input_tokens
    if wire == "chat":
        tokenize = [r for r in upstream.requests if r.path == "/tokenize"]
        assert tokenize and tokenize[0].json["add_generation_prompt"] is True


def test_input_tokens_without_a_model_is_an_estimate(http: httpx.Client) -> None:
    answer = http.post("/responses/input_tokens", json={"input": "a b c d e f g h"})
    assert answer.status_code == 200
    assert answer.headers["x-token-count-source"] == "estimate"
    assert answer.json()["object"] == "response.input_tokens"


# -- context_management over a long chain --------------------------------------------------


def _prompt_tokens(request: RecordedRequest) -> int:
    body = as_chat(request)  # Bedrock's Converse: as chat
    if request.path == "/v1/completions":
        return len(body["prompt"])
    counted = (
        body.get("messages") if "messages" in body else [body["input"], body.get("instructions")]
    )
    return sum(len(text.split()) for text in _strings(counted))


def _strings(value: Any, key: str | None = None) -> list[str]:
    if key in ("role", "type", "id", "call_id", "name", "model", "status"):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, k)]
    return []


@pytest.mark.stores("sqlite")  # moto walks its whole table on every Query: 200 turns x 3 wires
# of chained records (each with its item index and usage ledger rows) would cost it minutes; the
# store's chain behaviour runs on both stores in test_state.py
def test_chain_of_200_turns_stays_under_a_small_window(
    small: openai.OpenAI, upstream: ScriptedUpstream, wire: str
) -> None:
    def answer(body: dict[str, Any], kind: Any) -> Turn:
        if _is_summary_request(body, wire):
            return Turn(text="The user has been counting turns; all answered.")
        return Turn(text="Noted, carry on.")

    upstream.push(*([answer] * 400))
    previous: str | None = None
    compactions = 0
    for turn in range(200):
        response = small.responses.create(
            model=SMALL[wire],
            input=f"Turn {turn}: please note the words alpha beta gamma delta epsilon.",
            previous_response_id=previous,
            context_management=[{"type": "compaction", "compact_threshold": 300}],
        )
        assert response.status == "completed" and response.output_text == "Noted, carry on."
        compactions += sum(1 for item in response.output if item.type == "compaction")
        previous = response.id
    calls = _model_calls(upstream)
    assert compactions >= 5
    assert len(calls) == 200 + compactions
    assert max(_prompt_tokens(call) for call in calls) <= WINDOW


# -- openai-agents: a long session with its Responses compaction support -------------------------


async def test_agents_long_session_compacts_through_the_gateway(
    small_gateway: RunningServer, upstream: ScriptedUpstream
) -> None:
    from agents import (
        Agent,
        OpenAIResponsesCompactionSession,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        SQLiteSession,
    )
    from openai import AsyncOpenAI

    def answer(body: dict[str, Any], kind: Any) -> Turn:
        if _is_summary_request(body, "chat"):
            return Turn(text="The user sent numbered notes; each was acknowledged.")
        return Turn(text="Acknowledged.")

    upstream.push(*([answer] * 80))
    client = AsyncOpenAI(base_url=f"{small_gateway.url}/v1", api_key="sk-client", max_retries=0)
    agent = Agent(
        name="notes",
        instructions="Acknowledge notes.",
        model=OpenAIResponsesModel(model="gpt-4.1", openai_client=client),
    )
    session = OpenAIResponsesCompactionSession(
        "notes", SQLiteSession("notes"), client=client, model="gpt-4.1"
    )
    for turn in range(25):
        result = await Runner.run(
            agent,
            f"Note {turn}: remember it.",
            session=session,
            run_config=RunConfig(tracing_disabled=True),
        )
        assert result.final_output == "Acknowledged."

    items = await session.get_items()
    assert any(item.get("type") == "compaction" for item in items)  # type: ignore[union-attr]
    summaries = [r for r in _model_calls(upstream) if _is_summary_request(r.json, "chat")]
    assert len(summaries) >= 2
    last = _sent_text(_model_calls(upstream)[-1])
    assert "The user sent numbered notes" in last and "Note 0:" not in last


def test_truncation_disabled_streamed_is_a_real_400_too(
    small_gateway: RunningServer, upstream: ScriptedUpstream
) -> None:
    body = {"model": SMALL["chat"], "input": _long_input(), "stream": True}
    answer = httpx.post(f"{small_gateway.url}/v1/responses", json=body, timeout=30)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "context_length_exceeded"
    assert _model_calls(upstream) == []
