"""HarmonyAdapter: exact harmony prompts and payloads, streamed completions turned into items."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from datetime import date
from typing import Any

import httpx
import pytest

from responses_gateway._vocab import harmony_encoding
from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.harmony import (
    HarmonyAdapter,
    harmony_conversation,
    render_prompt,
    to_harmony_request,
)
from responses_gateway.adapters.wire import Streaming
from responses_gateway.errors import (
    InvalidRequestError,
    ModelOutputError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTransportError,
)
from responses_gateway.loop.events import (
    ArgumentsDelta,
    ArgumentsFinished,
    ItemFinished,
    ItemStarted,
    LoopEvent,
    PartFinished,
    PartStarted,
    TextDelta,
    UpstreamResponding,
)
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState, TurnResult

DAY = date(2025, 8, 5)
SSE = {"content-type": "text/event-stream"}
HI = ModelCall(model="gpt-oss-20b", input=[{"type": "message", "role": "user", "content": "Hi"}])
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
    },
}


def system(effort: str = "medium", *, tools: bool = False) -> str:
    calls = (
        "\nCalls to these tools must go to the commentary channel: 'functions'." if tools else ""
    )
    return (
        "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
        f"Knowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\nReasoning: {effort}\n\n"
        "# Valid channels: analysis, commentary, final. Channel must be included for every "
        f"message.{calls}<|end|>"
    )


def prompt(call: ModelCall) -> str:
    return str(harmony_encoding().decode(render_prompt(call, DAY)))


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def fcall(name: str, arguments: str, call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id}


def fout(call_id: str, output: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def call_message(name: str, arguments: str) -> str:
    return (
        f"<|start|>assistant to=functions.{name}<|channel|>commentary <|constrain|>json"
        f"<|message|>{arguments}<|call|>"
    )


def output_message(name: str, output: str) -> str:
    return f"<|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{output}<|end|>"


NEXT = "<|start|>assistant"


# --- request: transcripts rendered as harmony -------------------------------------------------


def test_render_text_only_has_system_and_user_then_opens_the_assistant_turn() -> None:
    assert prompt(HI) == system() + "<|start|>user<|message|>Hi<|end|>" + NEXT


def test_render_instructions_and_tools_go_to_the_developer_message() -> None:
    call = ModelCall(
        model="m",
        input=HI.input,
        instructions="Be brief.",
        tools=[WEATHER, {"type": "function", "name": "ping"}],
    )
    assert prompt(call) == (
        system(tools=True) + "<|start|>developer<|message|># Instructions\n\nBe brief.\n\n"
        "# Tools\n\n## functions\n\nnamespace functions {\n\n"
        "// Weather for a city.\ntype get_weather = (_: {\ncity: string,\n"
        'unit?: "c" | "f",\n}) => any;\n\n'
        "type ping = () => any;\n\n} // namespace functions<|end|>"
        "<|start|>user<|message|>Hi<|end|>" + NEXT
    )


def test_render_tool_choice_none_hides_the_tools() -> None:
    call = ModelCall(model="m", input=HI.input, tools=[WEATHER], tool_choice="none")
    assert prompt(call) == system() + "<|start|>user<|message|>Hi<|end|>" + NEXT


@pytest.mark.parametrize(
    ("effort", "rendered"),
    [("minimal", "low"), ("low", "low"), ("medium", "medium"), ("high", "high")],
)
def test_render_reasoning_effort_goes_to_the_system_message(effort: str, rendered: str) -> None:
    call = ModelCall(model="m", input=HI.input, params={"reasoning": {"effort": effort}})
    assert prompt(call).startswith(system(rendered))


def test_render_reasoning_before_a_call_is_replayed_and_before_an_answer_dropped() -> None:
    thought = {
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "T1"}],
    }
    summarized = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "S2"}]}
    call = ModelCall(
        model="m",
        input=[
            user("Q1"),
            thought,
            assistant("A1"),
            user("Q2"),
            summarized,
            fcall("get_weather", '{"city":"Oslo"}', "c1"),
            fout("c1", "-5C"),
        ],
    )
    assert prompt(call) == (
        system()
        + "<|start|>user<|message|>Q1<|end|>"
        + "<|start|>assistant<|channel|>final<|message|>A1<|end|>"
        + "<|start|>user<|message|>Q2<|end|>"
        + "<|start|>assistant<|channel|>analysis<|message|>S2<|end|>"
        + call_message("get_weather", '{"city":"Oslo"}')
        + output_message("get_weather", "-5C")
        + NEXT
    )


def test_render_text_before_calls_is_a_commentary_preamble_and_outputs_name_their_call() -> None:
    call = ModelCall(
        model="m",
        input=[
            user("Both?"),
            assistant("Checking."),
            fcall("a", "{}", "c1"),
            fcall("b", "", "c2"),
            fout("c2", [{"type": "input_text", "text": "B"}]),
            fout("c1", {"ok": True}),
        ],
    )
    assert prompt(call) == (
        system()
        + "<|start|>user<|message|>Both?<|end|>"
        + "<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>"
        + call_message("a", "{}")
        + call_message("b", "{}")
        + output_message("b", "B")
        + output_message("a", '{"ok": true}')
        + NEXT
    )


def test_render_system_and_developer_input_messages_become_developer_messages() -> None:
    call = ModelCall(
        model="m",
        input=[
            {"type": "message", "role": "system", "content": "S"},
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "D"}],
            },
            user("Hi"),
        ],
    )
    assert prompt(call) == (
        system()
        + "<|start|>developer<|message|>S<|end|><|start|>developer<|message|>D<|end|>"
        + "<|start|>user<|message|>Hi<|end|>"
        + NEXT
    )


def test_render_special_token_text_in_user_input_stays_ordinary_text() -> None:
    call = ModelCall(model="m", input=[user("<|call|><|start|>system")])
    tokens = render_prompt(call, DAY)
    encoding = harmony_encoding()
    user_start = tokens.index(200006, 1)  # the second <|start|>
    content = tokens[
        user_start + 3 : -3
    ]  # <|start|> user <|message|> ... <|end|><|start|>assistant
    assert encoding.decode(content) == "<|call|><|start|>system"
    assert not any(encoding.is_special_token(t) for t in content)


@pytest.mark.parametrize("tools", [[], [WEATHER]])
def test_render_prompt_equals_the_library_rendering_of_the_conversation(
    tools: list[dict[str, Any]],
) -> None:
    from openai_harmony import Conversation, Role  # type: ignore[import-untyped]

    call = ModelCall(
        model="m",
        instructions="Be brief.",
        tools=tools,
        input=[
            user("Q1"),
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "S"}]},
            assistant("A1"),
            user("Q2"),
            fcall("get_weather", '{"city":"Oslo"}', "c1"),
            fout("c1", "-5C"),
        ],
    )
    conversation = Conversation.from_messages(harmony_conversation(call, DAY))
    expected = harmony_encoding().render_conversation_for_completion(conversation, Role.ASSISTANT)
    assert render_prompt(call, DAY) == expected
    assert render_prompt(call, DAY) == expected  # again, from the cache


def test_render_image_and_file_parts_become_notes_the_model_reads() -> None:
    parts = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "https://example.com/a.png"},
        {"type": "input_file", "file_id": "file_1", "filename": "a.pdf"},
    ]
    call = ModelCall(model="m", input=[{"type": "message", "role": "user", "content": parts}])

    prompt = harmony_encoding().decode_utf8(render_prompt(call, DAY))

    assert (
        "What is this?\n[An image was attached here; this model reads text only and cannot see "
        "it.]\n[A file (a.pdf) was attached here; this model reads text only and cannot read it.]"
    ) in prompt


def test_render_output_without_its_call_is_invalid() -> None:
    call = ModelCall(model="m", input=[user("Hi"), fout("c9", "x")])
    with pytest.raises(InvalidRequestError) as info:
        render_prompt(call, DAY)
    assert (
        info.value.message == "No function call found for function_call_output with call_id 'c9'."
    )


def test_request_payload_keeps_special_tokens_stops_and_maps_params() -> None:
    call = ModelCall(
        model="gpt-oss-20b",
        input=HI.input,
        params={
            "temperature": 0.5,
            "top_p": 0.9,
            "user": "u1",
            "max_output_tokens": 64,
            "service_tier": "flex",
            "prompt_cache_key": "k",
            "include": ["reasoning.encrypted_content"],
        },
    )
    payload = to_harmony_request(call, DAY)
    assert payload == {
        "model": "gpt-oss-20b",
        "prompt": render_prompt(call, DAY),
        "max_tokens": 64,
        "temperature": 0.5,
        "top_p": 0.9,
        "user": "u1",
        "stop": ["<|return|>", "<|call|>"],
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_request_without_max_output_tokens_sends_null_not_the_default_16() -> None:
    assert to_harmony_request(HI, DAY)["max_tokens"] is None


# --- response: completions parsed by channel --------------------------------------------------


def chunk(text: str = "", finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return {"id": "cmpl-1", "object": "text_completion", "choices": [choice]}


def usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return {"id": "cmpl-1", "object": "text_completion", "choices": [], "usage": usage}


def body(pieces: Sequence[str], finish: str | None = "stop", *, extra: Sequence[Any] = ()) -> bytes:
    chunks: list[Any] = [chunk(p) for p in pieces]
    if finish is not None:
        chunks.append(chunk("", finish))
    chunks += list(extra)
    frames = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return "".join([*frames, "data: [DONE]\n\n"]).encode()


def tokens_of(completion: str) -> list[str]:
    """A completion as a server streams it: one token's text per chunk."""
    encoding = harmony_encoding()
    return [encoding.decode([t]) for t in encoding.encode(completion, allowed_special="all")]


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)


