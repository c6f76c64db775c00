"""The stateless protocol version's envelope and headers, checked against the ``mcp`` SDK's own
functions (the oracle): ``x-mcp-header`` validation and maps, ``Mcp-Param-*`` values, header
value encoding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st
from mcp.shared.inbound import (
    encode_header_value as sdk_encode,
    find_invalid_x_mcp_header,
    mcp_param_headers,
    x_mcp_header_map,
)

from responses_gateway.mcp.modern import (
    MODERN_PROTOCOL_VERSION,
    encode_header_value,
    envelope,
    header_map,
    param_headers,
    request_headers,
)

SCHEMAS: list[Any] = [
    None,
    {"type": "object"},
    {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}},
    {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "x-mcp-header": "A"},
            "b": {"type": "boolean", "x-mcp-header": "B"},
            "nested": {
                "type": "object",
                "properties": {"c": {"type": "string", "x-mcp-header": "C"}},
            },
        },
    },
    {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
    {"type": "object", "properties": {"s": {"type": "string", "x-mcp-header": "has space"}}},
    {"type": "object", "properties": {"s": {"type": "string", "x-mcp-header": 3}}},
    {"type": "object", "properties": {"s": {"type": ["string"], "x-mcp-header": "S"}}},
    {
        "type": "object",
        "properties": {
            "x": {"type": "string", "x-mcp-header": "Dup"},
            "y": {"type": "string", "x-mcp-header": "dup"},
        },
    },
    {"type": "object", "x-mcp-header": "Root"},
    {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}},
    {"anyOf": [{"type": "object", "properties": {"k": {"type": "string", "x-mcp-header": "K"}}}]},
    {"$defs": {"d": {"type": "string", "x-mcp-header": "D"}}},
    {"type": "object", "properties": {"e": {"enum": [{"x-mcp-header": "NotASchema"}]}}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_header_map_agrees_with_the_sdk(schema: Any) -> None:
    expected = None if find_invalid_x_mcp_header(schema) is not None else x_mcp_header_map(schema)
    assert header_map(schema) == expected


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"a": 1, "b": True, "nested": {"c": "eu-west"}},
        {"a": None, "b": False, "nested": "not an object"},
        {"a": 2.5, "b": [1], "nested": {"c": " padded "}},
        {"a": "ünïcode", "nested": {"c": "=?base64?abc?="}},
    ],
)
def test_param_headers_agree_with_the_sdk(arguments: dict[str, Any]) -> None:
    annotations = header_map(SCHEMAS[3])
    assert annotations is not None
    assert param_headers(annotations, arguments) == mcp_param_headers(annotations, arguments)


@given(st.text())
def test_encode_header_value_agrees_with_the_sdk(value: str) -> None:
    assert encode_header_value(value) == sdk_encode(value)


def test_request_headers_of_a_tool_call() -> None:
    maps = {"lookup": {("region",): "Region"}}
    params = {"name": "lookup", "arguments": {"region": "eu"}, "_meta": envelope({"name": "gw"})}
    assert request_headers("tools/call", params, maps) == {
        "mcp-protocol-version": MODERN_PROTOCOL_VERSION,
        "mcp-method": "tools/call",
        "mcp-name": "lookup",
        "Mcp-Param-Region": "eu",
    }
    assert request_headers("tools/list", None, maps) == {
        "mcp-protocol-version": MODERN_PROTOCOL_VERSION,
        "mcp-method": "tools/list",
    }


def test_envelope_names_the_version_the_client_and_no_capabilities() -> None:
    assert envelope({"name": "gw", "version": "1"}) == {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "gw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
