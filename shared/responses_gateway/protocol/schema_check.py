"""JSON Schema checks: the schemas clients send, and the values a model answers with.

Owns :func:`schema_problem`: what is wrong with a schema, in words, or None. It checks the shape
OpenAI's validation enforces for function parameters (the top level is an object schema; every
keyword that holds schemas holds schemas; ``type`` names JSON Schema types; ``required`` and
``enum`` are arrays), walking iteratively so any depth is safe. It is not a full metaschema
validation (formats, ``$ref`` targets and keyword semantics are the model provider's business),
needs no dependency, and must not raise: callers turn the answer into their own error.

Owns :func:`instance_problem` too: where a JSON value breaks a schema, or None. It covers the
keywords OpenAI's structured outputs accept (``type``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``prefixItems``, ``enum``, ``const``, ``anyOf``, ``oneOf``,
``allOf``, ``not``, local ``$ref`` into ``$defs``/``definitions``, the length, size and range
bounds and ``pattern``); keywords it does not know (``format``...) are not checked.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["instance_problem", "schema_problem"]

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


_PYTHON_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_BOUNDS: tuple[tuple[str, Any, str], ...] = (
    ("minLength", lambda v, b: not isinstance(v, str) or len(v) >= b, "is shorter than {}"),
    ("maxLength", lambda v, b: not isinstance(v, str) or len(v) <= b, "is longer than {}"),
    ("minItems", lambda v, b: not isinstance(v, list) or len(v) >= b, "has fewer items than {}"),
    ("maxItems", lambda v, b: not isinstance(v, list) or len(v) <= b, "has more items than {}"),
    ("minimum", lambda v, b: not _PYTHON_TYPES["number"](v) or v >= b, "is less than {}"),
    ("maximum", lambda v, b: not _PYTHON_TYPES["number"](v) or v <= b, "is greater than {}"),
    ("exclusiveMinimum", lambda v, b: not _PYTHON_TYPES["number"](v) or v > b, "is not above {}"),
    ("exclusiveMaximum", lambda v, b: not _PYTHON_TYPES["number"](v) or v < b, "is not below {}"),
)
_MAX_REFS = 64
"""How many ``$ref`` hops one value may take (a recursive schema on a deep value)."""


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    hops = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and hops < _MAX_REFS:
        ref = schema["$ref"]
        if ref == "#":
            schema = root
        elif ref.startswith("#/"):
            node: Any = root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                node = node.get(part) if isinstance(node, dict) else None
            schema = node if node is not None else {}
        else:
            return {}  # a remote reference is not followed
        hops += 1
    return schema


def _here(path: str) -> str:
    return path or "the top level"


def instance_problem(value: Any, schema: Any, root: Any = None, path: str = "") -> str | None:
    """Where ``value`` breaks ``schema`` (``root`` holds its ``$defs``), in words, or None."""
    root = schema if root is None else root
    schema = _resolve(schema, root if isinstance(root, dict) else {})
    if schema is False:
        return f"{_here(path)} is not allowed"
    if not isinstance(schema, dict):
        return None
    problem = _own_problem(value, schema, path)
    if problem is None:
        problem = _combined_problem(value, schema, root, path)
    if problem is None and isinstance(value, dict):
        problem = _object_problem(value, schema, root, path)
    if problem is None and isinstance(value, list):
        problem = _array_problem(value, schema, root, path)
    return problem


def _own_problem(value: Any, schema: dict[str, Any], path: str) -> str | None:
    kinds = schema.get("type")
    if kinds is not None:
        names = kinds if isinstance(kinds, list) else [kinds]
        if not any(_PYTHON_TYPES.get(str(n), lambda v: True)(value) for n in names):
            return f"{_here(path)} is not of type {' or '.join(map(str, names))}"
    if "enum" in schema and isinstance(schema["enum"], list) and value not in schema["enum"]:
        return f"{_here(path)} is not one of {schema['enum']}"
    if "const" in schema and value != schema["const"]:
        return f"{_here(path)} is not {schema['const']!r}"
    for keyword, holds, words in _BOUNDS:
        bound = schema.get(keyword)
        if isinstance(bound, int | float) and not holds(value, bound):
            return f"{_here(path)} {words.format(bound)}"
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and isinstance(value, str):
        try:
            if re.search(pattern, value) is None:
                return f"{_here(path)} does not match {pattern!r}"
        except re.error:
            return None
    return None


def _combined_problem(value: Any, schema: dict[str, Any], root: Any, path: str) -> str | None:
    for sub in schema.get("allOf") or []:
        if problem := instance_problem(value, sub, root, path):
            return problem
    for keyword in ("anyOf", "oneOf"):
        options = schema.get(keyword)
        if isinstance(options, list) and options:
            matches = sum(instance_problem(value, sub, root, path) is None for sub in options)
            if matches == 0 or (keyword == "oneOf" and matches > 1):
                return f"{_here(path)} matches {matches} of its {keyword} schemas"
    if "not" in schema and instance_problem(value, schema["not"], root, path) is None:
        return f"{_here(path)} matches its 'not' schema"
    return None


def _object_problem(
    value: dict[str, Any], schema: dict[str, Any], root: Any, path: str
) -> str | None:
    for name in schema.get("required") or []:
        if name not in value:
            return f"{_here(path)} lacks the required property '{name}'"
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        where = f"{path}.{name}" if path else name
        if name in properties:
            sub: Any = properties[name]
        elif extra is False:
            return f"{_here(path)} has the property '{name}', which its schema does not allow"
        else:
            sub = extra
        if problem := instance_problem(item, sub, root, where):
            return problem
    return None


def _array_problem(value: list[Any], schema: dict[str, Any], root: Any, path: str) -> str | None:
    prefix = schema.get("prefixItems")
    prefix = prefix if isinstance(prefix, list) else []
    for index, item in enumerate(value):
        sub = prefix[index] if index < len(prefix) else schema.get("items", True)
        if problem := instance_problem(item, sub, root, f"{path}[{index}]"):
            return problem
    return None