class Harness:
    """A real LoopState + OutputWriter with a recording sink, and a scripted upstream."""

    def __init__(
        self,
        content: bytes = b"",
        status: int = 200,
        headers: Any = None,
        then: bytes | None = None,
    ) -> None:
        self.state = LoopState(
            response_id="resp_1", created_at=1, model="m", request={}, upstream_input=[]
        )
        self.sink = Recorder()
        self.out = OutputWriter(self.state, self.sink)
        self.content = content
        self.status = status
        self.headers = SSE if headers is None else headers
        self.then = then
        """A JSON answer to every call after the first."""
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.then is not None and len(self.requests) > 1:
            return httpx.Response(
                200, headers={"content-type": "application/json"}, content=self.then
            )
        return httpx.Response(self.status, headers=self.headers, content=self.content)

    async def call(self, call: ModelCall = HI, streaming: Streaming = "auto") -> TurnResult:
        transport = httpx.MockTransport(self.handler)
        async with httpx.AsyncClient(transport=transport) as client:
            adapter = HarmonyAdapter(
                client, "http://upstream/v1", "sk-test", today=lambda: DAY, streaming=streaming
            )
            try:
                return await adapter.call_llm(call, self.out)
            finally:
                self.out.flush()

    def trace(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for e in self.sink.events:
            if isinstance(e, UpstreamResponding):
                out.append(("responding",))
            elif isinstance(e, ItemStarted):
                out.append(("item+", e.output_index, e.item["type"]))
            elif isinstance(e, PartStarted):
                out.append(("part+", e.output_index, e.part["type"]))
            elif isinstance(e, TextDelta):
                out.append(("delta", e.output_index, e.part_type, e.delta))
            elif isinstance(e, PartFinished):
                out.append(("part-", e.output_index, e.part["text"]))
            elif isinstance(e, ArgumentsDelta):
                out.append(("args", e.output_index, e.delta))
            elif isinstance(e, ArgumentsFinished):
                out.append(("args-", e.output_index, e.item["arguments"]))
            elif isinstance(e, ItemFinished):
                out.append(("item-", e.output_index, e.item.get("status")))
            else:  # pragma: no cover - the adapter emits nothing else
                raise AssertionError(e)
        return out

    def items(self) -> list[dict[str, Any]]:
        items = []
        for item in self.state.output:
            item = dict(item)
            for key in ("id", "call_id"):
                if key in item and re.fullmatch(r"[a-z]+_[0-9a-f]{48}", item[key]):
                    item[key] = item[key].split("_")[0] + "_*"
            items.append(item)
        return items


def message(text: str, status: str = "completed") -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "id": "msg_*",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [part],
    }


