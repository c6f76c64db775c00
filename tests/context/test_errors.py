"""as_context_length: every upstream wording becomes OpenAI's one error; others pass."""

from __future__ import annotations

import pytest

from responses_gateway.context.errors import CONTEXT_LENGTH_MESSAGE, as_context_length
from responses_gateway.errors import UpstreamStatusError, UpstreamTransportError

WORDINGS = [
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
    "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000.",
    "Your input exceeds the context window of this model. Please adjust your input and try again.",
    "The decoder prompt (length 5000) is longer than the maximum model length of 4096.",
    "the request exceeds the available context size, try increasing it",
    "prompt is too long: 210000 tokens > 200000 maximum",
    "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000",
]


@pytest.mark.parametrize("message", WORDINGS)
def test_as_context_length_maps_every_wording(message: str) -> None:
    mapped = as_context_length(UpstreamStatusError(400, message))
    assert mapped.to_error() == {
        "message": CONTEXT_LENGTH_MESSAGE,
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
    assert mapped.status_code == 400


def test_as_context_length_maps_by_code_or_type() -> None:
    by_code = UpstreamStatusError(400, "too long", code="context_length_exceeded")
    by_type = UpstreamStatusError(400, "x", error_type="exceed_context_size_error")
    assert as_context_length(by_code).code == "context_length_exceeded"
    assert as_context_length(by_type).code == "context_length_exceeded"


def test_as_context_length_leaves_other_errors() -> None:
    other = UpstreamStatusError(400, "temperature must be at most 2")
    server = UpstreamStatusError(500, "maximum context length is 4096")
    limited = UpstreamStatusError(429, "maximum context length is 4096")
    transport = UpstreamTransportError("down")
    for error in (other, server, limited, transport):
        assert as_context_length(error) is error
