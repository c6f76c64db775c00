"""The input items the gateway relays or lowers without acting on them, field by field.

Owns :data:`RELAYED_ITEM_FIELDS`, one row per item type of the SDK's ``ResponseInputItemParam``
that :mod:`~responses_gateway.protocol.items` does not model itself (``web_search_call``,
``shell_call``, ``additional_tools``...): the fields the SDK declares for it, each with its type
and whether it is required, and :data:`RelayedInputItem`, the union of the models built from
those rows; a computer call's actions and a tool call's ``caller`` are tables of their own
(:data:`COMPUTER_ACTION_FIELDS`, :data:`CALLER_FIELDS`). The rows follow the SDK's TypedDicts
(required keys required; ids, call ids, names, statuses and text typed strictly; other nested
objects checked to be objects or arrays, their inside left to the upstream), so a hostile item
(an id that is an array, a call without ``call_id``) is a 400 naming ``input[i].<field>`` at
every door, and nothing downstream (the chat adapter's call pairing, the conversation store's
item index) ever sees one. Tools an item offers (``additional_tools``, ``tool_search_output``)
are the request's own tool models, of a known type (``tools.OfferedTool``). Unknown keys are
kept (clients relay what they got).
Converts and decides nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from responses_gateway.protocol.fields import (
    REQUIRED as R,
    Lenient,
    models_from_table,
    optional as _optional,
    union_of,
)
from responses_gateway.protocol.tools import OfferedTool

__all__ = [
    "CALLER_FIELDS",
    "COMPUTER_ACTION_FIELDS",
    "RELAYED_ITEM_FIELDS",
    "ComputerAction",
    "RelayedInputItem",
    "RelayedItem",
    "ToolCaller",
    "relayed_item_model",
]

ItemStatus = Literal["in_progress", "completed", "incomplete"]
SearchStatus = Literal["in_progress", "searching", "completed", "incomplete", "failed"]
Execution = Literal["server", "client"]
Obj = dict[str, Any]


class RelayedItem(Lenient):
    """The base of every relayed item model: its ``type`` (each model narrows it)."""

    type: str


class _Point(Lenient):
    """A point of a ``drag`` path."""

    x: int
    y: int


class LocalShellAction(Lenient):
    """A ``local_shell_call``'s ``exec`` action, as the SDK types it."""

    type: Literal["exec"]
    command: list[str]
    env: dict[str, str]
    timeout_ms: int | None = None
    user: str | None = None
    working_directory: str | None = None


COMPUTER_ACTION_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "click": {
        "button": (Literal["left", "right", "wheel", "back", "forward"], R),
        "x": (int, R),
        "y": (int, R),
        "keys": _optional(list[str]),
    },
    "double_click": {"x": (int, R), "y": (int, R), "keys": (list[str] | None, R)},
    "drag": {"path": (list[_Point], R), "keys": _optional(list[str])},
    "keypress": {"keys": (list[str], R)},
    "move": {"x": (int, R), "y": (int, R), "keys": _optional(list[str])},
    "screenshot": {},
    "scroll": {
        "x": (int, R),
        "y": (int, R),
        "scroll_x": (int, R),
        "scroll_y": (int, R),
        "keys": _optional(list[str]),
    },
    "type": {"text": (str, R)},
    "wait": {},
}
"""A computer call's action type -> its fields, as the SDK types them."""

if TYPE_CHECKING:
    ComputerAction = Lenient
else:
    ComputerAction = union_of(models_from_table(COMPUTER_ACTION_FIELDS, Lenient, "Action"))
"""One computer action (an unknown action type: ``invalid_value`` on its ``type``)."""

CALLER_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "direct": {},
    "program": {"caller_id": (str, R)},
}
"""A tool call's ``caller`` type -> its fields, as the SDK types them: the model itself, or the
``program`` item whose code made the call."""

if TYPE_CHECKING:
    ToolCaller = Lenient
else:
    ToolCaller = union_of(models_from_table(CALLER_FIELDS, Lenient, "Caller"))
"""Who made a tool call (an unknown caller type: ``invalid_value`` on its ``type``)."""