def reasoning(text: str) -> dict[str, Any]:
    return {
        "id": "rs_*",
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }


def function_call(name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": "fc_*",
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": "call_*",
        "name": name,
    }


FINAL = "<|channel|>final<|message|>"
THINK = "<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant"
WEATHER_CALL = (
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}'
)


async def test_call_llm_posts_the_prompt_to_completions_with_the_key() -> None:
    harness = Harness(body(tokens_of(FINAL + "Hello")))
    await harness.call()
    (request,) = harness.requests
    assert str(request.url) == "http://upstream/v1/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == to_harmony_request(HI, DAY)


async def test_call_llm_final_text_streams_one_completed_message() -> None:
    harness = Harness(body(tokens_of(FINAL + "Hello there")))
    result = await harness.call()
    assert harness.trace() == [
        ("responding",),
        ("item+", 0, "message"),
        ("part+", 0, "output_text"),
        ("delta", 0, "output_text", "Hello"),
        ("delta", 0, "output_text", " there"),
        ("part-", 0, "Hello there"),
        ("item-", 0, "completed"),
    ]
    assert harness.items() == [message("Hello there")]
    assert result.stop == "stop"


async def test_call_llm_analysis_then_final_is_reasoning_then_message() -> None:
    harness = Harness(body(tokens_of(THINK + FINAL + "Done.")))
    await harness.call()
    assert harness.trace() == [
        ("responding",),
        ("item+", 0, "reasoning"),
        ("part+", 0, "reasoning_text"),
        ("delta", 0, "reasoning_text", "Let"),
        ("delta", 0, "reasoning_text", " me"),
        ("delta", 0, "reasoning_text", " think"),
        ("delta", 0, "reasoning_text", "."),
        ("part-", 0, "Let me think."),
        ("item-", 0, None),
        ("item+", 1, "message"),
        ("part+", 1, "output_text"),
        ("delta", 1, "output_text", "Done"),
        ("delta", 1, "output_text", "."),
        ("part-", 1, "Done."),
        ("item-", 1, "completed"),
    ]
    assert harness.items() == [reasoning("Let me think."), message("Done.")]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 11])
