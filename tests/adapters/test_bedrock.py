"""BedrockAdapter against the scripted Bedrock upstream, whose judge is botocore.

Every call here goes through the real adapter, signed with SigV4, to the scripted upstream over
ASGI: botocore's signer must agree with the signature, botocore's validator and serializer with
the request, and the stream is the binary event-stream framing that botocore decodes too.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from responses_gateway.adapters.aws_auth import SigV4
from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.bedrock import (
    REDACTED_PREFIX,
    SIGNATURE_PREFIX,
    BedrockAdapter,
    BedrockOptions,
    bedrock_status_error,
    converse_usage,
    to_converse_request,
)
from responses_gateway.adapters.eventstream import EventStreamDecoder
from responses_gateway.adapters.select import make_adapter
from responses_gateway.config import parse_config
from responses_gateway.context.errors import ContextLengthExceeded, as_context_length
from responses_gateway.errors import (
    InvalidRequestError,
    ModelOutputError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
)
from responses_gateway.loop.events import LoopEvent
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState
from responses_gateway.store._credentials import NoCredentialsError, StaticCredentials
from responses_gateway.store._sigv4 import Credentials
from responses_gateway.testing.aws_oracle import (
    botocore_events,
    converse_problems,
    signature_problem,
)
from responses_gateway.testing.bedrock import TEST_CREDENTIALS, event_frames, signature_of
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn, Usage

MODEL = "us.anthropic.claude-sonnet-4-20250514-v1:0"
KEY = ("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token-1")
ARN = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-pro-v1:0"


@pytest.fixture(autouse=True)
def _known_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TEST_CREDENTIALS, KEY[0], (KEY[1], KEY[2]))


class Sink:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)


def _writer() -> tuple[OutputWriter, LoopState]:
    state = LoopState(
        response_id="resp_1", created_at=0, model=MODEL, request={}, upstream_input=[]
    )
    return OutputWriter(state, Sink()), state


def _adapter(
    script: ScriptedUpstream, streaming: Any = "auto", **options: Any
) -> tuple[BedrockAdapter, httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_fake_upstream_app(script))
    client = httpx.AsyncClient(transport=transport)
    source = StaticCredentials(Credentials(*KEY))
    adapter = BedrockAdapter(
        client,
        "http://bedrock-runtime.us-east-1.amazonaws.com",
        "us-east-1",
        options=BedrockOptions(**options),
        streaming=streaming,
        auth=SigV4("us-east-1", source=source),
    )
    return adapter, client


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
PDF = base64.b64encode(b"%PDF-1.4 fake").decode()


# --- the request -----------------------------------------------------------------------------


def test_to_converse_request_maps_every_field_and_botocore_accepts_it() -> None:
    call = ModelCall(
        model=MODEL,
        instructions="Be brief.",
        input=[
            {"type": "message", "role": "developer", "content": "Answer in French."},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
                    {"type": "input_file", "filename": "report.v2.pdf", "file_data": PDF},
                ],
            },
            {
                "type": "reasoning",
                "content": [{"type": "reasoning_text", "text": "Hmm."}],
                "encrypted_content": SIGNATURE_PREFIX + signature_of("Hmm."),
            },
            {
                "type": "function_call",
                "call_id": "call.1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "call.1", "output": "Sunny"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "It is sunny."}],
            },
            user("Thanks"),
        ],
        tools=[TOOL],
        tool_choice={"type": "function", "name": "get_weather"},
        params={"max_output_tokens": 300, "temperature": 0.5, "top_p": 0.9},
    )
    body = to_converse_request(call, BedrockOptions({"thinking": {"type": "enabled"}}))
    assert body == {
        "system": [{"text": "Be brief."}, {"text": "Answer in French."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "What is this?"},
                    {"image": {"format": "png", "source": {"bytes": PNG}}},
                    {"document": {"format": "pdf", "name": "report v2", "source": {"bytes": PDF}}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "reasoningContent": {
                            "reasoningText": {"text": "Hmm.", "signature": signature_of("Hmm.")}
                        }
                    },
                    {
                        "toolUse": {
                            "toolUseId": "call_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        }
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "call_1", "content": [{"text": "Sunny"}]}}
                ],
            },
            {"role": "assistant", "content": [{"text": "It is sunny."}]},
            {"role": "user", "content": [{"text": "Thanks"}]},
        ],
        "inferenceConfig": {"maxTokens": 300, "temperature": 0.5, "topP": 0.9},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "get_weather",
                        "inputSchema": {"json": TOOL["parameters"]},
                        "description": "Weather in a city.",
                    }
                }
            ],
            "toolChoice": {"tool": {"name": "get_weather"}},
        },
        "additionalModelRequestFields": {"thinking": {"type": "enabled"}},
    }
    path = "/model/us.anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
    assert converse_problems(path, json.dumps(body).encode()) == []


def test_converse_problems_reports_what_botocore_rejects() -> None:
    path = "/model/m/converse"
    bad = {
        "messages": [{"role": "user", "content": [], "id": 1}],
        "inferenceConfig": {"maxTokens": 0},
    }
    problems = converse_problems(path, json.dumps(bad).encode())
    assert problems and '"id"' in problems[0] and "maxTokens" in problems[0]
    assert converse_problems("/model/a:b/converse", b'{"messages": []}') == [
        "botocore sends the path /model/a%3Ab/converse, not /model/a:b/converse"
    ]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"auto": {}}),
        ("required", {"any": {}}),
        (None, None),
        ({"type": "allowed_tools", "mode": "required", "tools": []}, {"any": {}}),
    ],
)
def test_to_converse_request_tool_choice(choice: Any, expected: Any) -> None:
    body = to_converse_request(
        ModelCall(model=MODEL, input=[user("hi")], tools=[TOOL], tool_choice=choice)
    )
    assert body["toolConfig"].get("toolChoice") == expected


def test_to_converse_request_none_leaves_tools_out_unless_the_transcript_has_tool_blocks() -> None:
    plain = ModelCall(model=MODEL, input=[user("hi")], tools=[TOOL], tool_choice="none")
    assert "toolConfig" not in to_converse_request(plain)
    used = ModelCall(
        model=MODEL,
        input=[
            user("hi"),
            {
                "type": "function_call",
                "call_id": "c",
                "name": "get_weather",
                "arguments": "not json",
            },
            {"type": "function_call_output", "call_id": "c", "output": ""},
        ],
        tools=[TOOL],
        tool_choice="none",
    )
    body = to_converse_request(used)
    assert "toolChoice" not in body["toolConfig"]
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]] == ["get_weather"]
    assert body["messages"][1]["content"][0]["toolUse"]["input"] == {"arguments": "not json"}
    assert body["messages"][2]["content"][0]["toolResult"]["content"] == []


@pytest.mark.parametrize(
    ("part", "param"),
    [
        ({"type": "input_image", "image_url": "https://example.com/a.png"}, "input"),
        ({"type": "input_image", "file_id": "file_1"}, "input"),
        ({"type": "input_file", "file_id": "file_1"}, "input"),
        ({"type": "input_file", "filename": "a.exe", "file_data": PDF}, "input"),
    ],
)
def test_to_converse_request_refuses_what_bedrock_cannot_fetch(part: Any, param: str) -> None:
    call = ModelCall(model=MODEL, input=[{"type": "message", "role": "user", "content": [part]}])
    with pytest.raises(InvalidRequestError) as caught:
        to_converse_request(call)
    assert caught.value.param == param and caught.value.status_code == 400


def test_to_converse_request_refuses_a_tool_name_converse_cannot_carry() -> None:
    tool = {**TOOL, "name": "weather.get"}
    with pytest.raises(InvalidRequestError) as caught:
        to_converse_request(ModelCall(model=MODEL, input=[user("x")], tools=[tool]))
    assert caught.value.param == "tools[0].name"


def test_to_converse_request_json_schema_format_is_output_config() -> None:
    fmt = {"type": "json_schema", "name": "answer", "schema": {"type": "object"}}
    body = to_converse_request(
        ModelCall(model=MODEL, input=[user("x")], params={"text": {"format": fmt}})
    )
    assert body["outputConfig"] == {
        "textFormat": {
            "type": "json_schema",
            "structure": {"jsonSchema": {"schema": '{"type": "object"}', "name": "answer"}},
        }
    }
    assert converse_problems("/model/m/converse", json.dumps(body).encode()) == []


def test_reasoning_from_other_wires_is_not_sent() -> None:
    items = [
        user("x"),
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "t"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
    ]
    body = to_converse_request(ModelCall(model=MODEL, input=items))
    assert body["messages"][1] == {"role": "assistant", "content": [{"text": "a"}]}


# --- the answer ------------------------------------------------------------------------------


async def test_stream_text_reasoning_and_tool_calls_become_items_and_botocore_signs_alike() -> None:
    script = ScriptedUpstream(
        Turn(
            reasoning="Let me think.",
            text="Checking.",
            tool_calls=[
                ToolCall("get_weather", '{"city": "Paris"}', "tooluse_1"),
                ToolCall("get_weather", '{"city": "Rome"}', "tooluse_2"),
            ],
            usage=Usage(input_tokens=30, output_tokens=12, cached_tokens=10),
        ),
        demo=False,
    )
    adapter, client = _adapter(script)
    out, state = _writer()
    async with client:
        result = await adapter.call_llm(
            ModelCall(model=ARN, input=[user("Weather?")], tools=[TOOL]), out
        )
    sent = script.model_requests()[0]
    assert sent.path == "/model/" + ARN.replace(":", "%3A").replace("/", "%2F") + "/converse-stream"
    assert sent.headers["x-amz-security-token"] == KEY[2]
    assert sent.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY[0]}/")
    assert "/us-east-1/bedrock/aws4_request" in sent.headers["authorization"]
    assert [i["type"] for i in state.output] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]
    reasoning, message, first, second = state.output
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "Let me think."}]
    assert reasoning["encrypted_content"] == SIGNATURE_PREFIX + signature_of("Let me think.")
    assert message["content"][0]["text"] == "Checking."
    assert (first["call_id"], first["arguments"], first["status"]) == (
        "tooluse_1",
        '{"city": "Paris"}',
        "completed",
    )
    assert second["arguments"] == '{"city": "Rome"}'
    assert result.stop == "stop"
    assert result.usage == {
        "input_tokens": 30,
        "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 0},
        "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 42,
    }


async def test_parallel_tool_calls_false_reports_only_the_first_call() -> None:
    script = ScriptedUpstream(
        Turn(tool_calls=[ToolCall("get_weather", "{}"), ToolCall("get_weather", "{}")]),
        demo=False,
    )
    adapter, client = _adapter(script)
    out, state = _writer()
    call = ModelCall(
        model=MODEL, input=[user("x")], tools=[TOOL], params={"parallel_tool_calls": False}
    )
    async with client:
        await adapter.call_llm(call, out)
    assert [i["type"] for i in state.output] == ["function_call"]


@pytest.mark.parametrize(
    ("finish", "stop"), [("length", "length"), ("content_filter", "content_filter")]
)
async def test_stop_reasons_leave_the_last_item_open_for_the_driver(finish: Any, stop: str) -> None:
    script = ScriptedUpstream(Turn(text="partial answer", finish=finish), demo=False)
    adapter, client = _adapter(script)
    out, state = _writer()
    async with client:
        result = await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert result.stop == stop
    assert state.output[0]["status"] == "in_progress"


async def test_unstreamed_converse_gives_the_same_items() -> None:
    turn = Turn(
        reasoning="Think.", text="Done.", tool_calls=[ToolCall("get_weather", '{"a": 1}', "t1")]
    )
    items = []
    for streaming in ("auto", "off"):
        script = ScriptedUpstream(turn, demo=False)
        adapter, client = _adapter(script, streaming)
        out, state = _writer()
        async with client:
            await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")], tools=[TOOL]), out)
        assert script.model_requests()[0].path.endswith(
            "/converse" if streaming == "off" else "/converse-stream"
        )
        items.append([{k: v for k, v in i.items() if k != "id"} for i in state.output])
    assert items[0] == items[1]


async def test_redacted_reasoning_is_kept_opaque_and_replayed() -> None:
    script = ScriptedUpstream(Turn(encrypted_content="secret-thoughts", text="ok"), demo=False)
    adapter, client = _adapter(script)
    out, state = _writer()
    async with client:
        await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    reasoning = state.output[0]
    assert (
        reasoning["encrypted_content"]
        == REDACTED_PREFIX + base64.b64encode(b"secret-thoughts").decode()
    )
    assert not reasoning.get("content")
    body = to_converse_request(
        ModelCall(model=MODEL, input=[user("x"), reasoning, state.output[1]])
    )
    assert body["messages"][1]["content"][0] == {
        "reasoningContent": {"redactedContent": base64.b64encode(b"secret-thoughts").decode()}
    }
    assert converse_problems("/model/m/converse", json.dumps(body).encode()) == []


async def test_a_replayed_signature_that_does_not_match_is_refused_by_the_upstream() -> None:
    script = ScriptedUpstream(demo=True)
    adapter, client = _adapter(script)
    forged = {
        "type": "reasoning",
        "content": [{"type": "reasoning_text", "text": "x"}],
        "encrypted_content": SIGNATURE_PREFIX + "forged",
    }
    out, _ = _writer()
    async with client:
        with pytest.raises(UpstreamStatusError) as caught:
            await adapter.call_llm(
                ModelCall(model=MODEL, input=[user("x"), forged, user("y")]), out
            )
    assert caught.value.status_code == 400 and "signature" in caught.value.message


async def test_a_wrong_signature_is_refused_by_botocores_signer() -> None:
    script = ScriptedUpstream(demo=True)
    transport = httpx.ASGITransport(app=create_fake_upstream_app(script))
    source = StaticCredentials(Credentials(KEY[0], "not-the-secret", KEY[2]))
    async with httpx.AsyncClient(transport=transport) as client:
        adapter = BedrockAdapter(
            client, "http://localhost", "us-east-1", auth=SigV4("us-east-1", source=source)
        )
        out, _ = _writer()
        with pytest.raises(UpstreamStatusError) as caught:
            await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert caught.value.status_code == 403 and "botocore" in caught.value.message


async def test_throttling_is_a_429_the_sdk_retries() -> None:
    script = ScriptedUpstream(Turn.http_error(429, "Too many requests, please wait."), demo=False)
    adapter, client = _adapter(script)
    out, _ = _writer()
    async with client:
        with pytest.raises(UpstreamStatusError) as caught:
            await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    error = caught.value
    assert (error.status_code, error.error_type, error.code) == (
        429,
        "rate_limit_error",
        "rate_limit_exceeded",
    )
    assert error.message == "Too many requests, please wait."
    assert error.headers["x-should-retry"] == "true"


async def test_a_stream_exception_after_output_raises_its_message() -> None:
    script = ScriptedUpstream(
        Turn(
            text="one two three",
            error_event_after=2,
            error_body={"error": {"message": "The model stopped unexpectedly."}},
        ),
        demo=False,
    )
    adapter, client = _adapter(script)
    out, state = _writer()
    async with client:
        with pytest.raises(UpstreamStatusError) as caught:
            await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert caught.value.message == "The model stopped unexpectedly."
    assert caught.value.upstream_status == 502
    assert state.output[0]["type"] == "message"


BREAKS: dict[str, tuple[Turn, type[UpstreamError], str]] = {
    "abort_after_200": (Turn(text="never", drop_after=0), UpstreamError, "connection"),
    "cut_in_first_frame": (
        Turn(text="never", drop_after=0, cut_mid_event=True),
        UpstreamError,
        "connection",
    ),
    "undecodable_event": (Turn(text="never", garbage_after=0), UpstreamProtocolError, "not JSON"),
    "exception_event": (
        Turn(error_event_after=0, error_body={"error": {"message": "Model stream broke."}}),
        UpstreamStatusError,
        "Model stream broke.",
    ),
    "error_as_200": (
        Turn(error_as_200=True, error_body={"error": {"message": "Something broke inside."}}),
        UpstreamProtocolError,
        "Something broke inside.",
    ),
}
"""ConverseStream breaks before its first event: the error each raises, and what it names."""


@pytest.mark.parametrize("kind", list(BREAKS))
async def test_a_break_before_the_first_event_is_answered_by_converse_in_auto(kind: str) -> None:
    script = ScriptedUpstream(BREAKS[kind][0], Turn(text="Served."), demo=False)
    adapter, client = _adapter(script)
    out, state = _writer()
    async with client:
        result = await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert result.stop == "stop"
    assert [i["content"][0]["text"] for i in state.output] == ["Served."]
    paths = [r.path.rsplit("/", 1)[1] for r in script.model_requests()]
    assert paths == ["converse-stream", "converse"]


@pytest.mark.parametrize("kind", list(BREAKS))
async def test_a_break_before_the_first_event_is_the_error_when_streaming_is_on(kind: str) -> None:
    turn, error_type, cause = BREAKS[kind]
    script = ScriptedUpstream(turn, Turn(text="Served."), demo=False)
    adapter, client = _adapter(script, "on")
    out, state = _writer()
    async with client:
        with pytest.raises(error_type) as caught:
            await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert cause in caught.value.message
    assert state.output == [] and len(script.model_requests()) == 1


async def test_a_throttling_exception_event_is_a_429_never_retried_unstreamed() -> None:
    turn = Turn(
        error_event_after=0,
        error_body={"error": {"message": "Slow down.", "code": "rate_limit_exceeded"}},
    )
    script = ScriptedUpstream(turn, Turn(text="Served."), demo=False)
    adapter, client = _adapter(script)
    out, _ = _writer()
    async with client:
        with pytest.raises(UpstreamStatusError) as caught:
            await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert (caught.value.status_code, caught.value.message) == (429, "Slow down.")
    assert len(script.model_requests()) == 1


async def test_a_server_that_cannot_stream_is_answered_by_converse() -> None:
    script = ScriptedUpstream(Turn(text="Served."), demo=False)
    script.cannot_stream = lambda body, wire: True
    adapter, client = _adapter(script)
    out, state = _writer()
    async with client:
        await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert state.output[0]["content"][0]["text"] == "Served."
    assert [r.path.rsplit("/", 1)[1] for r in script.model_requests()] == [
        "converse-stream",
        "converse",
    ]


@pytest.mark.parametrize(
    "message",
    [
        "Input is too long for requested model.",
        "Model errors: prompt is too long: 210000 tokens > 200000 maximum",
        "Model errors: input length and `max_tokens` exceed context limit",
    ],
)
def test_context_window_errors_are_context_length_exceeded(message: str) -> None:
    headers = {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/"}
    error = bedrock_status_error(400, json.dumps({"message": message}), headers)
    assert isinstance(as_context_length(error), ContextLengthExceeded)


def test_other_validation_errors_pass_with_their_message() -> None:
    headers = {"x-amzn-errortype": "ValidationException"}
    error = bedrock_status_error(400, '{"message": "temperature: bad"}', headers)
    assert (error.status_code, error.message) == (400, "temperature: bad")
    assert not isinstance(as_context_length(error), ContextLengthExceeded)
    assert (
        bedrock_status_error(
            424, '{"message": "m"}', {"x-amzn-errortype": "ModelErrorException"}
        ).status_code
        == 502
    )


def test_converse_usage_counts_cache_reads_and_writes_as_input() -> None:
    usage = converse_usage(
        {
            "inputTokens": 5,
            "outputTokens": 2,
            "cacheReadInputTokens": 100,
            "cacheWriteInputTokens": 50,
        }
    )
    assert usage["input_tokens"] == 155 and usage["input_tokens_details"]["cached_tokens"] == 100
    assert usage["total_tokens"] == 157


async def test_malformed_tool_use_is_a_model_output_error() -> None:
    from responses_gateway.adapters.bedrock import _ConverseStream

    out, _ = _writer()
    stream = _ConverseStream(out)
    with pytest.raises(ModelOutputError):
        stream.feed("messageStop", {"stopReason": "malformed_tool_use"})


# --- the framing -----------------------------------------------------------------------------


def _base64(value: Any) -> Any:
    """botocore's parse with its blobs (bytes) back in their JSON form."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, list):
        return [_base64(v) for v in value]
    if isinstance(value, dict):
        return {k: _base64(v) for k, v in value.items()}
    return value


