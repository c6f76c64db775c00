"""TokenCounter: the upstream's tokenizer first (vLLM, llama.cpp, Responses), else local."""

from __future__ import annotations

import json
from typing import Any

import httpx

from responses_gateway.adapters.base import ModelCall
from responses_gateway.config import Provider
from responses_gateway.context.tokens import TokenCounter, estimate, is_openai_model, upper_bound

CALL = ModelCall(
    model="m",
    input=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    instructions="Be brief.",
)
PROVIDER = Provider("p", "http://u/v1", api_key="sk-up")


def _counter(answers: dict[str, Any], seen: list[tuple[str, Any]]) -> TokenCounter:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        seen.append((request.url.path, body))
        assert request.headers["authorization"] == "Bearer sk-up"
        answer = answers.get(request.url.path)
        if answer is None:
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json=answer)

    return TokenCounter(httpx.AsyncClient(transport=httpx.MockTransport(handler)))


async def test_chat_wire_uses_vllm_tokenize_with_the_chat_messages() -> None:
    seen: list[tuple[str, Any]] = []
    counter = _counter({"/tokenize": {"count": 17, "max_model_len": 4096}}, seen)
    counted = await counter.count(PROVIDER, "chat", CALL)
    assert (counted.tokens, counted.source) == (17, "upstream")
    path, body = seen[0]
    assert path == "/tokenize" and body["model"] == "m" and body["add_generation_prompt"] is True
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


async def test_chat_wire_llamacpp_templates_then_tokenizes_content() -> None:
    seen: list[tuple[str, Any]] = []
    answers = {"/apply-template": {"prompt": "<s>hi"}, "/tokenize": {"tokens": [1, 2, 3]}}
    counter = _counter(answers, seen)
    counted = await counter.count(PROVIDER, "chat", CALL)
    assert (counted.tokens, counted.source) == (3, "upstream")
    assert [p for p, _ in seen] == ["/tokenize", "/apply-template", "/tokenize"]
    assert seen[-1][1] == {"content": "<s>hi"}
    seen.clear()
    await counter.count(PROVIDER, "chat", CALL)  # the dialect is remembered
    assert [p for p, _ in seen] == ["/apply-template", "/tokenize"]


async def test_chat_wire_without_tokenizer_estimates_and_stops_asking() -> None:
    seen: list[tuple[str, Any]] = []
    counter = _counter({}, seen)
    counted = await counter.count(PROVIDER, "chat", CALL)
    assert (counted.tokens, counted.source) == (estimate(CALL), "estimate")
    asked = len(seen)
    await counter.count(PROVIDER, "chat", CALL)
    assert len(seen) == asked


async def test_responses_wire_asks_the_upstream_input_tokens() -> None:
    seen: list[tuple[str, Any]] = []
    counter = _counter({"/v1/responses/input_tokens": {"input_tokens": 9}}, seen)
    counted = await counter.count(PROVIDER, "responses", CALL)
    assert (counted.tokens, counted.source) == (9, "upstream")
    assert "stream" not in seen[0][1] and "store" not in seen[0][1]


async def test_responses_wire_without_input_tokens_counts_o200k_locally() -> None:
    counter = _counter({}, [])
    counted = await counter.count(PROVIDER, "responses", CALL)
    assert counted.source == "o200k" and 0 < counted.tokens < upper_bound(CALL)


async def test_harmony_wire_counts_the_rendered_prompt() -> None:
    from datetime import UTC, datetime

    from responses_gateway.adapters.harmony import render_prompt

    counted = await _counter({}, []).count(PROVIDER, "harmony", CALL)
    assert counted.source == "harmony"
    assert counted.tokens == len(render_prompt(CALL, datetime.now(UTC).date()))


def test_is_openai_model() -> None:
    assert is_openai_model("gpt-4.1") and is_openai_model("openai/o3-mini")
    assert not is_openai_model("llama-3-8b") and not is_openai_model("qwen2.5")
