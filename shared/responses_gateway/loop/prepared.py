"""Prepared loop input: the model's transcript kept apart from the gateway's control items.

Owns two translations and one admission rule. :func:`prepare_input` turns a request's ``input``
(a string or items, as clients send them) into canonical items and splits off the items that
steer the gateway and must never reach the model (``mcp_list_tools``, ``mcp_approval_request``,
``mcp_approval_response``).
:func:`model_transcript` turns the loop state into the item list an adapter sends upstream: the
prepared input followed by this response's output so far, with gateway tool calls lowered to
``function_call`` + ``function_call_output`` pairs. :func:`check_call_outputs` refuses a
transcript with a tool output that answers no call in it, whatever wire the model is on (a
lowered wire cannot express one, and OpenAI refuses one): a permissive upstream never makes the
gateway more permissive.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.errors import InvalidRequestError
from responses_gateway.ids import new_id
from responses_gateway.loop.state import LoopState
from responses_gateway.loop.tools import exposed_name

__all__ = [
    "CONTROL_ITEM_TYPES",
    "PreparedInput",
    "check_call_outputs",
    "model_transcript",
    "plan_approvals",
    "prepare_input",
    "reference_ids",
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


def reference_ids(raw: str | list[dict[str, Any]] | None) -> list[str]:
    """The ids ``item_reference`` items of a request's ``input`` name, in order."""
    if not isinstance(raw, list):
        return []
    return [
        str(item["id"])
        for item in (_canonical(i) for i in raw if isinstance(i, dict))
        if item.get("type") == "item_reference" and isinstance(item.get("id"), str)
    ]


def prepare_input(
    raw: str | list[dict[str, Any]] | None,
    *,
    context_ids: frozenset[str] = frozenset(),
    resolved: Mapping[str, dict[str, Any]] | None = None,
    param: str = "input",
) -> PreparedInput:
    """Canonicalize a request's ``input``, give every item an id, split off control items.

    ``item_reference`` items name an item of the context (the previous responses or the
    conversation, whose item ids are ``context_ids``): that item is already in the transcript,
    so the reference is dropped. A reference to a stored item outside the context (``resolved``,
    read from the store's item index) is replaced by that item, where the reference stood. A
    reference to anything else is a 400 ``item_not_found`` on ``<param>[i]`` (``param``: the
    field the items came in, ``items`` for conversation items).

    ``raw`` is validated input (:data:`~responses_gateway.protocol.items.InputItem` at every
    door): its items are objects with a string ``type`` and string ids.
    """
    resolved = resolved or {}
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
            found = resolved.get(str(item.get("id")))
            if found is None:
                raise InvalidRequestError(
                    f"Item with id '{item.get('id')}' not found.",
                    param=f"{param}[{index}]",
                    code="item_not_found",
                )
            item, kind = dict(found), found.get("type")
        prepared.items.append(item)
        if kind in CONTROL_ITEM_TYPES:
            prepared.control_items.append(item)
        else:
            prepared.upstream_input.append(item)
    return prepared


def _is_output(kind: str) -> bool:
    return kind.endswith("_call_output")


def check_call_outputs(items: list[dict[str, Any]], param: str = "input") -> None:
    """Refuse a tool output (a ``*_call_output`` item with a ``call_id``) whose call is nowhere in
    ``items`` (the whole transcript the model would see: the previous responses' items, the
    conversation's and the input). Outputs after an upstream's own (opaque) ``compaction`` item
    are not judged: the calls it replaced are inside it.

    Raises:
        InvalidRequestError: 400 on ``param``, worded as every wire words it.
    """
    calls = {
        item.get("call_id")
        for item in items
        if not _is_output(str(item.get("type"))) and isinstance(item.get("call_id"), str)
    }
    for item in items:
        kind = str(item.get("type"))
        if kind == "compaction":
            return
        call_id = item.get("call_id")
        if not _is_output(kind) or not isinstance(call_id, str) or call_id in calls:
            continue
        what = "function call" if kind == "function_call_output" else "tool call"
        raise InvalidRequestError(
            f"No {what} found for {kind} with call_id '{call_id}'.", param=param
        )


