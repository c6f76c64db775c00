"""Tests for the create-response request: what is accepted, the exact 400s, the echoed fields."""

from __future__ import annotations

import copy
import json
import typing
from typing import Any

import pytest
from openai.types.responses import response_input_item_param
from openai.types.responses.response_create_params import (
    ResponseCreateParamsBase,
    ResponseCreateParamsStreaming,
)

from responses_gateway.errors import InvalidRequestError
from responses_gateway.protocol import (
    INPUT_ITEM_TYPES,
    MODELLED_INPUT_ITEM_TYPES,
    OPAQUE_INPUT_ITEM_TYPES,
    CreateResponseRequest,
    FunctionCallItem,
    McpTool,
    MessageItem,
    RelayedItem,
    echo_fields,
    parse_create_request,
    public_server_url,
    request_input,
)
from responses_gateway.testing.sdk_instances import INPUT_INSTANCES

MCP_SECRET_URL = "https://alice:s3cret@MCP.example.com:8443/v1/sse?token=abc#frag"

ITEMS: dict[str, dict[str, Any]] = {
    "message": {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "hi"},
            {"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"},
            {"type": "input_file", "file_id": "file_1"},
        ],
    },
    "function_call": {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
        "status": "completed",
    },
    "function_call_output": {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [{"type": "input_text", "text": "18C"}],
    },
    "item_reference": {"type": "item_reference", "id": "msg_1"},
    "reasoning": {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "thinking"}],
        "content": [{"type": "reasoning_text", "text": "raw"}],
        "encrypted_content": "gAAAA",
    },
    "mcp_list_tools": {
        "type": "mcp_list_tools",
        "id": "mcpl_1",
        "server_label": "docs",
        "tools": [{"name": "search", "input_schema": {"type": "object"}, "description": None}],
        "error": None,
    },
    "mcp_approval_request": {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "docs",
        "name": "search",
        "arguments": "{}",
    },
    "mcp_approval_response": {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr_1",
        "approve": False,
        "reason": "no",
    },
    "mcp_call": {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "docs",
        "name": "search",
        "arguments": "{}",
        "output": "found",
        "error": None,
        "approval_request_id": "mcpr_1",
        "status": "completed",
    },
}


def _body(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-test", **fields}


def _error(body: Any) -> tuple[str, str | None, str | None]:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(body)
    assert caught.value.status_code == 400
    return caught.value.message, caught.value.param, caught.value.code


# --------------------------------------------------------------------------- accepted shapes


def test_create_response_request_every_sdk_param_is_a_field() -> None:
    sdk_params = set(ResponseCreateParamsBase.__annotations__) | set(
        ResponseCreateParamsStreaming.__annotations__
    )
    assert sdk_params - set(CreateResponseRequest.model_fields) == set()


def test_parse_create_request_unknown_keys_accepted_and_ignored() -> None:
    req = parse_create_request(_body(input="hi", extra_body_thing={"a": 1}, another=5))
    assert req.model_extra == {"extra_body_thing": {"a": 1}, "another": 5}
    assert "extra_body_thing" not in echo_fields(req)


def test_parse_create_request_string_input_accepted() -> None:
    assert parse_create_request(_body(input="hello")).input == "hello"


def test_parse_create_request_message_without_type_accepted() -> None:
    req = parse_create_request(
        _body(input=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    )
    assert isinstance(req.input, list)
    assert all(isinstance(item, MessageItem) for item in req.input)
    assert request_input(req) == [
        {"role": "user", "content": "hi", "type": "message"},
        {"role": "assistant", "content": "yo", "type": "message"},
    ]


@pytest.mark.parametrize("kind", sorted(ITEMS))
def test_parse_create_request_each_input_item_type_accepted(kind: str) -> None:
    req = parse_create_request(_body(input=[ITEMS[kind]]))
    assert isinstance(req.input, list)
    assert req.input[0].type == kind
    assert request_input(req) == [ITEMS[kind]]


def test_parse_create_request_all_item_types_together_round_trip() -> None:
    items = [ITEMS[kind] for kind in MODELLED_INPUT_ITEM_TYPES]
    assert request_input(parse_create_request(_body(input=items))) == items


def test_parse_create_request_item_reference_without_type_accepted() -> None:
    req = parse_create_request(_body(input=[{"id": "mcpr_1"}, ITEMS["mcp_approval_response"]]))
    assert request_input(req) == [
        {"id": "mcpr_1", "type": "item_reference"},
        ITEMS["mcp_approval_response"],
    ]


def test_parse_create_request_function_call_id_kept() -> None:
    req = parse_create_request(_body(input=[ITEMS["function_call"]]))
    assert isinstance(req.input, list)
    item = req.input[0]
    assert isinstance(item, FunctionCallItem)
    assert item.id == "fc_1"


def test_parse_create_request_item_extra_keys_kept() -> None:
    item = dict(ITEMS["function_call"], namespace="ns", caller={"type": "direct"})
    assert request_input(parse_create_request(_body(input=[item]))) == [item]
    program = dict(item, caller={"type": "program", "caller_id": "call_p", "extra": 1})
    assert request_input(parse_create_request(_body(input=[program]))) == [program]


def test_parse_create_request_function_call_output_string_accepted() -> None:
    item = {"type": "function_call_output", "call_id": "c", "output": "ok"}
    assert request_input(parse_create_request(_body(input=[item]))) == [item]


def test_parse_create_request_assistant_output_text_accepted() -> None:
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "hi", "annotations": [], "logprobs": []},
            {"type": "refusal", "refusal": "no"},
        ],
    }
    assert request_input(parse_create_request(_body(input=[item]))) == [item]


