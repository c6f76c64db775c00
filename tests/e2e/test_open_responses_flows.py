"""The flows the Open Responses standard checks an implementation with, on every upstream wire,
held to both specs (issue #29).

Written from the two specs (the vendored OpenAPI documents and their prose), not from any
test suite: plain and streamed responses; a system prompt; tool calling, plain and streamed;
image input; a multi-turn history; assistant messages labelled with a ``phase``, in and out;
``/responses/compact`` and its required ``model``; and WebSocket mode: one response, several in
a row on one connection, a ``store: false`` continuation with only the new input, a reconnect
that no longer knows an unstored response, an unknown previous response, a failed continuation
that forgets the response it continued, and a compacted window starting a new chain.

Every object these flows receive is checked against both documents twice: here, explicitly,
and by the harness's tap (tests/e2e/conftest.py), which sees every byte the gateway sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.script import RelayedItem, ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.spec_oracle import SpecOracle, spec_oracle
from responses_gateway.testing.stream_check import check_socket_stream, check_stream, parse_sse

from .conftest import Stack

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather for a place.",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
}
RED_DOT = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8Bw"
    "HwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


@pytest.fixture
def oracle() -> SpecOracle:
    return spec_oracle()


def _create(http: httpx.Client, oracle: SpecOracle, body: dict[str, Any]) -> dict[str, Any]:
    answer = http.post("/responses", json=body)
    assert answer.status_code == 200, answer.text
    response: dict[str, Any] = answer.json()
    oracle.check_response(response)
    return response


def _stream(http: httpx.Client, oracle: SpecOracle, body: dict[str, Any]) -> list[dict[str, Any]]:
    answer = http.post("/responses", json={**body, "stream": True})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(answer.content)
    oracle.check_all_events(events)
    check_stream(events)
    return events


def _sent(upstream: ScriptedUpstream) -> str:
    """Everything the model was shown in the last call, as text (any wire)."""
    request = upstream.model_requests()[-1]
    return request.prompt if request.prompt is not None else json.dumps(request.json)


# --------------------------------------------------------------------------- HTTP


def test_a_text_response_is_a_complete_response_object(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, oracle: SpecOracle
) -> None:
    upstream.push(Turn(text="Hello there, friend."))

    response = _create(http, oracle, {"model": model, "input": [user("Say hello.")]})

    assert response["status"] == "completed" and response["completed_at"] is not None
    assert [item["type"] for item in response["output"]] == ["message"]
    assert response["output"][0]["content"][0]["text"] == "Hello there, friend."
    # what the client left unset, echoed as the effective values both specs ask for
    assert (response["temperature"], response["top_p"], response["top_logprobs"]) == (1, 1, 0)
    assert (response["presence_penalty"], response["frequency_penalty"]) == (0, 0)


def test_a_streamed_response_ends_completed_with_every_event_valid(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, oracle: SpecOracle
) -> None:
    upstream.push(Turn(text="1 2 3 4 5"))

    events = _stream(http, oracle, {"model": model, "input": [user("Count to 5.")]})

    assert events[0]["type"] == "response.created"
    assert events[0]["response"]["completed_at"] is None
    assert events[-1]["type"] == "response.completed"
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "1 2 3 4 5"


def test_a_system_message_reaches_the_model(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, oracle: SpecOracle
) -> None:
    upstream.push(Turn(text="Ahoy!"))
    system = {"type": "message", "role": "system", "content": "Speak like a pirate."}

    response = _create(http, oracle, {"model": model, "input": [system, user("Say hello.")]})

    assert response["status"] == "completed" and response["output"]
    assert "Speak like a pirate." in _sent(upstream)


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_tool_calling_returns_a_function_call_for_the_client(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, oracle: SpecOracle, streamed: bool
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("get_weather", '{"location": "Paris"}', "call_1")]))
    body = {"model": model, "input": [user("Weather in Paris?")], "tools": [WEATHER]}

    if streamed:
        events = _stream(http, oracle, body)
        kinds = [e["type"] for e in events]
        added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
        assert "function_call" in added
        assert "response.function_call_arguments.delta" in kinds
        assert "response.function_call_arguments.done" in kinds
        response = events[-1]["response"]
    else:
        response = _create(http, oracle, body)

    (call,) = response["output"]
    assert (call["type"], call["name"], call["status"]) == (
        "function_call",
        "get_weather",
        "completed",
    )
    assert json.loads(call["arguments"]) == {"location": "Paris"}
    assert call["call_id"]


def test_an_image_input_completes(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, wire: str, oracle: SpecOracle
) -> None:
    upstream.push(Turn(text="A red dot."))
    content = [
        {"type": "input_text", "text": "What do you see?"},
        {"type": "input_image", "image_url": RED_DOT},
    ]

    response = _create(
        http,
        oracle,
        {"model": model, "input": [{"type": "message", "role": "user", "content": content}]},
    )

    assert response["status"] == "completed" and response["output"]
    if wire == "harmony":  # gpt-oss reads text only: it is told what it cannot see
        assert "[An image was attached here" in _sent(upstream)
    elif wire == "bedrock":  # Converse takes the image's bytes, its format apart
        assert '"format": "png", "source": {"bytes": "' + RED_DOT.split(",")[1] in _sent(upstream)
    else:
        assert RED_DOT in _sent(upstream)


def test_a_multi_turn_history_reaches_the_model_in_order(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, oracle: SpecOracle
) -> None:
    upstream.push(Turn(text="Your name is Alice."))
    history = [
        user("My name is Alice."),
        {"type": "message", "role": "assistant", "content": "Hello Alice!"},
        user("What is my name?"),
    ]

    response = _create(http, oracle, {"model": model, "input": history})

    assert response["status"] == "completed"
    shown = _sent(upstream)
    assert shown.index("My name is Alice.") < shown.index("Hello Alice!") < shown.index("What is")


def test_assistant_messages_labelled_with_a_phase_are_accepted(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, wire: str, oracle: SpecOracle
) -> None:
    upstream.push(Turn(text="Done."))
    history = [
        user("Fix it."),
        {"type": "message", "role": "assistant", "content": "Looking.", "phase": "commentary"},
        {"type": "message", "role": "assistant", "content": "Fixed.", "phase": "final_answer"},
        user("Thanks."),
    ]

    _create(http, oracle, {"model": model, "input": history})

    if wire == "responses":  # relayed: newer models ask for the label back
        sent = upstream.model_requests()[-1].json["input"]
        assert [m.get("phase") for m in sent if m.get("role") == "assistant"] == [
            "commentary",
            "final_answer",
        ]


def _labelled_message(phase: str, text: str) -> RelayedItem:
    item = {"id": "msg_up", "type": "message", "role": "assistant", "phase": phase}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    done_part = {**part, "text": text}
    return RelayedItem(
        added={**item, "status": "in_progress", "content": []},
        events=[
            {"type": "response.content_part.added", "content_index": 0, "part": part},
            {"type": "response.output_text.delta", "content_index": 0, "delta": text,
             "logprobs": []},
            {"type": "response.output_text.done", "content_index": 0, "text": text,
             "logprobs": []},
            {"type": "response.content_part.done", "content_index": 0, "part": done_part},
        ],
        done={**item, "status": "completed", "content": [done_part]},
    )  # fmt: skip


def test_a_response_keeps_the_phase_the_model_labelled_its_messages_with(
    http: httpx.Client, upstream: ScriptedUpstream, oracle: SpecOracle
) -> None:
    upstream.push(Turn(relayed_items=[_labelled_message("commentary", "Checking the file.")]))

    response = _create(http, oracle, {"model": "scripted-responses", "input": [user("Go.")]})

    assert [(m["type"], m.get("phase")) for m in response["output"]] == [("message", "commentary")]


def test_compact_returns_a_compaction_object_both_specs_accept(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, wire: str, oracle: SpecOracle
) -> None:
    upstream.push(Turn(text="The user is Ada and likes tea."))
    body = {
        "model": model,
        "input": [
            user("My name is Ada and I like tea."),
            {"type": "message", "role": "assistant", "content": "Noted, Ada."},
        ],
        "prompt_cache_key": "ada-session",
    }

    answer = http.post("/responses/compact", json=body)

    assert answer.status_code == 200, answer.text
    compacted = answer.json()
    oracle.check_compaction(compacted)
    assert compacted["object"] == "response.compaction"
    assert "compaction" in [item["type"] for item in compacted["output"]]


def test_compact_without_a_model_is_a_400_naming_it(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    answer = http.post("/responses/compact", json={"input": [user("Hi.")]})

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == ("model", "missing_required_parameter")
    assert upstream.model_requests() == []


# --------------------------------------------------------------------------- WebSocket mode

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


class Socket:
    """One WebSocket-mode connection, read message by message; every message checked."""

    def __init__(self, connection: Any, oracle: SpecOracle) -> None:
        self.connection = connection
        self.oracle = oracle

    def create(self, **body: Any) -> None:
        self.connection.send({"type": "response.create", **body})

    def next(self) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(self.connection.recv_bytes())
        self.oracle.check_socket_event(event)
        return event

    def response(self) -> dict[str, Any]:
        """The next response's terminal object (its events checked as a stream)."""
        events = [self.next()]
        while events[-1]["type"] not in TERMINAL | {"error"}:
            events.append(self.next())
        assert events[-1]["type"] != "error", events[-1]
        return check_socket_stream(events)

    def error(self) -> dict[str, Any]:
        event = self.next()
        assert event["type"] == "error", event
        nested: dict[str, Any] = event["error"]
        return nested


