"""The spec oracle and its tap: they accept what both specs accept and name what breaks one."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import LoopState
from responses_gateway.protocol.request import echo_fields, parse_create_request
from responses_gateway.testing.spec_oracle import SpecViolation, spec_oracle
from responses_gateway.testing.spec_tap import SpecTap


def _response(status: str = "completed", **fields: Any) -> dict[str, Any]:
    request = echo_fields(parse_create_request({"model": "m", "input": "hi"}))
    state = LoopState(
        response_id="resp_1", created_at=1, model="m", request=request, upstream_input=[]
    )
    state.status = status
    if status == "completed":
        state.completed_at = 2
    response = render_response(state)
    response.update(fields)
    return response


MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}],
}


def test_a_complete_response_passes() -> None:
    spec_oracle().check_response(_response(output=[MESSAGE]))


@pytest.mark.parametrize(
    ("change", "spec"),
    [
        ({"temperature": None}, "Open Responses"),  # OpenAI takes null there; not this one
        ({"presence_penalty": None}, "Open Responses"),
        ({"usage": None}, "OpenAI"),
        ({"status": "finished"}, "OpenAI"),
    ],
)
def test_a_response_breaking_a_spec_is_named_with_that_spec(
    change: dict[str, Any], spec: str
) -> None:
    with pytest.raises(SpecViolation, match=spec):
        spec_oracle().check_response(_response(**change))


def test_a_missing_completed_at_breaks_open_responses() -> None:
    response = _response()
    del response["completed_at"]
    with pytest.raises(SpecViolation, match="Open Responses.*completed_at"):
        spec_oracle().check_response(response)


def test_an_item_type_neither_spec_defines_fails() -> None:
    with pytest.raises(SpecViolation, match="neither spec"):
        spec_oracle().check_response(_response(output=[{"type": "acme:thing", "id": "x"}]))


def test_an_openai_item_type_is_held_to_openais_schema() -> None:
    action = {"commands": ["ls"], "timeout_ms": None, "max_output_length": None}
    shell = {"id": "sh_1", "type": "shell_call", "call_id": "c", "status": "completed",
             "action": action}  # fmt: skip
    with pytest.raises(SpecViolation, match="OpenAI.*environment"):
        spec_oracle().check_output_item(shell)
    spec_oracle().check_output_item({**shell, "environment": None})


@pytest.mark.parametrize(
    ("reason", "ok"), [("max_output_tokens", True), ("budget_exceeded", True), ("bored", False)]
)
def test_incomplete_reasons_are_openais_or_the_gateways_named_ones(reason: str, ok: bool) -> None:
    response = _response("incomplete", incomplete_details={"reason": reason})
    if ok:
        spec_oracle().check_response(response)
    else:
        with pytest.raises(SpecViolation, match="OpenAI"):
            spec_oracle().check_response(response)


@pytest.mark.parametrize(
    ("code", "ok"),
    [("server_error", True), ("context_length_exceeded", True), ("invalid_model_output", False)],
)
def test_failure_codes_are_openais_or_the_gateways_named_ones(code: str, ok: bool) -> None:
    response = _response("failed", error={"code": code, "message": "x"})
    if ok:
        spec_oracle().check_response(response)
    else:
        with pytest.raises(SpecViolation, match="OpenAI"):
            spec_oracle().check_response(response)


def test_a_socket_error_needs_a_string_code() -> None:
    nested = {"type": "invalid_request_error", "code": None, "message": "m", "param": None}
    event = {"type": "error", "status": 400, "error": nested}
    with pytest.raises(SpecViolation, match="Open Responses"):
        spec_oracle().check_socket_event(event)
    spec_oracle().check_socket_event(
        {**event, "error": {**event["error"], "code": "invalid_prompt"}}
    )


def test_an_event_type_neither_spec_nor_the_sdk_defines_fails() -> None:
    with pytest.raises(SpecViolation, match="neither"):
        spec_oracle().check_event({"type": "response.thinking", "sequence_number": 0})


async def _serve(tap: SpecTap, method: str, path: str, body: bytes, content_type: str) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", content_type.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    tap.app = app
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        sent.append(message)

    await tap({"type": "http", "method": method, "path": path}, receive, send)
    assert sent[-1]["body"] == body  # passed on untouched


def test_the_tap_records_what_breaks_a_spec_and_passes_everything_on() -> None:
    tap = SpecTap(lambda *_: None)  # type: ignore[arg-type,return-value]
    bad = _response(temperature=None)
    good_event = {"type": "response.created", "sequence_number": 0, "response": _response()}
    stream = f"event: response.created\ndata: {json.dumps(good_event)}\n\n".encode()

    asyncio.run(_serve(tap, "POST", "/v1/responses", json.dumps(bad).encode(), "application/json"))
    asyncio.run(_serve(tap, "POST", "/v1/responses", stream, "text/event-stream"))
    asyncio.run(_serve(tap, "GET", "/v1/models", b"{}", "application/json"))  # not a Response

    assert len(tap.violations) == 1 and "temperature" in tap.violations[0]
