"""The bytes of the streaming function's invocations, as pure functions.

Owns four translations, each documented by AWS:

- an API Gateway REST (v1 proxy) event as an ASGI HTTP scope and its body (:func:`asgi_request`);
  the event itself stays in ``scope["aws.event"]`` and the invocation's context in
  ``scope["aws.context"]``, where the app reads the tenant and the deadline (as under Mangum);
- the answer's head as the metadata prelude of API Gateway's streaming integration
  (:func:`prelude`: ``{"statusCode", "headers", "multiValueHeaders", "cookies"}``, then eight NUL
  bytes, then the payload as it comes);
- chunked transfer coding, with the trailers Lambda reads an error after the first byte from
  (:func:`chunk`, :func:`last_chunk`);
- an HTTP/1.1 answer read from a stream (:func:`read_answer`: the Runtime API's).

Must not do I/O of its own (the reader it is given aside) or know about the app.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

__all__ = [
    "DELIMITER",
    "ERROR_BODY_TRAILER",
    "ERROR_TYPE_TRAILER",
    "PRELUDE_CONTENT_TYPE",
    "Answer",
    "EventError",
    "asgi_request",
    "chunk",
    "error_payload",
    "last_chunk",
    "prelude",
    "read_answer",
    "request_head",
]

DELIMITER = b"\x00" * 8
"""What separates the metadata prelude from the payload."""
PRELUDE_CONTENT_TYPE = "application/vnd.awslambda.http-integration-response"
"""The content type of a streamed answer that starts with a metadata prelude."""
ERROR_TYPE_TRAILER = "Lambda-Runtime-Function-Error-Type"
ERROR_BODY_TRAILER = "Lambda-Runtime-Function-Error-Body"

_MAX_HEAD = 64 * 1024
"""Longest status line plus headers read from the Runtime API."""


class EventError(ValueError):
    """The invocation's event is not an API Gateway REST proxy event."""


def _octets(text: Any) -> bytes:
    """A header name or value as ASGI bytes (latin-1, as HTTP/1.1 carries them; UTF-8 for a
    value API Gateway decoded beyond it)."""
    value = str(text)
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def _header_pairs(event: Mapping[str, Any]) -> list[tuple[bytes, bytes]]:
    multi = event.get("multiValueHeaders")
    single = event.get("headers")
    pairs: list[tuple[bytes, bytes]] = []
    if isinstance(multi, Mapping) and multi:
        for name, values in multi.items():
            for value in values if isinstance(values, list) else [values]:
                pairs.append((_octets(name).lower(), _octets(value)))
    elif isinstance(single, Mapping):
        for name, value in single.items():
            pairs.append((_octets(name).lower(), _octets(value)))
    return pairs


def _query(event: Mapping[str, Any]) -> bytes:
    multi = event.get("multiValueQueryStringParameters")
    single = event.get("queryStringParameters")
    if isinstance(multi, Mapping) and multi:
        items = [(k, v) for k, values in multi.items() for v in values]
    elif isinstance(single, Mapping) and single:
        items = list(single.items())
    else:
        return b""
    return urlencode(items, quote_via=quote).encode("ascii")


