"""The fake upstream's ``POST /v1/completions``: scripted turns as gpt-oss harmony completions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from typing import Any

import httpx
import pytest

from responses_gateway._vocab import harmony_encoding
from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.harmony import to_harmony_request
from responses_gateway.testing import (
    RunningServer,
    ScriptedUpstream,
    ToolCall,
    Turn,
    Usage,
    create_fake_upstream_app,
    run_in_thread,
)

DAY = date(2025, 8, 5)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}


@pytest.fixture(scope="module")
def shared_upstream() -> ScriptedUpstream:
    return ScriptedUpstream()


@pytest.fixture(scope="module")
def server(shared_upstream: ScriptedUpstream) -> Iterator[RunningServer]:
    with run_in_thread(create_fake_upstream_app(shared_upstream)) as running:
        yield running


@pytest.fixture
def upstream(shared_upstream: ScriptedUpstream) -> ScriptedUpstream:
    shared_upstream.reset()
    shared_upstream.demo = False
    return shared_upstream


@pytest.fixture(scope="module")
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{server.url}/v1", timeout=10) as client:
        yield client


def payload(text: str = "Hi", **params: Any) -> dict[str, Any]:
    call = ModelCall(
        model="gpt-oss",
        input=[{"type": "message", "role": "user", "content": text}],
        tools=[WEATHER],
        params=params,
    )
    return to_harmony_request(call, DAY)


def stream(http: httpx.Client, body: dict[str, Any]) -> list[Any]:
    """The ``data:`` payloads of a streamed answer (``[DONE]`` as a string)."""
    answer = http.post("/completions", json=body)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    out: list[Any] = []
    for frame in answer.text.split("\n\n"):
        if frame.startswith("data: "):
            data = frame[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def texts(chunks: list[Any]) -> list[str]:
    return [c["choices"][0]["text"] for c in chunks if isinstance(c, dict) and c.get("choices")]


def test_text_turn_streams_one_token_per_chunk_then_finish_usage_and_done(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hello there", usage=Usage(7, 3)))
    chunks = stream(http, payload())
    assert texts(chunks) == ["<|channel|>", "final", "<|message|>", "Hello", " there", ""]
    assert chunks[0] == {
        "id": "cmpl-up000001",
        "object": "text_completion",
        "created": chunks[0]["created"],
        "model": "gpt-oss",
        "choices": [{"index": 0, "text": "<|channel|>", "logprobs": None, "finish_reason": None}],
        "usage": None,
    }
    assert [c["choices"][0]["finish_reason"] for c in chunks[:6]] == [None] * 5 + ["stop"]
    assert chunks[6]["choices"] == []
    assert chunks[6]["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "total_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert chunks[7:] == ["[DONE]"]


def test_reasoning_preamble_and_parallel_calls_render_as_harmony_messages(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(
        Turn(
            reasoning="Two cities.",
            text="Checking.",
            tool_calls=[
                ToolCall("get_weather", '{"city":"Oslo"}', "ignored"),
                ToolCall("get_weather", '{"city":"Rome"}'),
            ],
        )
    )
    assert "".join(texts(stream(http, payload()))) == (
        "<|channel|>analysis<|message|>Two cities.<|end|>"
        "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
        '<|message|>{"city":"Oslo"}<|call|>'
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
        '<|message|>{"city":"Rome"}'
    )


@pytest.mark.parametrize(
    ("turn", "ending"),
    [
        (Turn(text="Bye", stop_in_text=True), "Bye<|return|>"),
        (Turn(tool_calls=[ToolCall("f", "{}")], stop_in_text=True), "{}<|call|>"),
        (Turn(text="Cut", finish="length", stop_in_text=True), "Cut"),
    ],
)
def test_stop_in_text_sends_the_stop_token_of_a_finished_turn(
    http: httpx.Client, upstream: ScriptedUpstream, turn: Turn, ending: str
) -> None:
    upstream.push(turn)
    chunks = stream(http, payload())
    assert "".join(texts(chunks)).endswith("<|message|>" + ending)
    assert chunks[-3]["choices"][0]["finish_reason"] == turn.finish


def test_chunk_size_splits_the_text_across_special_tokens(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hi", chunk_size=4))
    assert texts(stream(http, payload()))[:-1] == [
        "<|ch",
        "anne",
        "l|>f",
        "inal",
        "<|me",
        "ssag",
        "e|>H",
        "i",
    ]


def test_default_usage_counts_prompt_and_completion_tokens(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hello there"))
    body = payload()
    chunks = stream(http, body)
    assert chunks[-2]["usage"]["prompt_tokens"] == len(body["prompt"])
    assert chunks[-2]["usage"]["completion_tokens"] == 5


@pytest.mark.parametrize(("end", "tail"), [("no_done", 2), ("eof", 0)])
def test_end_knob_drops_done_or_everything_after_the_text(
    http: httpx.Client, upstream: ScriptedUpstream, end: str, tail: int
) -> None:
    upstream.push(Turn(text="Hi", end=end))  # type: ignore[arg-type]
    chunks = stream(http, payload())
    assert len(chunks) == 4 + tail and "[DONE]" not in chunks


def test_role_only_streams_one_empty_text_chunk_then_done(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hi", role_only=True))
    chunks = stream(http, {**payload(), "stream_options": {"include_usage": True}})
    assert chunks[1:] == ["[DONE]"]
    assert chunks[0]["choices"] == [
        {"index": 0, "text": "", "logprobs": None, "finish_reason": None}
    ]
    assert chunks[0]["usage"] is None


def test_error_event_after_sends_an_error_chunk_and_ends(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="one two", error_event_after=4))
    chunks = stream(http, payload())
    assert texts(chunks) == ["<|channel|>", "final", "<|message|>", "one"]
    assert chunks[4:] == [
        {
            "error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": "server_error",
            }
        }
    ]


def test_http_error_answers_before_any_chunk(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn.http_error(429, "Slow down.", headers={"retry-after": "2"}))
    answer = http.post("/completions", json=payload())
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "2"
    assert answer.json()["error"]["code"] == "rate_limit_exceeded"


def test_drop_after_cuts_the_connection(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="one two three", drop_after=4))
    with pytest.raises(httpx.RemoteProtocolError):
        http.post("/completions", json=payload())


def test_non_streaming_answer_is_a_text_completion(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hello", finish="length", usage=Usage(4, 1)))
    answer = http.post("/completions", json={**payload(), "stream": False}).json()
    assert answer["object"] == "text_completion"
    assert answer["choices"] == [
        {
            "index": 0,
            "text": "<|channel|>final<|message|>Hello",
            "logprobs": None,
            "finish_reason": "length",
        }
    ]
    assert answer["usage"]["completion_tokens"] == 1


def test_recording_decodes_the_prompt_from_token_ids_or_text(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a"), Turn(text="b"))
    body = payload("Weather in Oslo?")
    stream(http, body)
    text = harmony_encoding().decode(body["prompt"])
    stream(http, {**body, "prompt": text})
    first, second = upstream.model_requests()
    assert first.path == "/v1/completions"
    assert first.json == body
    assert first.prompt == second.prompt == text
    assert text.endswith("<|start|>user<|message|>Weather in Oslo?<|end|><|start|>assistant")


def test_prompt_that_is_not_text_or_token_ids_is_400(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    answer = http.post("/completions", json={"model": "m", "prompt": {"x": 1}})
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "prompt"
    assert upstream.model_requests()[0].prompt is None


def test_demo_model_reads_the_harmony_prompt_and_its_tools(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.demo = True
    weather = "".join(texts(stream(http, payload("What is the weather in Paris?"))))
    assert weather.endswith("to=functions.get_weather<|channel|>commentary <|constrain|>json"
                            '<|message|>{"city": "Paris"}')  # fmt: skip
    hello = "".join(texts(stream(http, payload("Hello there", max_output_tokens=2))))
    assert hello == "<|channel|>final<|message|>Hello! You"


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        ({"type": "json_object"}, {"answer": "Hello! You said: Hi"}),
        ({"type": "json_schema", "name": "r",
          "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
         {"ok": True}),
    ],
)  # fmt: skip
def test_the_demo_reads_the_response_format_back_and_answers_json(
    http: httpx.Client, upstream: ScriptedUpstream, fmt: dict[str, Any], expected: Any
) -> None:
    upstream.demo = True
    call = ModelCall(
        model="gpt-oss",
        input=[{"type": "message", "role": "user", "content": "Hi"}],
        params={"text": {"format": fmt}},
    )
    body = {**to_harmony_request(call, DAY), "stream": False}
    answer = http.post("/completions", json=body)
    assert answer.status_code == 200
    text = answer.json()["choices"][0]["text"]
    assert json.loads(text.split("<|message|>")[-1]) == expected
