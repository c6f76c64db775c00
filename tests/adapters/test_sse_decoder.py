"""SSEDecoder: framing edge cases, one per test; aiter_sse over real httpx responses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from responses_gateway.adapters.sse import ServerSentEvent, SSEDecoder, aiter_sse
from responses_gateway.errors import UpstreamTransportError


def _decode_all(*chunks: str) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.decode(chunk)]
    return events + decoder.flush()


def test_decode_lf_framing() -> None:
    assert _decode_all("data: a\n\ndata: b\n\n") == [
        ServerSentEvent("message", "a"),
        ServerSentEvent("message", "b"),
    ]


def test_decode_crlf_framing() -> None:
    assert _decode_all("event: x\r\ndata: a\r\n\r\n") == [ServerSentEvent("x", "a")]


def test_decode_cr_framing() -> None:
    assert _decode_all("data: a\r\rdata: b\r\r") == [
        ServerSentEvent("message", "a"),
        ServerSentEvent("message", "b"),
    ]


def test_decode_crlf_split_across_chunks() -> None:
    assert _decode_all("data: a\r", "\n\r", "\n") == [ServerSentEvent("message", "a")]


def test_decode_line_split_across_chunks() -> None:
    assert _decode_all('data: {"a"', ": 1}\n", "\n") == [ServerSentEvent("message", '{"a": 1}')]


def test_decode_multiline_data_joined_with_newline() -> None:
    assert _decode_all("data: a\ndata: b\n\n") == [ServerSentEvent("message", "a\nb")]


def test_decode_comments_and_unknown_fields_ignored() -> None:
    assert _decode_all(": keep-alive\nid: 7\nretry: 10\ndata: a\n\n") == [
        ServerSentEvent("message", "a")
    ]


def test_decode_no_space_after_colon() -> None:
    assert _decode_all("data:a\n\n") == [ServerSentEvent("message", "a")]


def test_flush_dispatches_last_event_without_blank_line() -> None:
    assert _decode_all("data: a\n\ndata: [DONE]") == [
        ServerSentEvent("message", "a"),
        ServerSentEvent("message", "[DONE]"),
    ]


def test_flush_on_empty_stream_yields_nothing() -> None:
    assert _decode_all("") == []


async def _collect(response: httpx.Response) -> list[ServerSentEvent]:
    return [event async for event in aiter_sse(response)]


async def test_aiter_sse_clean_eof_flushes_pending_event() -> None:
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, content=b"data: 1\n\ndata: 2")
    )
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", "http://upstream/") as response,
    ):
        assert await _collect(response) == [
            ServerSentEvent("message", "1"),
            ServerSentEvent("message", "2"),
        ]


class _Dropping(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        raise httpx.ReadError("connection reset")


async def test_aiter_sse_dropped_connection_raises_transport_error_after_events() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=_Dropping()))
    seen: list[ServerSentEvent] = []
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", "http://upstream/") as response,
    ):
        with pytest.raises(UpstreamTransportError):
            async for event in aiter_sse(response):
                seen.append(event)
    assert seen == [ServerSentEvent("message", "1")]
