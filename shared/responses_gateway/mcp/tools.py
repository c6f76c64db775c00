"""The pure side of MCP tools: from a request's ``mcp`` tools to what the model sees, and back.

Owns, without any I/O:

- :func:`server_from_tool`: a request's :class:`~responses_gateway.protocol.request.McpTool` to
  the :class:`~responses_gateway.mcp.client.McpServer` the client dials;
  :func:`server_from_operator` does the same for an operator-configured server, and
  :func:`select_server` applies the selection rules (a ``server_url`` is always the request's own
  server; a label alone selects the operator server of that label);
- :func:`filter_allowed` (``allowed_tools``: a list of names, or ``{tool_names, read_only}``) and
  :func:`needs_approval` (``require_approval``: ``"always"``, ``"never"`` or ``{always, never}``
  filters; approval is required when it is omitted, as at OpenAI);
- :class:`ToolNames`: deterministic, collision-free function names (``<label>__<tool>``,
  sanitized to ``^[a-zA-Z0-9_-]{1,64}$``) with the reverse map;
- :class:`McpToolset`: all MCP servers of one request, with the function tool definitions for
  the model and the lookups the loop needs;
- ``mcp_list_tools`` items: :func:`list_tools_item` builds one from a listing, and
  :func:`tools_from_list_item` / :func:`listed_tools_in_context` read listings back from context
  so a server is listed once per context;
- :func:`error_text`: an ``mcp_call.error`` as text (what the model sees when a call failed).

It must not connect anywhere or import the client's transports, and never copies ``headers`` or
``authorization`` into anything it returns except :class:`McpServer`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from responses_gateway.config import OperatorMcpServer
from responses_gateway.errors import InvalidRequestError
from responses_gateway.ids import new_id
from responses_gateway.mcp.client import McpServer, ToolInfo
from responses_gateway.protocol.request import McpApprovalFilter, McpTool, McpToolFilter

__all__ = [
    "FUNCTION_NAME_PATTERN",
    "McpServer",
    "McpToolRef",
    "McpToolset",
    "ToolInfo",
    "ToolNames",
    "error_text",
    "filter_allowed",
    "function_tool",
    "list_tools_item",
    "listed_tools_in_context",
    "needs_approval",
    "select_server",
    "server_from_operator",
    "server_from_tool",
    "tools_from_list_item",
]

FUNCTION_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every function name handed to the model matches."""

_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME = 64
_HASH_CHARS = 8
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

AllowedTools = list[str] | McpToolFilter | None
RequireApproval = Literal["always", "never"] | McpApprovalFilter | None


# --------------------------------------------------------------------------- request tool -> server


def server_from_tool(tool: McpTool) -> McpServer:
    """The server a request's ``mcp`` tool names, with its headers and token.

    Raises:
        InvalidRequestError: the tool has no ``server_url`` (connectors and tunnels are not
            supported), or its headers break the rules of :class:`McpServer`.
    """
    if tool.server_url is None:
        raise InvalidRequestError(
            f"MCP server '{tool.server_label}': only 'server_url' is supported "
            "('connector_id' and 'tunnel_id' are not).",
            param="tools",
        )
    return McpServer(
        label=tool.server_label,
        url=tool.server_url,
        headers=dict(tool.headers or {}),
        authorization=tool.authorization,
    )


def server_from_operator(server: OperatorMcpServer) -> McpServer:
    """The trusted :class:`McpServer` of an operator-configured server (stdio or remote)."""
    if server.command is not None:
        return McpServer(
            label=server.server_label,
            transport="stdio",
            command=server.command,
            args=server.args,
            env=dict(server.env),
            trusted=True,
            shared=server.shared,
        )
    return McpServer(
        label=server.server_label,
        url=server.url or "",
        transport="auto" if server.transport == "stdio" else server.transport,
        headers=dict(server.headers),
        trusted=True,
    )


