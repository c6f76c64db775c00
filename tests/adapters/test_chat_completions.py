"""ChatCompletionsAdapter: exact upstream payloads, and chat chunks turned into output items."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.chat_completions import (
    ChatCompletionsAdapter,
    ChatOptions,
    to_chat_request,
)
from responses_gateway.adapters.wire import Streaming
from responses_gateway.errors import (
    InvalidRequestError,
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

CALL = ModelCall(model="qwen", input=[{"type": "message", "role": "user", "content": "Hi"}])
SSE = {"content-type": "text/event-stream"}

# --- helpers ------------------------------------------------------------------------------


def sse_body(chunks: Sequence[dict[str, Any] | str], *, done: bool = True) -> bytes:
    """An SSE body with one ``data:`` event per chunk (dicts as JSON), then maybe ``[DONE]``."""
    events = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    if done:
        events.append("data: [DONE]\n\n")
    return "".join(events).encode()


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice."""
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice], **extra}


def tc(
    index: int | None = 0,
    call_id: str | None = None,
    name: str | None = None,
    args: str | None = None,
) -> dict[str, Any]:
    """One ``delta.tool_calls`` entry; ``None`` fields are omitted."""
    entry: dict[str, Any] = {"type": "function"}
    if index is not None:
        entry["index"] = index
    if call_id is not None:
        entry["id"] = call_id
    function = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    entry["function"] = function
    return entry


def calls(*entries: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(entries)})


USAGE = {
    "prompt_tokens": 10,
    "completion_tokens": 5,
    "total_tokens": 15,
    "prompt_tokens_details": {"cached_tokens": 4},
    "completion_tokens_details": {"reasoning_tokens": 2},
}


class Upstream:
    """A scripted chat server behind ``httpx.MockTransport``; records every request."""

    def __init__(
        self,
        body: bytes | httpx.AsyncByteStream = b"",
        status: int = 200,
        headers: dict[str, str] | None = None,
        raises: Exception | None = None,
        then: Sequence[tuple[int, dict[str, str], bytes]] = (),
    ) -> None:
        self.body = body
        self.status = status
        self.headers = SSE if headers is None else headers
        self.raises = raises
        self.then = list(then)
        """``(status, headers, body)`` answers to the second call on (the last one repeats)."""
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.raises is not None:
            raise self.raises
        if self.then and len(self.requests) > 1:  # the answers to the calls after the first
            status, headers, content = self.then[min(len(self.requests) - 2, len(self.then) - 1)]
            return httpx.Response(status, headers=headers, content=content)
        if isinstance(self.body, bytes):
            return httpx.Response(self.status, headers=self.headers, content=self.body)
        return httpx.Response(self.status, headers=self.headers, stream=self.body)

    @property
    def payload(self) -> Any:
        return json.loads(self.requests[0].content)


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)


class Harness:
    """A real LoopState + OutputWriter with a recording sink."""

    def __init__(self) -> None:
        self.state = LoopState(
            response_id="resp_1", created_at=1, model="m", request={}, upstream_input=[]
        )
        self.sink = Recorder()
        self.out = OutputWriter(self.state, self.sink)

    async def call(
        self,
        upstream: Upstream,
        call: ModelCall = CALL,
        api_key: str | None = "sk-test",
        read_timeout: float | None = None,
        streaming: Streaming = "auto",
    ) -> TurnResult:
        transport = httpx.MockTransport(upstream.handler)
        async with httpx.AsyncClient(transport=transport) as client:
            adapter = ChatCompletionsAdapter(
                client,
                "http://upstream/v1/",
                api_key=api_key,
                timeout=read_timeout,
                streaming=streaming,
            )
            try:
                return await adapter.call_llm(call, self.out)
            finally:
                self.out.flush()  # state.output exact for items the adapter left open

    def trace(self) -> list[tuple[Any, ...]]:
        """The emitted events as compact tuples (no ids)."""
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
                text = e.part["refusal"] if e.part["type"] == "refusal" else e.part["text"]
                out.append(("part-", e.output_index, text))
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
        """``state.output`` with gateway-made ids replaced by ``<prefix>_*``."""
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


def function_call(
    name: str, arguments: str, call_id: str = "call_*", status: str = "completed"
) -> dict[str, Any]:
    return {
        "id": "fc_*",
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def call_trace(index: int, arguments: str) -> list[tuple[Any, ...]]:
    return [
        ("item+", index, "function_call"),
        ("args", index, arguments),
        ("args-", index, arguments),
        ("item-", index, "completed"),
    ]


# --- call_llm: text and reasoning -----------------------------------------------------------


async def test_call_llm_text_only_streams_one_completed_message() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk({"content": "Hel"}),
                chunk({"content": "lo"}),
                chunk(finish="stop"),
            ]
        )
    )
    result = await h.call(upstream)
    assert result == TurnResult(stop="stop", usage=None)
    assert h.items() == [message("Hello")]
    assert h.trace() == [
        ("responding",),
        ("item+", 0, "message"),
        ("part+", 0, "output_text"),
        ("delta", 0, "output_text", "Hel"),
        ("delta", 0, "output_text", "lo"),
        ("part-", 0, "Hello"),
        ("item-", 0, "completed"),
    ]


async def test_call_llm_request_posts_stream_to_chat_completions_with_bearer_key() -> None:
    h = Harness()
    upstream = Upstream(sse_body([chunk({"content": "x"}, "stop")]))
    await h.call(upstream)
    request = upstream.requests[0]
    assert request.method == "POST"
    assert str(request.url) == "http://upstream/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert upstream.payload == {
        "model": "qwen",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def test_call_llm_no_api_key_sends_no_authorization() -> None:
    upstream = Upstream(sse_body([chunk({"content": "x"}, "stop")]))
    await Harness().call(upstream, api_key=None)
    assert "authorization" not in upstream.requests[0].headers


async def test_call_llm_extra_headers_are_sent() -> None:
    upstream = Upstream(sse_body([chunk({"content": "x"}, "stop")]))
    transport = httpx.MockTransport(upstream.handler)
    async with httpx.AsyncClient(transport=transport) as client:
        adapter = ChatCompletionsAdapter(client, "http://u/v1", headers={"X-Tenant": "t1"})
        await adapter.call_llm(CALL, Harness().out)
    assert str(upstream.requests[0].url) == "http://u/v1/chat/completions"
    assert upstream.requests[0].headers["x-tenant"] == "t1"


