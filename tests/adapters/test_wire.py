"""loads_json: upstream JSON decoded as ``json.loads`` decodes it, lone surrogates replaced;
the scanner fast path gives the same values and errors as the full parser. Break points: where a
model call broke (:func:`break_point`) and whether it is asked again unstreamed."""

from __future__ import annotations

import json

import httpx
import pytest

from responses_gateway.adapters.wire import (
    BreakPoint,
    NotAnAnswer,
    Streaming,
    UpstreamEndpoint,
    break_point,
    decide_after_break,
    is_data_chunk,
    loads_json,
    read_model_answer,
)
from responses_gateway.errors import (
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTransportError,
)


@pytest.mark.parametrize(
    "text",
    [
        '{"type":"response.output_text.delta","delta":" w001","logprobs":[]}',
        '{"a":[1,2.5,-0.0,1e-07,true,false,null],"b":{"c":"d"}}',
        '{"big":123456789012345678901234567890}',
        '{"a":1,"a":2}',
        '"just a string"',
        "[NaN, Infinity]",
        ' {"padded": true}\n',
        '{"emoji":"\\ud83d\\ude00","raw":"😀 ü"}',
    ],
)
def test_loads_json_equals_json_loads(text: str) -> None:
    assert repr(loads_json(text)) == repr(json.loads(text))


def test_loads_json_escaped_lone_surrogate_replaced() -> None:
    assert loads_json('{"a":"x\\ud83dy","b":["\\uDC00"]}') == {"a": "x\ufffdy", "b": ["\ufffd"]}


def test_loads_json_raw_lone_surrogate_replaced() -> None:
    assert loads_json('{"a":"é\ud800"}') == {"a": "é\ufffd"}


@pytest.mark.parametrize("text", ["", "{", '{"a":1} x', "\ufeff{}", "[1,]"])
def test_loads_json_invalid_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        loads_json(text)


# -- break points: where a model call broke, and whether it is asked again unstreamed ----------


def _choice(**fields: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "finish_reason": None, **fields}]}


@pytest.mark.parametrize(
    ("chunk", "data"),
    [
        (_choice(delta={"role": "assistant"}), False),
        (_choice(delta={"role": "assistant", "content": ""}), False),
        (_choice(delta={"content": None, "tool_calls": []}), False),
        (_choice(text=""), False),
        ({"choices": [], "usage": None}, False),
        ({"choices": ["junk"]}, False),
        ({"choices": 5}, False),
        ({}, False),
        (_choice(delta={"content": "Hi"}), True),
        (_choice(delta={"refusal": "No."}), True),
        (_choice(delta={"reasoning_content": "Hmm"}), True),
        (_choice(delta={"reasoning": "Hmm"}), True),
        (_choice(delta={"tool_calls": [{"index": 0, "function": {"name": "f"}}]}), True),
        (_choice(delta={"function_call": {"name": "f"}}), True),
        (_choice(text="Hi"), True),
        ({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}, True),
        ({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0}}, True),
    ],
)
def test_is_data_chunk_only_for_output_a_finish_or_usage(
    chunk: dict[str, object], data: bool
) -> None:
    assert is_data_chunk(chunk) is data


def _transport_error(cause: Exception) -> UpstreamTransportError:
    try:
        raise UpstreamTransportError("broke") from cause
    except UpstreamTransportError as error:
        return error


@pytest.mark.parametrize(
    ("error", "answered", "decoded", "point"),
    [
        (_transport_error(httpx.ConnectError("refused")), False, False, "unreached"),
        (_transport_error(httpx.ReadTimeout("slow")), False, False, "unreached"),
        (UpstreamStatusError(500, "down"), False, False, "unreached"),
        (_transport_error(httpx.RemoteProtocolError("no answer")), False, False, "before_data"),
        (_transport_error(httpx.ReadError("reset")), False, False, "before_data"),
        (_transport_error(httpx.RemoteProtocolError("cut")), True, False, "before_data"),
        (UpstreamProtocolError("not JSON"), True, False, "before_data"),
        (UpstreamStatusError(500, "error event"), True, False, "before_data"),
        (_transport_error(httpx.RemoteProtocolError("cut")), True, True, "after_data"),
    ],
    ids=[
        "refused",
        "timed-out-before-answer",
        "http-status",
        "closed-before-answer",
        "reset-before-answer",
        "cut-after-200",
        "undecodable-event",
        "error-event",
        "cut-after-data",
    ],
)  # fmt: skip
def test_break_point_names_where_the_call_broke(
    error: UpstreamError, answered: bool, decoded: bool, point: BreakPoint
) -> None:
    assert break_point(error, answered=answered, decoded=decoded) == point


