"""Tests of the Responses passthrough adapter against a scripted upstream (httpx.MockTransport).

Each test scripts the upstream's SSE body in OpenAI's real event format, runs one model call with a
real LoopState + OutputWriter, and checks the exact items, loop events and upstream payload.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.responses_api import (
    ResponsesAdapter,
    response_events,
    to_responses_request,
)
from responses_gateway.errors import (
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTransportError,
)
from responses_gateway.loop.events import (
    ArgumentsDelta,
    ArgumentsFinished,
    ItemEvent,
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

BASE_URL = "https://upstream.example/v1"
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
CALL = ModelCall(model="gpt-up", input=[USER])
UPSTREAM_USAGE = {
    "input_tokens": 12,
    "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 0},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 3},
    "total_tokens": 19,
}
USAGE = {
    "input_tokens": 12,
    "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 0},
    "output_tokens": 7,
    "output_tokens_details": {"reasoning_tokens": 3},
    "total_tokens": 19,
}
"""``UPSTREAM_USAGE`` in the gateway's usage shape."""
STATELESS = {"model": "gpt-up", "input": [USER], "stream": True, "store": False}


@pytest.fixture(autouse=True)
def _predictable_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = itertools.count(1)
    monkeypatch.setattr(
        "responses_gateway.loop.output.new_id", lambda prefix: f"{prefix}_{next(counter)}"
    )


# -- a scripted upstream ----------------------------------------------------------------------


