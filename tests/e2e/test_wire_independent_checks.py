"""The same contract whatever the upstream (issue #36): a check the gateway makes on a lowered
wire it makes on the Responses wire too, before the upstream sees the request, over HTTP and
WebSocket. The scripted Responses upstream refuses an orphan output as OpenAI does; a permissive
one (llama.cpp's ``/v1/responses``) would take it, so the gateway must refuse it first."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn

from .conftest import Stack
from .test_websocket import TOOL, Socket

pytestmark = pytest.mark.stores("sqlite")


@pytest.fixture
def socket(stack: Stack, upstream: ScriptedUpstream) -> Iterator[Socket]:
    client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    with client.responses.connect() as connection:
        yield Socket(connection)


def _orphan(call_id: str = "call_nobody") -> list[dict[str, str]]:
    return [{"type": "function_call_output", "call_id": call_id, "output": "sunny"}]


ORPHAN_ERROR = {
    "type": "invalid_request_error",
    "code": None,
    "message": "No function call found for function_call_output with call_id 'call_nobody'.",
    "param": "input",
}


def test_a_store_false_socket_continuation_with_an_orphan_output_is_refused_on_every_wire(
    socket: Socket, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("get_weather", '{"city":"Paris"}', "call_1")]))
    socket.send(model=model, input="Weather in Paris?", tools=[TOOL], store=False)
    first, _ = socket.response()

    socket.send(
        model=model, previous_response_id=first["id"], input=_orphan(), tools=[TOOL], store=False
    )

    # a socket error always carries a code: the contract's for a 400 without one
    assert socket.error() == {**ORPHAN_ERROR, "code": "invalid_prompt"}
    assert len(upstream.model_requests()) == 1  # the upstream never saw it

    # the failed continuation evicted its base from the connection (as the standard's
    # websocket-failed-continuation-evicts-cache test expects): store false, so nothing is left
    socket.send(model=model, previous_response_id=first["id"], input="again", store=False)
    assert socket.error()["code"] == "previous_response_not_found"
    assert len(upstream.model_requests()) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
def test_an_orphan_output_over_http_is_a_400_on_every_wire(
    http: httpx.Client, upstream: ScriptedUpstream, model: str, stream: bool
) -> None:
    answer = http.post(
        "/responses",
        json={"model": model, "input": _orphan(), "tools": [TOOL], "stream": stream},
    )

    assert answer.status_code == 400
    assert answer.json() == {"error": ORPHAN_ERROR}
    assert upstream.model_requests() == []


def test_an_output_answering_a_call_of_the_previous_response_is_served_on_every_wire(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(
        Turn(tool_calls=[ToolCall("get_weather", '{"city":"Paris"}', "call_nobody")]),
        Turn(text="Sunny."),
    )
    first = http.post("/responses", json={"model": model, "input": "Hi", "tools": [TOOL]}).json()
    [call] = [item for item in first["output"] if item["type"] == "function_call"]

    answer = http.post(
        "/responses",
        json={
            "model": model,
            "previous_response_id": first["id"],
            "input": _orphan(call["call_id"]),
            "tools": [TOOL],
        },
    )

    assert answer.status_code == 200, answer.text
    assert answer.json()["output"][-1]["content"][0]["text"] == "Sunny."
