"""The items (and their stream events) the gateway builds for each tool kind, on each wire, are
what both specs accept (issue #29).

The cases come from the tool-kind table: every kind with a call item has one, and a kind the
table gains without a case fails :func:`test_every_kind_of_the_table_has_a_case`. On a lowering
wire (chat, harmony) the gateway builds the item from the model's function call; each kind is
driven through the real :class:`OutputWriter` and :class:`SSESink`, completed and cut off, and
every event and the final Response are held to both documents. On the Responses wire the
upstream builds it and the gateway relays it exactly: the recorded shapes of
``testing.hosted`` stand for what OpenAI sends (tests/e2e/test_contract_relay.py relays every
output type through the served gateway).
"""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.loop.events import ResponseFinished, ResponseStarted
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import LoopState
from responses_gateway.protocol.request import echo_fields, parse_create_request
from responses_gateway.sinks import SSESink
from responses_gateway.testing import hosted
from responses_gateway.testing.script import RelayedItem
from responses_gateway.testing.spec_oracle import spec_oracle
from responses_gateway.testing.stream_check import check_stream, parse_sse
from responses_gateway.tool_kinds import KINDS, LOWERED_WIRES, tool_view

CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    # kind -> (the tool as declared, the exposed function, the model's arguments)
    "function": ({"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
                 "get_weather", '{"city": "Paris"}'),
    "custom": ({"type": "custom", "name": "apply_patch"}, "apply_patch", '{"input": "*** x"}'),
    "shell": ({"type": "shell", "environment": {"type": "local"}}, "shell",
              '{"commands": ["ls -la", "pwd"], "timeout_ms": 1000}'),
    "local_shell": ({"type": "local_shell"}, "local_shell",
                    '{"command": ["ls"], "working_directory": "/tmp"}'),
    "apply_patch": ({"type": "apply_patch"}, "apply_patch",
                    '{"type": "create_file", "path": "a.txt", "diff": "+hi"}'),
    "computer": ({"type": "computer_use_preview", "display_width": 800, "display_height": 600,
                  "environment": "browser"}, "computer",
                 '{"action": {"type": "click", "x": 1, "y": 2, "button": "left"}}'),
    "tool_search": ({"type": "tool_search", "execution": "client"}, "tool_search",
                    '{"query": "agents"}'),
    "web_search": ({"type": "web_search"}, "web_search", '{"query": "weather paris"}'),
    "file_search": ({"type": "file_search", "vector_store_ids": ["vs_1"]}, "file_search",
                    '{"query": "retention"}'),
    "code_interpreter": ({"type": "code_interpreter", "container": {"type": "auto"}},
                         "code_interpreter", '{"code": "print(1)"}'),
    "image_generation": ({"type": "image_generation"}, "image_generation",
                         '{"prompt": "a red dot"}'),
}  # fmt: skip

BACKEND_ANSWERS = {
    "web_search": "See https://example.com/weather",
    "file_search": '[{"file_id": "file_1", "filename": "a.txt", "score": 0.9, "text": "30 days"}]',
    "code_interpreter": '{"logs": "1"}',
    "image_generation": '{"result": "AAAA", "revised_prompt": "a red dot"}',
}
"""What a configured hosted-tool backend answers (hosted kinds run by the gateway)."""

RELAYED: dict[str, RelayedItem] = {
    "custom": hosted.custom_tool_call("ctc_1", "call_1", "grep", ["x"]),
    "shell": hosted.shell_call("sh_1", "call_1", ["ls"]),
    "tool_search": hosted.tool_search_call("tsc_1", "call_1", {"query": "agents"}),
    "web_search": hosted.web_search_call("ws_1", "weather", ["https://example.com"]),
    "file_search": hosted.file_search_call("fs_1", ["q"]),
    "code_interpreter": hosted.code_interpreter_call("ci_1", "print(1)", "1"),
    "image_generation": hosted.image_generation_call("ig_1", ["AA=="], "AAAA"),
}
"""A Responses upstream's items, as ``testing.hosted`` records them."""


def test_every_kind_of_the_table_has_a_case() -> None:
    assert {kind.name for kind in KINDS if kind.item_type} == set(CASES)


def _state(tool: dict[str, Any]) -> LoopState:
    request = echo_fields(parse_create_request({"model": "m", "input": "go", "tools": [tool]}))
    return LoopState(
        response_id="resp_1", created_at=1, model="m", request=request, upstream_input=[]
    )


def _stream(kind: str, wire: str, cut_off: bool) -> list[dict[str, Any]]:
    tool, exposed, arguments = CASES[kind]
    state = _state(tool)
    frames: list[bytes] = []
    sink = SSESink(frames.append)
    out = OutputWriter(state, sink)
    out.calls = tool_view([tool], [], "auto", wire, backed=frozenset(BACKEND_ANSWERS)).calls
    sink.emit(ResponseStarted(render_response(state)))
    call = out.function_call(name=exposed, call_id="call_1")
    call.arguments(arguments)
    if cut_off:
        out.close_open("incomplete")
        state.status, state.incomplete_reason = "incomplete", "max_output_tokens"
    else:
        call.finish()
        index = len(state.output) - 1
        item = state.output[index]
        if item.get("status") == "in_progress":  # a hosted call: the gateway's backend answers
            backend = next(k for k in KINDS if k.name == kind).backend
            assert backend is not None
            state.output[index] = {**item, **backend.result(item, BACKEND_ANSWERS[kind])}
            out.finish_call_item(index)
        state.status, state.completed_at = "completed", 2
    sink.emit(ResponseFinished(render_response(state)))
    return parse_sse(b"".join(frames))


@pytest.mark.parametrize("cut_off", [False, True], ids=["completed", "cut_off"])
@pytest.mark.parametrize("wire", sorted(LOWERED_WIRES))
@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_kind_s_item_and_events_built_by_the_gateway_validate_against_both_specs(
    kind: str, wire: str, cut_off: bool
) -> None:
    events = _stream(kind, wire, cut_off)

    spec_oracle().check_all_events(events, f"{kind} on {wire}")
    final = check_stream(events)
    expected = next(k for k in KINDS if k.name == kind).item_type
    assert [item["type"] for item in final["output"]] == [expected]


@pytest.mark.parametrize("kind", sorted(RELAYED))
def test_a_kind_s_item_relayed_from_a_responses_upstream_validates_against_both_specs(
    kind: str,
) -> None:
    relayed = RELAYED[kind]
    oracle = spec_oracle()

    oracle.check_output_item(relayed.added, f"{kind} as added")
    oracle.check_output_item(relayed.done, f"{kind} when done")
