"""Starting, handing over, cancelling and failing background runs.

Owns the transitions of a background response that happen outside the worker:

- :func:`start_background`: a ``background: true`` create. The checkpoint (status ``queued``),
  the first two events (``response.created`` and ``response.queued``) and the ``queued`` record
  are written, then the launcher starts the worker.
- :func:`hand_over`: a foreground loop near its deadline continues in the worker. Its events so
  far are logged (a streaming client can then resume from any cursor), its state checkpointed and
  its record written ``in_progress``.
- :func:`end_run`: ends a run from its latest checkpoint, for a cancel or the watchdog. The
  terminal is *claimed* (the first ending wins; a worker finishing at the same moment may win),
  then the record is written.
- :func:`cancel_run`: the cancel endpoint's logic (flag the checkpoint so the worker stops at its
  next action boundary, end the run ``cancelled``, stop the execution).

It never runs loop actions (that is :mod:`.worker`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from responses_gateway.background.records import UNFINISHED
from responses_gateway.errors import InternalError, InvalidRequestError
from responses_gateway.loop.events import ItemFinished, ResponseFinished, ResponseStarted
from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import LoopState
from responses_gateway.sinks.sse import SSESink
from responses_gateway.store.base import Checkpoint, StoredResponse, Terminal

if TYPE_CHECKING:
    from responses_gateway.service import Gateway, PreparedRun

__all__ = [
    "WORKER_LOST",
    "cancel_handed_over",
    "cancel_run",
    "commit_ending",
    "end_if_lost",
    "end_run",
    "max_seconds",
    "hand_over",
    "settle",
    "start_background",
    "terminal_frame",
]

_log = logging.getLogger(__name__)

WORKER_LOST = {
    "code": "server_error",
    "message": "The background worker stopped before the response finished.",
}
"""The ``error`` of a response the watchdog ended."""

_ENDED = frozenset({"completed", "incomplete", "failed", "cancelled"})

MAX_SECONDS_ENV = "BACKGROUND_MAX_SECONDS"
_DEFAULT_MAX_SECONDS = 21_600.0
LOST_AFTER = 3_600.0
"""Seconds past ``BACKGROUND_MAX_SECONDS`` after which a reader ends a run nobody ended: by then
its worker's own limit, retries and the state machine's watchdog have all had their turn."""


def max_seconds() -> float:
    """The longest a background response may run (``BACKGROUND_MAX_SECONDS``, default 6 h)."""
    return float(os.environ.get(MAX_SECONDS_ENV) or _DEFAULT_MAX_SECONDS)


def terminal_frame(
    response: dict[str, Any], sequence_number: int, closed: Sequence[int] = ()
) -> str:
    """The ending frames of ``response`` from ``sequence_number``: ``output_item.done`` (and
    ``mcp_call.failed``...) for the items at output indexes ``closed`` (still open when the run
    was ended from outside), then the terminal event. They are claimed together, as one."""
    frames: list[bytes] = []
    sink = SSESink(frames.append, first_sequence_number=sequence_number)
    output = response.get("output") or []
    for index in closed:
        sink.emit(ItemFinished(index, dict(output[index])))
    sink.emit(ResponseFinished(response))
    return b"".join(frames).decode()


async def start_background(gateway: Gateway, run: PreparedRun) -> dict[str, Any]:
    """Queue a ``background: true`` create and start its worker; returns the queued object."""
    run.state.status = "queued"
    queued = render_response(run.state)
    frames: list[bytes] = []
    sink = SSESink(frames.append, include_obfuscation=run.include_obfuscation)
    sink.emit(ResponseStarted(queued))  # response.created + response.queued
    await _enter(gateway, run, [f.decode() for f in frames], queued)
    return queued


async def hand_over(gateway: Gateway, run: PreparedRun, logged: list[bytes]) -> dict[str, Any]:
    """Continue a foreground loop in the worker from its state now (between two actions).

    ``logged`` holds the frames already sent to a streaming client (empty for a buffered one):
    they become the start of the log. Returns the ``in_progress`` Response object.
    """
    current = render_response(run.state)
    await _enter(gateway, run, [f.decode() for f in logged], current)
    return current


async def _enter(
    gateway: Gateway, run: PreparedRun, frames: list[str], response: dict[str, Any]
) -> None:
    """Put a run in the worker's hands: its checkpoint (the next event numbered after
    ``frames``), ``frames`` as the start of its log (when it can be streamed again), and its
    record as ``response``; then start the worker."""
    state, store, tenant = run.state, gateway.store, run.tenant
    checkpoint = Checkpoint(tenant, state.response_id, 0, len(frames), state.to_json(), run.run)
    await asyncio.gather(  # a new checkpoint: nothing else writes these yet, so in parallel
        store.put_checkpoint(checkpoint, expected_version=None),
        store.append_events(tenant, state.response_id, 0, frames if run.stream else []),
        _write_record(gateway, tenant, run.run, response),
    )
    await _launch(gateway, tenant, state.response_id, run.run)


async def _write_record(
    gateway: Gateway, tenant: str, run: dict[str, Any], response: dict[str, Any]
) -> None:
    await gateway.store.put_response(
        StoredResponse(
            tenant=tenant,
            id=str(response["id"]),
            response=response,
            input_items=list(run.get("input_items") or []),
            chain=list(run.get("chain") or []),
            conversation_id=run.get("conversation"),
        )
    )


async def _launch(gateway: Gateway, tenant: str, response_id: str, run: dict[str, Any]) -> None:
    if gateway.launcher is None:  # prepare() refuses background runs without one
        raise InternalError("Background mode is not configured on this gateway.")
    try:
        await gateway.launcher.start(tenant, response_id, int(run.get("generation") or 0))
    except Exception as error:
        _log.error("could not start the background run of %s: %r", response_id, error)
        failure = InternalError("The background run could not be started.")
        await end_run(gateway, tenant, response_id, "failed", error=_error_object(failure))
        failure.headers["x-should-retry"] = "false"
        raise failure from error


def _error_object(error: InternalError) -> dict[str, Any]:
    return {"code": "server_error", "message": error.message}


async def settle(
    gateway: Gateway,
    tenant: str,
    response_id: str,
    terminal: Terminal,
    run: dict[str, Any],
) -> None:
    """Write the record of an ended run if it is still unfinished (the writer of the terminal
    died before writing it), with the conversation append its persister would have made."""
    record = await gateway.store.get_response(tenant, response_id)
    if record is not None and record.status not in UNFINISHED:
        return
    response = terminal.response
    conversation = run.get("conversation")
    if conversation and response.get("status") in ("completed", "incomplete"):
        # Keyed: a no-op when the dead writer had already appended before it died.
        items = [*(run.get("input_items") or []), *(response.get("output") or [])]
        await gateway.store.append_items(tenant, conversation, items, once_key=response_id)
    await _write_record(gateway, tenant, run, response)


async def end_run(
    gateway: Gateway,
    tenant: str,
    response_id: str,
    outcome: str,
    *,
    error: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """End a run from its latest checkpoint with ``outcome``; returns the Response object as it
    ended (possibly another ending that won the claim), or None when there is no checkpoint."""
    ended, _ = await _end(gateway, tenant, response_id, outcome, error)
    return ended


async def _end(
    gateway: Gateway,
    tenant: str,
    response_id: str,
    outcome: str,
    error: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, Checkpoint | None]:
    """:func:`end_run`, also returning the checkpoint it ended from."""
    store = gateway.store
    checkpoint = await store.get_checkpoint(tenant, response_id)
    if checkpoint is None:
        return None, None
    existing = await store.get_terminal(tenant, response_id)
    if existing is not None:
        await settle(gateway, tenant, response_id, existing, checkpoint.run)
        return existing.response, checkpoint
    state = LoopState.from_json(checkpoint.state)
    closed = []
    for index, item in enumerate(state.output):  # nothing runs any more: close what is open
        if item.get("status") == "in_progress":
            item["status"] = "incomplete"
            closed.append(index)
    state.status = outcome
    state.error = error
    state.incomplete_reason = None
    response = render_response(state)
    # The ending continues the stream where the checkpoint left it: events an action in flight
    # (or a dead worker's action) logged past it describe items the checkpoint does not hold,
    # so replays drop them (numbered events at or after the terminal are hidden). A follower
    # that saw some live gets the terminal next, with a lower number.
    seq = checkpoint.seq
    claim = Terminal(seq, terminal_frame(response, seq, closed), response)
    ended = await commit_ending(gateway, tenant, response_id, claim, state, checkpoint.run)
    return ended, checkpoint


async def commit_ending(
    gateway: Gateway,
    tenant: str,
    response_id: str,
    claim: Terminal,
    state: LoopState,
    run: dict[str, Any],
) -> dict[str, Any]:
    """Record the run's usage, claim its ending; if this claim won (or is ours, retried), wake
    its followers and write its record. Returns the Response object the run ended with.

    Usage is recorded first, from the state that ends: what the upstream calls consumed counts
    whichever ending wins, and the ledger write is idempotent per response, so a retried worker
    (or a losing ending) adds nothing. Nothing streams from here to a waiting client, so the
    extra round trip delays no one."""
    await gateway.record_usage(tenant, run, state, background=True)
    winner = await gateway.store.claim_terminal(tenant, response_id, claim)
    if winner is not None and winner.frame != claim.frame:  # another ending won
        return winner.response
    gateway.notifier.notify(tenant, response_id)
    await gateway.persister_for(tenant, run)(state, claim.response)
    return claim.response


async def _cancel(gateway: Gateway, tenant: str, response_id: str) -> dict[str, Any] | None:
    """Flag the run cancelled (its worker starts nothing more), end it ``cancelled`` and stop
    its execution; None when it has no checkpoint (nothing runs it)."""
    if not await gateway.store.request_cancel(tenant, response_id):
        return None
    ended, checkpoint = await _end(gateway, tenant, response_id, "cancelled", None)
    if gateway.launcher is None or checkpoint is None or (ended or {}).get("status") != "cancelled":
        return ended
    generation = int(checkpoint.run.get("generation") or 0)
    try:
        await gateway.launcher.stop(tenant, response_id, generation)
    except Exception as error:  # the worker stops at its next boundary anyway
        _log.warning("could not stop the execution of %s: %r", response_id, error)
    return ended


async def cancel_run(gateway: Gateway, record: StoredResponse) -> dict[str, Any]:
    """``POST /responses/{id}/cancel`` for a stored record (see the module docstring).

    Raises:
        InvalidRequestError: the response never ran in the background.
    """
    store, tenant = gateway.store, record.tenant
    # A foreground response that continued in the worker has a checkpoint.
    ran_in_background = record.response.get("background") or await store.get_checkpoint(
        tenant, record.id
    )
    if not ran_in_background:
        raise InvalidRequestError(
            "Only responses created with background=true can be cancelled.",
            param="response_id",
            code="invalid_value",
        )
    if record.status in _ENDED:
        return record.response
    terminal = await store.get_terminal(tenant, record.id)
    if terminal is not None:
        return terminal.response
    return await _cancel(gateway, tenant, record.id) or record.response


async def cancel_handed_over(gateway: Gateway, tenant: str, response_id: str) -> None:
    """The client of a foreground response that was handed over went away: cancel it, as a
    foreground response is cancelled by terminating its connection."""
    await _cancel(gateway, tenant, response_id)


async def end_if_lost(
    gateway: Gateway, record: StoredResponse, response: dict[str, Any]
) -> dict[str, Any]:
    """The read-side watchdog: ``response`` (as :func:`~.records.current_response` made it), or,
    for a run still unfinished long after any worker could be running it (a process that died
    locally, an execution stopped from outside), the run ended ``failed`` now."""
    if response.get("status") not in UNFINISHED:
        return response
    created = response.get("created_at")
    if not isinstance(created, int | float) or time.time() < created + max_seconds() + LOST_AFTER:
        return response
    ended = await end_run(gateway, record.tenant, record.id, "failed", error=dict(WORKER_LOST))
    if ended is None:  # a foreground record whose process died mid-loop: no worker will end it
        ended = {**response, "status": "failed", "error": dict(WORKER_LOST)}
        await gateway.store.put_response(replace(record, response=ended))
    return ended
