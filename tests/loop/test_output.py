"""OutputWriter: items, parts and events come out in lifecycle order."""

from __future__ import annotations

from typing import Any

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
)
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState
from responses_gateway.tool_kinds import tool_view


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)


def _writer() -> tuple[LoopState, Recorder, OutputWriter]:
    state = LoopState(response_id="resp_1", created_at=1, model="m", request={}, upstream_input=[])
    sink = Recorder()
    return state, sink, OutputWriter(state, sink)


def test_message_text_then_finish_emits_full_lifecycle() -> None:
    state, sink, out = _writer()
    message = out.message(item_id="msg_1")
    message.text("Hel")
    message.text("")
    message.text("lo")
    message.finish()
    part = {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }
    assert state.output == [item]
    assert sink.events == [
        ItemStarted(
            0,
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            },
        ),
        PartStarted(0, "msg_1", 0, {**part, "text": ""}),
        TextDelta(0, "msg_1", 0, "output_text", "Hel"),
        TextDelta(0, "msg_1", 0, "output_text", "lo"),
        PartFinished(0, "msg_1", 0, part),
        ItemFinished(0, item),
    ]


def test_item_started_snapshot_does_not_change_when_text_arrives() -> None:
    _, sink, out = _writer()
    out.message(item_id="msg_1").text("later")
    started = sink.events[0]
    assert isinstance(started, ItemStarted)
    assert started.item["content"] == []


def test_reasoning_summary_parts_close_in_order_then_text() -> None:
    state, sink, out = _writer()
    reasoning = out.reasoning(item_id="rs_1")
    reasoning.summary("A", 0)
    reasoning.summary("B", 1)
    reasoning.text("raw")
    reasoning.set_encrypted_content("enc")
    reasoning.finish()
    assert state.output == [
        {
            "id": "rs_1",
            "type": "reasoning",
            "encrypted_content": "enc",
            "summary": [
                {"type": "summary_text", "text": "A"},
                {"type": "summary_text", "text": "B"},
            ],
            "content": [{"type": "reasoning_text", "text": "raw"}],
        }
    ]
    kinds = [(type(e).__name__, getattr(e, "content_index", None)) for e in sink.events]
    assert kinds == [
        ("ItemStarted", None),
        ("PartStarted", 0),
        ("TextDelta", 0),
        ("PartFinished", 0),
        ("PartStarted", 1),
        ("TextDelta", 1),
        ("PartFinished", 1),
        ("PartStarted", 0),
        ("TextDelta", 0),
        ("PartFinished", 0),
        ("ItemFinished", None),
    ]


def test_function_call_arguments_finish_before_item() -> None:
    state, sink, out = _writer()
    call = out.function_call(name="f", call_id="call_1", item_id="fc_1")
    call.arguments('{"a":')
    call.arguments("1}")
    call.finish()
    item: dict[str, Any] = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"a":1}',
        "call_id": "call_1",
        "name": "f",
    }
    assert state.output == [item]
    assert sink.events[1:] == [
        ArgumentsDelta(0, "fc_1", '{"a":'),
        ArgumentsDelta(0, "fc_1", "1}"),
        ArgumentsFinished(0, item),
        ItemFinished(0, item),
    ]


def test_close_open_marks_open_items_incomplete_in_index_order() -> None:
    state, sink, out = _writer()
    out.message(item_id="msg_1").text("cut")
    call = out.function_call(name="f", call_id="call_1", item_id="fc_1")
    out.close_open("incomplete")
    call.finish()  # already closed: no second ItemFinished
    assert [item["status"] for item in state.output] == ["incomplete", "incomplete"]
    finished = [e.output_index for e in sink.events if isinstance(e, ItemFinished)]
    assert finished == [0, 1]


def test_complete_function_call_assigns_gateway_ids() -> None:
    state, _, out = _writer()
    index = out.complete_function_call(name="f", arguments="{}")
    item = state.output[index]
    assert item["id"].startswith("fc_") and item["call_id"].startswith("call_")
    assert item["status"] == "completed" and item["arguments"] == "{}"


def test_message_refusal_opens_a_second_part_after_text() -> None:
    state, sink, out = _writer()
    message = out.message(item_id="msg_1")
    message.text("I")
    message.refusal("can't")
    message.text("ignored after refusal")
    message.finish()
    assert state.output[0]["content"] == [
        {"type": "output_text", "text": "I", "annotations": [], "logprobs": []},
        {"type": "refusal", "refusal": "can't"},
    ]
    parts = [(type(e).__name__, getattr(e, "content_index", None)) for e in sink.events]
    assert parts == [
        ("ItemStarted", None),
        ("PartStarted", 0),
        ("TextDelta", 0),
        ("PartFinished", 0),
        ("PartStarted", 1),
        ("TextDelta", 1),
        ("PartFinished", 1),
        ("ItemFinished", None),
    ]


