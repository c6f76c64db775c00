"""What one model call shows its wire: the client's tools and transcript, relayed or lowered.

Owns :func:`tool_view` (tools, transcript and ``tool_choice`` for one wire), :func:`lower_items`
(a transcript in function terms, for replay) and the hosted-tool policy
(:func:`hosted_tools_without_backend`). It asks :mod:`responses_gateway.tool_kinds.table` about
every kind and does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from responses_gateway.errors import InvalidRequestError
from responses_gateway.tool_kinds._shapes import tools_of
from responses_gateway.tool_kinds.table import (
    HOSTED_ITEM_TYPES,
    ITEM_KINDS,
    Exposed,
    ToolKind,
    exposed_for,
    exposed_name,
    hosted_seen,
    kind_of,
)

__all__ = [
    "HOSTED_POLICIES",
    "LOWERED_WIRES",
    "HostedPolicy",
    "ToolView",
    "allowed_tools_filter",
    "declared_tools",
    "hosted_tools_without_backend",
    "lower_items",
    "mcp_choice_as_functions",
    "tool_view",
]

HostedPolicy = Literal["omit", "reject"]
"""What a lowering wire does with a hosted tool that has no backend: drop it from what the model
sees (and say so in the ``x-gateway-omitted-tools`` response header), or answer 400."""

HOSTED_POLICIES: tuple[HostedPolicy, ...] = ("omit", "reject")

LOWERED_WIRES = frozenset({"chat", "harmony", "bedrock"})
"""Wires that only know functions: every other tool type is lowered to one."""


@dataclass(slots=True)
class ToolView:
    """What one model call offers and sends, for one wire."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    """Tool definitions for the upstream (Responses tools; ``function`` only when lowered)."""
    input: list[dict[str, Any]] = field(default_factory=list)
    """The transcript as the upstream sees it."""
    tool_choice: Any = None
    calls: dict[str, Exposed] = field(default_factory=dict)
    """Exposed name -> binding, for turning the model's calls back into items."""
    omitted: list[str] = field(default_factory=list)
    """Hosted tool types dropped from what the model sees."""


class _Exposer:
    def __init__(self, backed: frozenset[str]) -> None:
        self.backed = backed
        self.calls: dict[str, Exposed] = {}
        self.omitted: list[str] = []
        self.deferred: dict[str, Exposed] = {}

    def add(self, tool: dict[str, Any], namespace: str | None = None, loaded: bool = False) -> None:
        kind_name = str(tool.get("type") or "function")
        if kind_name == "namespace" and namespace is None:
            label = str(tool.get("name") or "")
            for inner in tools_of(tool):
                self.add(inner, label, loaded)
            return
        kind = kind_of(kind_name)
        if kind is None:
            return  # mcp (the gateway's own) or a type nobody can run here
        if kind.schema is None or (kind.hosted and kind.name not in self.backed):
            if kind_name not in self.omitted:
                self.omitted.append(kind_name)
            return
        name = tool.get("name") if isinstance(tool.get("name"), str) else None
        exposed = Exposed(exposed_for(kind, name, namespace), kind, tool, namespace)
        if tool.get("defer_loading") and not loaded:
            self.deferred.setdefault(exposed.name, exposed)
        else:
            self.calls.setdefault(exposed.name, exposed)


def declared_tools(tools: Iterable[dict[str, Any]], transcript: list[dict[str, Any]]) -> list[Any]:
    declared = [t for t in tools if t.get("type") != "mcp"]
    for item in transcript:
        if item.get("type") == "additional_tools":
            declared += tools_of(item)
    return declared


