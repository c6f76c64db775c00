"""Property tests of the Chat Completions stream parser through the whole loop: any sequence of
legal chunks (text, reasoning, fragmented tool calls, usage, finish, with or without ``[DONE]``,
split at any byte) gives an event stream the contract validator accepts, or a clean HTTP error.
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
from responses_gateway.testing.stream_check import check_stream, parse_sse

MODEL = "fuzz-chat"
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-f",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@st.composite
def chat_streams(draw: st.DrawFn) -> list[dict[str, Any] | str]:
    """Legal chat chunk sequences: reasoning, then text, then tool calls (each optional, each
    fragmented at random), then a finish chunk, usage and maybe ``[DONE]``."""
    chunks: list[dict[str, Any] | str] = []
    if draw(st.booleans()):
        chunks.append(_chunk({"role": "assistant", "content": ""}))
    for piece in draw(st.lists(TEXT, max_size=4)):
        chunks.append(_chunk({"reasoning_content": piece}))
    for piece in draw(st.lists(TEXT, max_size=5)):
        chunks.append(_chunk({"content": piece}))
    calls = draw(st.integers(min_value=0, max_value=2))
    for index in range(calls):
        arguments = json.dumps({"q": draw(TEXT)})
        cuts = sorted(draw(st.lists(st.integers(0, len(arguments)), max_size=3)))
        pieces = [arguments[a:b] for a, b in zip([0, *cuts], [*cuts, len(arguments)], strict=True)]
        head = {"index": index, "id": f"call_{index}", "type": "function"}
        chunks.append(
            _chunk({"tool_calls": [{**head, "function": {"name": f"f{index}", "arguments": ""}}]})
        )
        for piece in pieces:
            chunks.append(
                _chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    finish = "tool_calls" if calls else draw(st.sampled_from(["stop", "length"]))
    chunks.append(_chunk({}, finish))
    if draw(st.booleans()):
        usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
        chunks.append({**_chunk({}), "choices": [], "usage": usage})
    if draw(st.booleans()):
        chunks.append("[DONE]")
    return chunks


def _body(chunks: list[dict[str, Any] | str]) -> bytes:
    events = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return "".join(events).encode()


class _Pieces(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


async def _run(stack: Stack, body: bytes, cuts: list[int], stream: bool) -> httpx.Response:
    bounds = sorted({c % (len(body) + 1) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *bounds], [*bounds, len(body)], strict=True)]

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Pieces(pieces)
        )

    config = parse_config(
        {"providers": [{"name": "f", "base_url": "http://up/v1", "api": "chat", "default": True}]}
    )
    async with httpx.AsyncClient(transport=httpx.MockTransport(upstream)) as up:
        app = create_app(config, stack.store, client=up)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            tools = [
                {"type": "function", "name": f"f{i}", "parameters": {"type": "object"}}
                for i in range(2)
            ]
            request = {
                "model": MODEL,
                "input": "go",
                "tools": tools,
                "store": False,
                "stream": stream,
            }
            return await client.post("/v1/responses", json=request, timeout=30)


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chunks=chat_streams(), cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_any_legal_chat_stream_gives_a_valid_event_stream(
    stack: Stack, chunks: list[dict[str, Any] | str], cuts: list[int]
) -> None:
    answer = asyncio.run(_run(stack, _body(chunks), cuts, stream=True))
    if answer.status_code != 200:  # a clean failure: an envelope, never a 5xx of ours
        assert answer.status_code in (400, 502), answer.text
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
        return
    final = check_stream(parse_sse(answer.content))
    assert final["status"] in ("completed", "incomplete", "failed")
    calls = [item for item in final["output"] if item["type"] == "function_call"]
    assert len(calls) == len({c["call_id"] for c in calls})  # no duplicated tool call
    if final["status"] == "completed":
        for call in calls:
            json.loads(call["arguments"])


@settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chunks=chat_streams(), cuts=st.lists(st.integers(0, 10_000), max_size=4))
def test_stream_and_buffered_answers_render_the_same_output(
    stack: Stack, chunks: list[dict[str, Any] | str], cuts: list[int]
) -> None:
    body = _body(chunks)
    streamed = asyncio.run(_run(stack, body, cuts, stream=True))
    buffered = asyncio.run(_run(stack, body, [], stream=False))
    assert streamed.status_code == buffered.status_code
    if buffered.status_code != 200:
        return
    final = check_stream(parse_sse(streamed.content))
    strip = lambda items: [{k: v for k, v in i.items() if k != "id"} for i in items]  # noqa: E731
    assert strip(final["output"]) == strip(buffered.json()["output"])