def test_every_scripted_stream_decodes_the_same_with_botocore_and_with_ours() -> None:
    from responses_gateway.testing.bedrock import _frame

    turn = Turn(
        reasoning="r",
        text="hello there",
        encrypted_content="x",
        tool_calls=[ToolCall("f", '{"a": [1, 2]}', "t1")],
        chunk_size=2,
    )
    script = ScriptedUpstream(demo=False)
    events = list(event_frames(script, turn, {"messages": []}))
    data = b"".join(_frame(name, event) for name, event in events)
    assert _base64(botocore_events(data)) == [{name: event} for name, event in events]
    decoder = EventStreamDecoder()
    ours = [m for i in range(0, len(data), 7) for m in decoder.feed(data[i : i + 7])]
    assert [(m.event_type, json.loads(m.payload)) for m in ours] == events
    assert decoder.pending == 0


def test_the_scripted_break_frames_are_what_botocore_reads_as_such() -> None:
    from botocore.exceptions import EventStreamError  # type: ignore[import-untyped]

    from responses_gateway.testing.bedrock import _exception_frame, _garbage_frame

    for code, kind in (
        ("rate_limit_exceeded", "throttlingException"),
        (None, "modelStreamErrorException"),
    ):
        turn = Turn(error_event_after=0, error_body={"error": {"message": "m", "code": code}})
        with pytest.raises(EventStreamError) as caught:
            botocore_events(_exception_frame(turn))
        assert caught.value.response["Error"] == {"Code": kind, "Message": "m"}
    # well framed (botocore decodes it), its payload no JSON: botocore keeps nothing of it
    assert botocore_events(_garbage_frame()) == [{"contentBlockDelta": {}}]


