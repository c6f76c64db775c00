"""The contract registries cover every name of the pinned openai SDK and every create field of
both specs (OpenAI's and Open Responses', vendored in tests/fixtures), and nothing unknown; no
create field is accepted and ignored on any wire."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.errors import InvalidRequestError
from responses_gateway.protocol.contract import (
    CREATE_FIELDS,
    FAMILIES,
    WIRES,
    check_request,
    checked_fields,
    coverage,
    lower_context_items,
    wire_refusals,
)
from responses_gateway.protocol.request import CreateResponseRequest, parse_create_request
from responses_gateway.testing.sdk_unions import sdk_names, sdk_version
from responses_gateway.testing.spec_oracle import spec_oracle

PINNED_SDK = "3.57.0"
EXTRA_ROWS = {"tools": {"computer_use"}}
"""Names with a row that the SDK's unions do not list (accepted aliases)."""


def test_the_installed_sdk_is_the_pinned_one() -> None:
    # Raising the pin (pyproject's dev extra) must come with rows for the new names.
    assert sdk_version() == PINNED_SDK


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_sdk_name_of_the_family_has_a_row(family: str) -> None:
    names = sdk_names()[family]
    assert sorted(set(names) - set(FAMILIES[family])) == []


def _spec_names(family: str) -> set[str]:
    if family != "create_fields":
        return set()
    return {name for names in spec_oracle().create_fields().values() for name in names}


@pytest.mark.parametrize("spec", ["OpenAI", "Open Responses"])
def test_every_create_field_of_each_spec_has_a_row(spec: str) -> None:
    # A field a spec adds (Open Responses' presence_penalty...) needs a declared fate too.
    assert sorted(spec_oracle().create_fields()[spec] - set(CREATE_FIELDS)) == []


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_row_names_something_the_sdk_or_a_spec_knows(family: str) -> None:
    extra = set(FAMILIES[family]) - set(sdk_names()[family]) - _spec_names(family)
    assert extra == EXTRA_ROWS.get(family, set())


def test_every_create_field_row_is_a_field_the_request_model_accepts() -> None:
    assert set(CREATE_FIELDS) - set(CreateResponseRequest.model_fields) == set()


def test_no_create_field_is_accepted_and_ignored_on_any_wire() -> None:
    """Forwarded under the wire's name, applied by the gateway, or refused: never omitted."""
    for row in CREATE_FIELDS.values():
        for wire in WIRES:
            handling = row.on(wire)
            assert handling.fate in ("relayed", "lowered", "gateway", "refused"), (row.name, wire)
            if handling.fate in ("relayed", "lowered"):
                assert handling.sent_as, f"{row.name} on {wire}: forwarded under which key?"
            if handling.fate in ("gateway", "refused") or handling.accepts is not None:
                assert handling.how, f"{row.name} on {wire}: say what the gateway does"


def test_sdk_counts_are_the_issue_counts() -> None:
    counts = {family: len(names) for family, names in sdk_names().items()}
    assert counts == {
        "tools": 18,
        "input_items": 31,
        "output_items": 28,
        "stream_events": 59,
        "create_fields": 34,
        "include_values": 8,
    }


def test_every_row_says_what_happens_on_every_wire() -> None:
    for rows in FAMILIES.values():
        for row in rows.values():
            for wire in WIRES:
                handling = row.on(wire)
                assert handling.fate in ("relayed", "lowered", "gateway", "refused", "omitted")
                if handling.fate in ("refused", "omitted"):
                    assert handling.how, f"{row.name} on {wire}: a policy needs its reason"


def test_nothing_is_relayed_on_a_function_wire() -> None:
    for rows in FAMILIES.values():
        for row in rows.values():
            assert row.chat.fate != "relayed" or row.name == "include", row.name
            assert row.harmony.fate != "relayed", row.name


def test_coverage_counts_every_row_once_per_wire() -> None:
    table = coverage()
    for family, rows in FAMILIES.items():
        for wire in WIRES:
            assert sum(table[family][wire].values()) == len(rows)


