"""check_stream and parse_sse: one test per rule, each a stream that breaks only that rule."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from responses_gateway.testing.stream_check import StreamViolation, check_stream, parse_sse

Event = dict[str, Any]

MSG_OPEN = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "in_progress",
    "content": [],
}
PART_EMPTY = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
PART_HI = {**PART_EMPTY, "text": "Hi!"}
MSG_DONE = {**MSG_OPEN, "status": "completed", "content": [PART_HI]}
FC_OPEN = {
    "id": "fc_1",
    "type": "function_call",
    "status": "in_progress",
    "arguments": "",
    "call_id": "call_1",
    "name": "lookup",
}
FC_DONE = {**FC_OPEN, "status": "completed", "arguments": '{"q":1}'}
TEXT = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
CALL = {"item_id": "fc_1", "output_index": 1}


def _response(status: str, output: list[Event] | None = None, rid: str = "resp_1") -> Event:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "model": "m",
        "output": output or [],
        "parallel_tool_calls": True,
        "temperature": None,
        "tool_choice": "auto",
        "tools": [],
        "top_p": None,
        "usage": None,
    }


def _numbered(events: list[Event]) -> list[Event]:
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _good() -> list[Event]:
    """A text message then a function call, in the canonical order."""
    return _numbered(
        [
            {"type": "response.created", "response": _response("in_progress")},
            {"type": "response.in_progress", "response": _response("in_progress")},
            {"type": "response.output_item.added", "output_index": 0, "item": MSG_OPEN},
            {"type": "response.content_part.added", **TEXT, "part": PART_EMPTY},
            {"type": "response.output_text.delta", **TEXT, "delta": "Hi", "logprobs": []},
            {
                "type": "response.output_text.delta",
                **TEXT,
                "delta": "!",
                "logprobs": [],
                "obfuscation": "xYz",
            },
            {"type": "response.output_text.done", **TEXT, "text": "Hi!", "logprobs": []},
            {"type": "response.content_part.done", **TEXT, "part": PART_HI},
            {"type": "response.output_item.done", "output_index": 0, "item": MSG_DONE},
            {"type": "response.output_item.added", "output_index": 1, "item": FC_OPEN},
            {"type": "response.function_call_arguments.delta", **CALL, "delta": '{"q":1}'},
            {
                "type": "response.function_call_arguments.done",
                **CALL,
                "name": "lookup",
                "arguments": '{"q":1}',
            },
            {"type": "response.output_item.done", "output_index": 1, "item": FC_DONE},
            {"type": "response.completed", "response": _response("completed", [MSG_DONE, FC_DONE])},
        ]
    )


def _index(events: list[Event], event_type: str, nth: int = 0) -> int:
    return [i for i, e in enumerate(events) if e["type"] == event_type][nth]


def _rejects(events: list[Event], message: str) -> None:
    with pytest.raises(StreamViolation, match=message):
        check_stream(events)


def test_check_stream_canonical_stream_returns_terminal_response() -> None:
    events = _good()
    assert check_stream(events) == events[-1]["response"]


def test_check_stream_missing_created_rejects() -> None:
    _rejects(_numbered(_good()[1:]), "first event must be response.created")


def test_check_stream_empty_stream_rejects() -> None:
    _rejects([], "no events")


def test_check_stream_sequence_gap_rejects() -> None:
    events = _good()
    for event in events[5:]:
        event["sequence_number"] += 1
    _rejects(events, r"event 5 .*sequence_number is 6, expected 5")


def test_check_stream_delta_before_item_added_rejects() -> None:
    events = _good()
    added = events.pop(_index(events, "response.output_item.added", 1))
    events.insert(_index(events, "response.output_item.done", 0) + 2, added)
    _rejects(_numbered(events), "output_index 1 has no output_item.added before it")


def test_check_stream_text_delta_before_content_part_added_rejects() -> None:
    events = _good()
    del events[_index(events, "response.content_part.added")]
    _rejects(_numbered(events), "part 0 has no part added event before it")


def test_check_stream_duplicate_output_index_rejects() -> None:
    events = _good()
    events[_index(events, "response.output_item.added", 1)]["output_index"] = 0
    _rejects(events, "output_index 0 was already added")


def test_check_stream_missing_item_done_rejects() -> None:
    events = _good()
    del events[_index(events, "response.output_item.done", 1)]
    _rejects(_numbered(events), r"output indexes \[1\] were added but never marked done")


def test_check_stream_two_terminal_events_rejects() -> None:
    events = _good()
    events.append(copy.deepcopy(events[-1]))
    _rejects(_numbered(events), "after the terminal event response.completed")


def test_check_stream_event_after_terminal_rejects() -> None:
    events = _good()
    events.append({"type": "response.in_progress", "response": _response("in_progress")})
    _rejects(_numbered(events), "it must be the last")


def test_check_stream_no_terminal_event_rejects() -> None:
    _rejects(_good()[:-1], "without a terminal event")


def test_check_stream_completed_output_mismatch_rejects() -> None:
    events = _good()
    events[-1]["response"]["output"] = [MSG_DONE]
    _rejects(events, "response.output differs from the output_item.done items")


def test_check_stream_completed_with_empty_output_rejects() -> None:
    events = _good()
    events[-1]["response"]["output"] = []
    _rejects(events, "response.output differs")


def test_check_stream_response_id_change_rejects() -> None:
    events = _good()
    events[-1]["response"]["id"] = "resp_2"
    _rejects(events, "response id 'resp_2' differs from 'resp_1'")


def test_check_stream_done_item_id_change_rejects() -> None:
    events = _good()
    events[_index(events, "response.output_item.done")]["item"] = {**MSG_DONE, "id": "msg_2"}
    _rejects(events, "is not the one added")


def test_check_stream_item_id_of_content_event_mismatch_rejects() -> None:
    events = _good()
    events[_index(events, "response.output_text.delta")]["item_id"] = "msg_9"
    _rejects(events, "item_id 'msg_9' is not the id 'msg_1'")


def test_check_stream_text_done_differs_from_deltas_rejects() -> None:
    events = _good()
    events[_index(events, "response.output_text.done")]["text"] = "Hi?"
    _rejects(events, "text 'Hi\\?' != accumulated deltas 'Hi!'")


def test_check_stream_arguments_done_differs_from_deltas_rejects() -> None:
    events = _good()
    events[_index(events, "response.function_call_arguments.done")]["arguments"] = "{}"
    _rejects(events, "arguments '{}' != accumulated deltas")


def test_check_stream_done_item_name_differs_from_arguments_done_rejects() -> None:
    events = _good()
    done = events[_index(events, "response.output_item.done", 1)]
    done["item"] = {**FC_DONE, "name": "other"}
    events[-1]["response"]["output"][1] = done["item"]
    _rejects(events, "name 'other' != arguments.done name 'lookup'")


def test_check_stream_part_open_at_item_done_rejects() -> None:
    events = _good()
    del events[_index(events, "response.content_part.done")]
    _rejects(_numbered(events), r"content parts \[0\] are still open")


def test_check_stream_wrong_field_name_rejects() -> None:
    events = _good()
    done = events[_index(events, "response.output_text.done")]
    done["txt"] = done.pop("text")
    _rejects(events, "does not match the SDK's ResponseTextDoneEvent: text: Field required")


def test_check_stream_unknown_field_rejects() -> None:
    events = _good()
    events[_index(events, "response.content_part.added")]["delta"] = ""
    _rejects(events, r"fields unknown to the SDK's ResponseContentPartAddedEvent: \['delta'\]")


def test_check_stream_obfuscation_on_non_delta_rejects() -> None:
    events = _good()
    events[_index(events, "response.output_text.done")]["obfuscation"] = "abc"
    _rejects(events, r"unknown .*\['obfuscation'\]")


def test_check_stream_invalid_item_rejects_with_relevant_member_errors() -> None:
    events = _good()
    events[_index(events, "response.output_item.added", 1)]["item"] = {**FC_OPEN, "name": None}
    _rejects(events, r"item\.ResponseFunctionToolCall\.name: Input should be a valid string$")


def test_check_stream_arguments_done_without_name_rejects() -> None:
    events = _good()
    del events[_index(events, "response.function_call_arguments.done")]["name"]
    _rejects(events, r"missing fields the contract requires: \['name'\]")


def test_check_stream_unknown_event_type_rejects() -> None:
    events = _good()
    events.insert(2, {"type": "response.thinking"})
    _rejects(_numbered(events), "not an event type the openai SDK knows")


def test_check_stream_error_event_with_nested_error_accepts() -> None:
    events = _good()
    error = {"type": "server_error", "code": "server_error", "message": "x", "param": None}
    events.insert(-1, {"type": "error", "code": "server_error", "message": "x", "param": None})
    events[-2]["error"] = error
    check_stream(_numbered(events))


def test_check_stream_error_event_without_nested_error_rejects() -> None:
    events = _good()
    events.insert(-1, {"type": "error", "code": "server_error", "message": "x", "param": None})
    _rejects(_numbered(events), r"missing fields the contract requires: \['error'\]")


def test_check_stream_terminal_status_mismatch_rejects() -> None:
    events = _good()
    events[-1]["response"]["status"] = "incomplete"
    _rejects(events, "does not fit this terminal event")


def test_check_stream_cancelled_response_failed_accepts() -> None:
    events = _numbered(
        [
            {"type": "response.created", "response": _response("queued")},
            {"type": "response.queued", "response": _response("queued")},
            {"type": "response.failed", "response": _response("cancelled")},
        ]
    )
    assert check_stream(events)["status"] == "cancelled"


def _body(events: list[Event]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def test_parse_sse_canonical_body_returns_events() -> None:
    events = _good()
    body = ": keep-alive\n\n" + _body(events).replace("\n", "\r\n")
    assert parse_sse(body.encode()) == events


def test_parse_sse_event_name_differs_from_type_rejects() -> None:
    body = 'event: response.created\ndata: {"type":"response.in_progress"}\n\n'
    with pytest.raises(StreamViolation, match="event name 'response.created' != data.type"):
        parse_sse(body)


def test_parse_sse_done_sentinel_rejects() -> None:
    with pytest.raises(StreamViolation, match=r"no \[DONE\]"):
        parse_sse(_body(_good()) + "data: [DONE]\n\n")


def test_parse_sse_frame_without_event_line_rejects() -> None:
    with pytest.raises(StreamViolation, match="no event: line"):
        parse_sse('data: {"type":"response.created"}\n\n')


def test_parse_sse_data_not_json_rejects() -> None:
    with pytest.raises(StreamViolation, match="data is not JSON"):
        parse_sse("event: x\ndata: {oops\n\n")


CTC_OPEN = {
    "id": "ctc_1",
    "type": "custom_tool_call",
    "status": "in_progress",
    "call_id": "call_1",
    "name": "apply_patch",
    "input": "",
}
SH_OPEN = {
    "id": "sh_1",
    "type": "shell_call",
    "status": "in_progress",
    "call_id": "call_2",
    "action": {"commands": [], "timeout_ms": None, "max_output_length": None},
}
WS_OPEN = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "in_progress",
    "action": {"type": "search", "query": "q"},
}


def _tools_stream(
    custom_input: str = "PATCH", command: str = "ls", searched_item: str = "ws_1"
) -> list[Event]:
    ctc_done = {**CTC_OPEN, "status": "completed", "input": custom_input}
    action = {**SH_OPEN["action"], "commands": ["ls"]}
    sh_done = {**SH_OPEN, "status": "completed", "action": action}
    ws_done = {**WS_OPEN, "status": "completed"}
    ctc = {"item_id": "ctc_1", "output_index": 0}
    shell = {"command_index": 0, "output_index": 1}
    search = {"item_id": searched_item, "output_index": 2}
    return _numbered(
        [
            {"type": "response.created", "response": _response("in_progress")},
            {"type": "response.output_item.added", "output_index": 0, "item": CTC_OPEN},
            {"type": "response.custom_tool_call_input.delta", **ctc, "delta": "PAT"},
            {"type": "response.custom_tool_call_input.delta", **ctc, "delta": "CH"},
            {"type": "response.custom_tool_call_input.done", **ctc, "input": "PATCH"},
            {"type": "response.output_item.done", "output_index": 0, "item": ctc_done},
            {"type": "response.output_item.added", "output_index": 1, "item": SH_OPEN},
            {"type": "response.shell_call_command.added", **shell, "command": ""},
            {"type": "response.shell_call_command.delta", **shell, "delta": "ls"},
            {"type": "response.shell_call_command.done", **shell, "command": command},
            {"type": "response.output_item.done", "output_index": 1, "item": sh_done},
            {"type": "response.output_item.added", "output_index": 2, "item": WS_OPEN},
            {"type": "response.web_search_call.searching", **search},
            {"type": "response.output_item.done", "output_index": 2, "item": ws_done},
            {
                "type": "response.completed",
                "response": _response("completed", [ctc_done, sh_done, ws_done]),
            },
        ]
    )


def test_check_stream_tool_item_event_families_pass() -> None:
    assert check_stream(_tools_stream())["status"] == "completed"


def test_check_stream_custom_input_not_the_streamed_deltas_rejects() -> None:
    _rejects(_tools_stream(custom_input="OTHER"), "input 'OTHER' != streamed 'PATCH'")


def test_check_stream_shell_command_done_not_its_deltas_rejects() -> None:
    _rejects(_tools_stream(command="pwd"), "text 'pwd' != accumulated deltas 'ls'")


def test_check_stream_hosted_status_event_for_another_item_rejects() -> None:
    _rejects(_tools_stream(searched_item="ctc_1"), "is not the id 'ws_1' added at 2")
