"""A structural check of JSON Schemas clients send as function tool ``parameters``.

Owns :func:`schema_problem`: what is wrong with a schema, in words, or None. It checks the shape
OpenAI's validation enforces for function parameters (the top level is an object schema; every
keyword that holds schemas holds schemas; ``type`` names JSON Schema types; ``required`` and
``enum`` are arrays), walking iteratively so any depth is safe. It is not a full metaschema
validation (formats, ``$ref`` targets and keyword semantics are the model provider's business),
needs no dependency, and must not raise: callers turn the answer into their own error.
"""

from __future__ import annotations

from typing import Any

__all__ = ["schema_problem"]

_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_ONE_SCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def _type_problem(value: Any) -> str | None:
    names = value if isinstance(value, list) else [value]
    for name in names:
        if not isinstance(name, str) or name not in _TYPES:
            return f"{name!r} is not a valid JSON Schema type"
    return None


def _node_problem(node: dict[str, Any], where: str, pending: list[tuple[Any, str]]) -> str | None:
    """The problem of one schema object, queueing its subschemas on ``pending``."""
    if "type" in node and (problem := _type_problem(node["type"])):
        return f"{problem} (at {where})"
    required = node.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(r, str) for r in required)
    ):
        return f"'required' must be an array of strings (at {where})"
    if "enum" in node and not isinstance(node["enum"], list):
        return f"'enum' must be an array (at {where})"
    for keyword in _ONE_SCHEMA:
        if keyword in node:
            child = node[keyword]
            if keyword in ("items", "additionalProperties") and isinstance(child, bool):
                continue
            pending.append((child, f"{where}.{keyword}"))
    for keyword in _SCHEMA_LISTS:
        if keyword in node:
            children = node[keyword]
            if not isinstance(children, list):
                return f"'{keyword}' must be an array of schemas (at {where})"
            pending += [(c, f"{where}.{keyword}[{i}]") for i, c in enumerate(children)]
    for keyword in _SCHEMA_MAPS:
        if keyword in node:
            children = node[keyword]
            if not isinstance(children, dict):
                return f"'{keyword}' must be an object of schemas (at {where})"
            pending += [(c, f"{where}.{keyword}.{name}") for name, c in children.items()]
    return None


def schema_problem(schema: Any) -> str | None:
    """What makes ``schema`` unusable as function parameters, or None when it is fine."""
    if not isinstance(schema, dict):
        return "the parameters must be a JSON Schema object"
    kind = schema.get("type")
    if kind is not None and kind != "object":
        return f"schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{kind}\"'"
    pending: list[tuple[Any, str]] = [(schema, "parameters")]
    while pending:
        node, where = pending.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return f"{node!r} is not a valid schema (at {where})"
        problem = _node_problem(node, where, pending)
        if problem:
            return problem
    return None