@pytest.fixture
def connect(stack: Stack, upstream: ScriptedUpstream, oracle: SpecOracle) -> Iterator[Any]:
    client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    opened: list[Any] = []

    def open_socket() -> Socket:
        manager = client.responses.connect()
        opened.append(manager)
        return Socket(manager.__enter__(), oracle)

    yield open_socket
    for manager in opened:
        manager.__exit__(None, None, None)


def test_socket_one_response(connect: Any, upstream: ScriptedUpstream, model: str) -> None:
    upstream.push(Turn(text="Hello over the socket."))
    socket = connect()

    socket.create(model=model, input=[user("Say hello.")])

    response = socket.response()
    assert response["status"] == "completed"
    assert response["output"][0]["content"][0]["text"] == "Hello over the socket."


def test_socket_responses_in_a_row_on_one_connection(
    connect: Any, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(*[Turn(text=f"Answer {n}.") for n in range(3)])
    socket = connect()

    texts = []
    for n in range(3):
        socket.create(model=model, input=[user(f"Question {n}?")])
        texts.append(socket.response()["output"][0]["content"][0]["text"])

    assert texts == ["Answer 0.", "Answer 1.", "Answer 2."]


def test_socket_unstored_continuation_sends_only_the_new_input(
    connect: Any, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="Noted: blue."), Turn(text="Your colour is blue."))
    socket = connect()
    socket.create(model=model, store=False, input=[user("My colour is blue.")])
    first = socket.response()

    socket.create(
        model=model, store=False, previous_response_id=first["id"], input=[user("My colour?")]
    )
    second = socket.response()

    assert second["status"] == "completed" and second["previous_response_id"] == first["id"]
    shown = _sent(upstream)
    assert (
        shown.index("My colour is blue.") < shown.index("Noted: blue.") < shown.index("My colour?")
    )