def test_input_item_types_match_sdk_union() -> None:
    sdk_types: set[str] = set()
    for member in typing.get_args(response_input_item_param.ResponseInputItemParam):
        hint = typing.get_type_hints(member, include_extras=True)["type"]
        sdk_types |= _literal_strings(hint)
    assert set(INPUT_ITEM_TYPES) == sdk_types
    assert len(INPUT_ITEM_TYPES) == len(set(INPUT_ITEM_TYPES))


def _literal_strings(hint: Any) -> set[str]:
    found: set[str] = set()
    for arg in typing.get_args(hint):
        found |= {arg} if isinstance(arg, str) else _literal_strings(arg)
    return found


def _sdk_instance(kind: str) -> dict[str, Any]:
    return next(item for item in INPUT_INSTANCES[kind] if item["type"] == kind)


@pytest.mark.parametrize("kind", OPAQUE_INPUT_ITEM_TYPES)
def test_parse_create_request_other_sdk_item_types_validated_and_kept(kind: str) -> None:
    item = {**_sdk_instance(kind), "anything": [1, 2]}  # unknown keys are relayed too
    req = parse_create_request(_body(input=[item]))
    assert isinstance(req.input, list)
    assert isinstance(req.input[0], RelayedItem)
    assert request_input(req) == [item]


@pytest.mark.parametrize("kind", OPAQUE_INPUT_ITEM_TYPES)
def test_parse_create_request_relayed_items_need_the_sdks_required_fields(kind: str) -> None:
    item = _sdk_instance(kind)
    for name in sorted(set(item) - {"type"}):
        if (kind, name) in OPTIONAL_IN_SDK:
            continue
        broken = {key: value for key, value in item.items() if key != name}
        with pytest.raises(InvalidRequestError) as caught:
            parse_create_request(_body(input=[broken]))
        assert (caught.value.code, caught.value.param) == (
            "missing_required_parameter",
            f"input[0].{name}",
        ), name


OPTIONAL_IN_SDK = {
    ("computer_call", "action"),
    ("tool_search_call", "call_id"),
    ("tool_search_call", "execution"),
    ("tool_search_call", "id"),
    ("tool_search_call", "status"),
    ("tool_search_output", "call_id"),
    ("tool_search_output", "execution"),
    ("tool_search_output", "status"),
    ("configuration_update", "reasoning"),
    ("shell_call", "status"),
    ("apply_patch_call_output", "output"),
    ("local_shell_call_output", "id"),  # or call_id: clients name the call either way
}
"""Keys the minimal SDK instances carry that the SDK's TypedDicts leave optional."""


@pytest.mark.parametrize(
    ("item", "param", "code"),
    [
        ({"type": "web_search_call", "id": ["x"], "status": "completed", "action": {}},
         "input[0].id", "invalid_type"),
        ({"type": "custom_tool_call", "call_id": [1], "name": "f", "input": "x"},
         "input[0].call_id", "invalid_type"),
        ({"type": "shell_call", "call_id": "c", "action": "ls"},
         "input[0].action", "invalid_type"),
        ({"type": "additional_tools", "role": "developer", "tools": [1]},
         "input[0].tools[0]", "invalid_type"),
        ({"type": "additional_tools", "role": "developer", "tools": [{"type": "function"}]},
         "input[0].tools[0].name", "missing_required_parameter"),
        ({"type": "apply_patch_call_output", "call_id": "c", "status": "done"},
         "input[0].status", "invalid_value"),
        ({"type": {"nested": 1}}, "input[0].type", "invalid_value"),
        ({"type": ["message"]}, "input[0].type", "invalid_value"),
        ({"type": "computer_call", "id": "cu", "call_id": "c", "pending_safety_checks": [],
          "status": "completed", "action": {"type": "click", "button": "back", "x": 0, "y": []}},
         "input[0].action.y", "invalid_type"),
        ({"type": "computer_call", "id": "cu", "call_id": "c", "pending_safety_checks": [],
          "status": "completed", "action": {"type": "fly"}},
         "input[0].action.type", "invalid_value"),
        ({"type": "tool_search_output", "tools": [{"type": "shell", "environment": []}]},
         "input[0].tools[0].environment", "invalid_type"),
        ({"type": "local_shell_call", "id": "ls", "call_id": "c", "status": "completed",
          "action": {"type": "exec", "command": ["ls"], "env": {}, "working_directory": 1}},
         "input[0].action.working_directory", "invalid_type"),
        ({"type": "function_call_output", "call_id": "c",
          "output": [{"type": "input_file", "file_url": None}]},
         "input[0].output[0].file_url", "invalid_type"),
        ({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "x", "annotations": [{"type": "url_citation"}]}]},
         "input[0].content[0].annotations[0].url", "missing_required_parameter"),
        ({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "x", "annotations": [{"type": "footnote"}]}]},
         "input[0].content[0].annotations[0].type", "invalid_value"),
        ({"type": "message", "role": "user", "content": [
            {"type": "input_image", "image_url": "https://x.y", "prompt_cache_breakpoint": {}}]},
         "input[0].content[0].prompt_cache_breakpoint.mode", "missing_required_parameter"),
        ({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "x", "prompt_cache_breakpoint": {"mode": "auto"}}]},
         "input[0].content[0].prompt_cache_breakpoint.mode", "invalid_value"),
        ({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}",
          "caller": {"type": "program", "caller_id": ["p"]}},
         "input[0].caller.caller_id", "invalid_type"),
        ({"type": "function_call_output", "call_id": "c", "output": "ok",
          "caller": {"type": "program"}},
         "input[0].caller.caller_id", "missing_required_parameter"),
        ({"type": "custom_tool_call", "call_id": "c", "name": "f", "input": "x",
          "caller": {"type": "someone"}},
         "input[0].caller.type", "invalid_value"),
        ({"type": "shell_call_output", "call_id": "c", "output": [], "caller": "direct"},
         "input[0].caller", "invalid_type"),
    ],
)  # fmt: skip
def test_parse_create_request_hostile_items_refused_by_path(
    item: dict[str, Any], param: str, code: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(input=[item]))
    assert (caught.value.status_code, caught.value.param, caught.value.code) == (400, param, code)


