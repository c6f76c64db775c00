"""WebSocket mode end to end: the official SDK's ``client.responses.connect()`` against the served
app, over every upstream wire.

Every server message is judged by the contract validator (``check_socket_stream`` for each
response's events, ``check_socket_error`` for error events) and parsed by the SDK; tests assert
the exact events, what the upstream received, and what the table holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses.responses_server_event import ResponseWsError

from responses_gateway.testing.harmony import read_prompt
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.stream_check import check_socket_error, check_socket_stream

from .conftest import TABLE, Stack

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


class Socket:
    """An SDK connection read message by message, each judged by the validator."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def send(self, **create: Any) -> None:
        self.connection.send({"type": "response.create", **create})

    def message(self) -> dict[str, Any]:
        raw = self.connection.recv_bytes()
        parsed = self.connection.parse_event(raw)  # the SDK understands every message
        event: dict[str, Any] = json.loads(raw)
        assert parsed.type == event["type"]
        return event

    def response(self, stream_id: str | None = None) -> tuple[dict[str, Any], list[str]]:
        """The next whole response (all its events, validated); its terminal ``response`` and
        event types."""
        events = [self.message()]
        while events[-1]["type"] not in TERMINAL and events[-1]["type"] != "error":
            events.append(self.message())
        assert events[-1]["type"] != "error", events[-1]
        return check_socket_stream(events, stream_id), [e["type"] for e in events]

    def error(self, stream_id: str | None = None) -> dict[str, Any]:
        event = self.message()
        assert event["type"] == "error", event
        assert isinstance(self.connection.parse_event(json.dumps(event)), ResponseWsError)
        return check_socket_error(event, stream_id)


@pytest.fixture
def socket(stack: Stack, upstream: ScriptedUpstream) -> Iterator[Socket]:
    client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    with client.responses.connect() as connection:
        yield Socket(connection)


