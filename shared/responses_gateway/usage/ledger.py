"""What an ended response adds to the usage ledger.

Owns :func:`usage_entry`: the :class:`~responses_gateway.store.base.UsageEntry` of a response
from its final loop state (summed usage of every model call, model and gateway tool calls, the
estimated cost). The entry doubles as the response's request-log record: the one write per ended
response that the ledger makes (``LedgerStore.record_usage``), idempotent per response id. It
decides nothing about when to write (the service's persister does, at every ending).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from responses_gateway.usage.budget import state_counts
from responses_gateway.usage.clientids import CLIENT_ID_HEADERS, client_ids
from responses_gateway.usage.pricing import PriceTable
from responses_gateway.usage.records import UsageCounts, UsageEntry

if TYPE_CHECKING:
    from responses_gateway.loop.state import LoopState

__all__ = [
    "CLIENT_ID_HEADERS",
    "CLIENT_TOOL_CALLS",
    "ERROR_MESSAGE_CHARS",
    "REFUSED",
    "client_ids",
    "refused_entry",
    "usage_entry",
]

REFUSED = "refused"
"""The request-log status of a create refused before its loop ran (no response exists)."""
_TIMES = ("started_ms", "first_token_ms")
"""Instants the service notes in a run's log; the entry keeps durations instead."""
ERROR_MESSAGE_CHARS = 500
"""Longest ``error.message`` a failed response's entry keeps."""

CLIENT_TOOL_CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "tool_search_call",
    }
)
"""Output item types that are tool calls the client runs (counted as ``client_tool_calls``)."""


def usage_entry(
    state: LoopState,
    *,
    tenant: str,
    api_key_id: str,
    prices: PriceTable,
    ended_at: int,
    background: bool = False,
    log: dict[str, Any] | None = None,
    ended_ms: int | None = None,
    http_status: int | None = None,
) -> UsageEntry:
    """The ledger entry of the response ``state`` ended as (any status).

    ``log`` is the request-log part the service gathered when the request arrived (provider,
    wire, whether it is stored, the client's ids, ``started_ms``) and while it ran
    (``first_token_ms``, the deployments that answered, the attempts that failed); with
    ``ended_ms`` it adds ``duration_ms``, and ``ttft_ms`` (time to the first output) when the
    loop produced any. A failed response keeps its error's code and message (the message as
    ``Response.error`` has it, cut to :data:`ERROR_MESSAGE_CHARS`) and ``http_status``, the
    status its client got. Never bodies, headers or keys.
    """
    extra: dict[str, Any] = {}
    for name, value in (log or {}).items():
        if name == "deployment" and isinstance(value, list):
            value = ",".join(value)  # the loop's own list: each model call's deployment, in order
        if name not in _TIMES and value not in (None, "", {}, []):
            extra[name] = value
    started = (log or {}).get("started_ms")
    first = (log or {}).get("first_token_ms")
    if isinstance(started, int) and isinstance(first, int):
        extra["ttft_ms"] = max(0, first - started)
    if ended_ms is not None:
        extra["ended_ms"] = ended_ms
        if isinstance(started, int):
            extra["duration_ms"] = max(0, ended_ms - started)
    extra["client_tool_calls"] = sum(
        1 for item in state.output if item.get("type") in CLIENT_TOOL_CALLS
    )
    if state.incomplete_reason:
        extra["incomplete_reason"] = state.incomplete_reason
    if state.error and isinstance(state.error.get("code"), str):
        extra["error_code"] = state.error["code"]
    if state.error and isinstance(state.error.get("message"), str):
        extra["error_message"] = state.error["message"][:ERROR_MESSAGE_CHARS]
    if http_status is not None:
        extra["http_status"] = http_status
    return UsageEntry(
        tenant=tenant,
        response_id=state.response_id,
        model=state.model,
        ended_at=ended_at,
        status=state.status,
        counts=state_counts(state, prices),
        api_key_id=api_key_id,
        background=background,
        extra=extra,
    )


def refused_entry(
    *,
    tenant: str,
    request_id: str,
    api_key_id: str,
    model: str,
    status_code: int,
    error: dict[str, Any],
    started_ms: int,
    ended_ms: int,
    log: dict[str, Any] | None = None,
) -> UsageEntry:
    """The request-log entry of a create refused before its loop ran (authentication, a 400,
    a budget): ``status`` :data:`REFUSED`, zero counts, the HTTP status and the error as its
    client got it: type, code, ``param`` and message (cut to :data:`ERROR_MESSAGE_CHARS`; the
    gateway's own text, which names parameters and never echoes keys); ``log`` adds the
    client's ids."""
    extra: dict[str, Any] = {
        name: value for name, value in (log or {}).items() if value not in (None, "", {})
    }
    extra.update(
        {
            "http_status": status_code,
            "error_type": str(error.get("type") or ""),
            "ended_ms": ended_ms,
            "duration_ms": max(0, ended_ms - started_ms),
        }
    )
    if isinstance(error.get("code"), str):
        extra["error_code"] = error["code"]
    if isinstance(error.get("param"), str):
        extra["error_param"] = error["param"]
    if isinstance(error.get("message"), str) and error["message"]:
        extra["error_message"] = error["message"][:ERROR_MESSAGE_CHARS]
    return UsageEntry(
        tenant=tenant,
        response_id=request_id,
        model=model,
        ended_at=ended_ms // 1000,
        status=REFUSED,
        counts=UsageCounts(),
        api_key_id=api_key_id,
        extra=extra,
    )