@pytest.mark.parametrize(
    ("tool", "param", "code"),
    [
        ({"type": "shell", "environment": "local"}, "tools[0].environment", "invalid_type"),
        ({"type": "web_search", "search_context_size": "huge"},
         "tools[0].search_context_size", "invalid_value"),
        ({"type": "file_search"}, "tools[0].vector_store_ids", "missing_required_parameter"),
        ({"type": "code_interpreter"}, "tools[0].container", "missing_required_parameter"),
        ({"type": "file_search", "vector_store_ids": "vs_1"},
         "tools[0].vector_store_ids", "invalid_type"),
        ({"type": "custom", "name": ""}, "tools[0].name", "empty_string"),
        ({"type": "custom", "name": "c",
          "format": {"type": "grammar", "syntax": "peg", "definition": "x"}},
         "tools[0].format.syntax", "invalid_value"),
        ({"type": "custom", "name": "c", "format": {"type": "grammar", "syntax": "lark"}},
         "tools[0].format.definition", "missing_required_parameter"),
        ({"type": "custom", "name": "c", "format": {"type": "json"}},
         "tools[0].format.type", "invalid_value"),
        ({"type": "web_search", "user_location": {"timezone": 3.5}},
         "tools[0].user_location.timezone", "invalid_type"),
        ({"type": "file_search", "vector_store_ids": [],
          "ranking_options": {"hybrid_search": {"text_weight": 1}}},
         "tools[0].ranking_options.hybrid_search.embedding_weight", "missing_required_parameter"),
        # what benchmarks/fuzz.py found accepted and echoed back, breaking OpenAI's Tool schema
        ({"type": "shell", "environment": {
            "type": "container_auto", "skills": [{"type": "skill_reference", "skill_id": []}]}},
         "tools[0].environment.skills[0].skill_id", "invalid_type"),
        ({"type": "shell", "environment": {"type": "container_reference"}},
         "tools[0].environment.container_id", "missing_required_parameter"),
        ({"type": "shell", "environment": {"type": "local", "skills": [{"name": "s",
                                           "description": "d", "path": None}]}},
         "tools[0].environment.skills[0].path", "invalid_type"),
        ({"type": "shell", "environment": {"type": "container_auto",
                                           "network_policy": {"type": "open"}}},
         "tools[0].environment.network_policy.type", "invalid_value"),
        ({"type": "code_interpreter", "container": {"type": "auto", "file_ids": [None]}},
         "tools[0].container.file_ids[0]", "invalid_type"),
        ({"type": "code_interpreter", "container": {"type": "auto", "network_policy": {
            "type": "allowlist", "allowed_domains": [{}]}}},
         "tools[0].container.network_policy.allowed_domains[0]", "invalid_type"),
        ({"type": "code_interpreter", "container": {"type": "auto", "network_policy": {
            "type": "allowlist", "allowed_domains": ["a.com"],
            "domain_secrets": [{"domain": "a.com", "name": "k", "value": None}]}}},
         "tools[0].container.network_policy.domain_secrets[0].value", "invalid_type"),
        ({"type": "web_search", "filters": {"allowed_domains": {"a": 1}}},
         "tools[0].filters.allowed_domains", "invalid_type"),
        ({"type": "file_search", "vector_store_ids": [],
          "filters": {"type": "eq", "key": "k", "value": [{}]}},
         "tools[0].filters.value", "invalid_type"),
        ({"type": "custom", "name": "c", "allowed_callers": ["anyone"]},
         "tools[0].allowed_callers[0]", "invalid_value"),
        ({"type": "function", "name": "f", "allowed_callers": []},
         "tools[0].allowed_callers", "invalid_value"),
        ({"type": "image_generation", "input_fidelity": "max"},
         "tools[0].input_fidelity", "invalid_value"),
        ({"type": "image_generation", "background": ""}, "tools[0].background", "invalid_value"),
        ({"type": "web_search_preview", "user_location": {}},
         "tools[0].user_location.type", "missing_required_parameter"),
        ({"type": "web_search_preview", "search_content_types": ["video"]},
         "tools[0].search_content_types[0]", "invalid_value"),
        ({"type": "function", "name": "f", "output_schema": "s"},
         "tools[0].output_schema", "invalid_type"),
        ({"type": "image_generation", "quality": None}, "tools[0].quality", "invalid_type"),
        ({"type": "namespace", "name": "ns", "tools": [
            {"type": "custom", "name": "c", "allowed_callers": ["x"]}]},
         "tools[0].tools[0].allowed_callers[0]", "invalid_value"),
        ({"type": "namespace", "name": "ns", "tools": [{"type": "web_search"}]},
         "tools[0].tools[0].type", "invalid_value"),
    ],
)  # fmt: skip
def test_parse_create_request_hosted_tool_fields_typed(
    tool: dict[str, Any], param: str, code: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(tools=[tool]))
    assert (caught.value.param, caught.value.code) == (param, code)


def test_parse_create_request_safety_identifier_has_openais_length() -> None:
    """At most 64 characters, as both specs say (a longer one was accepted and echoed)."""
    assert parse_create_request(_body(safety_identifier="u" * 64)).safety_identifier == "u" * 64
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(safety_identifier="u" * 65))
    assert (caught.value.status_code, caught.value.param) == (400, "safety_identifier")