def select_server(
    tool: McpTool, operator_servers: Mapping[str, OperatorMcpServer], *, index: int
) -> McpServer:
    """The server a request's ``mcp`` tool (``tools[index]``) selects.

    - With a ``server_url``: the request's own server, under the SSRF policy, even when the
      operator configured a server with the same label (an explicit URL is never swapped).
    - Without one, a ``connector_id`` or ``tunnel_id``: not supported (400).
    - Otherwise the operator server labelled ``server_label``. The request may not send
      ``headers`` or ``authorization`` for it (400): the operator's credentials are the ones
      used, and a request's secrets are never sent to a server it did not name.

    Raises:
        InvalidRequestError: as above, or no operator server has that label (400 on
            ``tools[index].server_url``, ``missing_required_parameter``).
    """
    if tool.server_url is not None:
        return server_from_tool(tool)
    for field_name in ("connector_id", "tunnel_id"):
        if getattr(tool, field_name) is not None:
            raise InvalidRequestError(
                f"MCP server '{tool.server_label}': '{field_name}' is not supported by this "
                "gateway; give 'server_url', or the server_label of a server configured on it.",
                param=f"tools[{index}].{field_name}",
                code="unsupported_parameter",
            )
    operator = operator_servers.get(tool.server_label)
    if operator is None:
        raise InvalidRequestError(
            f"Missing required parameter: 'tools[{index}].server_url'. No MCP server labelled "
            f"'{tool.server_label}' is configured on this gateway; give 'server_url' to use "
            "your own server.",
            param=f"tools[{index}].server_url",
            code="missing_required_parameter",
        )
    for field_name in ("headers", "authorization"):
        if getattr(tool, field_name):
            raise InvalidRequestError(
                f"'{field_name}' cannot be set for the MCP server '{tool.server_label}': it is "
                "configured on this gateway, which supplies its credentials.",
                param=f"tools[{index}].{field_name}",
                code="invalid_value",
            )
    return server_from_operator(operator)


# --------------------------------------------------------------------------- filters


def _matches(tool_filter: McpToolFilter | None, tool: ToolInfo) -> bool:
    """Whether ``tool`` matches a ``{tool_names, read_only}`` filter (an empty one matches all;
    ``read_only: false`` adds no condition)."""
    if tool_filter is None:
        return False
    if tool_filter.tool_names is not None and tool.name not in tool_filter.tool_names:
        return False
    return not (tool_filter.read_only and not tool.read_only)


def filter_allowed(tools: Iterable[ToolInfo], allowed_tools: AllowedTools) -> list[ToolInfo]:
    """The tools ``allowed_tools`` lets the model see, in listing order.

    ``None`` allows every tool; a list allows those names; ``{tool_names, read_only}`` allows
    tools matching both conditions (``read_only: true`` keeps only ``readOnlyHint`` tools).
    """
    if allowed_tools is None:
        return list(tools)
    if isinstance(allowed_tools, McpToolFilter):
        return [tool for tool in tools if _matches(allowed_tools, tool)]
    names = set(allowed_tools)
    return [tool for tool in tools if tool.name in names]


def needs_approval(require_approval: RequireApproval, tool: ToolInfo) -> bool:
    """Whether a call of ``tool`` must be approved by the client first.

    ``None`` (omitted) and ``"always"`` require approval; ``"never"`` does not. With filters,
    a tool matching ``always`` requires approval, else one matching ``never`` does not, else
    approval is required (the default).
    """
    if require_approval is None or require_approval == "always":
        return True
    if require_approval == "never":
        return False
    if _matches(require_approval.always, tool):
        return True
    return not _matches(require_approval.never, tool)


# --------------------------------------------------------------------------- names


class ToolNames:
    """Function names for ``(server_label, tool_name)`` pairs, and the way back.

    A pair's name is ``<label>__<tool>`` with every character outside ``[a-zA-Z0-9_-]`` replaced
    by ``_``. When that is longer than 64 characters, taken by a ``reserved`` name (e.g. a
    client function tool) or shared by two pairs, each pair concerned gets a shortened name with
    a hash of the pair instead, so names depend only on the set of pairs, not on their order.
    """

    def __init__(self, pairs: Iterable[tuple[str, str]], *, reserved: Collection[str] = ()):
        unique = sorted(set(pairs))
        bases: dict[tuple[str, str], str] = {pair: _base_name(*pair) for pair in unique}
        counts: dict[str, int] = {}
        for base in bases.values():
            counts[base] = counts.get(base, 0) + 1
        self._names: dict[tuple[str, str], str] = {}
        self._pairs: dict[str, tuple[str, str]] = {}
        taken = set(reserved)
        deferred: list[tuple[str, str]] = []
        for pair, base in bases.items():
            if counts[base] == 1 and len(base) <= _MAX_NAME and base not in taken:
                self._assign(pair, base)
            else:
                deferred.append(pair)
        taken |= set(self._pairs)
        for pair in deferred:
            self._assign(pair, _hashed_name(bases[pair], pair, taken))
            taken.add(self._names[pair])

    def _assign(self, pair: tuple[str, str], name: str) -> None:
        self._names[pair] = name
        self._pairs[name] = pair

    def function_name(self, server_label: str, tool_name: str) -> str:
        """The name the model sees for ``tool_name`` of ``server_label``.

        Raises:
            KeyError: the pair was not given to the constructor.
        """
        return self._names[(server_label, tool_name)]

    def resolve(self, function_name: str) -> tuple[str, str] | None:
        """``(server_label, tool_name)`` for a name the model called, or ``None``."""
        return self._pairs.get(function_name)

    def __contains__(self, function_name: object) -> bool:
        return function_name in self._pairs

    def __len__(self) -> int:
        return len(self._pairs)