def test_reasoning_text_after_summary_opens_a_new_content_part() -> None:
    state, sink, out = _writer()
    reasoning = out.reasoning(item_id="rs_1")
    reasoning.text("a")
    reasoning.summary("s")
    reasoning.text("b")
    reasoning.finish()
    assert state.output[0]["content"] == [
        {"type": "reasoning_text", "text": "a"},
        {"type": "reasoning_text", "text": "b"},
    ]
    deltas = [(e.content_index, e.delta) for e in sink.events if isinstance(e, TextDelta)]
    assert deltas == [(0, "a"), (0, "s"), (1, "b")]


def test_closed_writers_ignore_late_text_and_arguments() -> None:
    state, sink, out = _writer()
    message = out.message(item_id="msg_1")
    message.finish()
    message.text("late")
    call = out.function_call(name="", call_id="call_1", item_id="fc_1")
    call.set_name("f")
    call.finish()
    call.arguments("late")
    assert state.output[0]["content"][0]["text"] == ""
    assert state.output[1]["name"] == "f" and state.output[1]["arguments"] == ""
    assert not any(isinstance(e, (TextDelta, ArgumentsDelta)) for e in sink.events)


def _bound(
    tools: list[dict[str, Any]], backed: frozenset[str] = frozenset()
) -> tuple[LoopState, Recorder, OutputWriter]:
    state, sink, out = _writer()
    out.calls = tool_view(tools, [], "auto", "chat", backed=backed).calls
    return state, sink, out


def test_lowered_custom_call_becomes_a_custom_tool_call_with_its_input_events() -> None:
    state, sink, out = _bound([{"type": "custom", "name": "apply_patch"}])

    call = out.function_call(name="apply_patch", call_id="call_1")
    call.arguments('{"input": ')
    call.arguments('"PATCH"}')
    call.finish()

    item = state.output[0]
    assert item == {
        "id": item["id"],
        "call_id": "call_1",
        "type": "custom_tool_call",
        "input": "PATCH",
        "name": "apply_patch",
        "status": "completed",
    }
    where = {"item_id": item["id"], "output_index": 0}
    assert sink.events == [
        ItemStarted(0, {**item, "input": "", "status": "in_progress"}),
        ItemEvent("response.custom_tool_call_input.delta", {**where, "delta": "PATCH"}),
        ItemEvent("response.custom_tool_call_input.done", {**where, "input": "PATCH"}),
        ItemFinished(0, item),
    ]


def test_lowered_call_cut_off_is_reported_incomplete_when_the_writer_closes() -> None:
    state, _, out = _bound([{"type": "shell"}])

    out.function_call(name="shell", call_id="call_1").arguments('{"commands": ["ls"]}')
    out.close_open("incomplete")

    assert state.output[0]["type"] == "shell_call"
    assert state.output[0]["status"] == "incomplete"


def test_cut_off_apply_patch_call_takes_the_status_its_sdk_type_accepts() -> None:
    state, _, out = _bound([{"type": "apply_patch"}])

    out.function_call(name="apply_patch", call_id="call_1").arguments('{"type": "delete_fi')
    out.close_open("incomplete")

    assert state.output[0]["type"] == "apply_patch_call"
    assert state.output[0]["status"] == "in_progress"  # ResponseApplyPatchToolCall: no incomplete


def test_namespaced_function_call_streams_under_its_inner_name() -> None:
    namespace = {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]}
    state, sink, out = _bound([namespace])

    call = out.function_call(name="ns__f", call_id="call_1")
    call.arguments("{}")
    call.finish()

    assert (state.output[0]["name"], state.output[0]["namespace"]) == ("f", "ns")
    assert [type(e).__name__ for e in sink.events] == [
        "ItemStarted",
        "ArgumentsDelta",
        "ArgumentsFinished",
        "ItemFinished",
    ]


def test_every_call_is_given_its_owner_when_it_is_made() -> None:
    declared = [
        {"type": "function", "name": "f"},
        {"type": "tool_search"},
        {"type": "shell"},
        {"type": "web_search"},
    ]
    state, _, out = _bound(declared, backed=frozenset({"web_search"}))

    out.complete_function_call(name="f", arguments="{}")
    out.complete_function_call(name="tool_search", arguments='{"query": "q"}')
    out.complete_function_call(name="web_search", arguments='{"query": "q"}')
    out.complete_function_call(name="shell", arguments='{"commands": ["ls"]}')
    out.relay({"type": "web_search_call", "status": "in_progress"}).finish()
    out.open_mcp_call(server_label="calc", name="add", arguments="{}")
    out.message().finish()

    assert state.owners == {
        0: "client",
        1: "search",  # a server tool search: the gateway answers it
        2: "backend",
        3: "client",
        4: "upstream",  # relayed: the upstream's, left in_progress as it came
        5: "mcp",
    }
    assert state.output[4]["status"] == "in_progress"
    assert state.gateway_calls() == [1, 2, 5]


def test_a_lowered_gateway_call_cut_off_runs_nowhere() -> None:
    state, _, out = _bound([{"type": "web_search"}], backed=frozenset({"web_search"}))

    out.function_call(name="web_search", call_id="call_1").arguments('{"query": "q')
    out.close_open("incomplete")

    assert state.output[0]["status"] == "failed" and state.owners == {}