async def test_call_llm_reasoning_content_then_text_emits_reasoning_then_message() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"reasoning_content": "Think"}),
                chunk({"reasoning_content": "ing"}),
                chunk({"content": "Answer"}),
                chunk(finish="stop"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [reasoning("Thinking"), message("Answer")]
    assert h.trace() == [
        ("responding",),
        ("item+", 0, "reasoning"),
        ("part+", 0, "reasoning_text"),
        ("delta", 0, "reasoning_text", "Think"),
        ("delta", 0, "reasoning_text", "ing"),
        ("part-", 0, "Thinking"),
        ("item-", 0, None),
        ("item+", 1, "message"),
        ("part+", 1, "output_text"),
        ("delta", 1, "output_text", "Answer"),
        ("part-", 1, "Answer"),
        ("item-", 1, "completed"),
    ]


async def test_call_llm_reasoning_field_variant_emits_reasoning() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"reasoning": "Hmm", "content": None}),
                chunk({"content": "Yes"}),
                chunk(finish="stop"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [reasoning("Hmm"), message("Yes")]


async def test_call_llm_both_reasoning_fields_in_one_delta_counts_text_once() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body([chunk({"reasoning_content": "Hmm", "reasoning": "Hmm"}), chunk(finish="stop")])
    )
    await h.call(upstream)
    assert h.items() == [reasoning("Hmm")]


async def test_call_llm_reasoning_after_text_closes_message_first() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"content": "A"}),
                chunk({"reasoning_content": "R"}),
                chunk({"content": "B"}),
                chunk(finish="stop"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [message("A"), reasoning("R"), message("B")]
    assert [t for t in h.trace() if t[0] in ("item+", "item-")] == [
        ("item+", 0, "message"),
        ("item-", 0, "completed"),
        ("item+", 1, "reasoning"),
        ("item-", 1, None),
        ("item+", 2, "message"),
        ("item-", 2, "completed"),
    ]


# --- call_llm: tool calls -------------------------------------------------------------------


async def test_call_llm_fragmented_call_with_id_and_name_only_first_emits_one_call() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(tc(0, "call_up1", "get_weather", "")),
                calls(tc(0, args='{"ci')),
                calls(tc(0, args='ty": ')),
                calls(tc(0, args='"Paris"')),
                calls(tc(0, args="}")),
                chunk(finish="tool_calls"),
            ]
        )
    )
    result = await h.call(upstream)
    args = '{"city": "Paris"}'
    assert result.stop == "stop"
    assert h.items() == [function_call("get_weather", args, call_id="call_up1")]
    assert h.trace() == [("responding",), *call_trace(0, args)]


async def test_call_llm_repeated_id_and_name_keep_the_first() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(tc(0, "call_a", "f", '{"x":')),
                calls(tc(0, "call_other", "g", "1}")),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [function_call("f", '{"x":1}', call_id="call_a")]


async def test_call_llm_all_arguments_in_one_chunk_emits_them_whole() -> None:
    h = Harness()
    upstream = Upstream(sse_body([calls(tc(0, "call_a", "f", '{"a": 1}')), chunk(finish="stop")]))
    await h.call(upstream)
    assert h.items() == [function_call("f", '{"a": 1}', call_id="call_a")]
    assert h.trace() == [("responding",), *call_trace(0, '{"a": 1}')]


async def test_call_llm_arguments_only_in_final_chunk_are_kept() -> None:
    h = Harness()
    final = chunk({"tool_calls": [tc(0, args='{"q": "x"}')]}, "tool_calls")
    upstream = Upstream(sse_body([calls(tc(0, "call_a", "search")), final]))
    await h.call(upstream)
    assert h.items() == [function_call("search", '{"q": "x"}', call_id="call_a")]


async def test_call_llm_missing_index_uses_index_zero() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(tc(None, "call_a", "f", '{"a"')),
                calls(tc(None, args=": 1}")),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [function_call("f", '{"a": 1}', call_id="call_a")]


async def test_call_llm_missing_index_with_new_id_starts_a_new_call() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(tc(None, "call_a", "f", "{}"), tc(None, "call_b", "g", '{"b": 2}')),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [
        function_call("f", "{}", call_id="call_a"),
        function_call("g", '{"b": 2}', call_id="call_b"),
    ]


def bare_call(name: str, args: str) -> dict[str, Any]:
    """A ``delta.tool_calls`` entry with neither ``index`` nor ``id`` (nor ``type``)."""
    return {"function": {"name": name, "arguments": args}}


async def test_call_llm_parallel_calls_without_index_or_id_are_kept_apart() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(bare_call("f", '{"a":1}')),
                calls(bare_call("g", '{"b":2}')),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [function_call("f", '{"a":1}'), function_call("g", '{"b":2}')]
    assert h.trace() == [("responding",), *call_trace(0, '{"a":1}'), *call_trace(1, '{"b":2}')]


async def test_call_llm_same_name_without_index_after_complete_arguments_is_a_new_call() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body([calls(bare_call("f", '{"a":1}')), calls(bare_call("f", '{"a":2}'))], done=False)
    )
    await h.call(upstream)
    assert h.items() == [function_call("f", '{"a":1}'), function_call("f", '{"a":2}')]


async def test_call_llm_name_repeated_on_every_fragment_continues_the_call() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(bare_call("f", '{"a"')),
                calls(bare_call("f", ": 1}")),
                calls({"function": {"arguments": ""}}),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [function_call("f", '{"a": 1}')]


async def test_call_llm_parallel_calls_interleaved_emit_in_index_order() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(tc(1, "call_b", "time", '{"tz"')),
                calls(tc(0, "call_a", "weather", '{"city"')),
                calls(tc(1, args=': "UTC"}')),
                calls(tc(0, args=': "Oslo"}')),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [
        function_call("weather", '{"city": "Oslo"}', call_id="call_a"),
        function_call("time", '{"tz": "UTC"}', call_id="call_b"),
    ]
    assert h.trace() == [
        ("responding",),
        *call_trace(0, '{"city": "Oslo"}'),
        *call_trace(1, '{"tz": "UTC"}'),
    ]


