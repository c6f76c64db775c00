"""POST /v1/responses end to end, over every upstream wire format, with the official SDK.

Each test scripts the fake upstream, drives the served gateway over HTTP, and asserts the exact
output, the exact stream (through the contract validator and the SDK's strict helper) and the
exact payload the upstream received.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn, Usage
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import UPSTREAM_KEY, Stack

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def _normalized(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Output items with gateway-generated ids masked, for comparing two runs."""
    masked = []
    for item in output:
        item = dict(item)
        for key in ("id", "call_id"):
            if key in item:
                item[key] = item[key].split("_", 1)[0] + "_*"
        if isinstance(item.get("encrypted_content"), str):  # sealed: a fresh nonce each time
            item["encrypted_content"] = item["encrypted_content"].split(".", 1)[0] + ".*"
        masked.append(item)
    return masked


def _stream_raw(
    http: httpx.Client, body: dict[str, Any]
) -> tuple[httpx.Response, list[dict[str, Any]]]:
    response = http.post("/responses", json={**body, "stream": True})
    return response, parse_sse(response.content)


def _last_request(upstream: ScriptedUpstream) -> dict[str, Any]:
    return upstream.model_requests()[-1].json


def _today() -> str:
    return datetime.now(UTC).date().isoformat()


HARMONY_PAYLOAD = {
    "max_tokens": None,
    "stop": ["<|return|>", "<|call|>"],
    "skip_special_tokens": False,
    "spaces_between_special_tokens": False,
    "stream": True,
    "stream_options": {"include_usage": True},
}
"""What a harmony request carries besides ``model`` and the prompt's token ids."""


def _harmony_system(date: str, *, tools: bool = False, effort: str = "medium") -> str:
    calls = (
        "\nCalls to these tools must go to the commentary channel: 'functions'." if tools else ""
    )
    return (
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
        f"Knowledge cutoff: 2024-06\nCurrent date: {date}\n\nReasoning: {effort}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every "
        f"message.{calls}<|end|>"
    )


def _after_system(prompt: str | None) -> str:
    """A harmony prompt after its system message."""
    assert prompt is not None
    system, end, rest = prompt.partition("<|end|>")
    assert system.startswith("<|start|>system<|message|>You are ChatGPT") and end
    return rest


# -- text ------------------------------------------------------------------------------------


def test_create_text_non_streaming_returns_message_and_sends_exact_payload(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(text="Hello there", usage=Usage(5, 2)))
    before = _today()
    response = client.responses.create(model=model, input="Hi", instructions="Be brief.")

    assert response.status == "completed"
    assert response.id.startswith("resp_") and "_up0" not in response.id
    assert response.model == model
    assert response.output_text == "Hello there"
    assert response.instructions == "Be brief."
    assert [item.type for item in response.output] == ["message"]
    assert response.output[0].id.startswith("msg_") and "_up0" not in response.output[0].id
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)
    assert response.usage.total_tokens == 7
    assert response.incomplete_details is None and response.error is None

    request = upstream.model_requests()[-1]
    if wire == "bedrock":  # signed with the runtime's credentials (checked by botocore's signer)
        assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=")
        assert request.path == f"/model/{model}/converse-stream"
        assert request.json == {
            "messages": [{"role": "user", "content": [{"text": "Hi"}]}],
            "system": [{"text": "Be brief."}],
        }
        return
    assert request.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    if wire == "harmony":
        assert request.path == "/v1/completions"
        prompt = request.json["prompt"]
        assert isinstance(prompt, list) and all(isinstance(token, int) for token in prompt)
        assert {k: v for k, v in request.json.items() if k != "prompt"} == {
            "model": model,
            **HARMONY_PAYLOAD,
        }
        assert request.prompt is not None
        system, rest = request.prompt.split("<|end|>", 1)
        assert system + "<|end|>" in (_harmony_system(before), _harmony_system(_today()))
        assert rest == (
            "<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>"
            "<|start|>user<|message|>Hi<|end|><|start|>assistant"
        )
    elif wire == "chat":
        assert request.path == "/v1/chat/completions"
        assert request.json == {
            "model": model,
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    else:
        assert request.path == "/v1/responses"
        assert request.json == {
            "model": model,
            "input": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Hi"}],
                }
            ],
            "instructions": "Be brief.",
            "stream": True,
            "store": False,
        }


