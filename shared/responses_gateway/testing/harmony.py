"""The scripted harmony upstream: a turn rendered as a gpt-oss completion, a prompt read back.

Owns what the fake upstream's ``POST /v1/completions`` needs beyond HTTP: :class:`HarmonyTurn`
renders a scripted :class:`~responses_gateway.testing.script.Turn` with ``openai-harmony`` as the
completion a gpt-oss server streams (reasoning on ``analysis``; text on ``final``, or as a
``commentary`` preamble when tool calls follow; each call a ``commentary`` message to
``functions.NAME`` ending in ``<|call|>``), and :func:`read_prompt` decodes a received prompt
(token ids or text) into its text and a Chat Completions view for the demo model (messages, and
the function tools parsed back from the developer message). It never imports the gateway.

A real server stops at the first ``<|call|>`` and drops the stop token; this script renders every
scripted call (so one completion may hold parallel calls) and drops the last message's stop token
unless the turn sets ``stop_in_text``. ``openai_harmony`` is imported inside functions only: the
testing package stays importable without it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from responses_gateway._vocab import harmony_encoding
from responses_gateway.testing.script import Turn, Usage

__all__ = ["HarmonyPrompt", "HarmonyTurn", "read_prompt"]

_HEAD = "<|start|>assistant"
_STOPS = {"final": "<|return|>", "call": "<|call|>"}


@dataclass(frozen=True, slots=True)
class HarmonyPrompt:
    """A received ``/v1/completions`` prompt."""

    tokens: list[int]
    text: str
    """The prompt decoded, special tokens included."""
    chat_view: dict[str, Any]
    """The request as a Chat Completions body (``messages``, ``tools``, ``max_tokens``), for the
    demo model."""


def read_prompt(body: dict[str, Any]) -> HarmonyPrompt | None:
    """The prompt of a completions request body; None when it has none or it is not harmony."""
    encoding = harmony_encoding()
    raw = body.get("prompt")
    if isinstance(raw, str):
        tokens: list[int] = encoding.encode(raw, allowed_special="all")
    elif isinstance(raw, list) and all(isinstance(t, int) for t in raw):
        tokens = list(raw)
    else:
        return None
    text: str = encoding.decode(tokens)
    return HarmonyPrompt(tokens, text, _chat_view(encoding, tokens, body))


def _chat_view(encoding: Any, tokens: list[int], body: dict[str, Any]) -> dict[str, Any]:
    from openai_harmony import HarmonyError  # type: ignore[import-untyped]

    head: list[int] = encoding.encode(_HEAD, allowed_special="all")
    if tokens[-len(head) :] == head:
        tokens = tokens[: -len(head)]
    try:
        parsed = encoding.parse_messages_from_completion_tokens(tokens, None, strict=False)
    except HarmonyError:
        parsed = []
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    response_format: dict[str, Any] | None = None
    choice: Any = None
    for message in parsed:
        role = str(message.author.role.value)
        text = "".join(getattr(c, "text", "") for c in message.content)
        if role == "developer":
            tools += _tools(text)
            response_format = _response_format(text) or response_format
            choice = _choice(text) or choice
        elif role == "tool":
            messages.append({"role": "tool", "content": text})
        elif role in ("user", "assistant"):
            messages.append({"role": role, "content": text})
    view: dict[str, Any] = {"messages": messages, "tools": tools}
    if choice is not None:
        view["tool_choice"] = choice
    if isinstance(body.get("max_tokens"), int):
        view["max_tokens"] = body["max_tokens"]
    if response_format is not None:
        view["response_format"] = response_format
    return view


def _response_format(developer: str) -> dict[str, Any] | None:
    """The ``# Response Formats`` section of a developer message as a chat ``response_format``
    (its schema is the section's JSON line)."""
    _, found, section = developer.partition("# Response Formats")
    if not found:
        return None
    if "## json_object" in section:
        return {"type": "json_object"}
    schema: Any = None
    for line in reversed(section.splitlines()):  # the schema: the section's JSON line
        try:
            schema = json.loads(line)
        except ValueError:
            continue
        if isinstance(schema, dict):
            break
    return {"type": "json_schema", "json_schema": {"schema": schema}}


_FORCED = re.compile(r"Call the function `(\w+)` now")


def _choice(developer: str) -> Any:
    """The ``tool_choice`` a developer message's instructions force, in chat terms (harmony
    has no field for it: the gateway tells the model in words), or None."""
    forced = _FORCED.search(developer)
    if forced:
        return {"type": "function", "function": {"name": forced[1]}}
    return "required" if "Call one of the functions now" in developer else None


_TOOL = re.compile(r"^type (\w+) = \((?:_: \{)?")
_PROPERTY = re.compile(r"^(\w+)(\?)?: (.+?),?(?: // .*)?$")


def _property_schema(kind: str) -> dict[str, Any]:
    if kind.endswith("[]"):
        return {"type": "array", "items": _property_schema(kind[:-2])}
    if kind.startswith('"'):
        return {"type": "string", "enum": [v.strip().strip('"') for v in kind.split("|")]}
    if kind in ("string", "number", "boolean"):
        return {"type": kind}
    return {"type": "object"}


def _tools(developer: str) -> list[dict[str, Any]]:
    """The function tools of a developer message, their TypeScript-like signatures read back
    into flat JSON schemas (nested objects stay ``{"type": "object"}``)."""
    tools: list[dict[str, Any]] = []
    depth = 0
    current: dict[str, Any] | None = None
    for line in developer.splitlines():
        match = _TOOL.match(line)
        if match:
            current = {"type": "object", "properties": {}, "required": []}
            tools.append({"type": "function", "function": {"name": match[1]}})
            if line.endswith("{"):
                tools[-1]["function"]["parameters"] = current
                depth = 1
            continue
        if current is None or depth == 0 or line.startswith("//"):
            continue
        if line.startswith("})"):
            depth = 0
            continue
        prop = _PROPERTY.match(line)
        if depth == 1 and prop:
            current["properties"][prop[1]] = _property_schema(prop[3])
            if not prop[2]:
                current["required"].append(prop[1])
        depth += line.count("{") - line.count("}")
    return tools


class HarmonyTurn:
    """One scripted turn as the token stream of a gpt-oss completion."""

    def __init__(self, turn: Turn, prompt_tokens: int) -> None:
        self.turn = turn
        encoding = self._encoding = harmony_encoding()
        tokens: list[int] = []
        messages = self._messages()
        for index, (message, end) in enumerate(messages):
            rendered: list[int] = encoding.render(message)
            if index == 0:
                rendered = rendered[len(encoding.encode(_HEAD, allowed_special="all")) :]
            if index == len(messages) - 1:
                rendered = rendered[:-1]  # the server keeps the stop token to itself
                if turn.stop_in_text and turn.finish == "stop":
                    rendered += encoding.encode(_STOPS.get(end, "<|end|>"), allowed_special="all")
            tokens += rendered
        self.tokens = tokens
        self.usage = turn.usage or Usage(input_tokens=prompt_tokens, output_tokens=len(tokens))

    def _messages(self) -> list[tuple[Any, str]]:
        from openai_harmony import Message, Role

        turn = self.turn
        out: list[tuple[Any, str]] = []
        if turn.reasoning:
            message = Message.from_role_and_content(Role.ASSISTANT, turn.reasoning)
            out.append((message.with_channel("analysis"), "end"))
        if turn.text is not None:
            channel = "commentary" if turn.tool_calls else "final"
            message = Message.from_role_and_content(Role.ASSISTANT, turn.text)
            out.append((message.with_channel(channel), "final" if channel == "final" else "end"))
        for call in turn.tool_calls:
            message = (
                Message.from_role_and_content(Role.ASSISTANT, call.arguments)
                .with_channel("commentary")
                .with_recipient("functions." + call.name)
                .with_content_type("<|constrain|>json")
            )
            out.append((message, "call"))
        return out

    @property
    def text(self) -> str:
        """The whole completion text."""
        decoded: str = self._encoding.decode(self.tokens)
        return decoded

    def pieces(self) -> list[str]:
        """The completion as streamed: one token's text per piece (tokens that end inside a
        UTF-8 character wait for the rest), or ``chunk_size`` characters per piece."""
        if self.turn.chunk_size is not None:
            size = max(1, self.turn.chunk_size)
            text = self.text
            return [text[i : i + size] for i in range(0, len(text), size)]
        from openai_harmony import HarmonyError

        pieces: list[str] = []
        pending: list[int] = []
        for token in self.tokens:
            pending.append(token)
            try:
                pieces.append(self._encoding.decode_utf8(pending))
            except HarmonyError:
                continue
            pending = []
        if pending:
            pieces.append(self._encoding.decode(pending))
        return pieces

    def usage_json(self) -> dict[str, Any]:
        u = self.usage
        return {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.total_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        }
