"""What a stored record of a response still running in the background says right now.

Owns :func:`current_response`: a record written ``queued`` (or ``in_progress`` at a foreground
hand-over) is not rewritten at every loop action. Its current form is the claimed terminal (the
commit point of its ending, written just before the record itself) or else the latest checkpoint,
rendered. Only unfinished records cost these extra reads. It decides nothing and writes nothing.
"""

from __future__ import annotations

from typing import Any

from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import LoopState
from responses_gateway.store.base import BackgroundStore, StoredResponse

__all__ = ["UNFINISHED", "current_response"]

UNFINISHED = frozenset({"queued", "in_progress"})
"""Statuses of a response whose loop has not ended."""


async def current_response(store: BackgroundStore, record: StoredResponse) -> dict[str, Any]:
    """The Response object as it is now (the record itself once it is finished)."""
    if record.status not in UNFINISHED:
        return record.response
    terminal = await store.get_terminal(record.tenant, record.id)
    if terminal is not None:
        return terminal.response
    checkpoint = await store.get_checkpoint(record.tenant, record.id)
    if checkpoint is None:
        return record.response
    return render_response(LoopState.from_json(checkpoint.state))
