"""The Responses wire is exact: every output item type a Responses upstream sends reaches the
official SDK's strict stream helper unchanged, also interleaved with the gateway's own MCP items
(indexes and sequence numbers renumbered), and refusals and citations survive the stream, the
store and a ``previous_response_id`` replay (issue #19)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import ResponseOutputItem
from pydantic import TypeAdapter

from responses_gateway.protocol.contract import OUTPUT_ITEM_TYPES, OUTPUT_ITEMS
from responses_gateway.testing import hosted
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import RelayedItem, ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.sdk_instances import INPUT_INSTANCES
from responses_gateway.testing.spec_oracle import spec_oracle
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import MODELS

MODEL = MODELS["responses"]
_WRITTEN = ("message", "reasoning", "function_call")
"""Output types the gateway's writer re-emits (same content, events rebuilt)."""
_WITH_EVENTS = {
    "web_search_call": hosted.web_search_call("ws_o1", "weather"),
    "image_generation_call": hosted.image_generation_call("ig_o1", ["AA=="], "AAAA"),
    "code_interpreter_call": hosted.code_interpreter_call("ci_o1", "1+1", "2"),
    "file_search_call": hosted.file_search_call("fs_o1", ["q"]),
    "custom_tool_call": hosted.custom_tool_call("ctc_o1", "call_o1", "grep", "x"),
    "shell_call": hosted.shell_call("sh_o1", "call_o2", ["ls"]),
}


_REQUIRED_AS_OUTPUT: dict[str, Any] = {
    "call_id": "call_o1",
    "max_output_length": None,
    "request_id": "mcpr_o1",
}
"""Values for the keys either spec requires of an output item that the smallest input instance
leaves out (an upstream's items are spec-valid; the tap checks what we relay)."""


def _plain(name: str) -> RelayedItem:
    """A minimal item of type ``name``, from the SDK-validated input instances, with the keys
    OpenAI's spec requires of it as an output item."""
    source = [i for i in INPUT_INSTANCES.get(name, []) if i["type"] == name]
    item: dict[str, Any] = {**(source[0] if source else {"type": name})}
    item.setdefault("id", f"{name[:4]}_o1")
    item.setdefault("status", "completed")
    oracle = spec_oracle()
    required: list[str] = []
    for spec, union in ((oracle.openai, "OutputItem"), (oracle.open_responses, "ItemField")):
        member = spec.members(spec.schemas[union]).get(name)
        required += spec.schemas[member].get("required", []) if member else []
    for key in required:
        if key not in item:
            item[key] = _REQUIRED_AS_OUTPUT[key]
    TypeAdapter(ResponseOutputItem).validate_python(item)
    return RelayedItem(added=dict(item), events=[], done=item)


def _relayed(name: str) -> RelayedItem:
    return _WITH_EVENTS.get(name) or _plain(name)


