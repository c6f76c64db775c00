"""What an ended response adds to the usage ledger.

Owns :func:`usage_entry`: the :class:`~responses_gateway.store.base.UsageEntry` of a response
from its final loop state (summed usage of every model call, model and gateway tool calls, the
estimated cost). The entry doubles as the response's request-log record: the one write per ended
response that the ledger makes (``LedgerStore.record_usage``), idempotent per response id. It
decides nothing about when to write (the service's persister does, at every ending).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from responses_gateway.usage.budget import state_counts
from responses_gateway.usage.pricing import PriceTable
from responses_gateway.usage.records import UsageEntry

if TYPE_CHECKING:
    from responses_gateway.loop.state import LoopState

__all__ = ["usage_entry"]


def usage_entry(
    state: LoopState,
    *,
    tenant: str,
    api_key_id: str,
    prices: PriceTable,
    ended_at: int,
    background: bool = False,
) -> UsageEntry:
    """The ledger entry of the response ``state`` ended as (any status)."""
    extra: dict[str, str] = {}
    if state.incomplete_reason:
        extra["incomplete_reason"] = state.incomplete_reason
    if state.error and isinstance(state.error.get("code"), str):
        extra["error_code"] = state.error["code"]
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