def tool_view(
    tools: Iterable[dict[str, Any]],
    transcript: list[dict[str, Any]],
    tool_choice: Any,
    wire: str,
    *,
    backed: frozenset[str] = frozenset(),
    results: Mapping[str, str] | None = None,
) -> ToolView:
    """What a model call over ``wire`` offers (``tools``: the request's, MCP excluded) and sends.

    Responses wire: tools and transcript pass unchanged. Lowering wires: see the module
    docstring; hosted tools are lowered when their kind is ``backed`` (the gateway runs them;
    ``results`` holds what each of this response's runs returned, by item id), else left out and
    listed in ``omitted``.
    """
    declared = declared_tools(tools, transcript)
    if wire not in LOWERED_WIRES:
        kept = [t for t in tools if t.get("type") != "mcp"]
        return ToolView(tools=kept, input=list(transcript), tool_choice=tool_choice)
    exposer = _Exposer(backed)
    for tool in declared:
        exposer.add(tool)
    for item in transcript:
        if item.get("type") == "tool_search_output":
            for tool in tools_of(item):
                exposer.add(tool, loaded=True)
    for name, deferred in exposer.deferred.items():
        if _loaded(name, transcript):
            exposer.calls.setdefault(name, deferred)
    return ToolView(
        tools=[exposed.function() for exposed in exposer.calls.values()],
        input=lower_items(transcript, results),
        tool_choice=_lower_choice(tool_choice, backed),
        calls=exposer.calls,
        omitted=exposer.omitted,
    )


def _loaded(name: str, transcript: list[dict[str, Any]]) -> bool:
    """Whether a deferred tool was loaded by a ``tool_search_output`` (matched by name)."""
    for item in transcript:
        if item.get("type") != "tool_search_output":
            continue
        for tool in tools_of(item):
            if tool.get("type") == "namespace":
                label = str(tool.get("name") or "")
                if any(exposed_name(label, str(t.get("name"))) == name for t in tools_of(tool)):
                    return True
            elif tool.get("name") == name:
                return True
    return False


def _choice_name(choice: Mapping[str, Any], backed: frozenset[str]) -> str | None:
    kind_name = str(choice.get("type"))
    if kind_name == "mcp":
        name = choice.get("name")
        return exposed_name(str(choice.get("server_label")), str(name)) if name else None
    kind = kind_of(kind_name)
    if kind is None or kind.schema is None or (kind.hosted and kind.name not in backed):
        return None
    name = choice.get("name") if isinstance(choice.get("name"), str) else None
    namespace = choice.get("namespace") if isinstance(choice.get("namespace"), str) else None
    return exposed_for(kind, name, namespace)


def allowed_tools_filter(
    choice: Any, backed: frozenset[str] = frozenset()
) -> Callable[[str], bool] | None:
    """For an ``allowed_tools`` choice on a lowering wire: which exposed function names the
    model may see (its named tools; an MCP server without a tool name: all its tools). None for
    every other choice (no restriction)."""
    if not isinstance(choice, Mapping) or choice.get("type") != "allowed_tools":
        return None
    names: set[str] = set()
    prefixes: list[str] = []
    for entry in choice.get("tools") or []:
        if not isinstance(entry, Mapping):
            continue
        name = _choice_name(entry, backed)
        if name is not None:
            names.add(name)
        elif entry.get("type") == "mcp" and entry.get("server_label"):
            prefixes.append(f"{entry['server_label']}__")
    return lambda exposed: exposed in names or exposed.startswith(tuple(prefixes))


def _lower_choice(choice: Any, backed: frozenset[str]) -> Any:
    """``tool_choice`` in function terms: a forced tool of any kind becomes its exposed
    function; a forced MCP server with no tool name, or a forced hosted tool, ``required``/
    ``auto``; ``allowed_tools`` keeps its mode."""
    if not isinstance(choice, Mapping):
        return choice
    kind_name = choice.get("type")
    if kind_name == "allowed_tools":
        return choice.get("mode") or "auto"
    name = _choice_name(choice, backed)
    if name is not None:
        return {"type": "function", "name": name}
    if kind_name == "mcp":
        return "required"
    return "auto"


def mcp_choice_as_functions(choice: Any, offered: Iterable[str]) -> Any:
    """``tool_choice`` for a Responses upstream, which sees the gateway's MCP tools as the
    functions it was ``offered`` (``<label>__<tool>``): a forced MCP tool becomes its function,
    a forced MCP server ``required``, and an ``allowed_tools`` entry naming a server becomes its
    functions. Every other choice passes as sent."""
    if not isinstance(choice, Mapping):
        return choice
    if choice.get("type") == "mcp":
        name = choice.get("name")
        label = str(choice.get("server_label"))
        return {"type": "function", "name": exposed_name(label, str(name))} if name else "required"
    if choice.get("type") != "allowed_tools" or not isinstance(choice.get("tools"), list):
        return choice
    entries: list[Any] = []
    for entry in choice["tools"]:
        if not isinstance(entry, Mapping) or entry.get("type") != "mcp":
            entries.append(entry)
        elif entry.get("name"):
            name = exposed_name(str(entry.get("server_label")), str(entry["name"]))
            entries.append({"type": "function", "name": name})
        else:
            prefix = f"{entry.get('server_label')}__"
            entries += [{"type": "function", "name": n} for n in offered if n.startswith(prefix)]
    return {**choice, "tools": entries}


