"""The one OpenAI error for a context that does not fit the model's window.

Owns :class:`ContextLengthExceeded` (400 ``context_length_exceeded``, OpenAI's wording) and
:func:`as_context_length`, which recognises an upstream's own context-length error, whatever the
server's wording, so that every upstream fails the same way. The wordings are a table of patterns
(one per server family); nothing here calls an upstream.
"""

from __future__ import annotations

import re

from responses_gateway.errors import GatewayError, InvalidRequestError, UpstreamStatusError

__all__ = [
    "CONTEXT_LENGTH_MESSAGE",
    "CONTEXT_LENGTH_WORDINGS",
    "ContextLengthExceeded",
    "as_context_length",
]

CONTEXT_LENGTH_MESSAGE = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
"""OpenAI's message for ``context_length_exceeded`` on the Responses API."""


class ContextLengthExceeded(InvalidRequestError):
    """The request's context does not fit the model's context window."""

    def __init__(self, message: str = CONTEXT_LENGTH_MESSAGE) -> None:
        super().__init__(message, code="context_length_exceeded", param="input")


CONTEXT_LENGTH_WORDINGS: dict[str, re.Pattern[str]] = {
    # OpenAI (chat) and vLLM before 0.10, OpenRouter ("This endpoint's maximum context length")
    "maximum context length": re.compile(r"maximum context length is \d+", re.I),
    # OpenAI Responses API
    "exceeds the context window": re.compile(r"exceeds the context window", re.I),
    # vLLM: "The decoder prompt (length 5000) is longer than the maximum model length of 4096."
    "maximum model length": re.compile(r"longer than the maximum model length", re.I),
    # llama.cpp server: "the request exceeds the available context size, try increasing it"
    "available context size": re.compile(r"exceeds the available context size", re.I),
    # Anthropic-style proxies: "prompt is too long: 210000 tokens > 200000 maximum"
    "prompt is too long": re.compile(r"prompt is too long", re.I),
    # TGI / SGLang: "`inputs` tokens + `max_new_tokens` must be <= 4096"
    "max_new_tokens": re.compile(r"tokens \+ `?max_new_tokens`? must be <=", re.I),
    # Amazon Bedrock (a ValidationException): "Input is too long for requested model."
    "input is too long": re.compile(r"input is too long for requested model", re.I),
    # Bedrock, Anthropic's models: "input length and `max_tokens` exceed context limit: ..."
    "exceed context limit": re.compile(
        r"input length and `?max_tokens`? exceed context limit", re.I
    ),
    # Bedrock, Amazon Nova: "Too many input tokens. Max input tokens: 300000, ..."
    "too many input tokens": re.compile(r"too many input tokens", re.I),
}
"""Upstream wordings of a context-length error (upstream code ``context_length_exceeded`` and
llama.cpp's type ``exceed_context_size_error`` are recognised as well)."""

_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})


def as_context_length(error: GatewayError) -> GatewayError:
    """``error`` as :class:`ContextLengthExceeded` when it is an upstream's context-length
    error (a 4xx, or an in-stream error that says so); otherwise ``error`` unchanged."""
    if not isinstance(error, UpstreamStatusError) or not 400 <= error.upstream_status < 500:
        return error
    if error.upstream_status == 429:
        return error
    if error.code in _CODES or error.error_type in _CODES:
        return _mapped(error)
    text = f"{error.message} {error.body}"
    if any(pattern.search(text) for pattern in CONTEXT_LENGTH_WORDINGS.values()):
        return _mapped(error)
    return error


def _mapped(error: UpstreamStatusError) -> ContextLengthExceeded:
    mapped = ContextLengthExceeded()
    mapped.headers.update(error.headers)
    return mapped
