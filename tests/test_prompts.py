"""Prompt templates: parsing and resolution (variables of every kind, versions, errors)."""

from __future__ import annotations

import pytest

from responses_gateway.errors import InvalidRequestError, NotFoundError
from responses_gateway.prompts import (
    PromptConfigError,
    next_version,
    parse_prompts,
    parse_version,
    resolve_prompt,
    stored_template,
)

TEMPLATES = parse_prompts(
    {
        "p": {
            "versions": {
                "1": {"instructions": "Old {{a}}."},
                "2": {
                    "instructions": "Help {{a}}.",
                    "input": [
                        {"role": "user", "content": "Look: {{img}} and {{a}}"},
                        {"role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
                    ],
                },
            }
        }
    }
)
IMAGE = {"type": "input_image", "image_url": "https://example.com/i.png", "detail": "auto"}


def test_the_highest_version_is_the_default() -> None:
    assert TEMPLATES["p"].default_version == "2"


def test_variables_substitute_text_and_become_parts() -> None:
    resolved = resolve_prompt(
        TEMPLATES,
        {"id": "p", "variables": {"a": {"type": "input_text", "text": "Bo"}, "img": IMAGE}},
    )

    assert resolved.instructions == "Help Bo."
    assert resolved.input[0] == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Look: "},
            IMAGE,
            {"type": "input_text", "text": " and Bo"},
        ],
    }
    assert resolved.input[1]["content"] == [{"type": "output_text", "text": "ok"}]
    assert resolved.echo["version"] == "2"


def test_a_string_only_message_stays_a_string() -> None:
    resolved = resolve_prompt(TEMPLATES, {"id": "p", "version": "1", "variables": {"a": "x"}})
    assert (resolved.instructions, resolved.input) == ("Old x.", [])


def test_an_image_cannot_stand_in_instructions() -> None:
    with pytest.raises(InvalidRequestError):
        resolve_prompt(TEMPLATES, {"id": "p", "version": "1", "variables": {"a": IMAGE}})


def test_unknown_id_is_not_found() -> None:
    with pytest.raises(NotFoundError):
        resolve_prompt(TEMPLATES, {"id": "q"})


def test_a_malformed_variable_is_invalid() -> None:
    with pytest.raises(InvalidRequestError, match="Prompt variable 'a'"):
        resolve_prompt(TEMPLATES, {"id": "p", "version": "1", "variables": {"a": 3}})


@pytest.mark.parametrize(
    "raw",
    [[], {"p": {}}, {"p": {"versions": {"1": {"instructions": 1}}}},
     {"p": {"versions": {"1": {}}, "default_version": "2"}}],
)  # fmt: skip
def test_malformed_sections_are_config_errors(raw: object) -> None:
    with pytest.raises(PromptConfigError):
        parse_prompts(raw)


def test_next_version_is_one_more_than_the_highest_number() -> None:
    assert next_version([]) == "1"
    assert next_version(["1", "9", "10", "draft"]) == "11"


def test_a_stored_template_defaults_to_its_default_else_its_highest_version() -> None:
    versions = {"2": {"instructions": "b"}, "10": {"instructions": "c"}, "x": {"input": []}}
    assert stored_template("p", versions, "2").default_version == "2"
    assert stored_template("p", versions, None).default_version == "10"
    assert stored_template("p", versions, "gone").default_version == "10"


def test_parse_version_needs_instructions_or_input() -> None:
    with pytest.raises(PromptConfigError, match="needs instructions or input"):
        parse_version("p", "1", {})
    assert parse_version("p", "1", {"input": [{"role": "user", "content": "hi"}]}).input