@pytest.mark.parametrize("kind", ["", "not_a_tool"])
def test_parse_create_request_hosted_tool_choice_names_a_tool_type(kind: str) -> None:
    """benchmarks/fuzz.py found ``{"type": ""}`` accepted and echoed, breaking both specs."""
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(tool_choice={"type": kind, "server_label": ""}))
    assert (caught.value.param, caught.value.code) == ("tool_choice.type", "invalid_value")
    chosen = {"type": "web_search_preview"}
    assert echo_fields(parse_create_request(_body(tool_choice=chosen)))["tool_choice"] == chosen


def test_parse_create_request_allowed_tools_choice_names_tools_as_tools_do() -> None:
    choice = {
        "type": "allowed_tools",
        "mode": "auto",
        "tools": [{"type": "function", "name": None}],
    }
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(tool_choice=choice))
    assert (caught.value.param, caught.value.code) == ("tool_choice.tools[0].name", "invalid_type")
    named = {**choice, "tools": [{"type": "function", "name": "f"}, {"type": "image_generation"}]}
    assert echo_fields(parse_create_request(_body(tool_choice=named)))["tool_choice"] == named


def test_parse_create_request_hosted_tools_keep_what_clients_send() -> None:
    tools = [
        {"type": "web_search", "external_web_access": True, "search_content_types": ["text"]},
        {"type": "web_search", "filters": {"allowed_domains": ["a.com"]}},
        {
            "type": "shell",
            "allowed_callers": ["direct"],
            "environment": {
                "type": "container_auto",
                "file_ids": ["f"],
                "memory_limit": "4g",
                "network_policy": {"type": "allowlist", "allowed_domains": ["a.com"]},
                "skills": [
                    {"type": "skill_reference", "skill_id": "s", "version": "latest"},
                    {
                        "type": "inline",
                        "name": "n",
                        "description": "d",
                        "source": {
                            "type": "base64",
                            "media_type": "application/zip",
                            "data": "UEs=",
                        },
                    },
                ],
            },
        },
        {
            "type": "shell",
            "environment": {
                "type": "local",
                "skills": [{"name": "n", "description": "d", "path": "/skills/n"}],
            },
        },
        {
            "type": "code_interpreter",
            "container": {"type": "auto", "network_policy": {"type": "disabled"}},
        },
        {"type": "code_interpreter", "container": "cntr_1"},
        {
            "type": "file_search",
            "vector_store_ids": ["vs"],
            "filters": {
                "type": "and",
                "filters": [
                    {"type": "eq", "key": "k", "value": 1},
                    {"type": "in", "key": "t", "value": ["a", 2]},
                ],
            },
        },
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]},
        {"type": "some_future_tool", "anything": [1]},
    ]
    assert echo_fields(parse_create_request(_body(tools=tools)))["tools"] == tools  # fmt: skip


def test_parse_create_request_tools_validated_and_opaque_kept() -> None:
    req = parse_create_request(
        _body(
            tools=[
                {"type": "function", "name": "f", "parameters": {"type": "object"}},
                {
                    "type": "mcp",
                    "server_label": "docs",
                    "server_url": "https://mcp.example.com/sse",
                    "allowed_tools": {"tool_names": ["a"], "read_only": True},
                    "require_approval": {"never": {"tool_names": ["a"]}},
                },
                {"type": "web_search", "search_context_size": "low"},
            ]
        )
    )
    assert req.tools is not None
    mcp = req.tools[1]
    assert isinstance(mcp, McpTool)
    assert mcp.server_url == "https://mcp.example.com/sse"
    assert echo_fields(req)["tools"][2] == {"type": "web_search", "search_context_size": "low"}


def test_parse_create_request_mcp_connector_id_accepted() -> None:
    tool = {"type": "mcp", "server_label": "gmail", "connector_id": "connector_gmail"}
    assert parse_create_request(_body(tools=[tool])).tools is not None