def test_create_text_streaming_raw_events_follow_the_contract(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="Hello there friend"))
    response, events = _stream_raw(http, {"model": model, "input": "Hi"})

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-request-id"]
    final = check_stream(events)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == (
        "Hello there friend"
    )
    assert not any("obfuscation" in e for e in events)
    assert final["status"] == "completed"
    assert events[0]["response"]["status"] == "in_progress"
    assert events[0]["response"]["usage"]["total_tokens"] == 0  # nothing counted yet
    assert events[0]["response"]["completed_at"] is None
    assert final["completed_at"] is not None


def test_create_streamed_completed_output_equals_non_streamed_output(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    turn = Turn(
        reasoning="First think.",
        text="Answer.",
        reasoning_summary=["Thought about it."],
    )
    upstream.push(turn)
    plain = http.post("/responses", json={"model": model, "input": "Hi"}).json()
    upstream.push(turn)
    _, events = _stream_raw(http, {"model": model, "input": "Hi"})
    final = check_stream(events)
    assert _normalized(final["output"]) == _normalized(plain["output"])
    assert final["usage"] == plain["usage"]


def test_create_obfuscation_only_when_asked(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="a b"))
    _, events = _stream_raw(
        http, {"model": model, "input": "Hi", "stream_options": {"include_obfuscation": True}}
    )
    check_stream(events)
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert deltas and all(isinstance(e["obfuscation"], str) for e in deltas)


def test_create_sdk_stream_true_yields_typed_events(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="one two"))
    stream = client.responses.create(model=model, input="Hi", stream=True)
    events = list(stream)
    assert events[0].type == "response.created"
    assert events[-1].type == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    completed = events[-1].response  # type: ignore[union-attr]
    assert completed.output_text == "one two"


def test_create_strict_stream_helper_accepts_text_and_reasoning(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(reasoning="Let me see.", text="Done.", reasoning_summary=["Saw."]))
    with client.responses.stream(model=model, input="Hi") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "Done."
    assert [item.type for item in final.output] == ["reasoning", "message"]
    reasoning = final.output[0]
    assert reasoning.type == "reasoning"
    if wire in ("chat", "harmony", "bedrock"):  # raw reasoning; these wires have no summaries
        assert reasoning.content is not None
        assert [c.text for c in reasoning.content] == ["Let me see."]
        assert reasoning.summary == []
    else:
        assert [s.text for s in reasoning.summary] == ["Saw."]


# -- function tools --------------------------------------------------------------------------


