"""The runtime's wire formats, byte for byte: the prelude, chunks and trailers, HTTP answers.

GIVEN the documented formats (API Gateway's streaming metadata, chunked transfer coding with
Lambda's error trailers, the Runtime API's HTTP/1.1 answers), THEN what the runtime writes and
reads is exactly them.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from responses_gateway.lambda_runtime.wire import (
    Answer,
    EventError,
    asgi_request,
    chunk,
    last_chunk,
    prelude,
    read_answer,
)


def test_the_prelude_groups_repeated_headers_and_cookies() -> None:
    raw = prelude(
        201,
        [
            (b"Content-Type", b"application/json"),
            (b"x-a", b"1"),
            (b"x-a", b"2"),
            (b"set-cookie", b"a=1"),
            (b"set-cookie", b"b=2"),
        ],
    )
    head, delimiter = raw[:-8], raw[-8:]
    assert delimiter == b"\x00" * 8 and b"\x00" not in head
    assert json.loads(head) == {
        "statusCode": 201,
        "headers": {"content-type": "application/json", "x-a": "2"},
        "multiValueHeaders": {"x-a": ["1", "2"]},
        "cookies": ["a=1", "b=2"],
    }


def test_a_header_with_a_nul_cannot_end_the_prelude_early() -> None:
    head = prelude(200, [(b"x-odd", b"a\x00b")])[:-8]
    assert b"\x00" not in head and json.loads(head)["headers"]["x-odd"] == "a\x00b"


def test_chunks_and_the_last_chunk() -> None:
    assert chunk(b"hello") == b"5\r\nhello\r\n"
    assert chunk(b"") == b""
    assert last_chunk() == b"0\r\n\r\n"
    ended = last_chunk(("Runtime.ValueError", "it broke")).decode()
    lines = ended.split("\r\n")
    assert lines[0] == "0" and lines[-2:] == ["", ""]
    assert lines[1] == "Lambda-Runtime-Function-Error-Type: Runtime.ValueError"
    name, _, body = lines[2].partition(": ")
    assert name == "Lambda-Runtime-Function-Error-Body"
    assert json.loads(base64.b64decode(body)) == {
        "errorType": "Runtime.ValueError",
        "errorMessage": "it broke",
        "stackTrace": [],
    }
    # a type that could break the trailer line is cleaned
    assert b"\r\nX: y" not in last_chunk(("Bad\r\nX: y", "m"))


async def _read(raw: bytes) -> Answer:
    reader = asyncio.StreamReader()
    reader.feed_data(raw)
    reader.feed_eof()
    return await read_answer(reader)


async def test_answers_by_length_chunked_and_empty() -> None:
    sized = await _read(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Id: 7\r\n\r\nhello")
    assert (sized.status, sized.body, sized.header("x-id")) == (200, b"hello", "7")
    chunked = await _read(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n"
    )
    assert chunked.body == b"abcde"
    empty = await _read(b"HTTP/1.1 202 Accepted\r\n\r\n")
    assert (empty.status, empty.body) == (202, b"")


async def test_a_cut_or_foreign_answer_is_a_connection_error() -> None:
    with pytest.raises(ConnectionError):
        await _read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort")
    with pytest.raises(ConnectionError):
        await _read(b"SSH-2.0-OpenSSH\r\n\r\n")
    with pytest.raises(ConnectionError):
        await _read(b"")


def test_an_event_without_method_or_path_is_refused() -> None:
    for event in ({}, {"httpMethod": "GET"}, {"httpMethod": "GET", "path": "relative"}, []):
        with pytest.raises(EventError):
            asgi_request(event, None)
    with pytest.raises(EventError):
        asgi_request(
            {"httpMethod": "POST", "path": "/", "body": "%%", "isBase64Encoded": True}, None
        )


def test_single_value_headers_and_query_are_read_when_multi_value_ones_are_absent() -> None:
    scope, body = asgi_request(
        {
            "httpMethod": "get",
            "path": "/v1/x",
            "headers": {"Host": "h", "X-Forwarded-Port": "8443", "X-Name": "café ☕"},
            "queryStringParameters": {"after": "a b"},
            "body": "é",
        },
        None,
    )
    assert scope["method"] == "GET" and scope["query_string"] == b"after=a%20b"
    assert scope["server"] == ("h", 8443) and scope["client"] is None
    assert (b"x-name", "café ☕".encode()) in scope["headers"]
    assert body == "é".encode()
    bad_port, _ = asgi_request(
        {"httpMethod": "GET", "path": "/", "headers": {"X-Forwarded-Port": "443, 80"}}, None
    )
    assert bad_port["server"] == ("lambda", 443)