def test_a_corrupted_frame_is_a_protocol_error() -> None:
    from responses_gateway.testing.bedrock import _frame

    frame = bytearray(_frame("messageStart", {"role": "assistant"}))
    frame[-6] ^= 0xFF
    with pytest.raises(UpstreamProtocolError):
        EventStreamDecoder().feed(bytes(frame))


# --- signing other wires ---------------------------------------------------------------------


async def test_a_chat_provider_with_aws_sigv4_is_signed_as_botocore_signs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bedrock's OpenAI-compatible endpoint: the chat wire, signed with the environment's role."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEY[1])
    monkeypatch.setenv("AWS_SESSION_TOKEN", KEY[2])
    monkeypatch.delenv("AWS_CREDENTIAL_EXPIRATION", raising=False)
    url = "https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1"
    raw = {"name": "oss", "base_url": url, "api": "chat", "aws_sigv4": True}
    (provider,) = parse_config({"providers": [raw]}, {}).providers
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}
        body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        adapter = make_adapter(provider, client)
        out, state = _writer()
        await adapter.call_llm(ModelCall(model="openai.gpt-oss-120b-1:0", input=[user("x")]), out)
    (request,) = sent
    assert request.url.path == "/openai/v1/chat/completions"
    assert "/us-west-2/bedrock/aws4_request" in request.headers["authorization"]
    credentials = {KEY[0]: (KEY[1], KEY[2])}
    problem = signature_problem(
        "POST", str(request.url), dict(request.headers), request.content, credentials
    )
    assert problem is None
    assert state.output[0]["content"][0]["text"] == "hi"


