"""Wire models of the stream events the gateway emits, one class per ``type``.

Owns a pydantic model (``extra="forbid"``) for every Responses SSE event our sinks may write,
the discriminated union :data:`StreamEvent`, :data:`EVENT_TYPES` and :func:`validate_event`.
Field sets follow the OpenAPI spec's ``ResponseStreamEvent`` variants and the contract: every
event carries ``sequence_number``; delta events may carry ``obfuscation``;
``response.function_call_arguments.done`` carries ``name``; the ``error`` event carries a nested
``error`` object as well as the flat ``code``/``message``/``param``.

Like :mod:`responses_gateway.protocol.response`, this is an oracle for tests run against our SSE
output. It builds no events and frames no SSE: that is the sinks' job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from responses_gateway.protocol.items import (
    OutputItem,
    OutputRefusal,
    OutputText,
    ReasoningText,
    SummaryText,
)
from responses_gateway.protocol.response import ErrorObject, Response

__all__ = [
    "EVENT_TYPES",
    "ContentPartAddedEvent",
    "ContentPartDoneEvent",
    "ErrorEvent",
    "FunctionCallArgumentsDeltaEvent",
    "FunctionCallArgumentsDoneEvent",
    "McpCallArgumentsDeltaEvent",
    "McpCallArgumentsDoneEvent",
    "McpCallCompletedEvent",
    "McpCallFailedEvent",
    "McpCallInProgressEvent",
    "McpListToolsCompletedEvent",
    "McpListToolsFailedEvent",
    "McpListToolsInProgressEvent",
    "OutputItemAddedEvent",
    "OutputItemDoneEvent",
    "OutputTextDeltaEvent",
    "OutputTextDoneEvent",
    "ReasoningSummaryPartAddedEvent",
    "ReasoningSummaryPartDoneEvent",
    "ReasoningSummaryTextDeltaEvent",
    "ReasoningSummaryTextDoneEvent",
    "ReasoningTextDeltaEvent",
    "ReasoningTextDoneEvent",
    "RefusalDeltaEvent",
    "RefusalDoneEvent",
    "ResponseCompletedEvent",
    "ResponseCreatedEvent",
    "ResponseFailedEvent",
    "ResponseInProgressEvent",
    "ResponseIncompleteEvent",
    "ResponseQueuedEvent",
    "StreamEvent",
    "validate_event",
]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    sequence_number: Annotated[int, Field(ge=0)]


class _ItemEvent(_Event):
    item_id: str
    output_index: Annotated[int, Field(ge=0)]


class _ContentEvent(_ItemEvent):
    content_index: Annotated[int, Field(ge=0)]


class _SummaryEvent(_ItemEvent):
    summary_index: Annotated[int, Field(ge=0)]


class _Delta(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    delta: str
    obfuscation: str | None = None
    """Random padding; absent when ``stream_options.include_obfuscation`` is false."""


# --------------------------------------------------------------------------- lifecycle


class ResponseCreatedEvent(_Event):
    """First event: the response with status ``in_progress`` (or ``queued``), no output."""

    type: Literal["response.created"]
    response: Response


class ResponseQueuedEvent(_Event):
    """A background response is queued."""

    type: Literal["response.queued"]
    response: Response


class ResponseInProgressEvent(_Event):
    """The response started."""

    type: Literal["response.in_progress"]
    response: Response


class ResponseCompletedEvent(_Event):
    """Last event of a completed response: the full response, all output and usage."""

    type: Literal["response.completed"]
    response: Response


class ResponseIncompleteEvent(_Event):
    """Last event of an incomplete response."""

    type: Literal["response.incomplete"]
    response: Response


class ResponseFailedEvent(_Event):
    """Last event of a response that failed after the stream started."""

    type: Literal["response.failed"]
    response: Response


class ErrorEvent(_Event):
    """A standalone error; ``error`` is what the SDK raises on, the flat keys what the spec has."""

    type: Literal["error"]
    error: ErrorObject
    code: str | None
    message: str
    param: str | None


# --------------------------------------------------------------------------- items and parts


class OutputItemAddedEvent(_Event):
    """An output item opened."""

    type: Literal["response.output_item.added"]
    output_index: Annotated[int, Field(ge=0)]
    item: OutputItem


class OutputItemDoneEvent(_Event):
    """An output item closed, in its final form."""

    type: Literal["response.output_item.done"]
    output_index: Annotated[int, Field(ge=0)]
    item: OutputItem


ContentPart = Annotated[OutputText | OutputRefusal | ReasoningText, Field(discriminator="type")]


class ContentPartAddedEvent(_ContentEvent):
    """A content part opened."""

    type: Literal["response.content_part.added"]
    part: ContentPart


class ContentPartDoneEvent(_ContentEvent):
    """A content part closed."""

    type: Literal["response.content_part.done"]
    part: ContentPart


# --------------------------------------------------------------------------- text


class OutputTextDeltaEvent(_ContentEvent, _Delta):
    """A piece of assistant text."""

    type: Literal["response.output_text.delta"]
    logprobs: list[dict[str, Any]]


class OutputTextDoneEvent(_ContentEvent):
    """The whole assistant text of a part."""

    type: Literal["response.output_text.done"]
    text: str
    logprobs: list[dict[str, Any]]


class RefusalDeltaEvent(_ContentEvent, _Delta):
    """A piece of a refusal."""

    type: Literal["response.refusal.delta"]


class RefusalDoneEvent(_ContentEvent):
    """The whole refusal."""

    type: Literal["response.refusal.done"]
    refusal: str


# --------------------------------------------------------------------------- reasoning


class ReasoningTextDeltaEvent(_ContentEvent, _Delta):
    """A piece of raw reasoning text."""

    type: Literal["response.reasoning_text.delta"]


class ReasoningTextDoneEvent(_ContentEvent):
    """The whole raw reasoning text of a part."""

    type: Literal["response.reasoning_text.done"]
    text: str


class ReasoningSummaryPartAddedEvent(_SummaryEvent):
    """A reasoning summary part opened."""

    type: Literal["response.reasoning_summary_part.added"]
    part: SummaryText


class ReasoningSummaryPartDoneEvent(_SummaryEvent):
    """A reasoning summary part closed (``status`` ``incomplete`` if it was cut short)."""

    type: Literal["response.reasoning_summary_part.done"]
    part: SummaryText
    status: Literal["incomplete"] | None = None


class ReasoningSummaryTextDeltaEvent(_SummaryEvent, _Delta):
    """A piece of a reasoning summary."""

    type: Literal["response.reasoning_summary_text.delta"]


class ReasoningSummaryTextDoneEvent(_SummaryEvent):
    """The whole text of a reasoning summary part."""

    type: Literal["response.reasoning_summary_text.done"]
    text: str


# --------------------------------------------------------------------------- function calls


class FunctionCallArgumentsDeltaEvent(_ItemEvent, _Delta):
    """A piece of a function call's arguments."""

    type: Literal["response.function_call_arguments.delta"]