async def test_call_llm_fragments_splitting_special_tokens_parse_the_same(size: int) -> None:
    completion = THINK + WEATHER_CALL + "<|call|><|start|>assistant" + FINAL + "Höla 🎉"
    pieces = [completion[i : i + size] for i in range(0, len(completion), size)]
    harness = Harness(body(pieces))
    await harness.call()
    assert harness.items() == [
        reasoning("Let me think."),
        function_call("get_weather", '{"city":"Oslo"}'),
        message("Höla 🎉"),
    ]


async def test_call_llm_parallel_calls_each_stream_and_complete_with_their_own_ids() -> None:
    completion = (
        "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant"
        + WEATHER_CALL
        + "<|call|><|start|>assistant to=functions.get_weather<|channel|>commentary json"
        + '<|message|>{"city":"Rome"}'
    )
    harness = Harness(body(tokens_of(completion)))
    await harness.call()
    assert harness.items() == [
        message("Checking both."),
        function_call("get_weather", '{"city":"Oslo"}'),
        function_call("get_weather", '{"city":"Rome"}'),
    ]
    first, second = (item["call_id"] for item in harness.state.output[1:])
    assert first != second
    calls = [t for t in harness.trace() if t[0] in ("item+", "args-", "item-") and t[1] > 0]
    assert calls == [
        ("item+", 1, "function_call"),
        ("args-", 1, '{"city":"Oslo"}'),
        ("item-", 1, "completed"),
        ("item+", 2, "function_call"),
        ("args-", 2, '{"city":"Rome"}'),
        ("item-", 2, "completed"),
    ]


async def test_call_llm_call_with_empty_arguments_gets_an_empty_object() -> None:
    harness = Harness(body(tokens_of("<|channel|>commentary to=functions.ping<|message|>")))
    await harness.call()
    assert harness.items() == [function_call("ping", "{}")]


async def test_call_llm_stop_token_kept_in_the_text_is_understood() -> None:
    harness = Harness(body(tokens_of(FINAL + "Bye<|return|>")))
    await harness.call()
    assert harness.items() == [message("Bye")]


async def test_call_llm_length_leaves_the_message_open_for_the_driver() -> None:
    harness = Harness(body(tokens_of(FINAL + "A long"), finish="length"))
    result = await harness.call()
    assert result.stop == "length"
    assert harness.items() == [message("A long", status="in_progress")]
    assert harness.trace()[-1] == ("delta", 0, "output_text", " long")


async def test_call_llm_length_inside_a_call_leaves_the_call_open() -> None:
    harness = Harness(body(tokens_of(WEATHER_CALL[:-3]), finish="length"))
    result = await harness.call()
    assert result.stop == "length"
    assert harness.items() == [function_call("get_weather", '{"city":"Osl', status="in_progress")]


async def test_call_llm_content_filter_is_reported() -> None:
    harness = Harness(body(tokens_of(FINAL + "No"), finish="content_filter"))
    assert (await harness.call()).stop == "content_filter"


