"""Upstream answers that try to keep the gateway's loop going: the fault suite's models.

Owns two families of scripted answers for :class:`~responses_gateway.testing.script.
ScriptedUpstream`:

* every output item the pinned ``openai`` SDK knows, with every ``status`` its type allows, as
  a Responses upstream would relay it (:func:`output_item_cases`, :func:`relayed_turn`). The
  item types and statuses are read from the SDK's ``ResponseOutputItem`` union, so a new type
  or status is covered without editing a test; each item is the smallest one the SDK validates;
* models that call a tool on every turn: one obeying a forced ``tool_choice`` every time it is
  sent (:func:`obeys_tool_choice`, the small local model that calls ``add`` again and again
  while the forced choice is repeated), one calling a tool whatever it is told
  (:func:`calls_every_turn`).

Test code: it decides nothing, talks to nothing, and the gateway never imports it.
"""

from __future__ import annotations

import itertools
import threading
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from responses_gateway.testing.script import RelayedItem, ToolCall, Turn, TurnFactory, Wire

__all__ = [
    "OutputItemCase",
    "calls_every_turn",
    "forced_function",
    "obeys_tool_choice",
    "output_item_cases",
    "relayed_turn",
    "smallest_tool",
]


@dataclass(frozen=True, slots=True)
class OutputItemCase:
    """One output item type with one of its statuses (None: the type has no ``status``)."""

    item_type: str
    status: str | None
    item: dict[str, Any]
    """The smallest item of the type that the SDK validates, with that status."""
    spec_problem: str | None = None
    """Why a spec refuses the item (a status the SDK allows and a spec does not list), or
    None: both specs accept it. Relayed as it came, such an item keeps the upstream's fault."""

    @property
    def id(self) -> str:
        return f"{self.item_type}-{self.status or 'no_status'}"


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def _literals(annotation: Any) -> list[Any]:
    values: list[Any] = []
    for member in _members(annotation):
        if get_origin(member) is Literal:
            values += get_args(member)
    return values


def _sample(annotation: Any) -> Any:
    """The smallest value of a type: a Literal's first value, empty containers, a model's
    required fields."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _sample(get_args(annotation)[0])
    if origin is Literal:
        return get_args(annotation)[0]
    if origin in (Union, types.UnionType):
        members = [m for m in get_args(annotation) if m is not type(None)]
        return _sample(members[0]) if members else None
    if origin in (list, typing.List):  # noqa: UP006 - older SDKs annotate with typing.List
        return []
    if origin in (dict, typing.Dict):  # noqa: UP006
        return {}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _smallest(annotation)
    return {str: "x", int: 0, float: 0.0, bool: False}.get(annotation)


def _smallest(model: type[BaseModel]) -> dict[str, Any]:
    return {
        name: _sample(field.annotation)
        for name, field in model.model_fields.items()
        if field.is_required()
    }


_NAMES: dict[str, dict[str, Any]] = {
    "mcp_call": {"server_label": "calc", "name": "add", "arguments": '{"a": 2, "b": 3}'},
    "mcp_approval_request": {"server_label": "calc", "name": "add", "arguments": "{}"},
    "mcp_list_tools": {"server_label": "calc"},
    "function_call": {"name": "lookup", "arguments": "{}"},
    "custom_tool_call": {"name": "patcher"},
}
"""Fields that tie an item to the tool a case may declare (the MCP server ``calc``, the
function ``lookup``, the custom tool ``patcher``)."""


def _merged(under: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``under``, objects merged key by key."""
    merged = dict(under)
    for key, value in over.items():
        below = merged.get(key)
        both = isinstance(below, dict) and isinstance(value, dict)
        merged[key] = _merged(below, value) if both else value  # type: ignore[arg-type]
    return merged


def output_item_cases() -> list[OutputItemCase]:
    """Every output item type of the pinned SDK with every status its type allows; each item
    carries what the SDK requires of it, and what OpenAI's spec and the Open Responses spec
    require of its type too (a well-formed answer, but for statuses a spec does not list)."""
    from openai.types.responses.response_output_item import ResponseOutputItem

    from responses_gateway.testing.spec_oracle import spec_oracle

    oracle = spec_oracle()
    cases: list[OutputItemCase] = []
    for model in _members(ResponseOutputItem):
        fields = model.model_fields
        item_type = str(_literals(fields["type"].annotation)[0])
        statuses: list[str | None] = (
            [str(s) for s in _literals(fields["status"].annotation)] if "status" in fields else []
        )
        for status in statuses or [None]:
            smallest = _merged(oracle.required_of_item(item_type), _smallest(model))
            item = {**smallest, "type": item_type, **_NAMES.get(item_type, {})}
            item["id"] = f"up_{item_type}"
            if status is not None:
                item["status"] = status
            model.model_validate(item)  # the SDK accepts what the upstream sends
            try:
                oracle.check_output_item(item, count=False)
                problem = None
            except AssertionError as refused:
                problem = str(refused)
            cases.append(OutputItemCase(item_type, status, item, problem))
    return cases


def smallest_tool(tool_type: str) -> dict[str, Any] | None:
    """The smallest tool of ``tool_type`` that the SDK validates (its required fields), or None
    when the SDK has no such tool."""
    from openai.types.responses.tool import Tool

    for model in _members(Tool):
        if tool_type in _literals(model.model_fields["type"].annotation):
            tool = {**_smallest(model), "type": tool_type}
            model.model_validate(tool)
            return tool
    return None


def relayed_turn(item: dict[str, Any], text: str = "Done.") -> Turn:
    """A Responses turn whose output is ``item`` (announced, then done as it is: an unfinished
    status stays unfinished), followed by a message."""
    return Turn(
        text=text, relayed_items=[RelayedItem(added=dict(item), events=[], done=dict(item))]
    )


def forced_function(body: dict[str, Any]) -> str | None:
    """The function a request's ``tool_choice`` forces, on either wire (chat's
    ``{"type": "function", "function": {"name"}}``, Responses' ``{"type": "function",
    "name"}``), or None."""
    choice = body.get("tool_choice")
    if not isinstance(choice, dict) or choice.get("type") != "function":
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else choice.get("name")
    return str(name) if name else None


def obeys_tool_choice(arguments: str, answer: str) -> TurnFactory:
    """A model that calls the function a request forces, with ``arguments``, every time it is
    forced, and otherwise answers ``answer``: sent the forced choice on every call, it calls
    the tool forever."""

    def turn(body: dict[str, Any], wire: Wire) -> Turn:
        name = forced_function(body)
        if name is None:
            return Turn(text=answer)
        return Turn(tool_calls=[ToolCall(name, arguments)])

    return turn


def calls_every_turn(name: str, arguments: Callable[[int], str]) -> TurnFactory:
    """A model that calls ``name`` on every turn, whatever it is offered or told; ``arguments``
    gets the turn's number (1, 2, ...): the same arguments every time make no progress, new
    ones do."""
    count: Iterator[int] = itertools.count(1)
    lock = threading.Lock()

    def turn(body: dict[str, Any], wire: Wire) -> Turn:
        with lock:
            n = next(count)
        return Turn(tool_calls=[ToolCall(name, arguments(n), f"call_{n}")])

    return turn
