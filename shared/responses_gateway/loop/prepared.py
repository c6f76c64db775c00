"""Prepared loop input: the model's transcript kept apart from the gateway's control items.

Owns two translations. :func:`prepare_input` turns a request's ``input`` (a string or items, as
clients send them) into canonical items and splits off the items that steer the gateway and must
never reach the model (``mcp_list_tools``, ``mcp_approval_request``, ``mcp_approval_response``).
:func:`model_transcript` turns the loop state into the item list an adapter sends upstream: the
prepared input followed by this response's output so far, with gateway tool calls lowered to
``function_call`` + ``function_call_output`` pairs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.errors import InvalidRequestError
from responses_gateway.ids import new_id
from responses_gateway.loop.state import LoopState

__all__ = [
    "CONTROL_ITEM_TYPES",
    "PreparedInput",
    "model_transcript",
    "prepare_input",
    "to_model_items",
]

CONTROL_ITEM_TYPES = frozenset({"mcp_list_tools", "mcp_approval_request", "mcp_approval_response"})
"""Item types the gateway consumes itself; they are never sent to the model."""


_ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
    "mcp_approval_response": "mcpa",
}


@dataclass(slots=True)
class PreparedInput:
    """A request's input, split into what the model sees and what steers the gateway."""

    upstream_input: list[dict[str, Any]] = field(default_factory=list)
    control_items: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    """Every input item in order, canonical and with an ``id`` (what is stored)."""


def _text_parts(content: Any, role: str) -> Any:
    if isinstance(content, str):
        kind = "output_text" if role == "assistant" else "input_text"
        part: dict[str, Any] = {"type": kind, "text": content}
        if kind == "output_text":
            part["annotations"] = []
        return [part]
    return content


def _canonical(item: dict[str, Any]) -> dict[str, Any]:
    item = dict(item)
    kind = item.get("type")
    if kind is None and "role" in item:
        kind = item["type"] = "message"
    if kind is None and set(item) == {"id"}:
        kind = item["type"] = "item_reference"
    if kind == "message":
        item["content"] = _text_parts(item.get("content"), str(item.get("role", "user")))
    if not item.get("id") and kind != "item_reference":
        item["id"] = new_id(_ID_PREFIXES.get(str(kind), "item"))
    return item


def prepare_input(
    raw: str | list[dict[str, Any]] | None, *, context_ids: frozenset[str] = frozenset()
) -> PreparedInput:
    """Canonicalize a request's ``input``, give every item an id, split off control items.

    ``item_reference`` items name an item of the context (the previous responses or the
    conversation, whose item ids are ``context_ids``): that item is already in the transcript,
    so the reference is dropped. A reference to anything else is a 400 ``item_not_found``.
    """
    prepared = PreparedInput()
    if raw is None:
        return prepared
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    for index, raw_item in enumerate(raw):
        item = _canonical(raw_item)
        kind = item.get("type")
        if kind == "item_reference":
            if item.get("id") in context_ids:
                continue
            raise InvalidRequestError(
                f"Item with id '{item.get('id')}' not found.",
                param=f"input[{index}]",
                code="item_not_found",
            )
        prepared.items.append(item)
        if kind in CONTROL_ITEM_TYPES:
            prepared.control_items.append(item)
        else:
            prepared.upstream_input.append(item)
    return prepared


def _lower_mcp_call(item: dict[str, Any]) -> list[dict[str, Any]]:
    call_id = str(item.get("id"))
    output = item.get("output")
    if item.get("error"):
        output = item["error"] if isinstance(item["error"], str) else json.dumps(item["error"])
    return [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": item.get("name", ""),
            "arguments": item.get("arguments") or "{}",
        },
        {"type": "function_call_output", "call_id": call_id, "output": output or ""},
    ]


def to_model_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as the model may see them: control items dropped, ``mcp_call`` lowered."""
    out: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind in CONTROL_ITEM_TYPES:
            continue
        if kind == "mcp_call":
            out.extend(_lower_mcp_call(item))
        else:
            out.append(item)
    return out


def model_transcript(state: LoopState) -> list[dict[str, Any]]:
    """The items to send upstream for the next model call of ``state``."""
    return to_model_items(state.upstream_input) + to_model_items(state.output)