def _error_text(error: Any) -> str:
    """An ``mcp_call.error`` (a string, or an error object) as text for the model."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        if error.get("message"):
            return str(error["message"])
        content = error.get("content")
        parts = content if isinstance(content, list) else []
        texts = [str(p.get("text") or "") for p in parts if isinstance(p, dict)]
        if any(texts):
            return "\n".join(t for t in texts if t)
    return json.dumps(error)


def _call_pair(call_id: str, item: dict[str, Any], output: str) -> list[dict[str, Any]]:
    name = exposed_name(str(item.get("server_label", "")), str(item.get("name", "")))
    return [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": item.get("arguments") or "{}",
        },
        {"type": "function_call_output", "call_id": call_id, "output": output},
    ]


def to_model_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as the model may see them, in order.

    Control items are dropped; an ``mcp_call`` becomes the ``function_call`` the model made
    (under its exposed name) and a ``function_call_output`` (the error text when it failed); a
    denied approval becomes that call with an output telling the model it was denied and why.
    """
    out: list[dict[str, Any]] = []
    requests: dict[str, dict[str, Any]] = {}
    answered: set[str] = set()
    for item in items:
        kind = item.get("type")
        if kind == "mcp_approval_request":
            requests[str(item.get("id"))] = item
        elif kind == "mcp_approval_response":
            request_id = str(item.get("approval_request_id"))
            request = requests.get(request_id)
            if request is not None and not item.get("approve") and request_id not in answered:
                reason = item.get("reason")
                text = "The user denied this tool call." + (f" Reason: {reason}" if reason else "")
                out.extend(_call_pair(request_id, request, text))
            answered.add(request_id)
        elif kind == "mcp_call":
            error = item.get("error")
            output = _error_text(error) if error else str(item.get("output") or "")
            out.extend(_call_pair(str(item.get("id")), item, output))
        elif kind not in CONTROL_ITEM_TYPES:
            out.append(item)
    return out


def plan_approvals(history: list[dict[str, Any]], items: list[dict[str, Any]]) -> tuple[str, ...]:
    """The approval request ids the client approved in ``items`` that must run now.

    Each approval acts once: a request already executed (an ``mcp_call`` carries its id) or
    already answered earlier in the input is skipped.

    Raises:
        InvalidRequestError: an approval names a request that was never made.
    """
    known = [*history, *items]
    requests = {str(i.get("id")) for i in known if i.get("type") == "mcp_approval_request"}
    done = {
        str(i["approval_request_id"])
        for i in known
        if i.get("type") == "mcp_call" and i.get("approval_request_id")
    }
    done |= {
        str(i.get("approval_request_id"))
        for i in history
        if i.get("type") == "mcp_approval_response"
    }
    approved: list[str] = []
    for index, item in enumerate(items):
        if item.get("type") != "mcp_approval_response":
            continue
        request_id = str(item.get("approval_request_id"))
        if request_id not in requests:
            raise InvalidRequestError(
                f"No approval request with id '{request_id}' was found.",
                param=f"input[{index}].approval_request_id",
                code="invalid_value",
            )
        if request_id in done:
            continue
        done.add(request_id)
        if item.get("approve"):
            approved.append(request_id)
    return tuple(approved)


def model_transcript(state: LoopState) -> list[dict[str, Any]]:
    """The items to send upstream for the next model call of ``state``.

    ``compaction_trigger`` items are requests to the gateway, never sent. Output items before
    this response's last ``compaction`` item are summarized in ``upstream_input`` already, so
    only the output after it is sent.
    """
    output = state.output
    for index in range(len(output) - 1, -1, -1):
        if output[index].get("type") == "compaction":
            output = output[index + 1 :]
            break
    items = to_model_items(state.upstream_input) + to_model_items(output)
    return [item for item in items if item.get("type") != "compaction_trigger"]