class Script:
    """Builds an upstream event stream the way OpenAI sends it, with sequence numbers."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.output: list[dict[str, Any]] = []

    def add(self, kind: str, **fields: Any) -> Script:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})
        return self

    def _response(self, status: str, **extra: Any) -> dict[str, Any]:
        return {
            "id": "resp_up",
            "object": "response",
            "created_at": 1,
            "status": status,
            "model": "gpt-up",
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": True,
            "temperature": 1.0,
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "store": False,
            "output": list(self.output),
            "usage": None,
            **extra,
        }

    def start(self) -> Script:
        self.add("response.created", response=self._response("in_progress", output=[]))
        return self.add("response.in_progress", response=self._response("in_progress", output=[]))

    def message(
        self,
        chunks: list[str],
        *,
        item_id: str = "msg_up",
        final_text: str | None = None,
        kind: str = "output_text",
        done: bool = True,
        phase: str | None = None,
    ) -> Script:
        index = len(self.output)
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress"}
        if phase is not None:
            item["phase"] = phase
        self.add("response.output_item.added", output_index=index, item={**item, "content": []})
        text_key = "text" if kind == "output_text" else "refusal"
        part: dict[str, Any] = {"type": kind, text_key: ""}
        if kind == "output_text":
            part.update(annotations=[], logprobs=[])
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        self.add("response.content_part.added", **where, part=part)
        delta_type = (
            "response.output_text.delta" if kind == "output_text" else "response.refusal.delta"
        )
        for chunk in chunks:
            self.add(delta_type, **where, delta=chunk, logprobs=[])
        text = "".join(chunks) if final_text is None else final_text
        final_part = {**part, text_key: text}
        final = {**item, "status": "completed", "content": [final_part]}
        self.output.append(final)
        if done:
            done_fields: dict[str, Any] = {text_key: text}
            if kind == "output_text":
                done_fields["logprobs"] = []
            self.add(delta_type.replace(".delta", ".done"), **where, **done_fields)
            self.add("response.content_part.done", **where, part=final_part)
            self.add("response.output_item.done", output_index=index, item=final)
        return self

    def reasoning(
        self,
        summaries: list[list[str]] | None = None,
        raw: list[str] | None = None,
        *,
        item_id: str = "rs_up",
        encrypted: str | None = None,
    ) -> Script:
        index = len(self.output)
        item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
        self.add("response.output_item.added", output_index=index, item=item)
        where = {"item_id": item_id, "output_index": index}
        summary = []
        for s_index, chunks in enumerate(summaries or []):
            text = "".join(chunks)
            empty = {"type": "summary_text", "text": ""}
            self.add(
                "response.reasoning_summary_part.added", **where, summary_index=s_index, part=empty
            )
            for chunk in chunks:
                self.add(
                    "response.reasoning_summary_text.delta",
                    **where,
                    summary_index=s_index,
                    delta=chunk,
                )
            self.add(
                "response.reasoning_summary_text.done", **where, summary_index=s_index, text=text
            )
            part = {"type": "summary_text", "text": text}
            self.add(
                "response.reasoning_summary_part.done", **where, summary_index=s_index, part=part
            )
            summary.append(part)
        final: dict[str, Any] = {**item, "summary": summary}
        if raw is not None:
            for chunk in raw:
                self.add("response.reasoning_text.delta", **where, content_index=0, delta=chunk)
            self.add("response.reasoning_text.done", **where, content_index=0, text="".join(raw))
            final["content"] = [{"type": "reasoning_text", "text": "".join(raw)}]
        if encrypted is not None:
            final["encrypted_content"] = encrypted
        self.output.append(final)
        return self.add("response.output_item.done", output_index=index, item=final)

    def function_call(
        self,
        name: str,
        chunks: list[str],
        *,
        call_id: str,
        item_id: str,
        final_arguments: str | None = None,
    ) -> Script:
        index = self.added_call(name, call_id=call_id, item_id=item_id)
        for chunk in chunks:
            self.call_delta(index, item_id, chunk)
        return self.done_call(
            index, "".join(chunks) if final_arguments is None else final_arguments
        )

    def added_call(self, name: str, *, call_id: str, item_id: str) -> int:
        index = len(self.output)
        item = {
            "id": item_id,
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        self.output.append(item)
        self.add("response.output_item.added", output_index=index, item=item)
        return index

    def call_delta(self, index: int, item_id: str, delta: str) -> Script:
        return self.add(
            "response.function_call_arguments.delta",
            item_id=item_id,
            output_index=index,
            delta=delta,
        )

    def done_call(self, index: int, arguments: str) -> Script:
        final = {**self.output[index], "arguments": arguments, "status": "completed"}
        self.output[index] = final
        self.add(
            "response.function_call_arguments.done",
            item_id=final["id"],
            output_index=index,
            name=final["name"],
            arguments=arguments,
        )
        return self.add("response.output_item.done", output_index=index, item=final)

    def completed(self, usage: dict[str, Any] | None = None) -> Script:
        response = self._response("completed", usage=usage or UPSTREAM_USAGE)
        return self.add("response.completed", response=response)

    def incomplete(self, reason: str) -> Script:
        details = {"reason": reason}
        response = self._response("incomplete", usage=UPSTREAM_USAGE, incomplete_details=details)
        return self.add("response.incomplete", response=response)

    def failed(self, message: str = "The model crashed.") -> dict[str, Any]:
        """A failed Response object (for ``response.failed``)."""
        return self._response("failed", error={"code": "server_error", "message": message})

    def body(self) -> bytes:
        return b"".join(
            f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in self.events
        )


class ScriptedStream(httpx.AsyncByteStream):
    """A response body that sends ``chunks``, then drops, hangs or ends; records ``aclose``."""

    def __init__(self, chunks: list[bytes], *, then: str = "end") -> None:
        self.chunks = chunks
        self.then = then
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk
        if self.then == "drop":
            raise httpx.ReadError("connection reset by peer")
        if self.then == "stall":
            raise httpx.ReadTimeout("no bytes for 30 s")
        if self.then == "hang":
            await asyncio.Event().wait()

    async def aclose(self) -> None:
        self.closed = True


class Recorder:
    """A sink that keeps every event; ``item_started`` is set at the first ItemStarted."""

    def __init__(self) -> None:
        self.events: list[LoopEvent] = []
        self.item_started = asyncio.Event()

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)
        if isinstance(event, ItemStarted):
            self.item_started.set()


class Harness:
    """One adapter over a MockTransport that answers every request with ``answer``."""

    def __init__(self, answer: httpx.Response | Exception, **adapter: Any) -> None:
        self.answer = answer
        self.adapter_kwargs = {"api_key": "sk-test", **adapter}
        self.requests: list[httpx.Request] = []
        self.state = LoopState(
            response_id="resp_1", created_at=1, model="gpt-gw", request={}, upstream_input=[]
        )
        self.sink = Recorder()

    @classmethod
    def sse(cls, script: Script | bytes, **adapter: Any) -> Harness:
        body = script.body() if isinstance(script, Script) else script
        headers = {"content-type": "text/event-stream"}
        return cls(httpx.Response(200, headers=headers, content=body), **adapter)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer

    @property
    def events(self) -> list[LoopEvent]:
        return self.sink.events

    @property
    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.requests]

    async def call(self, call: ModelCall = CALL) -> TurnResult:
        async with httpx.AsyncClient(transport=httpx.MockTransport(self._handle)) as client:
            adapter = ResponsesAdapter(client, BASE_URL, **self.adapter_kwargs)
            out = OutputWriter(self.state, self.sink)
            try:
                return await adapter.call_llm(call, out)
            finally:
                out.flush()  # state.output exact for items the adapter left open


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [part],
    }


def message_events(index: int, item_id: str, deltas: list[str]) -> list[LoopEvent]:
    """The loop events of one completed message streamed as ``deltas``."""
    empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    started = {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    final = message_item(item_id, "".join(deltas))
    return [
        ItemStarted(index, started),
        PartStarted(index, item_id, 0, empty),
        *(TextDelta(index, item_id, 0, "output_text", d) for d in deltas),
        PartFinished(index, item_id, 0, final["content"][0]),
        ItemFinished(index, final),
    ]


def call_item(call_id: str, name: str, arguments: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": f"fc_{call_id[-1]}",
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def test_script_events_parse_as_openai_sdk_stream_events() -> None:
    script = Script().start().reasoning([["a", "b"], ["c"]], raw=["x"], encrypted="gAAA")
    script.message(["Hi"]).message(["No."], kind="refusal", item_id="msg_up2")
    script.function_call("lookup", ["{}"], call_id="call_up", item_id="fc_up").completed()
    script.incomplete("max_output_tokens").add("response.failed", response=script.failed())
    script.add("error", code="server_error", message="boom", param=None)
    events = TypeAdapter(ResponseStreamEvent)

    parsed = [events.validate_python(event) for event in script.events]

    assert [event.type for event in parsed] == [event["type"] for event in script.events]


# -- to_responses_request ---------------------------------------------------------------------


def test_to_responses_request_minimal_call_is_stateless_and_streamed() -> None:
    assert to_responses_request(CALL) == STATELESS


def test_to_responses_request_transcript_items_lose_ids_and_status() -> None:
    call = ModelCall(
        model="gpt-up",
        input=[
            {"role": "user", "content": "hi", "id": "msg_client"},
            message_item("msg_gw1", "Let me look."),
            call_item("call_a", "lookup", '{"q":1}'),
            {
                "type": "function_call_output",
                "id": "fco_1",
                "call_id": "call_a",
                "output": "42",
                "status": "completed",
            },
        ],
    )

    assert to_responses_request(call)["input"] == [
        {"type": "message", "role": "user", "content": "hi"},
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "Let me look.", "annotations": [], "logprobs": []}
            ],
        },
        {"type": "function_call", "arguments": '{"q":1}', "call_id": "call_a", "name": "lookup"},
        {"type": "function_call_output", "call_id": "call_a", "output": "42"},
    ]


def _sdk_input_types_with_status() -> set[str]:
    from openai.types.responses import ResponseInputItemParam

    from responses_gateway.testing.sdk_unions import _members, _type_of

    found: set[str] = set()
    for member in _members(ResponseInputItemParam):
        if "status" in getattr(member, "__annotations__", {}):
            found.update(_type_of(member))
    return found


def test_status_kept_is_every_relayed_input_type_whose_sdk_param_declares_status() -> None:
    from responses_gateway.adapters.responses_api import _ITEM_FIELDS, _STATUS_KEPT

    rebuilt = set(_ITEM_FIELDS) | {"reasoning"}
    assert _sdk_input_types_with_status() - rebuilt == _STATUS_KEPT


@pytest.mark.parametrize("status", ["completed", "in_progress"])
def test_to_responses_request_tool_search_items_keep_the_status_the_client_sent(
    status: str,
) -> None:
    search = {"type": "tool_search_call", "id": "tsc_1", "call_id": "c1", "status": status,
              "execution": "client", "arguments": {"query": "x"}}  # fmt: skip
    output = {"type": "tool_search_output", "id": "tso_1", "call_id": "c1", "status": status,
              "execution": "client", "tools": []}  # fmt: skip
    custom = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "c2", "name": "x",
              "input": "y", "status": "completed"}  # fmt: skip
    call = ModelCall(model="gpt-up", input=[USER, search, output, custom])

    sent = to_responses_request(call)["input"]

    assert sent[1:3] == [search, output]  # exactly as sent
    assert "status" not in sent[3]  # its input param has none: OpenAI would refuse it


def test_to_responses_request_reasoning_without_encrypted_content_is_dropped() -> None:
    summary = [{"type": "summary_text", "text": "thinking"}]
    call = ModelCall(
        model="gpt-up",
        input=[
            USER,
            {"id": "rs_gw", "type": "reasoning", "summary": summary},
            {
                "id": "rs_raw",
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "raw"}],
            },
            {
                "id": "rs_up",
                "type": "reasoning",
                "summary": summary,
                "encrypted_content": "gAAA",
                "content": [{"type": "reasoning_text", "text": "raw"}],
                "status": "completed",
            },
        ],
    )

    assert to_responses_request(call)["input"] == [
        USER,
        {"type": "reasoning", "id": "rs_up", "summary": summary, "encrypted_content": "gAAA"},
    ]


def test_to_responses_request_params_pass_by_name_and_state_is_never_sent() -> None:
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    params = {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 100,
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "json_object"}},
        "top_logprobs": 2,
        "user": "u1",
        "service_tier": "flex",
        "prompt_cache_key": "k1",
        "safety_identifier": "s1",
        "previous_response_id": "resp_old",
        "conversation": "conv_1",
        "store": True,
        "stream": False,
        "include": ["file_search_call.results"],
        "top_k": None,
    }
    call = ModelCall(
        model="gpt-up",
        input=[USER],
        instructions="Be brief.",
        tools=tools,
        tool_choice="required",
        params=params,
    )

    assert to_responses_request(call) == {
        **STATELESS,
        "instructions": "Be brief.",
        "tools": tools,
        "tool_choice": "required",
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 100,
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low", "summary": "auto"},
        "text": {"format": {"type": "json_object"}},
        "top_logprobs": 2,
        "user": "u1",
        "service_tier": "flex",
        "prompt_cache_key": "k1",
        "safety_identifier": "s1",
        "include": ["file_search_call.results", "reasoning.encrypted_content"],
    }


def test_to_responses_request_client_include_is_merged_with_encrypted_reasoning() -> None:
    include = ["file_search_call.results", "reasoning.encrypted_content", 7]
    params = {"include": [*include, "file_search_call.results"], "reasoning": {"effort": "low"}}
    call = ModelCall(model="gpt-up", input=[USER], params=params)

    assert to_responses_request(call) == {
        **STATELESS,
        "reasoning": {"effort": "low"},
        "include": ["file_search_call.results", "reasoning.encrypted_content"],
    }


@pytest.mark.parametrize(
    ("include", "sent"),
    [
        (["message.output_text.logprobs"], {"include": ["message.output_text.logprobs"]}),
        ([], {}),
        (None, {}),
    ],
)
def test_to_responses_request_client_include_without_reasoning_is_sent_as_given(
    include: list[str] | None, sent: dict[str, Any]
) -> None:
    call = ModelCall(model="gpt-up", input=[USER], params={"include": include})

    assert to_responses_request(call) == {**STATELESS, **sent}


def test_to_responses_request_sends_only_the_known_fields_of_items_parts_and_tools() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}}
    call = ModelCall(
        model="gpt-up",
        input=[
            {
                "type": "message",
                "role": "user",
                "id": "msg_client",
                "status": "completed",
                "foo": 1,
                "content": [
                    {"type": "input_text", "text": "Look:", "foo": 1},
                    {
                        "type": "input_image",
                        "image_url": "https://x/cat.png",
                        "file_id": None,
                        "detail": "low",
                        "x_meta": {"a": 1},
                    },
                    {
                        "type": "input_file",
                        "file_id": "file_1",
                        "filename": "a.pdf",
                        "prompt_cache_breakpoint": {"mode": "explicit"},
                    },
                    audio,
                ],
            },
            {
                "role": "assistant",
                "phase": "final_answer",
                "extra": True,
                "content": [
                    {
                        "type": "output_text",
                        "text": "Hi",
                        "annotations": [],
                        "logprobs": [],
                        "x": 1,
                    },
                    {"type": "refusal", "refusal": "No.", "x": 1},
                ],
            },
            {"role": "user", "content": "plain", "foo": 1},
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_a",
                "name": "lookup",
                "arguments": "{}",
                "status": "completed",
                "namespace": "ns",
                "foo": 1,
            },
            {
                "type": "function_call_output",
                "id": "fco_1",
                "call_id": "call_a",
                "output": [{"type": "input_text", "text": "42", "foo": 1}],
                "foo": 1,
            },
        ],
        tools=[
            {
                "type": "function",
                "name": "lookup",
                "description": "Look up.",
                "parameters": {"type": "object"},
                "strict": True,
                "x_extra": 1,
            },
            {"name": "bare", "parameters": None, "x_extra": 2},
            {"type": "web_search", "search_context_size": "low"},
        ],
    )

    payload = to_responses_request(call)

    assert payload["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look:"},
                {
                    "type": "input_image",
                    "image_url": "https://x/cat.png",
                    "file_id": None,
                    "detail": "low",
                },
                {"type": "input_file", "file_id": "file_1", "filename": "a.pdf"},
                audio,
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "phase": "final_answer",
            "content": [
                {"type": "output_text", "text": "Hi", "annotations": [], "logprobs": []},
                {"type": "refusal", "refusal": "No."},
            ],
        },
        {"type": "message", "role": "user", "content": "plain"},
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "lookup",
            "namespace": "ns",  # a real field: a namespaced call replays under its namespace
            "arguments": "{}",
        },
        {
            "type": "function_call_output",
            "call_id": "call_a",
            "output": [{"type": "input_text", "text": "42"}],
        },
    ]
    assert payload["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look up.",
            "parameters": {"type": "object"},
            "strict": True,
        },
        {"type": "function", "name": "bare", "parameters": None},
        {"type": "web_search", "search_context_size": "low"},
    ]


# -- call_llm: output ---------------------------------------------------------------------------


async def test_call_llm_text_stream_emits_one_message() -> None:
    up = Harness.sse(Script().start().message(["Hel", "lo"]).completed())

    result = await up.call()

    assert result == TurnResult(stop="stop", usage=USAGE)
    assert up.state.output == [message_item("msg_1", "Hello")]
    assert up.events == [UpstreamResponding(), *message_events(0, "msg_1", ["Hel", "lo"])]
    assert up.payloads == [STATELESS]
    request = up.requests[0]
    assert str(request.url) == f"{BASE_URL}/responses"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["accept"] == "text/event-stream"


@pytest.mark.parametrize("phase", ["commentary", "final_answer"])
async def test_call_llm_a_message_keeps_the_phase_the_upstream_labelled_it_with(
    phase: str,
) -> None:
    """Newer models label assistant messages; clients must resend the label, so it is kept."""
    up = Harness.sse(Script().start().message(["ok"], phase=phase).completed())

    await up.call()

    assert up.state.output == [{**message_item("msg_1", "ok"), "phase": phase}]


async def test_call_llm_without_api_key_sends_no_authorization_but_extra_headers() -> None:
    up = Harness.sse(
        Script().start().message(["ok"]).completed(),
        api_key=None,
        headers={"OpenAI-Organization": "org_1"},
    )

    await up.call()

    assert "authorization" not in up.requests[0].headers
    assert up.requests[0].headers["openai-organization"] == "org_1"


async def test_call_llm_reasoning_summary_parts_then_text_emits_reasoning_and_message() -> None:
    script = Script().start().reasoning([["Plan", "ning"], ["Done."]], encrypted="gAAA")
    up = Harness.sse(script.message(["Hi"]).completed())

    await up.call()

    reasoning = {
        "id": "rs_up",
        "type": "reasoning",
        "summary": [
            {"type": "summary_text", "text": "Planning"},
            {"type": "summary_text", "text": "Done."},
        ],
        "encrypted_content": "gAAA",
    }
    assert up.state.output == [reasoning, message_item("msg_1", "Hi")]
    empty = {"type": "summary_text", "text": ""}
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, {"id": "rs_up", "type": "reasoning", "summary": []}),
        PartStarted(0, "rs_up", 0, empty),
        TextDelta(0, "rs_up", 0, "summary_text", "Plan"),
        TextDelta(0, "rs_up", 0, "summary_text", "ning"),
        PartFinished(0, "rs_up", 0, {"type": "summary_text", "text": "Planning"}),
        PartStarted(0, "rs_up", 1, empty),
        TextDelta(0, "rs_up", 1, "summary_text", "Done."),
        PartFinished(0, "rs_up", 1, {"type": "summary_text", "text": "Done."}),
        ItemFinished(0, reasoning),
        *message_events(1, "msg_1", ["Hi"]),
    ]


async def test_call_llm_reasoning_text_deltas_fill_reasoning_content() -> None:
    up = Harness.sse(Script().start().reasoning(raw=["Let me ", "think"]).completed())

    await up.call()

    text = {"type": "reasoning_text", "text": "Let me think"}
    reasoning = {"id": "rs_up", "type": "reasoning", "summary": [], "content": [text]}
    assert up.state.output == [reasoning]
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, {"id": "rs_up", "type": "reasoning", "summary": []}),
        PartStarted(0, "rs_up", 0, {"type": "reasoning_text", "text": ""}),
        TextDelta(0, "rs_up", 0, "reasoning_text", "Let me "),
        TextDelta(0, "rs_up", 0, "reasoning_text", "think"),
        PartFinished(0, "rs_up", 0, text),
        ItemFinished(0, reasoning),
    ]


async def test_call_llm_reasoning_only_in_done_item_emits_summaries_then_text() -> None:
    summary = [{"type": "summary_text", "text": "One."}, {"type": "summary_text", "text": "Two."}]
    text = {"type": "reasoning_text", "text": "raw"}
    final = {
        "id": "rs_up",
        "type": "reasoning",
        "summary": summary,
        "content": [text],
        "encrypted_content": "gAAA",
    }
    script = Script().start()
    script.add(
        "response.output_item.added",
        output_index=0,
        item={**final, "summary": [], "content": None, "encrypted_content": None},
    )
    script.add("response.output_item.done", output_index=0, item=final)
    up = Harness.sse(script.completed())

    await up.call()

    assert up.state.output == [final]
    empty = {"type": "summary_text", "text": ""}
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, {"id": "rs_up", "type": "reasoning", "summary": []}),
        PartStarted(0, "rs_up", 0, empty),
        TextDelta(0, "rs_up", 0, "summary_text", "One."),
        PartFinished(0, "rs_up", 0, summary[0]),
        PartStarted(0, "rs_up", 1, empty),
        TextDelta(0, "rs_up", 1, "summary_text", "Two."),
        PartFinished(0, "rs_up", 1, summary[1]),
        PartStarted(0, "rs_up", 0, {"type": "reasoning_text", "text": ""}),
        TextDelta(0, "rs_up", 0, "reasoning_text", "raw"),
        PartFinished(0, "rs_up", 0, text),
        ItemFinished(0, final),
    ]


async def test_call_llm_malformed_event_field_raises_protocol_error() -> None:
    bad_item = {"type": "message", "content": ["not a part"]}
    script = Script().start().add("response.output_item.done", output_index=0, item=bad_item)
    up = Harness.sse(script)

    with pytest.raises(UpstreamProtocolError, match="malformed response.output_item.done"):
        await up.call()


async def test_call_llm_fragmented_arguments_stream_into_one_function_call() -> None:
    script = (
        Script()
        .start()
        .function_call(
            "get_weather", ['{"ci', 'ty":', '"Paris"}'], call_id="call_up", item_id="fc_up"
        )
    )
    up = Harness.sse(script.completed())

    await up.call()

    final = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"city":"Paris"}',
        "call_id": "call_up",
        "name": "get_weather",
    }
    assert up.state.output == [final]
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, {**final, "status": "in_progress", "arguments": ""}),
        ArgumentsDelta(0, "fc_1", '{"ci'),
        ArgumentsDelta(0, "fc_1", 'ty":'),
        ArgumentsDelta(0, "fc_1", '"Paris"}'),
        ArgumentsFinished(0, final),
        ItemFinished(0, final),
    ]


async def test_call_llm_parallel_function_calls_keep_arguments_apart() -> None:
    script = Script().start()
    first = script.added_call("lookup", call_id="call_a", item_id="fc_up_a")
    second = script.added_call("lookup", call_id="call_b", item_id="fc_up_b")
    script.call_delta(first, "fc_up_a", '{"q":').call_delta(second, "fc_up_b", '{"q":')
    script.call_delta(second, "fc_up_b", '"b"}').call_delta(first, "fc_up_a", '"a"}')
    up = Harness.sse(
        script.done_call(first, '{"q":"a"}').done_call(second, '{"q":"b"}').completed()
    )

    await up.call()

    call_a = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"q":"a"}',
        "call_id": "call_a",
        "name": "lookup",
    }
    call_b = {**call_a, "id": "fc_2", "arguments": '{"q":"b"}', "call_id": "call_b"}
    assert up.state.output == [call_a, call_b]
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, {**call_a, "status": "in_progress", "arguments": ""}),
        ItemStarted(1, {**call_b, "status": "in_progress", "arguments": ""}),
        ArgumentsDelta(0, "fc_1", '{"q":'),
        ArgumentsDelta(1, "fc_2", '{"q":'),
        ArgumentsDelta(1, "fc_2", '"b"}'),
        ArgumentsDelta(0, "fc_1", '"a"}'),
        ArgumentsFinished(0, call_a),
        ItemFinished(0, call_a),
        ArgumentsFinished(1, call_b),
        ItemFinished(1, call_b),
    ]


async def test_call_llm_arguments_only_in_done_item_are_emitted_as_one_delta() -> None:
    script = (
        Script()
        .start()
        .function_call("lookup", [], call_id="call_up", item_id="fc_up", final_arguments='{"q":1}')
    )
    up = Harness.sse(script.completed())

    await up.call()

    final = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"q":1}',
        "call_id": "call_up",
        "name": "lookup",
    }
    assert up.state.output == [final]
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, {**final, "status": "in_progress", "arguments": ""}),
        ArgumentsDelta(0, "fc_1", '{"q":1}'),
        ArgumentsFinished(0, final),
        ItemFinished(0, final),
    ]


async def test_call_llm_text_shorter_than_done_item_emits_the_remainder() -> None:
    up = Harness.sse(Script().start().message(["Hel"], final_text="Hello!").completed())

    await up.call()

    assert up.state.output == [message_item("msg_1", "Hello!")]
    assert up.events == [UpstreamResponding(), *message_events(0, "msg_1", ["Hel", "lo!"])]


async def test_call_llm_items_without_done_events_are_settled_from_completed_output() -> None:
    script = Script().start().message(["Hi"], final_text="Hi there", done=False)
    up = Harness.sse(script.completed())

    await up.call()

    assert up.state.output == [message_item("msg_1", "Hi there")]
    assert up.events == [UpstreamResponding(), *message_events(0, "msg_1", ["Hi", " there"])]


REASONING_FINAL = {
    "id": "rs_up",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Plan."}],
    "encrypted_content": "gAAA",
}
CALL_FINAL = {
    "id": "fc_up",
    "type": "function_call",
    "status": "completed",
    "arguments": '{"q":1}',
    "call_id": "call_up",
    "name": "lookup",
}


def reasoning_events(index: int) -> list[LoopEvent]:
    """The loop events of ``REASONING_FINAL`` opened and finished from its final form."""
    return [
        ItemStarted(index, {"id": "rs_up", "type": "reasoning", "summary": []}),
        PartStarted(index, "rs_up", 0, {"type": "summary_text", "text": ""}),
        TextDelta(index, "rs_up", 0, "summary_text", "Plan."),
        PartFinished(index, "rs_up", 0, {"type": "summary_text", "text": "Plan."}),
        ItemFinished(index, REASONING_FINAL),
    ]


def call_events(index: int, item_id: str) -> list[LoopEvent]:
    """The loop events of ``CALL_FINAL`` opened and finished from its final form."""
    final = {**CALL_FINAL, "id": item_id}
    return [
        ItemStarted(index, {**final, "status": "in_progress", "arguments": ""}),
        ArgumentsDelta(index, item_id, '{"q":1}'),
        ArgumentsFinished(index, final),
        ItemFinished(index, final),
    ]


async def test_call_llm_items_only_in_completed_output_are_opened_and_finished() -> None:
    script = Script().start()
    script.output = [REASONING_FINAL, message_item("msg_up", "Hello"), CALL_FINAL]
    up = Harness.sse(script.completed())

    result = await up.call()

    assert result == TurnResult(stop="stop", usage=USAGE)
    assert up.state.output == [
        REASONING_FINAL,
        message_item("msg_1", "Hello"),
        {**CALL_FINAL, "id": "fc_2"},
    ]
    assert up.events == [
        UpstreamResponding(),
        *reasoning_events(0),
        *message_events(1, "msg_1", ["Hello"]),
        *call_events(2, "fc_2"),
    ]


async def test_call_llm_unannounced_items_follow_the_announced_ones_in_output_order() -> None:
    script = Script().start()
    script.output.append(REASONING_FINAL)  # index 0: never announced
    script.message(["Hi"], final_text="Hi there", done=False)  # index 1: added, never done
    search = {"id": "ws_up", "type": "web_search_call", "status": "completed"}
    script.output += [CALL_FINAL, search]  # indexes 2 and 3: never announced
    up = Harness.sse(script.completed())

    await up.call()

    assert up.state.output == [
        message_item("msg_1", "Hi there"),
        REASONING_FINAL,
        {**CALL_FINAL, "id": "fc_2"},
        search,
    ]
    assert up.events == [
        UpstreamResponding(),
        *message_events(0, "msg_1", ["Hi", " there"]),
        *reasoning_events(1),
        *call_events(2, "fc_2"),
        ItemStarted(3, search),
        ItemFinished(3, search),
    ]


async def test_call_llm_refusal_delta_streams_into_a_refusal_part() -> None:
    up = Harness.sse(Script().start().message(["I can't ", "help."], kind="refusal").completed())

    await up.call()

    refusal = {"type": "refusal", "refusal": "I can't help."}
    final = {**message_item("msg_1", ""), "content": [refusal]}
    started = {**final, "status": "in_progress", "content": []}
    assert up.state.output == [final]
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, started),
        PartStarted(0, "msg_1", 0, {"type": "refusal", "refusal": ""}),
        TextDelta(0, "msg_1", 0, "refusal", "I can't "),
        TextDelta(0, "msg_1", 0, "refusal", "help."),
        PartFinished(0, "msg_1", 0, refusal),
        ItemFinished(0, final),
    ]


async def test_call_llm_annotations_are_relayed_and_kept() -> None:
    citation = {"type": "url_citation", "url": "https://example.com", "title": "Ex",
                "start_index": 0, "end_index": 2}  # fmt: skip
    script = Script().start().message(["Hi"]).completed()
    done = script.events[-2]["item"]
    done["content"][0]["annotations"] = [citation]
    up = Harness.sse(script)

    await up.call()

    assert up.state.output[0]["content"][0]["annotations"] == [citation]
    relayed = [e for e in up.events if isinstance(e, ItemEvent)]
    assert relayed == [
        ItemEvent(
            "response.output_text.annotation.added",
            {"item_id": "msg_1", "output_index": 0, "content_index": 0,
             "annotation_index": 0, "annotation": citation},
        )
    ]  # fmt: skip


async def test_call_llm_hosted_items_are_relayed_with_their_events() -> None:
    search = {"id": "ws_up", "type": "web_search_call", "status": "in_progress"}
    done = {**search, "status": "completed", "action": {"type": "search", "query": "q"}}
    script = Script().start().add("response.output_item.added", output_index=0, item=search)
    script.add("response.web_search_call.searching", item_id="ws_up", output_index=0)
    script.add("response.output_item.done", output_index=0, item=done)
    script.output.append(done)
    script.add("response.some_future_event", output_index=1, payload={"x": 1})
    up = Harness.sse(script.message(["Found it."]).completed())

    await up.call()

    assert up.state.output == [done, message_item("msg_1", "Found it.")]
    assert up.events == [
        UpstreamResponding(),
        ItemStarted(0, search),
        ItemEvent("response.web_search_call.searching", {"item_id": "ws_up", "output_index": 0}),
        ItemFinished(0, done),
        *message_events(1, "msg_1", ["Found it."]),
    ]


async def test_call_llm_encrypted_reasoning_is_kept_and_replayed_next_turn() -> None:
    script = Script().start().reasoning([["Need data."]], item_id="rs_up", encrypted="gAAA")
    script.function_call("lookup", ['{"q":1}'], call_id="call_up", item_id="fc_up")
    up = Harness.sse(script.completed())
    await up.call()
    output = list(up.state.output)
    result = {"type": "function_call_output", "call_id": "call_up", "output": "42"}

    await up.call(ModelCall(model="gpt-up", input=[USER, *output, result]))

    summary = [{"type": "summary_text", "text": "Need data."}]
    assert output[0] == {
        "id": "rs_up",
        "type": "reasoning",
        "summary": summary,
        "encrypted_content": "gAAA",
    }
    assert up.payloads[1]["input"] == [
        USER,
        {"type": "reasoning", "id": "rs_up", "summary": summary, "encrypted_content": "gAAA"},
        {"type": "function_call", "arguments": '{"q":1}', "call_id": "call_up", "name": "lookup"},
        result,
    ]


# -- call_llm: endings ------------------------------------------------------------------------


async def test_call_llm_incomplete_max_output_tokens_returns_length_and_leaves_item_open() -> None:
    up = Harness.sse(Script().start().message(["Cut"], done=False).incomplete("max_output_tokens"))

    result = await up.call()

    assert result == TurnResult(stop="length", usage=USAGE)
    assert up.state.output == [message_item("msg_1", "Cut", status="in_progress")]
    assert up.events == [UpstreamResponding(), *message_events(0, "msg_1", ["Cut"])[:3]]


async def test_call_llm_incomplete_content_filter_returns_content_filter() -> None:
    up = Harness.sse(Script().start().incomplete("content_filter"))

    assert await up.call() == TurnResult(stop="content_filter", usage=USAGE)


async def test_call_llm_response_failed_raises_with_upstream_message() -> None:
    script = Script().start().message(["Part"])
    up = Harness.sse(script.add("response.failed", response=script.failed()))

    with pytest.raises(UpstreamStatusError) as caught:
        await up.call()

    assert (caught.value.message, caught.value.code) == ("The model crashed.", "server_error")
    assert (caught.value.upstream_status, caught.value.status_code) == (500, 502)
    assert up.state.output == [message_item("msg_1", "Part")]


@pytest.mark.parametrize(
    "event",
    [
        {"code": "rate_limit_exceeded", "message": "Slow down.", "param": None},
        {
            "error": {
                "type": "rate_limit_error",
                "code": "rate_limit_exceeded",
                "message": "Slow down.",
                "param": None,
            }
        },
    ],
    ids=["flat", "nested"],
)
async def test_call_llm_error_event_raises_with_its_code(event: dict[str, Any]) -> None:
    up = Harness.sse(Script().start().add("error", **event))

    with pytest.raises(UpstreamStatusError) as caught:
        await up.call()

    assert (caught.value.message, caught.value.code) == ("Slow down.", "rate_limit_exceeded")
    assert (caught.value.status_code, caught.value.error_type) == (429, "rate_limit_error")
    assert up.events == [UpstreamResponding()]


# -- call_llm: upstream failures --------------------------------------------------------------


async def test_call_llm_http_429_raises_before_emitting_and_keeps_status() -> None:
    body = {
        "error": {
            "message": "Rate limit reached.",
            "type": "requests",
            "code": "rate_limit_exceeded",
            "param": None,
        }
    }
    up = Harness(httpx.Response(429, json=body))

    with pytest.raises(UpstreamStatusError) as caught:
        await up.call()

    error = caught.value
    assert (error.status_code, error.upstream_status) == (429, 429)
    assert (error.message, error.code, error.error_type) == (
        "Rate limit reached.",
        "rate_limit_exceeded",
        "requests",
    )
    assert json.loads(error.body) == body
    assert up.events == []
    assert up.state.output == []


async def test_call_llm_http_500_becomes_502() -> None:
    up = Harness(httpx.Response(500, text="<html>Internal Server Error</html>"))

    with pytest.raises(UpstreamStatusError) as caught:
        await up.call()

    error = caught.value
    assert (error.status_code, error.upstream_status) == (502, 500)
    assert error.message == "The upstream model returned HTTP 500."
    assert error.body == "<html>Internal Server Error</html>"
    assert up.events == []


async def test_call_llm_http_400_keeps_the_upstream_message_and_param() -> None:
    message = "Invalid value for 'temperature': must be at most 2."
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "invalid_value",
        }
    }
    up = Harness(httpx.Response(400, json=body))

    with pytest.raises(UpstreamStatusError) as caught:
        await up.call()

    error = caught.value
    assert error.to_error() == {
        "message": message,
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "invalid_value",
    }
    assert error.status_code == 400
    assert up.events == []


async def test_call_llm_connect_error_raises_transport_error() -> None:
    up = Harness(httpx.ConnectError("connection refused"))

    with pytest.raises(UpstreamTransportError, match="could not be reached: ConnectError"):
        await up.call()

    assert up.events == []


async def test_call_llm_timeout_raises_transport_error() -> None:
    up = Harness(httpx.ReadTimeout("timed out"))

    with pytest.raises(UpstreamTransportError, match="timed out: ReadTimeout"):
        await up.call()


async def test_call_llm_timeout_is_sent_on_the_request() -> None:
    up = Harness.sse(Script().start().message(["ok"]).completed(), timeout=30.0)

    await up.call()

    assert up.requests[0].extensions["timeout"] == {
        "connect": 10.0,
        "read": 30.0,
        "write": 30.0,
        "pool": 30.0,
    }


async def test_call_llm_read_timeout_mid_stream_raises_timed_out_transport_error() -> None:
    stream = ScriptedStream([Script().start().body()], then="stall")
    up = Harness(httpx.Response(200, stream=stream), timeout=30.0)

    with pytest.raises(
        UpstreamTransportError, match="^The upstream model timed out mid-stream: ReadTimeout$"
    ):
        await up.call()

    assert up.events == [UpstreamResponding()]
    assert stream.closed


async def test_call_llm_dropped_connection_mid_stream_raises_transport_error() -> None:
    events = Script().start().message(["Hel", "lo"]).body().split(b"\n\n")
    stream = ScriptedStream([b"\n\n".join(events[:4]) + b"\n\n"], then="drop")
    up = Harness(httpx.Response(200, stream=stream))

    with pytest.raises(UpstreamTransportError, match="mid-stream"):
        await up.call()

    assert up.state.output == [{**message_item("msg_1", "", status="in_progress"), "content": []}]
    assert stream.closed


async def test_call_llm_eof_without_terminal_event_raises_protocol_error() -> None:
    up = Harness.sse(Script().start().message(["Hi"]))

    with pytest.raises(UpstreamProtocolError, match="ended without a terminal event"):
        await up.call()

    assert up.state.output == [message_item("msg_1", "Hi")]


async def test_call_llm_invalid_json_raises_protocol_error() -> None:
    up = Harness.sse(
        Script().start().body() + b"event: response.output_text.delta\ndata: {oops\n\n"
    )

    with pytest.raises(UpstreamProtocolError, match="not JSON"):
        await up.call()


async def test_call_llm_cancelled_task_closes_the_upstream_connection() -> None:
    body = (
        Script()
        .start()
        .add(
            "response.output_item.added",
            output_index=0,
            item={"id": "msg_up", "type": "message", "content": []},
        )
        .body()
    )
    stream = ScriptedStream([body], then="hang")
    up = Harness(httpx.Response(200, stream=stream))
    task = asyncio.create_task(up.call())
    await up.sink.item_started.wait()

    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await task
    assert stream.closed


# -- call_llm: lone surrogates ----------------------------------------------------------------


async def test_call_llm_lone_surrogates_become_replacement_characters() -> None:
    script = Script().start().reasoning([["hm\udbff"]], item_id="rs_up")
    script.message(["a\ud83d b", " \ud83d\ude00"])
    script.function_call("f\udc00", ['{"q": "\ud800"}'], call_id="call_up", item_id="fc_up")
    up = Harness.sse(script.completed())

    await up.call()

    assert up.state.output == [
        {
            "id": "rs_up",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "hm\ufffd"}],
        },
        message_item("msg_1", "a\ufffd b \U0001f600"),
        {
            "id": "fc_2",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"q": "\ufffd"}',
            "call_id": "call_up",
            "name": "f\ufffd",
        },
    ]
    for event in up.events:
        json.dumps(dataclasses.asdict(event), ensure_ascii=False).encode()


async def test_call_llm_lone_surrogates_in_error_messages_are_replaced() -> None:
    body = {"error": {"message": "bad \ud800", "type": "invalid_request_error"}}
    headers = {"content-type": "application/json"}
    status = Harness(httpx.Response(400, headers=headers, content=json.dumps(body).encode()))
    script = Script().start()
    failed = Harness.sse(script.add("response.failed", response=script.failed("boom \udbff")))

    with pytest.raises(UpstreamStatusError) as http_error:
        await status.call()
    with pytest.raises(UpstreamStatusError) as stream_error:
        await failed.call()

    assert (http_error.value.message, stream_error.value.message) == ("bad \ufffd", "boom \ufffd")


def test_request_replays_status_where_the_input_param_declares_it() -> None:
    search = {"id": "ws_1", "type": "web_search_call", "status": "completed",
              "action": {"type": "search", "query": "q"}}  # fmt: skip
    call = {"id": "mcp_1", "type": "mcp_call", "status": "completed", "server_label": "s",
            "name": "n", "arguments": "{}"}  # fmt: skip
    listing = {"id": "mcpl_1", "type": "mcp_list_tools", "status": "completed",
               "server_label": "s", "tools": []}  # fmt: skip
    payload = to_responses_request(ModelCall(model="m", input=[search, call, listing]))
    assert payload["input"] == [search, call, {k: v for k, v in listing.items() if k != "status"}]


async def test_call_llm_an_in_stream_invalid_request_without_a_code_is_a_400() -> None:
    """An orphan call_id comes back as an invalid_request_error with no code: the request's
    fault (a 400 the client sees), not a server error."""
    error = {"message": "No tool call found for function call output with call_id c9.",
             "type": "invalid_request_error", "param": "input", "code": None}  # fmt: skip
    script = Script().start()
    failed = Harness.sse(script.add("error", error=error))

    with pytest.raises(UpstreamStatusError) as raised:
        await failed.call()

    assert (raised.value.status_code, raised.value.error_type) == (400, "invalid_request_error")
    assert raised.value.param == "input"


# -- an unstreamed answer, as the events its stream would have ended with ---------------------


@pytest.mark.parametrize(
    ("status", "terminal"),
    [
        ("completed", "response.completed"),
        ("incomplete", "response.incomplete"),
        ("failed", "response.failed"),
        (None, "response.completed"),
    ],
)
def test_response_events_end_with_the_terminal_event_of_its_status(
    status: str | None, terminal: str
) -> None:
    answer = {"object": "response", "status": status, "output": [], "error": None}
    assert [json.loads(e) for e in response_events(answer)] == [
        {"type": terminal, "response": answer}
    ]


def test_response_events_of_an_error_body_are_the_error_event() -> None:
    assert [json.loads(e) for e in response_events({"error": {"message": "no"}})] == [
        {"type": "error", "error": {"message": "no"}}
    ]
    with pytest.raises(UpstreamProtocolError):
        response_events(["not", "an", "object"])