@pytest.mark.parametrize(
    ("finish", "done"),
    [("tool_calls", True), (None, True), (None, False), ("tool_calls", False)],
    ids=["finish_and_done", "done_only", "plain_eof", "finish_no_done"],
)
async def test_call_llm_every_ending_flushes_each_call_exactly_once(
    finish: str | None, done: bool
) -> None:
    h = Harness()
    chunks = [calls(tc(0, "call_a", "f", '{"a": 1}')), calls(tc(1, "call_b", "g", '{"b": 2}'))]
    if finish:
        chunks.append(chunk(finish=finish))
    result = await h.call(Upstream(sse_body(chunks, done=done)))
    assert result.stop == "stop"
    assert h.items() == [
        function_call("f", '{"a": 1}', call_id="call_a"),
        function_call("g", '{"b": 2}', call_id="call_b"),
    ]
    assert h.trace() == [
        ("responding",),
        *call_trace(0, '{"a": 1}'),
        *call_trace(1, '{"b": 2}'),
    ]


async def test_call_llm_text_then_calls_closes_message_before_calls() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"content": "Let me check."}),
                calls(tc(0, "call_a", "f", "{}")),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [message("Let me check."), function_call("f", "{}", call_id="call_a")]
    assert h.trace()[-6:] == [
        ("part-", 0, "Let me check."),
        ("item-", 0, "completed"),
        *call_trace(1, "{}"),
    ]


async def test_call_llm_empty_arguments_become_empty_object() -> None:
    h = Harness()
    upstream = Upstream(sse_body([calls(tc(0, "call_a", "now", "")), chunk(finish="tool_calls")]))
    await h.call(upstream)
    assert h.items() == [function_call("now", "{}", call_id="call_a")]


async def test_call_llm_call_without_upstream_id_gets_a_gateway_call_id() -> None:
    h = Harness()
    upstream = Upstream(sse_body([calls(tc(0, None, "f", "{}")), chunk(finish="tool_calls")]))
    await h.call(upstream)
    assert h.items() == [function_call("f", "{}", call_id="call_*")]


async def test_call_llm_call_without_name_raises_protocol_error() -> None:
    h = Harness()
    upstream = Upstream(sse_body([calls(tc(0, "call_a", None, "{}")), chunk(finish="stop")]))
    with pytest.raises(UpstreamProtocolError):
        await h.call(upstream)
    assert h.state.output == []


async def test_call_llm_tool_deltas_after_finish_reason_are_ignored() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                calls(tc(0, "call_a", "f", "{}")),
                chunk(finish="tool_calls"),
                calls(tc(1, "call_b", "g", "{}")),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [function_call("f", "{}", call_id="call_a")]


# --- call_llm: usage and stop reasons -------------------------------------------------------


async def test_call_llm_usage_after_finish_reason_is_mapped() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"content": "Hi"}),
                chunk(finish="stop"),
                {"id": "chatcmpl-1", "choices": [], "usage": USAGE},
            ]
        )
    )
    result = await h.call(upstream)
    assert result == TurnResult(
        stop="stop",
        usage={
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": 15,
        },
    )
    assert h.items() == [message("Hi")]


async def test_call_llm_usage_without_details_defaults_to_zero() -> None:
    h = Harness()
    usage = {"prompt_tokens": 3, "completion_tokens": 4}
    upstream = Upstream(sse_body([chunk({"content": "Hi"}, "stop", usage=usage)], done=False))
    result = await h.call(upstream)
    assert result.usage == {
        "input_tokens": 3,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 4,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 7,
    }


async def test_call_llm_finish_reason_length_leaves_message_for_driver_to_close() -> None:
    h = Harness()
    upstream = Upstream(sse_body([chunk({"content": "Once upon"}), chunk(finish="length")]))
    result = await h.call(upstream)
    assert result.stop == "length"
    assert h.items() == [message("Once upon", status="in_progress")]
    assert h.trace()[-1] == ("delta", 0, "output_text", "Once upon")
    h.out.close_open("incomplete")
    assert h.items() == [message("Once upon", status="incomplete")]
    assert h.trace()[-2:] == [("part-", 0, "Once upon"), ("item-", 0, "incomplete")]


async def test_call_llm_length_during_tool_call_leaves_calls_open() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"content": "Calling"}),
                calls(tc(0, "call_a", "f", '{"a": "lo')),
                chunk(finish="length"),
            ]
        )
    )
    result = await h.call(upstream)
    assert result.stop == "length"
    assert h.items() == [
        message("Calling"),
        function_call("f", '{"a": "lo', call_id="call_a", status="in_progress"),
    ]
    h.out.close_open("incomplete")
    assert h.items()[1]["status"] == "incomplete"
    assert h.trace()[-2:] == [("args-", 1, '{"a": "lo'), ("item-", 1, "incomplete")]


async def test_call_llm_content_filter_reports_content_filter() -> None:
    h = Harness()
    result = await h.call(Upstream(sse_body([chunk({"content": "x"}, "content_filter")])))
    assert result.stop == "content_filter"
    assert h.items() == [message("x", status="in_progress")]


# --- call_llm: failures ---------------------------------------------------------------------