@pytest.mark.parametrize(
    "choice",
    [
        "none",
        "required",
        {"type": "function", "name": "f"},
        {"type": "mcp", "server_label": "docs"},
        {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"}]},
        {"type": "web_search_preview"},
    ],
)
def test_parse_create_request_tool_choice_forms_accepted_and_echoed(choice: Any) -> None:
    tools = [{"type": "function", "name": "f"}, {"type": "mcp", "server_label": "docs"}]
    parsed = parse_create_request(_body(tool_choice=choice, tools=tools))
    assert echo_fields(parsed)["tool_choice"] == choice


@pytest.mark.parametrize("tools", [[], [{"type": "function", "name": "g"}, {"type": "web_search"}]])
def test_parse_create_request_a_function_choice_the_request_does_not_offer_is_refused(
    tools: list[dict[str, Any]],
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(tool_choice={"type": "function", "name": "f"}, tools=tools))
    assert (caught.value.param, caught.value.code) == ("tool_choice", "invalid_value")


@pytest.mark.parametrize(
    "tools", [[], [{"type": "mcp", "server_label": "other"}, {"type": "function", "name": "docs"}]]
)
def test_parse_create_request_an_mcp_choice_the_request_does_not_offer_is_refused(
    tools: list[dict[str, Any]],
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(
            _body(tool_choice={"type": "mcp", "server_label": "docs"}, tools=tools)
        )
    assert (caught.value.param, caught.value.code) == ("tool_choice", "invalid_value")
    assert caught.value.message == (
        "Invalid value for 'tool_choice': no MCP server labelled 'docs' is among the request's "
        "tools."
    )


@pytest.mark.parametrize(
    ("tools", "items"),
    [
        ([{"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]}], []),
        ([{"type": "tool_search"}], []),
        ([], [{"type": "additional_tools", "role": "developer",
               "tools": [{"type": "function", "name": "f"}]}]),
    ],
)  # fmt: skip
def test_parse_create_request_a_function_offered_elsewhere_may_be_chosen(
    tools: list[dict[str, Any]], items: list[dict[str, Any]]
) -> None:
    body = _body(tool_choice={"type": "function", "name": "f"}, tools=tools)
    body["input"] = [*items, {"role": "user", "content": "hi"}]
    assert parse_create_request(body).tool_choice is not None


def test_parse_create_request_raw_json_bytes_same_as_dict() -> None:
    body = _body(input=[ITEMS[kind] for kind in sorted(ITEMS)], temperature=1, metadata={"a": "b"})
    from_dict = parse_create_request(body)
    from_bytes = parse_create_request(json.dumps(body).encode())
    assert from_bytes == from_dict
    assert echo_fields(from_bytes) == echo_fields(from_dict)


def test_parse_create_request_body_not_mutated() -> None:
    body = _body(input=[ITEMS[kind] for kind in sorted(ITEMS)], tools=[{"type": "web_search"}])
    before = copy.deepcopy(body)
    echo_fields(parse_create_request(body))
    assert body == before


def test_parse_create_request_integer_temperature_accepted() -> None:
    assert parse_create_request(_body(temperature=1)).temperature == 1.0


# --------------------------------------------------------------------------- exact errors

INVALID: list[tuple[str, Any, tuple[str, str | None, str]]] = [
    (
        "missing_model",
        {"input": "hi"},
        ("Missing required parameter: 'model'.", "model", "missing_required_parameter"),
    ),
    (
        "null_model",
        {"model": None},
        (
            "Invalid type for 'model': expected a string, but got null instead.",
            "model",
            "invalid_type",
        ),
    ),
    (
        "string_temperature",
        _body(temperature="0.5"),
        (
            "Invalid type for 'temperature': expected a decimal, but got a string instead.",
            "temperature",
            "invalid_type",
        ),
    ),
    (
        "temperature_above_max",
        _body(temperature=3),
        (
            "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got "
            "3 instead.",
            "temperature",
            "decimal_above_max_value",
        ),
    ),
    (
        "temperature_below_min",
        _body(temperature=-0.5),
        (
            "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got "
            "-0.5 instead.",
            "temperature",
            "decimal_below_min_value",
        ),
    ),
    (
        "top_p_above_max",
        _body(top_p=1.5),
        (
            "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got 1.5 "
            "instead.",
            "top_p",
            "decimal_above_max_value",
        ),
    ),
    (
        "top_p_below_min",
        _body(top_p=-1),
        (
            "Invalid 'top_p': decimal below minimum value. Expected a value >= 0, but got -1 "
            "instead.",
            "top_p",
            "decimal_below_min_value",
        ),
    ),
    (
        "max_output_tokens_below_min",
        _body(max_output_tokens=15),
        (
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, "
            "but got 15 instead.",
            "max_output_tokens",
            "integer_below_min_value",
        ),
    ),
    (
        "max_output_tokens_decimal",
        _body(max_output_tokens=100.0),
        (
            "Invalid type for 'max_output_tokens': expected an integer, but got a decimal instead.",
            "max_output_tokens",
            "invalid_type",
        ),
    ),
    (
        "max_tool_calls_zero",
        _body(max_tool_calls=0),
        (
            "Invalid 'max_tool_calls': integer below minimum value. Expected a value >= 1, but "
            "got 0 instead.",
            "max_tool_calls",
            "integer_below_min_value",
        ),
    ),
    (
        "top_logprobs_above_max",
        _body(top_logprobs=21),
        (
            "Invalid 'top_logprobs': integer above maximum value. Expected a value <= 20, but "
            "got 21 instead.",
            "top_logprobs",
            "integer_above_max_value",
        ),
    ),
    (
        "boolean_as_integer",
        _body(max_output_tokens=True),
        (
            "Invalid type for 'max_output_tokens': expected an integer, but got a boolean instead.",
            "max_output_tokens",
            "invalid_type",
        ),
    ),
    (
        "string_stream",
        _body(stream="true"),
        (
            "Invalid type for 'stream': expected a boolean, but got a string instead.",
            "stream",
            "invalid_type",
        ),
    ),
    (
        "metadata_too_many_pairs",
        _body(metadata={f"k{i}": "v" for i in range(17)}),
        (
            "Invalid 'metadata': too many properties. Expected an object with at most 16 "
            "properties, but got an object with 17 properties instead.",
            "metadata",
            "object_above_max_properties",
        ),
    ),
    (
        "metadata_key_too_long",
        _body(metadata={"k" * 65: "v"}),
        (
            "Invalid 'metadata': key too long. Expected a key with maximum length 64, but got a "
            "key with length 65 instead.",
            "metadata",
            "string_above_max_length",
        ),
    ),
    (
        "metadata_value_too_long",
        _body(metadata={"note": "v" * 513}),
        (
            "Invalid 'metadata.note': string too long. Expected a string with maximum length "
            "512, but got a string with length 513 instead.",
            "metadata.note",
            "string_above_max_length",
        ),
    ),
    (
        "metadata_value_not_string",
        _body(metadata={"n": 1}),
        (
            "Invalid type for 'metadata.n': expected a string, but got an integer instead.",
            "metadata.n",
            "invalid_type",
        ),
    ),
    (
        "function_tool_without_name",
        _body(tools=[{"type": "function", "parameters": {}}]),
        (
            "Missing required parameter: 'tools[0].name'.",
            "tools[0].name",
            "missing_required_parameter",
        ),
    ),
    (
        "function_tool_empty_name",
        _body(tools=[{"type": "web_search"}, {"type": "function", "name": ""}]),
        (
            "Invalid 'tools[1].name': empty string. Expected a string with minimum length 1, but "
            "got an empty string instead.",
            "tools[1].name",
            "empty_string",
        ),
    ),
    (
        "tool_without_type",
        _body(tools=[{"name": "f"}]),
        (
            "Missing required parameter: 'tools[0].type'.",
            "tools[0].type",
            "missing_required_parameter",
        ),
    ),
    (
        "tool_not_object",
        _body(tools=["f"]),
        (
            "Invalid type for 'tools[0]': expected an object, but got a string instead.",
            "tools[0]",
            "invalid_type",
        ),
    ),
    (
        "mcp_tool_without_label",
        _body(tools=[{"type": "mcp", "server_url": "https://x"}]),
        (
            "Missing required parameter: 'tools[0].server_label'.",
            "tools[0].server_label",
            "missing_required_parameter",
        ),
    ),
    (
        "mcp_tool_bad_url",
        _body(tools=[{"type": "mcp", "server_label": "docs", "server_url": "file:///etc"}]),
        (
            "Invalid 'tools[0].server_url': expected an http or https URL with a host.",
            "tools[0].server_url",
            "invalid_value",
        ),
    ),
    (
        "mcp_tool_bad_require_approval",
        _body(
            tools=[
                {
                    "type": "mcp",
                    "server_label": "d",
                    "server_url": "https://x",
                    "require_approval": "sometimes",
                }
            ]
        ),
        (
            "Invalid value: 'sometimes'. Supported values are: 'always' and 'never'.",
            "tools[0].require_approval",
            "invalid_value",
        ),
    ),
    (
        "input_not_string_or_list",
        _body(input=5),
        (
            "Invalid type for 'input': expected one of a string or an array of input items, but "
            "got an integer instead.",
            "input",
            "invalid_type",
        ),
    ),
    (
        "input_item_not_object",
        _body(input=["hi"]),
        (
            "Invalid type for 'input[0]': expected an object, but got a string instead.",
            "input[0]",
            "invalid_type",
        ),
    ),
    (
        "message_content_wrong_type",
        _body(input=[{"role": "user", "content": 5}]),
        (
            "Invalid type for 'input[0].content': expected one of a string or an array of "
            "content parts, but got an integer instead.",
            "input[0].content",
            "invalid_type",
        ),
    ),
    (
        "message_bad_role",
        _body(input=[{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]),
        (
            "Invalid value: 'tool'. Supported values are: 'user', 'system', 'developer', and "
            "'assistant'.",
            "input[1].role",
            "invalid_value",
        ),
    ),
    (
        "message_without_role",
        _body(input=[{"content": "hi"}]),
        (
            "Missing required parameter: 'input[0].role'.",
            "input[0].role",
            "missing_required_parameter",
        ),
    ),
    (
        "content_part_bad_type",
        _body(input=[{"role": "user", "content": [{"type": "input_txt", "text": "hi"}]}]),
        (
            "Invalid value: 'input_txt'. Supported values are: 'input_text', 'input_image', "
            "'input_file', 'output_text', and 'refusal'.",
            "input[0].content[0].type",
            "invalid_value",
        ),
    ),
    (
        "content_part_missing_text",
        _body(input=[{"role": "user", "content": [{"type": "input_text"}]}]),
        (
            "Missing required parameter: 'input[0].content[0].text'.",
            "input[0].content[0].text",
            "missing_required_parameter",
        ),
    ),
    (
        "function_call_missing_arguments",
        _body(input=[{"type": "function_call", "call_id": "c", "name": "f"}]),
        (
            "Missing required parameter: 'input[0].arguments'.",
            "input[0].arguments",
            "missing_required_parameter",
        ),
    ),
    (
        "function_call_arguments_object",
        _body(input=[{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]),
        (
            "Invalid type for 'input[0].arguments': expected a string, but got an object instead.",
            "input[0].arguments",
            "invalid_type",
        ),
    ),
    (
        "approval_response_string_approve",
        _body(
            input=[{"type": "mcp_approval_response", "approval_request_id": "r", "approve": "yes"}]
        ),
        (
            "Invalid type for 'input[0].approve': expected a boolean, but got a string instead.",
            "input[0].approve",
            "invalid_type",
        ),
    ),
    (
        "item_without_type",
        _body(input=[{"call_id": "c"}]),
        (
            "Missing required parameter: 'input[0].type'.",
            "input[0].type",
            "missing_required_parameter",
        ),
    ),
    (
        "conversation_with_previous_response_id",
        _body(conversation="conv_1", previous_response_id="resp_1"),
        (
            "Mutually exclusive parameters: Ensure you are only providing one of: "
            "'previous_response_id' or 'conversation'.",
            "conversation",
            "mutually_exclusive_parameters",
        ),
    ),
    (
        "tool_choice_bad_mode",
        _body(tool_choice="any"),
        (
            "Invalid value: 'any'. Supported values are: 'none', 'auto', and 'required'.",
            "tool_choice",
            "invalid_value",
        ),
    ),
    (
        "tool_choice_function_without_name",
        _body(tool_choice={"type": "function"}),
        (
            "Missing required parameter: 'tool_choice.name'.",
            "tool_choice.name",
            "missing_required_parameter",
        ),
    ),
    (
        "json_schema_without_name",
        _body(text={"format": {"type": "json_schema", "schema": {}}}),
        (
            "Missing required parameter: 'text.format.name'.",
            "text.format.name",
            "missing_required_parameter",
        ),
    ),
    (
        "text_format_bad_type",
        _body(text={"format": {"type": "xml"}}),
        (
            "Invalid value: 'xml'. Supported values are: 'text', 'json_object', and 'json_schema'.",
            "text.format.type",
            "invalid_value",
        ),
    ),
    (
        "service_tier_bad_value",
        _body(service_tier="cheap"),
        (
            "Invalid value: 'cheap'. Supported values are: 'auto', 'default', 'flex', 'scale', "
            "'priority', 'fast', and 'ultrafast'.",
            "service_tier",
            "invalid_value",
        ),
    ),
    (
        "truncation_bad_value",
        _body(truncation="sometimes"),
        (
            "Invalid value: 'sometimes'. Supported values are: 'auto' and 'disabled'.",
            "truncation",
            "invalid_value",
        ),
    ),
    (
        "body_is_array",
        [_body()],
        (
            "Invalid type for 'body': expected an object, but got an array instead.",
            None,
            "invalid_type",
        ),
    ),
    (
        "body_is_none",
        None,
        (
            "Invalid type for 'body': expected an object, but got null instead.",
            None,
            "invalid_type",
        ),
    ),
    (
        "raw_body_is_array",
        b"[1]",
        (
            "Invalid type for 'body': expected an object, but got an array instead.",
            None,
            "invalid_type",
        ),
    ),
    (
        "raw_nan_temperature",
        b'{"model": "m", "temperature": NaN}',
        ("Invalid 'temperature': expected a finite number.", "temperature", "invalid_value"),
    ),
]


@pytest.mark.parametrize(
    ("body", "expected"),
    [(body, expected) for _, body, expected in INVALID],
    ids=[c[0] for c in INVALID],
)
def test_parse_create_request_invalid_body_exact_error(
    body: Any, expected: tuple[str, str | None, str]
) -> None:
    assert _error(body) == expected


def test_parse_create_request_unknown_item_type_invalid_value() -> None:
    message, param, code = _error(_body(input=[{"type": "telepathy"}]))
    assert (param, code) == ("input[0].type", "invalid_value")
    assert message.startswith("Invalid value: 'telepathy'. Supported values are: 'message', ")
    assert all(f"'{kind}'" in message for kind in INPUT_ITEM_TYPES)


def test_parse_create_request_invalid_json_openai_message() -> None:
    message, param, code = _error(b'{"model": ')
    assert (param, code) == (None, "invalid_json")
    assert message.startswith("We could not parse the JSON body of your request.")


def test_parse_create_request_first_error_reported() -> None:
    assert _error({"temperature": 9})[1] == "model"


def test_parse_create_request_error_envelope_shape() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(top_p=2))
    assert caught.value.to_error() == {
        "message": "Invalid 'top_p': decimal above maximum value. Expected a value <= 1, but got "
        "2 instead.",
        "type": "invalid_request_error",
        "param": "top_p",
        "code": "decimal_above_max_value",
    }


# --------------------------------------------------------------------------- echo_fields

DEFAULT_ECHO: dict[str, Any] = {
    "background": False,
    "conversation": None,
    "frequency_penalty": None,
    "instructions": None,
    "max_output_tokens": None,
    "max_tool_calls": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "presence_penalty": None,
    "previous_response_id": None,
    "prompt": None,
    "prompt_cache_key": None,
    "prompt_cache_retention": None,
    "reasoning": {"effort": None, "summary": None},
    "safety_identifier": None,
    "service_tier": "auto",
    "store": True,
    "temperature": None,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_logprobs": None,
    "top_p": None,
    "truncation": "disabled",
    "user": None,
}


def test_echo_fields_nothing_given_defaults() -> None:
    echoed = echo_fields(parse_create_request(_body()))
    assert echoed == DEFAULT_ECHO
    assert list(echoed) == list(DEFAULT_ECHO)


def test_echo_fields_null_values_given_defaults() -> None:
    nulls = {key: None for key in DEFAULT_ECHO if key != "tool_choice"}
    assert echo_fields(parse_create_request(_body(**nulls))) == DEFAULT_ECHO


def test_echo_fields_values_given_echoed() -> None:
    given = {
        "background": True,
        "frequency_penalty": -0.5,
        "instructions": "Be brief.",
        "max_output_tokens": 256,
        "max_tool_calls": 3,
        "metadata": {"a": "b"},
        "parallel_tool_calls": False,
        "presence_penalty": 1.5,
        "previous_response_id": "resp_1",
        "prompt": {"id": "pmpt_1", "variables": {"x": "y"}},
        "prompt_cache_key": "k",
        "prompt_cache_retention": "24h",
        "reasoning": {"effort": "high", "summary": "auto"},
        "safety_identifier": "sid",
        "service_tier": "flex",
        "store": False,
        "temperature": 0.2,
        "text": {"format": {"type": "json_object"}, "verbosity": "low"},
        "tool_choice": "required",
        "top_logprobs": 5,
        "top_p": 0.9,
        "truncation": "auto",
        "user": "u1",
    }
    echoed = echo_fields(parse_create_request(_body(**given)))
    assert echoed == {**DEFAULT_ECHO, **given}
    assert list(echoed) == list(DEFAULT_ECHO)


@pytest.mark.parametrize("conversation", ["conv_1", {"id": "conv_1"}])
def test_echo_fields_conversation_given_id_object(conversation: Any) -> None:
    req = parse_create_request(_body(conversation=conversation))
    assert echo_fields(req)["conversation"] == {"id": "conv_1"}


def test_echo_fields_partial_reasoning_and_text_defaults_filled() -> None:
    echoed = echo_fields(
        parse_create_request(_body(reasoning={"effort": "low"}, text={"verbosity": "high"}))
    )
    assert echoed["reasoning"] == {"effort": "low", "summary": None}
    assert echoed["text"] == {"format": {"type": "text"}, "verbosity": "high"}


def test_echo_fields_json_schema_format_keeps_schema_key() -> None:
    fmt = {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}
    assert echo_fields(parse_create_request(_body(text={"format": fmt})))["text"] == {"format": fmt}


def test_echo_fields_mcp_secrets_stripped() -> None:
    tool = {
        "type": "mcp",
        "server_label": "docs",
        "server_url": MCP_SECRET_URL,
        "headers": {"Authorization": "Bearer sk-live"},
        "authorization": "oauth-token",
        "require_approval": "never",
        "allowed_tools": ["search"],
        "server_description": "Docs",
    }
    req = parse_create_request(_body(tools=[tool]))
    echoed = echo_fields(req)["tools"]
    assert echoed == [
        {
            "type": "mcp",
            "server_label": "docs",
            "server_url": "https://mcp.example.com:8443",
            "server_description": "Docs",
            "allowed_tools": ["search"],
            "require_approval": "never",
        }
    ]
    text = json.dumps(echo_fields(req))
    for secret in ("sk-live", "oauth-token", "s3cret", "alice", "token=abc", "/v1/sse", "frag"):
        assert secret not in text
    mcp = req.tools[0] if req.tools else None
    assert isinstance(mcp, McpTool)
    assert mcp.headers == {"Authorization": "Bearer sk-live"}
    assert mcp.server_url == MCP_SECRET_URL


def test_echo_fields_function_tool_nullable_keys_present() -> None:
    req = parse_create_request(_body(tools=[{"type": "function", "name": "f"}]))
    assert echo_fields(req)["tools"] == [
        {"type": "function", "name": "f", "description": None, "parameters": None, "strict": None}
    ]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"reasoning": {"effort": "low", "foo": 0}}, "reasoning.foo"),
        ({"text": {"format": {"type": "text", "bar": 1}}}, "text.format.bar"),
        ({"text": {"baz": 1}}, "text.baz"),
        ({"stream_options": {"include_obfuscation": True, "x": 1}}, "stream_options.x"),
        ({"conversation": {"id": "conv_1", "x": 1}}, "conversation.x"),
        ({"prompt": {"id": "pmpt_1", "x": 1}}, "prompt.x"),
        ({"context_management": [{"type": "compaction", "x": 1}]}, "context_management[0].x"),
        (
            {"tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function",
             "name": "f", "x": 1}},
            "tool_choice.x",
        ),
        ({"tools": [{"type": "function", "name": "f", "defer": True}]}, "tools[0].defer"),
        ({"tools": [{"type": "mcp", "server_label": "s", "x": 1}]}, "tools[0].x"),
        (
            {"tools": [{"type": "mcp", "server_label": "s", "allowed_tools": {"x": 1}}]},
            "tools[0].allowed_tools.x",
        ),
        ({"input": [{"type": "item_reference", "id": "msg_1", "x": 1}]}, "input[0].x"),
    ],
)  # fmt: skip
def test_an_unknown_key_of_a_typed_object_is_refused_by_its_path(
    body: dict[str, Any], param: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(**body))
    error = caught.value
    assert (error.message, error.code, error.param) == (
        f"Unknown parameter: '{param}'.",
        "unknown_parameter",
        param,
    )


def test_reasoning_mode_is_a_string() -> None:
    assert echo_fields(parse_create_request(_body(reasoning={"mode": "pro"})))["reasoning"] == {
        "effort": None,
        "summary": None,
        "mode": "pro",
    }
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(reasoning={"mode": 0}))
    assert (caught.value.code, caught.value.param) == ("invalid_type", "reasoning.mode")


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": None, "role": "user", "content": "hi"}, "input[0].type"),
        ({"type": None, "id": "msg_1"}, "input[0].type"),
        ({"role": "user", "content": [{"type": None, "text": "x"}]}, "input[0].content[0].type"),
    ],
)
def test_a_null_type_is_refused_where_an_absent_one_is_not(
    item: dict[str, Any], param: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create_request(_body(input=[item]))
    assert (caught.value.code, caught.value.param) == ("invalid_type", param)
    assert caught.value.message.endswith("but got null instead.")


def test_unknown_keys_of_modelled_items_and_parts_are_dropped_relayed_items_keep_theirs() -> None:
    req = parse_create_request(
        _body(
            input=[
                {"role": "user", "content": [{"type": "input_text", "text": "hi", "zz": 1}],
                 "internal_chat_message_metadata_passthrough": {"a": 1}},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "x": 1},
                {"type": "web_search_call", "id": "ws_1", "status": "completed",
                 "action": {"type": "search", "query": "q"}},
            ]
        )
    )  # fmt: skip
    assert request_input(req) == [
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}], "type": "message"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "q"}},
    ]  # fmt: skip


