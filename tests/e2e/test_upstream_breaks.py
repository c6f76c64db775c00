"""Upstream failures are classified by where the answer broke, on every wire, streamed and
buffered, foreground and background (issue #36).

Before the first data event (the server aborted after its 200 as llama-cpp-python's does, a body
cut inside its first event, an undecodable or error event, a 200 whose body is an error object, a
stream of only chunks that carry nothing, or cut after them)
the gateway sends the request once more unstreamed and serves that answer. After data events
the response ends ``failed`` with the cause in ``error.message``: in the stream, in the stored
response, in a buffered client's error.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from responses_gateway.testing.bedrock import asked_to_stream
from responses_gateway.testing.script import ScriptedUpstream, Turn
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import Stack

pytestmark = pytest.mark.stores("sqlite")

ANSWER = "Served after all."

BEFORE_DATA = {
    "abort_after_200": Turn(text="never sent", drop_after=0),
    "cut_in_first_event": Turn(text="never sent", drop_after=0, cut_mid_event=True),
    "undecodable_event": Turn(text="never sent", garbage_after=0),
    "error_event": Turn(
        error_event_after=0, error_body={"error": {"message": "Automatic tool choice failed."}}
    ),
    "error_as_200": Turn(
        error_as_200=True, error_body={"error": {"message": "Something broke inside."}}
    ),
}
"""Break points before the first data event, each as the upstream's first answer."""


def _create(
    http: httpx.Client, stack: Stack, body: dict[str, Any], *, stream: bool, background: bool
) -> dict[str, Any]:
    """The final Response of a create, however it is asked for."""
    body = {**body, "stream": stream, "background": background}
    answer = http.post("/responses", json=body)
    assert answer.status_code == 200, answer.text
    final = check_stream(parse_sse(answer.content)) if stream else answer.json()
    if background:
        final = stack.wait_for_status(final["id"], "completed")
    return final


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
@pytest.mark.parametrize("kind", list(BEFORE_DATA))
def test_a_break_before_the_first_data_event_is_retried_unstreamed(
    http: httpx.Client,
    upstream: ScriptedUpstream,
    stack: Stack,
    model: str,
    kind: str,
    stream: bool,
    background: bool,
) -> None:
    upstream.push(BEFORE_DATA[kind], Turn(text=ANSWER))

    final = _create(
        http, stack, {"model": model, "input": "Hi"}, stream=stream, background=background
    )

    assert final["status"] == "completed"
    assert [item["type"] for item in final["output"]] == ["message"]
    assert final["output"][0]["content"][0]["text"] == ANSWER
    assert [asked_to_stream(r) for r in upstream.model_requests()] == [True, False]


NO_DATA = {
    "chat-role-only-then-done": ("chat", Turn(text="never sent", role_only=True)),
    "chat-cut-after-role-chunk": ("chat", Turn(text="never sent", drop_after=1)),
    "harmony-empty-text-then-done": ("harmony", Turn(text="never sent", role_only=True)),
}
"""Streams that carry no data event before they end or break: the opening chunk alone (as
llama-cpp-python's one-slot server answers a request arriving while another generates), or a cut
right after it. Each wire's own kinds: on harmony the first chunk already carries text."""


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
@pytest.mark.parametrize(
    ("wire", "turn"), list(NO_DATA.values()), ids=list(NO_DATA), indirect=["wire"]
)
def test_a_stream_with_no_data_event_is_retried_unstreamed_never_completed_empty(
    http: httpx.Client,
    upstream: ScriptedUpstream,
    stack: Stack,
    model: str,
    turn: Turn,
    stream: bool,
    background: bool,
) -> None:
    upstream.push(turn, Turn(text=ANSWER))

    final = _create(
        http, stack, {"model": model, "input": "Hi"}, stream=stream, background=background
    )

    assert final["status"] == "completed"
    assert [item["type"] for item in final["output"]] == ["message"]
    assert final["output"][0]["content"][0]["text"] == ANSWER
    assert final["usage"]["output_tokens"] > 0
    assert [r.json.get("stream") for r in upstream.model_requests()] == [True, False]


def test_the_llama_cpp_python_abort_of_a_tool_request_is_served_by_the_retry(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    # the server aborts every streamed request with tools and tool_choice auto (no turn used)
    upstream.cannot_stream = lambda body, wire: bool(body.get("tools")) and wire != "harmony"
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    try:
        upstream.push(Turn(text=ANSWER))
        answer = http.post(
            "/responses", json={"model": model, "input": "Hi", "tools": [tool], "stream": True}
        )
    finally:
        upstream.cannot_stream = None

    final = check_stream(parse_sse(answer.content))
    assert final["status"] == "completed"
    assert final["output"][-1]["content"][0]["text"] == ANSWER


TEXT = "one two three four five six seven eight nine ten"
AFTER_DATA = {
    "dropped": (Turn(text=TEXT, drop_after=6), "RemoteProtocolError"),
    "cut_mid_event": (
        Turn(text=TEXT, drop_after=6, cut_mid_event=True),
        "RemoteProtocolError",
    ),
    "error_event": (
        Turn(
            text=TEXT,
            error_event_after=6,
            error_body={"error": {"message": "Out of memory while decoding."}},
        ),
        "Out of memory while decoding.",
    ),
}
"""Break points after data events, each with what the failure's message must name."""


@pytest.mark.parametrize("kind", list(AFTER_DATA))
def test_a_break_after_data_events_fails_the_stream_with_its_cause(
    http: httpx.Client, upstream: ScriptedUpstream, stack: Stack, model: str, kind: str
) -> None:
    turn, cause = AFTER_DATA[kind]
    upstream.push(turn)

    answer = http.post("/responses", json={"model": model, "input": "Hi", "stream": True})

    events = parse_sse(answer.content)
    final = check_stream(events)
    assert events[-1]["type"] == "response.failed"
    assert final["status"] == "failed" and cause in final["error"]["message"]
    assert final["output"][0]["status"] == "incomplete"
    assert final["output"][0]["content"][0]["text"]
    assert stack.wait_for_status(final["id"], "failed")["error"] == final["error"]
    assert len(upstream.model_requests()) == 1  # output was streamed: never asked again


@pytest.mark.parametrize("kind", list(AFTER_DATA))
def test_a_break_after_data_events_is_an_error_naming_its_cause_for_a_buffered_client(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, kind: str
) -> None:
    turn, cause = AFTER_DATA[kind]
    upstream.push(turn)

    answer = http.post("/responses", json={"model": model, "input": "Hi"})

    assert answer.status_code >= 500
    error = answer.json()["error"]
    assert cause in error["message"] and error["type"] == "server_error"
    assert len(upstream.model_requests()) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
@pytest.mark.parametrize("kind", list(AFTER_DATA))
def test_a_break_after_data_events_fails_a_background_response_with_its_cause(
    http: httpx.Client,
    upstream: ScriptedUpstream,
    stack: Stack,
    model: str,
    kind: str,
    stream: bool,
) -> None:
    turn, cause = AFTER_DATA[kind]
    upstream.push(turn)

    body = {"model": model, "input": "Hi", "background": True, "stream": stream}
    answer = http.post("/responses", json=body)

    assert answer.status_code == 200
    if stream:
        events = parse_sse(answer.content)
        assert events[-1]["type"] == "response.failed"
        response_id = events[0]["response"]["id"]
    else:
        response_id = answer.json()["id"]
    final = stack.wait_for_status(response_id, "failed")
    assert cause in final["error"]["message"]
    assert final["output"][0]["content"][0]["text"]
