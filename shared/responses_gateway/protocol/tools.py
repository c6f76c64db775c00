"""The tool models of a request: one element of ``tools``, wherever tools enter.

Owns :data:`Tool` (``function`` and ``mcp`` tools field by field, every other type an
:class:`OpaqueTool` with a string ``type``) and its parts. A create's ``tools``, the
``input_tokens`` body's and the tools an input item offers (``additional_tools``,
``tool_search_output``) are all validated with it, so an odd tool is the same 400 with the same
``param`` path wherever it comes in. Decides nothing about running a tool
(:mod:`responses_gateway.tool_kinds` does).

* ``function`` tools need a non-empty ``name``; their ``parameters`` must be a JSON Schema of an
  object (:mod:`responses_gateway.protocol.schema_check`): 400 ``invalid_function_parameters``
  on ``tools[i].parameters``, "Invalid schema for function '<name>': ...".
* ``mcp`` tools need ``server_label``; a ``server_url`` must be an ``http(s)`` URL with a host
  (without one, the label selects an operator-configured server: the tool registry checks that).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, Tag, model_validator

from responses_gateway.protocol.fields import (
    REQUIRED,
    Closed,
    Lenient,
    NonEmptyStr,
    custom_error,
    list_or_object,
    models_from_table,
    object_union,
    optional,
    string_or_object,
    tagged_union_by_type,
    union_of,
)
from responses_gateway.protocol.schema_check import schema_problem

__all__ = [
    "HOSTED_TOOL_FIELDS",
    "FunctionTool",
    "McpApprovalFilter",
    "McpTool",
    "McpToolFilter",
    "OfferedTool",
    "OpaqueTool",
    "Tool",
]


Callers = Annotated[list[Literal["direct", "programmatic"]], Field(min_length=1)]
"""A tool's ``allowed_callers``: the contexts that may invoke it (the SDK's values)."""


class FunctionTool(Closed):
    """``{"type":"function","name","description","parameters","strict"}``."""

    type: Literal["function"]
    name: NonEmptyStr
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    allowed_callers: Callers | None = None
    output_schema: dict[str, Any] | None = None
    defer_loading: bool | None = None

    @model_validator(mode="after")
    def _parameters_are_a_schema(self) -> FunctionTool:
        problem = None if self.parameters is None else schema_problem(self.parameters)
        if problem:
            raise custom_error(
                "invalid_function_parameters",
                f"Invalid schema for function '{self.name}': {problem}.",
                "parameters",
            )
        return self


class McpToolFilter(Closed):
    """``{"tool_names":[...],"read_only":bool}``, used by ``allowed_tools`` and approvals."""

    tool_names: list[str] | None = None
    read_only: bool | None = None


class McpApprovalFilter(Closed):
    """``require_approval`` as ``{"always":{tool_names},"never":{tool_names}}``."""

    always: McpToolFilter | None = None
    never: McpToolFilter | None = None


McpAllowedTools = Annotated[
    Annotated[list[str], Tag("#list")] | Annotated[McpToolFilter, Tag("#object")],
    object_union(list_or_object, "one of an array of strings or an object"),
]
McpRequireApproval = Annotated[
    Annotated[Literal["always", "never"], Tag("#string")]
    | Annotated[McpApprovalFilter, Tag("#object")],
    object_union(string_or_object, "one of a string or an object"),
]


def _check_server_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class McpTool(Closed):
    """A remote MCP server the gateway may call on the model's behalf.

    ``headers`` and ``authorization`` are secrets: they are used for the calls and never echoed.
    When ``require_approval`` is omitted, approval is required (OpenAI's default).
    """

    type: Literal["mcp"]
    server_label: NonEmptyStr
    server_url: str | None = None
    connector_id: str | None = None
    tunnel_id: str | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None
    server_description: str | None = None
    allowed_tools: McpAllowedTools | None = None
    require_approval: McpRequireApproval | None = None
    allowed_callers: Callers | None = None
    defer_loading: bool | None = None

    @model_validator(mode="after")
    def _needs_a_server(self) -> McpTool:
        if self.server_url is not None and not _check_server_url(self.server_url):
            raise custom_error(
                "invalid_value",
                "Invalid '{param}': expected an http or https URL with a host.",
                "server_url",
            )
        # No server_url: the label may select an operator-configured server; the tool
        # registry decides (and answers 400 for an unknown label).
        return self


class OpaqueTool(Lenient):
    """A tool type the gateway does not run itself (``web_search``, ``custom``, ...): kept as is."""

    type: str


Obj = dict[str, Any]
_SIZE = Literal["low", "medium", "high"]


class UserLocation(Lenient):
    """A web search's approximate ``user_location``."""

    type: Literal["approximate"] | None = None
    city: str | None = None
    country: str | None = None
    region: str | None = None
    timezone: str | None = None


class ApproximateLocation(UserLocation):
    """A preview web search's ``user_location``: its ``type`` is required."""

    type: Literal["approximate"]


class HybridSearch(Lenient):
    """A file search's ``ranking_options.hybrid_search`` weights."""

    embedding_weight: float
    text_weight: float


class RankingOptions(Lenient):
    """A file search's ``ranking_options``."""

    ranker: str | None = None
    score_threshold: float | None = None
    hybrid_search: HybridSearch | None = None


class WebSearchFilters(Lenient):
    """A web search's ``filters``."""

    allowed_domains: list[str] | None = None


def _filter_value(value: Any) -> Any:
    """A comparison's ``value``: a string, number or boolean, or an array of strings and
    numbers."""
    scalar = (str, int, float)
    if isinstance(value, (*scalar, bool)) or (
        isinstance(value, list)
        and all(isinstance(v, scalar) and not isinstance(v, bool) for v in value)
    ):
        return value
    raise custom_error(
        "invalid_type",
        "Invalid type for '{param}': expected a string, a number, a boolean or an array of "
        "strings and numbers.",
    )


Comparison = Literal["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]


class ComparisonFilter(Lenient):
    """A file search filter comparing one attribute: ``{"type","key","value"}``."""

    type: Comparison
    key: str
    value: Annotated[Any, AfterValidator(_filter_value)]


class CompoundFilter(Lenient):
    """File search filters combined: ``{"type": "and"|"or", "filters": [...]}``."""

    type: Literal["and", "or"]
    filters: list[FileSearchFilter]


FileSearchFilter = Annotated[
    Annotated[ComparisonFilter, Tag("#comparison")] | Annotated[CompoundFilter, Tag("#compound")],
    object_union(
        tagged_union_by_type(
            {
                **dict.fromkeys(get_args(Comparison), "#comparison"),
                "and": "#compound",
                "or": "#compound",
            },
            fallback="#comparison",
        )
    ),
]
CompoundFilter.model_rebuild()


# A network policy, a skill and an environment: the parts of the shell and code interpreter
# tools that a Response echoes, typed as the SDK types them (one table each).
class DomainSecret(Lenient):
    """A secret injected for one allowlisted domain."""

    domain: NonEmptyStr
    name: NonEmptyStr
    value: NonEmptyStr


NetworkPolicy = union_of(
    models_from_table(
        {
            "disabled": {},
            "allowlist": {
                "allowed_domains": (Annotated[list[str], Field(min_length=1)], REQUIRED),
                "domain_secrets": (Annotated[list[DomainSecret], Field(min_length=1)], None),
            },
        },
        Lenient,
        "NetworkPolicy",
    )
)


class SkillSource(Lenient):
    """An inline skill's payload: a base64 zip."""

    type: Literal["base64"]
    media_type: Literal["application/zip"]
    data: NonEmptyStr


class LocalSkill(Lenient):
    """A skill in a local environment: a directory."""

    name: str
    description: str
    path: str


Skill = union_of(
    models_from_table(
        {
            "skill_reference": {"skill_id": (NonEmptyStr, REQUIRED), "version": (str, None)},
            "inline": {
                "name": (str, REQUIRED),
                "description": (str, REQUIRED),
                "source": (SkillSource, REQUIRED),
            },
        },
        Lenient,
        "Skill",
    )
)
_MEMORY = Literal["1g", "4g", "16g", "64g"]
_CONTAINER: dict[str, tuple[Any, Any]] = {
    "file_ids": (list[str], None),
    "memory_limit": optional(_MEMORY),
    "network_policy": (NetworkPolicy, None),
}
ShellEnvironment = union_of(
    models_from_table(
        {
            "container_auto": {**_CONTAINER, "skills": (list[Skill], None)},  # type: ignore[valid-type]
            "local": {"skills": (list[LocalSkill], None)},
            "container_reference": {"container_id": (str, REQUIRED)},
        },
        Lenient,
        "Environment",
    )
)
_AUTO_CONTAINER = union_of(models_from_table({"auto": _CONTAINER}, Lenient, "Container"))
CodeInterpreterContainer = Annotated[
    Annotated[str, Tag("#string")] | Annotated[_AUTO_CONTAINER, Tag("#object")],  # type: ignore[valid-type]
    object_union(string_or_object, "one of a string or an object"),
]

_WEB_SEARCH: dict[str, tuple[Any, Any]] = {
    "search_context_size": optional(_SIZE),
    "user_location": optional(UserLocation),
    "filters": optional(WebSearchFilters),
    "external_web_access": optional(bool),
    "search_content_types": optional(list[str]),
}

CustomToolFormat = union_of(
    models_from_table(
        {
            "text": {},
            "grammar": {
                "definition": (str, REQUIRED),
                "syntax": (Literal["lark", "regex"], REQUIRED),
            },
        },
        Lenient,
        "Format",
    )
)
"""A custom tool's input ``format``: free text, or a grammar (the SDK's
``CustomToolInputFormat``)."""

_CUSTOM: dict[str, tuple[Any, Any]] = {
    "name": optional(NonEmptyStr),
    "description": optional(str),
    "format": optional(CustomToolFormat),
    "defer_loading": optional(bool),
    "allowed_callers": optional(Callers),
}
NamespacedTool = union_of(
    {"function": FunctionTool, **models_from_table({"custom": _CUSTOM}, OpaqueTool, "Tool")}
)
"""A tool inside a ``namespace``: a function or a custom tool (no other type)."""

_WEB_SEARCH_PREVIEW: dict[str, tuple[Any, Any]] = {
    "search_context_size": optional(_SIZE),
    "user_location": optional(ApproximateLocation),
    "search_content_types": (list[Literal["text", "image"]], None),
}

HOSTED_TOOL_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "apply_patch": {"allowed_callers": optional(Callers)},
    "code_interpreter": {
        "container": (CodeInterpreterContainer, REQUIRED),
        "allowed_callers": optional(Callers),
    },
    "computer": {},
    "computer_use_preview": {
        "display_height": optional(int),
        "display_width": optional(int),
        "environment": optional(str),
    },
    "custom": _CUSTOM,
    "file_search": {
        "vector_store_ids": (list[str], REQUIRED),
        "max_num_results": optional(int),
        "filters": optional(FileSearchFilter),
        "ranking_options": optional(RankingOptions),
    },
    "image_generation": {
        "action": (Literal["generate", "edit", "auto"], None),
        "model": optional(str),
        "quality": (Literal["low", "medium", "high", "auto"], None),
        "size": optional(str),
        "output_format": (Literal["png", "webp", "jpeg"], None),
        "background": (Literal["transparent", "opaque", "auto"], None),
        "moderation": (Literal["auto", "low"], None),
        "partial_images": (Annotated[int, Field(ge=0, le=3)], None),
        "output_compression": (Annotated[int, Field(ge=0, le=100)], None),
        "input_fidelity": optional(Literal["high", "low"]),
        "input_image_mask": optional(Obj),
    },
    "local_shell": {},
    "namespace": {
        "name": optional(str),
        "description": optional(str),
        "tools": (Annotated[list[NamespacedTool], Field(min_length=1)], None),  # type: ignore[valid-type]
    },
    "programmatic_tool_calling": {},
    "shell": {"environment": optional(ShellEnvironment), "allowed_callers": optional(Callers)},
    "tool_search": {
        "execution": optional(Literal["server", "client"]),
        "description": optional(str),
        "parameters": optional(Obj),
    },
    "web_search": _WEB_SEARCH,
    "web_search_2025_08_26": _WEB_SEARCH,
    "web_search_preview": _WEB_SEARCH_PREVIEW,
    "web_search_preview_2025_03_11": _WEB_SEARCH_PREVIEW,
}
"""Hosted tool type -> the fields of it that the SDK types, checked when present (the
gateway relays or lowers these tools), and required where the SDK and both specs require them
(a code interpreter's ``container``, a file search's ``vector_store_ids``: a Response echoing
the tool without them breaks its schema). Any other tool type is an :class:`OpaqueTool`."""

_TOOLS: dict[str, Any] = {
    "function": FunctionTool,
    "mcp": McpTool,
    **models_from_table(HOSTED_TOOL_FIELDS, OpaqueTool, "Tool"),
}

# ``Tool``: one element of a create's ``tools`` (an unknown type kept as an OpaqueTool).
# ``OfferedTool``: a tool an input item offers (``additional_tools``, ``tool_search_output``): one
# of the specs' ``Tool`` union, else ``invalid_value`` on its ``type``, since such items are
# stored and listed back as item resources, which hold their tools to that union.
if TYPE_CHECKING:
    Tool = FunctionTool | McpTool | OpaqueTool
    OfferedTool = FunctionTool | McpTool | OpaqueTool
else:
    Tool = union_of(_TOOLS, fallback=OpaqueTool)
    OfferedTool = union_of(_TOOLS)
