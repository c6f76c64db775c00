"""Recorded-OpenAI-shaped output items for the scripted Responses upstream, with their events.

Owns small builders of :class:`~responses_gateway.testing.script.RelayedItem` in the shapes
OpenAI's Responses API streams them (item fields and event sequences as the openai SDK's types
declare them): hosted tool calls (``web_search_call``, ``image_generation_call`` with partial
images, ``code_interpreter_call``, ``file_search_call``), ``tool_search_call`` /
``tool_search_output``, a ``custom_tool_call`` with its input deltas and a ``shell_call`` with its
command events. Tests put them in ``Turn.relayed_items``; the gateway must relay them unchanged.
It decides nothing and talks to nothing.
"""

from __future__ import annotations

from typing import Any

from responses_gateway.testing.script import RelayedItem

__all__ = [
    "code_interpreter_call",
    "custom_tool_call",
    "file_search_call",
    "image_generation_call",
    "shell_call",
    "tool_search_call",
    "tool_search_output",
    "web_search_call",
]


def _status_events(kind: str, *steps: str) -> list[dict[str, Any]]:
    return [{"type": f"response.{kind}.{step}"} for step in steps]


def web_search_call(item_id: str, query: str, sources: list[str] | None = None) -> RelayedItem:
    """A web search: ``in_progress``, ``searching``, ``completed``; action ``search``."""
    action: dict[str, Any] = {"type": "search", "query": query}
    if sources is not None:
        action["sources"] = [{"type": "url", "url": url} for url in sources]
    return RelayedItem(
        added={
            "id": item_id,
            "type": "web_search_call",
            "status": "in_progress",
            "action": {"type": "search", "query": query},
        },
        events=_status_events("web_search_call", "in_progress", "searching", "completed"),
        done={"id": item_id, "type": "web_search_call", "status": "completed", "action": action},
    )


def image_generation_call(item_id: str, partials: list[str], result: str) -> RelayedItem:
    """An image generation streaming ``partials`` (base64) before its ``result``."""
    events = _status_events("image_generation_call", "in_progress", "generating")
    events += [
        {
            "type": "response.image_generation_call.partial_image",
            "partial_image_index": index,
            "partial_image_b64": image,
        }
        for index, image in enumerate(partials)
    ]
    events += _status_events("image_generation_call", "completed")
    return RelayedItem(
        added={
            "id": item_id,
            "type": "image_generation_call",
            "status": "in_progress",
            "result": None,
        },
        events=events,
        done={
            "id": item_id,
            "type": "image_generation_call",
            "status": "completed",
            "result": result,
        },
    )


def code_interpreter_call(item_id: str, code: str, logs: str) -> RelayedItem:
    """Code streamed as ``code.delta``/``code.done``, then interpreted, with logs output."""
    base = {"id": item_id, "type": "code_interpreter_call", "container_id": "cntr_1"}
    events = _status_events("code_interpreter_call", "in_progress")
    events += [
        {"type": "response.code_interpreter_call_code.delta", "delta": code},
        {"type": "response.code_interpreter_call_code.done", "code": code},
    ]
    events += _status_events("code_interpreter_call", "interpreting", "completed")
    return RelayedItem(
        added={**base, "status": "in_progress", "code": "", "outputs": None},
        events=events,
        done={
            **base,
            "status": "completed",
            "code": code,
            "outputs": [{"type": "logs", "logs": logs}],
        },
    )


def file_search_call(item_id: str, queries: list[str]) -> RelayedItem:
    """A file search: ``in_progress``, ``searching``, ``completed``."""
    return RelayedItem(
        added={"id": item_id, "type": "file_search_call", "status": "in_progress", "queries": []},
        events=_status_events("file_search_call", "in_progress", "searching", "completed"),
        done={
            "id": item_id,
            "type": "file_search_call",
            "status": "completed",
            "queries": queries,
            "results": None,
        },
    )


def tool_search_call(
    item_id: str, call_id: str, arguments: dict[str, Any], execution: str = "client"
) -> RelayedItem:
    """A ``tool_search_call`` (no events of its own)."""
    done = {
        "id": item_id,
        "type": "tool_search_call",
        "call_id": call_id,
        "arguments": arguments,
        "execution": execution,
        "status": "completed",
    }
    return RelayedItem(added={**done, "status": "in_progress"}, events=[], done=done)


def tool_search_output(
    item_id: str, call_id: str, tools: list[dict[str, Any]], execution: str = "server"
) -> RelayedItem:
    """A ``tool_search_output`` loading ``tools`` (no events of its own)."""
    done = {
        "id": item_id,
        "type": "tool_search_output",
        "call_id": call_id,
        "execution": execution,
        "status": "completed",
        "tools": tools,
    }
    return RelayedItem(added={**done, "status": "in_progress"}, events=[], done=done)


def custom_tool_call(
    item_id: str, call_id: str, name: str, pieces: list[str], namespace: str | None = None
) -> RelayedItem:
    """A ``custom_tool_call`` whose input streams as ``pieces``."""
    text = "".join(pieces)
    done: dict[str, Any] = {
        "id": item_id,
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "input": text,
    }
    if namespace is not None:
        done["namespace"] = namespace
    events: list[dict[str, Any]] = [
        {"type": "response.custom_tool_call_input.delta", "delta": piece} for piece in pieces
    ]
    events.append({"type": "response.custom_tool_call_input.done", "input": text})
    return RelayedItem(
        added={**done, "status": "in_progress", "input": ""}, events=events, done=done
    )


def shell_call(item_id: str, call_id: str, commands: list[str]) -> RelayedItem:
    """A ``shell_call`` streaming each command as ``shell_call_command.added/delta/done``."""
    action = {"commands": commands, "timeout_ms": None, "max_output_length": None}
    done = {
        "id": item_id,
        "type": "shell_call",
        "call_id": call_id,
        "status": "completed",
        "action": action,
        "environment": {"type": "container_reference", "container_id": "cntr_1"},
    }
    events: list[dict[str, Any]] = []
    for index, command in enumerate(commands):
        events += [
            {"type": "response.shell_call_command.added", "command_index": index, "command": ""},
            {"type": "response.shell_call_command.delta", "command_index": index, "delta": command},
            {
                "type": "response.shell_call_command.done",
                "command_index": index,
                "command": command,
            },
        ]
    return RelayedItem(
        added={**done, "status": "in_progress", "action": {**action, "commands": []}},
        events=events,
        done=done,
    )
