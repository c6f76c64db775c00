"""The per-kind pieces of the tool-kind table: lowered function schemas, how a lowered call's
arguments become an item's fields and back, output texts and stream events.

Pure functions and constants only; :mod:`responses_gateway.tool_kinds.table` assembles them into
:data:`~responses_gateway.tool_kinds.table.KINDS`. Nothing here decides which kind a tool is.
"""

from __future__ import annotations

import json
import re
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


def by_backend(item: dict[str, Any]) -> str | None:
    """A lowered hosted call is the gateway's: only a configured backend lowers the kind."""
    return "backend"


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
        },
        "environment": _shell_environment(exposed.tool.get("environment")),
    }


def _shell_environment(declared: Any) -> dict[str, Any] | None:
    """The ``environment`` a shell call reports (both specs require the key): where the tool
    said its commands run (``local``, or a referenced container), else null (``container_auto``
    or nothing: the client decides)."""
    kind = _obj(declared).get("type")
    if kind == "local":
        return {"type": "local"}
    container = _obj(declared).get("container_id")
    if kind == "container_reference" and isinstance(container, str):
        return {"type": "container_reference", "container_id": container}
    return None


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


def server_search(item: dict[str, Any]) -> str | None:
    """A lowered ``tool_search_call`` with server execution is the gateway's to answer."""
    return "search" if item.get("execution") == "server" else None


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


# --------------------------------------------------------------------------- hosted backends

FILE_SEARCH_SCHEMA = {
    "description": "Search the files. Returns the matching passages.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
        "required": ["query"],
    },
}
CODE_INTERPRETER_SCHEMA = {
    "description": "Run Python code in a sandbox. Returns what it printed.",
    "parameters": {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "The Python code to run."}},
        "required": ["code"],
    },
}
IMAGE_GENERATION_SCHEMA = {
    "description": "Generate an image from a text description.",
    "parameters": {
        "type": "object",
        "properties": {"prompt": {"type": "string", "description": "The image to draw."}},
        "required": ["prompt"],
    },
}
_URL = re.compile(r"https?://[^\s<>\"')\]]+")


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def file_search_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    parsed = _loads(arguments)
    queries = _strings(parsed.get("queries")) or [_string(parsed.get("query"))]
    return {"queries": queries, "results": None}


def file_search_arguments(item: dict[str, Any]) -> str:
    return _dumps({"query": " ".join(_strings(item.get("queries")))})


def code_interpreter_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    container = exposed.tool.get("container")
    container_id = container if isinstance(container, str) and container else "cntr_gateway"
    code = _string(_loads(arguments).get("code"))
    return {"code": code, "container_id": container_id, "outputs": None}


def code_interpreter_arguments(item: dict[str, Any]) -> str:
    return _dumps({"code": _string(item.get("code"))})


def image_generation_fields(exposed: Exposed, arguments: str) -> dict[str, Any]:
    return {"result": None, "revised_prompt": _string(_loads(arguments).get("prompt"))}


def image_generation_arguments(item: dict[str, Any]) -> str:
    return _dumps({"prompt": _string(item.get("revised_prompt"))})


def file_search_events(item: dict[str, Any], output_index: int) -> list[Event]:
    where = {"item_id": item["id"], "output_index": output_index}
    return [
        ("response.file_search_call.in_progress", where),
        ("response.file_search_call.searching", dict(where)),
    ]


def code_interpreter_events(item: dict[str, Any], output_index: int) -> list[Event]:
    where = {"item_id": item["id"], "output_index": output_index}
    code = _string(item.get("code"))
    events: list[Event] = [("response.code_interpreter_call.in_progress", where)]
    if code:
        events.append(("response.code_interpreter_call_code.delta", {**where, "delta": code}))
    events.append(("response.code_interpreter_call_code.done", {**where, "code": code}))
    events.append(("response.code_interpreter_call.interpreting", dict(where)))
    return events


def image_generation_events(item: dict[str, Any], output_index: int) -> list[Event]:
    where = {"item_id": item["id"], "output_index": output_index}
    return [
        ("response.image_generation_call.in_progress", where),
        ("response.image_generation_call.generating", dict(where)),
    ]


# hosted call item -> the backend tool's argument value


def web_search_query(item: dict[str, Any]) -> str:
    return _string(_obj(item.get("action")).get("query"))


def file_search_query(item: dict[str, Any]) -> str:
    return " ".join(_strings(item.get("queries")))


