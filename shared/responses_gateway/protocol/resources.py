"""Input items as the API shows them back: completed into OpenAI's item resources when stored.

Owns :func:`stored_item`: a canonical input item (validated, with its ``id``: see
:func:`responses_gateway.loop.prepared.prepare_input`) completed into what OpenAI's
``ConversationItem`` and ``ItemResource`` schemas require, so every item that a conversation's
item reads and ``GET /v1/responses/{id}/input_items`` return validates. It is applied where input
items are stored (conversation items, a create's input on its record and in its conversation),
never to what goes upstream; the requests to the gateway among them (:data:`NOT_STORED`) are
consumed and not stored. The completions, one row per item type in
:data:`RESOURCE_DEFAULTS`:

* ``status``: ``"completed"`` where the resource has one and the client sent none (a stored
  item is finished);
* keys the resource requires that may be null, as null (``shell_call.environment``,
  ``shell_call_output.max_output_length``, a tool search's ``call_id``), and a tool search's
  ``execution`` as ``"server"`` (the tool's default);
* content parts (of a message, or a function or custom tool call's ``output`` list):
  ``output_text`` with ``annotations`` and ``logprobs`` (``[]``), ``input_image`` with
  ``detail`` (``"auto"``, OpenAI's default);
* two keys OpenAI's spec requires without defining them, copied from the item's own
  (:data:`COPIED_KEYS`): ``local_shell_call_output.call_id`` (the SDK's ``id`` of that item is
  the call's id) and ``mcp_approval_response.request_id`` (its ``approval_request_id``).

A value the client sent is never changed, with one exception: a status the item's resource has
no value for (:data:`SHOWN_STATUS`: a ``computer_call_output`` sent ``in_progress``, which the
SDK's input type allows and OpenAI's resource, ``completed``/``incomplete``/``failed``, does
not) is shown as the finished status it stands for. A null where the resource wants a value
counts as absent (a default fills it, or the key is left out: :data:`NULL_MEANS_ABSENT`).
Converts nothing else and decides nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "COPIED_KEYS",
    "NULL_MEANS_ABSENT",
    "NOT_CONVERSATION_ITEMS",
    "NOT_STORED",
    "RESOURCE_DEFAULTS",
    "SHOWN_STATUS",
    "stored_item",
]

NOT_STORED = frozenset({"compaction_trigger"})
"""Input item types that are requests to the gateway, consumed by it and never stored as items
(OpenAI's spec has no resource for them: the ``compaction`` item a trigger produces is what a
response's output and its conversation keep)."""

NOT_CONVERSATION_ITEMS = NOT_STORED
"""Item types a conversation items create refuses (400 naming ``items[i].type``)."""

_DONE = {"status": "completed"}

RESOURCE_DEFAULTS: dict[str, dict[str, Any]] = {
    "message": _DONE,
    "function_call": _DONE,
    "function_call_output": _DONE,
    "computer_call_output": _DONE,
    "custom_tool_call": _DONE,
    "custom_tool_call_output": _DONE,
    "local_shell_call_output": _DONE,
    "tool_search_call": {**_DONE, "execution": "server", "call_id": None},
    "tool_search_output": {**_DONE, "execution": "server", "call_id": None},
    "shell_call": {
        **_DONE,
        "environment": None,
        "action": {"timeout_ms": None, "max_output_length": None},
    },
    "shell_call_output": {**_DONE, "max_output_length": None},
}
"""Item type -> the keys its resource requires and their value when the client sent none (a
``None`` default: the key may be null, so a null the client sent stays; a dict default: the keys
the nested object requires, completed the same way)."""

NULL_MEANS_ABSENT: dict[str, tuple[str, ...]] = {
    "computer_call_output": ("acknowledged_safety_checks",),
    "function_call_output": ("call_id", "name", "namespace"),
}
"""Keys the SDK lets a client send as null that the resource has no null for: dropped when
null (a null there says "none", which the resource says by leaving the key out)."""

SHOWN_STATUS: dict[str, dict[str, str]] = {
    "computer_call_output": {"in_progress": "completed"},
}
"""Item type -> {status the client may send: the status its resource shows} (a stored output
exists, so it is finished; the upstream still gets the item as sent)."""

COPIED_KEYS: dict[str, dict[str, str]] = {
    "local_shell_call_output": {"call_id": "id"},
    "mcp_approval_response": {"request_id": "approval_request_id"},
}
"""Item type -> {key the spec requires: the item's own key holding its value}."""

_PARTS_KEY = {
    "message": "content",
    "function_call_output": "output",
    "custom_tool_call_output": "output",
}
"""Where an item type keeps its content parts."""

_PART_DEFAULTS: dict[str, dict[str, Any]] = {
    "output_text": {"annotations": [], "logprobs": []},
    "input_image": {"detail": "auto"},
}


def _completed(value: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    if all(value.get(key) is not None or key in value and default is None
           for key, default in defaults.items()):  # fmt: skip
        return value
    completed = dict(value)
    for key, default in defaults.items():
        if completed.get(key) is None and not (default is None and key in completed):
            completed[key] = list(default) if isinstance(default, list) else default
    return completed


def _part(part: Any) -> Any:
    defaults = _PART_DEFAULTS.get(str(part.get("type"))) if isinstance(part, dict) else None
    return part if defaults is None else _completed(part, defaults)


def stored_item(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` completed into its resource (a new dict; ``item`` is left as it is)."""
    kind = str(item.get("type"))
    completed = dict(item)
    for key, value in RESOURCE_DEFAULTS.get(kind, {}).items():
        if isinstance(value, dict):
            if isinstance(completed.get(key), dict):
                completed[key] = _completed(completed[key], value)
        elif completed.get(key) is None:
            completed[key] = value
    shown = SHOWN_STATUS.get(kind, {}).get(str(completed.get("status")))
    if shown is not None:
        completed["status"] = shown
    for absent in NULL_MEANS_ABSENT.get(kind, ()):
        if absent in completed and completed[absent] is None:
            del completed[absent]
    for key, source in COPIED_KEYS.get(kind, {}).items():
        if completed.get(key) is None and completed.get(source) is not None:
            completed[key] = completed[source]
    where = _PARTS_KEY.get(kind)
    parts = completed.get(where) if where is not None else None
    if where is not None and isinstance(parts, list):
        completed[where] = [_part(part) for part in parts]
    return completed
