"""How a background run is started and stopped: the :class:`Launcher` seam.

Owns the contract between the API (create, cancel, foreground hand-over) and whatever drives the
background worker: the Step Functions state machine when deployed
(:mod:`responses_gateway.background.stepfunctions`), an in-process runner locally
(:mod:`responses_gateway.background.local`). Only ids cross it. It must not run loop actions
itself nor touch the store.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Protocol

__all__ = ["DeferredLauncher", "Launcher", "execution_name"]


def execution_name(response_id: str, generation: int = 0) -> str:
    """The execution name of a response's ``generation``-th execution: the response id, then
    ``-g<N>`` for the fresh executions that continue a long loop (names are unique for 90
    days, so starting the same one twice is idempotent)."""
    return response_id if generation == 0 else f"{response_id}-g{generation}"


class Launcher(Protocol):
    """Starts and stops the worker loop of a background response."""

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        """Start driving the response's worker (idempotent for the same generation)."""
        ...

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        """Stop driving it, best effort (the worker also stops at its next action boundary
        once the checkpoint is flagged cancelled)."""
        ...


class DeferredLauncher:
    """A :class:`Launcher` made on first use, on a worker thread: making the Step Functions one
    imports boto3 and builds a client (about 0.2 s of CPU), which a cold start need not wait
    for when no request runs in the background."""

    def __init__(self, make: Callable[[], Launcher]) -> None:
        self._make = make
        self._launcher: Launcher | None = None
        self._lock = threading.Lock()

    def _build(self) -> Launcher:
        with self._lock:  # made once, however many runs start at the same time
            if self._launcher is None:
                self._launcher = self._make()
            return self._launcher

    async def _get(self) -> Launcher:
        if self._launcher is not None:
            return self._launcher
        return await asyncio.to_thread(self._build)

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        await (await self._get()).start(tenant, response_id, generation)

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        await (await self._get()).stop(tenant, response_id, generation)
