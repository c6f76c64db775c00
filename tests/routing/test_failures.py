"""classify: every upstream error becomes one failure kind, with its retry-after."""

from __future__ import annotations

import pytest

from responses_gateway.context.errors import ContextLengthExceeded
from responses_gateway.errors import (
    GatewayError,
    InvalidRequestError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTransportError,
)
from responses_gateway.routing.failures import classify, retry_after_seconds


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        (UpstreamStatusError(429, "slow down"), "rate_limited", True),
        (UpstreamStatusError(500, "oops"), "server_error", True),
        (UpstreamStatusError(503, "overloaded"), "server_error", True),
        (UpstreamStatusError(408, "timeout"), "timeout", True),
        (UpstreamStatusError(400, "bad"), "fatal", False),
        (UpstreamStatusError(401, "key"), "fatal", False),
        (UpstreamTransportError("The upstream model could not be reached: X"), "connection", True),
        (UpstreamTransportError("The upstream model timed out: ReadTimeout"), "timeout", True),
        (UpstreamProtocolError("garbage"), "server_error", True),
        (ContextLengthExceeded(), "context_length", False),
        (InvalidRequestError("no"), "fatal", False),
    ],
)
def test_classify_maps_each_error_to_its_kind(
    error: GatewayError, kind: str, retryable: bool
) -> None:
    failure = classify(error, streamed=False)
    assert (failure.kind, failure.retryable) == (kind, retryable)
    assert not classify(error, streamed=True).retryable


def test_classify_reads_the_upstream_retry_after() -> None:
    error = UpstreamStatusError(429, "slow down")
    error.headers["retry-after"] = "7"
    assert classify(error, streamed=False).retry_after == 7.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "Thu, 01 Jan 1970 00:00:10 GMT"}, 5.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds_reads_seconds_millis_and_dates(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after_seconds(headers, now=5.0) == seconds
