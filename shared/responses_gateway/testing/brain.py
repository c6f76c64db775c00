"""A scripted model that reads the transcript: what the real-client tests talk to.

Owns :func:`brain_turn`, a :data:`~responses_gateway.testing.script.TurnFactory` for clients
whose requests a test cannot script turn by turn (Codex CLI, agent frameworks): it reads the
request (Chat Completions ``messages`` or Responses ``input``) and decides from the last user
message and the tool results after it. Like the demo model it does no I/O and keeps no state;
it must not know about HTTP or the gateway.

The last user message directs it with call blocks, run one per model request, in order::

    <<call exec_command>>{"cmd": "echo hi > out.txt"}<</call>>
    <<call apply_patch>>*** Begin Patch ...<</call>>

1. With ``n`` tool results after the last user message and more than ``n`` call blocks, the
   answer is a call of block ``n + 1``: the offered tool named exactly like the block (a
   built-in tool by its type: ``shell``, ``apply_patch``), else the one whose name ends with it
   after a separator (a namespaced tool flattened to ``multi_agent_v1__close_agent``). What is
   called depends on what the request offered, so one prompt works on every wire:

   - a function: a ``function_call`` with the payload as arguments (a non-JSON payload, for a
     freeform tool lowered to a function, as ``{"<its one property>": payload}``), with its
     ``namespace`` when the tool came inside a Responses ``namespace`` tool;
   - a Responses ``custom`` tool: a ``custom_tool_call`` whose input is the payload verbatim;
   - a Responses ``shell`` tool: a ``shell_call`` running the payload's ``commands``;
   - a Responses ``apply_patch`` tool: an ``apply_patch_call`` whose operation is the payload
     (``{"type": "create_file", "path": ..., "diff": ...}``);
   - a Responses ``web_search`` tool (any ``web_search*`` type), which an OpenAI upstream runs
     itself: a completed ``web_search_call`` for the payload's ``query`` and, in the same
     response, the text ``Searched the web for: <query>``.

   Tools offered inside ``input`` (an ``additional_tools`` or ``tool_search_output`` item)
   count like declared ones. An unknown tool answers
   ``No tool named <name> was offered (offered: ...).``
2. Otherwise, after tool results, the answer is ``The tool returned: <last result>``.
3. Otherwise it is ``You said: <last user message>`` followed by ``(user turns: <n>)``, the
   number of user messages the request carried after the last one opening with a tag (a
   client's context block such as Codex's ``<environment_context>``), so a resumed conversation
   shows its whole history arrived.

With :data:`REASON` in the last user message every answer also carries reasoning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.testing.hosted import custom_tool_call, shell_call, web_search_call
from responses_gateway.testing.script import RelayedItem, ToolCall, Turn, Wire

__all__ = ["REASON", "brain_turn", "call_block"]

REASON = "<<reason>>"
"""In the last user message: every answer also reasons ``Reasoning before step <n>.`` (``n``
counting the model calls since that message). On the chat wire as raw ``reasoning_content``; on
the Responses wire as OpenAI does: a ``reasoning`` item with that text as its summary when the
request asked for one, and ``encrypted_content`` ``upstream-sealed-step-<n>`` when its
``include`` asked for it, never the raw text."""

_BLOCK = re.compile(r"<<call ([^\s>]+)>>(.*?)<</call>>", re.DOTALL)
_CONTEXT = re.compile(r"<[A-Za-z_][\w-]*>")
_SEPARATORS = ("__", ".", "-", "_", "/", ":")


def call_block(name: str, payload: str | dict[str, Any]) -> str:
    """The directive asking :func:`brain_turn` to call ``name`` with ``payload``."""
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return f"<<call {name}>>{text}<</call>>"


_TOOLS_IN_INPUT = frozenset({"additional_tools", "tool_search_output"})
"""Responses input items that offer tools (Codex's responses-lite ``additional_tools``)."""
_BUILT_INS = frozenset({"shell", "apply_patch"})
"""Responses tool types the brain calls with their own items (their type is their name)."""


@dataclass(slots=True)
class _Offered:
    name: str
    kind: str
    """``function``, ``custom`` (a freeform tool taking raw text) or a built-in's type."""
    parameters: dict[str, Any] = field(default_factory=dict)
    namespace: str | None = None


@dataclass(slots=True)
class _Transcript:
    user_texts: list[str] = field(default_factory=list)
    """Every user message's text, oldest first."""
    results_after_last_user: list[str] = field(default_factory=list)
    tools: list[_Offered] = field(default_factory=list)


def brain_turn(body: dict[str, Any], wire: Wire) -> Turn:
    """The brain's answer to a Chat Completions (``chat``) or Responses request body."""
    seen = _read_chat(body) if wire == "chat" else _read_responses(body)
    last = seen.user_texts[-1] if seen.user_texts else ""
    turn = _decide(seen, last)
    if REASON in last:
        step = len(seen.results_after_last_user) + 1
        thought = f"Reasoning before step {step}."
        if wire != "responses":
            turn.reasoning = thought
        else:  # as OpenAI answers: a summary when asked for one, the raw text only encrypted
            asked = body.get("reasoning")
            if isinstance(asked, dict) and asked.get("summary"):
                turn.reasoning_summary = [thought]
            if "reasoning.encrypted_content" in (body.get("include") or []):
                turn.encrypted_content = f"upstream-sealed-step-{step}"
    return turn


def _decide(seen: _Transcript, last: str) -> Turn:
    blocks = _BLOCK.findall(last)
    done = len(seen.results_after_last_user)
    if done < len(blocks):
        name, payload = blocks[done]
        return _call(name, payload, seen.tools, f"{done + 1}_{len(seen.user_texts)}")
    if seen.results_after_last_user:
        return Turn(text=f"The tool returned: {seen.results_after_last_user[-1]}")
    start = max((i for i, t in enumerate(seen.user_texts) if _CONTEXT.match(t)), default=-1)
    turns = len(seen.user_texts) - start - 1
    return Turn(text=f"You said: {last} (user turns: {turns})")


def _call(name: str, payload: str, tools: list[_Offered], tag: str) -> Turn:
    tool = _find(name, tools)
    if tool is None:
        offered = ", ".join(t.name for t in tools) or "none"
        return Turn(text=f"No tool named {name} was offered (offered: {offered}).")
    try:
        parsed = json.loads(payload)
    except ValueError:
        parsed = None
    call_id, item_id = f"call_brain{tag}", f"brain{tag}"
    if tool.kind == "custom":
        item = custom_tool_call(f"ctc_{item_id}", call_id, tool.name, [payload], tool.namespace)
        return Turn(relayed_items=[item])
    if tool.kind == "shell":
        commands = parsed.get("commands") if isinstance(parsed, dict) else None
        return Turn(relayed_items=[shell_call(f"sh_{item_id}", call_id, list(commands or []))])
    if tool.kind == "web_search":
        query = str(parsed.get("query", "")) if isinstance(parsed, dict) else payload
        search = web_search_call(f"ws_{item_id}", query)
        return Turn(relayed_items=[search], text=f"Searched the web for: {query}")
    if tool.kind == "apply_patch":
        operation = parsed if isinstance(parsed, dict) else {}
        return Turn(relayed_items=[_apply_patch_call(f"apc_{item_id}", call_id, operation)])
    arguments = payload
    if not isinstance(parsed, dict):
        props = tool.parameters.get("properties")
        keys = list(props) if isinstance(props, dict) else []
        arguments = json.dumps({keys[0] if len(keys) == 1 else "input": payload})
    call = ToolCall(name=tool.name, arguments=arguments, namespace=tool.namespace)
    return Turn(tool_calls=[call])


def _apply_patch_call(item_id: str, call_id: str, operation: dict[str, Any]) -> RelayedItem:
    done = {
        "id": item_id,
        "type": "apply_patch_call",
        "call_id": call_id,
        "status": "completed",
        "operation": operation,
    }
    return RelayedItem(added={**done, "status": "in_progress"}, events=[], done=done)


def _find(name: str, tools: list[_Offered]) -> _Offered | None:
    for tool in tools:
        if tool.name == name:
            return tool
    for tool in tools:
        if any(tool.name.endswith(sep + name) for sep in _SEPARATORS):
            return tool
    return None


# -- reading requests ---------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_part_text(p) for p in content]
        return "\n".join(p for p in parts if p)
    if content is None:
        return ""
    return json.dumps(content)


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        for key in ("text", "stdout", "output"):
            value = part.get(key)
            if isinstance(value, str):
                return value
        return json.dumps(part)
    return ""


def _read_chat(body: dict[str, Any]) -> _Transcript:
    out = _Transcript()
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        if msg.get("role") == "user":
            out.user_texts.append(_text(msg.get("content")))
            out.results_after_last_user.clear()
        elif msg.get("role") == "tool":
            out.results_after_last_user.append(_text(msg.get("content")))
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        nested = tool.get("function")
        fn: dict[str, Any] = nested if isinstance(nested, dict) else tool
        if tool.get("type", "function") == "function" and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out.tools.append(
                _Offered(fn["name"], "function", params if isinstance(params, dict) else {})
            )
    return out


def _read_responses(body: dict[str, Any]) -> _Transcript:
    out = _Transcript()
    raw = body.get("input")
    items = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else raw
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            out.user_texts.append(_text(item.get("content")))
            out.results_after_last_user.clear()
        elif kind in _TOOLS_IN_INPUT:
            out.tools += [
                o for t in item.get("tools") or [] if isinstance(t, dict) for o in _offered(t)
            ]
        elif isinstance(kind, str) and kind.endswith("_output"):
            out.results_after_last_user.append(_text(item.get("output")))
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            out.tools += _offered(tool)
    return out


def _offered(tool: dict[str, Any], namespace: str | None = None) -> list[_Offered]:
    kind, name = tool.get("type"), tool.get("name")
    if kind == "namespace" and isinstance(name, str):
        inner = [t for t in tool.get("tools") or [] if isinstance(t, dict)]
        return [o for t in inner for o in _offered(t, name)]
    if kind in ("function", "custom") and isinstance(name, str):
        params = tool.get("parameters")
        return [_Offered(name, kind, params if isinstance(params, dict) else {}, namespace)]
    if kind in _BUILT_INS:
        return [_Offered(kind, kind)]
    if isinstance(kind, str) and kind.startswith("web_search"):
        return [_Offered("web_search", "web_search")]
    return []
