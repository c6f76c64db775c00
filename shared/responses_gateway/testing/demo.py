"""The ``demo`` model: a deterministic, offline model that exercises every gateway feature.

Owns :func:`demo_turn`, which reads a Chat Completions or Responses request body and decides the
answer. It does no I/O, keeps no state and never looks at the clock, so the same request always
gets the same answer. It must not know about HTTP: the fake upstream renders the turn.

Rules, checked in this order (a "word" is a run of letters, digits, ``'`` or ``-``):

1. **Tool results answer back.** If the request ends with tool results (chat ``role: "tool"``
   messages, Responses ``function_call_output`` items), the answer is the text
   ``The tool returned: <output>`` (several trailing results are joined with ``"; "``).
2. **Tool calls.** If function tools are offered and ``tool_choice`` is not ``"none"``, the last
   user message asks for a tool when it contains the tool's name (``get_weather``), or one of the
   words of its name other than generic verbs (``weather`` for ``get_weather``,
   ``stock`` for ``getStockPrice``). ``tool_choice: "required"`` picks the first tool when none
   is mentioned; a named ``tool_choice`` always picks that tool.
   - Two calls are made when two tools are mentioned (one each), or when one is mentioned and the
     message says ``parallel`` or ``both`` (the same tool twice), unless
     ``parallel_tool_calls`` is false.
   - Arguments are built from the tool's JSON schema (``required`` properties, or all when there
     is no ``required`` list): strings take the next candidate word of the message (capitalised
     words first, then the word after ``in``/``for``/``of``/``about``/``at``/``to``/``from``/
     ``on``/``near``, then the last word), so ``"weather in Paris"`` gives ``{"city": "Paris"}``
     and the second of two calls takes the next candidate (``"Paris and London"``); enums take
     the value the message mentions, else the first; integers and numbers take the numbers of the
     message in order (default ``1``); booleans ``true``; arrays ``[]``; objects are filled the
     same way. Call ids come from the upstream (``call_up000001``...).
3. **Reasoning.** If the message contains ``think`` or ``reason`` (``thinking``, ``reasoning``
   too), the turn carries reasoning ``Let me think step by step about: <message>``: raw reasoning
   on the chat wire, a reasoning summary on the Responses wire (plus ``encrypted_content`` when
   the request's ``include`` asks for ``reasoning.encrypted_content``).
4. **Text.** Otherwise (and alongside reasoning) the answer is ``Hello! You said: <message>``
   (``Hello! I am the demo model.`` when there is no user message). When the request asks for
   JSON (chat ``response_format``, Responses ``text.format``, harmony's ``# Response Formats``),
   a text answer (this one, or rule 1's) is JSON instead: ``{"answer": <text>}`` for
   ``json_object``, for ``json_schema`` an instance of the schema built as tool arguments are.
5. **Length limit.** ``max_tokens``/``max_completion_tokens`` (chat) or ``max_output_tokens``
   (Responses) cut the answer text to that many words (at least one) and finish with
   ``length`` (a ``response.incomplete`` with reason ``max_output_tokens`` on the Responses wire).

Usage is the fake upstream's default: one token per whitespace-separated word.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.testing.script import ToolCall, Turn, Wire

__all__ = ["DEMO_MODEL", "demo_turn"]

DEMO_MODEL = "demo"
"""The model name the demo answers to (any model name is answered the same way)."""

_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_GENERIC = frozenset(
    {
        "get", "set", "list", "fetch", "run", "call", "use", "do", "make", "create", "find",
        "read", "write", "update", "delete", "tool", "the", "and", "for", "add", "search",
        "lookup", "look", "query", "check", "send", "info", "data",
    }
)  # fmt: skip
_PREPOSITIONS = frozenset({"in", "for", "of", "about", "at", "to", "from", "on", "near"})
_STOPWORDS = frozenset(
    {
        "a", "an", "the", "and", "or", "is", "are", "be", "what", "what's", "whats", "how",
        "please", "can", "could", "you", "me", "my", "i", "it", "its", "in", "for", "of",
        "about", "at", "to", "from", "on", "near", "both", "parallel", "call", "use", "tool",
        "tools", "with", "today", "now", "tell", "think", "reason",
    }
)  # fmt: skip


@dataclass(slots=True)
class _Tool:
    name: str
    parameters: dict[str, Any]


@dataclass(slots=True)
class _DemoInput:
    user_text: str | None = None
    tool_outputs: list[str] = field(default_factory=list)
    tools: list[_Tool] = field(default_factory=list)
    tool_choice: Any = None
    parallel: bool = True
    max_tokens: int | None = None
    wants_encrypted: bool = False
    answer_format: dict[str, Any] | None = None
    """``{"type": "json_object"}`` or ``{"type": "json_schema", "schema": ...}`` when the request
    asks for JSON."""


def demo_turn(request_json: dict[str, Any], wire: Wire) -> Turn:
    """The demo model's answer to a Chat Completions (``chat``) or Responses request body."""
    req = _read_chat(request_json) if wire == "chat" else _read_responses(request_json)
    if req.tool_outputs:
        answer = _formatted("The tool returned: " + "; ".join(req.tool_outputs), req)
        return _limit(Turn(text=answer), req)

    text = req.user_text or ""
    reasoning: str | None = None
    if any(w.startswith(("think", "reason")) for w in _words_lower(text)):
        reasoning = f"Let me think step by step about: {text}"

    calls = _plan_calls(text, req)
    if calls:
        return _with_reasoning(Turn(tool_calls=calls), reasoning, wire, req)
    answer = f"Hello! You said: {text}" if text else "Hello! I am the demo model."
    answer = _formatted(answer, req)
    return _with_reasoning(_limit(Turn(text=answer), req), reasoning, wire, req)


