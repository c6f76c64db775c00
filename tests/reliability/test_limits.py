"""Request limits over HTTP: each breach is an OpenAI envelope with the right status and param,
answered without reading (or holding) more than the cap."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import httpx
import pytest
from tests.reliability.conftest import LIMITS, MODEL, Stack

from responses_gateway.api.limits import Limits, check_structure, off_loop_if_large
from responses_gateway.errors import InvalidRequestError

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _error(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    return dict(error)


def test_body_over_the_cap_with_content_length_is_413(http: httpx.Client, fresh: Stack) -> None:
    body = json.dumps({"model": MODEL, "input": "x" * (LIMITS.max_body_bytes + 10)})
    error = _error(http.post("/responses", content=body), 413)
    assert error["code"] == "request_body_too_large"
    assert str(LIMITS.max_body_bytes) in error["message"]
    assert fresh.upstream.requests == []


def test_chunked_body_over_the_cap_is_413_before_it_ends(fresh: Stack) -> None:
    """A body without content-length that never ends: the gateway answers 413 once the cap is
    passed, while the client is still sending."""
    chunk = b"x" * 65536
    with socket.create_connection((fresh.gateway.host, fresh.gateway.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/responses HTTP/1.1\r\nhost: gateway\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        sent = 0
        answer = b""
        sock.settimeout(0.05)
        while sent < 4 * LIMITS.max_body_bytes and b"\r\n\r\n" not in answer:
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
        sock.settimeout(10)
        while b"\r\n\r\n" not in answer:
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert sent < 4 * LIMITS.max_body_bytes


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        (
            {"input": [{"role": "user", "content": "hi"}] * (LIMITS.max_input_items + 1)},
            "input",
            "array_above_max_length",
        ),
        (
            {"input": "hi", "tools": [WEATHER] * (LIMITS.max_tools + 1)},
            "tools",
            "array_above_max_length",
        ),
        (
            {"input": [{"role": "user", "content": "x" * (LIMITS.max_string_chars + 1)}]},
            "input[0].content",
            "string_above_max_length",
        ),
        (
            {"input": "hi", "metadata_x": json.loads("[" * 20 + "]" * 20)},
            "metadata_x" + "[0]" * 15,
            "json_nesting_too_deep",
        ),
        (
            {"input": "hi", "max_output_tokens": 10**20},
            "max_output_tokens",
            "integer_above_max_value",
        ),
        ({"input": "hi", "max_tool_calls": 2**31}, "max_tool_calls", "integer_above_max_value"),
        ({"input": "hi", "top_logprobs": 21}, "top_logprobs", "integer_above_max_value"),
        ({"input": "hi", "temperature": 2.5}, "temperature", "decimal_above_max_value"),
        ({"input": "hi", "top_p": -0.1}, "top_p", "decimal_below_min_value"),
        (
            {
                "input": "hi",
                "tools": [
                    WEATHER,
                    {"type": "function", "name": "bad", "parameters": {"type": "objectx"}},
                ],
            },
            "tools[1].parameters",
            "invalid_function_parameters",
        ),
        (
            {
                "input": "hi",
                "tools": [
                    {
                        "type": "function",
                        "name": "bad",
                        "parameters": {"type": "object", "properties": {"a": {"type": 3}}},
                    }
                ],
            },
            "tools[0].parameters",
            "invalid_function_parameters",
        ),
    ],
)
def test_each_limit_is_a_400_naming_the_param(
    http: httpx.Client, fresh: Stack, body: dict[str, Any], param: str, code: str
) -> None:
    error = _error(http.post("/responses", json={"model": MODEL, **body}), 400)
    assert (error["param"], error["code"]) == (param, code)
    assert fresh.upstream.requests == []


def test_invalid_function_parameters_message_names_the_function(http: httpx.Client) -> None:
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "string"}}
    error = _error(
        http.post("/responses", json={"model": MODEL, "input": "hi", "tools": [tool]}), 400
    )
    assert error["message"] == (
        "Invalid schema for function 'lookup': schema must be a JSON Schema of "
        "'type: \"object\"', got 'type: \"string\"'."
    )


def test_nesting_past_the_json_parser_depth_is_the_same_400(http: httpx.Client) -> None:
    body = f'{{"model": "{MODEL}", "input": "hi", "x": {"[" * 500}{"]" * 500}}}'
    error = _error(http.post("/responses", content=body), 400)
    assert error["code"] == "json_nesting_too_deep"


def test_conversation_items_body_is_capped_too(http: httpx.Client) -> None:
    body = json.dumps({"items": [{"role": "user", "content": "x" * LIMITS.max_body_bytes}]})
    assert _error(http.post("/conversations", content=body), 413)["code"] == (
        "request_body_too_large"
    )


def test_limits_from_env_reads_every_variable() -> None:
    env = {
        "GATEWAY_MAX_BODY_BYTES": "100",
        "GATEWAY_MAX_INPUT_ITEMS": "2",
        "GATEWAY_MAX_TOOLS": "3",
        "GATEWAY_MAX_JSON_DEPTH": "4",
        "GATEWAY_MAX_STRING_CHARS": "5",
    }
    assert Limits.from_env(env) == Limits(100, 2, 3, 4, 5)
    assert Limits.from_env({}) == Limits()
    assert Limits().max_body_bytes < 6_000_000  # fits Lambda's synchronous payload
    with pytest.raises(ValueError, match="GATEWAY_MAX_TOOLS"):
        Limits.from_env({"GATEWAY_MAX_TOOLS": "0"})


def test_check_structure_walks_iteratively_past_python_recursion() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidRequestError) as caught:
        check_structure({"x": deep}, Limits(max_json_depth=4000))
    assert caught.value.code == "json_nesting_too_deep"


async def test_large_bodies_are_parsed_off_the_event_loop() -> None:
    main = threading.current_thread()
    small = await off_loop_if_large(10, threading.current_thread)
    large = await off_loop_if_large(10_000_000, threading.current_thread)
    assert small is main
    assert large is not main
