"""Compaction: a transcript replaced by a summary the model wrote, sealed in a ``compaction``
item.

Owns the pure pieces of the :class:`~responses_gateway.loop.state.Compact` action and of
compaction items in later input: the summary request (:func:`summary_call`), the item the client
gets (:func:`compaction_item`, its ``encrypted_content`` sealed with purpose ``compaction`` for
the tenant), what the model sees instead of it (:func:`summary_message`), the transcript a loop
continues from after compacting (:func:`compacted_transcript`), and the expansion of compaction
items found in input or stored history (:func:`expand_compactions`, :func:`from_last_compaction`).

Must not: call the model (the driver's ``Compact`` arm does, through the adapter) or store.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from responses_gateway.adapters.base import ModelCall
from responses_gateway.ids import new_id
from responses_gateway.sealing import SealedBlobError, seal, unseal

__all__ = [
    "PURPOSE",
    "SUMMARY_INSTRUCTIONS",
    "SUMMARY_PREFIX",
    "compacted_transcript",
    "compaction_item",
    "expand_compactions",
    "from_last_compaction",
    "summary_call",
    "summary_message",
    "summary_of",
    "user_messages",
]

PURPOSE = "compaction"
"""The sealing purpose of a compaction item's ``encrypted_content``."""

SUMMARY_INSTRUCTIONS = (
    "You are compacting a conversation so that it can continue in a smaller context. Write a "
    "summary of the conversation so far that lets you continue it without the original: the "
    "user's goals and requests, decisions made, facts and results learned (including tool "
    "results that still matter), files, names and values referred to, and what remains to be "
    "done. Be complete but concise. Write only the summary."
)
"""The instructions of the summary request (no tools are offered)."""

SUMMARY_PREFIX = "Summary of the conversation so far (earlier messages were compacted):\n\n"
"""How a summary is introduced to the model in place of the items it replaced."""


def summary_call(call: ModelCall) -> ModelCall:
    """The model call that asks for a summary of ``call``'s transcript."""
    params = {k: v for k, v in call.params.items() if k in ("temperature", "top_p", "user")}
    return replace(
        call,
        instructions=SUMMARY_INSTRUCTIONS
        + (
            f"\n\nThe conversation's own instructions were:\n{call.instructions}"
            if call.instructions
            else ""
        ),
        tools=[],
        tool_choice=None,
        params=params,
    )


def summary_of(output: list[dict[str, Any]]) -> str:
    """The text of the assistant messages in ``output`` (the summary request's answer)."""
    texts = [
        str(part.get("text") or "")
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
        if part.get("type") == "output_text"
    ]
    return "\n".join(t for t in texts if t).strip()


def compaction_item(summary: str, *, tenant: str, item_id: str | None = None) -> dict[str, Any]:
    """A ``compaction`` item carrying ``summary`` sealed for ``tenant``."""
    return {
        "id": item_id or new_id("cmp"),
        "type": "compaction",
        "encrypted_content": seal(PURPOSE, {"summary": summary}, tenant=tenant),
    }


def summary_message(summary: str) -> dict[str, Any]:
    """What the model sees in place of a compaction item."""
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": SUMMARY_PREFIX + summary}],
    }


def _is_user_message(item: dict[str, Any]) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == "user"


def user_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user messages of ``items`` (not the summaries standing for compaction items)."""
    return [
        item
        for item in items
        if _is_user_message(item) and not _text(item).startswith(SUMMARY_PREFIX)
    ]


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text") or "") for p in parts if isinstance(p, dict))


def compacted_transcript(transcript: list[dict[str, Any]], summary: str) -> list[dict[str, Any]]:
    """The transcript a loop continues from after compacting ``transcript``: the summary, then
    the system and developer messages, then the trailing user input still to be answered."""
    tail: list[dict[str, Any]] = []
    for item in reversed(transcript):
        if not _is_user_message(item):
            break
        tail.insert(0, item)
    kept = [
        item
        for item in transcript
        if item.get("type", "message") == "message" and item.get("role") in ("system", "developer")
    ]
    return [*kept, summary_message(summary), *tail]


def from_last_compaction(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored history from its last compaction item on (what came before is summarized)."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].get("type") == "compaction":
            return history[index:]
    return history


def expand_compactions(
    items: list[dict[str, Any]], *, tenant: str, wire: str
) -> list[dict[str, Any]]:
    """``items`` with each compaction item the gateway sealed replaced by its summary message.

    A compaction item the gateway did not seal is the upstream's own over the Responses wire
    (passed on unchanged); over any other wire it is a 400 ``invalid_encrypted_content``.
    """
    out: list[dict[str, Any]] = []
    for item in items:
        if item.get("type") != "compaction":
            out.append(item)
            continue
        try:
            payload = unseal(PURPOSE, str(item.get("encrypted_content") or ""), tenant=tenant)
        except SealedBlobError as error:
            if wire == "responses":
                out.append(item)
                continue
            error.param = "input"
            raise
        out.append(summary_message(str(payload.get("summary") or "")))
    return out
