"""The pure MCP helpers, on hand-built data: filters, approvals, names, items, errors as text.

Item shapes are checked against the ``openai`` SDK's own models, so they stay what clients parse.
"""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses.response_output_item import McpListTools

from responses_gateway.errors import InvalidRequestError
from responses_gateway.mcp import (
    McpServer,
    McpToolset,
    ToolInfo,
    ToolNames,
    error_text,
    filter_allowed,
    function_tool,
    list_tools_item,
    listed_tools_in_context,
    needs_approval,
    server_from_tool,
    tools_from_list_item,
)
from responses_gateway.mcp.tools import FUNCTION_NAME_PATTERN
from responses_gateway.protocol.items import McpListToolsItem
from responses_gateway.protocol.request import McpApprovalFilter, McpTool, McpToolFilter

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "number"}}}
ADD = ToolInfo("add", SCHEMA, "Add.", {"readOnlyHint": True})
DIVIDE = ToolInfo("divide", SCHEMA, "Divide.", None)
DELETE = ToolInfo("delete", SCHEMA, None, {"readOnlyHint": False, "destructiveHint": True})
TOOLS = [ADD, DIVIDE, DELETE]


def mcp_tool(**fields: Any) -> McpTool:
    return McpTool.model_validate(
        {"type": "mcp", "server_label": "calc", "server_url": "https://calc.example/mcp", **fields}
    )


# --------------------------------------------------------------------------- allowed_tools


def test_filter_allowed_none_keeps_every_tool() -> None:
    assert filter_allowed(TOOLS, None) == TOOLS


def test_filter_allowed_name_list_keeps_listed_in_server_order() -> None:
    assert filter_allowed(TOOLS, ["delete", "add", "unknown"]) == [ADD, DELETE]


def test_filter_allowed_empty_list_keeps_nothing() -> None:
    assert filter_allowed(TOOLS, []) == []


def test_filter_allowed_read_only_filter_keeps_read_only_hint_tools() -> None:
    assert filter_allowed(TOOLS, McpToolFilter(read_only=True)) == [ADD]


def test_filter_allowed_names_and_read_only_both_apply() -> None:
    allowed = McpToolFilter(tool_names=["add", "divide"], read_only=True)
    assert filter_allowed(TOOLS, allowed) == [ADD]


def test_filter_allowed_empty_filter_keeps_every_tool() -> None:
    assert filter_allowed(TOOLS, McpToolFilter()) == TOOLS


def test_filter_allowed_from_request_object_parsed() -> None:
    tool = mcp_tool(allowed_tools={"tool_names": ["divide"]})
    assert filter_allowed(TOOLS, tool.allowed_tools) == [DIVIDE]


# --------------------------------------------------------------------------- require_approval


def test_needs_approval_omitted_requires_approval() -> None:
    assert needs_approval(mcp_tool().require_approval, ADD)


def test_needs_approval_always_and_never_strings() -> None:
    assert needs_approval("always", ADD)
    assert not needs_approval("never", DELETE)


@pytest.mark.parametrize(
    ("require_approval", "expected"),
    [
        ({"never": {"tool_names": ["add"]}}, {"add": False, "divide": True, "delete": True}),
        ({"always": {"tool_names": ["delete"]}}, {"add": True, "divide": True, "delete": True}),
        (
            {"always": {"tool_names": ["delete"]}, "never": {"tool_names": ["add", "divide"]}},
            {"add": False, "divide": False, "delete": True},
        ),
        ({"never": {"read_only": True}}, {"add": False, "divide": True, "delete": True}),
        ({"never": {}}, {"add": False, "divide": False, "delete": False}),
        (
            {"always": {"tool_names": ["add"]}, "never": {"tool_names": ["add"]}},
            {"add": True, "divide": True, "delete": True},
        ),
    ],
)
def test_needs_approval_filters_resolve_per_tool(
    require_approval: dict[str, Any], expected: dict[str, bool]
) -> None:
    parsed = mcp_tool(require_approval=require_approval).require_approval
    assert isinstance(parsed, McpApprovalFilter)
    assert {tool.name: needs_approval(parsed, tool) for tool in TOOLS} == expected


# --------------------------------------------------------------------------- names


def test_tool_names_simple_pairs_use_label_double_underscore_tool() -> None:
    names = ToolNames([("calc", "add"), ("docs", "search")])
    assert names.function_name("calc", "add") == "calc__add"
    assert names.resolve("docs__search") == ("docs", "search")
    assert names.resolve("calc__nope") is None
    assert "calc__add" in names and len(names) == 2


