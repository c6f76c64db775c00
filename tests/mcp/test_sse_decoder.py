"""SseDecoder: the event-stream framing rules, one per test, fed as bytes in awkward chunks."""

from __future__ import annotations

import pytest

from responses_gateway.mcp.rpc import McpTransportError
from responses_gateway.mcp.sse_decoder import SseDecoder, SseEvent


def decode(*chunks: bytes, limit: int = 1024) -> tuple[list[SseEvent], SseDecoder]:
    decoder = SseDecoder(limit)
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events + decoder.end(), decoder


def test_unnamed_event_is_a_message() -> None:
    events, _ = decode(b'data: {"a":1}\n\n')
    assert events == [SseEvent("message", '{"a":1}')]


def test_named_event_and_multi_line_data() -> None:
    events, _ = decode(b"event: endpoint\ndata: /messages/?session_id=1\n\ndata: a\ndata: b\n\n")
    assert events == [SseEvent("endpoint", "/messages/?session_id=1"), SseEvent("message", "a\nb")]


@pytest.mark.parametrize("end", [b"\n", b"\r", b"\r\n"])
def test_every_line_end(end: bytes) -> None:
    events, _ = decode(b"event: message" + end + b"data: x" + end + end)
    assert events == [SseEvent("message", "x")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    events, _ = decode(b"data: x\r", b"\n\r", b"\ndata: y\r\n\r\n")
    assert events == [SseEvent("message", "x"), SseEvent("message", "y")]


def test_one_byte_at_a_time() -> None:
    stream = b'event: message\r\ndata: {"jsonrpc":"2.0"}\r\n\r\n'
    events, _ = decode(*(stream[i : i + 1] for i in range(len(stream))))
    assert events == [SseEvent("message", '{"jsonrpc":"2.0"}')]


def test_comments_and_unknown_fields_are_ignored() -> None:
    events, _ = decode(b": keep-alive\nfoo: bar\ndata: x\n\n")
    assert events == [SseEvent("message", "x")]


def test_an_event_without_data_is_not_dispatched_but_its_id_is_kept() -> None:
    events, decoder = decode(b"id: 7\nretry: 250\n\nid: 8\n\n")
    assert events == []  # priming events: an id to resume from, no data
    assert (decoder.last_event_id, decoder.retry_ms) == ("8", 250)


def test_a_bare_data_field_is_an_event_with_empty_data() -> None:
    events, _ = decode(b"data\n\n")
    assert events == [SseEvent("message", "")]


def test_id_with_nul_and_non_numeric_retry_are_ignored() -> None:
    _, decoder = decode(b"id: 1\n\nid: a\x00b\nretry: 1.5\nretry: \xc2\xb2\n\n")
    assert (decoder.last_event_id, decoder.retry_ms) == ("1", None)


def test_a_last_event_without_its_blank_line_is_dispatched_at_the_end() -> None:
    events, _ = decode(b"data: last")
    assert events == [SseEvent("message", "last")]


def test_a_leading_bom_is_dropped_and_bad_utf8_replaced() -> None:
    events, _ = decode(b"\xef\xbb\xbfdata: caf\xc3\xa9 \xff\n\n")
    assert events == [SseEvent("message", "café \ufffd")]


def test_a_line_over_the_limit_fails() -> None:
    decoder = SseDecoder(16)
    with pytest.raises(McpTransportError, match="size limit"):
        decoder.feed(b"data: " + b"x" * 20)


def test_data_lines_over_the_limit_together_fail() -> None:
    decoder = SseDecoder(16)
    with pytest.raises(McpTransportError):
        decoder.feed(b"data: 12345678\ndata: 12345678\n")
