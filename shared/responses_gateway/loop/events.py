"""Semantic loop events and the sink seam.

Owns the facts the loop reports while it runs (an item started, text arrived, a part finished, the
response finished) and the :class:`Sink` protocol that receives them. Events carry no wire names:
a sink translates them (``responses_gateway.sinks.sse`` into Responses SSE events;
:class:`NullSink` into nothing, for non-streaming requests). Sinks never make control decisions.

Every item event names its ``output_index``; item and part payloads are snapshots (copies) taken
when the event was emitted, so a sink may keep them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

__all__ = [
    "ArgumentsDelta",
    "ArgumentsFinished",
    "ItemEvent",
    "ItemFinished",
    "ItemStarted",
    "LoopEvent",
    "NullSink",
    "PartFinished",
    "PartStarted",
    "ResponseFinished",
    "ResponseStarted",
    "Sink",
    "TextDelta",
    "UpstreamResponding",
]

PartType = Literal["output_text", "refusal", "reasoning_text", "summary_text"]


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    """The response exists (status ``queued`` or ``in_progress``); ``response`` is its snapshot."""

    response: dict[str, Any]
    type: Literal["response_started"] = "response_started"


@dataclass(frozen=True, slots=True)
class UpstreamResponding:
    """The upstream accepted a model call (2xx headers arrived). No wire event."""

    type: Literal["upstream_responding"] = "upstream_responding"


@dataclass(frozen=True, slots=True)
class ItemStarted:
    """An output item opened at ``output_index`` (``item`` as it is when it opens)."""

    output_index: int
    item: dict[str, Any]
    type: Literal["item_started"] = "item_started"


@dataclass(frozen=True, slots=True)
class PartStarted:
    """A content part (message content, reasoning content or summary) opened in an item.

    ``part["type"]`` says which: ``output_text``/``refusal`` (message content),
    ``reasoning_text`` (reasoning content) or ``summary_text`` (a reasoning summary, whose index
    is ``content_index``).
    """

    output_index: int
    item_id: str
    content_index: int
    part: dict[str, Any]
    type: Literal["part_started"] = "part_started"


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text appended to an open part of type ``part_type``."""

    output_index: int
    item_id: str
    content_index: int
    part_type: PartType
    delta: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class PartFinished:
    """A content part closed; ``part`` holds its full text."""

    output_index: int
    item_id: str
    content_index: int
    part: dict[str, Any]
    type: Literal["part_finished"] = "part_finished"


@dataclass(frozen=True, slots=True)
class ArgumentsDelta:
    """Arguments text appended to an open tool call item (``function_call`` or ``mcp_call``)."""

    output_index: int
    item_id: str
    delta: str
    type: Literal["arguments_delta"] = "arguments_delta"


@dataclass(frozen=True, slots=True)
class ArgumentsFinished:
    """A tool call's arguments are complete (``item`` is the call item at that moment)."""

    output_index: int
    item: dict[str, Any]
    type: Literal["arguments_finished"] = "arguments_finished"


@dataclass(frozen=True, slots=True)
class ItemEvent:
    """An item-specific event named by the tool-kind table or relayed from a Responses upstream
    (``response.custom_tool_call_input.delta``, ``response.web_search_call.searching``...):
    ``name`` is its wire type and ``data`` its other fields, ``output_index`` already ours."""

    name: str
    data: dict[str, Any]
    type: Literal["item_event"] = "item_event"


@dataclass(frozen=True, slots=True)
class ItemFinished:
    """An output item closed; ``item`` is its final form (status ``completed``/``incomplete``)."""

    output_index: int
    item: dict[str, Any]
    type: Literal["item_finished"] = "item_finished"


@dataclass(frozen=True, slots=True)
class ResponseFinished:
    """The response ended; ``response`` is the final rendered object (its status says how)."""

    response: dict[str, Any]
    type: Literal["response_finished"] = "response_finished"


LoopEvent = (
    ResponseStarted
    | UpstreamResponding
    | ItemStarted
    | PartStarted
    | TextDelta
    | PartFinished
    | ArgumentsDelta
    | ArgumentsFinished
    | ItemEvent
    | ItemFinished
    | ResponseFinished
)


class Sink(Protocol):
    """Receives loop events. ``emit`` must not block and must not raise on a gone client."""

    def emit(self, event: LoopEvent) -> None: ...


class NullSink:
    """The sink of non-streaming requests: it drops every event."""

    def emit(self, event: LoopEvent) -> None:
        return None
