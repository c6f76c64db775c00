"""The bounds of one response's loop, and the pure decisions that keep it bounded.

Owns :class:`LoopLimits` (the operator's caps: model calls, gateway tool calls, wall time),
the ``incomplete_details.reason`` values the caps end a response with, and four pure functions
of the state that the driver asks:

* :func:`decide_within_limits`: whether the pending action may run (a model call past the cap,
  or any action past the wall time, becomes ``Finish("incomplete")``);
* :func:`tool_budget`: how many gateway tool calls the response may make in all
  (``max_tool_calls`` for every kind the gateway runs: MCP, hosted backends, tool search);
* :func:`no_progress`: whether the latest tool round repeated the one before it exactly (the
  same calls with the same results), so calling the model again would repeat it too;
* :func:`effective_tool_choice`: the client's ``tool_choice``, or ``auto`` once the forced
  gateway-run tool has run in this response (a forced choice is spent once honoured; sent
  again, a model calls the tool again, forever).

A model cannot be trusted to stop: every way the loop can go on passes through one of these.
This module does no I/O and keeps no state; the driver dispatches.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from responses_gateway.loop.state import (
    CallLlm,
    Compact,
    Finish,
    LoopState,
    NextAction,
)
from responses_gateway.tool_kinds import kind_of

__all__ = [
    "DEFAULT_LIMITS",
    "MAX_LOOP_SECONDS",
    "MAX_MODEL_CALLS",
    "NO_PROGRESS",
    "LIMIT_KEYS",
    "LoopLimits",
    "deadline",
    "decide_within_limits",
    "effective_tool_choice",
    "no_progress",
    "parse_loop_limits",
    "tool_budget",
]

MAX_MODEL_CALLS = "max_model_calls"
"""``incomplete_details.reason``: the response used its model calls (``max_model_calls``)."""
MAX_LOOP_SECONDS = "max_loop_seconds"
"""``incomplete_details.reason``: the response ran out of wall time (``max_loop_seconds``)."""
NO_PROGRESS = "no_progress"
"""``incomplete_details.reason``: a tool round repeated the previous one exactly."""


@dataclass(frozen=True, slots=True)
class LoopLimits:
    """The caps of one response's loop (operator settings per provider or route)."""

    max_model_calls: int = 64
    """Model calls per response, compaction summaries included."""
    max_tool_calls: int = 32
    """Gateway tool calls per response (the request's ``max_tool_calls`` can only lower it)."""
    max_loop_seconds: float = 3600.0
    """Wall time from the loop's first action (``LoopState.started_at``), foreground and
    background alike."""


DEFAULT_LIMITS = LoopLimits()

LIMIT_KEYS = ("max_model_calls", "max_tool_calls", "max_loop_seconds")
"""The configuration keys of a provider or route that set its :class:`LoopLimits`."""


def parse_loop_limits(raw: Mapping[str, Any], where: str, base: LoopLimits) -> LoopLimits:
    """``base`` with the limits a provider's or route's table sets (:data:`LIMIT_KEYS`).

    Raises:
        ValueError: a limit is not a positive number (counts: a positive integer).
    """
    changes: dict[str, Any] = {}
    for key in LIMIT_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        count = key != "max_loop_seconds"
        number = isinstance(value, int) if count else isinstance(value, int | float)
        if isinstance(value, bool) or not number or value <= 0:
            kind = "a positive integer" if count else "a positive number of seconds"
            raise ValueError(f"{where}: {key} must be {kind}")
        changes[key] = value if count else float(value)
    return dataclasses.replace(base, **changes) if changes else base


def decide_within_limits(
    state: LoopState, action: NextAction, limits: LoopLimits, now: float
) -> NextAction:
    """``action``, or the ending it must become: past the wall time nothing but the ending runs;
    a model call (or a compaction, which is one) past the model-call cap does not run."""
    if isinstance(action, Finish):
        return action
    if now >= deadline(state, limits, now):
        return Finish("incomplete", reason=MAX_LOOP_SECONDS)
    if isinstance(action, CallLlm | Compact) and state.llm_calls >= limits.max_model_calls:
        return Finish("incomplete", reason=MAX_MODEL_CALLS)
    return action


def deadline(state: LoopState, limits: LoopLimits, now: float) -> float:
    """When the loop's wall time ends (Unix time): ``max_loop_seconds`` after its first action
    (``now``, for a loop that has not begun)."""
    started = state.started_at if state.started_at is not None else now
    return started + limits.max_loop_seconds


def tool_budget(state: LoopState, limits: LoopLimits) -> int:
    """How many gateway tool calls this response may execute in all."""
    requested = state.request.get("max_tool_calls")
    cap = limits.max_tool_calls
    return min(int(requested), cap) if requested else cap


_VOLATILE = frozenset({"id", "call_id", "approval_request_id", "encrypted_content"})
"""Item fields that differ between two identical rounds (fresh ids, sealed content)."""


def _round(state: LoopState, start: int, end: int) -> str:
    items = [
        {k: v for k, v in item.items() if k not in _VOLATILE}
        for item in state.output[start:end]
        if item.get("type") != "mcp_list_tools"
    ]
    return json.dumps(items, sort_keys=True, default=str)


def no_progress(state: LoopState) -> bool:
    """Whether the latest model call and the gateway calls it made repeat the previous call's
    exactly (items, arguments and results; ids aside). A model that made no progress once will
    make none again: the next call would see the same transcript, grown by the same round."""
    turns = state.turns
    if len(turns) < 2 or not state.gateway_calls(turns[-1]):
        return False
    latest = _round(state, turns[-1], len(state.output))
    return latest == _round(state, turns[-2], turns[-1])


def _forces(choice: Any) -> bool:
    if choice == "required":
        return True
    if not isinstance(choice, Mapping):
        return False
    if choice.get("type") == "allowed_tools":
        return choice.get("mode") == "required"
    return choice.get("type") not in (None, "auto", "none")


def _honours(choice: Any, item: dict[str, Any]) -> bool:
    """Whether a gateway call ``item`` is what the forced ``choice`` asked for."""
    if not isinstance(choice, Mapping) or choice.get("type") == "allowed_tools":
        return True  # ``required``, or ``allowed_tools`` in ``required`` mode: any tool will do
    kind_name = str(choice.get("type"))
    if kind_name == "mcp":
        name = choice.get("name")
        return (
            item.get("type") == "mcp_call"
            and item.get("server_label") == choice.get("server_label")
            and (not name or item.get("name") == name)
        )
    kind = kind_of(kind_name)
    return kind is not None and kind.item_type == item.get("type")


def effective_tool_choice(state: LoopState) -> Any:
    """The ``tool_choice`` of the next model call: the client's, until a gateway call that
    honours a forcing choice (``required``, a named tool, ``allowed_tools`` in ``required``
    mode) has run in this response; then ``auto`` (``allowed_tools`` keeps its list)."""
    choice = state.request.get("tool_choice")
    if not _forces(choice):
        return choice
    ran = (state.output[i] for i in state.gateway_calls())  # all ran before the next call
    if not any(_honours(choice, item) for item in ran):
        return choice
    if isinstance(choice, Mapping) and choice.get("type") == "allowed_tools":
        return {**choice, "mode": "auto"}
    return "auto"