def code_of(item: dict[str, Any]) -> str:
    return _string(item.get("code"))


def prompt_of(item: dict[str, Any]) -> str:
    return _string(item.get("revised_prompt"))


# (call item, the backend tool's text result) -> the item's result fields


def web_search_result(item: dict[str, Any], text: str) -> dict[str, Any]:
    urls = list(dict.fromkeys(_URL.findall(text)))
    action = {**_obj(item.get("action")), "sources": [{"type": "url", "url": u} for u in urls]}
    return {"action": action}


def file_search_result(item: dict[str, Any], text: str) -> dict[str, Any]:
    """A JSON list of ``{file_id, filename, score, text, attributes}`` objects is taken as the
    results; any other text is one result with that ``text``."""
    parsed = _json_or_none(text)
    keys = ("attributes", "file_id", "filename", "score", "text")
    if isinstance(parsed, list) and all(isinstance(r, dict) for r in parsed):
        return {"results": [{k: r.get(k) for k in keys} for r in parsed]}
    return {"results": [{"attributes": None, "file_id": None, "filename": None, "score": None,
                         "text": text}]}  # fmt: skip


def code_interpreter_result(item: dict[str, Any], text: str) -> dict[str, Any]:
    """A JSON object ``{"logs": str, "images": [url...]}`` maps to logs and image outputs; any
    other text is the logs."""
    parsed = _json_or_none(text)
    if isinstance(parsed, dict) and ("logs" in parsed or "images" in parsed):
        outputs: list[dict[str, Any]] = []
        if parsed.get("logs") is not None:
            outputs.append({"type": "logs", "logs": str(parsed["logs"])})
        outputs += [{"type": "image", "url": str(u)} for u in _strings(parsed.get("images"))]
        return {"outputs": outputs}
    return {"outputs": [{"type": "logs", "logs": text}]}


def image_generation_result(item: dict[str, Any], text: str) -> dict[str, Any]:
    """A JSON object ``{"result": b64, "revised_prompt"?: str, "partial_images"?: [b64...]}``
    (or ``b64_json``) maps to the fields; any other text is the base64 image itself."""
    parsed = _json_or_none(text)
    if isinstance(parsed, dict):
        fields: dict[str, Any] = {"result": _string(parsed.get("result") or parsed.get("b64_json"))}
        if isinstance(parsed.get("revised_prompt"), str):
            fields["revised_prompt"] = parsed["revised_prompt"]
        return fields
    return {"result": text.strip()}


# (call item, the tool's text result, output index) -> events before its .completed


def no_progress(item: dict[str, Any], text: str, output_index: int) -> list[Event]:
    return []


def image_generation_progress(item: dict[str, Any], text: str, output_index: int) -> list[Event]:
    """``partial_image`` events for the ``partial_images`` of a JSON answer."""
    parsed = _json_or_none(text)
    partials = _strings(parsed.get("partial_images")) if isinstance(parsed, dict) else []
    where = {"item_id": item["id"], "output_index": output_index}
    return [
        ("response.image_generation_call.partial_image",
         {**where, "partial_image_index": index, "partial_image_b64": image})
        for index, image in enumerate(partials)
    ]  # fmt: skip


# a finished hosted call item -> what the model reads as its result (this turn and later ones)


def web_search_seen(item: dict[str, Any]) -> str | None:
    sources = _obj(item.get("action")).get("sources")
    if not isinstance(sources, list):
        return None
    urls = [str(_obj(s).get("url")) for s in sources]
    return "Sources:\n" + "\n".join(urls) if urls else "No results."


def file_search_seen(item: dict[str, Any]) -> str | None:
    results = item.get("results")
    if not isinstance(results, list):
        return None
    texts = [
        f"[{_obj(r).get('filename') or _obj(r).get('file_id') or i + 1}] {_obj(r).get('text')}"
        for i, r in enumerate(results)
    ]
    return "\n".join(texts) if texts else "No results."


def code_interpreter_seen(item: dict[str, Any]) -> str | None:
    outputs = item.get("outputs")
    if not isinstance(outputs, list):
        return None
    parts = [
        str(o.get("logs")) if o.get("type") == "logs" else f"[image: {o.get('url')}]"
        for o in (_obj(o) for o in outputs)
    ]
    return "\n".join(parts)


def image_generation_seen(item: dict[str, Any]) -> str | None:
    if not item.get("result"):
        return None
    return f"Image generated (prompt: {_string(item.get('revised_prompt'))})."
