"""The tool-kind table: how every Responses tool type is shown to each upstream wire.

Owns :data:`KINDS` (one :class:`ToolKind` per tool family: ``function``, ``custom``, ``shell``,
``local_shell``, ``apply_patch``, ``computer``, ``tool_search`` and the hosted tools) and the
three questions the rest of the gateway asks it:

* what the model sees (:func:`tool_view`): on the Responses wire, the client's tools relayed as
  they are; on the Chat Completions and harmony wires, each tool lowered to a ``function`` under a
  collision-free, turn-stable exposed name (namespaces flattened to ``<namespace>__<name>``,
  built-in tools under their type), the transcript's call items lowered to ``function_call`` /
  ``function_call_output`` pairs under the same names, and ``tool_choice`` mapped to the exposed
  function;
* what a call of an exposed function becomes (:meth:`Exposed.item`): the kind's own item
  (``custom_tool_call``, ``shell_call``, ``apply_patch_call``...) with the arguments mapped to its
  fields, plus the kind's stream events (:meth:`ToolKind.events`);
* what happens to a hosted tool (``web_search``, ``file_search``...) off the Responses wire, where
  nobody can run it: the provider's policy (:data:`HostedPolicy`) omits it, visibly, or rejects
  the request (:func:`hosted_tools_without_backend`).

Tools arriving in ``input`` count too: a Codex ``additional_tools`` item's tools are offered like
declared ones (the item itself never goes upstream on a lowering wire), and the tools of a
``tool_search_output`` item become callable. Tools marked ``defer_loading`` stay hidden until a
``tool_search_output`` loads them.

This module is pure data and pure functions: no I/O, no loop state, no events of its own. MCP
tools are not here: the gateway runs them (:mod:`responses_gateway.gateway_tools`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from responses_gateway.errors import InvalidRequestError

__all__ = [
    "CALL_ITEM_TYPES",
    "CLIENT_CALL_ITEM_TYPES",
    "HOSTED_ITEM_TYPES",
    "HOSTED_POLICIES",
    "ITEM_KINDS",
    "KINDS",
    "LOWERED_WIRES",
    "Exposed",
    "HostedPolicy",
    "ToolKind",
    "ToolView",
    "exposed_name",
    "hosted_tools_without_backend",
    "item_id_prefix",
    "kind_of",
    "lower_items",
    "runs_on_gateway",
    "search_tools",
    "tool_view",
]

HostedPolicy = Literal["omit", "reject"]
"""What a lowering wire does with a hosted tool that has no backend: drop it from what the model
sees (and say so in the ``x-gateway-omitted-tools`` response header), or answer 400."""

HOSTED_POLICIES: tuple[HostedPolicy, ...] = ("omit", "reject")

LOWERED_WIRES = frozenset({"chat", "harmony"})
"""Wires that only know functions: every other tool type is lowered to one."""

Runner = Literal["client", "upstream"]
"""Who runs a kind's calls: the client (its call item goes back to it), or the upstream
(OpenAI's hosted tools: only a Responses upstream can)."""


def _loads(arguments: str) -> dict[str, Any]:
    """A model's JSON arguments as an object; anything else as ``{}``."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _text(output: Any) -> str:
    """A call output as text for a ``function_call_output`` (text parts joined, else JSON)."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(isinstance(p, dict) for p in output):
        texts = [p.get("text") for p in output if isinstance(p.get("text"), str)]
        if len(texts) == len(output):
            return "\n".join(str(t) for t in texts)
    return _dumps(output)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    return None


_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def exposed_name(server_label: str, tool_name: str) -> str:
    """The function name a gateway tool is shown to the model under: ``<label>__<tool>``.

    Deterministic and collision-free: characters a function name cannot hold are replaced, and
    whenever that (or the 64-character limit) changed anything, a hash of the exact pair is
    appended, so two different pairs never share a name.
    """
    plain = f"{server_label}__{tool_name}"
    safe = _UNSAFE.sub("_", plain)
    if safe == plain and len(safe) <= 64:
        return safe
    digest = hashlib.sha256(f"{server_label}\0{tool_name}".encode()).hexdigest()[:8]
    return f"{safe[:55]}_{digest}"


# --------------------------------------------------------------------------- per-kind pieces


def _function_schema(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": tool.get("description"),
        "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        "strict": tool.get("strict"),
    }


def _custom_schema(tool: dict[str, Any]) -> dict[str, Any]:
    fmt = _obj(tool.get("format"))
    description = str(tool.get("description") or "")
    if fmt.get("type") == "grammar":
        syntax = fmt.get("syntax", "lark")
        hint = f"The input must match this {syntax} grammar:\n```\n{fmt.get('definition', '')}\n```"
    else:
        hint = "The input is free-form text."
    return {
        "description": f"{description}\n\n{hint}".strip(),
        "parameters": {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The raw input text."}},
            "required": ["input"],
            "additionalProperties": False,
        },
    }


_SHELL_SCHEMA = {
    "description": "Run shell commands. Returns each command's stdout, stderr and outcome.",
    "parameters": {
        "type": "object",
        "properties": {
            "commands": {"type": "array", "items": {"type": "string"}},
            "timeout_ms": {"type": "integer"},
            "max_output_length": {"type": "integer"},
        },
        "required": ["commands"],
    },
}
_LOCAL_SHELL_SCHEMA = {
    "description": "Execute a command on the local machine (argv form).",
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "timeout_ms": {"type": "integer"},
            "user": {"type": "string"},
            "working_directory": {"type": "string"},
        },
        "required": ["command"],
    },
}
_APPLY_PATCH_SCHEMA = {
    "description": (
        "Create, update or delete a file. update_file and create_file take a V4A diff; "
        "delete_file takes only the path."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["create_file", "update_file", "delete_file"]},
            "path": {"type": "string"},
            "diff": {"type": "string"},
        },
        "required": ["type", "path"],
    },
}
_COMPUTER_ACTIONS = [
    "click",
    "double_click",
    "drag",
    "keypress",
    "move",
    "screenshot",
    "scroll",
    "type",
    "wait",
]
_COMPUTER_SCHEMA = {
    "description": (
        "Control the computer: one action (click x,y,button; double_click x,y; drag path; "
        "keypress keys; move x,y; screenshot; scroll x,y,scroll_x,scroll_y; type text; wait)."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {
                "type": "object",
                "properties": {"type": {"type": "string", "enum": _COMPUTER_ACTIONS}},
                "required": ["type"],
            }
        },
        "required": ["action"],
    },
}
_TOOL_SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Search query for deferred tools."},
        "limit": {"type": "number", "description": "Maximum number of tools to return."},
    },
    "required": ["query"],
}


