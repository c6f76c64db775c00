"""The background worker: one invocation continues a response's loop from its checkpoint.

Owns :func:`run_worker`, the code the state machine's task (and the local runner) calls with
only ids. One invocation:

1. reads the checkpoint. A run that already ended only gets its record settled (a crash may
   have cut the write after the terminal claim); a run whose cancel did not get to end it is
   ended ``cancelled``;
2. drops events a crashed earlier invocation logged past the checkpoint (they were never
   checkpointed, and the action that produced them runs again);
3. a run that was ``queued`` is checkpointed ``in_progress`` before its first action, so a read
   says it runs from the moment it does (the record is rendered from the checkpoint);
4. runs loop actions with :func:`~responses_gateway.loop.driver.step`, logging events as they
   happen (the first model output notes the request log's time to first token in ``run``) and,
   after each action, flushing the log and writing the next checkpoint. The write is
   fenced on the version it read: if a cancel flagged the checkpoint or another invocation moved
   it, this invocation stops (it never starts another action). Before running tool calls it also
   asks whether a cancel was requested, so no tool starts after a cancel answered;
5. stops with ``continue`` when the time left is under ``margin`` (the state machine calls it
   again), or ``done`` once the response ended. The ending is a claim of the terminal (the first
   ending wins against a concurrent cancel or the watchdog), then the record is written.

Gateway tool calls go through the journal (:mod:`.journal`): a call whose outcome was recorded is
never run twice. A crash (any exception) propagates: the state machine retries the invocation,
which resumes from the last checkpoint. The worker decides nothing about the loop itself.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from responses_gateway.background.journal import JournaledTools
from responses_gateway.background.log import EventLog
from responses_gateway.background.runs import commit_ending, end_run, settle
from responses_gateway.loop.driver import close_run, step
from responses_gateway.loop.events import Sink
from responses_gateway.loop.state import ExecuteTools, LoopState
from responses_gateway.loop.tools import NO_GATEWAY_TOOLS
from responses_gateway.sinks.sse import SSESink
from responses_gateway.store.base import Checkpoint, CheckpointConflict, Terminal
from responses_gateway.usage.requestlog import FirstOutputSink

if TYPE_CHECKING:
    from responses_gateway.service import Gateway

__all__ = ["WorkerStatus", "run_worker"]

_log = logging.getLogger(__name__)

WorkerStatus = Literal["continue", "done"]


async def run_worker(
    gateway: Gateway,
    tenant: str,
    response_id: str,
    *,
    generation: int = 0,
    remaining: Callable[[], float] | None = None,
    margin: float = 0.0,
    after_checkpoint: Callable[[int], None] | None = None,
    max_seconds: float | None = None,
    clock: Callable[[], float] = time.time,
) -> WorkerStatus:
    """Continue the response's loop; ``continue`` to be called again, ``done`` when it ended.

    Args:
        gateway: the service (store, configuration, upstream client, notifier).
        tenant, response_id: whose run (the only data the state machine carries).
        generation: the execution generation calling (recorded for cancel's StopExecution).
        remaining: seconds this invocation has left (None: no limit).
        margin: stop once ``remaining()`` drops under it (the longest action it must fit).
        after_checkpoint: called with each new checkpoint version (tests inject crashes here).
        max_seconds: the longest a background response may run, from its ``created_at``;
            past it, the response ends ``failed`` at the next action boundary (the state
            machine's own limits cannot span the fresh executions of a long loop).
        clock: wall time, for ``max_seconds``.
    """
    store = gateway.store
    checkpoint = await store.get_checkpoint(tenant, response_id)
    if checkpoint is None:
        _log.warning("no checkpoint for background response %s", response_id)
        return "done"
    terminal = await store.get_terminal(tenant, response_id)
    if terminal is not None:  # ended; make sure its record says so (a crash may have cut it)
        await settle(gateway, tenant, response_id, terminal, checkpoint.run)
        return "done"
    if checkpoint.cancel_requested:  # a cancel that did not get to end the run
        await end_run(gateway, tenant, response_id, "cancelled")
        return "done"
    keep = bool(checkpoint.run.get("stream"))  # only a response created streaming is logged
    if keep:
        # Events a crashed invocation logged past the checkpoint: its action runs again. (Only
        # once no terminal exists: the last action of an ended run logs past its checkpoint.)
        await store.truncate_events(tenant, response_id, checkpoint.seq)
    state = LoopState.from_json(checkpoint.state)

    def overdue() -> bool:
        return max_seconds is not None and clock() > state.created_at + max_seconds

    if overdue():
        return await _time_out(gateway, tenant, response_id, max_seconds)
    run: dict[str, Any] = dict(checkpoint.run)
    run["generation"] = max(generation, int(run.get("generation") or 0))
    version = checkpoint.version

    async def advance(seq: int) -> bool:
        """Checkpoint ``state`` as the next version; False when fenced out (a cancel flagged
        the checkpoint, which then ends the run, or another invocation moved it on)."""
        nonlocal version
        try:
            await store.put_checkpoint(
                Checkpoint(tenant, response_id, version + 1, seq, state.to_json(), run),
                expected_version=version,
            )
        except CheckpointConflict:
            _log.info("background response %s was cancelled or moved on", response_id)
            latest = await store.get_checkpoint(tenant, response_id)
            if latest is not None and latest.cancel_requested:
                await end_run(gateway, tenant, response_id, "cancelled")
            return False
        version += 1
        if after_checkpoint is not None:
            after_checkpoint(version)
        return True

    if state.status == "queued":  # the run starts: from now on a read says in_progress
        state.status = "in_progress"
        if not await advance(checkpoint.seq):
            return "done"
    log = EventLog(store, tenant, response_id, checkpoint.seq, gateway.notifier, keep=keep)
    sink: Sink = SSESink(
        log.write,
        include_obfuscation=bool(run.get("include_obfuscation")),
        first_sequence_number=checkpoint.seq,
    )
    request_log = run.get("log")
    if isinstance(request_log, dict) and "first_token_ms" not in request_log:
        # time to first token, as for a foreground run: the first output of any invocation
        # (kept by the next checkpoint, which carries ``run``)
        sink = FirstOutputSink(sink, request_log)
    endings: list[dict[str, Any]] = []

    async def capture(_: LoopState, response: dict[str, Any]) -> None:
        endings.append(response)  # stored after the terminal claim, not inside step()

    ctx = gateway.live_context(tenant, state, run, persist=capture)
    if ctx.tools is not NO_GATEWAY_TOOLS:
        ctx.tools = JournaledTools(ctx.tools, store, tenant, response_id)
    try:
        while True:
            if isinstance(state.next_action, ExecuteTools) and await store.cancel_requested(
                tenant, response_id
            ):  # never start a tool call after a cancel answered
                await end_run(gateway, tenant, response_id, "cancelled")
                return "done"
            if await step(state, ctx, sink):
                frame = log.take_last()
                await log.flush()
                claim = Terminal(log.next_seq, frame, endings[-1])
                await commit_ending(gateway, tenant, response_id, claim, state, run)
                return "done"
            await log.flush()
            if not await advance(log.next_seq):
                return "done"
            if overdue():
                return await _time_out(gateway, tenant, response_id, max_seconds)
            if remaining is not None and remaining() < margin:
                return "continue"
    finally:
        try:
            await log.close()
        finally:
            await close_run(ctx)  # the run's MCP sessions


async def _time_out(
    gateway: Gateway, tenant: str, response_id: str, max_seconds: float | None
) -> WorkerStatus:
    error = {
        "code": "server_error",
        "message": f"The response ran longer than this gateway allows for background "
        f"responses ({max_seconds:g} seconds).",
    }
    await end_run(gateway, tenant, response_id, "failed", error=error)
    return "done"