def test_create_single_function_call_returns_to_client_and_continuation_replays_history(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("get_weather", '{"city":"Paris"}', "call_abc")]))
    first = client.responses.create(
        model=model,
        input="Weather in Paris?",
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )
    assert first.status == "completed"
    assert [item.type for item in first.output] == ["function_call"]
    call = first.output[0]
    assert call.type == "function_call"
    assert (call.name, call.arguments, call.status) == (
        "get_weather",
        '{"city":"Paris"}',
        "completed",
    )
    if wire == "harmony":  # harmony calls carry no id: the gateway makes one
        assert re.fullmatch(r"call_[0-9a-f]{48}", call.call_id)
    else:
        assert call.call_id == "call_abc"
    assert call.id is not None and call.id.startswith("fc_")

    upstream.push(Turn(text="It is sunny in Paris."))
    history: list[Any] = [
        {"role": "user", "content": "Weather in Paris?"},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp":21}'},
    ]
    second = client.responses.create(model=model, input=history, tools=[WEATHER_TOOL])  # type: ignore[list-item]
    assert second.output_text == "It is sunny in Paris."

    sent = _last_request(upstream)
    if wire == "harmony":
        assert _after_system(upstream.model_requests()[-1].prompt) == (
            "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n"
            "// Weather for a city.\ntype get_weather = (_: {\ncity: string,\n}) => any;\n\n"
            "} // namespace functions<|end|>"
            "<|start|>user<|message|>Weather in Paris?<|end|>"
            "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json"
            '<|message|>{"city":"Paris"}<|call|>'
            "<|start|>functions.get_weather to=assistant<|channel|>commentary"
            '<|message|>{"temp":21}<|end|><|start|>assistant'
        )
    elif wire == "chat":
        assert sent["messages"] == [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_abc", "content": '{"temp":21}'},
        ]
        assert sent["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parameters": WEATHER_TOOL["parameters"],
                },
            }
        ]
    elif wire == "bedrock":
        use = {"toolUseId": "call_abc", "name": "get_weather", "input": {"city": "Paris"}}
        result = {"toolUseId": "call_abc", "content": [{"text": '{"temp":21}'}]}
        assert sent["messages"] == [
            {"role": "user", "content": [{"text": "Weather in Paris?"}]},
            {"role": "assistant", "content": [{"toolUse": use}]},
            {"role": "user", "content": [{"toolResult": result}]},
        ]
        spec = {
            "name": "get_weather",
            "inputSchema": {"json": WEATHER_TOOL["parameters"]},
            "description": "Weather for a city.",
        }
        assert sent["toolConfig"] == {"tools": [{"toolSpec": spec}], "toolChoice": {"auto": {}}}
    else:
        assert sent["input"] == [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Weather in Paris?"}],
            },
            {
                "type": "function_call",
                "call_id": "call_abc",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_abc", "output": '{"temp":21}'},
        ]
        assert sent["tools"] == [WEATHER_TOOL]


def test_create_parallel_function_calls_stream_in_order_through_strict_helper(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(
        Turn(
            text="Checking both.",
            tool_calls=[
                ToolCall("get_weather", '{"city":"Paris"}', "call_1"),
                ToolCall("get_weather", '{"city":"London"}', "call_2"),
            ],
            interleave=True,
        )
    )
    with client.responses.stream(
        model=model,
        input="Paris and London",
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    ) as stream:
        kinds = [(e.type, getattr(e, "output_index", None)) for e in stream]
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["message", "function_call", "function_call"]
    calls = [item for item in final.output if item.type == "function_call"]
    assert [c.arguments for c in calls] == ['{"city":"Paris"}', '{"city":"London"}']
    if wire == "harmony":  # harmony calls carry no id: the gateway makes distinct ones
        assert len({c.call_id for c in calls}) == 2
    else:
        assert [c.call_id for c in calls] == ["call_1", "call_2"]
    done = [index for kind, index in kinds if kind == "response.output_item.done"]
    assert done == [0, 1, 2]


@pytest.mark.parametrize("end", ["done", "no_done", "eof"])
def test_create_chat_tool_call_shapes_flush_exactly_once(
    client: openai.OpenAI, upstream: ScriptedUpstream, end: str
) -> None:
    upstream.push(
        Turn(
            tool_calls=[ToolCall("get_weather", '{"city":"Oslo"}', "call_9")],
            tool_call_index="omit",
            arguments_mode="final_chunk",
            end=end,  # type: ignore[arg-type]
        )
    )
    response = client.responses.create(
        model="scripted-chat",
        input="Oslo?",
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )
    assert [(i.type, getattr(i, "arguments", None)) for i in response.output] == [
        ("function_call", '{"city":"Oslo"}')
    ]


# -- endings ---------------------------------------------------------------------------------


def test_create_max_output_tokens_truncation_is_incomplete(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="A long", finish="length"))
    response = client.responses.create(model=model, input="Hi", max_output_tokens=16)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output[0].status == "incomplete"  # type: ignore[union-attr]
    assert response.max_output_tokens == 16
    sent = _last_request(upstream)
    limit = (sent.get("inferenceConfig") or {}).get("maxTokens")  # Bedrock's Converse
    assert sent.get("max_tokens", sent.get("max_output_tokens", limit)) == 16

    upstream.push(Turn(text="A long", finish="length"))
    _, events = _stream_raw(http, {"model": model, "input": "Hi", "max_output_tokens": 16})
    final = check_stream(events)
    assert events[-1]["type"] == "response.incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}


