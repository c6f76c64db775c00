"""instance_problem: where a model's JSON answer breaks a structured-outputs schema."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.protocol.schema_check import instance_problem

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2, "pattern": "^[A-Z]"},
        "rank": {"type": ["integer", "null"], "minimum": 1},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 2},
        "where": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/point"}]},
    },
    "required": ["city", "rank"],
    "additionalProperties": False,
    "$defs": {
        "tag": {"enum": ["old", "new"]},
        "point": {
            "type": "object",
            "properties": {"x": {"type": "number"}},
            "required": ["x"],
            "additionalProperties": False,
        },
    },
}


@pytest.mark.parametrize(
    "value",
    [
        {"city": "Oslo", "rank": 1},
        {"city": "Oslo", "rank": None, "tags": ["old"], "where": {"x": 1.5}},
        {"city": "Oslo", "rank": 2.0, "where": "north"},
    ],
)
def test_a_matching_value_has_no_problem(value: Any) -> None:
    assert instance_problem(value, SCHEMA) is None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([], "the top level is not of type object"),
        ({"city": "Oslo"}, "the top level lacks the required property 'rank'"),
        ({"city": "Oslo", "rank": 1, "x": 0}, "the top level has the property 'x', which its "
         "schema does not allow"),
        ({"city": "O", "rank": 1}, "city is shorter than 2"),
        ({"city": "oslo", "rank": 1}, "city does not match '^[A-Z]'"),
        ({"city": "Oslo", "rank": True}, "rank is not of type integer or null"),
        ({"city": "Oslo", "rank": 0}, "rank is less than 1"),
        ({"city": "Oslo", "rank": 1, "tags": ["x"]}, "tags[0] is not one of ['old', 'new']"),
        ({"city": "Oslo", "rank": 1, "tags": ["old"] * 3}, "tags has more items than 2"),
        ({"city": "Oslo", "rank": 1, "where": {"y": 1}}, "where matches 0 of its anyOf schemas"),
    ],
)  # fmt: skip
def test_a_broken_value_is_named_with_its_path(value: Any, problem: str) -> None:
    assert instance_problem(value, SCHEMA) == problem


def test_a_recursive_schema_checks_any_depth_and_remote_refs_are_not_followed() -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    assert instance_problem({"kids": [{"kids": [{"kids": []}]}]}, tree) is None
    assert instance_problem({"kids": [{"kids": [1]}]}, tree) == (
        "kids[0].kids[0] is not of type object"
    )
    assert instance_problem(1, {"$ref": "https://example.com/s.json"}) is None