RELAYED_ITEM_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "additional_tools": {
        "role": (Literal["developer"], R),
        "tools": (list[OfferedTool], R),
        "id": _optional(str),
    },
    "apply_patch_call": {
        "call_id": (str, R),
        "operation": (Obj, R),
        "status": (Literal["in_progress", "completed"], R),
        "id": _optional(str),
        "caller": _optional(ToolCaller),
    },
    "apply_patch_call_output": {
        "call_id": (str, R),
        "status": (Literal["completed", "failed"], R),
        "id": _optional(str),
        "output": _optional(str),
        "caller": _optional(ToolCaller),
    },
    "code_interpreter_call": {
        "id": (str, R),
        "code": (str | None, R),
        "container_id": (str, R),
        "outputs": (list[Obj] | None, R),
        "status": (Literal["in_progress", "completed", "incomplete", "interpreting", "failed"], R),
    },
    "compaction": {"encrypted_content": (str, R), "id": _optional(str)},
    "compaction_trigger": {"id": _optional(str)},
    "computer_call": {
        "id": (str, R),
        "call_id": (str, R),
        "pending_safety_checks": (list[Obj], R),
        "status": (ItemStatus, R),
        "action": _optional(ComputerAction),
        "actions": _optional(list[ComputerAction]),
    },
    "computer_call_output": {
        "call_id": (str, R),
        "output": (Obj, R),
        "id": _optional(str),
        "status": _optional(ItemStatus),
        "acknowledged_safety_checks": _optional(list[Obj]),
    },
    "configuration_update": {
        "id": _optional(str),
        "reasoning": _optional(Obj),
        "text": _optional(Obj),
    },
    "custom_tool_call": {
        "call_id": (str, R),
        "input": (str, R),
        "name": (str, R),
        "id": _optional(str),
        "namespace": _optional(str),
        "caller": _optional(ToolCaller),
    },
    "custom_tool_call_output": {
        "call_id": (str, R),
        "output": (str | list[Obj], R),
        "id": _optional(str),
        "caller": _optional(ToolCaller),
    },
    "file_search_call": {
        "id": (str, R),
        "queries": (list[str], R),
        "status": (SearchStatus, R),
        "results": _optional(list[Obj]),
    },
    "image_generation_call": {
        "id": (str, R),
        "result": (str | None, R),
        "status": (Literal["in_progress", "completed", "generating", "failed"], R),
    },
    "local_shell_call": {
        "id": (str, R),
        "call_id": (str, R),
        "action": (LocalShellAction, R),
        "status": (ItemStatus, R),
    },
    "local_shell_call_output": {  # the SDK names its call by ``id``; clients also use call_id
        "id": _optional(str),
        "call_id": _optional(str),
        "output": (str, R),
        "status": _optional(ItemStatus),
    },
    "program": {
        "id": (str, R),
        "call_id": (str, R),
        "code": (str, R),
        "fingerprint": (str, R),
    },
    "program_output": {
        "id": (str, R),
        "call_id": (str, R),
        "result": (str, R),
        "status": (Literal["completed", "incomplete"], R),
    },
    "shell_call": {
        "call_id": (str, R),
        "action": (Obj, R),
        "id": _optional(str),
        "status": _optional(ItemStatus),
        "environment": _optional(Obj),
        "caller": _optional(ToolCaller),
    },
    "shell_call_output": {
        "call_id": (str, R),
        "output": (list[Obj], R),
        "id": _optional(str),
        "status": _optional(ItemStatus),
        "max_output_length": _optional(int),
        "caller": _optional(ToolCaller),
    },
    "tool_search_call": {
        "arguments": (Any, R),
        "call_id": _optional(str),
        "execution": _optional(Execution),
        "id": _optional(str),
        "status": _optional(ItemStatus),
    },
    "tool_search_output": {
        "tools": (list[OfferedTool], R),
        "call_id": _optional(str),
        "execution": _optional(Execution),
        "id": _optional(str),
        "status": _optional(ItemStatus),
    },
    "web_search_call": {
        "id": (str, R),
        "action": (Obj, R),
        "status": (SearchStatus, R),
    },
}
"""Item type -> its fields (``name: (type, R)`` when required, else ``(type | None, None)``)."""


_MODELS: dict[str, type[RelayedItem]] = models_from_table(  # type: ignore[assignment]
    RELAYED_ITEM_FIELDS, RelayedItem, "Item"
)


def relayed_item_model(kind: str) -> type[RelayedItem]:
    """The model of relayed item type ``kind``.

    Raises:
        KeyError: ``kind`` is not a relayed item type.
    """
    return _MODELS[kind]


if TYPE_CHECKING:
    RelayedInputItem = RelayedItem
else:
    RelayedInputItem = union_of(_MODELS)
"""One relayed input item: its type's model (reached through
:data:`~responses_gateway.protocol.items.InputItem`, which picks it by ``type``)."""