def test_create_upstream_429_keeps_status_streaming_or_not(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn.http_error(429, "Rate limit reached for requests."))
    with pytest.raises(openai.RateLimitError) as info:
        client.responses.create(model=model, input="Hi")
    assert info.value.status_code == 429
    assert info.value.body == {
        "message": "Rate limit reached for requests.",
        # Bedrock's ThrottlingException has no OpenAI type: the 429's own
        "type": "rate_limit_error" if wire == "bedrock" else "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }

    upstream.push(
        Turn.http_error(429, "Rate limit reached for requests.", headers={"retry-after": "7"})
    )
    response = http.post("/responses", json={"model": model, "input": "Hi", "stream": True})
    assert response.status_code == 429
    assert response.headers["content-type"] == "application/json"
    assert response.headers["retry-after"] == "7"
    assert response.json()["error"]["code"] == "rate_limit_exceeded"


def test_create_upstream_dies_mid_stream_ends_with_response_failed(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="one two three four five six", drop_after=5))
    response, events = _stream_raw(http, {"model": model, "input": "Hi"})
    assert response.status_code == 200
    final = check_stream(events)
    assert events[-1]["type"] == "response.failed"
    assert final["status"] == "failed"
    assert final["error"]["code"] == "server_error"
    assert "mid-stream" in final["error"]["message"]
    assert final["output"][0]["status"] == "incomplete"
    assert final["output"][0]["content"][0]["text"]


def test_create_upstream_dies_non_streaming_is_502(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="one two three four five six", drop_after=5))
    response = http.post("/responses", json={"model": model, "input": "Hi"})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["type"] == "server_error"
    assert "mid-stream" in error["message"]


def test_create_upstream_unreachable_is_502(stack: Stack, upstream: ScriptedUpstream) -> None:
    # Port 9 (discard) on loopback has no listener here: a connect error, before any byte.
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.testing.server import run_in_thread

    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1", "api": "chat"}]})
    store = stack.open_store()
    with run_in_thread(create_app(config, store)) as server:
        for stream in (False, True):
            response = httpx.post(
                f"{server.url}/v1/responses", json={"model": "m", "input": "Hi", "stream": stream}
            )
            assert response.status_code == 502
            assert response.json()["error"]["message"].startswith(
                "The upstream model could not be reached"
            )


# -- the auto endpoint selection -------------------------------------------------------------