def _fixed(schema: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def lower(tool: dict[str, Any]) -> dict[str, Any]:
        return {**schema, "description": tool.get("description") or schema["description"]}

    return lower


def _tool_search_schema(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": tool.get("description")
        or "Search the deferred tools by name and description; matches become callable.",
        "parameters": tool.get("parameters") or _TOOL_SEARCH_PARAMETERS,
    }


# call arguments -> item fields


def _function_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"arguments": arguments, "name": exposed.inner_name}
    if exposed.namespace is not None:
        fields["namespace"] = exposed.namespace
    return fields


def _custom_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    value = parsed.get("input")
    # A model that answers with the raw text instead of {"input": ...} is taken at its word.
    text = value if isinstance(value, str) else arguments if not parsed else _dumps(parsed)
    fields: dict[str, Any] = {"input": text, "name": exposed.inner_name}
    if exposed.namespace is not None:
        fields["namespace"] = exposed.namespace
    return fields


def _shell_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    return {
        "action": {
            "commands": _strings(parsed.get("commands")),
            "timeout_ms": _int_or_none(parsed.get("timeout_ms")),
            "max_output_length": _int_or_none(parsed.get("max_output_length")),
        }
    }


def _local_shell_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    env = _obj(parsed.get("env"))
    return {
        "action": {
            "type": "exec",
            "command": _strings(parsed.get("command")),
            "env": {str(k): str(v) for k, v in env.items()},
            "timeout_ms": _int_or_none(parsed.get("timeout_ms")),
            "user": parsed.get("user") if isinstance(parsed.get("user"), str) else None,
            "working_directory": parsed.get("working_directory")
            if isinstance(parsed.get("working_directory"), str)
            else None,
        }
    }


