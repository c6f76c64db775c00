"""The worker Lambda's handler: the state machine's task, with ids in and ids out.

Owns the event contract between ``infra/statemachines/background.asl.json`` and the worker:

- in: ``{"tenant", "response_id", "generation", "iteration"}``; out: the same ids with
  ``iteration + 1`` and ``"status": "continue"`` (call again) or ``"done"``;
- watchdog: ``{"tenant", "response_id", "generation", "mode": "fail", "error": {...}}`` ends the
  response ``failed`` unless it already ended; out: ``"status": "done"``;
- EventBridge's "Step Functions Execution Status Change" for an execution that ``FAILED``,
  ``TIMED_OUT`` or was ``ABORTED``: the same, for the response its input names (a no-op for
  executions that ended their response themselves, a cancel's StopExecution included).

The gateway (configuration, store, upstream client) is built once per container, on first use,
and runs on one event loop for the life of the process; an invocation stops taking new actions
when less than ``WORKER_MARGIN_SECONDS`` (default 300) of its time is left, and a response older
than ``BACKGROUND_MAX_SECONDS`` (default 21600) ends ``failed``. A crash propagates:
the state machine retries, and the next invocation resumes from the checkpoint. It must not
decide anything about the loop (that is the worker's driver) nor log event contents.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from responses_gateway.service import Gateway

__all__ = ["handle", "work"]

_log = logging.getLogger(__name__)

EXECUTION_ENDED = "Step Functions Execution Status Change"
MARGIN_ENV = "WORKER_MARGIN_SECONDS"
_DEFAULT_MARGIN = 300.0
"""Room for the longest action an invocation may start (a model call or a tool call)."""


class _Runtime:
    """The container's gateway and event loop (built on the first invocation)."""

    loop: asyncio.AbstractEventLoop | None = None
    gateway: Gateway | None = None


def _gateway() -> tuple[asyncio.AbstractEventLoop, Gateway]:
    if _Runtime.loop is None or _Runtime.gateway is None:
        from responses_gateway.observability import lambda_app

        _Runtime.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(_Runtime.loop)
        app: Any = lambda_app("worker").app
        _Runtime.gateway = app.state.gateway
        # The container's loop serves every invocation: shared MCP servers stay warm on it.
        _Runtime.gateway.keep_shared_mcp(_Runtime.loop)
    return _Runtime.loop, _Runtime.gateway


async def work(
    gateway: Gateway,
    event: dict[str, Any],
    remaining: Callable[[], float] | None = None,
    margin: float = 0.0,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """Handle one state machine event with ``gateway`` (see the module docstring)."""
    from responses_gateway.background.runs import WORKER_LOST, end_run
    from responses_gateway.background.worker import run_worker

    if event.get("detail-type") == EXECUTION_ENDED:  # EventBridge: the execution is gone
        detail = event["detail"]
        status = detail.get("status")
        event = {**json.loads(detail["input"]), "mode": "fail", "error": {"Error": status}}
    tenant, response_id = str(event["tenant"]), str(event["response_id"])
    generation = int(event.get("generation") or 0)
    ids = {"tenant": tenant, "response_id": response_id, "generation": generation}
    if event.get("mode") == "fail":
        error = event.get("error")
        name = error.get("Error") if isinstance(error, dict) else None
        _log.error("background response %s: worker lost (%s)", response_id, name)
        await end_run(gateway, tenant, response_id, "failed", error=dict(WORKER_LOST))
        return {**ids, "iteration": int(event.get("iteration") or 0), "status": "done"}
    status = await run_worker(
        gateway,
        tenant,
        response_id,
        generation=generation,
        remaining=remaining,
        margin=margin,
        max_seconds=max_seconds,
    )
    return {**ids, "iteration": int(event.get("iteration") or 0) + 1, "status": status}


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda handler."""
    loop, gateway = _gateway()
    margin = float(os.environ.get(MARGIN_ENV) or _DEFAULT_MARGIN)
    from responses_gateway.background.runs import max_seconds

    limit = max_seconds()

    def remaining() -> float:
        return float(context.get_remaining_time_in_millis()) / 1000

    return loop.run_until_complete(work(gateway, event, remaining, margin, limit))
