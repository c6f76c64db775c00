"""The single render step: a loop state becomes a Response object.

Owns the shape of the ``Response`` object for every moment and every ending: the snapshot in
``response.created`` (status ``in_progress`` or ``queued``, no output yet), and the final object of
a ``completed``, ``incomplete`` (``incomplete_details.reason``), ``failed`` (``error``) or
``cancelled`` response. Every key both specs require is present in each of them (``completed_at``
null until the response completed; ``usage`` an object, the counts so far: OpenAI's spec has no null
for it and Open Responses requires the key), and the request's settings are echoed through
:func:`echoed`: OpenAI's effective value (:data:`SAMPLING_DEFAULTS`) for each sampling setting the
client left unset, which the driver does not forward. Streaming and non-streaming requests render
through this one function, so the streamed ``response.completed`` equals the non-streamed body. The
stored object keeps every result field of the items (later turns replay them); the client's views
show what ``include`` asks.
"""

from __future__ import annotations

from typing import Any

from responses_gateway.loop.state import LoopState
from responses_gateway.tool_kinds import shown

__all__ = ["SAMPLING_DEFAULTS", "echoed", "normalize_usage", "render_response", "upgraded"]

SAMPLING_DEFAULTS: dict[str, float | int] = {
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "temperature": 1.0,
    "top_logprobs": 0,
    "top_p": 1.0,
}
"""What OpenAI echoes for a sampling setting the client left unset (its effective value), and
what both specs require in place of null."""


def echoed(fields: dict[str, Any]) -> dict[str, Any]:
    """The request's settings (``state.request``, as the client set them: what the driver
    forwards) as a Response object shows them: each unset sampling setting as its
    :data:`SAMPLING_DEFAULTS` value, ``user`` left out when unset (OpenAI's spec types it as a
    string), a null ``text.format`` as ``{"type": "text"}`` (the effective format), a
    ``json_schema`` text format's unset or null ``strict`` as false and ``description`` as ``""``.
    A new dict; ``fields`` is not changed."""
    shown = dict(fields)
    for key, default in SAMPLING_DEFAULTS.items():
        if shown.get(key) is None:
            shown[key] = default
    if shown.get("user") is None:
        shown.pop("user", None)
    text = shown.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(text, dict) and "format" in text and fmt is None:
        shown["text"] = {**text, "format": {"type": "text"}}  # both specs require an object
    if isinstance(text, dict) and isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        # both specs' keys: OpenAI's effective strict (false); no description as "" (Open
        # Responses requires the key, OpenAI types it as a string)
        shown["text"] = {
            **text,
            "format": {
                **fmt,
                "description": "" if fmt.get("description") is None else fmt["description"],
                "strict": bool(fmt.get("strict")),
            },
        }
    return shown


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
    response.update(echoed(state.request))
    response["model"] = state.model
    output = state.output if stored else [shown(item, state.include) for item in state.output]
    response["output"] = [dict(item) for item in output] if include_output else []
    response["usage"] = normalize_usage(state.usage or {})  # so far: zeros before any call
    response["completed_at"] = state.completed_at
    return response


def upgraded(response: dict[str, Any]) -> dict[str, Any]:
    """A stored Response object as this version renders one: what an older gateway stored
    without (``completed_at``, the sampling settings as effective values, ``usage`` as an
    object, no null ``user``) filled in; the record itself is not changed."""
    if response.get("object") != "response":
        return response
    shown = echoed(response)
    shown.setdefault("completed_at", None)
    shown["usage"] = normalize_usage(shown.get("usage") or {})
    return shown
