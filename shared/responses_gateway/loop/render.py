"""The single render step: a loop state becomes a Response object.

Owns the shape of the ``Response`` object for every moment and every ending: the snapshot in
``response.created`` (status ``in_progress`` or ``queued``, no output yet), and the final object of
a ``completed``, ``incomplete`` (``incomplete_details.reason``), ``failed`` (``error``) or
``cancelled`` response. Streaming and non-streaming requests render through this one function, so
the streamed ``response.completed`` equals the non-streamed body. The stored object keeps every
result field of the items (later turns replay them); the client's views show what ``include``
asks.
"""

from __future__ import annotations

from typing import Any

from responses_gateway.loop.state import LoopState
from responses_gateway.tool_kinds import shown

__all__ = ["normalize_usage", "render_response"]


def normalize_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Usage with every field the SDK reads present."""
    if usage is None:
        return None
    input_tokens = int(usage.get("input_tokens") or 0)
    output_tokens = int(usage.get("output_tokens") or 0)
    in_details = usage.get("input_tokens_details") or {}
    out_details = usage.get("output_tokens_details") or {}
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cached_tokens": int(in_details.get("cached_tokens") or 0),
            "cache_write_tokens": int(in_details.get("cache_write_tokens") or 0),
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {
            "reasoning_tokens": int(out_details.get("reasoning_tokens") or 0)
        },
        "total_tokens": int(usage.get("total_tokens") or input_tokens + output_tokens),
    }


def render_response(
    state: LoopState, *, include_output: bool = True, stored: bool = False
) -> dict[str, Any]:
    """The Response object for ``state`` as it is now: as the client sees it (result fields its
    ``include`` does not ask for emptied, see :func:`~responses_gateway.tool_kinds.shown`), or,
    ``stored``, whole (what later turns replay)."""
    response: dict[str, Any] = {
        "id": state.response_id,
        "object": "response",
        "created_at": state.created_at,
        "status": state.status,
        "error": state.error,
        "incomplete_details": (
            {"reason": state.incomplete_reason} if state.status == "incomplete" else None
        ),
    }
    response.update(state.request)
    response["model"] = state.model
    output = state.output if stored else [shown(item, state.include) for item in state.output]
    response["output"] = [dict(item) for item in output] if include_output else []
    response["usage"] = normalize_usage(state.usage) if state.status != "in_progress" else None
    if state.completed_at is not None:
        response["completed_at"] = state.completed_at
    return response
