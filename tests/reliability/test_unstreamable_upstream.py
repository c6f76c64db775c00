"""An upstream that cannot stream a request (llama-cpp-python's server with tools and
``tool_choice: "auto"``: 200 and no data event) is still served: the gateway asks it again
unstreamed, for streaming and non-streaming clients alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.reliability.conftest import MODEL, Stack

from responses_gateway.testing.script import ToolCall, Turn, streams_nothing_with_auto_tools
from responses_gateway.testing.stream_check import check_stream, parse_sse

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
ROUND_TRIP = [
    {"role": "user", "content": "Weather in Paris?"},
    {"type": "function_call", "call_id": "call_w1", "name": "get_weather",
     "arguments": '{"city": "Paris"}'},
    {"type": "function_call_output", "call_id": "call_w1", "output": "18C and sunny"},
]  # fmt: skip


@pytest.fixture
def limited(fresh: Stack) -> Iterator[Stack]:
    fresh.upstream.cannot_stream = streams_nothing_with_auto_tools
    try:
        yield fresh
    finally:
        fresh.upstream.cannot_stream = None


def _streams(stack: Stack) -> list[Any]:
    return [r.json.get("stream") for r in stack.upstream.model_requests()]


def test_a_tool_round_trip_continued_without_streaming_is_served(
    http: httpx.Client, limited: Stack
) -> None:
    limited.upstream.push(Turn(text="It is 18C and sunny in Paris."))

    answer = http.post("/responses", json={"model": MODEL, "input": ROUND_TRIP, "tools": [WEATHER]})

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "completed"
    assert [item["type"] for item in body["output"]] == ["message"]
    assert body["output"][0]["content"][0]["text"] == "It is 18C and sunny in Paris."
    assert _streams(limited) == [True, False]
    streamed, plain = (r.json for r in limited.upstream.model_requests())
    assert plain["messages"] == streamed["messages"] and plain["tools"] == streamed["tools"]
    assert "stream_options" not in plain


def test_a_streaming_client_gets_a_whole_stream_from_the_unstreamed_answer(
    http: httpx.Client, limited: Stack
) -> None:
    limited.upstream.push(Turn(tool_calls=[ToolCall("get_weather", '{"city": "Lyon"}')]))

    body = {"model": MODEL, "input": "Weather in Lyon?", "tools": [WEATHER], "stream": True}
    with http.stream("POST", "/responses", json=body) as answer:
        assert answer.status_code == 200
        events = parse_sse(answer.read())

    final = check_stream(events)
    assert events[-1]["type"] == "response.completed"
    assert [(i["type"], i["name"], i["arguments"]) for i in final["output"]] == [
        ("function_call", "get_weather", '{"city": "Lyon"}')
    ]
    assert _streams(limited) == [True, False]


def test_a_request_the_server_can_stream_is_streamed_once(
    http: httpx.Client, limited: Stack
) -> None:
    limited.upstream.push(Turn(text="Hello"))

    answer = http.post("/responses", json={"model": MODEL, "input": "Hi"})

    assert answer.status_code == 200
    assert _streams(limited) == [True]