class FunctionCallArgumentsDoneEvent(_ItemEvent):
    """A function call's whole arguments, and its name."""

    type: Literal["response.function_call_arguments.done"]
    arguments: str
    name: str


# --------------------------------------------------------------------------- MCP


class McpListToolsInProgressEvent(_ItemEvent):
    """Listing an MCP server's tools started."""

    type: Literal["response.mcp_list_tools.in_progress"]


class McpListToolsCompletedEvent(_ItemEvent):
    """Listing an MCP server's tools succeeded."""

    type: Literal["response.mcp_list_tools.completed"]


class McpListToolsFailedEvent(_ItemEvent):
    """Listing an MCP server's tools failed."""

    type: Literal["response.mcp_list_tools.failed"]


class McpCallInProgressEvent(_ItemEvent):
    """An MCP call started."""

    type: Literal["response.mcp_call.in_progress"]


class McpCallArgumentsDeltaEvent(_ItemEvent, _Delta):
    """A piece of an MCP call's arguments."""

    type: Literal["response.mcp_call_arguments.delta"]


class McpCallArgumentsDoneEvent(_ItemEvent):
    """An MCP call's whole arguments."""

    type: Literal["response.mcp_call_arguments.done"]
    arguments: str


class McpCallCompletedEvent(_ItemEvent):
    """An MCP call succeeded."""

    type: Literal["response.mcp_call.completed"]


class McpCallFailedEvent(_ItemEvent):
    """An MCP call failed."""

    type: Literal["response.mcp_call.failed"]


StreamEvent = Annotated[
    ResponseCreatedEvent
    | ResponseQueuedEvent
    | ResponseInProgressEvent
    | ResponseCompletedEvent
    | ResponseIncompleteEvent
    | ResponseFailedEvent
    | ErrorEvent
    | OutputItemAddedEvent
    | OutputItemDoneEvent
    | ContentPartAddedEvent
    | ContentPartDoneEvent
    | OutputTextDeltaEvent
    | OutputTextDoneEvent
    | RefusalDeltaEvent
    | RefusalDoneEvent
    | ReasoningTextDeltaEvent
    | ReasoningTextDoneEvent
    | ReasoningSummaryPartAddedEvent
    | ReasoningSummaryPartDoneEvent
    | ReasoningSummaryTextDeltaEvent
    | ReasoningSummaryTextDoneEvent
    | FunctionCallArgumentsDeltaEvent
    | FunctionCallArgumentsDoneEvent
    | McpListToolsInProgressEvent
    | McpListToolsCompletedEvent
    | McpListToolsFailedEvent
    | McpCallInProgressEvent
    | McpCallArgumentsDeltaEvent
    | McpCallArgumentsDoneEvent
    | McpCallCompletedEvent
    | McpCallFailedEvent,
    Field(discriminator="type"),
]
"""Every event the gateway may emit, told apart by ``type``."""

_ADAPTER: TypeAdapter[StreamEvent] = TypeAdapter(StreamEvent)

EVENT_TYPES: frozenset[str] = frozenset(
    get_args(member.model_fields["type"].annotation)[0]
    for member in get_args(get_args(StreamEvent)[0])
)
"""The ``type`` of every event in :data:`StreamEvent`."""


def validate_event(data: Mapping[str, Any]) -> StreamEvent:
    """Check one decoded SSE ``data`` payload against its model (raises ``ValidationError``)."""
    return _ADAPTER.validate_python(data)