def _text_of(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def _calls(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "function_call"]


def _table_ids(stack: Stack) -> set[str]:
    """The keys of every item that holds content: the usage ledger's items (a response's
    marker ``SK = U``, hour rows ``U#<day>``, five-minute rows ``F#<day>``, a tenant's totals
    ``T#<tenant>#B``, its request log ``T#<tenant>#RL``) count usage of every response, stored
    or not, and hold no content."""
    ids = set()
    pages = stack.dynamo.client.get_paginator("scan").paginate(TableName=TABLE)
    for page in pages:
        for item in page["Items"]:
            pk, sk = item["PK"]["S"], item["SK"]["S"]
            if sk == "U" or pk.startswith(("U#", "F#")) or pk.endswith(("#B", "#RL")):
                continue
            ids.add(pk + "|" + sk)
    return ids


def _upstream_text(request: Any) -> str:
    """Everything the model was sent, as text (harmony: the decoded prompt)."""
    return request.prompt if request.prompt is not None else json.dumps(request.json)


TEXT_EVENTS = [
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


def test_text_over_the_socket(socket: Socket, upstream: ScriptedUpstream, model: str) -> None:
    upstream.push(Turn(text="hello there"))
    socket.send(model=model, input="Say hello")
    response, types = socket.response()
    assert types == TEXT_EVENTS
    assert response["status"] == "completed"
    assert _text_of(response) == "hello there"
    assert len(upstream.model_requests()) == 1


def test_tool_round_trip_continued_with_store_false_sends_only_the_tool_output(
    stack: Stack, socket: Socket, upstream: ScriptedUpstream, model: str
) -> None:
    before = _table_ids(stack)
    upstream.push(
        Turn(tool_calls=[ToolCall("get_weather", '{"city":"Paris"}', call_id="call_1")]),
        Turn(text="It is sunny"),
    )
    socket.send(model=model, input="Weather in Paris?", tools=[TOOL], store=False)
    first, _ = socket.response()
    [call] = _calls(first)
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    socket.send(
        model=model,
        previous_response_id=first["id"],
        input=[
            {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 24C"}
        ],
        tools=[TOOL],
        store=False,
    )
    second, _ = socket.response()
    assert _text_of(second) == "It is sunny"
    assert second["previous_response_id"] == first["id"]
    sent = _upstream_text(upstream.model_requests()[1])
    # the model saw the whole chain, from the connection's memory
    assert "Weather in Paris?" in sent and "Paris" in sent and "sunny, 24C" in sent
    assert _table_ids(stack) == before  # nothing of a store:false chain is written


def test_twenty_tool_round_trips_on_one_socket(
    socket: Socket, upstream: ScriptedUpstream, model: str
) -> None:
    for turn in range(20):
        upstream.push(Turn(tool_calls=[ToolCall("get_weather", f'{{"city":"c{turn}"}}')]))
    upstream.push(Turn(text="done"))
    socket.send(model=model, input="Go", tools=[TOOL], store=False)
    response, _ = socket.response()
    for turn in range(20):
        [call] = _calls(response)
        assert json.loads(call["arguments"]) == {"city": f"c{turn}"}
        socket.send(
            model=model,
            previous_response_id=response["id"],
            input=[
                {"type": "function_call_output", "call_id": call["call_id"], "output": f"r{turn}"}
            ],
            tools=[TOOL],
            store=False,
        )
        response, _ = socket.response()
    assert _text_of(response) == "done"
    last = _upstream_text(upstream.model_requests()[-1])
    assert all(f"r{turn}" in last for turn in range(20))
    assert len(upstream.model_requests()) == 21


def _by_marker(body: dict[str, Any], wire: Any) -> Turn:
    """Answer with the name of the marker that appears last in the request."""
    text = read_prompt(body).text if wire == "harmony" else json.dumps(body)  # type: ignore[union-attr]
    marker = max(("alpha", "beta", "gamma"), key=text.rfind)
    return Turn(text=f"{marker} answer")


def test_parallel_streams_and_a_fork(
    socket: Socket, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(_by_marker, _by_marker, _by_marker)
    socket.send(model=model, input="alpha question", stream_id="a", store=False)
    socket.send(model=model, input="beta question", stream_id="b", store=False)
    events: dict[str, list[dict[str, Any]]] = {"a": [], "b": []}
    finished: dict[str, dict[str, Any]] = {}
    while len(finished) < 2:
        event = socket.message()
        stream = event["stream_id"]
        events[stream].append(event)
        if event["type"] in TERMINAL:
            finished[stream] = check_socket_stream(events[stream], stream)
    assert _text_of(finished["a"]) == "alpha answer"
    assert _text_of(finished["b"]) == "beta answer"
    # a new stream continuing stream a's response forks it; stream a keeps its own latest
    socket.send(
        model=model,
        input="gamma follow-up",
        stream_id="fork",
        previous_response_id=finished["a"]["id"],
        store=False,
    )
    fork, _ = socket.response("fork")
    assert _text_of(fork) == "gamma answer"
    sent = _upstream_text(upstream.model_requests()[-1])
    assert "alpha question" in sent and "alpha answer" in sent and "beta" not in sent
    # the forked response is still stream a's latest: it can be continued again
    upstream.push(Turn(text="again"))
    socket.send(model=model, input="more", stream_id="a", previous_response_id=finished["a"]["id"])
    again, _ = socket.response("a")
    assert _text_of(again) == "again"


def test_a_create_on_a_busy_stream_is_an_error_event(
    stack: Stack, socket: Socket, upstream: ScriptedUpstream, model: str
) -> None:
    def by_input(body: dict[str, Any], wire: Any) -> Turn:  # whichever request arrives first
        text = read_prompt(body).text if wire == "harmony" else json.dumps(body)  # type: ignore[union-attr]
        if "elsewhere" in text:
            return Turn(text="other")
        return Turn(text="one two three four", hold_after=4)

    upstream.push(by_input, by_input)
    socket.send(model=model, input="first", stream_id="s")
    created = socket.message()
    assert created["type"] == "response.created"
    socket.send(model=model, input="second", stream_id="s")
    socket.send(model=model, input="elsewhere", stream_id="t")
    seen: list[dict[str, Any]] = []
    error = None
    while error is None or not any(e["type"] in TERMINAL for e in seen):
        event = socket.message()
        if event["type"] == "error":
            error = check_socket_error(event, "s")
        elif event["stream_id"] == "t":
            seen.append(event)
    assert error["code"] == "stream_busy"
    assert _text_of(check_socket_stream(seen, "t")) == "other"


def test_generate_false_warms_up_without_a_model_call(
    socket: Socket, upstream: ScriptedUpstream, model: str
) -> None:
    socket.send(model=model, input="Remember: the code is 42", generate=False, store=False)
    warm, types = socket.response()
    assert types == ["response.created", "response.in_progress", "response.completed"]
    assert warm["output"] == [] and warm["status"] == "completed"
    assert upstream.model_requests() == []
    upstream.push(Turn(text="42"))
    socket.send(model=model, previous_response_id=warm["id"], input="What is the code?")
    answer, _ = socket.response()
    assert _text_of(answer) == "42"
    sent = _upstream_text(upstream.model_requests()[0])
    assert "the code is 42" in sent and "What is the code?" in sent


def test_unknown_previous_response_is_an_error_and_the_socket_stays_open(
    socket: Socket, upstream: ScriptedUpstream, model: str
) -> None:
    socket.send(model=model, input="hi", previous_response_id="resp_unknown")
    error = socket.error()
    assert error == {
        "type": "invalid_request_error",
        "code": "previous_response_not_found",
        "message": "Previous response with id 'resp_unknown' not found.",
        "param": "previous_response_id",
    }
    upstream.push(Turn(text="still here"))
    socket.send(model=model, input="hi")
    response, _ = socket.response()
    assert _text_of(response) == "still here"


def test_bad_messages_get_error_events(socket: Socket, upstream: ScriptedUpstream) -> None:
    socket.connection.send_raw("{not json")
    assert socket.error()["code"] == "invalid_json"
    socket.connection.send_raw(json.dumps({"type": "response.steer", "stream_id": "x"}))
    assert socket.error("x")["code"] == "unsupported_event_type"
    socket.send(model="scripted-chat", input="hi", background=True)
    assert socket.error()["param"] == "background"
    socket.send(model="scripted-chat")
    assert socket.error()["code"] == "missing_required_parameter"


def test_oversized_message_is_an_error_event_and_other_streams_go_on(
    stack: Stack, upstream: ScriptedUpstream
) -> None:
    from responses_gateway.sockets.session import SessionLimits

    app = _app_of(stack)
    app.state.socket_limits = SessionLimits(max_message_bytes=2000)
    try:
        client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
        with client.responses.connect() as connection:
            socket = Socket(connection)
            upstream.push(Turn(text="fine"))
            socket.send(model="scripted-chat", input="x" * 5000)
            error = socket.error()
            assert error["code"] == "message_too_large"
            socket.send(model="scripted-chat", input="small")
            response, _ = socket.response()
            assert _text_of(response) == "fine"
    finally:
        del app.state.socket_limits


def _app_of(stack: Stack) -> Any:
    return stack.gateway_server._server.config.app


def test_connection_limit_ends_with_its_error(stack: Stack, upstream: ScriptedUpstream) -> None:
    from responses_gateway.sockets.session import SessionLimits

    app = _app_of(stack)
    app.state.socket_limits = SessionLimits(max_seconds=0.2)
    try:
        client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
        with client.responses.connect() as connection:
            error = Socket(connection).error()
            assert error["code"] == "websocket_connection_limit_reached"
            with pytest.raises(Exception, match="1000|closed|OK"):
                connection.recv_bytes()
    finally:
        del app.state.socket_limits


def test_handshake_without_credentials_is_refused(
    stack: Stack, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_API_KEYS", "sk-team-a:team-a")
    client = openai.OpenAI(base_url=stack.base_url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(Exception) as refused, client.responses.connect():
        pass
    assert "401" in str(refused.value)
    answer = httpx.get(
        stack.base_url.replace("/v1", "") + "/v1/responses",
        headers={
            "connection": "upgrade",
            "upgrade": "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        },
    )
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_api_key"
    good = openai.OpenAI(base_url=stack.base_url, api_key="sk-team-a", max_retries=0)
    upstream.push(Turn(text="welcome"))
    with good.responses.connect() as connection:
        socket = Socket(connection)
        socket.send(model="scripted-chat", input="hi")
        response, _ = socket.response()
    assert _text_of(response) == "welcome"


def test_a_client_leaving_mid_stream_cancels_and_keeps_partial_output(
    stack: Stack, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="one two three four five six", hold_after=5))
    client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    with client.responses.connect() as connection:
        socket = Socket(connection)
        socket.send(model=model, input="count")
        created = socket.message()
        response_id = created["response"]["id"]
        while socket.message()["type"] != "response.output_text.delta":
            pass
    assert upstream.wait_for_disconnects(1, timeout=10) == 1
    stored = stack.wait_for_status(response_id, "cancelled")
    [message] = stored["output"]
    assert message["status"] == "incomplete"
    assert message["content"][0]["text"].startswith("one")


def test_http_stored_state_continues_on_the_socket_and_back(
    socket: Socket, client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="first"), Turn(text="second"), Turn(text="third"))
    over_http = client.responses.create(model=model, input="alpha")
    socket.send(model=model, previous_response_id=over_http.id, input="beta")
    on_socket, _ = socket.response()
    assert _text_of(on_socket) == "second"
    assert "alpha" in _upstream_text(upstream.model_requests()[1])
    back = client.responses.create(model=model, previous_response_id=on_socket["id"], input="gamma")
    assert back.output_text == "third"
    sent = _upstream_text(upstream.model_requests()[2])
    assert all(word in sent for word in ("alpha", "first", "beta", "second", "gamma"))
    items = client.responses.input_items.list(back.id, order="asc")
    assert [i.type for i in items.data] == ["message"]