def test_every_output_item_type_reaches_the_strict_stream_helper_unchanged(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    names = [n for n in OUTPUT_ITEM_TYPES if n not in _WRITTEN]
    assert all(OUTPUT_ITEMS[n].responses.fate == "relayed" for n in OUTPUT_ITEM_TYPES)
    items = [_relayed(name) for name in names]
    upstream.push(Turn(text="done", relayed_items=items))

    # results of hosted calls reach the client when include asks for them, as on OpenAI
    include: list[Any] = [
        "code_interpreter_call.outputs",
        "file_search_call.results",
        "web_search_call.action.sources",
        "web_search_call.results",
        "computer_call_output.output.image_url",
        "message.output_text.logprobs",
    ]
    with client.responses.stream(model=MODEL, input="go", store=False, include=include) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()

    output = [item.model_dump(exclude_unset=True) for item in final.output]
    assert [item["type"] for item in output] == [*names, "message"]
    for sent, got in zip(items, output, strict=False):
        assert got == {**sent.done}, sent.done["type"]
    for relayed in items:
        for event in relayed.events:
            assert event["type"] in kinds


def _refusal_and_citation() -> RelayedItem:
    citation = {"type": "url_citation", "url": "https://example.com/a", "title": "A",
                "start_index": 0, "end_index": 4}  # fmt: skip
    text = {"type": "output_text", "text": "Paris", "annotations": [citation], "logprobs": []}
    refusal = {"type": "refusal", "refusal": "Not that."}
    where = {"item_id": "msg_up"}
    events = [
        {"type": "response.content_part.added", **where, "content_index": 0,
         "part": {**text, "text": "", "annotations": []}},
        {"type": "response.output_text.delta", **where, "content_index": 0, "delta": "Paris",
         "logprobs": []},
        {"type": "response.output_text.annotation.added", **where, "content_index": 0,
         "annotation_index": 0, "annotation": citation},
        {"type": "response.output_text.done", **where, "content_index": 0, "text": "Paris",
         "logprobs": []},
        {"type": "response.content_part.done", **where, "content_index": 0, "part": text},
        {"type": "response.content_part.added", **where, "content_index": 1,
         "part": {"type": "refusal", "refusal": ""}},
        {"type": "response.refusal.delta", **where, "content_index": 1, "delta": "Not that."},
        {"type": "response.refusal.done", **where, "content_index": 1, "refusal": "Not that."},
        {"type": "response.content_part.done", **where, "content_index": 1, "part": refusal},
    ]  # fmt: skip
    message = {"id": "msg_up", "type": "message", "role": "assistant", "status": "completed",
               "content": [text, refusal]}  # fmt: skip
    added = {**message, "status": "in_progress", "content": []}
    return RelayedItem(added=added, events=events, done=message)


def test_refusal_and_citation_survive_stream_store_and_replay(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    relayed = _refusal_and_citation()
    upstream.push(Turn(relayed_items=[relayed]), Turn(text="ok"))

    with client.responses.stream(model=MODEL, input="capital?") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    parts = final.output[0].content  # type: ignore[union-attr]
    content = [part.model_dump(exclude={"parsed"}) for part in parts]

    assert content == relayed.done["content"]
    assert "response.output_text.annotation.added" in kinds
    assert "response.refusal.delta" in kinds
    stored = client.responses.retrieve(final.id)
    assert [p.model_dump() for p in stored.output[0].content] == content  # type: ignore[union-attr]
    client.responses.create(model=MODEL, input="and?", previous_response_id=final.id)
    replayed = upstream.model_requests()[-1].json["input"]
    assert [i["content"] for i in replayed if i.get("role") == "assistant"] == [content]


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


def test_relayed_items_interleaved_with_gateway_mcp_items_are_renumbered_stored_and_replayed(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, calc: RunningMcpServer
) -> None:
    search = hosted.web_search_call("ws_i1", "weather")
    image = hosted.image_generation_call("ig_i1", ["AA==", "AB=="], "AAAA")
    code = hosted.code_interpreter_call("ci_i1", "1+1", "2")
    add = ToolCall("calc__add", '{"a":2,"b":3}', "call_i1")

    def turns() -> list[Turn]:
        return [
            Turn(reasoning="Search, then add.", relayed_items=[search], tool_calls=[add]),
            Turn(text="It is 5.", relayed_items=[image, code]),
        ]

    mcp: Any = {"type": "mcp", "server_label": "calc", "server_url": calc.url,
                "require_approval": "never"}  # fmt: skip
    include: Any = ["web_search_call.action.sources", "code_interpreter_call.outputs"]
    body = {"model": MODEL, "input": "2+3?", "tools": [mcp], "include": include, "stream": True}
    upstream.push(*turns())

    events = parse_sse(http.post("/responses", json=body).content)

    final = check_stream(events)  # sequence numbers 0..n, every index opened before use...
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    output = final["output"]
    kinds = ["mcp_list_tools", "web_search_call", "reasoning", "mcp_call", "image_generation_call",
             "code_interpreter_call", "message"]  # fmt: skip
    assert [item["type"] for item in output] == kinds
    for relayed in (search, image, code):  # the upstream's items, unchanged
        assert next(i for i in output if i["id"] == relayed.done["id"]) == relayed.done
    for event in events:  # every event names its item where the final output has it
        if "output_index" in event and "item_id" in event:
            assert output[event["output_index"]]["id"] == event["item_id"], event
    added = [e["output_index"] for e in events if e["type"] == "response.output_item.added"]
    assert added == list(range(len(kinds)))
    relayed_kinds = {e["type"] for r in (search, image, code) for e in r.events}
    assert relayed_kinds <= {e["type"] for e in events}

    upstream.push(*turns())
    with client.responses.stream(model=MODEL, input="2+3?", tools=[mcp], include=include) as s:
        for _ in s:
            pass
        strict = s.get_final_response()
    assert [item.type for item in strict.output] == kinds

    stored = client.responses.retrieve(final["id"], include=include)
    assert [item.model_dump(exclude_unset=True) for item in stored.output] == [
        TypeAdapter(ResponseOutputItem).validate_python(i).model_dump(exclude_unset=True)
        for i in output
    ]
    upstream.push(Turn(text="ok"))
    client.responses.create(model=MODEL, input="and?", previous_response_id=final["id"])
    replayed = upstream.model_requests()[-1].json["input"]
    # the upstream's items as they were; the gateway's MCP call as the function call and output
    # the upstream saw (the listing stays with the gateway; reasoning without encrypted content
    # is not replayed to a store:false upstream)
    assert [item.get("type") for item in replayed] == [
        "message", "web_search_call", "function_call", "function_call_output",
        "image_generation_call", "code_interpreter_call", "message", "message",
    ]  # fmt: skip
    for relayed in (search, image, code):
        assert next(i for i in replayed if i.get("id") == relayed.done["id"]) == relayed.done
    assert [i["output"] for i in replayed if i["type"] == "function_call_output"] == ["5.0"]
