"""The in-process runner: background mode without AWS, driving the real worker.

Owns :class:`LocalLauncher`, the :class:`~responses_gateway.background.launcher.Launcher` used by
``responses-gateway serve`` and the tests. It does locally what the state machine does deployed:
calls the worker until it answers ``done``, retries an invocation that crashed (it resumes from
the last checkpoint) up to ``retries`` times, then ends the response ``failed`` (the watchdog).
``stop`` only stops calling the worker: the invocation in flight finishes its action and then
finds the checkpoint flagged, exactly like a Lambda invocation after ``StopExecution``.

The runs live on the event loop that started them (the app's), referenced until they end; nothing
is shared between gateways. When the store keeps run leases
(:class:`~responses_gateway.store.base.RunLeases`: the SQLite store, which several ``serve``
processes may share), every run is leased to the runner driving it, renewed every third of
``GATEWAY_RUN_LEASE_SECONDS`` (default 10) while it runs and released when it is done. A runner
started with :meth:`LocalLauncher.watching` (the app's lifespan) takes over every run whose lease
lapsed, at startup and then every half lease: a run the previous process left unfinished (killed,
crashed) resumes from its checkpoint within seconds, as the state machine retries a dead worker
invocation, and a run another live process drives is never touched. A run taken over that still
cannot finish (its worker keeps crashing) ends ``failed``, saying the gateway restarted. Without
leases (DynamoDB with ``serve``) runs do not survive the process: the read-side watchdog,
:func:`~responses_gateway.background.runs.end_if_lost`, ends them. It must not run loop actions
itself: it only calls the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from responses_gateway.store.base import RunLeases

if TYPE_CHECKING:
    from responses_gateway.service import Gateway

__all__ = ["GATEWAY_RESTARTED", "LEASE_ENV", "LocalLauncher", "Worker", "lease_seconds"]

_log = logging.getLogger(__name__)

Worker = Callable[[str, str, int], Awaitable[str]]
"""One worker invocation: (tenant, response id, generation) -> ``continue`` or ``done``."""
Lost = Callable[[str, str, dict[str, Any]], Awaitable[Any]]
"""Ends a run whose worker kept crashing ``failed``, with this ``error`` object."""

LEASE_ENV = "GATEWAY_RUN_LEASE_SECONDS"
_DEFAULT_LEASE = 10.0
_ORPHANS_PER_SWEEP = 100

GATEWAY_RESTARTED = {
    "code": "server_error",
    "message": "The gateway restarted while this response ran in the background, and its run "
    "could not be resumed.",
}
"""The ``error`` of a run taken over from a process that died, whose worker then kept crashing."""


_MIN_LEASE = 1.0
"""The shortest lease: the runner sweeps every half lease and renews every third of one."""


def lease_seconds() -> float:
    """How long a run's lease lasts without renewal (``GATEWAY_RUN_LEASE_SECONDS``, at least
    one second)."""
    return max(_MIN_LEASE, float(os.environ.get(LEASE_ENV) or _DEFAULT_LEASE))


class LocalLauncher:
    """Runs background responses as tasks on the running event loop."""

    def __init__(
        self,
        worker: Worker,
        on_lost: Lost,
        *,
        retries: int = 2,
        leases: RunLeases | None = None,
        leases_of: Callable[[], RunLeases | None] | None = None,
        lease: float = _DEFAULT_LEASE,
    ) -> None:
        self._worker = worker
        self._on_lost = on_lost
        self._retries = retries
        self._leases_held = leases
        self._leases_of = leases_of
        """Finds the leases on first use (a lazily built store is not built to ask)."""
        self._lease = lease
        self.owner = f"{socket.gethostname()}/{os.getpid()}/{secrets.token_hex(4)}"
        """This runner's name on the leases it holds."""
        self._runs: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._stopped: set[tuple[str, str]] = set()
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def _leases(self) -> RunLeases | None:
        if self._leases_of is not None:
            self._leases_held, self._leases_of = self._leases_of(), None
        return self._leases_held

    @classmethod
    def for_gateway(cls, gateway: Gateway) -> LocalLauncher:
        """The runner calling :func:`~responses_gateway.background.worker.run_worker` for
        ``gateway`` (imported on first use: plain requests never load the worker), leasing runs
        in its store when the store keeps leases."""

        async def work(tenant: str, response_id: str, generation: int) -> str:
            from responses_gateway.background.runs import max_seconds
            from responses_gateway.background.worker import run_worker

            return await run_worker(
                gateway, tenant, response_id, generation=generation, max_seconds=max_seconds()
            )

        async def lost(tenant: str, response_id: str, error: dict[str, Any]) -> Any:
            from responses_gateway.background.runs import end_run

            return await end_run(gateway, tenant, response_id, "failed", error=error)

        def leases_of() -> RunLeases | None:
            # Asked on first use: the deployed functions' store is built by their first request.
            store = gateway.store
            return store if isinstance(store, RunLeases) else None

        return cls(work, lost, leases_of=leases_of, lease=lease_seconds())

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        await self._take(tenant, response_id, generation, taken_over=False)

    async def _take(self, tenant: str, response_id: str, generation: int, taken_over: bool) -> bool:
        """Drive the run unless this runner already does or another one holds its lease."""
        key = (tenant, response_id)
        if self._driving(key):
            return False
        if self._leases is not None and not await self._leases.claim_run(
            tenant, response_id, self.owner, self._lease
        ):
            return False  # a live process drives it
        if self._driving(key):  # started meanwhile, while the claim was in flight
            return False
        self._stopped.discard(key)
        task = asyncio.get_running_loop().create_task(self._drive(key, generation, taken_over))
        self._runs[key] = task
        task.add_done_callback(lambda _: self._forget(key, task))
        if self._leases is not None and (self._heartbeat is None or self._heartbeat.done()):
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat(self._leases))
        return True

    def _driving(self, key: tuple[str, str]) -> bool:
        running = self._runs.get(key)
        return running is not None and not running.done()

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

    async def recover(self) -> int:
        """Take over every run whose lease lapsed (its process died); how many were taken."""
        if self._leases is None:
            return 0
        taken = 0
        for tenant, response_id in await self._leases.orphaned_runs(_ORPHANS_PER_SWEEP):
            if await self._take(tenant, response_id, 0, taken_over=True):
                _log.warning("background response %s: resumed after its process died", response_id)
                taken += 1
        return taken

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Recover at once (before the app serves), then every half lease until the block
        exits; a no-op without leases."""
        if self._leases is None:
            yield
            return
        await self.recover()
        watch = asyncio.get_running_loop().create_task(self._watch())
        try:
            yield
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._lease / 2)
            try:
                await self.recover()
            except Exception as error:  # the next sweep tries again
                _log.warning("could not look for background runs to resume: %r", error)

    async def _beat(self, leases: RunLeases) -> None:
        """Renew this runner's leases while it drives runs."""
        while self._runs:
            await asyncio.sleep(self._lease / 3)
            try:
                await leases.renew_runs(self.owner, self._lease)
            except Exception as error:  # the next beat tries again, within the lease
                _log.warning("could not renew background run leases: %r", error)

    def _forget(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._runs.get(key) is task:
            del self._runs[key]
            self._stopped.discard(key)

    async def _drive(self, key: tuple[str, str], generation: int, taken_over: bool) -> None:
        tenant, response_id = key
        failures = 0
        while key not in self._stopped:
            try:
                status = await self._worker(tenant, response_id, generation)
            except Exception as error:
                failures += 1
                _log.warning("background worker for %s crashed: %r", response_id, error)
                if failures > self._retries:
                    await self._on_lost(tenant, response_id, self._lost_error(taken_over))
                    break
                continue
            if status == "done":
                break
        # Done, ended as lost, or stopped by a cancel (which ends the run itself). A runner
        # cancelled at shutdown never gets here: its leases lapse and another process resumes.
        await self._release(tenant, response_id)

    def _lost_error(self, taken_over: bool) -> dict[str, Any]:
        from responses_gateway.background.runs import WORKER_LOST

        return dict(GATEWAY_RESTARTED if taken_over else WORKER_LOST)

    async def _release(self, tenant: str, response_id: str) -> None:
        if self._leases is None:
            return
        try:
            await self._leases.release_run(tenant, response_id, self.owner)
        except Exception as error:  # it lapses; a later sweep finds the run ended
            _log.warning("could not release the lease of %s: %r", response_id, error)