async def test_call_llm_http_429_raises_status_error_and_emits_nothing() -> None:
    h = Harness()
    body = {
        "error": {
            "message": "Slow down",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    raw = json.dumps(body).encode()
    upstream = Upstream(raw, status=429, headers={"content-type": "application/json"})
    with pytest.raises(UpstreamStatusError) as info:
        await h.call(upstream)
    error = info.value
    assert (error.upstream_status, error.status_code, error.message) == (429, 429, "Slow down")
    assert (error.code, error.param, error.body) == ("rate_limit_exceeded", None, raw.decode())
    assert error.error_type == "rate_limit_error"
    assert h.sink.events == []
    assert h.state.output == []


async def test_call_llm_http_500_raises_status_error_as_502() -> None:
    h = Harness()
    upstream = Upstream(b'{"error": "engine crashed"}', status=500)
    with pytest.raises(UpstreamStatusError) as info:
        await h.call(upstream)
    assert (info.value.upstream_status, info.value.status_code) == (500, 502)
    assert info.value.message == "engine crashed"
    assert h.sink.events == []


async def test_call_llm_http_400_with_param_keeps_param() -> None:
    body = {
        "error": {
            "message": "bad temp",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": None,
        }
    }
    upstream = Upstream(json.dumps(body).encode(), status=400)
    with pytest.raises(UpstreamStatusError) as info:
        await Harness().call(upstream)
    assert (info.value.status_code, info.value.param, info.value.code) == (400, "temperature", None)


async def test_call_llm_plain_text_error_body_becomes_the_message() -> None:
    upstream = Upstream(b"Bad Gateway\n", status=503, headers={"content-type": "text/plain"})
    with pytest.raises(UpstreamStatusError) as info:
        await Harness().call(upstream)
    assert (info.value.message, info.value.status_code) == ("Bad Gateway", 502)


async def test_call_llm_empty_error_body_names_the_status() -> None:
    with pytest.raises(UpstreamStatusError) as info:
        await Harness().call(Upstream(b"", status=404))
    assert info.value.message == "The upstream model returned HTTP 404."


async def test_call_llm_error_chunk_with_code_raises_status_error() -> None:
    h = Harness()
    error = {
        "error": {
            "object": "error",
            "message": "context too long",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    upstream = Upstream(sse_body([chunk({"content": "par"}), error]))
    with pytest.raises(UpstreamStatusError) as info:
        await h.call(upstream)
    assert (info.value.upstream_status, info.value.message) == (400, "context too long")
    assert h.items() == [message("par", status="in_progress")]


async def test_call_llm_error_chunk_without_status_raises_protocol_error() -> None:
    h = Harness()
    upstream = Upstream(sse_body([chunk({"content": "par"}), {"error": {"message": "overloaded"}}]))
    with pytest.raises(UpstreamProtocolError, match="^overloaded$"):
        await h.call(upstream)
    h.out.close_open("incomplete")
    assert h.items() == [message("par", status="incomplete")]


async def test_call_llm_invalid_json_line_raises_protocol_error() -> None:
    upstream = Upstream(sse_body([chunk({"content": "a"}), "{not json"]))
    with pytest.raises(UpstreamProtocolError, match="invalid JSON"):
        await Harness().call(upstream)


async def test_call_llm_json_body_instead_of_stream_raises_protocol_error_when_streaming_on() -> (
    None
):
    h = Harness()
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    upstream = Upstream(body, headers={"content-type": "application/json"})
    with pytest.raises(UpstreamProtocolError, match="instead of an event stream"):
        await h.call(upstream, streaming="on")
    assert h.sink.events == []


class DroppingStream(httpx.AsyncByteStream):
    """Sends some bytes, then the connection breaks."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise httpx.ReadError("connection reset")


async def test_call_llm_connection_dropped_mid_stream_raises_transport_error() -> None:
    h = Harness()
    stream = DroppingStream(
        sse_body([chunk({"content": "Hel"}), chunk({"content": "lo"})], done=False)
    )
    with pytest.raises(UpstreamTransportError):
        await h.call(Upstream(stream))
    assert h.trace() == [
        ("responding",),
        ("item+", 0, "message"),
        ("part+", 0, "output_text"),
        ("delta", 0, "output_text", "Hel"),
        ("delta", 0, "output_text", "lo"),
    ]
    h.out.close_open("incomplete")
    assert h.items() == [message("Hello", status="incomplete")]


async def test_call_llm_connect_error_raises_transport_error() -> None:
    h = Harness()
    with pytest.raises(UpstreamTransportError, match="ConnectError"):
        await h.call(Upstream(raises=httpx.ConnectError("refused")))
    assert h.sink.events == []


async def test_call_llm_timeout_raises_transport_error() -> None:
    with pytest.raises(UpstreamTransportError, match="timed out: ReadTimeout"):
        await Harness().call(Upstream(raises=httpx.ReadTimeout("slow")))


class HangingStream(httpx.AsyncByteStream):
    """Sends one event, then waits forever; records that it was closed."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield sse_body([chunk({"content": "Hi"})], done=False)
        self.waiting.set()
        await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


async def test_call_llm_cancelled_closes_the_upstream_stream() -> None:
    h = Harness()
    stream = HangingStream()
    task = asyncio.create_task(h.call(Upstream(stream)))
    await stream.waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stream.closed
    assert h.items() == [message("Hi", status="in_progress")]


# --- call_llm: refusals ----------------------------------------------------------------------


def refusal_message(text: str, refusal: str) -> dict[str, Any]:
    """A message with a refusal part, after a text part only when there is text."""
    item = message(text)
    if not text:
        item["content"] = []
    item["content"].append({"type": "refusal", "refusal": refusal})
    return item


async def test_call_llm_refusal_delta_streams_into_a_refusal_part() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"role": "assistant", "content": None, "refusal": "I can't"}),
                chunk({"refusal": " help."}),
                chunk(finish="stop"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [refusal_message("", "I can't help.")]
    assert h.trace() == [
        ("responding",),
        ("item+", 0, "message"),
        ("part+", 0, "refusal"),
        ("delta", 0, "refusal", "I can't"),
        ("delta", 0, "refusal", " help."),
        ("part-", 0, "I can't help."),
        ("item-", 0, "completed"),
    ]


async def test_call_llm_text_refusal_text_keeps_all_of_it_in_two_messages() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"content": "Sure, "}),
                chunk({"refusal": "no."}),
                chunk({"content": "Anything else?"}),
                chunk(finish="stop"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [refusal_message("Sure, ", "no."), message("Anything else?")]


# --- call_llm: answers that are no event stream --------------------------------------------


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({"content-type": "text/html; charset=utf-8"}, "instead of an event stream: <html>"),
        ({"content-type": "application/json"}, "answered with invalid JSON: <html>"),
    ],
    ids=["html", "json"],
)
async def test_call_llm_non_stream_content_type_raises_before_emitting(
    headers: dict[str, str], error: str
) -> None:
    h = Harness()
    upstream = Upstream(b"<html><body>Please log in</body></html>", headers=headers)
    with pytest.raises(UpstreamProtocolError, match=error):
        await h.call(upstream)
    assert h.sink.events == []
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    "headers", [SSE, {"content-type": "text/plain"}, {}], ids=["sse", "plain", "none"]
)
async def test_call_llm_body_without_data_events_raises_protocol_error_when_streaming_on(
    headers: dict[str, str],
) -> None:
    h = Harness()
    upstream = Upstream(b"<html>\n<p>Maintenance</p>\n</html>\n", headers=headers)
    with pytest.raises(UpstreamProtocolError, match="no event stream"):
        await h.call(upstream, streaming="on")
    assert h.trace() == [("responding",)]
    assert h.state.output == []
    assert len(upstream.requests) == 1