def _formatted(answer: str, req: _DemoInput) -> str:
    """``answer`` as the JSON the request asks for, if it asks for JSON."""
    fmt = req.answer_format
    if fmt is None:
        return answer
    if fmt["type"] == "json_object":
        return json.dumps({"answer": answer})
    text = req.user_text or ""
    candidates = _candidates(text, []) or ["demo"]
    numbers = [float(n) for n in _NUMBER.findall(text)]
    value = _fill_value(_schema(fmt.get("schema")), text, _cycle(candidates, 0), iter(numbers))
    return json.dumps(value)


def _answer_format(fmt: Any) -> dict[str, Any] | None:
    """A chat ``response_format`` or a Responses ``text.format`` as the demo's answer format."""
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") != "json_schema":
        return None
    nested = fmt.get("json_schema")  # chat nests it; Responses does not
    schema = nested.get("schema") if isinstance(nested, dict) else fmt.get("schema")
    return {"type": "json_schema", "schema": _schema(schema) or {"type": "object"}}


# -- reading requests ---------------------------------------------------------------------------


def _read_chat(body: dict[str, Any]) -> _DemoInput:
    out = _DemoInput()
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for msg in reversed(messages):
        if msg.get("role") != "tool":
            break
        out.tool_outputs.insert(0, _content_text(msg.get("content")))
    for msg in reversed(messages):
        if msg.get("role") == "user":
            out.user_text = _content_text(msg.get("content"))
            break
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type", "function") == "function":
            nested = tool.get("function")
            fn: dict[str, Any] = nested if isinstance(nested, dict) else tool
            if isinstance(fn.get("name"), str):
                out.tools.append(_Tool(fn["name"], _schema(fn.get("parameters"))))
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        choice = {"type": "function", "name": choice["function"].get("name")}
    out.tool_choice = choice
    out.parallel = body.get("parallel_tool_calls") is not False
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    out.max_tokens = limit if isinstance(limit, int) else None
    out.answer_format = _answer_format(body.get("response_format"))
    return out


def _read_responses(body: dict[str, Any]) -> _DemoInput:
    out = _DemoInput()
    raw = body.get("input")
    items: list[dict[str, Any]]
    if isinstance(raw, str):
        items = [{"type": "message", "role": "user", "content": raw}]
    else:
        items = [i for i in raw or [] if isinstance(i, dict)]
    for item in reversed(items):
        if item.get("type") != "function_call_output":
            break
        out.tool_outputs.insert(0, _content_text(item.get("output")))
    for item in reversed(items):
        if item.get("type", "message") == "message" and item.get("role") == "user":
            out.user_text = _content_text(item.get("content"))
            break
    for tool in body.get("tools") or []:
        if (
            isinstance(tool, dict)
            and tool.get("type") == "function"
            and isinstance(tool.get("name"), str)
        ):
            out.tools.append(_Tool(tool["name"], _schema(tool.get("parameters"))))
    out.tool_choice = body.get("tool_choice")
    out.parallel = body.get("parallel_tool_calls") is not False
    limit = body.get("max_output_tokens")
    out.max_tokens = limit if isinstance(limit, int) else None
    include = body.get("include") or []
    out.wants_encrypted = "reasoning.encrypted_content" in include
    text = body.get("text")
    out.answer_format = _answer_format(text.get("format") if isinstance(text, dict) else None)
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return " ".join(p for p in parts if isinstance(p, str))
    if content is None:
        return ""
    return json.dumps(content)


def _schema(parameters: Any) -> dict[str, Any]:
    return parameters if isinstance(parameters, dict) else {}


# -- tool calls ---------------------------------------------------------------------------------