def _apply_patch_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    kind = parsed.get("type")
    kind = kind if kind in ("create_file", "update_file", "delete_file") else "update_file"
    operation: dict[str, Any] = {"type": kind, "path": str(parsed.get("path") or "")}
    if kind != "delete_file":
        operation["diff"] = str(parsed.get("diff") or "")
    return {"operation": operation}


def _computer_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    action = parsed.get("action") if isinstance(parsed.get("action"), dict) else None
    if action is None and isinstance(parsed.get("type"), str):
        action = parsed  # a model that sent the action itself
    return {"action": action or {"type": "screenshot"}, "pending_safety_checks": []}


def _tool_search_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    execution = "client" if exposed.tool.get("execution") == "client" else "server"
    return {"arguments": _loads(arguments), "execution": execution}


def _server_search(item: dict[str, Any]) -> bool:
    return item.get("execution") == "server"


# item fields -> call arguments (replay)


def _function_arguments(item: dict[str, Any]) -> str:
    return str(item.get("arguments") or "{}")


def _custom_arguments(item: dict[str, Any]) -> str:
    return _dumps({"input": str(item.get("input") or "")})


def _action_arguments(item: dict[str, Any]) -> str:
    action = _obj(item.get("action"))
    return _dumps({k: v for k, v in action.items() if k != "type" and v is not None})


def _apply_patch_arguments(item: dict[str, Any]) -> str:
    return _dumps(_obj(item.get("operation")))


def _computer_arguments(item: dict[str, Any]) -> str:
    if item.get("actions") is not None:
        return _dumps({"actions": item["actions"]})
    return _dumps({"action": item.get("action") or {}})


def _tool_search_arguments(item: dict[str, Any]) -> str:
    arguments = item.get("arguments")
    return arguments if isinstance(arguments, str) else _dumps(arguments or {})


# output items -> function_call_output text


def _plain_output(item: dict[str, Any]) -> str:
    return _text(item.get("output"))


def _apply_patch_output(item: dict[str, Any]) -> str:
    status = str(item.get("status") or "completed")
    output = item.get("output")
    return f"{status}: {output}" if output else status


def _tool_search_output(item: dict[str, Any]) -> str:
    names = [str(t.get("name") or t.get("type")) for t in _tools_of(item)]
    return "Loaded tools: " + ", ".join(names) if names else "No tools matched."


# call item -> extra stream events between output_item.added and output_item.done

Event = tuple[str, dict[str, Any]]


def _no_events(item: dict[str, Any], output_index: int) -> list[Event]:
    return []


def _custom_events(item: dict[str, Any], output_index: int) -> list[Event]:
    where = {"item_id": item["id"], "output_index": output_index}
    text = str(item.get("input") or "")
    events: list[Event] = []
    if text:
        events.append(("response.custom_tool_call_input.delta", {**where, "delta": text}))
    events.append(("response.custom_tool_call_input.done", {**where, "input": text}))
    return events