# --- call_llm: upstreams that cannot stream a request ----------------------------------------

JSON = {"content-type": "application/json"}
TOOL_TURN = ModelCall(
    model="llama",
    input=[
        {"type": "message", "role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
    ],
    tools=[{"type": "function", "name": "weather", "parameters": {"type": "object"}}],
)
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_2", "type": "function",
                     "function": {"name": "weather", "arguments": '{"city":"Lyon"}'}},
                    {"id": "call_3", "type": "function",
                     "function": {"name": "weather", "arguments": '{"city":"Nice"}'}},
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
    "usage": USAGE,
}  # fmt: skip


async def test_call_llm_stream_without_events_is_asked_again_unstreamed() -> None:
    # GIVEN a server that answers a streamed call with tools with an empty event stream (as
    # llama-cpp-python's does with tool_choice auto), and the same call unstreamed with JSON
    upstream = Upstream(b"", then=[(200, JSON, json.dumps(COMPLETION).encode())])
    h = Harness()

    result = await h.call(upstream, TOOL_TURN)

    streamed, plain = (json.loads(r.content) for r in upstream.requests)
    assert (streamed["stream"], streamed["stream_options"]) == (True, {"include_usage": True})
    assert plain == {key: value for key, value in streamed.items() if key != "stream_options"} | {
        "stream": False
    }
    assert upstream.requests[1].headers["accept"] == "application/json"
    assert h.items() == [
        function_call("weather", '{"city":"Lyon"}', "call_2"),
        function_call("weather", '{"city":"Nice"}', "call_3"),
    ]
    assert result.stop == "stop"
    assert result.usage is not None and result.usage["input_tokens"] == 10


async def test_call_llm_streaming_off_calls_unstreamed_only() -> None:
    answer = {"choices": [{"message": {"role": "assistant", "content": "Hello"},
                           "finish_reason": "stop"}]}  # fmt: skip
    upstream = Upstream(json.dumps(answer).encode(), headers=JSON)
    h = Harness()

    assert await h.call(upstream, streaming="off") == TurnResult(stop="stop", usage=None)

    assert [json.loads(r.content)["stream"] for r in upstream.requests] == [False]
    assert "stream_options" not in upstream.payload
    assert h.items() == [message("Hello")]


async def test_call_llm_json_answer_to_a_streamed_call_is_read() -> None:
    answer = {"choices": [{"message": {"reasoning_content": "Hmm.", "content": "Hi"},
                           "finish_reason": "stop"}], "usage": USAGE}  # fmt: skip
    upstream = Upstream(json.dumps(answer).encode(), headers=JSON)
    h = Harness()

    await h.call(upstream)

    assert len(upstream.requests) == 1
    assert h.items() == [reasoning("Hmm."), message("Hi")]


async def test_call_llm_unstreamed_error_answer_is_the_upstream_error() -> None:
    error = {"error": {"message": "bad tools", "type": "invalid_request_error", "code": None}}
    upstream = Upstream(b"", then=[(400, JSON, json.dumps(error).encode())])
    h = Harness()

    with pytest.raises(UpstreamStatusError) as info:
        await h.call(upstream, TOOL_TURN)

    assert info.value.status_code == 400
    assert "bad tools" in info.value.message
    assert h.state.output == []


@pytest.mark.parametrize(
    "answer",
    [{"choices": []}, {"object": "chat.completion"}, [1, 2]],
    ids=["no-choices", "no-choices-key", "not-an-object"],
)
async def test_call_llm_unstreamed_answer_without_choices_is_a_protocol_error(
    answer: Any,
) -> None:
    upstream = Upstream(b"", then=[(200, JSON, json.dumps(answer).encode())])
    with pytest.raises(UpstreamProtocolError, match="unstreamed answer"):
        await Harness().call(upstream, TOOL_TURN)
    assert len(upstream.requests) == 2


async def test_call_llm_empty_stream_then_empty_stream_is_one_retry_then_a_protocol_error() -> None:
    upstream = Upstream(b"", then=[(200, SSE, b"")])
    with pytest.raises(UpstreamProtocolError):
        await Harness().call(upstream, TOOL_TURN)
    assert len(upstream.requests) == 2


# --- call_llm: streams with no data event (llama-cpp-python's one slot, busy) ----------------

ROLE_ONLY = chunk({"role": "assistant"})
"""What llama-cpp-python's one-slot server streams to a request arriving while another
generates, before ``[DONE]``: no content, no finish_reason, no usage."""
HELLO = {"choices": [{"message": {"role": "assistant", "content": "Hello"},
                      "finish_reason": "stop"}], "usage": USAGE}  # fmt: skip


@pytest.mark.parametrize(
    "body",
    [
        sse_body([ROLE_ONLY]),
        sse_body([ROLE_ONLY, chunk({"content": ""}, usage=None)], done=False),
        sse_body([]),
    ],
    ids=["role-then-done", "role-then-eof", "only-done"],
)
async def test_call_llm_stream_with_no_data_event_is_asked_again_unstreamed(body: bytes) -> None:
    upstream = Upstream(body, then=[(200, JSON, json.dumps(HELLO).encode())])
    h = Harness()

    result = await h.call(upstream)

    assert [json.loads(r.content)["stream"] for r in upstream.requests] == [True, False]
    assert h.items() == [message("Hello")]
    assert result.usage is not None and result.usage["output_tokens"] == 5