def _plan_calls(text: str, req: _DemoInput) -> list[ToolCall]:
    if not req.tools or req.tool_choice == "none":
        return []
    chosen = _mentioned_tools(text, req.tools)
    named = req.tool_choice.get("name") if isinstance(req.tool_choice, dict) else None
    if isinstance(named, str):
        chosen = [t for t in req.tools if t.name == named][:1]
    elif not chosen and req.tool_choice == "required":
        chosen = req.tools[:1]
    if not chosen:
        return []
    words = set(_words_lower(text))
    if len(chosen) == 1 and words & {"parallel", "both"}:
        chosen = [chosen[0], chosen[0]]
    if not req.parallel:
        chosen = chosen[:1]
    candidates = _candidates(text, [t.name for t in req.tools])
    numbers = [float(n) for n in _NUMBER.findall(text)]
    return [
        ToolCall(tool.name, json.dumps(_fill(tool.parameters, text, candidates, k, numbers)))
        for k, tool in enumerate(chosen[:2])
    ]


def _mentioned_tools(text: str, tools: list[_Tool]) -> list[_Tool]:
    lowered = text.lower()
    words = _words_lower(text)
    found: list[tuple[int, _Tool]] = []
    for tool in tools:
        positions: list[int] = []
        if tool.name.lower() in lowered:
            positions.append(lowered.index(tool.name.lower()))
        for part in _name_parts(tool.name):
            for i, w in enumerate(words):
                if w == part or w == part + "s" or w.rstrip("s") == part:
                    positions.append(_word_offset(text, i))
        if positions:
            found.append((min(positions), tool))
    found.sort(key=lambda pair: pair[0])
    return [tool for _, tool in found]


def _name_parts(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    parts = re.split(r"[\s_\-.]+", spaced.lower())
    return [p for p in parts if len(p) >= 3 and p not in _GENERIC]


def _word_offset(text: str, index: int) -> int:
    for i, match in enumerate(_WORD.finditer(text)):
        if i == index:
            return match.start()
    return len(text)


def _candidates(text: str, tool_names: list[str]) -> list[str]:
    words = _WORD.findall(text)
    tool_words = {p for name in tool_names for p in _name_parts(name)} | {
        n.lower() for n in tool_names
    }

    def usable(w: str) -> bool:
        low = w.lower()
        return low not in _STOPWORDS and low not in tool_words and low.rstrip("s") not in tool_words

    ordered: list[str] = []
    ordered += [w for i, w in enumerate(words) if i > 0 and w[0].isupper() and usable(w)]
    ordered += [
        w for prev, w in zip(words, words[1:], strict=False)
        if prev.lower() in _PREPOSITIONS and usable(w) and not _NUMBER.fullmatch(w)
    ]  # fmt: skip
    ordered += [w for w in reversed(words) if usable(w) and not _NUMBER.fullmatch(w)][:1]
    seen: set[str] = set()
    unique = []
    for w in ordered:
        if w.lower() not in seen:
            seen.add(w.lower())
            unique.append(w)
    return unique or ["demo"]


def _fill(
    schema: dict[str, Any], text: str, candidates: list[str], call_index: int, numbers: list[float]
) -> dict[str, Any]:
    strings = _cycle(candidates, call_index)
    nums = iter(numbers)
    return _fill_object(schema, text, strings, nums)


def _cycle(values: list[str], start: int) -> Iterator[str]:
    i = start
    while True:
        yield values[i % len(values)]
        i += 1


def _fill_object(
    schema: dict[str, Any], text: str, strings: Iterator[str], nums: Iterator[float]
) -> dict[str, Any]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return {}
    required = schema.get("required")
    names = [n for n in required if n in props] if isinstance(required, list) else list(props)
    return {name: _fill_value(props[name], text, strings, nums) for name in names}


def _fill_value(schema: Any, text: str, strings: Iterator[str], nums: Iterator[float]) -> Any:
    if not isinstance(schema, dict):
        return next(strings)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return _fill_value((usable or options)[0], text, strings, nums)
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        lowered = _words_lower(text)
        for value in enum:
            if isinstance(value, str) and value.lower() in lowered:
                return value
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind in ("integer", "number"):
        value = next(nums, 1.0)
        return int(value) if kind == "integer" else (int(value) if value.is_integer() else value)
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return _fill_object(schema, text, strings, nums)
    if kind == "null":
        return None
    return next(strings)


# -- shaping the turn ---------------------------------------------------------------------------


def _limit(turn: Turn, req: _DemoInput) -> Turn:
    if req.max_tokens is None or turn.text is None:
        return turn
    words = turn.text.split()
    keep = max(1, req.max_tokens)
    if len(words) <= keep:
        return turn
    turn.text = " ".join(words[:keep])
    turn.finish = "length"
    return turn


def _with_reasoning(turn: Turn, reasoning: str | None, wire: Wire, req: _DemoInput) -> Turn:
    if reasoning is None:
        return turn
    if wire == "chat":
        turn.reasoning = reasoning
    else:
        turn.reasoning_summary = [reasoning]
        if req.wants_encrypted:
            turn.encrypted_content = "demo:" + base64.b64encode(reasoning.encode()).decode()
    return turn


def _words_lower(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]
