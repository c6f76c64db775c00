"""The in-process runner: background mode without AWS, driving the real worker.

Owns :class:`LocalLauncher`, the :class:`~responses_gateway.background.launcher.Launcher` used by
``responses-gateway serve`` and the tests. It does locally what the state machine does deployed:
calls the worker until it answers ``done``, retries an invocation that crashed (it resumes from
the last checkpoint) up to ``retries`` times, then ends the response ``failed`` (the watchdog).
``stop`` only stops calling the worker: the invocation in flight finishes its action and then
finds the checkpoint flagged, exactly like a Lambda invocation after ``StopExecution``.

The runs live on the event loop that started them (the app's), referenced until they end; nothing
is shared between gateways, and runs do not survive the process (a response whose run was lost
is ended by the read-side watchdog, :func:`~responses_gateway.background.runs.end_if_lost`). It
must not run loop actions itself: it only calls the worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from responses_gateway.service import Gateway

__all__ = ["LocalLauncher", "Worker"]

_log = logging.getLogger(__name__)

Worker = Callable[[str, str, int], Awaitable[str]]
"""One worker invocation: (tenant, response id, generation) -> ``continue`` or ``done``."""
Lost = Callable[[str, str, BaseException], Awaitable[Any]]
"""Ends a run whose worker kept crashing."""


class LocalLauncher:
    """Runs background responses as tasks on the running event loop."""

    def __init__(self, worker: Worker, on_lost: Lost, *, retries: int = 2) -> None:
        self._worker = worker
        self._on_lost = on_lost
        self._retries = retries
        self._runs: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._stopped: set[tuple[str, str]] = set()

    @classmethod
    def for_gateway(cls, gateway: Gateway) -> LocalLauncher:
        """The runner calling :func:`~responses_gateway.background.worker.run_worker` for
        ``gateway`` (imported on first use: plain requests never load the worker)."""

        async def work(tenant: str, response_id: str, generation: int) -> str:
            from responses_gateway.background.runs import max_seconds
            from responses_gateway.background.worker import run_worker

            return await run_worker(
                gateway, tenant, response_id, generation=generation, max_seconds=max_seconds()
            )

        async def lost(tenant: str, response_id: str, error: BaseException) -> Any:
            from responses_gateway.background.runs import WORKER_LOST, end_run

            return await end_run(gateway, tenant, response_id, "failed", error=dict(WORKER_LOST))

        return cls(work, lost)

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        key = (tenant, response_id)
        running = self._runs.get(key)
        if running is not None and not running.done():
            return
        self._stopped.discard(key)
        task = asyncio.get_running_loop().create_task(self._drive(key, generation))
        self._runs[key] = task
        task.add_done_callback(lambda _: self._forget(key, task))

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        if (tenant, response_id) in self._runs:
            self._stopped.add((tenant, response_id))

    @property
    def active(self) -> int:
        """How many runs are in flight (safe to read from another thread)."""
        return len(self._runs)

    async def drain(self) -> None:
        """Wait for every run in flight (shutdown, tests)."""
        while self._runs:
            await asyncio.gather(*self._runs.values(), return_exceptions=True)

    def _forget(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._runs.get(key) is task:
            del self._runs[key]
            self._stopped.discard(key)

    async def _drive(self, key: tuple[str, str], generation: int) -> None:
        tenant, response_id = key
        failures = 0
        while key not in self._stopped:
            try:
                status = await self._worker(tenant, response_id, generation)
            except Exception as error:
                failures += 1
                _log.warning("background worker for %s crashed: %r", response_id, error)
                if failures > self._retries:
                    await self._on_lost(tenant, response_id, error)
                    return
                continue
            if status == "done":
                return
