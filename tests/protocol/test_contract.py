"""The contract registries cover every name of the pinned openai SDK, and nothing unknown."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.errors import InvalidRequestError
from responses_gateway.protocol.contract import (
    FAMILIES,
    WIRES,
    check_request,
    checked_fields,
    coverage,
    lower_context_items,
)
from responses_gateway.protocol.request import parse_create_request
from responses_gateway.testing.sdk_unions import sdk_names, sdk_version

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


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_row_names_something_the_sdk_knows(family: str) -> None:
    extra = set(FAMILIES[family]) - set(sdk_names()[family])
    assert extra == EXTRA_ROWS.get(family, set())


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
    from responses_gateway.protocol.contract import CREATE_FIELDS, INCLUDE_VALUES

    for name in ("text", "tool_choice", "parallel_tool_calls", "top_logprobs"):
        assert CREATE_FIELDS[name].harmony.fate == "lowered", name
    assert INCLUDE_VALUES["message.output_text.logprobs"].harmony.fate == "lowered"
    for wire in ("chat", "harmony"):
        assert INCLUDE_VALUES["message.input_image.image_url"].on(wire).fate == "gateway"


_CHECKED_BODIES = [
    {"model": "m", "input": "hi"},
    {"model": "m", "service_tier": "flex", "prompt_cache_key": "k", "moderation": {}},
    {"model": "m", "image": {"a": 1}, "background_options": {"x": True}, "text": {}},
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
    try:
        expected: Any = check_request(whole, wire)
    except InvalidRequestError as error:
        expected = error.to_error()
    try:
        got: Any = check_request(part, wire)
    except InvalidRequestError as error:
        got = error.to_error()
    assert got == expected
