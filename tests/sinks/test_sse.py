"""Golden SSE transcripts for SSESink; proof that the openai SDK's strict helper accepts them."""

from __future__ import annotations

import json
import re
import string
from typing import Any, cast

import httpx2
import openai
import pytest
from openai import omit
from openai._models import construct_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import ResponseStreamEvent

from responses_gateway.loop.events import (
    ArgumentsDelta,
    ArgumentsFinished,
    ItemFinished,
    ItemStarted,
    LoopEvent,
    PartFinished,
    PartStarted,
    ResponseFinished,
    ResponseStarted,
    TextDelta,
    UpstreamResponding,
)
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import LoopState
from responses_gateway.sinks import SSESink, encode_frame
from responses_gateway.testing.stream_check import check_stream, parse_sse

Frame = tuple[str, dict[str, Any]]

_FRAME = re.compile(r"event: ([^\n]+)\ndata: ([^\n]+)\n\n", re.DOTALL)

REQUEST: dict[str, Any] = {
    "instructions": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "temperature": None,
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
}


def _response(
    status: str, output: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        **REQUEST,
        "model": "m",
        "output": output or [],
        "usage": None,
    }
    response.update(extra)
    return response


class _Capture:
    """The ``write`` callable: keeps every frame exactly as written."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def __call__(self, frame: bytes) -> None:
        self.frames.append(frame)

    def parsed(self) -> list[Frame]:
        out: list[Frame] = []
        for frame in self.frames:
            match = _FRAME.fullmatch(frame.decode("utf-8"))
            assert match is not None, frame
            out.append((match.group(1), json.loads(match.group(2))))
        return out


def _run(events: list[LoopEvent], **options: Any) -> list[Frame]:
    capture = _Capture()
    sink = SSESink(capture, **options)
    for event in events:
        sink.emit(event)
    return capture.parsed()


def _f(seq: int, event_type: str, **fields: Any) -> Frame:
    return event_type, {"type": event_type, **fields, "sequence_number": seq}


def _data(frames: list[Frame]) -> list[dict[str, Any]]:
    return [data for _, data in frames]


# Items as the loop reports them.
MSG_OPEN = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "in_progress",
    "content": [],
}
TEXT_EMPTY = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
TEXT_HELLO = {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
MSG_DONE = {**MSG_OPEN, "status": "completed", "content": [TEXT_HELLO]}

START = _response("in_progress")
START_FRAMES = [
    _f(0, "response.created", response=START),
    _f(1, "response.in_progress", response=START),
]


def _function_call(n: int, arguments: str = "", status: str = "in_progress") -> dict[str, Any]:
    return {
        "id": f"fc_{n}",
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": f"call_{n}",
        "name": f"tool_{n}",
    }


def _mcp_call(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": "mcp_1",
        "type": "mcp_call",
        "server_label": "docs",
        "name": "search",
        "arguments": "",
        "output": None,
        "error": None,
        "approval_request_id": None,
        "status": "in_progress",
    }
    item.update(changes)
    return item


def _list_tools(**changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": "mcpl_1",
        "type": "mcp_list_tools",
        "server_label": "docs",
        "tools": [],
        "error": None,
    }
    item.update(changes)
    return item


def test_emit_text_message_writes_canonical_frames() -> None:
    final = _response("completed", [MSG_DONE])
    frames = _run(
        [
            ResponseStarted(START),
            UpstreamResponding(),
            ItemStarted(0, MSG_OPEN),
            PartStarted(0, "msg_1", 0, TEXT_EMPTY),
            TextDelta(0, "msg_1", 0, "output_text", "Hel"),
            TextDelta(0, "msg_1", 0, "output_text", "lo"),
            PartFinished(0, "msg_1", 0, TEXT_HELLO),
            ItemFinished(0, MSG_DONE),
            ResponseFinished(final),
        ]
    )
    ids = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    assert frames == [
        *START_FRAMES,
        _f(2, "response.output_item.added", output_index=0, item=MSG_OPEN),
        _f(3, "response.content_part.added", **ids, part=TEXT_EMPTY),
        _f(4, "response.output_text.delta", **ids, delta="Hel", logprobs=[]),
        _f(5, "response.output_text.delta", **ids, delta="lo", logprobs=[]),
        _f(6, "response.output_text.done", **ids, text="Hello", logprobs=[]),
        _f(7, "response.content_part.done", **ids, part=TEXT_HELLO),
        _f(8, "response.output_item.done", output_index=0, item=MSG_DONE),
        _f(9, "response.completed", response=final),
    ]
    assert check_stream(_data(frames)) == final


def test_emit_refusal_part_writes_refusal_events() -> None:
    empty = {"type": "refusal", "refusal": ""}
    full = {"type": "refusal", "refusal": "No."}
    done_item = {**MSG_OPEN, "status": "completed", "content": [full]}
    final = _response("completed", [done_item])
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, MSG_OPEN),
            PartStarted(0, "msg_1", 0, empty),
            TextDelta(0, "msg_1", 0, "refusal", "No."),
            PartFinished(0, "msg_1", 0, full),
            ItemFinished(0, done_item),
            ResponseFinished(final),
        ]
    )
    ids = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    assert frames[3:7] == [
        _f(3, "response.content_part.added", **ids, part=empty),
        _f(4, "response.refusal.delta", **ids, delta="No."),
        _f(5, "response.refusal.done", **ids, refusal="No."),
        _f(6, "response.content_part.done", **ids, part=full),
    ]
    check_stream(_data(frames))


def test_emit_reasoning_with_two_summaries_and_text_writes_summary_and_text_events() -> None:
    opened = {"id": "rs_1", "type": "reasoning", "summary": []}
    summary = [{"type": "summary_text", "text": "a"}, {"type": "summary_text", "text": "b"}]
    raw = {"type": "reasoning_text", "text": "raw"}
    done_item = {**opened, "summary": summary, "content": [raw]}
    final = _response("completed", [done_item])
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, opened),
            PartStarted(0, "rs_1", 0, {"type": "summary_text", "text": ""}),
            TextDelta(0, "rs_1", 0, "summary_text", "a"),
            PartFinished(0, "rs_1", 0, summary[0]),
            PartStarted(0, "rs_1", 1, {"type": "summary_text", "text": ""}),
            TextDelta(0, "rs_1", 1, "summary_text", "b"),
            PartFinished(0, "rs_1", 1, summary[1]),
            PartStarted(0, "rs_1", 0, {"type": "reasoning_text", "text": ""}),
            TextDelta(0, "rs_1", 0, "reasoning_text", "raw"),
            PartFinished(0, "rs_1", 0, raw),
            ItemFinished(0, done_item),
            ResponseFinished(final),
        ]
    )
    rs = {"item_id": "rs_1", "output_index": 0}
    empty_summary = {"type": "summary_text", "text": ""}
    assert frames == [
        *START_FRAMES,
        _f(2, "response.output_item.added", output_index=0, item=opened),
        _f(3, "response.reasoning_summary_part.added", **rs, summary_index=0, part=empty_summary),
        _f(4, "response.reasoning_summary_text.delta", **rs, summary_index=0, delta="a"),
        _f(5, "response.reasoning_summary_text.done", **rs, summary_index=0, text="a"),
        _f(6, "response.reasoning_summary_part.done", **rs, summary_index=0, part=summary[0]),
        _f(7, "response.reasoning_summary_part.added", **rs, summary_index=1, part=empty_summary),
        _f(8, "response.reasoning_summary_text.delta", **rs, summary_index=1, delta="b"),
        _f(9, "response.reasoning_summary_text.done", **rs, summary_index=1, text="b"),
        _f(10, "response.reasoning_summary_part.done", **rs, summary_index=1, part=summary[1]),
        _f(11, "response.content_part.added", **rs, content_index=0, part={**raw, "text": ""}),
        _f(12, "response.reasoning_text.delta", **rs, content_index=0, delta="raw"),
        _f(13, "response.reasoning_text.done", **rs, content_index=0, text="raw"),
        _f(14, "response.content_part.done", **rs, content_index=0, part=raw),
        _f(15, "response.output_item.done", output_index=0, item=done_item),
        _f(16, "response.completed", response=final),
    ]
    check_stream(_data(frames))


def test_emit_function_call_with_argument_deltas_writes_argument_events() -> None:
    done_item = _function_call(1, '{"city":"Paris"}', "completed")
    final = _response("completed", [done_item])
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, _function_call(1)),
            ArgumentsDelta(0, "fc_1", '{"city"'),
            ArgumentsDelta(0, "fc_1", ':"Paris"}'),
            ArgumentsFinished(0, done_item),
            ItemFinished(0, done_item),
            ResponseFinished(final),
        ]
    )
    fc = {"item_id": "fc_1", "output_index": 0}
    assert frames == [
        *START_FRAMES,
        _f(2, "response.output_item.added", output_index=0, item=_function_call(1)),
        _f(3, "response.function_call_arguments.delta", **fc, delta='{"city"'),
        _f(4, "response.function_call_arguments.delta", **fc, delta=':"Paris"}'),
        _f(
            5,
            "response.function_call_arguments.done",
            **fc,
            name="tool_1",
            arguments='{"city":"Paris"}',
        ),
        _f(6, "response.output_item.done", output_index=0, item=done_item),
        _f(7, "response.completed", response=final),
    ]
    check_stream(_data(frames))


def test_emit_two_parallel_calls_interleaved_keeps_each_call_at_its_index() -> None:
    first = _function_call(1, '{"a":1}', "completed")
    second = _function_call(2, '{"b":2}', "completed")
    final = _response("completed", [first, second])
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, _function_call(1)),
            ItemStarted(1, _function_call(2)),
            ArgumentsDelta(0, "fc_1", '{"a"'),
            ArgumentsDelta(1, "fc_2", '{"b"'),
            ArgumentsDelta(1, "fc_2", ":2}"),
            ArgumentsDelta(0, "fc_1", ":1}"),
            ArgumentsFinished(0, first),
            ItemFinished(0, first),
            ArgumentsFinished(1, second),
            ItemFinished(1, second),
            ResponseFinished(final),
        ]
    )
    delta = "response.function_call_arguments.delta"
    done = "response.function_call_arguments.done"
    assert frames == [
        *START_FRAMES,
        _f(2, "response.output_item.added", output_index=0, item=_function_call(1)),
        _f(3, "response.output_item.added", output_index=1, item=_function_call(2)),
        _f(4, delta, item_id="fc_1", output_index=0, delta='{"a"'),
        _f(5, delta, item_id="fc_2", output_index=1, delta='{"b"'),
        _f(6, delta, item_id="fc_2", output_index=1, delta=":2}"),
        _f(7, delta, item_id="fc_1", output_index=0, delta=":1}"),
        _f(8, done, item_id="fc_1", output_index=0, name="tool_1", arguments='{"a":1}'),
        _f(9, "response.output_item.done", output_index=0, item=first),
        _f(10, done, item_id="fc_2", output_index=1, name="tool_2", arguments='{"b":2}'),
        _f(11, "response.output_item.done", output_index=1, item=second),
        _f(12, "response.completed", response=final),
    ]
    check_stream(_data(frames))


@pytest.mark.parametrize(
    ("finished", "outcome_event"),
    [
        (_mcp_call(arguments='{"q":"x"}', output="found", status="completed"), "completed"),
        (
            _mcp_call(
                arguments='{"q":"x"}',
                error={"type": "mcp_protocol_error", "code": -32000, "message": "boom"},
                status="failed",
            ),
            "failed",
        ),
    ],
)
def test_emit_mcp_call_writes_progress_arguments_and_outcome(
    finished: dict[str, Any], outcome_event: str
) -> None:
    args_done = _mcp_call(arguments='{"q":"x"}')
    final = _response("completed", [finished])
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, _mcp_call()),
            ArgumentsDelta(0, "mcp_1", '{"q":"x"}'),
            ArgumentsFinished(0, args_done),
            ItemFinished(0, finished),
            ResponseFinished(final),
        ]
    )
    mcp = {"item_id": "mcp_1", "output_index": 0}
    assert frames == [
        *START_FRAMES,
        _f(2, "response.output_item.added", output_index=0, item=_mcp_call()),
        _f(3, "response.mcp_call.in_progress", **mcp),
        _f(4, "response.mcp_call_arguments.delta", **mcp, delta='{"q":"x"}'),
        _f(5, "response.mcp_call_arguments.done", **mcp, arguments='{"q":"x"}'),
        _f(6, f"response.mcp_call.{outcome_event}", **mcp),
        _f(7, "response.output_item.done", output_index=0, item=finished),
        _f(8, "response.completed", response=final),
    ]
    check_stream(_data(frames))


@pytest.mark.parametrize(
    ("finished", "outcome_event"),
    [
        (
            _list_tools(tools=[{"name": "search", "input_schema": {"type": "object"}}]),
            "completed",
        ),
        (_list_tools(error="connection refused"), "failed"),
    ],
)
def test_emit_mcp_list_tools_writes_progress_and_outcome(
    finished: dict[str, Any], outcome_event: str
) -> None:
    final = _response("completed", [finished])
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, _list_tools()),
            ItemFinished(0, finished),
            ResponseFinished(final),
        ]
    )
    mcpl = {"item_id": "mcpl_1", "output_index": 0}
    assert frames == [
        *START_FRAMES,
        _f(2, "response.output_item.added", output_index=0, item=_list_tools()),
        _f(3, "response.mcp_list_tools.in_progress", **mcpl),
        _f(4, f"response.mcp_list_tools.{outcome_event}", **mcpl),
        _f(5, "response.output_item.done", output_index=0, item=finished),
        _f(6, "response.completed", response=final),
    ]
    check_stream(_data(frames))


def test_emit_incomplete_with_open_message_closes_it_then_writes_incomplete() -> None:
    hi = {**TEXT_EMPTY, "text": "Hi"}
    closed = {**MSG_OPEN, "status": "incomplete", "content": [hi]}
    final = _response("incomplete", [closed], incomplete_details={"reason": "max_output_tokens"})
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, MSG_OPEN),
            PartStarted(0, "msg_1", 0, TEXT_EMPTY),
            TextDelta(0, "msg_1", 0, "output_text", "Hi"),
            PartFinished(0, "msg_1", 0, hi),
            ItemFinished(0, closed),
            ResponseFinished(final),
        ]
    )
    ids = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    assert frames == [
        *START_FRAMES,
        _f(2, "response.output_item.added", output_index=0, item=MSG_OPEN),
        _f(3, "response.content_part.added", **ids, part=TEXT_EMPTY),
        _f(4, "response.output_text.delta", **ids, delta="Hi", logprobs=[]),
        _f(5, "response.output_text.done", **ids, text="Hi", logprobs=[]),
        _f(6, "response.content_part.done", **ids, part=hi),
        _f(7, "response.output_item.done", output_index=0, item=closed),
        _f(8, "response.incomplete", response=final),
    ]
    assert check_stream(_data(frames))["incomplete_details"] == {"reason": "max_output_tokens"}


def test_emit_failed_response_writes_response_failed() -> None:
    final = _response("failed", error={"code": "server_error", "message": "upstream down"})
    frames = _run([ResponseStarted(START), ResponseFinished(final)])
    assert frames == [*START_FRAMES, _f(2, "response.failed", response=final)]
    check_stream(_data(frames))


@pytest.mark.parametrize(
    ("status", "event_type"),
    [
        ("completed", "response.completed"),
        ("incomplete", "response.incomplete"),
        ("failed", "response.failed"),
        ("cancelled", "response.failed"),
    ],
)
def test_emit_response_finished_by_status_writes_its_terminal_event(
    status: str, event_type: str
) -> None:
    final = _response(status)
    frames = _run([ResponseStarted(START), ResponseFinished(final)])
    assert frames[-1] == _f(2, event_type, response=final)
    check_stream(_data(frames))


def test_emit_queued_start_writes_created_then_queued_then_in_progress() -> None:
    queued = _response("queued", background=True)
    running = _response("in_progress", background=True)
    frames = _run([ResponseStarted(queued), ResponseStarted(running)])
    assert frames == [
        _f(0, "response.created", response=queued),
        _f(1, "response.queued", response=queued),
        _f(2, "response.in_progress", response=running),
    ]


def test_emit_with_first_sequence_number_continues_without_created() -> None:
    frames = _run([ResponseStarted(START), ItemStarted(0, MSG_OPEN)], first_sequence_number=2)
    assert frames == [
        _f(2, "response.in_progress", response=START),
        _f(3, "response.output_item.added", output_index=0, item=MSG_OPEN),
    ]


def test_emit_frame_bytes_are_compact_utf8_json() -> None:
    capture = _Capture()
    SSESink(capture).emit(TextDelta(0, "msg_1", 0, "output_text", "é\n"))
    assert capture.frames == [
        b"event: response.output_text.delta\n"
        b'data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,'
        b'"content_index":0,"delta":"\xc3\xa9\\n","logprobs":[],"sequence_number":0}\n\n'
    ]


def test_encode_frame_given_data_returns_one_sse_frame() -> None:
    frame = encode_frame("error", {"type": "error", "message": "ü", "sequence_number": 3})
    assert (
        frame
        == b'event: error\ndata: {"type":"error","message":"\xc3\xbc","sequence_number":3}\n\n'
    )


_DELTAS: list[LoopEvent] = [
    TextDelta(0, "msg_1", 0, "output_text", "abc"),
    TextDelta(0, "msg_1", 0, "refusal", "abc"),
    TextDelta(0, "rs_1", 0, "reasoning_text", "abc"),
    TextDelta(0, "rs_1", 0, "summary_text", "abc"),
    ArgumentsDelta(0, "fc_1", "abc"),
]


@pytest.mark.parametrize("event", _DELTAS, ids=lambda e: getattr(e, "part_type", "arguments"))
def test_emit_delta_with_obfuscation_adds_random_padding(event: LoopEvent) -> None:
    (frame,) = _run([event], include_obfuscation=True)
    padding = frame[1]["obfuscation"]
    assert padding and set(padding) <= set(string.ascii_letters + string.digits)
    (plain,) = _run([event])
    assert "obfuscation" not in plain[1]
    assert {k: v for k, v in frame[1].items() if k != "obfuscation"} == plain[1]


def test_emit_mcp_arguments_delta_with_obfuscation_adds_padding() -> None:
    frames = _run(
        [ItemStarted(0, _mcp_call()), ArgumentsDelta(0, "mcp_1", "{}")], include_obfuscation=True
    )
    assert frames[2][0] == "response.mcp_call_arguments.delta"
    assert frames[2][1]["obfuscation"]


def test_emit_obfuscated_deltas_padded_size_hides_length_within_a_block() -> None:
    sizes: dict[int, set[int]] = {}
    for length in range(1, 16):
        for _ in range(40):
            (frame,) = _run([ArgumentsDelta(0, "fc_1", "x" * length)], include_obfuscation=True)
            total = length + len(frame[1]["obfuscation"])
            sizes.setdefault(length, set()).add(total)
    assert all(16 <= total < 32 for totals in sizes.values() for total in totals)
    assert all(len(totals) > 1 for totals in sizes.values())


def test_emit_non_delta_events_with_obfuscation_carry_no_padding() -> None:
    final = _response("completed", [MSG_DONE])
    frames = _run(
        [
            ResponseStarted(START),
            ItemStarted(0, MSG_OPEN),
            PartStarted(0, "msg_1", 0, TEXT_EMPTY),
            PartFinished(0, "msg_1", 0, TEXT_HELLO),
            ItemFinished(0, MSG_DONE),
            ResponseFinished(final),
        ],
        include_obfuscation=True,
    )
    assert all("obfuscation" not in data for _, data in frames)


def test_emit_after_terminal_event_writes_nothing() -> None:
    capture = _Capture()
    sink = SSESink(capture)
    sink.emit(ResponseStarted(START))
    sink.emit(ResponseFinished(_response("completed")))
    written = list(capture.frames)
    sink.emit(ItemStarted(0, MSG_OPEN))
    sink.emit(ResponseFinished(_response("completed")))
    assert capture.frames == written
    assert sink.closed
    assert sink.sequence_number == 3


def test_emit_after_close_writes_nothing() -> None:
    capture = _Capture()
    sink = SSESink(capture)
    sink.emit(ResponseStarted(START))
    sink.close()
    sink.emit(ItemStarted(0, MSG_OPEN))
    sink.emit(ResponseFinished(_response("completed")))
    assert len(capture.frames) == 2
    assert sink.sequence_number == 2


def test_emit_write_raises_oserror_closes_sink_without_raising() -> None:
    calls: list[bytes] = []

    def write(frame: bytes) -> None:
        calls.append(frame)
        raise BrokenPipeError

    sink = SSESink(write)
    sink.emit(ResponseStarted(START))
    sink.emit(ItemStarted(0, MSG_OPEN))
    assert len(calls) == 1
    assert sink.closed
    assert sink.sequence_number == 0


# --- The real output writer and render step, checked by the validator and by the SDK. ---


def _state() -> LoopState:
    return LoopState("resp_1", 1700000000, "m", dict(REQUEST), [])


def _drive(sink: SSESink, *, stop: str = "completed") -> LoopState:
    """One model call that reasons, talks, refuses and calls two tools, streamed through ``sink``.

    It covers the writer's paths: reasoning text reopened after a summary, a refusal part after
    the text part, interleaved parallel calls, and a call named only when it ends.
    """
    state = _state()
    sink.emit(ResponseStarted(render_response(state)))
    writer = OutputWriter(state, sink)
    writer.upstream_responding()
    reasoning = writer.reasoning()
    reasoning.summary("Plan ", 0)
    reasoning.summary("it.", 0)
    reasoning.text("raw thoughts")
    reasoning.summary("Then act.", 1)
    reasoning.text("more thoughts")
    message = writer.message()
    message.text("Hello")
    message.text(", wörld")
    message.refusal("But not that.")
    first = writer.function_call(name="lookup", call_id="call_a")
    second = writer.function_call(name="", call_id="call_b")
    first.arguments('{"q":')
    second.arguments('{"q":"b"}')
    first.arguments('"a"}')
    second.set_name("lookup")
    state.add_usage({"input_tokens": 3, "output_tokens": 4, "total_tokens": 7})
    if stop == "completed":
        writer.close_open("completed")
        state.status = "completed"
        state.completed_at = 1700000001
    else:
        writer.close_open("incomplete")
        state.status = "incomplete"
        state.incomplete_reason = "max_output_tokens"
    sink.emit(ResponseFinished(render_response(state)))
    return state


@pytest.mark.parametrize("obfuscation", [False, True])
def test_emit_output_writer_stream_passes_check_stream(obfuscation: bool) -> None:
    body = bytearray()
    state = _drive(SSESink(body.extend, include_obfuscation=obfuscation))
    events = parse_sse(bytes(body))
    final = check_stream(events)
    assert final == render_response(state)
    assert final["usage"]["total_tokens"] == 7
    reasoning, message = final["output"][:2]
    assert [p["type"] for p in reasoning["content"]] == ["reasoning_text", "reasoning_text"]
    assert [p["type"] for p in message["content"]] == ["output_text", "refusal"]
    assert [item["type"] for item in final["output"]] == [
        "reasoning",
        "message",
        "function_call",
        "function_call",
    ]


def test_emit_output_writer_incomplete_stream_passes_check_stream() -> None:
    body = bytearray()
    _drive(SSESink(body.extend), stop="incomplete")
    final = check_stream(parse_sse(bytes(body)))
    assert final["status"] == "incomplete"
    assert {item.get("status") for item in final["output"]} == {"incomplete"}


def test_emit_output_writer_failed_response_passes_check_stream() -> None:
    body = bytearray()
    sink = SSESink(body.extend)
    state = _state()
    sink.emit(ResponseStarted(render_response(state)))
    writer = OutputWriter(state, sink)
    writer.message().text("partial")
    writer.close_open("incomplete")
    state.status = "failed"
    state.error = {"code": "server_error", "message": "upstream dropped the stream"}
    sink.emit(ResponseFinished(render_response(state)))
    final = check_stream(parse_sse(bytes(body)))
    assert final["error"]["code"] == "server_error"
    assert final["output"][0]["status"] == "incomplete"


def test_emit_output_writer_stream_sdk_stream_state_accepts_it() -> None:
    body = bytearray()
    _drive(SSESink(body.extend, include_obfuscation=True))
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    for data in parse_sse(bytes(body)):
        event = cast(Any, construct_type(type_=cast(Any, ResponseStreamEvent), value=data))
        state.handle_event(event)
    completed = state._completed_response
    assert completed is not None
    assert completed.id == "resp_1"
    assert completed.output_text == "Hello, wörld"
    calls = [item for item in completed.output if item.type == "function_call"]
    assert [(c.call_id, c.arguments) for c in calls] == [
        ("call_a", '{"q":"a"}'),
        ("call_b", '{"q":"b"}'),
    ]


def test_emit_output_writer_stream_sdk_stream_helper_returns_final_response() -> None:
    body = bytearray()
    _drive(SSESink(body.extend, include_obfuscation=True))

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=bytes(body)
        )

    client = openai.OpenAI(
        api_key="test",
        base_url="http://gateway.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    with client.responses.stream(model="m", input="hi") as stream:
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    assert seen[0] == "response.created" and seen[-1] == "response.completed"
    assert final.output_text == "Hello, wörld"
    assert final.status == "completed"


_TRICKY = ["plain", 'quo"te \\ back', "new\nline\ttab\x01\x1f", "ünï 😀 \u2028", ""]


def _delta_dicts(event: LoopEvent, delta: str) -> tuple[str, dict[str, Any]]:
    """The frame a delta event must become, built as a dict (the generic path)."""
    if isinstance(event, ArgumentsDelta):
        name = "response.function_call_arguments.delta"
        return name, {"type": name, "item_id": event.item_id, "output_index": 0, "delta": delta}
    assert isinstance(event, TextDelta)
    if event.part_type == "summary_text":
        name = "response.reasoning_summary_text.delta"
        index = "summary_index"
    else:
        name = {
            "output_text": "response.output_text.delta",
            "refusal": "response.refusal.delta",
            "reasoning_text": "response.reasoning_text.delta",
        }[event.part_type]
        index = "content_index"
    data = {"type": name, "item_id": event.item_id, "output_index": 0, index: 2, "delta": delta}
    if event.part_type == "output_text":
        data["logprobs"] = []
    return name, data


@pytest.mark.parametrize(
    "event",
    [
        TextDelta(0, "msg_1", 2, "output_text", ""),
        TextDelta(0, "msg_1", 2, "refusal", ""),
        TextDelta(0, "rs_1", 2, "reasoning_text", ""),
        TextDelta(0, "rs_1", 2, "summary_text", ""),
        ArgumentsDelta(0, "fc_1", ""),
    ],
    ids=lambda e: getattr(e, "part_type", "arguments"),
)
def test_emit_delta_frames_are_the_bytes_of_their_dicts(event: LoopEvent) -> None:
    capture = _Capture()
    sink = SSESink(capture)
    expected = []
    for seq, delta in enumerate(_TRICKY):
        changed = type(event)(*[delta if v == "" else v for v in _fields(event)])
        sink.emit(changed)
        name, data = _delta_dicts(event, delta)
        expected.append(encode_frame(name, {**data, "sequence_number": seq}))
    assert capture.frames == expected


def _fields(event: LoopEvent) -> list[Any]:
    if isinstance(event, ArgumentsDelta):
        return [event.output_index, event.item_id, event.delta]
    assert isinstance(event, TextDelta)
    return [event.output_index, event.item_id, event.content_index, event.part_type, event.delta]


def test_emit_deltas_of_another_part_carry_that_parts_fields() -> None:
    frames = _run(
        [
            TextDelta(0, "msg_1", 0, "output_text", "a"),
            TextDelta(1, "msg_2", 0, "output_text", "b"),
            TextDelta(1, "msg_2", 1, "refusal", "c"),
            TextDelta(0, "msg_1", 0, "output_text", "d"),
        ]
    )
    assert [
        (d["item_id"], d["output_index"], d["content_index"], d["delta"]) for _, d in frames
    ] == [
        ("msg_1", 0, 0, "a"),
        ("msg_2", 1, 0, "b"),
        ("msg_2", 1, 1, "c"),
        ("msg_1", 0, 0, "d"),
    ]
    assert [name for name, _ in frames][2] == "response.refusal.delta"


def test_emit_obfuscated_deltas_draw_randomness_a_pool_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import responses_gateway.sinks.sse as sse

    draws: list[int] = []
    real = sse.os.urandom

    def counted(size: int) -> bytes:
        draws.append(size)
        return real(size)

    monkeypatch.setattr(sse.os, "urandom", counted)
    frames = _run(
        [TextDelta(0, "msg_1", 0, "output_text", "x" * (i % 20)) for i in range(100)],
        include_obfuscation=True,
    )
    paddings = [data["obfuscation"] for _, data in frames]
    assert len(paddings) == 100 and all(set(p) <= set(string.hexdigits) for p in paddings)
    assert len(draws) <= 5  # at most 17 random bytes a delta, 512 drawn at a time
    assert len(set(paddings)) > 90