async def test_call_llm_role_only_stream_is_a_protocol_error_when_streaming_on() -> None:
    h = Harness()
    upstream = Upstream(sse_body([ROLE_ONLY]))

    with pytest.raises(UpstreamProtocolError, match="no data event .no output, no finish_reason"):
        await h.call(upstream, streaming="on")

    assert h.trace() == [("responding",)]
    assert h.state.output == []
    assert len(upstream.requests) == 1


async def test_call_llm_stream_cut_after_the_role_chunk_is_asked_again_unstreamed() -> None:
    upstream = Upstream(
        DroppingStream(sse_body([ROLE_ONLY], done=False)),
        then=[(200, JSON, json.dumps(HELLO).encode())],
    )
    h = Harness()

    await h.call(upstream)

    assert len(upstream.requests) == 2
    assert h.items() == [message("Hello")]


async def test_call_llm_stream_cut_after_the_role_chunk_is_the_error_when_streaming_on() -> None:
    upstream = Upstream(DroppingStream(sse_body([ROLE_ONLY], done=False)))
    with pytest.raises(UpstreamTransportError):
        await Harness().call(upstream, streaming="on")
    assert len(upstream.requests) == 1


async def test_call_llm_role_chunk_then_finish_reason_is_an_empty_answer() -> None:
    # a finish_reason is a data event: the model answered, with nothing
    h = Harness()
    upstream = Upstream(sse_body([ROLE_ONLY, chunk(finish="stop")]))

    assert await h.call(upstream) == TurnResult(stop="stop", usage=None)

    assert h.trace() == [("responding",)]
    assert len(upstream.requests) == 1


# --- call_llm: error types, timeouts, lone surrogates ---------------------------------------


async def test_call_llm_http_401_keeps_the_upstream_error_type() -> None:
    body = {
        "error": {
            "message": "Incorrect API key provided.",
            "type": "authentication_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    upstream = Upstream(json.dumps(body).encode(), status=401)
    with pytest.raises(UpstreamStatusError) as info:
        await Harness().call(upstream)
    assert info.value.status_code == 401
    assert info.value.to_error() == body["error"]


async def test_call_llm_error_chunk_keeps_the_upstream_error_type() -> None:
    error = {"message": "Too many tokens.", "type": "tokens", "code": 429}
    upstream = Upstream(sse_body([chunk({"content": "a"}), {"error": error}]))
    with pytest.raises(UpstreamStatusError) as info:
        await Harness().call(upstream)
    assert (info.value.status_code, info.value.error_type) == (429, "tokens")


async def test_call_llm_timeout_is_sent_on_the_request() -> None:
    upstream = Upstream(sse_body([chunk({"content": "x"}, "stop")]))
    await Harness().call(upstream, read_timeout=30.0)
    assert upstream.requests[0].extensions["timeout"] == {
        "connect": 10.0,
        "read": 30.0,
        "write": 30.0,
        "pool": 30.0,
    }


async def test_call_llm_without_timeout_keeps_the_client_timeouts() -> None:
    upstream = Upstream(sse_body([chunk({"content": "x"}, "stop")]))
    transport = httpx.MockTransport(upstream.handler)
    async with httpx.AsyncClient(transport=transport, timeout=42.0) as client:
        await ChatCompletionsAdapter(client, "http://u/v1").call_llm(CALL, Harness().out)
    assert upstream.requests[0].extensions["timeout"] == dict.fromkeys(
        ("connect", "read", "write", "pool"), 42.0
    )


class StallingStream(httpx.AsyncByteStream):
    """Sends some bytes, then the read times out."""

    def __init__(self, first: bytes) -> None:
        self.first = first

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        raise httpx.ReadTimeout("no bytes for 30 s")


async def test_call_llm_read_timeout_mid_stream_raises_timed_out_transport_error() -> None:
    h = Harness()
    upstream = Upstream(StallingStream(sse_body([chunk({"content": "Hel"})], done=False)))
    with pytest.raises(UpstreamTransportError, match="^The upstream model timed out mid-stream"):
        await h.call(upstream, read_timeout=30.0)
    h.out.close_open("incomplete")
    assert h.items() == [message("Hel", status="incomplete")]


def encodable(events: Sequence[LoopEvent]) -> None:
    """Every event's payload encodes as UTF-8 JSON (what the SSE sink does)."""
    for event in events:
        json.dumps(dataclasses.asdict(event), ensure_ascii=False).encode()


async def test_call_llm_lone_surrogates_become_replacement_characters() -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                chunk({"reasoning_content": "hm\ud83d"}),
                chunk({"content": "a\ud83d b\udc00 \ud83d\ude00"}),
                calls(tc(0, "call_\ud800", "f\udfff", '{"q": "\ud83d"}')),
                chunk(finish="tool_calls"),
            ]
        )
    )
    await h.call(upstream)
    assert h.items() == [
        reasoning("hm\ufffd"),
        message("a\ufffd b\ufffd \U0001f600"),
        function_call("f\ufffd", '{"q": "\ufffd"}', call_id="call_\ufffd"),
    ]
    encodable(h.sink.events)
    json.dumps(h.state.output, ensure_ascii=False).encode()


async def test_call_llm_lone_surrogates_in_error_messages_are_replaced() -> None:
    body = json.dumps({"error": {"message": "bad \ud800", "type": "invalid_request_error"}})
    with pytest.raises(UpstreamStatusError) as status:
        await Harness().call(Upstream(body.encode(), status=400))
    upstream = Upstream(sse_body([{"error": {"message": "boom \udbff"}}]))
    with pytest.raises(UpstreamProtocolError) as protocol:
        await Harness().call(upstream)
    assert (status.value.message, protocol.value.message) == ("bad \ufffd", "boom \ufffd")


# --- to_chat_request ------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "id": "msg_1",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def fc(call_id: str, name: str = "f", args: str = "{}") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": args,
        "status": "completed",
    }


