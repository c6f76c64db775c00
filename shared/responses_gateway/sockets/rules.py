"""The socket-level rules of a ``response.create`` message, checked without a gateway.

Owns :func:`invalid_create`: what WebSocket mode refuses in a create before its body is parsed
as an HTTP create would be (``stream_id`` and ``generate`` types, ``background``). The session
applies it to every create; the API Gateway socket function applies it in ``$default`` too,
before it marks the stream busy, so a refused create never holds its stream. Imports nothing of
the gateway (``$default`` stays light).
"""

from __future__ import annotations

from typing import Any

from responses_gateway.errors import InvalidRequestError

__all__ = ["invalid_create"]


def invalid_create(event: dict[str, Any]) -> InvalidRequestError | None:
    """The socket-level problem with a create, if any (the body itself is validated by the
    same parser as an HTTP create)."""
    if "stream_id" in event and not isinstance(event["stream_id"], str):
        return InvalidRequestError(
            "Invalid type for 'stream_id': expected a string.",
            param="stream_id",
            code="invalid_type",
        )
    if "generate" in event and not isinstance(event["generate"], bool):
        return InvalidRequestError(
            "Invalid type for 'generate': expected a boolean.",
            param="generate",
            code="invalid_type",
        )
    if event.get("background"):
        return InvalidRequestError(
            "Background mode is not supported over WebSocket; use POST /v1/responses.",
            param="background",
            code="unsupported_parameter",
        )
    return None