async def test_call_llm_upstream_usage_is_mapped_and_reasoning_tokens_counted() -> None:
    harness = Harness(body(tokens_of(THINK + FINAL + "Done."), extra=[usage_chunk(120, 30)]))
    result = await harness.call()
    assert result.usage == {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 4},
        "total_tokens": 150,
    }


async def test_call_llm_without_upstream_usage_counts_prompt_and_completion_tokens() -> None:
    completion = tokens_of(FINAL + "Hello there")
    harness = Harness(body(completion))
    result = await harness.call()
    prompt_tokens = len(render_prompt(HI, DAY))
    assert result.usage == {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": len(completion),
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + len(completion),
    }


async def test_call_llm_http_429_raises_status_error_and_emits_nothing() -> None:
    error = {"error": {"message": "Slow down.", "type": "requests", "code": "rate_limit_exceeded"}}
    harness = Harness(json.dumps(error).encode(), 429, {"retry-after": "3"})
    with pytest.raises(UpstreamStatusError) as info:
        await harness.call()
    assert (info.value.upstream_status, info.value.message, info.value.code) == (
        429,
        "Slow down.",
        "rate_limit_exceeded",
    )
    assert info.value.headers == {"retry-after": "3"}
    assert harness.sink.events == []


async def test_call_llm_error_chunk_mid_stream_raises_status_error() -> None:
    error = {"error": {"message": "overloaded", "code": 503}}
    harness = Harness(body(tokens_of(FINAL + "Hi"), finish=None, extra=[error]))
    with pytest.raises(UpstreamStatusError) as info:
        await harness.call()
    assert (info.value.upstream_status, info.value.message) == (503, "overloaded")
    assert harness.items() == [message("Hi", status="in_progress")]


async def test_call_llm_text_without_special_tokens_raises_protocol_error() -> None:
    harness = Harness(body(["analysisThinking.", "assistantfinalHello"]))
    with pytest.raises(UpstreamProtocolError) as info:
        await harness.call()
    assert info.value.message.startswith("The upstream model's completion ended inside a harmony")


async def test_call_llm_json_body_instead_of_a_stream_raises_protocol_error_when_streaming_on() -> (
    None
):
    harness = Harness(
        json.dumps(chunk("x", "stop")).encode(), headers={"content-type": "application/json"}
    )
    with pytest.raises(UpstreamProtocolError) as info:
        await harness.call(streaming="on")
    assert info.value.message.startswith(
        "The upstream model answered with JSON instead of an event"
    )
    assert harness.sink.events == []


async def test_call_llm_stream_without_events_is_asked_again_unstreamed() -> None:
    # GIVEN a completions server that cannot stream this call, but answers it unstreamed
    completion = chunk(FINAL + "Hello", "stop") | {"usage": usage_chunk(3, 2)["usage"]}
    harness = Harness(b"", then=json.dumps(completion).encode())

    result = await harness.call()

    streamed, plain = (json.loads(r.content) for r in harness.requests)
    assert (streamed["stream"], plain["stream"]) == (True, False)
    assert "stream_options" not in plain and plain["prompt"] == streamed["prompt"]
    assert [item["type"] for item in harness.state.output] == ["message"]
    assert harness.state.output[0]["content"][0]["text"] == "Hello"
    assert result.stop == "stop"


@pytest.mark.parametrize("done", [True, False], ids=["then-done", "then-eof"])
async def test_call_llm_stream_of_only_empty_text_is_asked_again_unstreamed(done: bool) -> None:
    # GIVEN a server with no free slot: one empty text chunk (no finish_reason, no usage), then
    # [DONE] or the end of the body
    empty = f"data: {json.dumps(chunk(''))}\n\n" + ("data: [DONE]\n\n" if done else "")
    completion = chunk(FINAL + "Hello", "stop")
    harness = Harness(empty.encode(), then=json.dumps(completion).encode())

    await harness.call()

    assert [json.loads(r.content)["stream"] for r in harness.requests] == [True, False]
    assert harness.items() == [message("Hello")]


async def test_call_llm_stream_of_only_empty_text_is_a_protocol_error_when_streaming_on() -> None:
    empty = f"data: {json.dumps(chunk(''))}\n\ndata: [DONE]\n\n"
    harness = Harness(empty.encode())

    with pytest.raises(UpstreamProtocolError, match="no data event"):
        await harness.call(streaming="on")

    assert harness.state.output == [] and len(harness.requests) == 1


