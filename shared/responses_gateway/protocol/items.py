"""Wire models of Responses items: what clients send in ``input`` and what we put in ``output``.

Owns two families of pydantic models.

* **Input items** (lenient, ``extra="allow"``): ``message`` (``type`` may be omitted, as
  openai-agents sends messages), ``function_call``, ``function_call_output``, ``item_reference``
  (``type`` may be omitted too), ``reasoning``, ``mcp_list_tools``, ``mcp_approval_request``,
  ``mcp_approval_response`` and ``mcp_call`` are modelled field by field. Every other item type the
  SDK knows (:data:`OPAQUE_INPUT_ITEM_TYPES`: ``web_search_call``, ``computer_call_output``, ...)
  is validated by its row in :mod:`~responses_gateway.protocol.relayed_items` (the SDK's
  fields, a :class:`RelayedItem`) and passed on with every key it carries; an item type nobody
  knows fails with ``invalid_value`` on ``input[i].type``. Scalars are validated strictly (no
  ``"1"`` for ``1``), like OpenAI does. Every door that takes items (a create over HTTP or
  WebSocket, ``input_tokens``, ``compact``, conversation items) validates them with
  :data:`InputItem`.
* **Output items** (exact, ``extra="forbid"``): ``message``, ``function_call``, ``reasoning``,
  ``mcp_list_tools``, ``mcp_call`` and ``mcp_approval_request`` in precisely the contract's shapes.
  The gateway builds its output as plain dicts; these models are the oracle tests hold them to.

Unions over ``type`` use callable discriminators whose tags start with ``#``
(:mod:`~responses_gateway.protocol.fields`), so a validation error's location reads as the
client's JSON path once the tags are dropped (see
:func:`responses_gateway.protocol.request.to_invalid_request`). This module converts nothing and
decides nothing; canonicalizing items for the model is :mod:`responses_gateway.loop.prepared`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator
from pydantic_core import PydanticCustomError

from responses_gateway.protocol.fields import (
    REQUIRED,
    Closed as _Closed,
    models_from_table,
    object_union,
    tagged_union_by_type,
    union_of,
)
from responses_gateway.protocol.relayed_items import (
    RELAYED_ITEM_FIELDS,
    RelayedInputItem,
    RelayedItem,
    ToolCaller,
)

__all__ = [
    "ANNOTATION_FIELDS",
    "INPUT_ITEM_TYPES",
    "MODELLED_INPUT_ITEM_TYPES",
    "OPAQUE_INPUT_ITEM_TYPES",
    "ContentPart",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "FunctionOutputPart",
    "InputFilePart",
    "InputImagePart",
    "InputItem",
    "InputTextPart",
    "ItemReference",
    "McpApprovalRequestItem",
    "McpApprovalResponseItem",
    "McpCallItem",
    "McpListToolsItem",
    "McpToolInfo",
    "MessageItem",
    "RelayedItem",
    "OutputFunctionCall",
    "OutputItem",
    "OutputMcpApprovalRequest",
    "OutputMcpCall",
    "OutputMcpListTools",
    "OutputMcpToolInfo",
    "OutputMessage",
    "OutputReasoning",
    "OutputRefusal",
    "OutputText",
    "OutputTextPart",
    "ReasoningItem",
    "ReasoningText",
    "ReasoningTextPart",
    "RefusalPart",
    "SummaryText",
    "SummaryTextPart",
    "object_union",
    "tagged_union_by_type",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]
McpCallStatus = Literal["in_progress", "completed", "incomplete", "calling", "failed"]

MODELLED_INPUT_ITEM_TYPES: tuple[str, ...] = (
    "message",
    "function_call",
    "function_call_output",
    "item_reference",
    "reasoning",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "mcp_call",
)
"""Input item types validated field by field."""

OPAQUE_INPUT_ITEM_TYPES: tuple[str, ...] = tuple(sorted(RELAYED_ITEM_FIELDS))
"""The other input item types of the SDK's ``ResponseInputItemParam``: the gateway relays or
lowers them without acting on them; their fields are validated as the SDK types them
(:mod:`responses_gateway.protocol.relayed_items`)."""

INPUT_ITEM_TYPES: tuple[str, ...] = MODELLED_INPUT_ITEM_TYPES + OPAQUE_INPUT_ITEM_TYPES
"""Every input item ``type`` the gateway accepts (the SDK's full list)."""


class _Lenient(BaseModel):
    """Client-sent data: unknown keys kept, scalars strict, no NaN/Infinity."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class _Exact(BaseModel):
    """Gateway-produced data: exactly the contract's keys, scalars strict.

    These models are oracles (tests and the stream checker validate the gateway's output with
    them); no request path validates with them, so their schemas are built on first use
    (``defer_build``), not at import: a cold start does not pay for them.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)