async def test_signing_without_any_credentials_is_a_502_naming_the_cause() -> None:
    class Nothing:
        async def get(self) -> Credentials:
            raise NoCredentialsError("Unable to locate credentials")

    request = httpx.Request(
        "POST", "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/converse"
    )
    with pytest.raises(UpstreamError) as caught:
        await SigV4("us-east-1", source=Nothing()).sign(request)
    assert caught.value.status_code == 502 and "No AWS credentials" in caught.value.message


def test_make_adapter_speaks_converse_to_a_bedrock_provider() -> None:
    raw = {"name": "br", "api": "bedrock", "aws_region": "us-east-1", "models": [MODEL]}
    (provider,) = parse_config({"providers": [raw]}, {}).providers
    adapter = make_adapter(provider, httpx.AsyncClient())
    assert adapter.wire == "bedrock"


@pytest.mark.parametrize(
    ("model", "params", "fields", "max_tokens"),
    [
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", {"effort": "low"},
         {"thinking": {"type": "enabled", "budget_tokens": 2048}}, 2048 + 8192),
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", {"effort": "high", "max": 5000},
         {"thinking": {"type": "enabled", "budget_tokens": 4999}}, 5000),
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", {"effort": "high", "max": 500}, None, 500),
        ("us.amazon.nova-2-lite-v1:0", {"effort": "minimal"},
         {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "low"}}, None),
        ("openai.gpt-oss-120b-1:0", {"effort": "medium"}, {"reasoning_effort": "medium"}, None),
        ("openai.gpt-oss-120b-1:0", {"effort": "none"}, None, None),
    ],
)  # fmt: skip
def test_reasoning_effort_is_the_model_familys_own_field(
    model: str, params: dict[str, Any], fields: Any, max_tokens: int | None
) -> None:
    sent: dict[str, Any] = {"reasoning": {"effort": params["effort"]}}
    if "max" in params:
        sent["max_output_tokens"] = params["max"]
    body = to_converse_request(ModelCall(model=model, input=[user("x")], params=sent))
    assert body.get("additionalModelRequestFields") == fields
    assert body.get("inferenceConfig", {}).get("maxTokens") == max_tokens
    assert converse_problems("/model/m/converse", json.dumps(body).encode()) == []