def test_lower_context_items_keeps_answered_outputs_and_lowers_orphans() -> None:
    paired = {"type": "function_call_output", "call_id": "c", "output": "1"}
    orphan = {"type": "function_call_output", "output": "2"}
    search = {"type": "web_search_call", "id": "ws", "status": "completed", "action": {}}

    lowered = lower_context_items([paired, orphan, search, search], keep={"ws2": ""})

    assert lowered[0] is paired
    assert lowered[1] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Tool output: 2"}],
    }
    assert lowered[2]["role"] == "assistant"
    assert lower_context_items([search], keep={"ws": ""}) == [search]


def test_harmony_honours_every_field_and_include_value_it_has_the_data_for() -> None:
    from responses_gateway.protocol.contract import INCLUDE_VALUES

    for name in ("text", "tool_choice", "top_logprobs", "presence_penalty", "frequency_penalty"):
        assert CREATE_FIELDS[name].harmony.fate == "lowered", name
    assert CREATE_FIELDS["parallel_tool_calls"].harmony.fate == "gateway"
    assert INCLUDE_VALUES["message.output_text.logprobs"].harmony.fate == "lowered"
    for wire in ("chat", "harmony"):
        assert INCLUDE_VALUES["message.input_image.image_url"].on(wire).fate == "gateway"


def test_bedrock_refuses_only_what_converse_has_no_equivalent_for() -> None:
    refused = {
        name
        for name, row in CREATE_FIELDS.items()
        if row.bedrock is not None and row.bedrock.fate == "refused"
    }
    assert refused == {"presence_penalty", "frequency_penalty", "top_logprobs"}
    forwarded = {
        name: row.on("bedrock").sent_as
        for name, row in CREATE_FIELDS.items()
        if row.on("bedrock").fate in ("relayed", "lowered")
    }
    assert forwarded == {
        "model": "modelId",
        "input": "messages",
        "instructions": "system",
        "tools": "toolConfig",
        "tool_choice": "toolConfig",
        "max_output_tokens": "inferenceConfig",
        "temperature": "inferenceConfig",
        "top_p": "inferenceConfig",
        "user": "requestMetadata",
        "reasoning": "additionalModelRequestFields",
        "text": "outputConfig",
        "service_tier": "serviceTier",
    }


_CHECKED_BODIES = [
    {"model": "m", "input": "hi"},
    {"model": "m", "service_tier": "flex", "prompt_cache_key": "k", "moderation": {}},
    {"model": "m", "service_tier": "default", "image": {"context_compression": "auto"}},
    {"model": "m", "image": {"a": 1}, "background_options": {"x": True}, "text": {}},
    {"model": "m", "background_options": {"completion_window": "soonest"}},
    {"model": "m", "tools": [{"type": "function", "name": "f"}, {"type": "web_search"}]},
    {"model": "m", "tools": [{"type": "programmatic_tool_calling"}]},
    {"model": "m", "prompt_cache_retention": "24h", "access_programs": {}, "tools": []},
]


@pytest.mark.parametrize("wire", [*WIRES, "test"])
@pytest.mark.parametrize("body", _CHECKED_BODIES)
def test_check_request_reads_only_the_checked_fields(wire: str, body: dict[str, Any]) -> None:
    """A caller may dump only checked_fields(wire): the answer (or the 400) is the same."""
    request = parse_create_request(body)
    whole = request.model_dump(mode="json", exclude_unset=True, exclude={"input"})
    part = request.model_dump(mode="json", exclude_unset=True, include=set(checked_fields(wire)))
    expected: Any = None
    got: Any = None
    try:
        check_request(whole, wire)
    except InvalidRequestError as error:
        expected = error.to_error()
    try:
        check_request(part, wire)
    except InvalidRequestError as error:
        got = error.to_error()
    assert got == expected