def _str_or_list(value: Any) -> str | None:
    if isinstance(value, str):
        return "#text"
    if isinstance(value, list | tuple):
        return "#list"
    return None


# --------------------------------------------------------------------------- input content parts


def _not_null(value: Any) -> Any:
    """A field that may be left out but never sent as null (OpenAI's spec has no null for it)."""
    if value is None:
        raise PydanticCustomError("invalid_type", "a string")
    return value


def _object_not_null(value: Any) -> Any:
    if value is None:
        raise PydanticCustomError("invalid_type", "an object")
    return value


class PromptCacheBreakpoint(_Lenient):
    """``{"mode": "explicit"}``: the end of a reusable prompt prefix."""

    mode: Literal["explicit"]


class _InputPart(_Lenient):
    """What every input content part may carry."""

    prompt_cache_breakpoint: PromptCacheBreakpoint | None = None

    @field_validator("prompt_cache_breakpoint", mode="before")
    @classmethod
    def _breakpoint_not_null(cls, value: Any) -> Any:
        return _object_not_null(value)


class InputTextPart(_InputPart):
    """``{"type":"input_text","text"}``."""

    type: Literal["input_text"]
    text: str


class InputImagePart(_InputPart):
    """``{"type":"input_image","image_url"|"file_id","detail"}``."""

    type: Literal["input_image"]
    image_url: str | None = None
    file_id: str | None = None
    detail: Literal["low", "high", "auto", "original"] | None = None


class InputFilePart(_InputPart):
    """``{"type":"input_file","file_id"|"file_data"|"file_url","filename"}`` (only ``file_id``
    may be null, as OpenAI's spec has it)."""

    type: Literal["input_file"]
    file_id: str | None = None
    file_data: str | None = None
    file_url: str | None = None
    filename: str | None = None

    @field_validator("file_data", "file_url", "filename", mode="before")
    @classmethod
    def _strings_not_null(cls, value: Any) -> Any:
        return _not_null(value)


ANNOTATION_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "file_citation": {"file_id": (str, REQUIRED), "filename": (str, REQUIRED),
                      "index": (int, REQUIRED)},
    "url_citation": {"url": (str, REQUIRED), "title": (str, REQUIRED),
                     "start_index": (int, REQUIRED), "end_index": (int, REQUIRED)},
    "container_file_citation": {"container_id": (str, REQUIRED), "file_id": (str, REQUIRED),
                                "filename": (str, REQUIRED), "start_index": (int, REQUIRED),
                                "end_index": (int, REQUIRED)},
    "file_path": {"file_id": (str, REQUIRED), "index": (int, REQUIRED)},
}  # fmt: skip
"""An ``output_text`` annotation type -> its fields, as the SDK types them."""

if TYPE_CHECKING:
    Annotation = dict[str, Any]
else:
    Annotation = union_of(models_from_table(ANNOTATION_FIELDS, _Lenient, "Annotation"))
"""One annotation of a replayed ``output_text`` part."""


class OutputTextPart(_Lenient):
    """An assistant message's text, as clients replay it."""

    type: Literal["output_text"]
    text: str
    annotations: list[Annotation] | None = None
    logprobs: list[dict[str, Any]] | None = None


class RefusalPart(_Lenient):
    """An assistant message's refusal, as clients replay it."""

    type: Literal["refusal"]
    refusal: str


class _UnknownPart(_Lenient):
    """Reached only by an unsupported part ``type``; always fails on ``type``."""

    type: Literal["input_text", "input_image", "input_file", "output_text", "refusal"]


ContentPart = Annotated[
    Annotated[InputTextPart, Tag("#input_text")]
    | Annotated[InputImagePart, Tag("#input_image")]
    | Annotated[InputFilePart, Tag("#input_file")]
    | Annotated[OutputTextPart, Tag("#output_text")]
    | Annotated[RefusalPart, Tag("#refusal")]
    | Annotated[_UnknownPart, Tag("#unknown")],
    object_union(
        tagged_union_by_type(
            {
                "input_text": "#input_text",
                "input_image": "#input_image",
                "input_file": "#input_file",
                "output_text": "#output_text",
                "refusal": "#refusal",
            },
            fallback="#unknown",
        )
    ),
]
"""A part of a message's ``content`` list."""


