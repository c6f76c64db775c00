"""The names of the installed openai SDK's Responses unions and literals, per contract family.

Owns :func:`sdk_names`: for each family of :mod:`responses_gateway.protocol.contract` (tool
types, input item types, output item types, stream events, create fields, include values), the
names the installed ``openai`` package declares, found by walking its types with
:func:`typing.get_args` (``ToolParam``, ``ResponseInputItemParam``, ``ResponseOutputItem``,
``ResponseStreamEvent``, ``ResponseIncludable``, ``ResponseCreateParamsBase``). Raising the SDK
pin therefore shows new names. It imports the SDK lazily and decides nothing.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

__all__ = ["FAMILIES", "sdk_names", "sdk_version"]

FAMILIES: tuple[str, ...] = (
    "tools",
    "input_items",
    "output_items",
    "stream_events",
    "create_fields",
    "include_values",
)
"""The contract families, in report order."""

_WRAPPERS = {typing.Annotated, typing.Required, typing.NotRequired}


def _members(t: Any) -> list[Any]:
    origin = get_origin(t)
    if origin in _WRAPPERS:
        return _members(get_args(t)[0])
    if origin is Union or origin is types.UnionType:
        return [m for arg in get_args(t) for m in _members(arg)]
    return [t]


def _literals(t: Any) -> list[str]:
    origin = get_origin(t)
    if origin in _WRAPPERS:
        return _literals(get_args(t)[0])
    if origin is Literal:
        return [a for a in get_args(t) if isinstance(a, str)]
    if origin is Union or origin is types.UnionType:
        return [v for arg in get_args(t) for v in _literals(arg)]
    return []


def _type_of(member: Any) -> list[str]:
    fields = getattr(member, "model_fields", None)
    if fields is not None:  # a pydantic model
        return _literals(fields["type"].annotation)
    annotation = getattr(member, "__annotations__", {}).get("type")
    if annotation is None:
        return []
    if isinstance(annotation, typing.ForwardRef):  # TypedDicts keep forward references
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        module = __import__(member.__module__, fromlist=["_"])
        annotation = eval(annotation, vars(typing) | vars(module))  # noqa: S307 - SDK source
    return _literals(annotation)


def _union_names(union: Any) -> list[str]:
    names: list[str] = []
    for member in _members(union):
        for name in _type_of(member):
            if name not in names:
                names.append(name)
    return names


def sdk_version() -> str:
    """The installed ``openai`` version."""
    import openai

    return str(openai.__version__)


def sdk_names() -> dict[str, list[str]]:
    """Family -> the names the installed SDK declares for it, in SDK order."""
    from openai.types import responses as r
    from openai.types.responses import response_create_params as params

    return {
        "tools": _union_names(r.ToolParam),
        "input_items": _union_names(r.ResponseInputItemParam),
        "output_items": _union_names(r.ResponseOutputItem),
        "stream_events": _union_names(r.ResponseStreamEvent),
        "create_fields": [*params.ResponseCreateParamsBase.__annotations__, "stream"],
        "include_values": _literals(r.ResponseIncludable),
    }