def test_create_auto_upgrades_to_responses_once_and_sticks(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responses_only_models = {"o-pro"}
    try:
        upstream.push(Turn(text="first"), Turn(text="second"))
        assert client.responses.create(model="auto/o-pro", input="Hi").output_text == "first"
        paths = [r.path for r in upstream.model_requests()]
        assert paths == ["/v1/chat/completions", "/v1/responses"]
        assert client.responses.create(model="auto/o-pro", input="Hi").output_text == "second"
        paths = [r.path for r in upstream.model_requests()]
        assert paths == ["/v1/chat/completions", "/v1/responses", "/v1/responses"]
    finally:
        upstream.responses_only_models = set()


def test_create_auto_stays_on_chat_when_chat_works(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a"), Turn(text="b"))
    client.responses.create(model="auto/llama", input="Hi")
    client.responses.create(model="auto/llama", input="Hi")
    assert [r.path for r in upstream.model_requests()] == ["/v1/chat/completions"] * 2
    assert upstream.model_requests()[0].json["model"] == "llama"


def test_create_pinned_chat_never_upgrades(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.responses_only_models = {"scripted-chat"}
    try:
        with pytest.raises(openai.BadRequestError) as info:
            client.responses.create(model="scripted-chat", input="Hi")
        assert info.value.status_code == 400
        assert [r.path for r in upstream.model_requests()] == ["/v1/chat/completions"]
    finally:
        upstream.responses_only_models = set()


# -- invalid requests ------------------------------------------------------------------------


def _error(response: httpx.Response) -> tuple[int, dict[str, Any]]:
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-request-id"]
    return response.status_code, response.json()


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (
            {"input": "Hi"},
            400,
            {
                "message": "Missing required parameter: 'model'.",
                "type": "invalid_request_error",
                "param": "model",
                "code": "missing_required_parameter",
            },
        ),
        (
            {"model": "scripted-chat", "input": "Hi", "previous_response_id": "resp_nope"},
            400,
            {
                "message": "Previous response with id 'resp_nope' not found.",
                "type": "invalid_request_error",
                "param": "previous_response_id",
                "code": "previous_response_not_found",
            },
        ),
        (
            {"model": "unknown-model", "input": "Hi"},
            404,
            {
                "message": (
                    "The model `unknown-model` does not exist or you do not have access to it."
                ),
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            },
        ),
    ],
)
def test_create_invalid_request_exact_envelope(
    http: httpx.Client,
    upstream: ScriptedUpstream,
    body: dict[str, Any],
    status: int,
    error: dict[str, Any],
) -> None:
    for stream in (False, True):
        code, payload = _error(http.post("/responses", json={**body, "stream": stream}))
        assert (code, payload) == (status, {"error": error})
    assert upstream.model_requests() == []


def test_create_invalid_json_body_is_400(http: httpx.Client, upstream: ScriptedUpstream) -> None:
    code, payload = _error(
        http.post("/responses", content=b"{not json", headers={"content-type": "application/json"})
    )
    assert code == 400
    assert payload["error"]["type"] == "invalid_request_error"
    assert payload["error"]["code"] == "invalid_json"


def test_create_out_of_range_temperature_names_the_param(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    code, payload = _error(
        http.post("/responses", json={"model": "scripted-chat", "input": "Hi", "temperature": 3})
    )
    assert code == 400
    assert payload["error"]["param"] == "temperature"
    assert payload["error"]["type"] == "invalid_request_error"


def test_unknown_route_is_404_envelope(http: httpx.Client) -> None:
    code, payload = _error(http.get("/nope"))
    assert code == 404
    assert set(payload["error"]) == {"message", "type", "param", "code"}


def test_upstream_key_never_reaches_the_client(
    http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    if wire == "bedrock":
        pytest.skip("the Bedrock provider has no key: its calls are signed")
    upstream.push(Turn.http_error(401, "Incorrect API key provided: sk-upstream-secret-key."))
    response = http.post("/responses", json={"model": model, "input": "Hi"})
    assert response.status_code == 401
    assert UPSTREAM_KEY not in response.text
    assert UPSTREAM_KEY not in json.dumps(dict(response.headers))


def test_create_include_reaches_a_responses_upstream_only(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(text="ok"))
    client.responses.create(model=model, input="Hi", include=["reasoning.encrypted_content"])
    sent = _last_request(upstream)
    if wire == "responses":
        assert sent["include"] == ["reasoning.encrypted_content"]
    else:
        assert "include" not in sent


def test_sequential_creates_reuse_one_upstream_connection(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    for n in range(3):
        upstream.push(Turn(text=f"answer {n}"))
    client.responses.create(model=model, input="a", store=False)
    http.post("/responses", json={"model": model, "input": "b", "stream": True, "store": False})
    client.responses.create(model=model, input="c", store=False)
    peers = {request.peer for request in upstream.model_requests()}
    assert len(peers) == 1, peers
