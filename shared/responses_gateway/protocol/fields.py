"""Building blocks of every request model: the lenient base, OpenAI-worded errors, unions.

Owns what the models of every door (:mod:`~responses_gateway.protocol.request`,
:mod:`~responses_gateway.protocol.items`, :mod:`~responses_gateway.protocol.tools`,
:mod:`~responses_gateway.protocol.bodies`) are built from, so a field means the same thing and fails
with the same error wherever it enters: :class:`Lenient` (client data: unknown keys kept, scalars
strict, no NaN), :class:`Closed` (a typed object of the API: unknown keys refused),
:func:`custom_error` (an error whose message is final but for its ``{param}``), :func:`bounded` and
:data:`NonEmptyStr` (OpenAI's range and empty-string errors), and unions told apart by a callable
discriminator (:func:`object_union`, :func:`tagged_union_by_type`) whose tags start with ``#``, so
an error's location reads as the client's JSON path once the tags are dropped
(:func:`~responses_gateway.protocol.request.to_invalid_request`). Decides nothing about a request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Tag, create_model
from pydantic_core import PydanticCustomError

__all__ = [
    "REQUIRED",
    "Closed",
    "Lenient",
    "NonEmptyStr",
    "bounded",
    "custom_error",
    "list_or_object",
    "models_from_table",
    "non_empty",
    "object_union",
    "optional",
    "string_or_object",
    "tagged_union_by_type",
    "union_of",
]

REQUIRED = ...
"""Marks a required field in a table row (``name: (type, REQUIRED)``)."""


def optional(annotation: Any) -> tuple[Any, None]:
    """A table row's optional field: ``annotation`` or null, absent by default."""
    return (annotation | None, None)


class Lenient(BaseModel):
    """Client-sent data: unknown keys kept, scalars strict, no NaN/Infinity."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class Closed(BaseModel):
    """A typed object of the API whose every property is modelled: an unknown key is a 400
    ``unknown_parameter`` naming its path (as OpenAI answers), never kept or echoed; scalars
    strict, no NaN/Infinity."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def custom_error(code: str, message: str, field: str | None = None) -> PydanticCustomError:
    """An error whose message is final except for ``{param}``; ``field`` extends the path."""
    return PydanticCustomError(code, message, {"field": field} if field else None)


def bounded(kind: Literal["decimal", "integer"], low: float | None, high: float | None) -> Any:
    """An after-validator enforcing ``low <= value <= high`` with OpenAI's wording."""

    def check(value: float) -> float:
        shown = int(value) if isinstance(value, float) and value.is_integer() else value
        if low is not None and value < low:
            raise PydanticCustomError(
                f"{kind}_below_min_value",
                "Invalid '{param}': " + f"{kind} below minimum value. Expected a value >= "
                f"{low}, but got {shown!r} instead.",
            )
        if high is not None and value > high:
            raise PydanticCustomError(
                f"{kind}_above_max_value",
                "Invalid '{param}': " + f"{kind} above maximum value. Expected a value <= "
                f"{high}, but got {shown!r} instead.",
            )
        return value

    return AfterValidator(check)


def non_empty(value: str) -> str:
    """``value``, or OpenAI's ``empty_string`` error."""
    if not value:
        raise PydanticCustomError(
            "empty_string",
            "Invalid '{param}': empty string. Expected a string with minimum length 1, but got "
            "an empty string instead.",
        )
    return value


NonEmptyStr = Annotated[str, AfterValidator(non_empty)]


def tagged_union_by_type(
    known: Mapping[str, str],
    *,
    fallback: str | None = None,
    untyped: Callable[[Mapping[str, Any]], str] | None = None,
) -> Callable[[Any], str | None]:
    """A discriminator for a union of objects told apart by their ``type`` key.

    Args:
        known: ``type`` value -> tag of the union member that validates it.
        fallback: tag used for any other object (``None``: fail as ``invalid_type``).
        untyped: picks the tag for an object without ``type`` (default: ``fallback``); an
            object whose ``type`` is null has one, and gets ``fallback`` (a null is no type).

    Returns:
        The function to give :class:`pydantic.Discriminator`. Non-objects get ``None``, which the
        union reports with its ``custom_error_type`` (``invalid_type``).
    """

    def pick(value: Any) -> str | None:
        if isinstance(value, Mapping):
            kind = value.get("type")
            if "type" not in value and untyped is not None:
                return untyped(value)
        elif isinstance(value, BaseModel):
            kind = getattr(value, "type", None)
        else:
            return None
        if isinstance(kind, str) and kind in known:
            return known[kind]
        return fallback

    return pick


def object_union(pick: Callable[[Any], str | None], expected: str = "an object") -> Discriminator:
    """A :class:`pydantic.Discriminator` whose "no tag" failure reads as ``invalid_type``.

    ``expected`` completes "Invalid type for 'p': expected ..." when ``pick`` returns ``None``.
    """
    return Discriminator(pick, custom_error_type="invalid_type", custom_error_message=expected)


def list_or_object(value: Any) -> str | None:
    """``#list`` or ``#object``: the tag of an array-or-object union."""
    if isinstance(value, list | tuple):
        return "#list"
    if isinstance(value, Mapping | BaseModel):
        return "#object"
    return None


def string_or_object(value: Any) -> str | None:
    """``#string`` or ``#object``: the tag of a string-or-object union."""
    if isinstance(value, str):
        return "#string"
    if isinstance(value, Mapping | BaseModel):
        return "#object"
    return None


def _camel(kind: str) -> str:
    return "".join(part.capitalize() for part in kind.split("_"))


def models_from_table(
    rows: Mapping[str, Mapping[str, tuple[Any, Any]]], base: type[BaseModel], suffix: str
) -> dict[str, type[BaseModel]]:
    """One model per row of a table of object types told apart by ``type``: the row's key is
    the ``type`` value, its value the fields (``name: (annotation, REQUIRED or a default)``)."""
    return {
        kind: create_model(  # type: ignore[call-overload]
            _camel(kind) + suffix,
            __base__=base,
            __doc__=f"A ``{kind}`` {suffix.lower()}, field by field.",
            type=(Literal[kind], REQUIRED),
            **fields,
        )
        for kind, fields in rows.items()
    }


def union_of(
    models: Mapping[str, type[BaseModel]],
    *,
    fallback: type[BaseModel] | None = None,
    expected: str = "an object",
) -> Any:
    """The union of ``models`` (keyed by their ``type``), picked by ``type``. Any other type is
    ``fallback`` when given (kept as sent), else an ``invalid_value`` error on ``type`` naming
    the supported values."""
    members: list[Any] = [Annotated[model, Tag("#" + kind)] for kind, model in models.items()]
    if fallback is None:
        supported: Any = Literal[tuple(models)]
        fallback = create_model("UnknownType", __base__=Lenient, type=(supported, REQUIRED))
    members.append(Annotated[fallback, Tag("#other")])
    pick = tagged_union_by_type({kind: "#" + kind for kind in models}, fallback="#other")
    return Annotated[Union[tuple(members)], object_union(pick, expected)]  # noqa: UP007
