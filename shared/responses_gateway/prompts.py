"""Operator-defined prompt templates: the ``prompt`` create field, resolved before any model call.

Owns :class:`PromptTemplate` / :class:`PromptVersion` (parsed from ``GATEWAY_CONFIG``'s
``prompts`` section by :func:`parse_prompts`, or from a prompt kept in the store by
:func:`stored_template`; :func:`parse_version` checks one version's body for either) and
:func:`resolve_prompt`, which turns a request's
``prompt`` reference ``{"id", "version"?, "variables"?}`` into instructions and input items, the
way OpenAI documents reusable prompts: ``{{name}}`` placeholders in the template's instructions
and message texts are replaced by the variables; a string or ``input_text`` value substitutes
its text; an ``input_image`` / ``input_file`` value becomes its own content part where the
placeholder stood. An unknown id is a 404, an unknown version, a missing or unknown variable a
400, all before any model call. It does no I/O.

Config shape::

    "prompts": {"pmpt_support": {"default_version": "2", "versions": {
        "1": {"instructions": "You help with {{product}}."},
        "2": {"instructions": "...", "input": [{"role": "user", "content": "Hi, {{name}}"}]}}}}
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from responses_gateway.config_keys import unknown_key_message
from responses_gateway.errors import InvalidRequestError, NotFoundError

__all__ = [
    "PromptConfigError",
    "PromptTemplate",
    "PromptVersion",
    "ResolvedPrompt",
    "next_version",
    "parse_prompts",
    "parse_version",
    "resolve_prompt",
    "stored_template",
]


class PromptConfigError(ValueError):
    """The ``prompts`` config section is malformed."""


_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PART_TYPES = frozenset({"input_image", "input_file"})


@dataclass(frozen=True, slots=True)
class PromptVersion:
    """One version of a template: instructions and/or messages with ``{{name}}`` placeholders."""

    instructions: str | None
    input: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A prompt id and its versions."""

    id: str
    versions: Mapping[str, PromptVersion]
    default_version: str


@dataclass(frozen=True, slots=True)
class ResolvedPrompt:
    """A prompt reference resolved against its template."""

    instructions: str | None
    input: list[dict[str, Any]]
    echo: dict[str, Any]
    """The ``prompt`` the Response echoes: id, the version used, the variables."""


_PROMPT_KEYS = ("versions", "default_version")
_VERSION_KEYS = ("instructions", "input")


