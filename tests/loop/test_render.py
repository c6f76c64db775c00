"""The render step: every Response object, at every moment and ending, carries what both specs
require, and echoes unset sampling settings as OpenAI's effective values (what we echo; what we
forward is tests/loop/test_driver.py's)."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.loop.render import SAMPLING_DEFAULTS, echoed, render_response
from responses_gateway.loop.state import LoopState
from responses_gateway.protocol.request import echo_fields, parse_create_request
from responses_gateway.protocol.response import validate_response
from responses_gateway.testing.spec_oracle import spec_oracle


def _state(**body: Any) -> LoopState:
    request = echo_fields(parse_create_request({"model": "m", "input": "hi", **body}))
    return LoopState(
        response_id="resp_1", created_at=1, model="m", request=request, upstream_input=[]
    )


def test_echoed_unset_sampling_settings_are_openais_effective_values() -> None:
    shown = echoed(echo_fields(parse_create_request({"model": "m"})))
    assert {key: shown[key] for key in SAMPLING_DEFAULTS} == {
        "temperature": 1.0,
        "top_p": 1.0,
        "top_logprobs": 0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    assert "user" not in shown  # OpenAI's spec types it as a string: left out when unset


def test_echoed_set_values_are_shown_as_set() -> None:
    settings = {"temperature": 0.0, "top_p": 0.5, "top_logprobs": 2, "presence_penalty": -2.0,
                "frequency_penalty": 2.0, "user": "u1"}  # fmt: skip
    shown = echoed(echo_fields(parse_create_request({"model": "m", **settings})))
    assert {key: shown[key] for key in settings} == settings


def test_echoed_does_not_change_what_the_loop_forwards() -> None:
    fields = echo_fields(parse_create_request({"model": "m"}))
    echoed(fields)
    assert {key: fields[key] for key in SAMPLING_DEFAULTS} == dict.fromkeys(SAMPLING_DEFAULTS)


def test_echoed_json_schema_format_gets_both_specs_keys() -> None:
    fmt = {"type": "json_schema", "name": "p", "schema": {"type": "object"}}
    shown = echoed(echo_fields(parse_create_request({"model": "m", "text": {"format": fmt}})))
    assert shown["text"]["format"] == {**fmt, "description": "", "strict": False}


def test_echoed_null_text_format_and_strict_are_the_effective_values() -> None:
    """Both specs require a format object and a boolean ``strict``: a client's null shows as
    what it means (benchmarks/fuzz.py found both echoed as null under Open Responses)."""
    shown = echoed(echo_fields(parse_create_request({"model": "m", "text": {"format": None}})))
    assert shown["text"]["format"] == {"type": "text"}
    fmt = {"type": "json_schema", "name": "p", "schema": {}, "strict": None, "description": None}
    shown = echoed(echo_fields(parse_create_request({"model": "m", "text": {"format": fmt}})))
    assert shown["text"]["format"] == {**fmt, "description": "", "strict": False}


ENDINGS: list[tuple[str, dict[str, Any]]] = [
    ("in_progress", {}),
    ("queued", {}),
    ("completed", {"completed_at": 2}),
    ("incomplete", {"incomplete_reason": "max_output_tokens"}),
    ("incomplete", {"incomplete_reason": "budget_exceeded"}),
    ("failed", {"error": {"code": "server_error", "message": "boom"}}),
    ("cancelled", {}),
]


@pytest.mark.parametrize(("status", "fields"), ENDINGS)
def test_render_response_every_status_validates_against_both_specs(
    status: str, fields: dict[str, Any]
) -> None:
    state = _state(tools=[{"type": "function", "name": "f"}])
    state.status = status
    for key, value in fields.items():
        setattr(state, key, value)

    response = render_response(state)

    spec_oracle().check_response(response, f"a {status} response")
    validate_response(response)
    assert response["completed_at"] == (2 if status == "completed" else None)
    assert response["usage"]["total_tokens"] == 0  # nothing counted: zeros, not null


@pytest.mark.parametrize(
    "reasoning",
    [
        {"effort": "minimal"},  # an erratum of the Open Responses enum: held to OpenAI's
        {"effort": "high", "summary": "concise", "context": "all_turns"},
        {"generate_summary": "detailed", "mode": "pro"},
        {"effort": "none", "summary": "auto"},
    ],
)
def test_an_echoed_reasoning_object_validates_against_both_specs(reasoning: dict[str, Any]) -> None:
    response = render_response(_state(reasoning=reasoning))

    spec_oracle().check_response(response)
    assert response["reasoning"] == {"effort": None, "summary": None, **reasoning}
