"""What the stateless protocol version ``2026-07-28`` adds to a request: its envelope and headers.

Owns the per-request ``_meta`` envelope (:func:`envelope`), the HTTP headers a request carries
(:func:`request_headers`: ``Mcp-Method``, ``Mcp-Name``, and the ``Mcp-Param-*`` headers that
mirror the arguments a tool's input schema marks with ``x-mcp-header``), header value encoding
(:func:`encode_header_value`: base64 in a ``=?base64?...?=`` sentinel when a value would not
survive as a header), and the rule that a listed tool whose ``x-mcp-header`` annotations are
invalid is dropped (:func:`header_map`). The rules are the specification's, as the ``mcp`` SDK
implements them (the tests compare the two). Pure functions, no I/O.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "MODERN_PROTOCOL_VERSION",
    "HeaderMap",
    "encode_header_value",
    "envelope",
    "header_map",
    "param_headers",
    "request_headers",
]

MODERN_PROTOCOL_VERSION = "2026-07-28"
"""The stateless protocol version (``server/discover`` instead of ``initialize``)."""

HeaderMap = dict[tuple[str, ...], str]
"""A tool's ``x-mcp-header`` annotations: argument path -> header token."""

_X_MCP_HEADER = "x-mcp-header"
_NAME_PARAM = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose named parameter is mirrored in the ``Mcp-Name`` header."""
_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")
_SENTINEL = re.compile(r"^=\?base64\?.*\?=$")
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
_SINGLE = frozenset(
    {
        "items",
        "contains",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


def envelope(client_info: Mapping[str, Any]) -> dict[str, Any]:
    """The ``_meta`` keys every request of this version carries (no client capabilities)."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientInfo": dict(client_info),
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def request_headers(
    method: str, params: Mapping[str, Any] | None, maps: Mapping[str, HeaderMap]
) -> dict[str, str]:
    """The headers of one request: version, method, name, and a tool call's parameters."""
    headers = {"mcp-protocol-version": MODERN_PROTOCOL_VERSION, "mcp-method": method}
    key = _NAME_PARAM.get(method)
    name = params.get(key) if key is not None and params is not None else None
    if isinstance(name, str):
        headers["mcp-name"] = encode_header_value(name)
        if method == "tools/call" and name in maps and params is not None:
            arguments = params.get("arguments")
            if not isinstance(arguments, dict):
                arguments = {}
            headers.update(param_headers(maps[name], arguments))
    return headers


def encode_header_value(value: str) -> str:
    """``value`` as is when it is printable ASCII without edge whitespace, else base64-wrapped."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not _SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def header_map(input_schema: Any) -> HeaderMap | None:
    """The ``x-mcp-header`` annotations of a tool's input schema; ``None`` when one is invalid
    (the tool must then be dropped from the listing).

    Valid means: on a property reached from the root through ``properties`` alone, a token
    (RFC 9110), on a ``string``/``integer``/``boolean`` property, unique ignoring case.
    """
    found: HeaderMap = {}
    seen: set[str] = set()
    for path, schema in _positions(input_schema):
        if _X_MCP_HEADER not in schema:
            continue
        token = schema[_X_MCP_HEADER]
        if not path or not isinstance(token, str) or not _TOKEN.fullmatch(token):
            return None
        kind = schema.get("type")
        if not isinstance(kind, str) or kind not in _HEADER_TYPES or token.lower() in seen:
            return None
        seen.add(token.lower())
        found[path] = token
    return found


def param_headers(annotations: HeaderMap, arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-<token>`` headers for the annotated arguments that have a scalar value."""
    headers: dict[str, str] = {}
    for path, token in annotations.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, str | int | float):
            try:
                rendered = str(value)
            except ValueError:  # an int past the digit limit
                continue
        else:
            continue
        headers[f"Mcp-Param-{token}"] = encode_header_value(rendered)
    return headers


def _positions(root: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every schema position of ``root`` with its ``properties`` path (``None`` once another
    applicator was crossed); ``$ref`` is not followed, instance data is not entered."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    stack.append(((*path, name) if path is not None else None, sub))
            elif keyword in _SINGLE:
                stack.append((None, value))
            elif keyword in _LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())
