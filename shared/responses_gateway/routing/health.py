"""The health of deployments as this instance sees it: the shared entries, cached briefly.

Owns :class:`HealthBoard`: reads the store's health entries of a model's deployments (one round
trip for all of them) and trusts what it read for ``cache_seconds``; past three quarters of that,
a call still uses the cached view and starts a refresh beside it, so under steady traffic no
request waits for the read and the view is never older than ``cache_seconds``. It says which are
available now, takes the
half-open probe of a deployment whose cooldown ended, counts failures into the shared entry (a
429, or a failed probe, starts a cooldown at once) and clears the entry when a deployment that had
failures answers. Per-minute counters are only touched for deployments with ``rpm``/``tpm``. A
store that fails never fails a request: the board then treats deployments as healthy and logs.
It does not choose among deployments and never decides retries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Literal

from responses_gateway.routing.deployments import Deployment, ModelRoute
from responses_gateway.routing.failures import LlmFailure
from responses_gateway.store.base import DeploymentHealth, HealthStore

__all__ = ["DEFAULT_CACHE_SECONDS", "HealthBoard", "Status", "status_of"]

logger = logging.getLogger(__name__)

DEFAULT_CACHE_SECONDS = 1.0
"""How long an instance trusts what it read of the shared health."""
_REFRESH_AT = 0.75
"""Fraction of ``cache_seconds`` after which a view is refreshed in the background."""
PROBE_LEASE = 30.0
"""Seconds one instance's half-open probe call holds the deployment before others may try."""

Status = Literal["healthy", "cooling", "half_open"]


def status_of(health: DeploymentHealth | None, now: float) -> Status:
    """``cooling`` before the cooldown ends (or while another instance probes), ``half_open``
    after it ended and before a probe answered, else ``healthy``."""
    if health is None or health.cooldown_until <= 0:
        return "healthy"
    if health.cooldown_until > now or health.probe_until > now:
        return "cooling"
    return "half_open"


def available_at(health: DeploymentHealth | None) -> float:
    """When the deployment may be tried again (Unix seconds; 0: now)."""
    if health is None:
        return 0.0
    return max(health.cooldown_until, health.probe_until)


class HealthBoard:
    """This instance's cached view of the shared health, and the writes that change it."""

    def __init__(
        self,
        store: HealthStore,
        *,
        clock: Callable[[], float] = time.time,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
    ) -> None:
        self._store = store
        self._clock = clock
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, DeploymentHealth | None]] = {}
        self._refreshing: dict[tuple[str, ...], asyncio.Future[None]] = {}
        """Background refreshes in flight, by deployment ids (referenced until done)."""

    def now(self) -> float:
        return self._clock()

    async def view(self, deployments: list[Deployment]) -> dict[str, DeploymentHealth | None]:
        """The health of ``deployments``: read from the store when this instance has no view
        younger than ``cache_seconds``; refreshed beside the call past three quarters of it."""
        now = self._clock()
        ages = {
            d.id: now - self._cache[d.id][0] if d.id in self._cache else None for d in deployments
        }
        expired = [i for i, age in ages.items() if age is None or age >= self._cache_seconds]
        if expired:
            await self._read(expired)
        else:
            aging = tuple(
                i
                for i, age in ages.items()
                if age is not None and age >= self._cache_seconds * _REFRESH_AT
            )
            if aging and aging not in self._refreshing:
                task = asyncio.ensure_future(self._read(list(aging)))
                self._refreshing[aging] = task
                task.add_done_callback(lambda _: self._refreshing.pop(aging, None))
        return {d.id: self._cache[d.id][1] for d in deployments}

    async def _read(self, deployment_ids: list[str]) -> None:
        started = self._clock()
        try:
            found = await self._store.read_health(deployment_ids)
        except Exception:
            logger.exception("could not read deployment health; assuming healthy")
            found = {}
        for deployment_id in deployment_ids:
            current = self._cache.get(deployment_id)
            if current is None or current[0] <= started:  # a newer write of ours wins
                self._cache[deployment_id] = (started, found.get(deployment_id))

    async def settled(self) -> None:
        """Wait for the background refreshes in flight (tests, shutdown)."""
        while self._refreshing:
            await asyncio.gather(*self._refreshing.values(), return_exceptions=True)

    def _remember(self, deployment_id: str, health: DeploymentHealth | None) -> None:
        self._cache[deployment_id] = (self._clock(), health)

    async def claim_probe(self, deployment: Deployment) -> bool:
        """Take the half-open probe of ``deployment`` (True: this call is the probe)."""
        now = self._clock()
        try:
            claimed = await self._store.claim_probe(deployment.id, now=now, lease=PROBE_LEASE)
        except Exception:
            logger.exception("could not claim a probe of %s", deployment.id)
            return True
        cached = self._cache.get(deployment.id, (now, None))[1]
        if cached is not None:
            probe_until = now + PROBE_LEASE
            self._remember(
                deployment.id,
                DeploymentHealth(
                    cached.fails, cached.window_start, cached.cooldown_until, probe_until
                ),
            )
        if not claimed:  # someone else probes: read again on the next look
            self._cache.pop(deployment.id, None)
        return claimed

    async def failed(
        self, deployment: Deployment, failure: LlmFailure, route: ModelRoute, *, probe: bool
    ) -> None:
        """Count a retryable failure of ``deployment`` in the shared entry."""
        immediate = probe or failure.kind == "rate_limited"
        cooldown = route.cooldown_seconds
        if failure.retry_after is not None:
            cooldown = max(failure.retry_after, 0.001)
        try:
            health = await self._store.record_failure(
                deployment.id,
                now=self._clock(),
                allowed_fails=1 if immediate else route.allowed_fails,
                window=route.cooldown_seconds,
                cooldown=cooldown,
            )
        except Exception:
            logger.exception("could not record a failure of %s", deployment.id)
            return
        self._remember(deployment.id, health)
        if health.cooldown_until > self._clock():
            logger.warning(
                "deployment %s cools down for %.1f s after %s",
                deployment.id,
                health.cooldown_until - self._clock(),
                failure.kind,
            )

    async def succeeded(self, deployment: Deployment) -> None:
        """``deployment`` answered: forget its failures (one write, only if it had any)."""
        cached = self._cache.get(deployment.id)
        if cached is None or cached[1] is None:
            return
        try:
            await self._store.clear_health(deployment.id)
        except Exception:
            logger.exception("could not clear the health of %s", deployment.id)
            return
        self._remember(deployment.id, None)

    async def admit(self, deployment: Deployment) -> bool:
        """Count one request against ``deployment``'s per-minute limits; False when over."""
        if not deployment.limited:
            return True
        try:
            return await self._store.count_call(
                deployment.id,
                minute=int(self._clock() // 60),
                requests=1,
                tokens=0,
                rpm=deployment.rpm,
                tpm=deployment.tpm,
            )
        except Exception:
            logger.exception("could not count a call of %s", deployment.id)
            return True

    async def spent(self, deployment: Deployment, tokens: int) -> None:
        """Add a finished call's tokens to ``deployment``'s minute (only with a ``tpm``)."""
        if deployment.tpm is None or tokens <= 0:
            return
        try:
            await self._store.count_call(
                deployment.id, minute=int(self._clock() // 60), requests=0, tokens=tokens
            )
        except Exception:
            logger.exception("could not count the tokens of %s", deployment.id)