# --------------------------------------------------------------------------- replay


def _call_name(item: dict[str, Any], kind: ToolKind) -> str:
    namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
    name = item.get("name") if isinstance(item.get("name"), str) else None
    return exposed_for(kind, name, namespace)


def lower_items(
    items: list[dict[str, Any]], results: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """A transcript in function terms: every tool call item becomes a ``function_call`` under
    its exposed name, every tool output a ``function_call_output``. A hosted-tool item that
    carries its result (the gateway ran it through a backend: ``action.sources``, ``results``,
    ``outputs``, ``result``) becomes a call followed by that result; within the response that
    ran it, by what the backend answered in full (``results``, by item id). Other hosted-tool
    items and ``additional_tools`` are left out (no function wire can show them)."""
    out: list[dict[str, Any]] = []
    results = results or {}
    for item in items:
        kind_name = str(item.get("type") or "")
        seen = results.get(str(item.get("id"))) if kind_name in HOSTED_ITEM_TYPES else None
        if kind_name in HOSTED_ITEM_TYPES and seen is None:
            seen = hosted_seen(item)
        if seen is not None:
            hosted = ITEM_KINDS[kind_name]
            assert hosted.arguments is not None
            call_id = str(item["id"])
            name = exposed_for(hosted, None, None)
            out.append(
                {"type": "function_call", "call_id": call_id, "name": name,
                 "arguments": hosted.arguments(item)}
            )  # fmt: skip
            out.append({"type": "function_call_output", "call_id": call_id, "output": seen})
            continue
        if kind_name == "additional_tools" or kind_name in HOSTED_ITEM_TYPES:
            continue
        kind = ITEM_KINDS.get(kind_name)
        plain_function = kind_name.startswith("function_call") and not item.get("namespace")
        if kind is None or plain_function:
            out.append(item)
        elif kind_name == kind.item_type:
            assert kind.arguments is not None
            call = {
                "type": "function_call",
                "call_id": item.get("call_id") or item.get("id"),
                "name": _call_name(item, kind),
                "arguments": kind.arguments(item),
            }
            out.append({"id": item["id"], **call} if item.get("id") else call)
        else:
            out.append(
                {
                    "type": "function_call_output",
                    # the SDK's local_shell_call_output names its call by ``id`` alone
                    "call_id": item.get("call_id") or item.get("id"),
                    "output": kind.output_text(item),
                }
            )
    return out


# --------------------------------------------------------------------------- hosted policy


def hosted_tools_without_backend(
    tools: Iterable[dict[str, Any]],
    wire: str,
    policy: HostedPolicy,
    backed: frozenset[str] = frozenset(),
) -> list[str]:
    """The hosted tool types a request over ``wire`` cannot run (to omit, with a signal): those
    whose kind is not ``backed``.

    Raises:
        InvalidRequestError: ``policy`` is ``reject`` and a hosted tool has no backend (400,
            ``param`` naming the tool).
    """
    if wire not in LOWERED_WIRES:
        return []
    omitted: list[str] = []
    for index, tool in enumerate(tools):
        kind_name = str(tool.get("type"))
        kind = kind_of(kind_name)
        if kind is None and kind_name not in ("mcp", "namespace", "function"):
            raise InvalidRequestError(
                f"Tool type '{kind_name}' is not supported by this gateway.",
                param=f"tools[{index}].type",
                code="unsupported_tool_type",
            )
        if kind is None or not kind.hosted or kind.name in backed:
            continue
        if policy == "reject":
            raise InvalidRequestError(
                f"Tool type '{kind_name}' cannot run on this model's provider: it has no "
                "backend for it here.",
                param=f"tools[{index}].type",
                code="unsupported_tool_type",
            )
        if kind_name not in omitted:
            omitted.append(kind_name)
    return omitted
