"""Loop state and the actions the driver dispatches on.

Owns :class:`LoopState`, the whole serializable state of one response's agent loop, and the four
actions of :data:`NextAction` (model calls, context compaction and truncation, tools,
approvals, the end). The state round-trips through JSON (:meth:`LoopState.to_json` /
:meth:`LoopState.from_json`) and carries a schema version, so a later step can checkpoint it to
DynamoDB and resume it in another process. It holds no secrets and no live objects (clients,
sinks, deadlines): those travel in :class:`responses_gateway.loop.driver.LoopContext`.

This module decides nothing; ``driver.decide_after_*`` do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "GATEWAY_RUNNERS",
    "SCHEMA_VERSION",
    "CallLlm",
    "CallOwner",
    "Compact",
    "ExecuteTools",
    "Finish",
    "InterruptForApproval",
    "LoopState",
    "NextAction",
    "Outcome",
    "StopReason",
    "Truncate",
    "TurnResult",
]

SCHEMA_VERSION = 3
"""Version of the serialized :class:`LoopState`. Bump it when the JSON shape changes, and teach
:meth:`LoopState.from_json` to upgrade the older shapes (frozen fixtures in ``tests/fixtures``).

- 1: initial shape.
- 2: adds ``include`` (the client's ``include`` list, passed to the upstream).
- 3: adds ``owners`` (who runs each call item), ``turns`` (where each model call's output
  began), ``started_at`` (when the loop began) and ``passthrough`` (lost by a checkpoint
  before).
"""

CallOwner = Literal["client", "upstream", "mcp", "backend", "search"]
"""Who runs a call item, decided when the item is made (never from its ``status``):

- ``client``: the client runs it and answers in its next request (``function_call``,
  ``shell_call``...);
- ``upstream``: the upstream ran it, or runs it (everything a Responses upstream relays, hosted
  calls included): the gateway never executes it;
- ``mcp``: the gateway, through an MCP server (an ``mcp_call`` it announced);
- ``backend``: the gateway, through the operator's backend of a hosted kind (a lowered
  ``web_search_call``...);