def test_the_providers_own_fields_win_over_the_effort() -> None:
    call = ModelCall(
        model="openai.gpt-oss-20b-1:0", input=[user("x")], params={"reasoning": {"effort": "high"}}
    )
    options = BedrockOptions({"reasoning_effort": "low", "top_k": 5})
    fields = to_converse_request(call, options)["additionalModelRequestFields"]
    assert fields == {"reasoning_effort": "low", "top_k": 5}


def test_user_service_tier_and_json_object_are_sent_in_converses_terms() -> None:
    params = {
        "user": "ada@example.com; drop",
        "service_tier": "flex",
        "text": {"format": {"type": "json_object"}},
    }
    body = to_converse_request(ModelCall(model=MODEL, input=[user("x")], params=params))
    assert body["requestMetadata"] == {"user": "ada@example.com_ drop"}
    assert body["serviceTier"] == {"type": "flex"}
    assert body["outputConfig"]["textFormat"]["structure"]["jsonSchema"] == {
        "schema": '{"type": "object"}',
        "name": "json_object",
    }
    assert converse_problems("/model/m/converse", json.dumps(body).encode()) == []
    auto = to_converse_request(
        ModelCall(model=MODEL, input=[user("x")], params={"service_tier": "auto"})
    )
    assert "serviceTier" not in auto


