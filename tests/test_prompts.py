"""Prompt templates: parsing and resolution (variables of every kind, versions, errors)."""

from __future__ import annotations

import pytest

from responses_gateway.errors import InvalidRequestError, NotFoundError
from responses_gateway.prompts import PromptConfigError, parse_prompts, resolve_prompt

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