@pytest.mark.parametrize(
    ("streaming", "point", "error", "retried"),
    [
        ("auto", "before_data", UpstreamProtocolError("bad event"), True),
        ("on", "before_data", UpstreamProtocolError("bad event"), False),
        ("auto", "after_data", UpstreamProtocolError("bad event"), False),
        ("auto", "unreached", UpstreamProtocolError("bad event"), False),
        ("auto", "before_data", NotAnAnswer("<html>"), False),
        ("auto", "before_data", UpstreamStatusError(429, "slow down"), False),
        ("auto", "before_data", _transport_error(httpx.ReadTimeout("slow")), False),
        ("auto", "before_data", _transport_error(httpx.RemoteProtocolError("cut")), True),
    ],
    ids=["auto", "on", "after-data", "unreached", "not-an-answer", "rate-limit", "timeout", "cut"],
)
def test_decide_after_break_retries_once_unstreamed_only_before_data_in_auto(
    streaming: Streaming, point: BreakPoint, error: UpstreamError, retried: bool
) -> None:
    assert decide_after_break(streaming, point, error) is retried


class _Lines:
    """A consumer that keeps every payload (decoded once one arrived)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @property
    def decoded(self) -> bool:
        return bool(self.seen)

    def feed(self, data: str, event: str = "message") -> bool:
        if data.startswith("{bad"):
            raise UpstreamProtocolError("The upstream model sent invalid JSON in its stream.")
        self.seen.append(data)
        return data == "[DONE]"


class _Out:
    def __init__(self) -> None:
        self.responding = 0

    def upstream_responding(self) -> None:
        self.responding += 1


def _answers(
    *responses: httpx.Response | httpx.TransportError,
) -> tuple[UpstreamEndpoint, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = queue.pop(0)
        if isinstance(answer, httpx.TransportError):
            raise answer
        return answer

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    return UpstreamEndpoint.at(client, "http://upstream/v1", "/x", None, None, None), seen


SSE = {"content-type": "text/event-stream"}


async def _read(endpoint: UpstreamEndpoint, streaming: Streaming) -> _Lines:
    lines = _Lines()
    await read_model_answer(
        endpoint,
        {"stream": True, "stream_options": {"include_usage": True}},
        lambda status, raw: UpstreamStatusError(status, raw),
        _Out(),  # type: ignore[arg-type]
        lines,
        as_events=lambda answer: [json.dumps(answer), "[DONE]"],
        streaming=streaming,
    )
    return lines


async def test_an_undecodable_first_event_is_asked_again_unstreamed_in_auto() -> None:
    endpoint, seen = _answers(
        httpx.Response(200, headers=SSE, content=b"data: {bad\n\n"),
        httpx.Response(200, json={"text": "hi"}),
    )

    lines = await _read(endpoint, "auto")

    assert lines.seen == ['{"text": "hi"}', "[DONE]"]
    assert [json.loads(r.content) for r in seen] == [
        {"stream": True, "stream_options": {"include_usage": True}},
        {"stream": False},
    ]


async def test_an_undecodable_first_event_is_the_error_when_streaming_is_on() -> None:
    endpoint, seen = _answers(httpx.Response(200, headers=SSE, content=b"data: {bad\n\n"))

    with pytest.raises(UpstreamProtocolError, match="invalid JSON in its stream"):
        await _read(endpoint, "on")
    assert len(seen) == 1


async def test_the_streams_failure_is_raised_when_the_retry_gets_no_answer_either() -> None:
    endpoint, seen = _answers(
        httpx.Response(200, headers=SSE, content=b"data: {bad\n\n"),
        httpx.Response(200, headers={"content-type": "application/json"}, content=b"<html>"),
    )

    with pytest.raises(UpstreamProtocolError, match="invalid JSON in its stream"):
        await _read(endpoint, "auto")
    assert len(seen) == 2


async def test_a_failure_after_data_events_is_never_asked_again() -> None:
    endpoint, seen = _answers(
        httpx.Response(200, headers=SSE, content=b"data: one\n\ndata: {bad\n\n"),
    )

    with pytest.raises(UpstreamProtocolError):
        await _read(endpoint, "auto")
    assert len(seen) == 1


CLOSED = httpx.RemoteProtocolError("Server disconnected without sending a response.")


async def test_the_retry_meeting_the_aborted_streams_closed_connection_is_sent_once_more() -> None:
    """llama-cpp-python ends an aborted stream and closes its connection, which the pool can
    hand to the unstreamed retry before the close reaches it: the retry goes once more."""
    endpoint, seen = _answers(
        httpx.Response(200, headers=SSE, content=b"data: {bad\n\n"),
        CLOSED,
        httpx.Response(200, json={"text": "hi"}),
    )

    lines = await _read(endpoint, "auto")

    assert lines.seen == ['{"text": "hi"}', "[DONE]"]
    assert [json.loads(r.content)["stream"] for r in seen] == [True, False, False]


async def test_an_unstreamed_call_meeting_a_closed_connection_is_not_sent_again() -> None:
    endpoint, seen = _answers(CLOSED, httpx.Response(200, json={"text": "hi"}))

    with pytest.raises(UpstreamTransportError, match="dropped the connection before answering"):
        await _read(endpoint, "off")
    assert len(seen) == 1
