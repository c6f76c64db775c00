"""The ``POST /v1/responses`` request: validation, OpenAI-style errors, and the echoed fields.

Owns :class:`CreateResponseRequest` (every field of the SDK's ``ResponseCreateParams``; unknown
keys are accepted and ignored, since clients send extras through ``extra_body``),
:func:`parse_create_request` (body -> model, or an :class:`InvalidRequestError` worded like
OpenAI's), :func:`to_invalid_request` (the same error mapping, for other endpoints' models),
:func:`echo_fields` (the dict the loop keeps as ``state.request``: the settings as the client set
them, which the loop forwards, and which every Response object shows through
:func:`responses_gateway.loop.render.echoed`) and :func:`request_input` (the ``input`` as plain
dicts for :func:`responses_gateway.loop.prepared.prepare_input`).

It must not look anything up (previous responses, conversations, stored items) or talk to an
upstream: it checks only what the body alone can tell.

Validation choices (OpenAI's where the spec or the API says, ours where marked [choice]):

* Scalars are strict: ``"1"`` is not a number, ``1.0`` is not an integer, ``true`` is not an
  integer, NaN/Infinity are rejected. ``temperature`` 0..2, ``top_p`` 0..1, ``top_logprobs`` 0..20,
  ``presence_penalty`` and ``frequency_penalty`` -2..2 (Chat Completions' range: the Open Responses
  spec declares both without one), ``max_output_tokens`` >= 16 (the spec's minimum). [choice]
  ``max_tool_calls`` >= 1 (the spec sets no minimum; 0 would cap every gateway tool call before the
  first model call). Counts (``max_output_tokens``, ``max_tool_calls``, ``compact_threshold``) are
  at most 2147483647, so a huge integer never reaches an upstream.
* Function tool ``parameters`` must be a JSON Schema of an object
  (:mod:`responses_gateway.protocol.schema_check`): 400 ``invalid_function_parameters`` on
  ``tools[i].parameters``, "Invalid schema for function '<name>': ...".
* ``metadata``: at most 16 pairs, keys <= 64 characters (errors on ``metadata``), string values
  <= 512 characters (errors on ``metadata.<key>``).
* ``conversation`` with ``previous_response_id``: 400 on ``conversation``, code
  ``mutually_exclusive_parameters`` [choice of param and code], OpenAI's message.
* ``tools``: ``function`` tools need a non-empty ``name``; ``mcp`` tools need ``server_label``, and
  a ``server_url`` must be an ``http(s)`` URL with a host (without one, the label selects an
  operator-configured server: the tool registry checks that); every other tool type is accepted
  as an opaque object with a string ``type``.
* ``input`` items: see :mod:`responses_gateway.protocol.items`.
* [choice] ``include`` values are any strings (their set grows with new models; the upstream
  judges them); ``service_tier``, ``truncation``, ``reasoning.effort``, ``reasoning.summary``,
  ``text.format.type`` and ``text.verbosity`` are checked against the SDK's values (every
  Response echoes them, and both specs hold the echo to those values).

Error mapping (pydantic error -> OpenAI ``message`` / ``code``; ``param`` is the JSON path of the
first error, e.g. ``input[0].content``, ``tools[1].name``, ``metadata``):

=============================  ===============================================================
missing                        ``Missing required parameter: '<p>'.`` / missing_required_parameter
wrong JSON type                ``Invalid type for '<p>': expected a decimal, but got a string
                               instead.`` / invalid_type
value not in an enum           ``Invalid value: 'x'. Supported values are: 'a', 'b', and 'c'.``
                               / invalid_value
number out of range            ``Invalid '<p>': decimal above maximum value. Expected a value <=
                               2, but got 3 instead.`` / decimal_above_max_value (also
                               ``decimal_below_min_value``, ``integer_above_max_value``,
                               ``integer_below_min_value``)
empty / too long string        ``empty_string`` / ``string_above_max_length``
too many metadata pairs        ``object_above_max_properties``
body not a JSON object         ``Invalid type for 'body': expected an object, ...`` / invalid_type,
                               param null
body not valid JSON            OpenAI's "We could not parse the JSON body ..." / invalid_json
anything else                  ``Invalid '<p>': <pydantic's message>.`` / invalid_value
=============================  ===============================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from responses_gateway.errors import InvalidRequestError
from responses_gateway.protocol.fields import (
    Closed as _Closed,
    Lenient as _Lenient,
    NonEmptyStr,
    bounded as _bounded,
    custom_error as _custom,
    object_union,
    string_or_object as _string_or_object,
    tagged_union_by_type,
)
from responses_gateway.protocol.items import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputFilePart,
    InputImagePart,
    InputItem,
    InputTextPart,
    McpApprovalRequestItem,
    McpApprovalResponseItem,
    McpCallItem,
    McpListToolsItem,
    MessageItem,
    OutputTextPart,
    ReasoningItem,
    RefusalPart,
)
from responses_gateway.protocol.tools import (
    HOSTED_TOOL_FIELDS,
    FunctionTool,
    McpApprovalFilter,
    McpTool,
    McpToolFilter,
    OpaqueTool,
    Tool,
)

__all__ = [
    "INT32_MAX",
    "AllowedToolsChoice",
    "ContextManagement",
    "ConversationRef",
    "CreateResponseRequest",
    "FunctionTool",
    "FunctionToolChoice",
    "McpApprovalFilter",
    "McpTool",
    "McpToolChoice",
    "McpToolFilter",
    "OpaqueTool",
    "OpaqueToolChoice",
    "PromptRef",
    "ReasoningParam",
    "StreamOptions",
    "TextFormatJsonObject",
    "TextFormatJsonSchema",
    "TextFormatText",
    "TextParam",
    "Tool",
    "ToolChoice",
    "check_metadata",
    "echo_fields",
    "input_items",
    "one_history_source",
    "parse_body",
    "parse_create_request",
    "public_server_url",
    "request_input",
    "to_invalid_request",
]

Body = TypeVar("Body", bound=BaseModel)

METADATA_MAX_PAIRS = 16
METADATA_MAX_KEY_CHARS = 64
METADATA_MAX_VALUE_CHARS = 512


# --------------------------------------------------------------------------- range checks


Temperature = Annotated[float, _bounded("decimal", 0, 2)]
TopP = Annotated[float, _bounded("decimal", 0, 1)]
TopLogprobs = Annotated[int, _bounded("integer", 0, 20)]
Penalty = Annotated[float, _bounded("decimal", -2, 2)]
INT32_MAX = 2_147_483_647
"""The largest value an integer parameter takes (OpenAI's bound for unbounded counts)."""
MaxOutputTokens = Annotated[int, _bounded("integer", 16, INT32_MAX)]
MaxToolCalls = Annotated[int, _bounded("integer", 1, INT32_MAX)]
Int32 = Annotated[int, _bounded("integer", 0, INT32_MAX)]


# --------------------------------------------------------------------------- tool_choice


class FunctionToolChoice(_Closed):
    """``{"type":"function","name","namespace"?}`` (``namespace``: the function is one of a
    ``namespace`` tool's, as Codex names it)."""

    type: Literal["function"]
    name: str
    namespace: str | None = None


class McpToolChoice(_Closed):
    """``{"type":"mcp","server_label","name"?}``."""

    type: Literal["mcp"]
    server_label: str
    name: str | None = None


class AllowedToolsChoice(_Closed):
    """``{"type":"allowed_tools","mode":"auto"|"required","tools":[...]}``: the tools named as
    ``tools`` entries are (a function's ``name``, an MCP server's ``server_label``...)."""

    type: Literal["allowed_tools"]
    mode: Literal["auto", "required"]
    tools: list[Tool]


def _hosted_choice_type(kind: str) -> str:
    """A hosted-tool choice's ``type``: one of the hosted tool types (a choice can only name a
    tool a request may offer)."""
    if kind in HOSTED_TOOL_FIELDS:
        return kind
    raise _custom(
        "invalid_value",
        "Invalid value for '{param}': a tool choice names a tool type a request can offer "
        f"(function, mcp, allowed_tools or a hosted tool type), but got {kind!r}.",
    )


class OpaqueToolChoice(_Lenient):
    """A hosted-tool choice (``{"type":"web_search_preview"}``, ``custom``, ...): kept as is."""

    type: Annotated[str, AfterValidator(_hosted_choice_type)]


def _tool_choice_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "#mode"
    return tagged_union_by_type(
        {"function": "#function", "mcp": "#mcp", "allowed_tools": "#allowed_tools"},
        fallback="#other",
    )(value)


ToolChoice = Annotated[
    Annotated[Literal["none", "auto", "required"], Tag("#mode")]
    | Annotated[FunctionToolChoice, Tag("#function")]
    | Annotated[McpToolChoice, Tag("#mcp")]
    | Annotated[AllowedToolsChoice, Tag("#allowed_tools")]
    | Annotated[OpaqueToolChoice, Tag("#other")],
    object_union(_tool_choice_tag, "one of a string or an object"),
]
"""``tool_choice``: a mode string or an object naming a tool."""


# --------------------------------------------------------------------------- other parameters


class TextFormatText(_Closed):
    """``{"type":"text"}``."""

    type: Literal["text"]


class TextFormatJsonObject(_Closed):
    """``{"type":"json_object"}``."""

    type: Literal["json_object"]


class TextFormatJsonSchema(_Closed):
    """``{"type":"json_schema","name","schema","description"?,"strict"?}``."""

    model_config = ConfigDict(populate_by_name=True)

    type: Literal["json_schema"]
    name: NonEmptyStr
    schema_: dict[str, Any] = Field(alias="schema")
    description: str | None = None
    strict: bool | None = None


class _UnknownTextFormat(_Closed):
    type: Literal["text", "json_object", "json_schema"]


TextFormat = Annotated[
    Annotated[TextFormatText, Tag("#text")]
    | Annotated[TextFormatJsonObject, Tag("#json_object")]
    | Annotated[TextFormatJsonSchema, Tag("#json_schema")]
    | Annotated[_UnknownTextFormat, Tag("#unknown")],
    object_union(
        tagged_union_by_type(
            {"text": "#text", "json_object": "#json_object", "json_schema": "#json_schema"},
            fallback="#unknown",
        )
    ),
]


class TextParam(_Closed):
    """``text``: ``{"format":{...},"verbosity"?}``."""

    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None


class ReasoningParam(_Closed):
    """``reasoning``: ``{"effort","summary","generate_summary","context","mode"}``; ``context``
    is checked against the SDK's values, since every Response echoes it; ``mode`` is any string
    (OpenAI's spec: ``standard``, ``pro`` or another)."""

    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    context: Literal["auto", "current_turn", "all_turns"] | None = None
    mode: str | None = None


class StreamOptions(_Closed):
    """``stream_options``: ``{"include_obfuscation": bool}``."""

    include_obfuscation: bool | None = None


class ConversationRef(_Closed):
    """``conversation`` as an object: ``{"id"}``."""

    id: str


ConversationParam = Annotated[
    Annotated[str, Tag("#string")] | Annotated[ConversationRef, Tag("#object")],
    object_union(_string_or_object, "one of a string or an object"),
]


class PromptRef(_Closed):
    """``prompt``: a stored prompt template ``{"id","version"?,"variables"?}``."""

    id: str
    version: str | None = None
    variables: dict[str, Any] | None = None


class ContextManagement(_Closed):
    """One ``context_management`` entry: ``{"type":"compaction","compact_threshold"?}``."""

    type: str
    compact_threshold: Int32 | None = None


PromptCacheRetention = Literal["in_memory", "24h"]
ServiceTier = Literal["auto", "default", "flex", "scale", "priority", "fast", "ultrafast"]

InputParam = Annotated[
    Annotated[str, Tag("#text")] | Annotated[list[InputItem], Tag("#list")],
    Discriminator(
        lambda value: (
            "#text" if isinstance(value, str) else "#list" if isinstance(value, list) else None
        ),
        custom_error_type="invalid_type",
        custom_error_message="one of a string or an array of input items",
    ),
]


# --------------------------------------------------------------------------- the request


class CreateResponseRequest(_Lenient):
    """The body of ``POST /v1/responses``: every field of the SDK's ``ResponseCreateParams``, and
    the Open Responses spec's ``presence_penalty`` / ``frequency_penalty``.

    Fields the gateway does not act on (``access_programs``, ``background_options``, ``image``,
    ``moderation``, ``prompt_cache_options``...) are validated only as JSON objects. Unknown keys
    are accepted and kept in ``model_extra``.
    """

    model: NonEmptyStr
    input: InputParam | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: ConversationParam | None = None
    store: bool | None = None
    background: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: MaxToolCalls | None = None
    max_output_tokens: MaxOutputTokens | None = None
    reasoning: ReasoningParam | None = None
    text: TextParam | None = None
    temperature: Temperature | None = None
    top_p: TopP | None = None
    top_logprobs: TopLogprobs | None = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    truncation: Literal["auto", "disabled"] | None = None
    include: list[str] | None = None
    metadata: dict[str, str] | None = None
    prompt: PromptRef | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: PromptCacheRetention | None = None
    prompt_cache_options: dict[str, Any] | None = None
    safety_identifier: Annotated[str, Field(max_length=64)] | None = None
    service_tier: ServiceTier | None = None
    user: str | None = None
    context_management: list[ContextManagement] | None = None
    access_programs: dict[str, Any] | None = None
    background_options: dict[str, Any] | None = None
    image: dict[str, Any] | None = None
    moderation: dict[str, Any] | None = None

    @field_validator("metadata")
    @classmethod
    def _metadata_limits(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else check_metadata(value)

    @model_validator(mode="after")
    def _one_history_source(self) -> CreateResponseRequest:
        one_history_source(self.previous_response_id, self.conversation)
        return self

    @model_validator(mode="after")
    def _chosen_function_offered(self) -> CreateResponseRequest:
        chosen_function_offered(self.tool_choice, self.tools, self.input)
        return self


_TOOLS_FROM_ELSEWHERE = frozenset({"namespace", "tool_search"})
"""Tool types through which a function may be offered without its name in ``tools``."""
_ITEMS_OFFERING_TOOLS = frozenset({"additional_tools", "tool_search_output"})


def chosen_function_offered(choice: Any, tools: Any, items: Any) -> None:
    """Refuse a ``tool_choice`` naming a function, or an MCP server, the request does not offer
    (OpenAI answers 400 too): nothing could satisfy it, on any wire. Tools that may come from
    elsewhere (a namespace, a tool search, tools an input item offers) are not second-guessed."""
    if not isinstance(choice, FunctionToolChoice | McpToolChoice):
        return
    offered = list(tools or ())
    if any(getattr(tool, "type", None) in _TOOLS_FROM_ELSEWHERE for tool in offered):
        return
    if isinstance(items, list) and any(
        getattr(item, "type", None) in _ITEMS_OFFERING_TOOLS for item in items
    ):
        return
    if isinstance(choice, McpToolChoice):
        labels = {tool.server_label for tool in offered if isinstance(tool, McpTool)}
        if choice.server_label not in labels:
            raise _custom(
                "invalid_value",
                "Invalid value for 'tool_choice': no MCP server labelled "
                f"'{choice.server_label}' is among the request's tools.",
                "tool_choice",
            )
        return
    if choice.name not in {tool.name for tool in offered if isinstance(tool, FunctionTool)}:
        raise _custom(
            "invalid_value",
            f"Invalid value for 'tool_choice': no function named '{choice.name}' is among the "
            "request's tools.",
            "tool_choice",
        )


def check_metadata(value: dict[str, str]) -> dict[str, str]:
    """``metadata`` within OpenAI's limits (16 pairs, keys <= 64, values <= 512 characters),
    or the error naming the breach; every door's ``metadata`` is checked by it."""
    if len(value) > METADATA_MAX_PAIRS:
        raise _custom(
            "object_above_max_properties",
            "Invalid '{param}': too many properties. Expected an object with at most "
            f"{METADATA_MAX_PAIRS} properties, but got an object with {len(value)} "
            "properties instead.",
        )
    for key, item in value.items():
        if len(key) > METADATA_MAX_KEY_CHARS:
            raise _custom(
                "string_above_max_length",
                "Invalid '{param}': key too long. Expected a key with maximum length "
                f"{METADATA_MAX_KEY_CHARS}, but got a key with length {len(key)} instead.",
            )
        if len(item) > METADATA_MAX_VALUE_CHARS:
            raise _custom(
                "string_above_max_length",
                "Invalid '{param}': string too long. Expected a string with maximum length "
                f"{METADATA_MAX_VALUE_CHARS}, but got a string with length {len(item)} "
                "instead.",
                key,
            )
    return value


def one_history_source(previous_response_id: str | None, conversation: Any) -> None:
    """Refuse a body naming both a previous response and a conversation (OpenAI's words)."""
    if conversation is not None and previous_response_id is not None:
        raise _custom(
            "mutually_exclusive_parameters",
            "Mutually exclusive parameters: Ensure you are only providing one of: "
            "'previous_response_id' or 'conversation'.",
            "conversation",
        )


# --------------------------------------------------------------------------- error mapping

_EXPECTED: dict[str, str] = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a decimal",
    "bool_type": "a boolean",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
    "tuple_type": "an array",
}
_FINAL_MESSAGE_CODES = frozenset(
    {
        "decimal_below_min_value",
        "decimal_above_max_value",
        "integer_below_min_value",
        "integer_above_max_value",
        "empty_string",
        "string_above_max_length",
        "object_above_max_properties",
        "array_above_max_length",
        "mutually_exclusive_parameters",
        "missing_required_parameter",
        "invalid_value",
        "invalid_function_parameters",
    }
)
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'")

_INVALID_JSON_MESSAGE = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
    "your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was "
    "not valid JSON. If you have trouble figuring out how to fix this, please contact us through "
    "our help center at help.openai.com.)"
)


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return "an unsupported value"