def _shell_events(item: dict[str, Any], output_index: int) -> list[Event]:
    events: list[Event] = []
    for index, command in enumerate((item.get("action") or {}).get("commands") or []):
        where = {"command_index": index, "output_index": output_index}
        events.append(("response.shell_call_command.added", {**where, "command": ""}))
        if command:
            events.append(("response.shell_call_command.delta", {**where, "delta": command}))
        events.append(("response.shell_call_command.done", {**where, "command": command}))
    return events


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True, slots=True)
class ToolKind:
    """One tool family, and how every part of the gateway treats it."""

    name: str
    tool_types: tuple[str, ...]
    """The ``tools[].type`` values of this kind."""
    runner: Runner
    item_type: str | None = None
    """The item its calls become (None: a hosted tool, which only a Responses upstream runs)."""
    output_type: str | None = None
    """The input item the client answers a call with."""
    schema: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Tool definition -> ``{description, parameters[, strict]}`` of its lowered function."""
    fixed_name: str | None = None
    """The exposed name of a built-in tool; None: the tool's own ``name``."""
    fields: Callable[[Exposed, str], dict[str, Any]] | None = None
    """(binding, the model's JSON arguments) -> the call item's own fields."""
    arguments: Callable[[dict[str, Any]], str] | None = None
    """A call item -> the lowered call's JSON arguments (replay)."""
    output_text: Callable[[dict[str, Any]], str] = _plain_output
    """An output item -> the lowered ``function_call_output`` text (replay)."""
    events: Callable[[dict[str, Any], int], list[Event]] = _no_events
    """(call item, output index) -> the events between its ``added`` and ``done``."""
    id_prefix: str = "item"
    """The prefix of the ids the gateway gives its call items."""
    gateway_runs: Callable[[dict[str, Any]], bool] = lambda item: False
    """Whether the gateway itself runs a call item of this kind on a lowering wire (it stays
    ``in_progress`` until :func:`run_on_gateway` answered it)."""

    @property
    def hosted(self) -> bool:
        return self.runner == "upstream"


KINDS: tuple[ToolKind, ...] = (
    ToolKind(
        "function",
        ("function",),
        "client",
        item_type="function_call",
        output_type="function_call_output",
        schema=_function_schema,
        fields=_function_fields,
        arguments=_function_arguments,
        id_prefix="fc",
    ),
    ToolKind(
        "custom",
        ("custom",),
        "client",
        item_type="custom_tool_call",
        output_type="custom_tool_call_output",
        schema=_custom_schema,
        fields=_custom_fields,
        arguments=_custom_arguments,
        events=_custom_events,
        id_prefix="ctc",
    ),
    ToolKind(
        "shell",
        ("shell",),
        "client",
        item_type="shell_call",
        output_type="shell_call_output",
        schema=_fixed(_SHELL_SCHEMA),
        fixed_name="shell",
        fields=_shell_fields,
        arguments=_action_arguments,
        events=_shell_events,
        id_prefix="sh",
    ),
    ToolKind(
        "local_shell",
        ("local_shell",),
        "client",
        item_type="local_shell_call",
        output_type="local_shell_call_output",
        schema=_fixed(_LOCAL_SHELL_SCHEMA),
        fixed_name="local_shell",
        fields=_local_shell_fields,
        arguments=_action_arguments,
        id_prefix="lsh",
    ),
    ToolKind(
        "apply_patch",
        ("apply_patch",),
        "client",
        item_type="apply_patch_call",
        output_type="apply_patch_call_output",
        schema=_fixed(_APPLY_PATCH_SCHEMA),
        fixed_name="apply_patch",
        fields=_apply_patch_fields,
        arguments=_apply_patch_arguments,
        output_text=_apply_patch_output,
        id_prefix="apc",
    ),
    ToolKind(
        "computer",
        ("computer", "computer_use_preview", "computer_use"),
        "client",
        item_type="computer_call",
        output_type="computer_call_output",
        schema=_fixed(_COMPUTER_SCHEMA),
        fixed_name="computer",
        fields=_computer_fields,
        arguments=_computer_arguments,
        id_prefix="cu",
    ),
    ToolKind(
        "tool_search",
        ("tool_search",),
        "client",
        item_type="tool_search_call",
        output_type="tool_search_output",
        schema=_tool_search_schema,
        fixed_name="tool_search",
        fields=_tool_search_fields,
        arguments=_tool_search_arguments,
        output_text=_tool_search_output,
        id_prefix="tsc",
        gateway_runs=_server_search,
    ),
    ToolKind(
        "web_search",
        (
            "web_search",
            "web_search_preview",
            "web_search_2025_08_26",
            "web_search_preview_2025_03_11",
        ),
        "upstream",
        item_type="web_search_call",
    ),
    ToolKind("file_search", ("file_search",), "upstream", item_type="file_search_call"),
    ToolKind(
        "code_interpreter", ("code_interpreter",), "upstream", item_type="code_interpreter_call"
    ),
    ToolKind(
        "image_generation", ("image_generation",), "upstream", item_type="image_generation_call"
    ),
)
"""Every tool kind the gateway knows (``mcp`` excepted: the gateway runs it itself)."""

