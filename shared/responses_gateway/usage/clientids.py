"""The client's own ids in the request log: which request fields and headers carry them.

Owns :data:`CLIENT_ID_HEADERS` (the request-log client id fields, and the headers that carry
them: Codex sends ``session_id``, ``thread_id``, ... as headers, the agents SDK a trace id),
:func:`client_ids` (the ids of one request, from its body's metadata and its headers) and
:func:`client_id_headers` (the only headers a WebSocket connection keeps from its handshake for
the creates that follow). Imports nothing: the socket function's ``$connect`` uses it. It never
keeps any other header (no credential is ever among them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["CLIENT_ID_HEADERS", "client_id_headers", "client_ids"]

CLIENT_ID_HEADERS = (
    ("session_id", ("session-id", "session_id")),
    ("thread_id", ("thread-id", "thread_id")),
    ("turn_id", ("turn-id", "turn_id")),
    ("client_request_id", ("x-client-request-id",)),
    ("trace_id", ("x-trace-id", "openai-trace-id")),
    ("originator", ("originator",)),
    ("safety_identifier", ()),
)
"""Request-log client id fields, and the request headers (first found wins) that carry them
(``safety_identifier``: the create field only, the end user's id the client gives)."""
_MAX_ID = 200


def client_ids(metadata: Iterable[Any], headers: Any) -> dict[str, str]:
    """The client's ids (Codex ``session_id``/``thread_id``/``turn_id``, a request id, a trace
    id, the end user's ``safety_identifier``) from the request's ``client_metadata``/``metadata``
    (string values; the caller adds ``{"safety_identifier": ...}`` from the body) and headers
    (``headers.get``); the body wins over headers, long values are cut to 200 characters."""
    found: dict[str, str] = {}
    for name, header_names in CLIENT_ID_HEADERS:
        for header in header_names:
            value = headers.get(header)
            if value:
                found[name] = str(value)[:_MAX_ID]
                break
    for source in metadata:
        if isinstance(source, dict):
            for name, _ in CLIENT_ID_HEADERS:
                value = source.get(name)
                if isinstance(value, str) and value:
                    found[name] = value[:_MAX_ID]
    return found


def client_id_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers of ``headers`` (lower-case names) that :func:`client_ids` reads, values cut
    to 200 characters; every other header is left out."""
    return {
        header: str(value)[:_MAX_ID]
        for _, header_names in CLIENT_ID_HEADERS
        for header in header_names
        if (value := headers.get(header))
    }