class _UnknownOutputPart(_Lenient):
    type: Literal["input_text", "input_image", "input_file"]


FunctionOutputPart = Annotated[
    Annotated[InputTextPart, Tag("#input_text")]
    | Annotated[InputImagePart, Tag("#input_image")]
    | Annotated[InputFilePart, Tag("#input_file")]
    | Annotated[_UnknownOutputPart, Tag("#unknown")],
    object_union(
        tagged_union_by_type(
            {
                "input_text": "#input_text",
                "input_image": "#input_image",
                "input_file": "#input_file",
            },
            fallback="#unknown",
        )
    ),
]
"""A part of a ``function_call_output``'s ``output`` list."""

MessageContent = Annotated[
    Annotated[str, Tag("#text")] | Annotated[list[ContentPart], Tag("#list")],
    Discriminator(
        _str_or_list,
        custom_error_type="invalid_type",
        custom_error_message="one of a string or an array of content parts",
    ),
]

FunctionOutput = Annotated[
    Annotated[str, Tag("#text")] | Annotated[list[FunctionOutputPart], Tag("#list")],
    Discriminator(
        _str_or_list,
        custom_error_type="invalid_type",
        custom_error_message="one of a string or an array of content parts",
    ),
]


class SummaryTextPart(_Lenient):
    """A reasoning summary part, as clients replay it."""

    type: Literal["summary_text"]
    text: str


class ReasoningTextPart(_Lenient):
    """A raw reasoning text part, as clients replay it."""

    type: Literal["reasoning_text"]
    text: str


# --------------------------------------------------------------------------- input items


class MessageItem(_Lenient):
    """A message; ``type`` may be omitted and ``content`` may be a plain string."""

    type: Literal["message"] | None = None
    role: Literal["user", "system", "developer", "assistant"]
    content: MessageContent
    id: str | None = None
    status: ItemStatus | None = None
    phase: Literal["commentary", "final_answer"] | None = None


class FunctionCallItem(_Lenient):
    """A function call the model made, replayed by the client (openai-agents keeps ``id``)."""

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    id: str | None = None
    status: ItemStatus | None = None
    namespace: str | None = None
    caller: ToolCaller | None = None


class FunctionCallOutputItem(_Lenient):
    """The client's result for a ``function_call``.

    ``call_id`` is optional, as in the SDK's types (programmatic tool calling: a result for a
    ``program`` caller). Without it, a Responses upstream gets the item as sent and a function
    wire gets the output as context text (:mod:`responses_gateway.protocol.contract`).
    """

    type: Literal["function_call_output"]
    call_id: str | None = None
    output: FunctionOutput
    id: str | None = None
    status: ItemStatus | None = None
    name: str | None = None
    namespace: str | None = None
    caller: ToolCaller | None = None


class ItemReference(_Closed):
    """A reference to a stored item by id (``type`` may be omitted, as the SDK allows)."""

    type: Literal["item_reference"] | None = None
    id: str


class ReasoningItem(_Lenient):
    """A reasoning item replayed by the client."""

    type: Literal["reasoning"]
    id: str
    summary: list[SummaryTextPart]
    content: list[ReasoningTextPart] | None = None
    encrypted_content: str | None = None
    status: ItemStatus | None = None


class McpToolInfo(_Lenient):
    """One tool of an ``mcp_list_tools`` item."""

    name: str
    input_schema: Any = None
    description: str | None = None
    annotations: Any = None


class McpListToolsItem(_Lenient):
    """A listing of an MCP server's tools, replayed by the client."""

    type: Literal["mcp_list_tools"]
    id: str
    server_label: str
    tools: list[McpToolInfo]
    error: str | None = None


class McpApprovalRequestItem(_Lenient):
    """A request for approval of an MCP call, replayed by the client."""

    type: Literal["mcp_approval_request"]
    id: str
    server_label: str
    name: str
    arguments: str


class McpApprovalResponseItem(_Lenient):
    """The client's decision on an ``mcp_approval_request``."""

    type: Literal["mcp_approval_response"]
    approval_request_id: str
    approve: bool
    reason: str | None = None
    id: str | None = None


class McpCallItem(_Lenient):
    """An MCP call, replayed by the client. ``error`` is a string or an error object."""

    type: Literal["mcp_call"]
    id: str
    server_label: str
    name: str
    arguments: str
    output: str | None = None
    error: str | dict[str, Any] | None = None
    approval_request_id: str | None = None
    status: McpCallStatus | None = None