def parse_prompts(raw: Any) -> dict[str, PromptTemplate]:
    """The ``prompts`` config section (absent: none).

    Raises:
        PromptConfigError: a malformed section.
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise PromptConfigError("'prompts' must be an object of prompt id -> template")
    out: dict[str, PromptTemplate] = {}
    for prompt_id, spec in raw.items():
        message = unknown_key_message(
            f"prompt {prompt_id!r}", spec if isinstance(spec, dict) else (), _PROMPT_KEYS
        )
        versions = spec.get("versions") if isinstance(spec, dict) else None
        for version, body in (versions or {}).items() if isinstance(versions, dict) else ():
            message = message or unknown_key_message(
                f"prompt {prompt_id!r} version {version!r}",
                body if isinstance(body, dict) else (),
                _VERSION_KEYS,
            )
        if message is not None:
            raise PromptConfigError(message)
        if not isinstance(versions, dict) or not versions:
            raise PromptConfigError(f"prompt {prompt_id!r} needs a non-empty 'versions' object")
        parsed = {str(v): _version(prompt_id, str(v), body) for v, body in versions.items()}
        default = str(spec.get("default_version") or max(parsed, key=_version_key))
        if default not in parsed:
            raise PromptConfigError(
                f"prompt {prompt_id!r}: default_version {default!r} is not listed"
            )
        out[str(prompt_id)] = PromptTemplate(str(prompt_id), parsed, default)
    return out


def _version_key(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (-1, version)


def parse_version(prompt_id: str, version: str, body: Any) -> PromptVersion:
    """One version's body (``instructions`` and/or ``input`` messages).

    Raises:
        PromptConfigError: a malformed body.
    """
    if isinstance(body, dict) and body.get("instructions") is None and not body.get("input"):
        raise PromptConfigError(
            f"prompt {prompt_id!r} version {version!r} needs instructions or input"
        )
    return _version(prompt_id, version, body)


def stored_template(
    prompt_id: str, versions: Mapping[str, Any], default: str | None
) -> PromptTemplate:
    """The template of a prompt kept in the store (its bodies were checked when put)."""
    parsed = {v: _version(prompt_id, v, body) for v, body in versions.items()}
    chosen = default if default in parsed else max(parsed, key=_version_key)
    return PromptTemplate(prompt_id, parsed, chosen)


def next_version(existing: Iterable[str]) -> str:
    """The version a new version gets when the operator names none: one more than the highest
    numbered one (``"1"`` for the first)."""
    numbers = [int(v) for v in existing if v.isdigit()]
    return str(max(numbers, default=0) + 1)


def _version(prompt_id: str, version: str, body: Any) -> PromptVersion:
    if not isinstance(body, dict):
        raise PromptConfigError(f"prompt {prompt_id!r} version {version!r} must be an object")
    instructions = body.get("instructions")
    items = body.get("input") or []
    if instructions is not None and not isinstance(instructions, str):
        raise PromptConfigError(
            f"prompt {prompt_id!r} version {version!r}: instructions is a string"
        )
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise PromptConfigError(
            f"prompt {prompt_id!r} version {version!r}: input is a list of items"
        )
    return PromptVersion(instructions, tuple({"type": "message", **i} for i in items))


def resolve_prompt(
    templates: Mapping[str, PromptTemplate], ref: Mapping[str, Any]
) -> ResolvedPrompt:
    """Resolve a request's ``prompt``.

    Raises:
        NotFoundError: no template has this id (404, ``prompt.id``).
        InvalidRequestError: an unknown version, or a variable missing, unused or malformed.
    """
    prompt_id = str(ref.get("id"))
    template = templates.get(prompt_id)
    if template is None:
        raise NotFoundError(f"Prompt with id '{prompt_id}' not found.", param="prompt.id")
    version = str(ref.get("version") or template.default_version)
    body = template.versions.get(version)
    if body is None:
        raise InvalidRequestError(
            f"Prompt '{prompt_id}' has no version '{version}'.",
            param="prompt.version",
            code="invalid_value",
        )
    variables = dict(ref.get("variables") or {})
    used: set[str] = set()
    instructions = None
    if body.instructions is not None:
        instructions = _text_only(_substitute(body.instructions, variables, used), "instructions")
    items = [_message(item, variables, used) for item in body.input]
    placeholders = _names(body)
    missing = sorted(placeholders - variables.keys())
    if missing:
        raise InvalidRequestError(
            f"Missing prompt variables: {', '.join(missing)}.",
            param="prompt.variables",
            code="missing_required_parameter",
        )
    unknown = sorted(variables.keys() - placeholders)
    if unknown:
        raise InvalidRequestError(
            f"Unknown prompt variables: {', '.join(unknown)}.",
            param="prompt.variables",
            code="invalid_value",
        )
    echo = {"id": prompt_id, "version": version, "variables": variables or None}
    return ResolvedPrompt(instructions, items, echo)


def _names(body: PromptVersion) -> set[str]:
    texts = [body.instructions or ""]
    for item in body.input:
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(p.get("text") or "") for p in content if isinstance(p, dict)]
    return {m.group(1) for text in texts for m in _PLACEHOLDER.finditer(text)}


def _value(name: str, variables: Mapping[str, Any]) -> str | dict[str, Any]:
    value = variables.get(name)
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("type") == "input_text":
        return str(value.get("text") or "")
    if isinstance(value, dict) and value.get("type") in _PART_TYPES:
        return dict(value)
    raise InvalidRequestError(
        f"Prompt variable '{name}' must be a string or an input_text, input_image or "
        "input_file object.",
        param=f"prompt.variables.{name}",
        code="invalid_type",
    )


def _substitute(
    text: str, variables: Mapping[str, Any], used: set[str]
) -> list[str | dict[str, Any]]:
    """``text`` with its placeholders replaced: text pieces and (image/file) parts."""
    pieces: list[str | dict[str, Any]] = []
    last = 0
    for match in _PLACEHOLDER.finditer(text):
        name = match.group(1)
        if name not in variables:
            continue  # reported as missing, all at once
        used.add(name)
        pieces.append(text[last : match.start()])
        pieces.append(_value(name, variables))
        last = match.end()
    pieces.append(text[last:])
    merged: list[str | dict[str, Any]] = []
    for piece in pieces:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif piece != "":
            merged.append(piece)
    return merged


def _text_only(pieces: list[str | dict[str, Any]], where: str) -> str:
    if any(not isinstance(p, str) for p in pieces):
        raise InvalidRequestError(
            f"An image or file prompt variable cannot stand in the template's {where}.",
            param="prompt.variables",
            code="invalid_value",
        )
    return "".join(p for p in pieces if isinstance(p, str))


def _message(item: dict[str, Any], variables: Mapping[str, Any], used: set[str]) -> dict[str, Any]:
    content = item.get("content")
    texts = [content] if isinstance(content, str) else None
    role = item.get("role")
    text_type = "output_text" if role == "assistant" else "input_text"
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else [{"type": text_type, "text": texts}]:
        raw = part.get("text") if isinstance(part, dict) else None
        if isinstance(raw, list):
            raw = raw[0]
        if not isinstance(raw, str):
            parts.append(part)
            continue
        for piece in _substitute(raw, variables, used):
            kind = str(part.get("type") or text_type)
            parts.append({"type": kind, "text": piece} if isinstance(piece, str) else piece)
    if texts is not None and all(p.get("type") == text_type for p in parts):
        return {**item, "content": "".join(str(p["text"]) for p in parts)}
    return {**item, "content": parts}