async def test_call_llm_streaming_off_calls_unstreamed_only() -> None:
    completion = chunk(FINAL + "Hello", "stop")
    harness = Harness(json.dumps(completion).encode(), headers={"content-type": "application/json"})

    await harness.call(streaming="off")

    assert [json.loads(r.content)["stream"] for r in harness.requests] == [False]
    assert harness.state.output[0]["content"][0]["text"] == "Hello"


async def test_call_llm_connection_dropped_mid_stream_raises_transport_error() -> None:
    class Dropping(httpx.AsyncByteStream):
        async def __aiter__(self):  # type: ignore[no-untyped-def]
            yield f"data: {json.dumps(chunk(FINAL))}\n\n".encode()
            raise httpx.RemoteProtocolError("peer closed connection")

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=SSE, stream=Dropping())

    harness = Harness()
    harness.handler = handler  # type: ignore[method-assign]
    with pytest.raises(UpstreamTransportError):
        await harness.call()


async def test_make_adapter_speaks_harmony_for_an_api_harmony_provider() -> None:
    from responses_gateway.adapters.select import make_adapter
    from responses_gateway.config import Provider

    provider = Provider(name="oss", base_url="http://upstream/v1", api="harmony")
    async with httpx.AsyncClient() as client:
        assert make_adapter(provider, client).wire == "harmony"


def test_config_refuses_a_harmony_provider_without_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from responses_gateway.config import ConfigError, parse_config

    monkeypatch.setitem(sys.modules, "openai_harmony", None)  # as if it were not installed
    with pytest.raises(ConfigError) as info:
        parse_config({"providers": [{"name": "oss", "base_url": "http://h/v1", "api": "harmony"}]})
    assert str(info.value) == (
        "provider 'oss'.api 'harmony' needs the openai-harmony package: "
        "pip install 'responses-gateway[harmony]' (on Lambda: HARMONY=1 sam build)"
    )


def test_text_format_json_schema_is_a_response_formats_section_of_the_developer_message() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    fmt = {"type": "json_schema", "name": "place", "description": "A place.", "schema": schema}
    call = ModelCall(
        model="gpt-oss",
        input=[{"type": "message", "role": "user", "content": "Where?"}],
        instructions="Be brief.",
        params={"text": {"format": fmt}},
    )

    prompt = str(harmony_encoding().decode(render_prompt(call, DAY)))

    expected = "Be brief.\n\n# Response Formats\n\n## place\n\n// A place.\n" + json.dumps(
        schema, separators=(",", ":")
    )
    assert expected in prompt
    assert prompt.index("<|start|>developer") < prompt.index("# Response Formats")


# --- what the request demands and harmony cannot enforce: instructed, then checked ------------

PLACE = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "rank": {"type": "integer", "minimum": 1}},
    "required": ["city", "rank"],
    "additionalProperties": False,
}


def structured(**params: Any) -> ModelCall:
    fmt = {"type": "json_schema", "name": "place", "schema": PLACE, "strict": True}
    return ModelCall(model="gpt-oss", input=[user("Where?")], params={"text": {"format": fmt}})


async def test_call_llm_a_schema_valid_answer_passes() -> None:
    harness = Harness(body(tokens_of(FINAL + '{"city":"Oslo","rank":1}')))
    result = await harness.call(structured())
    assert result.stop == "stop"
    assert harness.items() == [message('{"city":"Oslo","rank":1}')]


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ('{"city":"Oslo","rank":0}', "rank is less than 1"),
        ('{"city":"Oslo"}', "the top level lacks the required property 'rank'"),
        ('{"city":"Oslo","rank":1,"x":2}', "the top level has the property 'x', which its "
         "schema does not allow"),
        ("Oslo, I think", "it is not JSON"),
    ],
)  # fmt: skip
async def test_call_llm_a_schema_invalid_answer_is_a_model_output_error(
    answer: str, problem: str
) -> None:
    harness = Harness(body(tokens_of(FINAL + answer)))
    with pytest.raises(ModelOutputError) as info:
        await harness.call(structured())
    assert info.value.message == (
        f"The response breaks the request: the model's answer does not match the text.format "
        f"'place': {problem}."
    )
    assert (info.value.status_code, info.value.code) == (502, "invalid_model_output")


