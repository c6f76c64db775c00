"""``truncation: "auto"``: which oldest transcript items to drop so a model call fits.

Owns :func:`plan_truncation`, a pure function over items and counts. Rules: items are dropped
oldest first; a cut never separates a tool call from its output (the call's item and its
``*_output`` item go together, with the reasoning right before the call); system and developer
messages are never dropped (they stay where they are); the last item (what the model must answer)
is never dropped. Each item's share of the measured total is estimated from its serialized size,
so the plan may fall short; the loop measures again and plans again.

Must not: count tokens itself or touch the loop state.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["is_kept", "plan_truncation"]

_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "mcp_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})


def is_kept(item: dict[str, Any]) -> bool:
    """Whether truncation keeps ``item`` wherever it is (system and developer messages)."""
    return item.get("type", "message") == "message" and item.get("role") in ("system", "developer")


def _size(item: dict[str, Any]) -> int:
    return len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode("utf-8")) + 16


def _safe_cuts(items: list[dict[str, Any]]) -> list[bool]:
    """``safe[n]``: cutting before ``items[n]`` leaves no call without its output or vice versa."""
    open_calls: set[str] = set()
    safe = [True] * (len(items) + 1)
    for index, item in enumerate(items):
        kind = item.get("type")
        call_id = str(item.get("call_id") or item.get("id") or "")
        if kind in _CALLS:
            open_calls.add(call_id)
        elif kind in _OUTPUTS:
            open_calls.discard(call_id)
        nxt = items[index + 1] if index + 1 < len(items) else None
        after_reasoning = kind == "reasoning" and nxt is not None and nxt.get("type") in _CALLS
        safe[index + 1] = not open_calls and not after_reasoning
    return safe


def plan_truncation(items: list[dict[str, Any]], measured: int, excess: int) -> int:
    """How many of the oldest ``items`` to drop to shed about ``excess`` of ``measured`` tokens.

    Returns 0 when nothing may be dropped (the call cannot be made to fit); a plan always drops
    at least one item that is not kept, so planning again after it makes progress.
    """
    if excess <= 0 or len(items) < 2:
        return 0
    sizes = [_size(item) for item in items]
    per_byte = measured / max(1, sum(sizes))
    safe = _safe_cuts(items)
    shed = 0.0
    best = 0
    for count in range(1, len(items)):  # the last item always stays
        item = items[count - 1]
        if not is_kept(item):
            shed += sizes[count - 1] * per_byte
        if safe[count] and shed > 0:
            best = count
            if shed >= excess:
                return best
    return best