def asgi_request(event: Any, context: Any) -> tuple[dict[str, Any], bytes]:
    """The ASGI scope and the request body an API Gateway REST proxy event stands for.

    Raises:
        EventError: ``event`` is not a REST proxy event (no ``httpMethod`` or ``path``), or its
            base64 body does not decode.
    """
    if not isinstance(event, Mapping):
        raise EventError("the event is not a JSON object")
    method, path = event.get("httpMethod"), event.get("path")
    if not isinstance(method, str) or not isinstance(path, str) or not path.startswith("/"):
        raise EventError("the event is not an API Gateway REST proxy event")
    headers = _header_pairs(event)
    found = dict(headers)
    raw_body = event.get("body")
    body: bytes
    if raw_body is None:
        body = b""
    elif event.get("isBase64Encoded"):
        try:
            body = base64.b64decode(str(raw_body), validate=True)
        except ValueError as exc:
            raise EventError("the event's base64 body does not decode") from exc
    else:
        body = str(raw_body).encode("utf-8")
    context_data = event.get("requestContext")
    identity = context_data.get("identity") if isinstance(context_data, Mapping) else None
    source = identity.get("sourceIp") if isinstance(identity, Mapping) else None
    host = found.get(b"host", b"lambda").decode("latin-1")
    scheme = found.get(b"x-forwarded-proto", b"https").decode("latin-1")
    given_port = found.get(b"x-forwarded-port", b"443")
    port = int(given_port) if given_port.isdigit() and len(given_port) <= 5 else 443
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": scheme,
        "path": path,
        "raw_path": path.encode("utf-8"),
        "root_path": "",
        "query_string": _query(event),
        "headers": headers,
        "client": (source, 0) if isinstance(source, str) else None,
        "server": (host, port),
        "aws.event": event,
        "aws.context": context,
        "state": {},
    }
    return scope, body


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def prelude(status: int, headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The metadata API Gateway's streaming integration reads before the payload, and the
    delimiter. Repeated headers go in ``multiValueHeaders``; ``Set-Cookie`` in ``cookies``."""
    grouped: dict[str, list[str]] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = _text(name).lower()
        if key == "set-cookie":
            cookies.append(_text(value))
        else:
            grouped.setdefault(key, []).append(_text(value))
    metadata = {
        "statusCode": status,
        "headers": {key: values[-1] for key, values in grouped.items()},
        "multiValueHeaders": {key: values for key, values in grouped.items() if len(values) > 1},
        "cookies": cookies,
    }
    # NUL never appears in JSON text: ensure_ascii escapes every control character.
    return json.dumps(metadata, separators=(",", ":")).encode("ascii") + DELIMITER


def chunk(data: bytes) -> bytes:
    """``data`` as one chunk of chunked transfer coding (empty data: nothing, which would end
    the body)."""
    if not data:
        return b""
    return b"%x\r\n%s\r\n" % (len(data), data)


def error_payload(error_type: str, message: str) -> dict[str, Any]:
    """The error object Lambda reads a function error from."""
    return {"errorType": error_type, "errorMessage": message, "stackTrace": []}


def last_chunk(error: tuple[str, str] | None = None) -> bytes:
    """The end of a chunked body; with ``error`` (type, message), the trailers that report it
    after the first byte (the body trailer is the error object, base64-encoded JSON)."""
    if error is None:
        return b"0\r\n\r\n"
    error_type, message = error
    body = base64.b64encode(json.dumps(error_payload(error_type, message)).encode()).decode()
    clean_type = "".join(c for c in error_type if c.isalnum() or c in "._-") or "Runtime.Unknown"
    return (
        f"0\r\n{ERROR_TYPE_TRAILER}: {clean_type}\r\n{ERROR_BODY_TRAILER}: {body}\r\n\r\n".encode(
            "ascii"
        )
    )


@dataclass(frozen=True)
class Answer:
    """An HTTP/1.1 answer: its status, headers (lower-case names) and body."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readline()
        if not size_line.endswith(b"\n"):
            raise ConnectionError("the chunked body ended early")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while (await reader.readline()).strip():  # trailers, unused
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    """Read one HTTP/1.1 answer (a body by ``Content-Length``, chunked, or none).

    Raises:
        ConnectionError: the stream ended or held no HTTP answer.
    """
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        raise ConnectionError("the Runtime API closed the connection") from exc
    except asyncio.LimitOverrunError as exc:
        raise ConnectionError("the Runtime API's answer head is too long") from exc
    if len(head) > _MAX_HEAD:
        raise ConnectionError("the Runtime API's answer head is too long")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    try:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await _read_chunked(reader)
        elif "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        else:
            body = b""
    except asyncio.IncompleteReadError as exc:
        raise ConnectionError("the Runtime API's answer ended early") from exc
    return Answer(int(parts[1]), headers, body)


def request_head(
    method: str, target: str, host: str, headers: Sequence[tuple[str, str]] = ()
) -> bytes:
    """The head of an HTTP/1.1 request to the Runtime API."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