def _base_name(server_label: str, tool_name: str) -> str:
    return _INVALID_NAME_CHARS.sub("_", f"{server_label}__{tool_name}")


def _hashed_name(base: str, pair: tuple[str, str], taken: set[str]) -> str:
    digest = hashlib.sha256(f"{pair[0]}\x00{pair[1]}".encode()).hexdigest()
    for length in range(_HASH_CHARS, len(digest) + 1):
        suffix = digest[:length]
        name = f"{base[: _MAX_NAME - len(suffix) - 1]}_{suffix}"
        if name not in taken:
            return name
    raise AssertionError("sha256 prefixes cannot all be taken")  # pragma: no cover


# --------------------------------------------------------------------------- the request's toolset


@dataclass(frozen=True, slots=True)
class McpToolRef:
    """A model-visible MCP tool: where it lives and what it is called."""

    server_label: str
    tool: ToolInfo
    function_name: str
    """The name the model sees (and calls)."""


class McpToolset:
    """The MCP tools of one request: what the model is offered and how calls map back.

    Built from each ``mcp`` tool of the request with the tools its server listed (freshly, or
    read back from an ``mcp_list_tools`` item in context). ``allowed_tools`` is applied here, so
    only allowed tools are offered, named and resolvable.

    Args:
        servers: ``(request tool, listed tools)`` per server, in request order.
        reserved_names: Function names already used by the request (its function tools); MCP
            tools never take them.

    Raises:
        InvalidRequestError: two servers share a ``server_label``.
    """

    def __init__(
        self,
        servers: Sequence[tuple[McpTool, Sequence[ToolInfo]]],
        *,
        reserved_names: Collection[str] = (),
    ) -> None:
        self._requests: dict[str, McpTool] = {}
        self._tools: dict[str, list[ToolInfo]] = {}
        for request_tool, listed in servers:
            label = request_tool.server_label
            if label in self._requests:
                raise InvalidRequestError(
                    f"Duplicate MCP server_label '{label}': each MCP tool needs its own label.",
                    param="tools",
                )
            self._requests[label] = request_tool
            self._tools[label] = filter_allowed(listed, request_tool.allowed_tools)
        self._names = ToolNames(
            ((label, tool.name) for label, tools in self._tools.items() for tool in tools),
            reserved=reserved_names,
        )
        self._refs: dict[str, McpToolRef] = {}
        for label, tools in self._tools.items():
            for tool in tools:
                name = self._names.function_name(label, tool.name)
                self._refs[name] = McpToolRef(label, tool, name)

    @property
    def server_labels(self) -> list[str]:
        """The labels of the request's MCP servers, in request order."""
        return list(self._requests)

    def tools(self, server_label: str) -> list[ToolInfo]:
        """The allowed tools of one server, in listing order."""
        return list(self._tools[server_label])

    def server(self, server_label: str) -> McpServer:
        """The server to dial for ``server_label`` (with its secrets)."""
        return server_from_tool(self._requests[server_label])

    def model_tools(self) -> list[dict[str, Any]]:
        """Every allowed MCP tool as a Responses ``function`` tool definition."""
        return [function_tool(ref.function_name, ref.tool) for ref in self._refs.values()]

    def is_gateway_owned(self, function_name: str) -> bool:
        """Whether ``function_name`` is one of the MCP tools offered to the model."""
        return function_name in self._refs

    def resolve(self, function_name: str) -> McpToolRef | None:
        """The MCP tool behind a name the model called, or ``None``."""
        return self._refs.get(function_name)

    def function_name(self, server_label: str, tool_name: str) -> str | None:
        """The name the model sees for a server's tool, or ``None`` if it is not offered."""
        try:
            return self._names.function_name(server_label, tool_name)
        except KeyError:
            return None

    def needs_approval(self, server_label: str, tool_name: str) -> bool:
        """Whether calling ``tool_name`` on ``server_label`` needs the client's approval.

        Unknown servers and tools need approval (the safe answer).
        """
        request_tool = self._requests.get(server_label)
        if request_tool is None:
            return True
        for tool in self._tools[server_label]:
            if tool.name == tool_name:
                return needs_approval(request_tool.require_approval, tool)
        return True


