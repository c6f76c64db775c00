"""The input items the gateway relays or lowers without acting on them, field by field.

Owns :data:`RELAYED_ITEM_FIELDS`, one row per item type of the SDK's ``ResponseInputItemParam``
that :mod:`~responses_gateway.protocol.items` does not model itself (``web_search_call``,
``shell_call``, ``additional_tools``...): the fields the SDK declares for it, each with its type
and whether it is required, and :data:`RelayedInputItem`, the union of the models built from
those rows. The rows follow the SDK's TypedDicts (required keys required; ids, call ids, names,
statuses and text typed strictly; nested objects checked to be objects or arrays, their inside
left to the upstream), so a hostile item (an id that is an array, a call without ``call_id``) is a
400 naming ``input[i].<field>`` at every door, and nothing downstream (the chat adapter's call
pairing, the conversation store's item index) ever sees one. Tools an item offers
(``additional_tools``, ``tool_search_output``) are the request's own :data:`Tool` models.
Unknown keys are kept (clients relay what they got). Converts and decides nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Tag, create_model

from responses_gateway.protocol.fields import Lenient, object_union, tagged_union_by_type
from responses_gateway.protocol.tools import Tool

__all__ = ["RELAYED_ITEM_FIELDS", "RelayedItem", "RelayedInputItem", "relayed_item_model"]

ItemStatus = Literal["in_progress", "completed", "incomplete"]
SearchStatus = Literal["in_progress", "searching", "completed", "incomplete", "failed"]
Execution = Literal["server", "client"]
Obj = dict[str, Any]


class RelayedItem(Lenient):
    """The base of every relayed item model: its ``type`` (each model narrows it)."""

    type: str


def _optional(annotation: Any) -> tuple[Any, None]:
    return (annotation | None, None)


R = ...
"""Marks a required field in a row (``(type, R)``)."""

RELAYED_ITEM_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "additional_tools": {
        "role": (Literal["developer"], R),
        "tools": (list[Tool], R),
        "id": _optional(str),
    },
    "apply_patch_call": {
        "call_id": (str, R),
        "operation": (Obj, R),
        "status": (Literal["in_progress", "completed"], R),
        "id": _optional(str),
    },
    "apply_patch_call_output": {
        "call_id": (str, R),
        "status": (Literal["completed", "failed"], R),
        "id": _optional(str),
        "output": _optional(str),
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
        "action": _optional(Obj),
        "actions": _optional(list[Obj]),
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
    },
    "custom_tool_call_output": {
        "call_id": (str, R),
        "output": (str | list[Obj], R),
        "id": _optional(str),
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
        "action": (Obj, R),
        "status": (ItemStatus, R),
    },
    "local_shell_call_output": {
        "id": (str, R),
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
    },
    "shell_call_output": {
        "call_id": (str, R),
        "output": (list[Obj], R),
        "id": _optional(str),
        "status": _optional(ItemStatus),
        "max_output_length": _optional(int),
    },
    "tool_search_call": {
        "arguments": (Any, R),
        "call_id": _optional(str),
        "execution": _optional(Execution),
        "id": _optional(str),
        "status": _optional(ItemStatus),
    },
    "tool_search_output": {
        "tools": (list[Tool], R),
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


def _model_name(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_")) + "Item"


_MODELS: dict[str, type[RelayedItem]] = {
    kind: create_model(  # type: ignore[call-overload]
        _model_name(kind),
        __base__=RelayedItem,
        __doc__=f"A ``{kind}`` input item, as the SDK types it.",
        type=(Literal[kind], R),
        **fields,
    )
    for kind, fields in RELAYED_ITEM_FIELDS.items()
}


def relayed_item_model(kind: str) -> type[RelayedItem]:
    """The model of relayed item type ``kind``.

    Raises:
        KeyError: ``kind`` is not a relayed item type.
    """
    return _MODELS[kind]


if TYPE_CHECKING:
    RelayedInputItem = RelayedItem
else:
    RelayedInputItem = Annotated[
        Union[tuple(Annotated[model, Tag("#" + kind)] for kind, model in _MODELS.items())],  # noqa: UP007
        object_union(tagged_union_by_type({kind: "#" + kind for kind in _MODELS})),
    ]
"""One relayed input item: its type's model (reached through
:data:`~responses_gateway.protocol.items.InputItem`, which picks it by ``type``)."""