- ``search``: the gateway, answering a server ``tool_search_call`` from the request's tools.
"""

GATEWAY_RUNNERS: frozenset[str] = frozenset({"mcp", "backend", "search"})
"""The owners that mean "the gateway runs it" (``ExecuteTools``)."""

Outcome = Literal["completed", "incomplete", "failed", "cancelled"]
StopReason = Literal["stop", "length", "content_filter"]


@dataclass(frozen=True, slots=True)
class CallLlm:
    """Call the upstream model with the current transcript."""

    kind: Literal["call_llm"] = "call_llm"


@dataclass(frozen=True, slots=True)
class Compact:
    """Ask the model for a summary of the transcript, emit it as a sealed ``compaction`` output
    item, and continue from the summary instead of the transcript."""

    trigger: Literal["threshold", "client"] = "threshold"
    """``threshold``: ``context_management`` found the context too long (the model is called
    next); ``client``: the input ended with ``compaction_trigger`` (the response ends)."""
    kind: Literal["compact"] = "compact"


@dataclass(frozen=True, slots=True)
class Truncate:
    """Drop the oldest ``count`` transcript items (``truncation: auto``) before the model call;
    system and developer messages among them stay."""

    count: int
    kind: Literal["truncate"] = "truncate"


@dataclass(frozen=True, slots=True)
class ExecuteTools:
    """Execute gateway-owned tool calls: announced ``mcp_call`` items (their output indexes),
    and calls the client approved (the ids of their ``mcp_approval_request`` items)."""

    output_indexes: tuple[int, ...] = ()
    approved: tuple[str, ...] = ()
    kind: Literal["execute_tools"] = "execute_tools"


@dataclass(frozen=True, slots=True)
class InterruptForApproval:
    """End the response asking the client to approve these calls (output indexes)."""

    output_indexes: tuple[int, ...]
    kind: Literal["interrupt_for_approval"] = "interrupt_for_approval"


@dataclass(frozen=True, slots=True)
class Finish:
    """Render the response with this outcome and stop."""

    outcome: Outcome = "completed"
    reason: str | None = None
    """``incomplete_details.reason`` when the outcome is ``incomplete``."""
    error: dict[str, Any] | None = None
    """``{"code","message"}`` when the outcome is ``failed``."""
    kind: Literal["finish"] = "finish"


NextAction = CallLlm | Compact | Truncate | ExecuteTools | InterruptForApproval | Finish

_ACTIONS: dict[str, type[NextAction]] = {
    "call_llm": CallLlm,
    "compact": Compact,
    "truncate": Truncate,
    "execute_tools": ExecuteTools,
    "interrupt_for_approval": InterruptForApproval,
    "finish": Finish,
}


def _action_to_json(action: NextAction) -> dict[str, Any]:
    if isinstance(action, ExecuteTools) and action.approved:
        return {
            "kind": action.kind,
            "output_indexes": list(action.output_indexes),
            "approved": list(action.approved),
        }
    if isinstance(action, ExecuteTools | InterruptForApproval):
        return {"kind": action.kind, "output_indexes": list(action.output_indexes)}
    if isinstance(action, Compact):
        return {"kind": action.kind, "trigger": action.trigger}
    if isinstance(action, Truncate):
        return {"kind": action.kind, "count": action.count}
    if isinstance(action, Finish):
        return {
            "kind": action.kind,
            "outcome": action.outcome,
            "reason": action.reason,
            "error": action.error,
        }
    return {"kind": action.kind}


def _action_from_json(data: dict[str, Any]) -> NextAction:
    kind = data["kind"]
    if kind == "execute_tools":
        return ExecuteTools(
            output_indexes=tuple(data["output_indexes"]),
            approved=tuple(data.get("approved", ())),
        )
    if kind == "interrupt_for_approval":
        return InterruptForApproval(output_indexes=tuple(data["output_indexes"]))
    if kind == "finish":
        return Finish(outcome=data["outcome"], reason=data.get("reason"), error=data.get("error"))
    if kind == "compact":
        return Compact(trigger=data.get("trigger", "threshold"))
    if kind == "truncate":
        return Truncate(count=int(data["count"]))
    if kind in _ACTIONS:
        return CallLlm()
    raise ValueError(f"unknown loop action {kind!r}")


@dataclass(slots=True)
class TurnResult:
    """What one model call produced, as the adapter reports it."""

    stop: StopReason = "stop"
    """Why the model stopped: ``length`` means it hit ``max_output_tokens``."""
    usage: dict[str, Any] | None = None
    """Responses-shaped usage of this call, if the upstream reported it."""


@dataclass(slots=True)
class LoopState:
    """Everything one response's loop needs to continue, as plain JSON-able data."""

    response_id: str
    created_at: int
    model: str
    request: dict[str, Any]
    """The validated request, as echoed in the Response object (no secrets, no ``input``)."""
    upstream_input: list[dict[str, Any]]
    """The transcript sent to the model before this response's output: history, then input."""
    control_items: list[dict[str, Any]] = field(default_factory=list)
    """Input items that steer the gateway and never reach the model (approvals, listings)."""
    include: list[str] = field(default_factory=list)
    """The client's ``include`` values (extra output data it asked the upstream for)."""
    passthrough: dict[str, Any] = field(default_factory=dict)
    """Create fields a Responses upstream gets as sent and no Response echoes (``moderation``,
    ``prompt_cache_options``...; see ``protocol.contract.RESPONSES_ONLY_FIELDS``)."""
    output: list[dict[str, Any]] = field(default_factory=list)
    """This response's output items, in output-index order."""
    next_action: NextAction = field(default_factory=CallLlm)
    status: str = "in_progress"
    incomplete_reason: str | None = None
    error: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    llm_calls: int = 0
    tool_calls_executed: int = 0
    turn_start: int = 0
    """Index in ``output`` of the first item the latest model call produced."""
    last_stop: StopReason = "stop"
    started: bool = False
    """Whether ``response.created`` was emitted."""
    completed_at: int | None = None
    owners: dict[int, CallOwner] = field(default_factory=dict)
    """Who runs each call item of ``output``, by output index (see :data:`CallOwner`); items
    that are not calls have none."""
    turns: list[int] = field(default_factory=list)
    """The output index where each model call's output began, in order (``turn_start`` is the
    latest turn's, or the start of the calls approved at the start of the response)."""
    started_at: float | None = None
    """When the loop's first action began (Unix time; None: not yet): its wall time counts
    from here, across hand-overs and workers."""
    schema_version: int = SCHEMA_VERSION

    def take_next_action(self) -> NextAction:
        """Return the pending action and leave ``Finish`` in its place (a safe default)."""
        action = self.next_action
        self.next_action = Finish()
        return action

    def set_next_action(self, action: NextAction) -> None:
        self.next_action = action

    def owner(self, index: int) -> CallOwner | None:
        """Who runs the output item at ``index`` (None: not a call)."""
        return self.owners.get(index)

    def gateway_calls(self, start: int = 0) -> list[int]:
        """Output indexes from ``start`` on of the calls the gateway runs, in order."""
        return [i for i in range(start, len(self.output)) if self.owners.get(i) in GATEWAY_RUNNERS]

    def add_usage(self, usage: dict[str, Any] | None) -> None:
        """Accumulate one model call's usage into the response's usage."""
        if usage is None:
            return
        if self.usage is None:
            self.usage = json.loads(json.dumps(usage))
            return
        total = self.usage
        for key in ("input_tokens", "output_tokens", "total_tokens"):
            total[key] = int(total.get(key) or 0) + int(usage.get(key) or 0)
        for details, keys in (
            ("input_tokens_details", ("cached_tokens", "cache_write_tokens")),
            ("output_tokens_details", ("reasoning_tokens",)),
        ):
            mine = total.setdefault(details, {})
            theirs = usage.get(details) or {}
            for key in keys:
                if key in mine or key in theirs:
                    mine[key] = int(mine.get(key) or 0) + int(theirs.get(key) or 0)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict of the whole state."""
        return {
            "schema_version": self.schema_version,
            "response_id": self.response_id,
            "created_at": self.created_at,
            "model": self.model,
            "request": self.request,
            "upstream_input": self.upstream_input,
            "control_items": self.control_items,
            "include": self.include,
            "passthrough": self.passthrough,
            "output": self.output,
            "next_action": _action_to_json(self.next_action),
            "status": self.status,
            "incomplete_reason": self.incomplete_reason,
            "error": self.error,
            "usage": self.usage,
            "llm_calls": self.llm_calls,
            "tool_calls_executed": self.tool_calls_executed,
            "turn_start": self.turn_start,
            "last_stop": self.last_stop,
            "started": self.started,
            "completed_at": self.completed_at,
            "owners": {str(index): owner for index, owner in sorted(self.owners.items())},
            "turns": self.turns,
            "started_at": self.started_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LoopState:
        """Rebuild a state from :meth:`to_json` output; rejects unknown schema versions."""
        version = data.get("schema_version")
        fields = dict(data)
        if version == 1:
            fields["include"] = []
            fields["schema_version"] = version = 2
        if version == 2:
            fields.update(_owners_of_v2(fields))
            fields["schema_version"] = version = 3
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported loop state schema version {version!r}")
        fields["next_action"] = _action_from_json(data["next_action"])
        fields["owners"] = {int(index): owner for index, owner in fields["owners"].items()}
        return cls(**fields)


def _owners_of_v2(fields: dict[str, Any]) -> dict[str, Any]:
    """``owners`` and ``turns`` for a version 2 state, which had neither, from its items' types:
    an ``mcp_call`` was the gateway's, a client tool's call the client's, a hosted call the
    gateway's backend's when a pending ``execute_tools`` names it (else the upstream's); its turns
    are unknown but the latest."""
    output = fields.get("output") or []
    pending = fields.get("next_action") or {}
    owed = (
        set(pending.get("output_indexes") or [])
        if pending.get("kind") == "execute_tools"
        else set()
    )
    owners: dict[str, str] = {}
    for index, item in enumerate(output):
        kind = str(item.get("type"))
        if kind == "tool_search_call":
            owner = "search" if item.get("execution") == "server" else "client"
        elif kind in _V2_HOSTED:
            owner = "backend" if index in owed else "upstream"
        else:
            owner = _V2_OWNERS.get(kind, "")
        if owner:
            owners[str(index)] = owner
    start = int(fields.get("turn_start") or 0)
    return {"owners": owners, "turns": [start] if output else []}


_V2_OWNERS = {
    "mcp_call": "mcp",
    **dict.fromkeys(
        (
            "function_call",
            "custom_tool_call",
            "shell_call",
            "local_shell_call",
            "apply_patch_call",
            "computer_call",
        ),
        "client",
    ),
}
_V2_HOSTED = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call"}
)