def test_cache_points_mark_the_system_the_tools_and_the_transcript() -> None:
    call = ModelCall(model=MODEL, instructions="Be brief.", input=[user("x")], tools=[TOOL])
    body = to_converse_request(call, BedrockOptions(cache_points=True))
    point = {"cachePoint": {"type": "default"}}
    assert body["system"] == [{"text": "Be brief."}, point]
    assert body["toolConfig"]["tools"][-1] == point
    assert body["messages"][-1]["content"] == [{"text": "x"}, point]
    assert converse_problems("/model/m/converse", json.dumps(body).encode()) == []
    assert "cachePoint" not in json.dumps(to_converse_request(call))


async def test_cache_points_pass_botocore_and_cache_usage_comes_back() -> None:
    usage = Usage(input_tokens=1_200, output_tokens=5, cached_tokens=1_000, cache_write_tokens=150)
    script = ScriptedUpstream(Turn(text="ok", usage=usage), demo=False)
    adapter, client = _adapter(script, cache_points=True)
    out, _ = _writer()
    call = ModelCall(model=MODEL, instructions="Be brief.", input=[user("x")], tools=[TOOL])
    async with client:
        result = await adapter.call_llm(call, out)
    assert "cachePoint" in json.dumps(script.model_requests()[0].json)
    assert result.usage is not None
    assert result.usage["input_tokens"] == 1_200
    assert result.usage["input_tokens_details"] == {
        "cached_tokens": 1_000,
        "cache_write_tokens": 150,
    }