_BY_TYPE: dict[str, ToolKind] = {t: kind for kind in KINDS for t in kind.tool_types}

ITEM_KINDS: dict[str, ToolKind] = {
    item: kind
    for kind in KINDS
    for item in (kind.item_type, kind.output_type)
    if item is not None and kind.schema is not None
}
"""Call and output item types -> the kind that lowers them on replay."""

HOSTED_ITEM_TYPES = frozenset(k.item_type for k in KINDS if k.hosted and k.item_type)
"""Call items of hosted tools (only a Responses upstream shows or replays them)."""

CALL_ITEM_TYPES = frozenset(k.item_type for k in KINDS if k.item_type)
"""Every tool call item type carrying a ``call_id`` the client may answer."""

CLIENT_CALL_ITEM_TYPES = frozenset(k.item_type for k in KINDS if k.item_type and not k.hosted)
"""Call items that end a response: the client runs them and answers in its next request."""


def item_id_prefix(item_type: str) -> str:
    """The id prefix of a call item the gateway creates (``ctc`` for ``custom_tool_call``...)."""
    kind = ITEM_KINDS.get(item_type)
    return kind.id_prefix if kind is not None else "item"


def kind_of(tool_type: str) -> ToolKind | None:
    """The kind of a ``tools[].type``; None for ``mcp``, ``namespace`` and unknown types."""
    return _BY_TYPE.get(tool_type)


# --------------------------------------------------------------------------- exposure


@dataclass(frozen=True, slots=True)
class Exposed:
    """One function the model sees on a lowering wire, and what its calls become."""

    name: str
    """The exposed (function) name."""
    kind: ToolKind
    tool: dict[str, Any]
    """The (inner) tool definition."""
    namespace: str | None = None

    @property
    def inner_name(self) -> str:
        return str(self.tool.get("name") or self.kind.fixed_name or self.name)

    def function(self) -> dict[str, Any]:
        """The Responses ``function`` tool the model is offered."""
        assert self.kind.schema is not None
        schema = self.kind.schema(self.tool)
        tool = {"type": "function", "name": self.name, **schema}
        return {k: v for k, v in tool.items() if v is not None}

    def item(self, arguments: str) -> dict[str, Any]:
        """The fields (``type`` included) of the item a call with ``arguments`` becomes."""
        assert self.kind.fields is not None and self.kind.item_type is not None
        return {"type": self.kind.item_type, **self.kind.fields(self, arguments)}


def _exposed_for(kind: ToolKind, name: str | None, namespace: str | None) -> str:
    """The exposed name of a tool: stable across turns, a pure function of its identity."""
    if namespace is not None:
        return exposed_name(namespace, name or "")
    return kind.fixed_name or name or kind.name