def test_socket_reconnect_no_longer_knows_an_unstored_response_and_recovers(
    connect: Any, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="Noted."), Turn(text="Fresh start."))
    first_socket = connect()
    first_socket.create(model=model, store=False, input=[user("Remember 7.")])
    first = first_socket.response()

    second_socket = connect()  # a new connection: the unstored response stayed with the old one
    second_socket.create(
        model=model, store=False, previous_response_id=first["id"], input=[user("Which number?")]
    )
    error = second_socket.error()
    assert (error["code"], error["param"]) == (
        "previous_response_not_found",
        "previous_response_id",
    )

    second_socket.create(model=model, store=False, input=[user("Remember 7."), user("Which?")])
    assert second_socket.response()["status"] == "completed"


def test_socket_unknown_previous_response_is_an_error_and_the_socket_goes_on(
    connect: Any, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="Still here."))
    socket = connect()

    socket.create(model=model, store=False, previous_response_id="resp_unknown", input=[user("Hi")])
    error = socket.error()
    socket.create(model=model, input=[user("Hi")])

    assert error["code"] == "previous_response_not_found"
    assert socket.response()["status"] == "completed"


def test_socket_a_failed_continuation_forgets_the_response_it_continued(
    connect: Any, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(
        Turn(text="Noted."),
        Turn.http_error(400, "The upstream refused this continuation.", param="input"),
    )
    socket = connect()
    socket.create(model=model, store=False, input=[user("Remember 7.")])
    first = socket.response()

    socket.create(model=model, store=False, previous_response_id=first["id"], input=[user("?")])
    failed = socket.error()  # failed before any output: the socket's error event, a 400
    socket.create(model=model, store=False, previous_response_id=first["id"], input=[user("?")])
    forgotten = socket.error()

    assert failed["type"] == "invalid_request_error" and failed["code"] == "invalid_prompt"
    assert forgotten["code"] == "previous_response_not_found"
    assert len(upstream.model_requests()) == 2  # the forgotten continuation never reached it


def test_socket_a_compacted_window_starts_a_new_chain(
    connect: Any,
    http: httpx.Client,
    upstream: ScriptedUpstream,
    model: str,
    wire: str,
    oracle: SpecOracle,
) -> None:
    upstream.push(Turn(text="Noted: Ada."), Turn(text="Ada likes tea."), Turn(text="Tea, Ada."))
    socket = connect()
    socket.create(model=model, store=False, input=[user("I am Ada and I like tea.")])
    first = socket.response()
    window = [user("I am Ada and I like tea."), *first["output"]]

    answer = http.post("/responses/compact", json={"model": model, "input": window})
    assert answer.status_code == 200, answer.text
    compacted = answer.json()
    oracle.check_compaction(compacted)
    socket.create(model=model, store=False, input=[*compacted["output"], user("What do I like?")])
    second = socket.response()

    assert second["status"] == "completed" and second["previous_response_id"] is None
    if wire == "responses":  # the upstream compacted natively: its item goes back to it
        sent = upstream.model_requests()[-1].json["input"]
        assert "compaction" in [item.get("type") for item in sent]
    else:
        assert "Ada likes tea." in _sent(upstream)  # the gateway's summary, expanded


def test_a_response_an_older_version_stored_reads_back_complete(
    stack: Stack, http: httpx.Client, upstream: ScriptedUpstream, oracle: SpecOracle
) -> None:
    import asyncio

    from responses_gateway.store.base import StoredResponse

    upstream.push(Turn(text="Stored."))
    made = _create(http, oracle, {"model": "scripted-chat", "input": [user("Keep this.")]})
    old = {k: v for k, v in made.items() if k not in ("completed_at", "presence_penalty",
                                                     "frequency_penalty")}  # fmt: skip
    old |= {"temperature": None, "top_p": None, "top_logprobs": None, "user": None}
    record = StoredResponse(tenant="local", id=made["id"], response=old, input_items=[])
    store = stack.open_store()
    asyncio.run(store.put_response(record))

    answer = http.get(f"/responses/{made['id']}")

    assert answer.status_code == 200
    oracle.check_response(answer.json())
    assert answer.json()["completed_at"] is None  # unknown: an older version did not keep it