class _UnknownItem(_Lenient):
    """Reached only by an unknown or missing ``type``; always fails on ``type``."""

    type: Literal[INPUT_ITEM_TYPES]  # type: ignore[valid-type]


def _untyped_item(value: Mapping[str, Any]) -> str:
    if "role" in value or "content" in value:
        return "#message"
    if "id" in value:
        return "#item_reference"
    return "#unknown"


_ITEM_TAGS: dict[str, str] = {kind: "#" + kind for kind in MODELLED_INPUT_ITEM_TYPES}
_ITEM_TAGS.update(dict.fromkeys(OPAQUE_INPUT_ITEM_TYPES, "#relayed"))

InputItem = Annotated[
    Annotated[MessageItem, Tag("#message")]
    | Annotated[FunctionCallItem, Tag("#function_call")]
    | Annotated[FunctionCallOutputItem, Tag("#function_call_output")]
    | Annotated[ItemReference, Tag("#item_reference")]
    | Annotated[ReasoningItem, Tag("#reasoning")]
    | Annotated[McpListToolsItem, Tag("#mcp_list_tools")]
    | Annotated[McpApprovalRequestItem, Tag("#mcp_approval_request")]
    | Annotated[McpApprovalResponseItem, Tag("#mcp_approval_response")]
    | Annotated[McpCallItem, Tag("#mcp_call")]
    | Annotated[RelayedInputItem, Tag("#relayed")]
    | Annotated[_UnknownItem, Tag("#unknown")],
    object_union(tagged_union_by_type(_ITEM_TAGS, fallback="#unknown", untyped=_untyped_item)),
]
"""One element of a request's ``input`` list."""


# --------------------------------------------------------------------------- output items


class OutputText(_Exact):
    """``{"type":"output_text","text","annotations":[],"logprobs":[]}``."""

    type: Literal["output_text"]
    text: str
    annotations: list[dict[str, Any]]
    logprobs: list[dict[str, Any]]


class OutputRefusal(_Exact):
    """``{"type":"refusal","refusal"}``."""

    type: Literal["refusal"]
    refusal: str


class SummaryText(_Exact):
    """``{"type":"summary_text","text"}``."""

    type: Literal["summary_text"]
    text: str


class ReasoningText(_Exact):
    """``{"type":"reasoning_text","text"}``."""

    type: Literal["reasoning_text"]
    text: str


class OutputMessage(_Exact):
    """An assistant message in ``output``."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    status: ItemStatus
    content: list[Annotated[OutputText | OutputRefusal, Field(discriminator="type")]]


class OutputFunctionCall(_Exact):
    """A ``function_call`` in ``output``; ``arguments`` is a JSON string."""

    id: str
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str
    status: ItemStatus


class OutputReasoning(_Exact):
    """A ``reasoning`` item in ``output``; ``content``/``encrypted_content``/``status`` optional."""

    id: str
    type: Literal["reasoning"]
    summary: list[SummaryText]
    content: list[ReasoningText] | None = None
    encrypted_content: str | None = None
    status: ItemStatus | None = None


class OutputMcpToolInfo(_Exact):
    """One tool of an output ``mcp_list_tools`` item."""

    name: str
    input_schema: Any
    description: str | None = None
    annotations: Any = None


class OutputMcpListTools(_Exact):
    """An ``mcp_list_tools`` item in ``output`` (it has no ``status``)."""

    id: str
    type: Literal["mcp_list_tools"]
    server_label: str
    tools: list[OutputMcpToolInfo]
    error: str | None = None


class OutputMcpCall(_Exact):
    """An ``mcp_call`` item in ``output``; every key is present, nullable ones as null."""

    id: str
    type: Literal["mcp_call"]
    server_label: str
    name: str
    arguments: str
    output: str | None
    error: str | dict[str, Any] | None
    approval_request_id: str | None
    status: McpCallStatus


class OutputMcpApprovalRequest(_Exact):
    """An ``mcp_approval_request`` item in ``output``."""

    id: str
    type: Literal["mcp_approval_request"]
    server_label: str
    name: str
    arguments: str


OutputItem = Annotated[
    OutputMessage
    | OutputFunctionCall
    | OutputReasoning
    | OutputMcpListTools
    | OutputMcpCall
    | OutputMcpApprovalRequest,
    Field(discriminator="type"),
]
"""One element of a Response's ``output``, exactly as the gateway must emit it."""