def test_tool_results_lead_the_user_turn_even_after_a_user_message() -> None:
    items = [
        user("Look"),
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        user("and hurry"),
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    body = to_converse_request(ModelCall(model=MODEL, input=items, tools=[TOOL]))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "c1", "content": [{"text": "sunny"}]}},
        {"text": "and hurry"},
    ]


def test_a_transcript_starting_with_the_models_turn_opens_with_a_user_turn() -> None:
    items = [{"type": "message", "role": "assistant", "content": "Earlier answer."}, user("Next")]
    body = to_converse_request(ModelCall(model=MODEL, input=items))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"][0]["text"].startswith("(The conversation continues")


def _says(role: str, block: dict[str, Any]) -> dict[str, Any]:
    return {"role": role, "content": [block]}


_USE = {"toolUse": {"toolUseId": "t", "name": "f", "input": {}}}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([_says("assistant", {"text": "a"})], "start with a user"),
        ([_says("user", {"text": "a"}), _says("user", {"text": "b"})], "alternate"),
        ([_says("user", {"text": "a"}), _says("assistant", _USE), _says("user", {"text": "b"})],
         "toolResult"),
    ],
)  # fmt: skip
async def test_the_scripted_upstream_refuses_what_bedrock_refuses(
    messages: list[dict[str, Any]], problem: str
) -> None:
    script = ScriptedUpstream(demo=True)
    transport = httpx.ASGITransport(app=create_fake_upstream_app(script))
    body = json.dumps({"messages": messages}).encode()
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        request = client.build_request(
            "POST", "/model/m/converse", content=body, headers={"Authorization": "Bearer k"}
        )
        answer = await client.send(request)
    assert answer.status_code == 400 and problem in answer.json()["message"]


async def test_a_bedrock_api_key_is_a_bearer_token_and_never_echoed() -> None:
    raw = {"name": "br", "api": "bedrock", "aws_region": "us-east-1", "api_key": "ABSK-secret"}
    (provider,) = parse_config({"providers": [raw]}, {}).providers
    script = ScriptedUpstream(Turn.http_error(403, "Bad key ABSK-secret"), Turn(text="ok"))
    transport = httpx.ASGITransport(app=create_fake_upstream_app(script))
    async with httpx.AsyncClient(transport=transport) as client:
        adapter = make_adapter(provider, client)
        out, state = _writer()
        with pytest.raises(UpstreamStatusError) as caught:
            await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
        assert caught.value.status_code == 403 and "ABSK-secret" not in caught.value.message
        await adapter.call_llm(ModelCall(model=MODEL, input=[user("x")]), out)
    assert script.model_requests()[-1].headers["authorization"] == "Bearer ABSK-secret"
    assert state.output[-1]["content"][0]["text"] == "ok"