def function_tool(function_name: str, tool: ToolInfo) -> dict[str, Any]:
    """A Responses ``function`` tool definition for an MCP tool.

    ``strict`` is false: MCP input schemas rarely meet strict mode's rules (every property
    required, no additional properties), and the Responses API defaults ``strict`` to true.
    """
    definition: dict[str, Any] = {"type": "function", "name": function_name}
    if tool.description is not None:
        definition["description"] = tool.description
    definition["parameters"] = tool.input_schema or dict(_EMPTY_SCHEMA)
    definition["strict"] = False
    return definition


# --------------------------------------------------------------------------- mcp_list_tools items


def list_tools_item(
    server_label: str,
    tools: Iterable[ToolInfo],
    *,
    error: str | None = None,
    item_id: str | None = None,
) -> dict[str, Any]:
    """An ``mcp_list_tools`` output item (pass the allowed tools; ``error`` for a failed
    listing, whose ``tools`` should be empty)."""
    return {
        "id": item_id or new_id("mcpl"),
        "type": "mcp_list_tools",
        "server_label": server_label,
        "tools": [
            {
                "name": tool.name,
                "input_schema": tool.input_schema,
                "description": tool.description,
                "annotations": tool.annotations,
            }
            for tool in tools
        ],
        "error": error,
    }


def tools_from_list_item(item: Mapping[str, Any] | BaseModel) -> list[ToolInfo]:
    """The tools recorded in an ``mcp_list_tools`` item (a dict or a parsed input item)."""
    data = _as_dict(item)
    tools: list[ToolInfo] = []
    for entry in data.get("tools") or []:
        entry = _as_dict(entry)
        schema = entry.get("input_schema")
        annotations = entry.get("annotations")
        description = entry.get("description")
        tools.append(
            ToolInfo(
                name=str(entry["name"]),
                input_schema=dict(schema) if isinstance(schema, Mapping) else dict(_EMPTY_SCHEMA),
                description=description if isinstance(description, str) else None,
                annotations=dict(annotations) if isinstance(annotations, Mapping) else None,
            )
        )
    return tools


def listed_tools_in_context(
    items: Iterable[Mapping[str, Any] | BaseModel],
) -> dict[str, list[ToolInfo]]:
    """The tools of each server label listed in ``items`` (history + input, in order).

    The latest successful ``mcp_list_tools`` item of a label wins; failed listings (with an
    ``error``) are ignored, so such a server is listed again.
    """
    listed: dict[str, list[ToolInfo]] = {}
    for item in items:
        data = _as_dict(item)
        if data.get("type") != "mcp_list_tools" or data.get("error"):
            continue
        label = data.get("server_label")
        if isinstance(label, str):
            listed[label] = tools_from_list_item(data)
    return listed


# --------------------------------------------------------------------------- errors as text


def error_text(error: str | Mapping[str, Any] | None) -> str:
    """An ``mcp_call.error`` (object, or the plain string older clients replay) as text."""
    if error is None:
        return ""
    if isinstance(error, str):
        return error
    if error.get("type") == "mcp_tool_execution_error":
        parts = []
        for block in error.get("content") or []:
            if isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            else:
                parts.append(str(block))
        return "\n".join(parts) or "The tool failed."
    message = error.get("message")
    code = error.get("code")
    if isinstance(message, str) and message:
        return message
    return f"MCP error {code}" if code is not None else "The MCP call failed."


def _as_dict(value: Mapping[str, Any] | BaseModel | Any) -> Mapping[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return value
    return {}