def test_tool_names_invalid_characters_sanitized() -> None:
    names = ToolNames([("my server", "files/read.v2")])
    assert names.function_name("my server", "files/read.v2") == "my_server__files_read_v2"


def test_tool_names_sanitized_collision_gets_distinct_hashed_names() -> None:
    pairs = [("a.b", "x"), ("a_b", "x")]
    names = ToolNames(pairs)
    first, second = (names.function_name(*pair) for pair in pairs)
    assert first != second
    assert first.startswith("a_b__x_") and second.startswith("a_b__x_")
    assert {names.resolve(first), names.resolve(second)} == set(pairs)


def test_tool_names_long_name_shortened_within_64_characters() -> None:
    label, tool = "server-" + "s" * 40, "tool_" + "t" * 60
    name = ToolNames([(label, tool)]).function_name(label, tool)
    assert len(name) == 64
    assert FUNCTION_NAME_PATTERN.match(name)


def test_tool_names_reserved_name_not_taken() -> None:
    names = ToolNames([("calc", "add")], reserved={"calc__add"})
    assert names.function_name("calc", "add") != "calc__add"
    assert FUNCTION_NAME_PATTERN.match(names.function_name("calc", "add"))


def test_tool_names_independent_of_pair_order() -> None:
    pairs = [("a.b", "x"), ("a_b", "x"), ("calc", "add"), ("z" * 70, "t")]
    forward, backward = ToolNames(pairs), ToolNames(list(reversed(pairs)))
    assert all(forward.function_name(*p) == backward.function_name(*p) for p in pairs)


def test_tool_names_every_name_matches_pattern_and_is_unique() -> None:
    pairs = [(label, tool) for label in ("x", "x!", "x?", "é") for tool in ("t", "t.", "ü" * 80)]
    names = ToolNames(pairs)
    produced = [names.function_name(*pair) for pair in pairs]
    assert len(set(produced)) == len(pairs)
    assert all(FUNCTION_NAME_PATTERN.match(name) for name in produced)


# --------------------------------------------------------------------------- the toolset


def test_toolset_offers_allowed_tools_as_function_definitions() -> None:
    toolset = McpToolset([(mcp_tool(allowed_tools=["add", "delete"]), TOOLS)])
    assert toolset.model_tools() == [
        {
            "type": "function",
            "name": "calc__add",
            "description": "Add.",
            "parameters": SCHEMA,
            "strict": False,
        },
        {"type": "function", "name": "calc__delete", "parameters": SCHEMA, "strict": False},
    ]
    assert toolset.tools("calc") == [ADD, DELETE]
    assert not toolset.is_gateway_owned("calc__divide")
    assert toolset.function_name("calc", "divide") is None


def test_toolset_resolve_maps_function_name_back_to_server_tool() -> None:
    toolset = McpToolset([(mcp_tool(), TOOLS), (mcp_tool(server_label="other"), [ADD])])
    ref = toolset.resolve("other__add")
    assert ref is not None
    assert (ref.server_label, ref.tool, ref.function_name) == ("other", ADD, "other__add")
    assert toolset.is_gateway_owned("calc__divide")
    assert toolset.resolve("add") is None
    assert toolset.server_labels == ["calc", "other"]


def test_toolset_needs_approval_by_label_and_tool() -> None:
    toolset = McpToolset(
        [
            (mcp_tool(require_approval={"never": {"read_only": True}}), TOOLS),
            (mcp_tool(server_label="open", require_approval="never"), TOOLS),
        ]
    )
    assert not toolset.needs_approval("calc", "add")
    assert toolset.needs_approval("calc", "delete")
    assert not toolset.needs_approval("open", "delete")
    assert toolset.needs_approval("calc", "unknown")
    assert toolset.needs_approval("unknown", "add")


def test_toolset_reserved_client_function_name_avoided() -> None:
    toolset = McpToolset([(mcp_tool(), [ADD])], reserved_names={"calc__add"})
    (definition,) = toolset.model_tools()
    assert definition["name"] != "calc__add"
    assert toolset.resolve(definition["name"]) is not None


def test_toolset_duplicate_label_refused() -> None:
    with pytest.raises(InvalidRequestError, match="Duplicate"):
        McpToolset([(mcp_tool(), TOOLS), (mcp_tool(), TOOLS)])