def _tools_of(item: dict[str, Any]) -> list[dict[str, Any]]:
    tools = item.get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


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
    def __init__(self) -> None:
        self.calls: dict[str, Exposed] = {}
        self.omitted: list[str] = []
        self.deferred: dict[str, Exposed] = {}

    def add(self, tool: dict[str, Any], namespace: str | None = None, loaded: bool = False) -> None:
        kind_name = str(tool.get("type") or "function")
        if kind_name == "namespace" and namespace is None:
            label = str(tool.get("name") or "")
            for inner in _tools_of(tool):
                self.add(inner, label, loaded)
            return
        kind = kind_of(kind_name)
        if kind is None:
            return  # mcp (the gateway's own) or a type nobody can run here
        if kind.schema is None:
            if kind_name not in self.omitted:
                self.omitted.append(kind_name)
            return
        name = tool.get("name") if isinstance(tool.get("name"), str) else None
        exposed = Exposed(_exposed_for(kind, name, namespace), kind, tool, namespace)
        if tool.get("defer_loading") and not loaded:
            self.deferred.setdefault(exposed.name, exposed)
        else:
            self.calls.setdefault(exposed.name, exposed)


def _declared(tools: Iterable[dict[str, Any]], transcript: list[dict[str, Any]]) -> list[Any]:
    declared = [t for t in tools if t.get("type") != "mcp"]
    for item in transcript:
        if item.get("type") == "additional_tools":
            declared += _tools_of(item)
    return declared


def tool_view(
    tools: Iterable[dict[str, Any]],
    transcript: list[dict[str, Any]],
    tool_choice: Any,
    wire: str,
) -> ToolView:
    """What a model call over ``wire`` offers (``tools``: the request's, MCP excluded) and sends.

    Responses wire: tools and transcript pass unchanged. Lowering wires: see the module
    docstring; hosted tools are left out and listed in ``omitted``.
    """
    declared = _declared(tools, transcript)
    if wire not in LOWERED_WIRES:
        kept = [t for t in tools if t.get("type") != "mcp"]
        return ToolView(tools=kept, input=list(transcript), tool_choice=tool_choice)
    exposer = _Exposer()
    for tool in declared:
        exposer.add(tool)
    for item in transcript:
        if item.get("type") == "tool_search_output":
            for tool in _tools_of(item):
                exposer.add(tool, loaded=True)
    for name, deferred in exposer.deferred.items():
        if _loaded(name, transcript):
            exposer.calls.setdefault(name, deferred)
    return ToolView(
        tools=[exposed.function() for exposed in exposer.calls.values()],
        input=lower_items(transcript),
        tool_choice=_lower_choice(tool_choice, exposer.calls),
        calls=exposer.calls,
        omitted=exposer.omitted,
    )


def _loaded(name: str, transcript: list[dict[str, Any]]) -> bool:
    """Whether a deferred tool was loaded by a ``tool_search_output`` (matched by name)."""
    for item in transcript:
        if item.get("type") != "tool_search_output":
            continue
        for tool in _tools_of(item):
            if tool.get("type") == "namespace":
                label = str(tool.get("name") or "")
                if any(exposed_name(label, str(t.get("name"))) == name for t in _tools_of(tool)):
                    return True
            elif tool.get("name") == name:
                return True
    return False


def _choice_name(choice: Mapping[str, Any]) -> str | None:
    kind_name = str(choice.get("type"))
    if kind_name == "mcp":
        name = choice.get("name")
        return exposed_name(str(choice.get("server_label")), str(name)) if name else None
    kind = kind_of(kind_name)
    if kind is None or kind.schema is None:
        return None
    name = choice.get("name") if isinstance(choice.get("name"), str) else None
    namespace = choice.get("namespace") if isinstance(choice.get("namespace"), str) else None
    return _exposed_for(kind, name, namespace)


def _lower_choice(choice: Any, calls: Mapping[str, Exposed]) -> Any:
    """``tool_choice`` in function terms: a forced tool of any kind becomes its exposed
    function; a forced MCP server with no tool name, or a forced hosted tool, ``required``/
    ``auto``; ``allowed_tools`` keeps its mode."""
    if not isinstance(choice, Mapping):
        return choice
    kind_name = choice.get("type")
    if kind_name == "allowed_tools":
        return choice.get("mode") or "auto"
    name = _choice_name(choice)
    if name is not None:
        return {"type": "function", "name": name}
    if kind_name == "mcp":
        return "required"
    return "auto"