def _param(loc: tuple[int | str, ...], field: Any = None) -> str | None:
    path = ""
    for segment in loc:
        if isinstance(segment, int):
            path += f"[{segment}]"
        elif segment.startswith("#") or segment == "[key]":
            continue
        else:
            path += f".{segment}" if path else segment
    if isinstance(field, str):
        path += f".{field}" if path and not field.startswith("[") else field
    return path or None


def _english_list(values: list[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _describe(error: ErrorDetails) -> tuple[str, str, str | None]:
    """``(message, code, param)`` for one pydantic error, in OpenAI's words."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    param = _param(error["loc"], ctx.get("field"))
    shown = param or "body"
    value = error.get("input")
    if kind == "missing":
        return f"Missing required parameter: '{shown}'.", "missing_required_parameter", param
    if kind == "extra_forbidden":
        return f"Unknown parameter: '{shown}'.", "unknown_parameter", param
    if kind in _EXPECTED or kind == "invalid_type":
        expected = _EXPECTED.get(kind) or error["msg"]
        return (
            f"Invalid type for '{shown}': expected {expected}, but got {_json_kind(value)} "
            "instead.",
            "invalid_type",
            param,
        )
    if kind == "literal_error":
        supported = _english_list(_QUOTED.findall(str(ctx.get("expected", ""))))
        if value is None:  # a null where a value is required (``type: null``...)
            message = f"Invalid type for '{shown}': expected one of {supported}, but got null "
            return message + "instead.", "invalid_type", param
        message = f"Invalid value: {value!r}. Supported values are: {supported}."
        return message, "invalid_value", param
    if kind in _FINAL_MESSAGE_CODES:
        return error["msg"].replace("{param}", shown), kind, param
    if kind == "json_invalid":
        return _INVALID_JSON_MESSAGE, "invalid_json", None
    if kind == "finite_number":
        return f"Invalid '{shown}': expected a finite number.", "invalid_value", param
    detail = error["msg"].rstrip(".")
    return f"Invalid '{shown}': {detail[:1].lower()}{detail[1:]}.", "invalid_value", param


def to_invalid_request(error: ValidationError) -> InvalidRequestError:
    """The :class:`InvalidRequestError` (400) for the first error of a validation failure."""
    message, code, param = _describe(error.errors(include_url=False)[0])
    return InvalidRequestError(message, code=code, param=param)


def parse_create_request(body: Any) -> CreateResponseRequest:
    """Validate a create-response body.

    Args:
        body: the parsed JSON body (a ``dict``), or the raw JSON text (``bytes``, ``bytearray``
            or ``str``), which is parsed and validated in one pass (faster, and the way to get
            OpenAI's "could not parse the JSON body" error).

    Returns:
        The validated request.

    Raises:
        InvalidRequestError: the body is not a JSON object or breaks a rule; ``param`` is the
            JSON path of the first problem.
    """
    return parse_body(CreateResponseRequest, body)


def parse_body(model: type[Body], body: Any) -> Body:
    """Validate ``body`` (parsed JSON, or raw JSON text) as ``model``, with the error mapping
    above: the one parser of every door's body (see :mod:`responses_gateway.protocol.bodies`).

    Raises:
        InvalidRequestError: the body is not a JSON object or breaks a rule; ``param`` is the
            JSON path of the first problem.
    """
    try:
        if isinstance(body, bytes | bytearray | str):
            return model.model_validate_json(body)
        if not isinstance(body, Mapping):
            raise InvalidRequestError(
                f"Invalid type for 'body': expected an object, but got {_json_kind(body)} instead.",
                code="invalid_type",
            )
        return model.model_validate(body)
    except ValidationError as error:
        raise to_invalid_request(error) from None


# --------------------------------------------------------------------------- echo


def public_server_url(url: str) -> str:
    """``scheme://host[:port]`` of an MCP server URL: no userinfo, path, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return ""
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _echo_tool(tool: FunctionTool | McpTool | OpaqueTool) -> dict[str, Any]:
    if isinstance(tool, FunctionTool):
        echoed = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "strict": tool.strict,
        }
        echoed.update(tool.model_extra or {})
        return echoed
    echoed = _dump(tool)
    if isinstance(tool, McpTool):
        echoed.pop("headers", None)
        echoed.pop("authorization", None)
        if tool.server_url is not None:
            echoed["server_url"] = public_server_url(tool.server_url)
    return echoed


def echo_fields(req: CreateResponseRequest) -> dict[str, Any]:
    """The request fields every Response object echoes, as the client set them; JSON-ready.

    This is what the loop keeps as ``state.request``: the driver forwards the settings the client
    set (never a default) and :func:`responses_gateway.loop.render.render_response` shows them
    through :func:`~responses_gateway.loop.render.echoed`, which puts OpenAI's effective values in
    the place of the sampling settings left unset. "What we forward" and "what we echo" are
    therefore two values of one record. Keys are always present, in this (alphabetical) order;
    defaults when the client omits a field:

    ``background`` false; ``conversation`` ``{"id"}`` or null; ``instructions`` null;
    ``max_output_tokens`` / ``max_tool_calls`` null; ``metadata`` ``{}``;
    ``parallel_tool_calls`` true; ``previous_response_id`` / ``prompt`` / ``prompt_cache_key`` /
    ``prompt_cache_retention`` null; ``reasoning`` ``{"effort":null,"summary":null}`` (given keys
    added); ``safety_identifier`` null; ``service_tier`` ``"auto"`` (OpenAI's default);
    ``store`` true; ``temperature``, ``top_p``, ``top_logprobs``, ``presence_penalty`` and
    ``frequency_penalty`` null (unset: not forwarded; the Response shows
    ``render.SAMPLING_DEFAULTS``, and a ``json_schema`` text format's unset ``description`` and
    ``strict`` as ``""`` and false); ``text`` ``{"format":{"type":"text"}}``; ``tool_choice``
    ``"auto"``; ``tools`` ``[]``; ``truncation`` ``"disabled"``; ``user`` null (left out of the
    Response).

    ``tools`` never carry secrets: MCP ``headers`` and ``authorization`` are dropped and
    ``server_url`` is cut to ``scheme://host[:port]``. Function tools always show
    ``description``, ``parameters`` and ``strict`` (null when unset).
    """
    conversation = req.conversation
    if isinstance(conversation, ConversationRef):
        conversation_echo: dict[str, Any] | None = {"id": conversation.id}
    elif isinstance(conversation, str):
        conversation_echo = {"id": conversation}
    else:
        conversation_echo = None
    reasoning: dict[str, Any] = {"effort": None, "summary": None}
    if req.reasoning is not None:
        reasoning.update(_dump(req.reasoning))
    text: dict[str, Any] = {"format": {"type": "text"}}
    if req.text is not None:
        text.update(_dump(req.text))

    tool_choice = req.tool_choice
    return {
        "background": bool(req.background),
        "conversation": conversation_echo,
        "frequency_penalty": req.frequency_penalty,
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "max_tool_calls": req.max_tool_calls,
        "metadata": dict(req.metadata or {}),
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "presence_penalty": req.presence_penalty,
        "previous_response_id": req.previous_response_id,
        "prompt": _dump(req.prompt) if req.prompt is not None else None,
        "prompt_cache_key": req.prompt_cache_key,
        "prompt_cache_retention": req.prompt_cache_retention,
        "reasoning": reasoning,
        "safety_identifier": req.safety_identifier,
        "service_tier": req.service_tier or "auto",
        "store": req.store is not False,
        "temperature": req.temperature,
        "text": text,
        "tool_choice": (
            "auto"
            if tool_choice is None
            else tool_choice
            if isinstance(tool_choice, str)
            else _dump(tool_choice)
        ),
        "tools": [_echo_tool(tool) for tool in req.tools or ()],
        "top_logprobs": req.top_logprobs,
        "top_p": req.top_p,
        "truncation": req.truncation or "disabled",
        "user": req.user,
    }


def request_input(req: CreateResponseRequest) -> str | list[dict[str, Any]] | None:
    """The request's ``input`` as JSON-ready data, ready for ``prepare_input`` (see
    :func:`input_items`)."""
    if req.input is None or isinstance(req.input, str):
        return req.input
    return input_items(req.input)


_MODELLED_ITEMS = (
    MessageItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    ReasoningItem,
    McpListToolsItem,
    McpApprovalRequestItem,
    McpApprovalResponseItem,
    McpCallItem,
)
"""Input items modelled field by field: a key none of their fields names is dropped."""
_MODELLED_PARTS = (InputTextPart, InputImagePart, InputFilePart, OutputTextPart, RefusalPart)


def _without_extras(model: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    for key in model.model_extra or {}:
        data.pop(key, None)
    return data


def input_items(items: list[Any]) -> list[dict[str, Any]]:
    """Validated input items as JSON-ready data, with the keys the client sent, plus ``type``
    on messages and item references that omitted it.

    [rule] A key that no field of a modelled item (:data:`_MODELLED_ITEMS`) or message content
    part names is dropped here: no wire forwards it (the Responses adapter rebuilds those items
    from their fields), so it is not stored or listed back either. Clients do send such keys
    (Codex: ``internal_chat_message_metadata_passthrough`` on messages), so they are not
    refused. Relayed item types (the upstream's, :mod:`~responses_gateway.protocol.
    relayed_items`) keep every key: they are forwarded as sent.
    """
    dumped: list[dict[str, Any]] = []
    for item in items:
        data = _dump(item)
        if isinstance(item, _MODELLED_ITEMS):
            _without_extras(item, data)
        if isinstance(item, MessageItem) and isinstance(item.content, list):
            data["content"] = [
                _without_extras(part, entry) if isinstance(part, _MODELLED_PARTS) else entry
                for part, entry in zip(item.content, data["content"], strict=True)
            ]
        if "type" not in data:
            data["type"] = "item_reference" if "role" not in data else "message"
        dumped.append(data)
    return dumped
