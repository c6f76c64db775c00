"""The typed failure of one model call, as the loop's failover decider sees it.

Owns :func:`classify`: an upstream :class:`~responses_gateway.errors.GatewayError` plus whether
any output of the call already reached the client becomes an :class:`LlmFailure` of one kind
from a table (rate limited, server error, connection, timeout, context length, fatal), with the
upstream's ``retry-after`` in seconds when it sent one. It decides nothing: the decider
(:func:`responses_gateway.loop.failover.decide_after_llm_failure`) does.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Literal

from responses_gateway.context.errors import ContextLengthExceeded
from responses_gateway.errors import (
    GatewayError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTransportError,
)

__all__ = ["RETRYABLE", "FailureKind", "LlmFailure", "classify", "retry_after_seconds"]

FailureKind = Literal[
    "rate_limited", "server_error", "connection", "timeout", "context_length", "fatal"
]

RETRYABLE: frozenset[str] = frozenset({"rate_limited", "server_error", "connection", "timeout"})
"""Kinds another deployment may answer instead (before any output reached the client)."""

_STATUS_KINDS: dict[int, FailureKind] = {408: "timeout", 409: "server_error", 429: "rate_limited"}
"""4xx statuses that are not the request's fault; every 5xx is ``server_error``."""


@dataclass(frozen=True, slots=True)
class LlmFailure:
    """One failed model call."""

    kind: FailureKind
    error: GatewayError
    """What failed it (the error the client sees when nothing else answers)."""
    streamed: bool = False
    """Whether any output of this call had reached the client (never retried then)."""
    retry_after: float | None = None
    """Seconds the upstream asked to wait (``retry-after`` / ``retry-after-ms``)."""

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE and not self.streamed


def retry_after_seconds(headers: dict[str, str], now: float | None = None) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) in seconds, or None."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _kind(error: GatewayError) -> FailureKind:
    if isinstance(error, ContextLengthExceeded):
        return "context_length"
    if isinstance(error, UpstreamStatusError):
        if error.upstream_status >= 500:
            return "server_error"
        return _STATUS_KINDS.get(error.upstream_status, "fatal")
    if isinstance(error, UpstreamTransportError):
        return "timeout" if "timed out" in error.message else "connection"
    if isinstance(error, UpstreamProtocolError):
        return "server_error"
    return "fatal"


def classify(error: GatewayError, *, streamed: bool) -> LlmFailure:
    """The failure ``error`` is, for a call whose output had (``streamed``) reached the client
    or not. ``error`` is already mapped by ``as_context_length``."""
    return LlmFailure(
        kind=_kind(error),
        error=error,
        streamed=streamed,
        retry_after=retry_after_seconds(error.headers),
    )
