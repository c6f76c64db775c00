"""The fake upstream speaks the real Chat Completions and Responses wire formats, knob by knob.

One server for the whole module (``server``); ``upstream`` is reset before every test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pydantic
import pytest
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from responses_gateway.testing import (
    RecordedRequest,
    RunningServer,
    ScriptedUpstream,
    ToolCall,
    Turn,
    Usage,
    create_fake_upstream_app,
    demo_turn,
    fake_upstream,
    run_in_thread,
)

EVENT = pydantic.TypeAdapter(ResponseStreamEvent)
WEATHER_CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
CALLS = [
    ToolCall("get_weather", '{"city": "Paris"}', "call_a"),
    ToolCall("get_time", '{"zone": "CET"}', "call_b"),
]


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
    shared_upstream.demo = True
    shared_upstream.models = []
    shared_upstream.responses_only_models = set()
    shared_upstream.context_windows = {}
    return shared_upstream


@pytest.fixture(scope="module")
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        yield client


@pytest.fixture(scope="module")
def sdk(server: RunningServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0) as client:
        yield client


# -- helpers ------------------------------------------------------------------------------------


def chat_body(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


def chat_stream(http: httpx.Client, **extra: Any) -> list[Any]:
    """The raw ``data:`` payloads of a chat stream: dicts, or the string ``[DONE]``."""
    with http.stream("POST", "/v1/chat/completions", json=chat_body(stream=True, **extra)) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in r.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    payloads = [line.removeprefix("data: ") for line in lines]
    return [p if p == "[DONE]" else json.loads(p) for p in payloads]


def chunks_of(payloads: list[Any]) -> list[dict[str, Any]]:
    return [p for p in payloads if isinstance(p, dict)]


def deltas(payloads: list[Any]) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks_of(payloads) if c["choices"]]


def call_entries(payloads: list[Any]) -> list[dict[str, Any]]:
    return [e for d in deltas(payloads) for e in d.get("tool_calls", [])]


def responses_stream(http: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    body = {"model": "m", "input": "hi", "stream": True, **body}
    with http.stream("POST", "/v1/responses", json=body) as r:
        assert r.status_code == 200
        text = r.read().decode()
    events = []
    for frame in text.split("\n\n"):
        if not frame:
            continue
        event_line, data_line = frame.split("\n")
        data = json.loads(data_line.removeprefix("data: "))
        assert event_line == f"event: {data['type']}"
        events.append(data)
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


# -- chat: stream shape -------------------------------------------------------------------------


def test_chat_stream_text_is_real_chunks_word_by_word(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hello brave world"))

    payloads = chat_stream(http)

    assert payloads[-1] == "[DONE]"
    chunks = chunks_of(payloads)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
        assert "usage" not in chunk  # only when stream_options.include_usage
    assert {c["id"] for c in chunks} == {"chatcmpl-up000001"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"m"}
    assert deltas(payloads) == [
        {"role": "assistant", "content": ""},
        {"content": "Hello"},
        {"content": " brave"},
        {"content": " world"},
        {},
    ]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert finishes == [None, None, None, None, "stop"]
    assert all(c["choices"][0]["logprobs"] is None for c in chunks)


def test_chat_stream_usage_chunk_when_requested(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a b", usage=Usage(7, 3, reasoning_tokens=1, cached_tokens=2)))

    payloads = chat_stream(http, stream_options={"include_usage": True})

    chunks = chunks_of(payloads)
    assert all(c["usage"] is None for c in chunks[:-1])
    last = chunks[-1]
    assert last["choices"] == []
    assert last["usage"]["prompt_tokens"] == 7
    assert last["usage"]["completion_tokens"] == 3
    assert last["usage"]["total_tokens"] == 10
    assert last["usage"]["prompt_tokens_details"]["cached_tokens"] == 2
    assert last["usage"]["completion_tokens_details"]["reasoning_tokens"] == 1
    ChatCompletionChunk.model_validate(last)
    assert payloads[-1] == "[DONE]"


def test_chat_stream_usage_chunk_can_be_withheld(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a", usage_chunk=False))

    payloads = chat_stream(http, stream_options={"include_usage": True})

    assert all(c["choices"] and c["usage"] is None for c in chunks_of(payloads))


def test_chat_stream_chunk_size_splits_text_and_arguments(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="abcdefg", tool_calls=[ToolCall("f", '{"a":1}')], chunk_size=3))

    payloads = chat_stream(http)

    assert [d["content"] for d in deltas(payloads)[1:4]] == ["abc", "def", "g"]
    fragments = [e["function"]["arguments"] for e in call_entries(payloads)]
    assert fragments == ["", '{"a', '":1', "}"]


def test_chat_stream_tool_calls_default_header_then_three_fragments(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(tool_calls=CALLS))

    payloads = chat_stream(http)

    entries = call_entries(payloads)
    assert entries[0] == {
        "index": 0,
        "id": "call_a",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    first = [e for e in entries if e["index"] == 0]
    assert len(first) == 4
    assert all(set(e) == {"index", "function"} for e in first[1:])
    assert all(set(e["function"]) == {"arguments"} for e in first[1:])
    assert "".join(e["function"]["arguments"] for e in first) == CALLS[0].arguments
    second = [e for e in entries if e["index"] == 1]
    assert second[0]["id"] == "call_b"
    assert "".join(e["function"]["arguments"] for e in second) == CALLS[1].arguments
    assert entries.index(second[0]) == len(first)  # not interleaved
    assert all(len(d.get("tool_calls", [])) <= 1 for d in deltas(payloads))
    assert chunks_of(payloads)[-1]["choices"][0]["finish_reason"] == "tool_calls"
    for chunk in chunks_of(payloads):
        ChatCompletionChunk.model_validate(chunk)


def test_chat_stream_generated_call_ids_are_deterministic(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("f", "{}"), ToolCall("g", "{}")]))

    entries = call_entries(chat_stream(http))

    assert [e["id"] for e in entries if "id" in e] == ["call_up000001", "call_up000002"]


def test_chat_stream_ids_on_every_chunk(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(tool_calls=CALLS[:1], tool_call_ids="every"))

    entries = call_entries(chat_stream(http))

    assert len(entries) == 4
    assert all(e["id"] == "call_a" and e["type"] == "function" for e in entries)
    assert all(e["function"]["name"] == "get_weather" for e in entries)


def test_chat_stream_omitted_index(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(tool_calls=CALLS, tool_call_index="omit"))

    entries = call_entries(chat_stream(http))

    assert entries and all("index" not in e for e in entries)
    assert [e["id"] for e in entries if "id" in e] == ["call_a", "call_b"]


def test_chat_stream_single_chunk_arguments(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(tool_calls=CALLS, arguments_mode="single"))

    entries = call_entries(chat_stream(http))

    assert entries == [
        {
            "index": 0,
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": CALLS[0].arguments},
        },
        {
            "index": 1,
            "id": "call_b",
            "type": "function",
            "function": {"name": "get_time", "arguments": CALLS[1].arguments},
        },
    ]


def test_chat_stream_arguments_in_the_finish_chunk(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(tool_calls=CALLS, arguments_mode="final_chunk"))

    payloads = chat_stream(http)

    chunks = chunks_of(payloads)
    last = chunks[-1]["choices"][0]
    assert last["finish_reason"] == "tool_calls"
    assert last["delta"]["tool_calls"] == [
        {"index": 0, "function": {"arguments": CALLS[0].arguments}},
        {"index": 1, "function": {"arguments": CALLS[1].arguments}},
    ]
    headers = call_entries(payloads[:-2])
    assert [e["function"] for e in headers] == [
        {"name": "get_weather", "arguments": ""},
        {"name": "get_time", "arguments": ""},
    ]


def test_chat_stream_interleaved_calls_index_one_first(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(tool_calls=CALLS, interleave=True))

    entries = call_entries(chat_stream(http))

    assert [e["index"] for e in entries] == [1, 0, 1, 0, 1, 0, 1, 0]
    for index, call in enumerate(CALLS):
        mine = [e for e in entries if e["index"] == index]
        assert mine[0]["id"] == call.call_id
        assert "".join(e["function"]["arguments"] for e in mine) == call.arguments


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_chat_stream_reasoning_field(
    http: httpx.Client, upstream: ScriptedUpstream, field: str
) -> None:
    upstream.push(Turn(reasoning="think hard", text="ok", reasoning_field=field))  # type: ignore[arg-type]

    ds = deltas(chat_stream(http))

    assert ds[1:3] == [{field: "think"}, {field: " hard"}]
    assert ds[3] == {"content": "ok"}


def test_chat_stream_end_without_done(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="a", end="no_done"))

    payloads = chat_stream(http, stream_options={"include_usage": True})

    assert "[DONE]" not in payloads
    assert payloads[-2]["choices"][0]["finish_reason"] == "stop"
    assert payloads[-1]["choices"] == []


def test_chat_stream_role_only_is_the_role_delta_then_done(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a b", role_only=True))

    payloads = chat_stream(http, stream_options={"include_usage": True})

    assert payloads[1:] == ["[DONE]"]
    assert payloads[0]["choices"] == [
        {"index": 0, "delta": {"role": "assistant"}, "logprobs": None, "finish_reason": None}
    ]
    assert payloads[0]["usage"] is None


def test_chat_stream_role_only_leaves_the_unstreamed_answer_whole(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a b", role_only=True))

    answer = http.post("/v1/chat/completions", json=chat_body()).json()

    assert answer["choices"][0]["message"]["content"] == "a b"


def test_chat_stream_plain_eof(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="a b", tool_calls=CALLS[:1], end="eof"))

    payloads = chat_stream(http, stream_options={"include_usage": True})

    assert "[DONE]" not in payloads
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks_of(payloads))
    assert all(c["usage"] is None for c in chunks_of(payloads))
    assert "".join(e["function"]["arguments"] for e in call_entries(payloads)) == (
        CALLS[0].arguments
    )


def test_chat_stream_eof_with_final_chunk_arguments_still_sends_them(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(tool_calls=CALLS[:1], end="eof", arguments_mode="final_chunk"))

    payloads = chat_stream(http)

    last = payloads[-1]["choices"][0]
    assert last["finish_reason"] is None
    assert last["delta"]["tool_calls"][0]["function"]["arguments"] == CALLS[0].arguments


@pytest.mark.parametrize(
    ("finish", "expected"), [("length", "length"), ("content_filter", "content_filter")]
)
def test_chat_stream_finish_reasons(
    http: httpx.Client, upstream: ScriptedUpstream, finish: str, expected: str
) -> None:
    upstream.push(Turn(text="cut", tool_calls=CALLS[:1], finish=finish))  # type: ignore[arg-type]

    payloads = chat_stream(http)

    assert payloads[-2]["choices"][0]["finish_reason"] == expected


def test_chat_stream_error_event(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="one two three four", error_event_after=3))

    payloads = chat_stream(http)

    assert len(payloads) == 4
    assert payloads[-1] == {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": "server_error",
        }
    }
    assert [d.get("content") for d in deltas(payloads[:3])] == ["", "one", " two"]


def test_chat_stream_error_event_uses_error_body_and_never_passes_done(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    body = {"error": {"message": "overloaded", "type": "server_error", "code": "x", "param": None}}
    upstream.push(Turn(text="a", error_event_after=99, error_body=body))

    payloads = chat_stream(http)

    assert payloads[-1] == body
    assert "[DONE]" not in payloads
    assert payloads[-2]["choices"][0]["finish_reason"] == "stop"


def test_chat_stream_error_event_raises_in_the_sdk(
    sdk: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="one two three", error_event_after=2))

    stream = sdk.chat.completions.create(model="m", messages=[], stream=True)
    with pytest.raises(openai.APIError, match="processing your request"):
        for _ in stream:
            pass


def test_chat_stream_drop_is_a_transport_error_after_n_events(
    server: RunningServer, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="one two three four five", drop_after=3))
    received: list[str] = []

    with (
        httpx.Client(base_url=server.url) as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/v1/chat/completions", json=chat_body(stream=True)) as r,
    ):
        received.extend(line for line in r.iter_lines() if line)

    assert len(received) == 3


def test_chat_stream_drop_after_everything_still_never_ends_cleanly(
    server: RunningServer, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a", drop_after=1000))

    with (
        httpx.Client(base_url=server.url) as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/v1/chat/completions", json=chat_body(stream=True)) as r,
    ):
        r.read()


def test_non_stream_drop_is_a_transport_error(
    server: RunningServer, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="hello", drop_after=0))

    with httpx.Client(base_url=server.url) as client, pytest.raises(httpx.RemoteProtocolError):
        client.post("/v1/chat/completions", json=chat_body())


def test_a_server_that_cannot_stream_answers_200_then_drops_before_any_event(
    server: RunningServer, upstream: ScriptedUpstream
) -> None:
    # llama-cpp-python's server: 200, the event stream started, then an abort inside it
    upstream.cannot_stream = lambda body, wire: True
    received: list[str] = []
    try:
        for path, body in [
            ("/v1/chat/completions", chat_body(stream=True)),
            ("/v1/responses", {"input": "x", "stream": True}),
        ]:
            with (
                httpx.Client(base_url=server.url) as client,
                pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
                client.stream("POST", path, json=body) as r,
            ):
                assert r.status_code == 200
                assert r.headers["content-type"].startswith("text/event-stream")
                received.extend(line for line in r.iter_lines() if line)
    finally:
        upstream.cannot_stream = None
    assert received == []
    assert len(upstream.model_requests()) == 2


def test_a_drop_cut_mid_event_leaves_half_an_event(
    server: RunningServer, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="one two three", drop_after=1, cut_mid_event=True))
    raw = bytearray()

    with (
        httpx.Client(base_url=server.url) as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/v1/chat/completions", json=chat_body(stream=True)) as r,
    ):
        for chunk in r.iter_raw():
            raw.extend(chunk)

    first, rest = bytes(raw).split(b"\n\n", 1)
    assert json.loads(first.removeprefix(b"data: "))["choices"][0]["delta"]["role"] == "assistant"
    assert rest.startswith(b"data: {") and not rest.endswith(b"\n\n")


def test_garbage_after_sends_an_undecodable_event_and_ends(
    server: RunningServer, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="one two", garbage_after=1))

    with httpx.Client(base_url=server.url) as client:
        r = client.post("/v1/chat/completions", json=chat_body(stream=True))

    events = [line for line in r.text.split("\n\n") if line]
    assert r.status_code == 200 and len(events) == 2
    with pytest.raises(ValueError):
        json.loads(events[1].removeprefix("data: "))


@pytest.mark.parametrize("stream", [True, False])
def test_error_as_200_answers_an_error_object_with_200(
    server: RunningServer, upstream: ScriptedUpstream, stream: bool
) -> None:
    upstream.push(Turn(error_as_200=True, error_body={"error": {"message": "no", "code": "x"}}))

    with httpx.Client(base_url=server.url) as client:
        r = client.post("/v1/responses", json={"input": "x", "stream": stream})

    assert (r.status_code, r.json()) == (200, {"error": {"message": "no", "code": "x"}})


def test_drop_in_process_raises_an_httpx_transport_error(upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="hello", drop_after=1))
    transport = httpx.ASGITransport(app=create_fake_upstream_app(upstream))

    async def call() -> None:
        async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
            await client.post("/v1/responses", json={"input": "x", "stream": True})

    with pytest.raises(httpx.RemoteProtocolError):
        asyncio.run(call())


# -- chat: non-stream and the SDK ------------------------------------------------------------------


def test_chat_non_stream_parses_with_the_sdk(
    sdk: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Sure.", reasoning="why not", tool_calls=CALLS))

    completion = sdk.chat.completions.create(
        model="gpt-x", messages=[{"role": "user", "content": "q"}]
    )

    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "gpt-x"
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Sure."
    assert (choice.message.model_extra or {})["reasoning_content"] == "why not"
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [  # type: ignore[union-attr]
        ("call_a", "get_weather", CALLS[0].arguments),
        ("call_b", "get_time", CALLS[1].arguments),
    ]
    assert completion.usage is not None and completion.usage.total_tokens > 0


def test_chat_non_stream_plain_text_has_no_tool_calls(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="x", finish="length"))

    body = http.post("/v1/chat/completions", json=chat_body()).json()

    message = body["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "x", "refusal": None}
    assert body["choices"][0]["finish_reason"] == "length"


def test_chat_stream_parses_with_the_sdk(sdk: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="Hi there", reasoning="hmm", tool_calls=CALLS, interleave=True))

    stream = sdk.chat.completions.create(
        model="m", messages=[], stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hi there"
    assert chunks[-1].usage is not None
    args: dict[int, str] = {}
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            args[call.index] = args.get(call.index, "") + (call.function.arguments or "")  # type: ignore[union-attr]
    assert args == {0: CALLS[0].arguments, 1: CALLS[1].arguments}


# -- HTTP errors, script control, recording ------------------------------------------------------


def test_http_error_turn(
    sdk: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn.http_error(429, "slow down", headers={"retry-after": "7"}))
    upstream.push(Turn.http_error(503))

    r = http.post("/v1/chat/completions", json=chat_body(stream=True))
    assert r.status_code == 429
    assert r.headers["retry-after"] == "7"
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {
        "error": {
            "message": "slow down",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    with pytest.raises(openai.InternalServerError):
        sdk.responses.create(model="m", input="x")


def test_http_error_status_without_body_gets_an_envelope(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(status=400))

    r = http.post("/v1/responses", json={"input": "x"})

    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_responses_only_models_refuse_chat(sdk: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.responses_only_models = {"o-pro"}
    upstream.push(Turn(text="via responses"))

    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="o-pro", messages=[])

    assert "v1/responses" in caught.value.message
    assert caught.value.code == "unsupported_api_for_model"
    assert caught.value.param == "model"
    assert upstream.pending == 1  # the refusal did not consume the turn
    response = sdk.responses.create(model="o-pro", input="x")
    assert response.output_text == "via responses"


def test_script_exhausted_is_a_500_without_demo(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.demo = False

    r = http.post("/v1/chat/completions", json=chat_body())

    assert r.status_code == 500
    assert r.json()["error"]["code"] == "script_exhausted"


def test_empty_script_falls_back_to_demo(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="scripted"))

    first = http.post("/v1/chat/completions", json=chat_body()).json()
    second = http.post("/v1/chat/completions", json=chat_body()).json()

    assert first["choices"][0]["message"]["content"] == "scripted"
    assert second["choices"][0]["message"]["content"] == "Hello! You said: hi"


def test_turn_factories_see_the_request(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(lambda body, wire: Turn(text=f"{wire}:{body['model']}"))

    r = http.post("/v1/responses", json={"model": "q", "input": "x"})

    assert r.json()["output"][0]["content"][0]["text"] == "responses:q"


def test_requests_are_recorded_as_received(
    sdk: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "hey"}])
    http.post("/v1/responses", json={"input": "x"}, headers={"X-Trace": "t1"})
    http.post("/v1/responses", content=b"{not json")

    recorded = upstream.wait_for_requests(3, timeout=5)

    assert [r.path for r in recorded] == [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/responses",
    ]
    assert recorded[0].headers["authorization"] == "Bearer sk-test"
    assert recorded[0].json == {"model": "m", "messages": [{"role": "user", "content": "hey"}]}
    assert recorded[0].method == "POST"
    assert recorded[1].headers["x-trace"] == "t1"
    assert all(name == name.lower() for r in recorded for name in r.headers)
    assert recorded[2].json == {}
    assert isinstance(recorded[0], RecordedRequest)


def test_invalid_json_is_a_400(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    r = http.post("/v1/chat/completions", content=b"[1, 2]")

    assert r.status_code == 400
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_wait_for_requests_times_out(upstream: ScriptedUpstream) -> None:
    with pytest.raises(TimeoutError):
        upstream.wait_for_requests(1, timeout=0.01)


def test_models_endpoint(sdk: openai.OpenAI, upstream: ScriptedUpstream) -> None:
    upstream.models = ["gpt-a", "demo"]
    upstream.responses_only_models = {"o-pro"}

    names = [m.id for m in sdk.models.list()]

    assert names == ["demo", "gpt-a", "o-pro"]


def test_unknown_url_is_a_json_404(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    r = http.post("/v1/nope", json={})

    assert r.status_code == 404
    assert r.json()["error"]["code"] == "unknown_url"
    assert http.get("/v1/responses").status_code == 405


def test_default_usage_counts_words(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(
        Turn(text="one two three", reasoning="a b", tool_calls=[ToolCall("f", '{"a": 1}')])
    )
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "four words are here"}]},
        ],
    }

    usage = http.post("/v1/chat/completions", json=body).json()["usage"]

    assert usage["prompt_tokens"] == 6
    assert usage["completion_tokens"] == 3 + 2 + (1 + 2)
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 2


# -- responses: stream shape ----------------------------------------------------------------------


def assert_well_formed(events: list[dict[str, Any]]) -> None:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for event in events:
        EVENT.validate_python(event)
    ids = {e["response"]["id"] for e in events if "response" in e}
    assert len(ids) == 1


def test_responses_stream_text_canonical_order(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hello there"))

    events = responses_stream(http, instructions="sys", metadata={"k": "v"})

    assert_well_formed(events)
    assert types(events) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    created = events[0]["response"]
    assert (
        created["status"] == "in_progress" and created["output"] == [] and created["usage"] is None
    )
    assert created["id"] == "resp_up000001"
    assert created["instructions"] == "sys" and created["metadata"] == {"k": "v"}
    added = events[2]["item"]
    assert added == {
        "id": "msg_up000001",
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    assert [e["delta"] for e in events[4:6]] == ["Hello", " there"]
    assert all(e["item_id"] == "msg_up000001" and e["output_index"] == 0 for e in events[3:8])
    assert events[6]["text"] == "Hello there"
    done = events[8]["item"]
    assert done["status"] == "completed"
    assert done["content"] == [
        {"type": "output_text", "text": "Hello there", "annotations": [], "logprobs": []}
    ]
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert final["output"] == [done]
    assert final["usage"]["total_tokens"] == final["usage"]["input_tokens"] + 2


def test_responses_stream_reasoning_item(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(
        Turn(
            reasoning="raw thought",
            reasoning_summary=["First part", "Second"],
            encrypted_content="enc==",
            text="ok",
        )
    )

    events = responses_stream(http)

    assert_well_formed(events)
    assert types(events)[2:22] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
    ]
    assert events[2]["item"] == {
        "id": "rs_up000001",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "enc==",
    }
    assert [e["summary_index"] for e in events if "summary_index" in e] == [0] * 5 + [1] * 4
    item = events[17]["item"]
    assert item["summary"] == [
        {"type": "summary_text", "text": "First part"},
        {"type": "summary_text", "text": "Second"},
    ]
    assert item["content"] == [{"type": "reasoning_text", "text": "raw thought"}]
    assert item["encrypted_content"] == "enc=="
    assert events[-1]["response"]["output"][0] == item
    assert events[-1]["response"]["output"][1]["id"] == "msg_up000001"


def test_responses_stream_function_calls(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(tool_calls=CALLS))

    events = responses_stream(http, tools=[WEATHER_TOOL])

    assert_well_formed(events)
    first = [e for e in events if e.get("output_index") == 0]
    assert types(first) == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    assert first[0]["item"] == {
        "id": "fc_up000001",
        "type": "function_call",
        "call_id": "call_a",
        "name": "get_weather",
        "arguments": "",
        "status": "in_progress",
    }
    assert "".join(e["delta"] for e in first[1:4]) == CALLS[0].arguments
    assert first[4]["arguments"] == CALLS[0].arguments and first[4]["name"] == "get_weather"
    assert first[5]["item"]["status"] == "completed"
    final = events[-1]["response"]
    assert [i["call_id"] for i in final["output"]] == ["call_a", "call_b"]
    assert final["tools"] == [WEATHER_TOOL]


def test_responses_stream_arguments_only_in_done(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(tool_calls=CALLS[:1], arguments_only_in_done=True))

    events = responses_stream(http)

    assert "response.function_call_arguments.delta" not in types(events)
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert done["arguments"] == CALLS[0].arguments


@pytest.mark.parametrize(
    ("finish", "reason"), [("length", "max_output_tokens"), ("content_filter", "content_filter")]
)
def test_responses_stream_incomplete(
    http: httpx.Client, upstream: ScriptedUpstream, finish: str, reason: str
) -> None:
    upstream.push(Turn(reasoning_summary=["s"], text="partial answer", finish=finish))  # type: ignore[arg-type]

    events = responses_stream(http, max_output_tokens=16)

    assert_well_formed(events)
    last = events[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["status"] == "incomplete"
    assert last["response"]["incomplete_details"] == {"reason": reason}
    assert last["response"]["max_output_tokens"] == 16
    assert [i.get("status") for i in last["response"]["output"]] == [None, "incomplete"]
    message_done = [e for e in events if e["type"] == "response.output_item.done"][-1]
    assert message_done["item"]["status"] == "incomplete"
    assert "response.output_text.done" in types(events)


def test_responses_stream_failed_after_n_events(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a", tool_calls=CALLS, error_event_after=9))

    events = responses_stream(http)

    assert_well_formed(events)
    assert len(events) == 10
    failed = events[-1]
    assert failed["type"] == "response.failed"
    assert failed["sequence_number"] == 9
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {
        "code": "server_error",
        "message": "The server had an error while processing your request.",
    }
    assert [i["id"] for i in failed["response"]["output"]] == ["msg_up000001"]


def test_responses_stream_failure_replaces_the_terminal_event_at_the_latest(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a", error_event_after=500))

    events = responses_stream(http)

    assert types(events).count("response.completed") == 0
    assert events[-1]["type"] == "response.failed"
    assert events[-2]["type"] == "response.output_item.done"


def test_responses_stream_error_event_variant(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(
        Turn(text="a", error_event_after=2, responses_error="error", error_body={"error": {
            "message": "boom", "type": "server_error", "code": "server_error", "param": None}})
    )  # fmt: skip

    events = responses_stream(http)

    assert_well_formed(events)
    assert events[-1] == {
        "type": "error",
        "sequence_number": 2,
        "code": "server_error",
        "message": "boom",
        "param": None,
        "error": {"message": "boom", "type": "server_error", "code": "server_error", "param": None},
    }


def test_responses_stream_drop(server: RunningServer, upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text="a b c", drop_after=4))
    frames: list[str] = []

    with (
        httpx.Client(base_url=server.url) as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/v1/responses", json={"input": "x", "stream": True}) as r,
    ):
        frames.extend(line for line in r.iter_lines() if line.startswith("event: "))

    assert frames == [
        "event: response.created",
        "event: response.in_progress",
        "event: response.output_item.added",
        "event: response.content_part.added",
    ]


# -- responses: SDK ----------------------------------------------------------------------------


def test_responses_non_stream_parses_with_the_sdk(
    sdk: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(
        Turn(text="Done.", reasoning_summary=["sum"], tool_calls=CALLS, usage=Usage(5, 9, 4, 1))
    )

    response = sdk.responses.create(model="gpt-r", input="q", tools=[WEATHER_TOOL])  # type: ignore[list-item]

    assert response.id == "resp_up000001"
    assert response.status == "completed"
    assert response.model == "gpt-r"
    assert [i.type for i in response.output] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    assert response.output_text == "Done."
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 9)
    assert response.usage.output_tokens_details.reasoning_tokens == 4
    assert response.usage.input_tokens_details.cached_tokens == 1


def test_responses_stream_parses_with_the_sdk(
    sdk: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hi", reasoning="r", reasoning_summary=["s"], tool_calls=CALLS))

    events = list(sdk.responses.create(model="m", input="q", stream=True))

    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"


@pytest.mark.parametrize(
    "turn",
    [
        Turn(text="Hello world"),
        Turn(reasoning="r", reasoning_summary=["a", "b"], text="x", tool_calls=CALLS),
        Turn(tool_calls=CALLS, arguments_only_in_done=True),
        Turn(text="abc def", chunk_size=2),
    ],
)
def test_sdk_stream_helper_accepts_the_stream(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, turn: Turn
) -> None:
    upstream.push(turn)
    upstream.push(Turn(**{**_fields(turn), "error_event_after": None}))

    with sdk.responses.stream(model="m", input="q") as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()

    expected = sdk.responses.create(model="m", input="q")
    assert final.status == "completed"
    assert final.output_text == expected.output_text
    assert [i.type for i in final.output] == [i.type for i in expected.output]


def _fields(turn: Turn) -> dict[str, Any]:
    return {name: getattr(turn, name) for name in Turn.__dataclass_fields__}


# -- demo model --------------------------------------------------------------------------------


def chat_req(text: str, tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}], "tools": tools or [], **extra}


def resp_req(text: str, tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    return {"input": text, "tools": tools or [], **extra}


def test_demo_plain_text() -> None:
    assert demo_turn(chat_req("hi there"), "chat").text == "Hello! You said: hi there"
    assert demo_turn({"input": []}, "responses").text == "Hello! I am the demo model."


def test_demo_weather_tool_call_on_both_wires() -> None:
    chat = demo_turn(chat_req("What is the weather in Paris?", [WEATHER_CHAT_TOOL]), "chat")
    resp = demo_turn(resp_req("What is the weather in Paris?", [WEATHER_TOOL]), "responses")

    for turn in (chat, resp):
        assert turn.text is None
        assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
            ("get_weather", {"city": "Paris"})
        ]
        assert turn.tool_calls[0].arguments == '{"city": "Paris"}'


def test_demo_lowercase_city_after_preposition() -> None:
    turn = demo_turn(resp_req("weather in rome please", [WEATHER_TOOL]), "responses")

    assert json.loads(turn.tool_calls[0].arguments) == {"city": "rome"}


def test_demo_both_makes_two_calls_with_different_arguments() -> None:
    turn = demo_turn(resp_req("Weather in Paris and London, both", [WEATHER_TOOL]), "responses")

    assert [json.loads(c.arguments)["city"] for c in turn.tool_calls] == ["Paris", "London"]


def test_demo_parallel_tool_calls_false_makes_one_call() -> None:
    body = resp_req(
        "parallel weather in Paris and London", [WEATHER_TOOL], parallel_tool_calls=False
    )

    assert len(demo_turn(body, "responses").tool_calls) == 1


def test_demo_two_tools_mentioned() -> None:
    time_tool = {
        "type": "function",
        "name": "getCurrentTime",
        "parameters": {
            "type": "object",
            "properties": {
                "zone": {"type": "string", "enum": ["UTC", "CET"]},
                "hours": {"type": "integer"},
                "precise": {"type": "boolean"},
                "opts": {
                    "type": "object",
                    "properties": {"fmt": {"type": ["string", "null"]}},
                    "required": ["fmt"],
                },
            },
            "required": ["zone", "hours", "precise", "opts"],
        },
    }
    text = "What time is it in CET in 3 hours, and the weather in Oslo?"

    turn = demo_turn(resp_req(text, [WEATHER_TOOL, time_tool]), "responses")

    assert [c.name for c in turn.tool_calls] == ["getCurrentTime", "get_weather"]
    args = json.loads(turn.tool_calls[0].arguments)
    assert args["zone"] == "CET" and args["hours"] == 3 and args["precise"] is True
    assert isinstance(args["opts"]["fmt"], str)
    assert json.loads(turn.tool_calls[1].arguments) == {"city": "Oslo"}


def test_demo_tool_choice() -> None:
    text = "Tell me a joke"
    assert demo_turn(chat_req(text, [WEATHER_CHAT_TOOL]), "chat").tool_calls == []
    required = demo_turn(chat_req(text, [WEATHER_CHAT_TOOL], tool_choice="required"), "chat")
    assert [c.name for c in required.tool_calls] == ["get_weather"]
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert demo_turn(chat_req(text, [WEATHER_CHAT_TOOL], tool_choice=named), "chat").tool_calls
    none = demo_turn(resp_req("weather in Paris", [WEATHER_TOOL], tool_choice="none"), "responses")
    assert none.tool_calls == [] and none.text


def test_demo_tool_results_are_echoed() -> None:
    chat = {
        "messages": [
            {"role": "user", "content": "weather in Paris"},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "c1", "content": "18C"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "sunny"}]},
        ],
        "tools": [WEATHER_CHAT_TOOL],
    }
    responses = {
        "input": [
            {"role": "user", "content": "weather in Paris"},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "18C"},
        ],
        "tools": [WEATHER_TOOL],
    }

    assert demo_turn(chat, "chat").text == "The tool returned: 18C; sunny"
    assert demo_turn(responses, "responses").text == "The tool returned: 18C"
    assert demo_turn(responses, "responses").tool_calls == []


def test_demo_reasoning() -> None:
    chat = demo_turn(chat_req("think about cats"), "chat")
    assert chat.reasoning == "Let me think step by step about: think about cats"
    assert chat.text == "Hello! You said: think about cats"
    resp = demo_turn(resp_req("reasoning please"), "responses")
    assert resp.reasoning is None
    assert resp.reasoning_summary == ["Let me think step by step about: reasoning please"]
    assert resp.encrypted_content is None
    enc = demo_turn(resp_req("think", include=["reasoning.encrypted_content"]), "responses")
    assert enc.encrypted_content


def test_demo_length_limit() -> None:
    chat = demo_turn(chat_req("one two three four", max_tokens=3), "chat")
    assert (chat.text, chat.finish) == ("Hello! You said:", "length")
    fits = demo_turn(chat_req("a", max_completion_tokens=50), "chat")
    assert fits.finish == "stop"


def test_demo_through_the_server_on_responses(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    events = responses_stream(http, input="say many words here", max_output_tokens=2)

    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "Hello! You"
    assert upstream.requests[-1].json["max_output_tokens"] == 2


def test_demo_is_deterministic() -> None:
    body = resp_req("both weather in Paris and Rome, think", [WEATHER_TOOL])

    assert demo_turn(body, "responses") == demo_turn(body, "responses")


def test_usage_total() -> None:
    assert Usage(3, 4).total_tokens == 7


# -- context: windows, tokenizers, native compaction --------------------------------------------


def test_models_endpoint_reports_scripted_windows_like_vllm(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.context_windows = {"small": 512}
    data = http.get("/v1/models").json()["data"]
    assert {
        "id": "small",
        "object": "model",
        "created": 0,
        "owned_by": "fake-upstream",
        "max_model_len": 512,
    } in data


def test_tokenize_counts_words_in_every_dialect(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a b c"}]
    vllm = http.post("/tokenize", json={"model": "m", "messages": messages}).json()
    assert vllm["count"] == 5 and len(vllm["tokens"]) == 5
    assert http.post("/tokenize", json={"prompt": "x y"}).json()["count"] == 2
    template = http.post("/apply-template", json={"messages": messages}).json()["prompt"]
    assert http.post("/tokenize", json={"content": template}).json()["tokens"] == [0, 1, 2, 3, 4]
    counted = http.post(
        "/v1/responses/input_tokens", json={"input": "one two", "instructions": "three"}
    ).json()
    assert counted == {"object": "response.input_tokens", "input_tokens": 3}
    chat = chat_body(messages=messages)
    assert fake_upstream.default_usage(chat, "chat", Turn(text="")).input_tokens == vllm["count"]


def test_native_compact_returns_user_messages_and_one_opaque_item(
    sdk: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    compacted = sdk.responses.compact(
        model="m",
        input=[
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": "second"},
        ],
    )
    assert [item.type for item in compacted.output] == ["message", "message", "compaction"]
    assert compacted.output[-1].encrypted_content.startswith("upstream-opaque-")
    assert upstream.compactions == 1 and compacted.object == "response.compaction"


def test_demo_answers_json_when_the_request_asks_for_it() -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    }
    chat_object = demo_turn(chat_req("Hi", response_format={"type": "json_object"}), "chat")
    chat_schema = demo_turn(
        chat_req("Forecast for Paris, 3 days",
                 response_format={"type": "json_schema", "json_schema": {"schema": schema}}),
        "chat",
    )  # fmt: skip
    body = resp_req("Forecast for Paris, 3 days")
    body["text"] = {"format": {"type": "json_schema", "name": "f", "schema": schema}}
    responses = demo_turn(body, "responses")

    assert json.loads(chat_object.text or "") == {"answer": "Hello! You said: Hi"}
    for turn in (chat_schema, responses):
        assert json.loads(turn.text or "") == {"city": "Paris", "days": 3}


def test_responses_an_output_answering_no_call_is_refused_as_openai_does() -> None:
    import httpx as _httpx

    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream as _Script, Turn as _Turn

    script = _Script(_Turn(text="ok"), demo=False)
    transport = _httpx.ASGITransport(app=create_fake_upstream_app(script))

    async def post(items: list[dict[str, object]]) -> _httpx.Response:
        async with _httpx.AsyncClient(transport=transport, base_url="http://up") as client:
            return await client.post("/v1/responses", json={"model": "m", "input": items})

    import asyncio as _asyncio

    orphan = [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]
    paired = [{"type": "function_call", "call_id": "call_x", "name": "f", "arguments": "{}"},
              *orphan]  # fmt: skip
    refused = _asyncio.run(post(orphan))
    answered = _asyncio.run(post(paired))

    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "message": "No tool call found for function call output with call_id call_x.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }
    assert answered.status_code == 200
