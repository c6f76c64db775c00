"""Wire models of what the gateway answers: the Response object and the error envelope.

Owns :class:`Response` (every field of the contract's Response object, ``extra="forbid"``),
:class:`Usage`, :class:`ResponseError`, :class:`IncompleteDetails`, the echoed-tool models
(:class:`EchoedMcpTool` refuses secrets), :class:`ErrorEnvelope`, and :func:`validate_response`.

These models are an oracle: the gateway renders Response objects as plain dicts
(:mod:`responses_gateway.loop.render`) and tests hold those dicts to these models, so a missing
key, an extra key, a wrong type or a leaked MCP secret fails loudly. Nothing on the request path
validates through them; they must stay free of defaults that would hide a missing field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Tag, model_validator

from responses_gateway.protocol.contract import (
    GATEWAY_FAILURE_CODES,
    GATEWAY_INCOMPLETE_REASONS,
    OPENAI_FAILURE_CODES,
    OPENAI_INCOMPLETE_REASONS,
)
from responses_gateway.protocol.items import OutputItem, object_union, tagged_union_by_type
from responses_gateway.protocol.request import (
    ConversationRef,
    PromptRef,
    ReasoningParam,
    TextParam,
    ToolChoice,
)

__all__ = [
    "EchoedFunctionTool",
    "EchoedMcpTool",
    "EchoedOpaqueTool",
    "EchoedTool",
    "ErrorEnvelope",
    "ErrorObject",
    "IncompleteDetails",
    "InputTokensDetails",
    "OutputTokensDetails",
    "Response",
    "ResponseError",
    "ResponseStatus",
    "Usage",
    "validate_error_envelope",
    "validate_response",
]

ResponseStatus = Literal["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"]


class _Exact(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class InputTokensDetails(_Exact):
    """``usage.input_tokens_details``."""

    cached_tokens: int
    cache_write_tokens: int


class OutputTokensDetails(_Exact):
    """``usage.output_tokens_details``."""

    reasoning_tokens: int


class Usage(_Exact):
    """``usage``: token counts of the whole response (every model call of the loop)."""

    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class ResponseError(_Exact):
    """``Response.error`` of a failed response: ``{"code","message"}``, the code OpenAI's or
    one of the gateway's own (``contract.GATEWAY_FAILURE_CODES``, each named)."""

    code: str

    @model_validator(mode="after")
    def _a_declared_code(self) -> ResponseError:
        if self.code not in (*OPENAI_FAILURE_CODES, *GATEWAY_FAILURE_CODES):
            raise ValueError(f"failure code {self.code!r} is in neither table")
        return self

    message: str
    param: str | None = None
    type: str | None = None


class IncompleteDetails(_Exact):
    """``Response.incomplete_details``: OpenAI's reasons, or one of the gateway's own
    (``contract.GATEWAY_INCOMPLETE_REASONS``, each named)."""

    reason: str

    @model_validator(mode="after")
    def _a_declared_reason(self) -> IncompleteDetails:
        known = (*OPENAI_INCOMPLETE_REASONS, *GATEWAY_INCOMPLETE_REASONS)
        if self.reason not in known:
            raise ValueError(f"incomplete reason {self.reason!r} is none of {known}")
        return self


class EchoedFunctionTool(BaseModel):
    """A function tool as echoed (extra keys the client sent are echoed too)."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["function"]
    name: str
    description: str | None
    parameters: dict[str, Any] | None
    strict: bool | None


_SECRET_KEYS = ("headers", "authorization")


class EchoedMcpTool(BaseModel):
    """An MCP tool as echoed: never ``headers``/``authorization``; ``server_url`` bare."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: Literal["mcp"]
    server_label: str
    server_url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            leaked = [key for key in _SECRET_KEYS if key in data]
            if leaked:
                raise ValueError(f"echoed MCP tool carries secret keys {leaked}")
        return data

    @model_validator(mode="after")
    def _bare_url(self) -> EchoedMcpTool:
        if self.server_url is not None:
            parts = urlsplit(self.server_url)
            if parts.username or parts.password or parts.path or parts.query or parts.fragment:
                raise ValueError(f"echoed server_url {self.server_url!r} is not scheme://host")
        return self


class EchoedOpaqueTool(BaseModel):
    """Any other tool type, echoed as sent."""

    model_config = ConfigDict(extra="allow", strict=True)

    type: str


EchoedTool = Annotated[
    Annotated[EchoedFunctionTool, Tag("#function")]
    | Annotated[EchoedMcpTool, Tag("#mcp")]
    | Annotated[EchoedOpaqueTool, Tag("#other")],
    object_union(tagged_union_by_type({"function": "#function", "mcp": "#mcp"}, fallback="#other")),
]


class Response(_Exact):
    """The Response object, exactly as the contract defines it.

    Always present: what OpenAI's spec and the Open Responses spec require (``id``, ``object``,
    ``created_at``, ``completed_at``, ``status``, ``error``, ``incomplete_details``,
    ``instructions``, ``metadata``, ``model``, ``output``, ``parallel_tool_calls``, the sampling
    settings as numbers, ``tool_choice``, ``tools``, ``usage``...). ``user`` is left out when
    unset (OpenAI types it as a string).
    """

    id: str
    object: Literal["response"]
    created_at: int
    status: ResponseStatus
    error: ResponseError | None
    incomplete_details: IncompleteDetails | None
    instructions: str | list[dict[str, Any]] | None
    metadata: dict[str, str]
    model: str
    output: list[OutputItem]
    parallel_tool_calls: bool
    temperature: float
    tool_choice: ToolChoice
    tools: list[EchoedTool]
    top_p: float
    presence_penalty: float
    frequency_penalty: float
    top_logprobs: int
    completed_at: int | None
    usage: Usage
    background: bool | None = None
    conversation: ConversationRef | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    previous_response_id: str | None = None
    prompt: PromptRef | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    reasoning: ReasoningParam | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    store: bool | None = None
    text: TextParam | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Response:
        if (self.status == "incomplete") != (self.incomplete_details is not None):
            raise ValueError("incomplete_details must be set exactly when status is incomplete")
        if self.status == "failed" and self.error is None:
            raise ValueError("a failed response must carry an error")
        if self.status != "failed" and self.error is not None:
            raise ValueError(f"a {self.status} response must not carry an error")
        return self


class ErrorObject(_Exact):
    """The inner error object: ``{"message","type","param","code"}``, all keys present."""

    message: str
    type: str
    param: str | None
    code: str | None


class ErrorEnvelope(_Exact):
    """An HTTP error body: ``{"error":{...}}``."""

    error: ErrorObject


def validate_response(data: Mapping[str, Any]) -> Response:
    """Check a rendered Response dict against the contract (raises ``ValidationError``)."""
    return Response.model_validate(data)


def validate_error_envelope(data: Mapping[str, Any]) -> ErrorEnvelope:
    """Check an HTTP error body against the contract (raises ``ValidationError``)."""
    return ErrorEnvelope.model_validate(data)