# --------------------------------------------------------------------------- replay


def _call_name(item: dict[str, Any], kind: ToolKind) -> str:
    namespace = item.get("namespace") if isinstance(item.get("namespace"), str) else None
    name = item.get("name") if isinstance(item.get("name"), str) else None
    return _exposed_for(kind, name, namespace)


def lower_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A transcript in function terms: every tool call item becomes a ``function_call`` under
    its exposed name, every tool output a ``function_call_output``; hosted-tool items and
    ``additional_tools`` are left out (no function wire can show them)."""
    out: list[dict[str, Any]] = []
    for item in items:
        kind_name = str(item.get("type") or "")
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
                    "call_id": item.get("call_id"),
                    "output": kind.output_text(item),
                }
            )
    return out


# --------------------------------------------------------------------------- gateway-run calls


def runs_on_gateway(item: dict[str, Any]) -> bool:
    """Whether ``item`` is a call the gateway runs itself (a server ``tool_search_call``)."""
    kind = ITEM_KINDS.get(str(item.get("type")))
    return kind is not None and item.get("type") == kind.item_type and kind.gateway_runs(item)


def _words(text: Any) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", str(text or "").lower()))


def _deferred(tools: Iterable[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """``(namespace, tool)`` of every tool marked ``defer_loading``."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for tool in tools:
        if tool.get("type") == "namespace":
            label = str(tool.get("name") or "")
            found += [(label, t) for t in _tools_of(tool) if t.get("defer_loading")]
        elif tool.get("defer_loading"):
            found.append((None, tool))
    return found


def search_tools(
    tools: Iterable[dict[str, Any]], transcript: list[dict[str, Any]], arguments: Any
) -> list[dict[str, Any]]:
    """Run a server ``tool_search``: the deferred tools (declared, or in ``additional_tools``)
    whose names and descriptions share the most words with ``arguments["query"]``, best first,
    at most ``limit`` (default 8); namespaced matches come back inside their namespace, as a
    ``tool_search_output`` carries them."""
    query = arguments.get("query") if isinstance(arguments, dict) else None
    limit = arguments.get("limit") if isinstance(arguments, dict) else None
    limit = int(limit) if isinstance(limit, int | float) and limit > 0 else 8
    wanted = _words(query)
    scored: list[tuple[int, int, str | None, dict[str, Any]]] = []
    namespaces = {
        str(t.get("name")): t for t in _declared(tools, transcript) if t.get("type") == "namespace"
    }
    for position, (namespace, tool) in enumerate(_deferred(_declared(tools, transcript))):
        words = _words(f"{namespace or ''} {tool.get('name')} {tool.get('description')}")
        words |= _words(str(tool.get("name") or "").replace("_", " "))
        score = len(wanted & words)
        if score:
            scored.append((-score, position, namespace, tool))
    out: list[dict[str, Any]] = []
    grouped: dict[str, dict[str, Any]] = {}
    for _, _, namespace, tool in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]:
        loaded = {k: v for k, v in tool.items() if k != "defer_loading"}
        if namespace is None:
            out.append(loaded)
            continue
        if namespace not in grouped:
            source = namespaces.get(namespace, {})
            grouped[namespace] = {
                "type": "namespace",
                "name": namespace,
                "description": source.get("description") or "",
                "tools": [],
            }
            out.append(grouped[namespace])
        grouped[namespace]["tools"].append(loaded)
    return out


# --------------------------------------------------------------------------- hosted policy


def hosted_tools_without_backend(
    tools: Iterable[dict[str, Any]], wire: str, policy: HostedPolicy
) -> list[str]:
    """The hosted tool types a request over ``wire`` cannot run (to omit, with a signal).

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
        if kind is None or not kind.hosted:
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
