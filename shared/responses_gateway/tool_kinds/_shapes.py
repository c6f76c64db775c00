"""The per-kind pieces of the tool-kind table: lowered function schemas, how a lowered call's
arguments become an item's fields and back, output texts and stream events.

Pure functions and constants only; :mod:`responses_gateway.tool_kinds.table` assembles them into
:data:`~responses_gateway.tool_kinds.table.KINDS`. Nothing here decides which kind a tool is.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from responses_gateway.tool_kinds.table import Exposed

Event = tuple[str, dict[str, Any]]
"""A stream event: its wire type and its other fields."""


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


def tools_of(item: dict[str, Any]) -> list[dict[str, Any]]:
    tools = item.get("tools")
    return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []


def function_schema(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": tool.get("description"),
        "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        "strict": tool.get("strict"),
    }


def custom_schema(tool: dict[str, Any]) -> dict[str, Any]:
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


SHELL_SCHEMA = {
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
LOCAL_SHELL_SCHEMA = {
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
APPLY_PATCH_SCHEMA = {
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
COMPUTER_SCHEMA = {
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


WEB_SEARCH_SCHEMA = {
    "description": "Search the web. Returns the results as text.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "The search query."}},
        "required": ["query"],
    },
}


def web_search_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    query = _loads(arguments).get("query")
    return {"action": {"type": "search", "query": query if isinstance(query, str) else ""}}


def web_search_arguments(item: dict[str, Any]) -> str:
    return _dumps({"query": _obj(item.get("action")).get("query") or ""})


def web_search_events(item: dict[str, Any], output_index: int) -> list[tuple[str, dict[str, Any]]]:
    where = {"item_id": item["id"], "output_index": output_index}
    return [
        ("response.web_search_call.in_progress", where),
        ("response.web_search_call.searching", dict(where)),
    ]


def in_progress(item: dict[str, Any]) -> bool:
    return item.get("status") == "in_progress"


def fixed(schema: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def lower(tool: dict[str, Any]) -> dict[str, Any]:
        return {**schema, "description": tool.get("description") or schema["description"]}

    return lower


def tool_search_schema(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": tool.get("description")
        or "Search the deferred tools by name and description; matches become callable.",
        "parameters": tool.get("parameters") or _TOOL_SEARCH_PARAMETERS,
    }


# call arguments -> item fields


def function_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"arguments": arguments, "name": exposed.inner_name}
    if exposed.namespace is not None:
        fields["namespace"] = exposed.namespace
    return fields


def custom_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    value = parsed.get("input")
    # A model that answers with the raw text instead of {"input": ...} is taken at its word.
    text = value if isinstance(value, str) else arguments if not parsed else _dumps(parsed)
    fields: dict[str, Any] = {"input": text, "name": exposed.inner_name}
    if exposed.namespace is not None:
        fields["namespace"] = exposed.namespace
    return fields


def shell_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    return {
        "action": {
            "commands": _strings(parsed.get("commands")),
            "timeout_ms": _int_or_none(parsed.get("timeout_ms")),
            "max_output_length": _int_or_none(parsed.get("max_output_length")),
        }
    }


def local_shell_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
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


def apply_patch_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    kind = parsed.get("type")
    kind = kind if kind in ("create_file", "update_file", "delete_file") else "update_file"
    operation: dict[str, Any] = {"type": kind, "path": str(parsed.get("path") or "")}
    if kind != "delete_file":
        operation["diff"] = str(parsed.get("diff") or "")
    return {"operation": operation}


def computer_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    action = parsed.get("action") if isinstance(parsed.get("action"), dict) else None
    if action is None and isinstance(parsed.get("type"), str):
        action = parsed  # a model that sent the action itself
    return {"action": action or {"type": "screenshot"}, "pending_safety_checks": []}


def tool_search_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    execution = "client" if exposed.tool.get("execution") == "client" else "server"
    return {"arguments": _loads(arguments), "execution": execution}


def server_search(item: dict[str, Any]) -> bool:
    return item.get("execution") == "server"


# item fields -> call arguments (replay)


def function_arguments(item: dict[str, Any]) -> str:
    return str(item.get("arguments") or "{}")


def custom_arguments(item: dict[str, Any]) -> str:
    return _dumps({"input": str(item.get("input") or "")})


def action_arguments(item: dict[str, Any]) -> str:
    action = _obj(item.get("action"))
    return _dumps({k: v for k, v in action.items() if k != "type" and v is not None})


def apply_patch_arguments(item: dict[str, Any]) -> str:
    return _dumps(_obj(item.get("operation")))


def computer_arguments(item: dict[str, Any]) -> str:
    if item.get("actions") is not None:
        return _dumps({"actions": item["actions"]})
    return _dumps({"action": item.get("action") or {}})


def tool_search_arguments(item: dict[str, Any]) -> str:
    arguments = item.get("arguments")
    return arguments if isinstance(arguments, str) else _dumps(arguments or {})


# output items -> function_call_output text


def plain_output(item: dict[str, Any]) -> str:
    return _text(item.get("output"))


def apply_patch_output(item: dict[str, Any]) -> str:
    status = str(item.get("status") or "completed")
    output = item.get("output")
    return f"{status}: {output}" if output else status


def tool_search_output(item: dict[str, Any]) -> str:
    names = [str(t.get("name") or t.get("type")) for t in tools_of(item)]
    return "Loaded tools: " + ", ".join(names) if names else "No tools matched."


# call item -> extra stream events between output_item.added and output_item.done


def no_events(item: dict[str, Any], output_index: int) -> list[Event]:
    return []


def custom_events(item: dict[str, Any], output_index: int) -> list[Event]:
    where = {"item_id": item["id"], "output_index": output_index}
    text = str(item.get("input") or "")
    events: list[Event] = []
    if text:
        events.append(("response.custom_tool_call_input.delta", {**where, "delta": text}))
    events.append(("response.custom_tool_call_input.done", {**where, "input": text}))
    return events


def shell_events(item: dict[str, Any], output_index: int) -> list[Event]:
    events: list[Event] = []
    for index, command in enumerate((item.get("action") or {}).get("commands") or []):
        where = {"command_index": index, "output_index": output_index}
        events.append(("response.shell_call_command.added", {**where, "command": ""}))
        if command:
            events.append(("response.shell_call_command.delta", {**where, "delta": command}))
        events.append(("response.shell_call_command.done", {**where, "command": command}))
    return events