def fco(call_id: str, output: Any = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def tool_call(call_id: str, name: str = "f", args: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def tool(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = to_chat_request(ModelCall(model="m", input=items))["messages"]
    return result


def test_to_chat_request_minimal_call_sends_only_model_messages_and_stream() -> None:
    assert to_chat_request(ModelCall(model="m", input=[user("Hi")])) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_to_chat_request_instructions_become_first_system_message() -> None:
    call = ModelCall(model="m", input=[user("Hi")], instructions="Be brief.")
    assert to_chat_request(call)["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]


def test_to_chat_request_developer_role_becomes_system_and_text_parts_join() -> None:
    developer = {
        "type": "message",
        "role": "developer",
        "content": [
            {"type": "input_text", "text": "Rule 1."},
            {"type": "input_text", "text": "Rule 2."},
        ],
    }
    system = {"type": "message", "role": "system", "content": "Plain."}
    assert messages([developer, system, {"role": "user", "content": "untyped"}]) == [
        {"role": "system", "content": "Rule 1.\nRule 2."},
        {"role": "system", "content": "Plain."},
        {"role": "user", "content": "untyped"},
    ]


def test_to_chat_request_image_parts_become_a_part_list() -> None:
    item = {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "https://x/cat.png", "detail": "low"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAA", "file_id": None},
        ],
    }
    assert messages([item]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/cat.png", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
            ],
        }
    ]


def test_to_chat_request_image_by_file_id_raises_invalid_request() -> None:
    item = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_image", "file_id": "file_1"}],
    }
    with pytest.raises(InvalidRequestError) as info:
        messages([item])
    assert info.value.param == "input"


def test_to_chat_request_file_part_becomes_chat_file_part() -> None:
    item = {
        "type": "message",
        "role": "user",
        "content": [
            {
                "type": "input_file",
                "filename": "a.pdf",
                "file_data": "data:application/pdf;base64,AA",
            }
        ],
    }
    assert messages([item]) == [
        {
            "role": "user",
            "content": [
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,AA", "filename": "a.pdf"},
                }
            ],
        }
    ]


def test_to_chat_request_assistant_text_and_consecutive_calls_merge_into_one_message() -> None:
    items = [
        user("Weather?"),
        assistant("Checking."),
        fc("c1", "w", '{"c":"A"}'),
        fc("c2", "w", '{"c":"B"}'),
        fco("c1", "sun"),
        fco("c2", "rain"),
        assistant("Sun and rain."),
    ]
    assert messages(items) == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [tool_call("c1", "w", '{"c":"A"}'), tool_call("c2", "w", '{"c":"B"}')],
        },
        tool("c1", "sun"),
        tool("c2", "rain"),
        {"role": "assistant", "content": "Sun and rain."},
    ]


def test_to_chat_request_calls_without_text_get_their_own_assistant_message() -> None:
    items = [user("Go"), fc("c1"), fco("c1"), fc("c2"), fco("c2")]
    assert messages(items) == [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c1")]},
        tool("c1"),
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c2")]},
        tool("c2"),
    ]


def test_to_chat_request_text_after_calls_is_a_separate_message() -> None:
    items = [fc("c1"), assistant("After.")]
    assert messages(items) == [
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c1")]},
        {"role": "assistant", "content": "After."},
    ]


def test_to_chat_request_call_with_empty_arguments_sends_empty_object() -> None:
    assert messages([fc("c1", "now", ""), fco("c1")])[0] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call("c1", "now", "{}")],
    }


def test_to_chat_request_output_before_its_call_is_moved_after_it() -> None:
    items = [user("Go"), fco("c2", "two"), fco("c1", "one"), fc("c1"), fc("c2"), user("Next")]
    assert messages(items) == [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c1"), tool_call("c2")]},
        tool("c1", "one"),
        tool("c2", "two"),
        {"role": "user", "content": "Next"},
    ]


def test_to_chat_request_output_without_any_call_raises_invalid_request() -> None:
    with pytest.raises(InvalidRequestError, match="call_id 'ghost'") as info:
        messages([user("Go"), fco("ghost")])
    assert info.value.param == "input"


def test_to_chat_request_reasoning_items_are_dropped() -> None:
    rs = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "s"}],
        "content": [{"type": "reasoning_text", "text": "r"}],
        "encrypted_content": "enc",
    }
    items = [user("Go"), rs, assistant("Ok."), rs, fc("c1"), fco("c1")]
    assert messages(items) == [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "Ok.", "tool_calls": [tool_call("c1")]},
        tool("c1"),
    ]


def test_to_chat_request_unknown_item_types_are_ignored() -> None:
    items = [user("Go"), {"type": "mcp_list_tools", "server_label": "s", "tools": []}]
    assert messages(items) == [{"role": "user", "content": "Go"}]


def test_to_chat_request_tool_output_text_parts_join_and_images_follow_in_a_user_message() -> None:
    output = [
        {"type": "input_text", "text": "line 1"},
        {"type": "input_image", "image_url": "https://x/i.png"},
        {"type": "input_text", "text": "line 2"},
    ]
    items = [fc("c1"), fco("c1", output), fc("c2"), fco("c2", None)]
    assert messages(items) == [
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c1")]},
        tool("c1", "line 1\nline 2"),
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "https://x/i.png"}}],
        },
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c2")]},
        tool("c2", ""),
    ]


def test_to_chat_request_parallel_image_outputs_wait_for_every_tool_message() -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    items = [
        user("Look"),
        fc("c1"),
        fc("c2"),
        fco("c1", [{"type": "input_image", "image_url": image, "detail": "high"}]),
        fco(
            "c2",
            [
                {
                    "type": "input_file",
                    "file_data": "data:application/pdf;base64,JVBE",
                    "filename": "a.pdf",
                }
            ],
        ),
        {"type": "message", "role": "assistant", "content": "Seen."},
    ]
    assert messages(items) == [
        {"role": "user", "content": "Look"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call("c1"), tool_call("c2")]},
        tool("c1", "(The result is the attached content in the next message.)"),
        tool("c2", "(The result is the attached content in the next message.)"),
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": image, "detail": "high"}},
                {
                    "type": "file",
                    "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
                },
            ],
        },
        {"role": "assistant", "content": "Seen."},
    ]