def test_toolset_server_carries_secrets_for_dialling() -> None:
    toolset = McpToolset([(mcp_tool(headers={"X-Key": "k"}, authorization="tok"), TOOLS)])
    server = toolset.server("calc")
    assert server.request_headers() == {"X-Key": "k", "Authorization": "Bearer tok"}


def test_function_tool_empty_schema_becomes_empty_object_schema() -> None:
    definition = function_tool("calc__ping", ToolInfo("ping", {}))
    assert definition["parameters"] == {"type": "object", "properties": {}}


# --------------------------------------------------------------------------- request tool -> server


def test_server_from_tool_copies_url_headers_and_token() -> None:
    server = server_from_tool(mcp_tool(headers={"X-Key": "k"}, authorization="tok"))
    assert server == McpServer(
        "calc", "https://calc.example/mcp", headers={"X-Key": "k"}, authorization="tok"
    )
    assert server.resolved_transport == "streamable_http"


def test_server_from_tool_connector_refused() -> None:
    tool = McpTool.model_validate(
        {"type": "mcp", "server_label": "drive", "connector_id": "connector_googledrive"}
    )
    with pytest.raises(InvalidRequestError, match="server_url"):
        server_from_tool(tool)


def test_server_from_tool_protected_header_refused() -> None:
    with pytest.raises(InvalidRequestError, match="Mcp-Session-Id"):
        server_from_tool(mcp_tool(headers={"Mcp-Session-Id": "forged"}))


# --------------------------------------------------------------------------- mcp_list_tools items


def test_list_tools_item_matches_openai_model() -> None:
    item = list_tools_item("calc", [ADD, DIVIDE])
    assert item["id"].startswith("mcpl_")
    assert item["error"] is None
    parsed = McpListTools.model_validate(item)
    assert [tool.name for tool in parsed.tools] == ["add", "divide"]
    assert item["tools"][0] == {
        "name": "add",
        "input_schema": SCHEMA,
        "description": "Add.",
        "annotations": {"readOnlyHint": True},
    }


def test_list_tools_item_failed_listing_has_error_and_no_tools() -> None:
    item = list_tools_item("calc", [], error="Error retrieving tool list", item_id="mcpl_1")
    assert McpListTools.model_validate(item).error == "Error retrieving tool list"
    assert item["id"] == "mcpl_1" and item["tools"] == []


def test_tools_from_list_item_round_trips_listing() -> None:
    assert tools_from_list_item(list_tools_item("calc", TOOLS)) == TOOLS


def test_tools_from_list_item_parsed_input_item_read() -> None:
    item = McpListToolsItem.model_validate(list_tools_item("calc", [ADD]))
    assert tools_from_list_item(item) == [ADD]


def test_tools_from_list_item_missing_schema_defaults_to_empty_object() -> None:
    item = {"type": "mcp_list_tools", "server_label": "s", "tools": [{"name": "x"}]}
    assert tools_from_list_item(item) == [ToolInfo("x", {"type": "object", "properties": {}})]


def test_listed_tools_in_context_latest_successful_listing_wins() -> None:
    items: list[Any] = [
        {"type": "message", "role": "user", "content": "hi"},
        list_tools_item("calc", [ADD]),
        list_tools_item("docs", [DIVIDE]),
        McpListToolsItem.model_validate(list_tools_item("calc", [ADD, DELETE])),
        list_tools_item("calc", [], error="boom"),
        list_tools_item("broken", [], error="boom"),
    ]
    assert listed_tools_in_context(items) == {"calc": [ADD, DELETE], "docs": [DIVIDE]}


# --------------------------------------------------------------------------- errors as text


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (None, ""),
        ("plain text from an older client", "plain text from an older client"),
        ({"type": "mcp_protocol_error", "code": -32001, "message": "timed out"}, "timed out"),
        (
            {"type": "http_error", "code": 401, "message": "Http status code: 401"},
            "Http status code: 401",
        ),
        (
            {
                "type": "mcp_tool_execution_error",
                "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            },
            "a\nb",
        ),
        ({"type": "mcp_tool_execution_error", "content": []}, "The tool failed."),
        ({"type": "mcp_protocol_error", "code": -32603, "message": ""}, "MCP error -32603"),
    ],
)
def test_error_text_each_shape_readable(error: Any, text: str) -> None:
    assert error_text(error) == text