def test_echo_fields_result_json_round_trips() -> None:
    req = parse_create_request(
        _body(
            tools=[{"type": "mcp", "server_label": "d", "server_url": "https://x/y"}],
            tool_choice={"type": "mcp", "server_label": "d"},
            conversation={"id": "c"},
        )
    )
    echoed = echo_fields(req)
    assert json.loads(json.dumps(echoed)) == echoed


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("https://mcp.example.com/sse", "https://mcp.example.com"),
        ("http://u:p@Host.Example:8080/a/b?q=1#f", "http://host.example:8080"),
        ("https://[::1]:9000/mcp", "https://[::1]:9000"),
        ("https://example.com", "https://example.com"),
    ],
)
def test_public_server_url_secret_parts_removed(url: str, public: str) -> None:
    assert public_server_url(url) == public


def test_request_input_string_passes_through() -> None:
    assert request_input(parse_create_request(_body(input="hi"))) == "hi"
    assert request_input(parse_create_request(_body())) is None


def test_parse_create_request_reasoning_context_outside_the_sdks_values_is_refused() -> None:
    """Every Response echoes ``reasoning``: a value neither spec accepts never gets that far."""
    with pytest.raises(InvalidRequestError) as raised:
        parse_create_request(_body(reasoning={"effort": "low", "context": "everything"}))
    assert (raised.value.param, raised.value.code) == ("reasoning.context", "invalid_value")