_REFUSALS = [
    # (field, value, the wires that refuse it)
    ("moderation", {"model": "omni-moderation-latest"}, {"chat", "harmony", "bedrock"}),
    ("access_programs", {"cyber": "standard"}, {"chat", "harmony", "bedrock"}),
    ("prompt_cache_options", {"mode": "explicit"}, {"chat", "harmony", "bedrock"}),
    ("prompt_cache_retention", "24h", {"chat", "harmony", "bedrock"}),
    ("image", {"context_compression": "enabled"}, {"chat", "harmony", "bedrock"}),
    ("image", {"context_compression": "disabled"}, set()),
    ("background_options", {"completion_window": "2h"}, {*WIRES}),
    ("background_options", {"continuation_id": "c1"}, {*WIRES}),
    ("background_options", {"completion_window": "soonest"}, set()),
    ("service_tier", "flex", {"harmony"}),
    ("service_tier", "scale", {"harmony", "bedrock"}),
    ("service_tier", "default", set()),
    ("presence_penalty", 0.5, {"bedrock"}),
    ("top_logprobs", 2, {"bedrock"}),
]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(("name", "value", "refused_on"), _REFUSALS)
def test_check_request_refuses_a_field_its_wire_cannot_honour_naming_it(
    wire: str, name: str, value: Any, refused_on: set[str]
) -> None:
    request = parse_create_request({"model": "m", name: value})
    dumped = request.model_dump(mode="json", exclude_unset=True, include=set(checked_fields(wire)))
    if wire not in refused_on:
        check_request(dumped, wire)
        return
    with pytest.raises(InvalidRequestError) as raised:
        check_request(dumped, wire)
    assert (raised.value.status_code, raised.value.param) == (400, name)
    assert raised.value.code == "unsupported_parameter"


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (429, None, "rate_limit_exceeded"),
        (400, None, "invalid_prompt"),  # an orphan call_id: the request's fault, not the server's
        (400, "invalid_image_url", "invalid_image_url"),
        (400, "context_length_exceeded", "context_length_exceeded"),
        (400, "some_upstream_code", "invalid_prompt"),
        (404, "model_not_found", "invalid_prompt"),
        (424, None, "server_error"),  # an MCP server's listing failed: not the prompt's fault
        (502, "invalid_model_output", "server_error"),
        (500, None, "server_error"),
    ],
)
def test_failure_code_is_always_a_code_a_table_names(
    status: int, code: str | None, expected: str
) -> None:
    from responses_gateway.protocol.contract import (
        GATEWAY_FAILURE_CODES,
        OPENAI_FAILURE_CODES,
        failure_code,
    )

    assert failure_code(status, code) == expected
    assert expected in OPENAI_FAILURE_CODES or expected in GATEWAY_FAILURE_CODES


def test_openai_failure_codes_are_the_vendored_specs_enum() -> None:
    from responses_gateway.protocol.contract import OPENAI_FAILURE_CODES

    schemas = spec_oracle().openai.schemas
    assert set(OPENAI_FAILURE_CODES) == set(schemas["ResponseErrorCode"]["enum"])


def test_openai_incomplete_reasons_are_the_vendored_specs_enum() -> None:
    from responses_gateway.protocol.contract import OPENAI_INCOMPLETE_REASONS

    props = spec_oracle().openai.schemas["Response"]
    found: set[str] = set()
    for part in props.get("allOf", [props]):
        schema = (
            spec_oracle().openai.schemas[part["$ref"].rsplit("/", 1)[1]] if "$ref" in part else part
        )
        details = schema.get("properties", {}).get("incomplete_details")
        if details:
            for option in details.get("anyOf", []):
                found |= set(option.get("properties", {}).get("reason", {}).get("enum", []))
    assert set(OPENAI_INCOMPLETE_REASONS) == found


def test_every_incomplete_reason_the_gateway_emits_is_named() -> None:
    from responses_gateway.protocol.contract import GATEWAY_INCOMPLETE_REASONS
    from responses_gateway.usage.budget import BUDGET_EXCEEDED

    assert BUDGET_EXCEEDED in GATEWAY_INCOMPLETE_REASONS


def test_wire_refusals_name_each_wire_that_refuses_what_the_request_sets() -> None:
    refusals = wire_refusals({"model": "m", "prompt_cache_retention": "24h", "temperature": 0.2})
    assert sorted(refusals) == ["bedrock", "chat", "harmony"]
    assert {error.param for error in refusals.values()} == {"prompt_cache_retention"}
    assert wire_refusals({"model": "m", "temperature": 0.2}) == {}
    shell = wire_refusals({"tools": [{"type": "function", "name": "f"}], "moderation": None})
    assert shell == {}  # a null field is not set
