"""WebSocketSink: the SSE sink's events, one compact JSON message each, with the stream_id."""

from __future__ import annotations

import json
from typing import Any

from responses_gateway.errors import InvalidRequestError
from responses_gateway.loop.events import (
    ItemFinished,
    ItemStarted,
    LoopEvent,
    PartFinished,
    PartStarted,
    ResponseFinished,
    ResponseStarted,
    TextDelta,
)
from responses_gateway.sinks import SSESink
from responses_gateway.sinks.websocket import WebSocketSink, encode_message, error_event
from responses_gateway.testing.stream_check import (
    check_socket_error,
    check_socket_stream,
    parse_sse,
)

RESPONSE: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1700000000,
    "status": "in_progress",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "temperature": None,
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "model": "m",
    "output": [],
    "usage": None,
}
OPEN = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "in_progress",
    "content": [],
}
EMPTY = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
HELLO = {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
DONE = {**OPEN, "status": "completed", "content": [HELLO]}
EVENTS: list[LoopEvent] = [
    ResponseStarted(RESPONSE),
    ItemStarted(0, OPEN),
    PartStarted(0, "msg_1", 0, EMPTY),
    TextDelta(0, "msg_1", 0, "output_text", "Hello"),
    PartFinished(0, "msg_1", 0, HELLO),
    ItemFinished(0, DONE),
    ResponseFinished({**RESPONSE, "status": "completed", "output": [DONE]}),
]


def _messages(stream_id: str | None) -> list[bytes]:
    messages: list[bytes] = []
    sink = WebSocketSink(messages.append, stream_id=stream_id)
    for event in EVENTS:
        sink.emit(event)
    return messages


def test_emit_writes_the_sse_sinks_events_one_json_message_each() -> None:
    frames: list[bytes] = []
    sse = SSESink(frames.append)
    for event in EVENTS:
        sse.emit(event)
    messages = _messages(None)
    assert [json.loads(m) for m in messages] == parse_sse(b"".join(frames))
    assert all(m == encode_message(json.loads(m)) for m in messages)  # compact, one per event
    check_socket_stream([json.loads(m) for m in messages])


def test_emit_with_stream_id_tags_every_event() -> None:
    events = [json.loads(m) for m in _messages("lane-1")]
    assert {e["stream_id"] for e in events} == {"lane-1"}
    assert check_socket_stream(events, "lane-1")["status"] == "completed"


def test_error_event_has_status_nested_error_and_stream_id() -> None:
    error = InvalidRequestError("Bad.", param="input", code="invalid_value")
    event = error_event(error, "s")
    assert event == {
        "type": "error",
        "status": 400,
        "error": {
            "message": "Bad.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "invalid_value",
        },
        "stream_id": "s",
    }
    check_socket_error(event, "s")
    assert "stream_id" not in error_event(error)


def test_delta_messages_are_the_bytes_of_their_dicts_with_the_stream_id() -> None:
    messages: list[bytes] = []
    sink = WebSocketSink(messages.append, stream_id="s\u00fc1")
    sink.emit(TextDelta(0, "msg_1", 0, "output_text", 'He"l\nlo'))
    sink.emit(TextDelta(0, "msg_1", 0, "output_text", "!"))
    expected = [
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": delta,
            "logprobs": [],
            "sequence_number": seq,
            "stream_id": "s\u00fc1",
        }
        for seq, delta in enumerate(['He"l\nlo', "!"])
    ]
    assert messages == [encode_message(event) for event in expected]
