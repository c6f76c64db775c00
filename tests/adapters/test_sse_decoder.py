"""SSEDecoder: framing edge cases, one per test, on text and on bytes; aiter_sse over real httpx
responses (content codings, charsets, a body trickled a byte at a time)."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from responses_gateway.adapters.sse import FLOW_GATE, ServerSentEvent, SSEDecoder, aiter_sse
from responses_gateway.errors import UpstreamProtocolError, UpstreamTransportError


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


def test_decode_bytes_character_split_across_chunks() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"data: caf\xc3") == []
    assert decoder.decode(b"\xa9\n\n") == [ServerSentEvent("message", "café")]


def test_decode_bytes_undecodable_become_replacement_characters() -> None:
    decoder = SSEDecoder()
    assert decoder.decode(b"event: \xffx\ndata: a\xfe\n\n") == [
        ServerSentEvent("\ufffdx", "a\ufffd")
    ]


def test_decode_bytes_in_the_declared_encoding() -> None:
    decoder = SSEDecoder(encoding="iso-8859-1")
    assert decoder.decode(b"data: caf\xe9\n\n") == [ServerSentEvent("message", "café")]


def test_decode_field_without_colon_is_an_empty_value() -> None:
    assert _decode_all("data\ndata\n\n") == [ServerSentEvent("message", "\n")]


def test_decode_event_over_the_cap_raises() -> None:
    decoder = SSEDecoder(max_event_chars=8)
    decoder.decode(b"data: 12345\n")
    with pytest.raises(UpstreamProtocolError, match="larger than 8 bytes"):
        decoder.decode(b"data: 6789\n")


def _sse_response(body: bytes, **headers: str) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(200, content=body, headers=headers))


async def _events(transport: httpx.MockTransport) -> list[ServerSentEvent]:
    async with (
        httpx.AsyncClient(transport=transport) as client,
        client.stream("GET", "http://upstream/") as response,
    ):
        return await _collect(response)


async def test_aiter_sse_undoes_the_content_coding() -> None:
    body = gzip.compress("event: x\ndata: héllo\n\n".encode())
    transport = _sse_response(body, **{"content-encoding": "gzip"})
    assert await _events(transport) == [ServerSentEvent("x", "héllo")]


async def test_aiter_sse_decodes_with_the_response_charset() -> None:
    transport = _sse_response(
        b"data: caf\xe9\n\n", **{"content-type": "text/event-stream; charset=iso-8859-1"}
    )
    assert await _events(transport) == [ServerSentEvent("message", "café")]


class _Trickle(httpx.AsyncByteStream):
    """A body sent a byte at a time (every multi-byte character split)."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for byte in "data: ünï\r\n\r\ndata: b\r\n\r\n".encode():
            yield bytes([byte])


async def test_aiter_sse_body_trickled_a_byte_at_a_time() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=_Trickle()))
    assert await _events(transport) == [
        ServerSentEvent("message", "ünï"),
        ServerSentEvent("message", "b"),
    ]


async def test_aiter_sse_flow_gate_waits_only_when_it_returns_an_awaitable() -> None:
    calls: list[str] = []
    behind = [False, True, False]

    async def room() -> None:
        calls.append("waited")

    def gate() -> Any:
        calls.append("asked")
        return room() if behind.pop(0) else None

    body = [b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"]
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=_Chunks(body)))
    token = FLOW_GATE.set(gate)
    try:
        events = await _events(transport)
    finally:
        FLOW_GATE.reset(token)
    assert [e.data for e in events] == ["1", "2", "3"]
    assert calls == ["asked", "asked", "waited", "asked"]


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk
