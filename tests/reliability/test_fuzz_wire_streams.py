"""Property tests of the Responses-wire and harmony stream parsers through the whole loop (the
chat parser has its own: test_fuzz_streams.py): any legal upstream stream, split at any byte,
gives an event stream the contract validator accepts whose items hold exactly what the upstream
said, or a clean HTTP error; streamed and buffered answers render the same output.
Deterministic: derandomized, a fixed number of examples."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from tests.reliability.conftest import Stack

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.testing.harmony import HarmonyTurn
from responses_gateway.testing.script import ToolCall, Turn
from responses_gateway.testing.stream_check import check_stream, parse_sse

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
WORDS = st.text(alphabet="abc xyz,.!é😀", min_size=1, max_size=12)
"""Harmony text: no special token can appear in it, as none appears in a model's text."""
TOOLS = [{"type": "function", "name": f"f{i}", "parameters": {"type": "object"}} for i in range(2)]
SETTINGS: dict[str, Any] = {
    "derandomize": True,
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}


# --------------------------------------------------------------------------- Responses wire


def _pieces(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=3)))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


@st.composite
def responses_streams(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A legal Responses event stream and the output items it describes: messages, reasoning
    and function calls (each streamed in fragments, or only announced by its ``done`` event),
    optional lifecycle and unknown events, then ``response.completed``."""
    events: list[dict[str, Any]] = []
    if draw(st.booleans()):
        events.append({"type": "response.created", "response": {"id": "resp_up", "output": []}})
    kinds = draw(st.lists(st.sampled_from(["message", "reasoning", "function_call"]), max_size=3))
    final: list[dict[str, Any]] = []
    for index, kind in enumerate(kinds):
        text = draw(TEXT)
        streamed = draw(st.booleans())
        item_id = f"{kind[:2]}_up{index}"
        if kind == "message":
            part = {"type": "output_text", "text": text, "annotations": []}
            done = {"id": item_id, "type": "message", "role": "assistant",
                    "status": "completed", "content": [part]}  # fmt: skip
            delta_type = "response.output_text.delta"
        elif kind == "reasoning":
            done = {"id": item_id, "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": text}]}  # fmt: skip
            delta_type = "response.reasoning_summary_text.delta"
        else:
            text = json.dumps({"q": text})
            done = {"id": item_id, "type": "function_call", "status": "completed",
                    "call_id": f"call_{index}", "name": f"f{index % 2}",
                    "arguments": text}  # fmt: skip
            delta_type = "response.function_call_arguments.delta"
        if streamed:
            opened = {**done, "status": "in_progress"}
            for key, empty in (("content", []), ("summary", []), ("arguments", "")):
                if key in opened:
                    opened[key] = empty
            events.append({"type": "response.output_item.added", "output_index": index,
                           "item": opened})  # fmt: skip
            for piece in _pieces(draw, text):
                events.append({"type": delta_type, "output_index": index, "item_id": item_id,
                               "content_index": 0, "summary_index": 0, "delta": piece})  # fmt: skip
        if draw(st.booleans()):
            events.append({"type": "response.some_future_event", "output_index": index})
        events.append({"type": "response.output_item.done", "output_index": index, "item": done})
        final.append(done)
    usage = {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
    events.append({"type": "response.completed",
                   "response": {"id": "resp_up", "status": "completed", "output": final,
                                "usage": usage}})  # fmt: skip
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events, final


def _sse(events: list[dict[str, Any]], keepalives: bool) -> bytes:
    frames = []
    for event in events:
        if keepalives:
            frames.append(": keep-alive\n\n")
        frames.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return "".join(frames).encode()


def _completions(text_pieces: list[str], finish: str) -> bytes:
    chunks: list[Any] = [
        {"id": "cmpl-f", "object": "text_completion",
         "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": None}]}
        for piece in text_pieces
    ]  # fmt: skip
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    last = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish}
    chunks.append({"id": "cmpl-f", "object": "text_completion", "choices": [last], "usage": usage})
    frames = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return "".join([*frames, "data: [DONE]\n\n"]).encode()


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


async def _run(stack: Stack, api: str, body: bytes, cuts: list[int], stream: bool) -> Any:
    bounds = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Pieces(pieces)
        )

    provider = {"name": "f", "base_url": "http://up/v1", "api": api, "default": True}
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as up:
        app = create_app(parse_config({"providers": [provider]}), stack.store, client=up)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            request = {"model": "fuzz", "input": "go", "tools": TOOLS, "store": False,
                       "stream": stream}  # fmt: skip
            return await client.post("/v1/responses", json=request, timeout=30)


def _final_output(answer: httpx.Response, stream: bool) -> list[dict[str, Any]] | None:
    """The rendered output, after checking the answer; None for a clean refusal."""
    if answer.status_code != 200:  # a clean failure: an envelope, never a 5xx of ours
        assert answer.status_code in (400, 502), answer.text
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
        return None
    if not stream:
        return list(answer.json()["output"])
    final = check_stream(parse_sse(answer.content))
    assert final["status"] in ("completed", "incomplete", "failed")
    return list(final["output"])


def _without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items without the ids the gateway mints (item ids; harmony's call ids)."""
    return [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in items]


def _said(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    said = []
    for item in items:
        if item["type"] == "message":
            said.append(("message", "".join(p["text"] for p in item["content"])))
        elif item["type"] == "reasoning":
            parts = [*item["summary"], *(item.get("content") or [])]
            said.append(("reasoning", "".join(part["text"] for part in parts)))
        elif item["type"] == "function_call":
            said.append((item["name"], item["arguments"]))
    return said


@settings(max_examples=60, phases=[Phase.explicit, Phase.generate, Phase.shrink], **SETTINGS)
@given(
    stream=responses_streams(),
    keepalives=st.booleans(),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
)
def test_any_legal_responses_stream_gives_a_valid_stream_of_what_was_said(
    stack: Stack,
    stream: tuple[list[dict[str, Any]], list[dict[str, Any]]],
    keepalives: bool,
    cuts: list[int],
) -> None:
    events, said = stream
    answer = asyncio.run(_run(stack, "responses", _sse(events, keepalives), cuts, stream=True))
    output = _final_output(answer, stream=True)
    assert output is not None, answer.text  # every stream here is legal: it must be served
    assert _said(output) == _said(said)


@settings(max_examples=25, **SETTINGS)
@given(stream=responses_streams(), cuts=st.lists(st.integers(0, 10_000), max_size=4))
def test_responses_stream_and_buffered_answers_render_the_same_output(
    stack: Stack, stream: tuple[list[dict[str, Any]], list[dict[str, Any]]], cuts: list[int]
) -> None:
    body = _sse(stream[0], keepalives=False)
    streamed = _final_output(asyncio.run(_run(stack, "responses", body, cuts, True)), True)
    buffered = _final_output(asyncio.run(_run(stack, "responses", body, [], False)), False)
    assert streamed is not None and buffered is not None
    assert _without_ids(streamed) == _without_ids(buffered)


# --------------------------------------------------------------------------- harmony


@st.composite
def harmony_turns(draw: st.DrawFn) -> Turn:
    """A gpt-oss turn: optional reasoning (``analysis``), then text (``final``, or a
    ``commentary`` preamble before calls) and up to two calls of the offered functions."""
    calls = [
        ToolCall(f"f{draw(st.integers(0, 1))}", json.dumps({"q": draw(WORDS)}))
        for _ in range(draw(st.integers(0, 2)))
    ]
    text = draw(st.one_of(st.none(), WORDS)) if calls else draw(WORDS)
    return Turn(text=text, reasoning=draw(st.one_of(st.none(), WORDS)), tool_calls=calls)


def _harmony_body(draw: st.DrawFn, turn: Turn) -> bytes:
    rendered = HarmonyTurn(turn, prompt_tokens=3)
    text = rendered.text
    by_token = rendered.pieces()
    pieces = by_token if draw(st.booleans()) else _pieces(draw, text)
    return _completions(pieces, "stop")


@settings(max_examples=40, phases=[Phase.explicit, Phase.generate, Phase.shrink], **SETTINGS)
@given(data=st.data(), turn=harmony_turns(), cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_any_legal_harmony_completion_gives_a_valid_stream_of_what_was_said(
    stack: Stack, data: st.DataObject, turn: Turn, cuts: list[int]
) -> None:
    body = _harmony_body(data.draw, turn)
    answer = asyncio.run(_run(stack, "harmony", body, cuts, stream=True))
    output = _final_output(answer, stream=True)
    assert output is not None, answer.text
    said = _said(output)
    calls = [(call.name, call.arguments) for call in turn.tool_calls]
    assert [entry for entry in said if entry[0] in ("f0", "f1")] == calls
    if turn.reasoning is not None:
        assert said[0] == ("reasoning", turn.reasoning)
    if turn.text is not None and not calls:
        assert said[-1] == ("message", turn.text)


@settings(max_examples=20, **SETTINGS)
@given(data=st.data(), turn=harmony_turns(), cuts=st.lists(st.integers(0, 10_000), max_size=4))
def test_harmony_stream_and_buffered_answers_render_the_same_output(
    stack: Stack, data: st.DataObject, turn: Turn, cuts: list[int]
) -> None:
    body = _harmony_body(data.draw, turn)
    streamed = _final_output(asyncio.run(_run(stack, "harmony", body, cuts, True)), True)
    buffered = _final_output(asyncio.run(_run(stack, "harmony", body, [], False)), False)
    assert streamed is not None and buffered is not None
    assert _without_ids(streamed) == _without_ids(buffered)