def test_to_chat_request_item_extra_keys_never_reach_the_upstream() -> None:
    items = [
        {
            "type": "message",
            "id": "msg_1",
            "role": "user",
            "content": [{"type": "input_text", "text": "Hi"}],
            "internal_chat_message_metadata_passthrough": {"turn": 1},
        },
        {
            "type": "message",
            "id": "msg_2",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
            ],
        },
    ]
    assert messages(items) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
    ]


def _reasoning(text: str | None) -> dict[str, Any]:
    content = None if text is None else [{"type": "reasoning_text", "text": text}]
    return {"type": "reasoning", "id": "rs_1", "summary": [], "content": content}


def test_to_chat_request_reasoning_is_dropped_by_default() -> None:
    items = [user("Go"), _reasoning("think"), fc("c1"), fco("c1")]
    assert messages(items)[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call("c1")],
    }


def test_to_chat_request_reasoning_content_is_replayed_when_the_provider_accepts_it() -> None:
    options = ChatOptions(send_reasoning_content=True)
    items = [
        user("Go"),
        _reasoning("step one"),
        fc("c1"),
        fco("c1"),
        _reasoning("step two"),
        _reasoning(None),
        {"type": "message", "role": "assistant", "content": "Done"},
    ]
    sent = to_chat_request(ModelCall(model="m", input=items), options)["messages"]
    assert sent == [
        {"role": "user", "content": "Go"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "step one",
            "tool_calls": [tool_call("c1")],
        },
        tool("c1"),
        {"role": "assistant", "content": "Done", "reasoning_content": "step two"},
    ]


@pytest.mark.parametrize(("accepts", "expected"), [(False, None), (True, "low")])
def test_to_chat_request_verbosity_only_when_the_provider_accepts_it(
    accepts: bool, expected: str | None
) -> None:
    call = ModelCall(model="m", input=[user("Hi")], params={"text": {"verbosity": "low"}})
    payload = to_chat_request(call, ChatOptions(send_verbosity=accepts))
    assert payload.get("verbosity") == expected


def test_to_chat_request_tools_and_tool_choice_are_nested_under_function() -> None:
    tools: list[dict[str, Any]] = [
        {
            "type": "function",
            "name": "w",
            "description": "Weather",
            "strict": True,
            "parameters": {"type": "object", "properties": {}},
        },
        {"type": "function", "name": "bare", "description": None, "parameters": None},
    ]
    call = ModelCall(
        model="m", input=[user("Hi")], tools=tools, tool_choice={"type": "function", "name": "w"}
    )
    payload = to_chat_request(call)
    assert payload["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "w",
                "description": "Weather",
                "strict": True,
                "parameters": {"type": "object", "properties": {}},
            },
        },
        {"type": "function", "function": {"name": "bare"}},
    ]
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "w"}}


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("none", "none"),
        ("auto", "auto"),
        ("required", "required"),
        ({"type": "allowed_tools", "mode": "required", "tools": []}, "required"),
    ],
)
def test_to_chat_request_string_tool_choice_passes_as_is(choice: Any, expected: str) -> None:
    tools = [{"type": "function", "name": "f"}]
    call = ModelCall(model="m", input=[user("Hi")], tools=tools, tool_choice=choice)
    assert to_chat_request(call)["tool_choice"] == expected


def test_to_chat_request_no_tool_choice_or_no_tools_omits_them() -> None:
    with_tools = ModelCall(model="m", input=[user("Hi")], tools=[{"type": "function", "name": "f"}])
    assert "tool_choice" not in to_chat_request(with_tools)
    no_tools = ModelCall(model="m", input=[user("Hi")], tool_choice="required")
    assert "tools" not in to_chat_request(no_tools)
    assert "tool_choice" not in to_chat_request(no_tools)


def test_to_chat_request_params_are_mapped_to_chat_names() -> None:
    params = {
        "max_output_tokens": 256,
        "temperature": 0.2,
        "top_p": 0.9,
        "user": "u1",
        "parallel_tool_calls": False,
        "service_tier": "flex",
        "reasoning": {"effort": "high", "summary": "auto"},
        "text": {
            "format": {
                "type": "json_schema",
                "name": "out",
                "strict": True,
                "schema": {"type": "object"},
            }
        },
        "top_logprobs": 3,
        "prompt_cache_key": "k",
    }
    payload = to_chat_request(ModelCall(model="m", input=[user("Hi")], params=params))
    del payload["messages"]
    assert payload == {
        "model": "m",
        "max_tokens": 256,
        "temperature": 0.2,
        "top_p": 0.9,
        "user": "u1",
        "parallel_tool_calls": False,
        "service_tier": "flex",
        "reasoning_effort": "high",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True},
        },
        "logprobs": True,
        "top_logprobs": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [({"type": "json_object"}, {"type": "json_object"}), ({"type": "text"}, None)],
)
def test_to_chat_request_text_format_maps_to_response_format(
    fmt: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    params = {"text": {"format": fmt}}
    payload = to_chat_request(ModelCall(model="m", input=[user("Hi")], params=params))
    assert payload.get("response_format") == expected


def test_to_chat_request_include_is_never_sent() -> None:
    params = {"include": ["reasoning.encrypted_content"], "temperature": 0.5}
    assert to_chat_request(ModelCall(model="m", input=[user("Hi")], params=params)) == {
        "model": "m",
        "messages": [{"role": "user", "content": "Hi"}],
        "temperature": 0.5,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


LOGPROB = {
    "token": "Hi",
    "logprob": -0.1,
    "bytes": [72, 105],
    "top_logprobs": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105]}],
}


def with_logprobs(payload: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    payload["choices"][0]["logprobs"] = {"content": entries}
    return payload


@pytest.mark.parametrize("asked", [True, False])
async def test_call_llm_chat_logprobs_become_output_text_logprobs_when_included(
    asked: bool,
) -> None:
    h = Harness()
    upstream = Upstream(
        sse_body(
            [
                with_logprobs(chunk({"content": "Hi"}), [LOGPROB]),
                chunk(finish="stop"),
            ]
        )
    )  # fmt: skip
    include = ["message.output_text.logprobs"] if asked else []
    call = dataclasses.replace(CALL, params={"top_logprobs": 1, "include": include})

    await h.call(upstream, call=call)

    assert h.items()[0]["content"][0]["logprobs"] == ([LOGPROB] if asked else [])