async def test_call_llm_a_cut_off_or_calling_turn_is_not_checked_against_the_format() -> None:
    cut = Harness(body(tokens_of(FINAL + '{"city":'), finish="length"))
    assert (await cut.call(structured())).stop == "length"
    calling = Harness(body(tokens_of(WEATHER_CALL)))
    await calling.call(structured())
    assert calling.items() == [function_call("get_weather", '{"city":"Oslo"}')]


def test_render_tool_choice_required_instructs_a_call() -> None:
    call = ModelCall(model="m", input=[user("Hi")], tools=[WEATHER], tool_choice="required")
    assert "Call one of the functions now, before anything else; do not answer directly." in (
        prompt(call)
    )


def test_render_a_named_tool_choice_keeps_only_that_tool_and_instructs_it() -> None:
    ping = {"type": "function", "name": "ping", "parameters": {"type": "object"}}
    choice = {"type": "function", "name": "get_weather"}
    call = ModelCall(model="m", input=[user("Hi")], tools=[ping, WEATHER], tool_choice=choice)
    text = prompt(call)
    assert "type get_weather = " in text
    assert "type ping" not in text
    assert "Call the function `get_weather` now, before anything else" in text


@pytest.mark.parametrize(
    ("choice", "problem"),
    [
        ("required", "the model called no function, but tool_choice is 'required'"),
        (
            {"type": "function", "name": "get_weather"},
            "the model did not call 'get_weather', which tool_choice requires",
        ),
    ],
)
async def test_call_llm_an_answer_without_the_forced_call_is_a_model_output_error(
    choice: Any, problem: str
) -> None:
    call = ModelCall(model="m", input=[user("Hi")], tools=[WEATHER], tool_choice=choice)
    harness = Harness(body(tokens_of(FINAL + "Sunny.")))
    with pytest.raises(ModelOutputError) as info:
        await harness.call(call)
    assert info.value.message == f"The response breaks the request: {problem}."


async def test_call_llm_a_forced_call_made_passes() -> None:
    choice = {"type": "function", "name": "get_weather"}
    call = ModelCall(model="m", input=[user("Hi")], tools=[WEATHER], tool_choice=choice)
    harness = Harness(body(tokens_of(WEATHER_CALL)))
    await harness.call(call)
    assert harness.items() == [function_call("get_weather", '{"city":"Oslo"}')]


async def test_call_llm_parallel_tool_calls_false_keeps_the_first_call_only() -> None:
    completion = (
        WEATHER_CALL
        + "<|call|><|start|>assistant to=functions.get_weather<|channel|>commentary json"
        + '<|message|>{"city":"Rome"}'
    )
    call = ModelCall(
        model="m", input=[user("Hi")], tools=[WEATHER], params={"parallel_tool_calls": False}
    )
    harness = Harness(body(tokens_of(completion)))
    result = await harness.call(call)
    assert harness.items() == [function_call("get_weather", '{"city":"Oslo"}')]
    assert result.stop == "stop"


async def test_call_llm_logprobs_are_asked_for_and_kept_on_the_message_text() -> None:
    pieces = tokens_of(FINAL + "Hi there")
    chunks = [chunk(p) for p in pieces]
    for c in chunks:
        text = c["choices"][0]["text"]
        c["choices"][0]["logprobs"] = {
            "tokens": [text],
            "token_logprobs": [-0.5],
            "top_logprobs": [{text: -0.5, "x": -3.0}],
        }
    frames = [f"data: {json.dumps(c)}\n\n" for c in [*chunks, chunk("", "stop")]]
    harness = Harness("".join([*frames, "data: [DONE]\n\n"]).encode())
    call = ModelCall(
        model="m",
        input=[user("Hi")],
        params={"top_logprobs": 1, "include": ["message.output_text.logprobs"]},
    )
    await harness.call(call)
    assert json.loads(harness.requests[0].content)["logprobs"] == 1
    entries = harness.state.output[0]["content"][0]["logprobs"]
    assert [e["token"] for e in entries] == ["Hi", " there"]
    assert entries[0] == {
        "token": "Hi",
        "logprob": -0.5,
        "bytes": [72, 105],
        "top_logprobs": [
            {"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
            {"token": "x", "logprob": -3.0, "bytes": [120]},
        ],
    }


async def test_call_llm_a_commentary_answer_is_checked_against_the_format_too() -> None:
    harness = Harness(body(tokens_of("<|channel|>commentary<|message|>not json")))
    with pytest.raises(ModelOutputError):
        await harness.call(structured())
