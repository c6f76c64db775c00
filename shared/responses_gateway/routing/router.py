"""The per-process router: a model name's deployments, which one takes a call, and its adapter.

Owns :class:`Router`: for the model an :class:`~.attempts.Attempts` is on, it finds the deployments
available now (not failed this round, not cooling down in the shared health, within their per-minute
limits, not on a wire that refuses a field the request set: :meth:`Router.policy_for` likewise
leaves out the fallback models none of whose deployments may take it), takes a half-open probe when
a cooldown ended, lets the route's strategy choose (a call carrying a ``prompt_cache_key`` goes
where that key lands instead), and hands back a :class:`Target` with that deployment's adapter (one
per deployment, in its own wire). When none is available it
waits for the first to return, in steps no longer than the health cache's life, within the route's
bounded wait; past it, it raises the error naming the last cause. It records outcomes (in-flight
counts and call times for the strategies, failures and recoveries in the shared health). Whether a
failed call is retried is the loop's decision
(:func:`responses_gateway.loop.failover.decide_after_llm_failure`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from responses_gateway.adapters.base import Adapter, ModelCall
from responses_gateway.adapters.select import PROCESS_LATCH, UpgradeLatch, make_adapter
from responses_gateway.config import GatewayConfig
from responses_gateway.errors import GatewayError, UpstreamError
from responses_gateway.routing.attempts import Attempts
from responses_gateway.routing.choose import by_key, choose
from responses_gateway.routing.deployments import Deployment, ModelRoute
from responses_gateway.routing.failures import RETRYABLE, LlmFailure
from responses_gateway.routing.health import (
    DEFAULT_CACHE_SECONDS,
    HealthBoard,
    available_at,
    status_of,
)
from responses_gateway.store.base import HealthStore

__all__ = ["DEPLOYMENT_HEADER", "DeploymentsUnavailable", "Router", "Target"]

logger = logging.getLogger(__name__)

DEPLOYMENT_HEADER = "x-gateway-deployment"
"""Response header naming the deployments that answered the response's model calls, in order."""

_LATENCY_WEIGHT = 0.3
"""Weight of the newest call time in a deployment's moving average."""
_BACKOFF = 0.25
"""Seconds before a deployment that failed this call is tried again by it (doubling per
attempt, at most 4 s), unless its cooldown or ``retry-after`` says longer."""


class DeploymentsUnavailable(UpstreamError):
    """No deployment of the model could take the call within its bounded wait (503)."""

    status_code = 503


@dataclass(frozen=True, slots=True)
class Target:
    """The deployment chosen for one attempt, with its adapter."""

    deployment: Deployment
    adapter: Adapter
    route: ModelRoute
    probe: bool = False
    """This attempt is the half-open probe after a cooldown."""


Sleep = Callable[[float], Awaitable[Any]]


class Router:
    """Routes model calls to deployments; one per process (its caches are per instance)."""

    def __init__(
        self,
        config: GatewayConfig,
        client: httpx.AsyncClient,
        store: HealthStore,
        latch: UpgradeLatch = PROCESS_LATCH,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        cache_seconds: float = DEFAULT_CACHE_SECONDS,
    ) -> None:
        self.config = config
        self.board = HealthBoard(store, clock=clock, cache_seconds=cache_seconds)
        self._client = client
        self._latch = latch
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._cache_seconds = cache_seconds
        self._adapters: dict[str, Adapter] = {}
        self._implicit: dict[str, ModelRoute] = {}
        self._counting: set[asyncio.Future[None]] = set()
        """Token counts being written (referenced until done; they hold no tenant data)."""
        self.in_flight: dict[str, int] = {}
        self.latency: dict[str, float] = {}
        """Deployment id -> moving average of its call time in seconds (this instance)."""

    def routes(self, model: str) -> bool:
        """Whether ``model`` has a configured route (else the loop calls its provider as is)."""
        return model in self.config.routes

    def route_of(self, model: str) -> ModelRoute:
        """The route of ``model``: configured, or one deployment (its provider) with defaults.

        Raises:
            NotFoundError: no provider serves ``model``.
        """
        route = self.config.routes.get(model)
        if route is not None:
            return route
        route = self._implicit.get(model)
        if route is None:
            provider, upstream = self.config.route(model)
            deployment = Deployment(
                id=f"{provider.name}/{upstream}", provider=provider, upstream_model=upstream
            )
            route = self._implicit[model] = ModelRoute(model=model, deployments=(deployment,))
        return route

    def adapter_of(self, deployment: Deployment) -> Adapter:
        adapter = self._adapters.get(deployment.id)
        if adapter is None:
            adapter = make_adapter(deployment.provider, self._client, self._latch)
            self._adapters[deployment.id] = adapter
        return adapter

    def siblings_left(self, attempts: Attempts) -> int:
        """Deployments of the current model not failed in this round (nor on a refused wire)."""
        route = self.route_of(attempts.model)
        return sum(
            1
            for d in route.deployments
            if d.id not in attempts.tried and self.takes(d, attempts.refused_wires)
        )

    def takes(self, deployment: Deployment, refused_wires: frozenset[str]) -> bool:
        """Whether ``deployment`` may take a call whose request its wire would not refuse."""
        return self.adapter_of(deployment).wire not in refused_wires

    def policy_for(self, model: str, refused_wires: frozenset[str]) -> ModelRoute:
        """The route of ``model`` for a request ``refused_wires`` refuse: the fallback and
        larger-window models none of whose deployments may take it left out (logged)."""
        route = self.route_of(model)
        if not refused_wires:
            return route

        def reachable(other: str) -> bool:
            return any(self.takes(d, refused_wires) for d in self.route_of(other).deployments)

        fallbacks = tuple(m for m in route.fallbacks if reachable(m))
        larger = route.context_window_fallback
        if larger is not None and not reachable(larger):
            larger = None
        if fallbacks == route.fallbacks and larger == route.context_window_fallback:
            return route
        logger.info(
            "route %s: fallbacks %s left out for this request (their wires refuse a field it sets)",
            model,
            ",".join(m for m in (*route.fallbacks, route.context_window_fallback)
                     if m is not None and m not in (*fallbacks, larger)),
        )  # fmt: skip
        return replace(route, fallbacks=fallbacks, context_window_fallback=larger)

    async def acquire(self, attempts: Attempts) -> Target:
        """A deployment for the next attempt, waiting (bounded) while none is available.

        Raises:
            GatewayError: none became available within the primary route's ``max_wait_seconds``
                (the last failure's error, or :class:`DeploymentsUnavailable`).
        """
        policy = self.route_of(attempts.primary)
        while True:
            route = self.route_of(attempts.model)
            target, until = await self._available(route, attempts)
            if target is not None:
                return target
            now = self._clock()
            pause = max(0.0, until - now) if until is not None else math.inf
            if attempts.waited + pause > policy.max_wait_seconds:
                raise self._exhausted(attempts, pause)
            step = min(pause, self._cache_seconds)
            await self._sleep(step)
            attempts.waited += step

    async def _available(
        self, route: ModelRoute, attempts: Attempts
    ) -> tuple[Target | None, float | None]:
        """A target now, or None and when the first deployment may be available."""
        now = self._clock()
        health = await self.board.view(list(route.deployments))
        ready: list[Deployment] = []
        probes: list[Deployment] = []
        waits: list[float] = []
        for deployment in route.deployments:
            tried = deployment.id in attempts.tried
            if tried or not self.takes(deployment, attempts.refused_wires):
                continue
            entry = health.get(deployment.id)
            status = status_of(entry, now)
            local = attempts.not_before.get(deployment.id, 0.0)
            if local > now or status == "cooling":
                waits.append(max(local, available_at(entry)))
            elif status == "half_open":
                probes.append(deployment)
            else:
                ready.append(deployment)
        for deployment in probes:
            if await self.board.claim_probe(deployment):
                return Target(deployment, self.adapter_of(deployment), route, probe=True), None
            waits.append(now + self._cache_seconds)
        while ready:
            if attempts.key:  # the request's prompt_cache_key: where its cache is warm
                deployment = by_key(ready, attempts.key)
            else:
                deployment = choose(route.strategy, ready, self._rng, self.in_flight, self.latency)
            if await self.board.admit(deployment):
                return Target(deployment, self.adapter_of(deployment), route), None
            ready.remove(deployment)  # over its per-minute limit: the next minute
            attempts.not_before[deployment.id] = (now // 60 + 1) * 60
            waits.append(attempts.not_before[deployment.id])
        return None, min(waits) if waits else None

    def _exhausted(self, attempts: Attempts, pause: float) -> GatewayError:
        retry = None if math.isinf(pause) else max(1, math.ceil(pause))
        if attempts.last is not None:
            error = attempts.last.error
            error.message = (
                f"No deployment of model '{attempts.primary}' could answer "
                f"({attempts.count} attempts, {attempts.waited:.1f} s waited). "
                f"Last cause: {error.message}"
            )
            error.args = (error.message,)
        else:
            error = DeploymentsUnavailable(
                f"Every deployment of model '{attempts.primary}' is cooling down or at its "
                "rate limit; try again later.",
                code="deployments_unavailable",
            )
        if retry is not None:
            error.headers.setdefault("retry-after", str(retry))
        return error

    async def call(self, target: Target, call: ModelCall, out: Any) -> Any:
        """Run one attempt on ``target``: its adapter's ``call_llm``, timed and counted."""
        deployment = target.deployment
        self.in_flight[deployment.id] = self.in_flight.get(deployment.id, 0) + 1
        started = time.monotonic()
        try:
            turn = await target.adapter.call_llm(call, out)
        finally:
            self.in_flight[deployment.id] -= 1
        elapsed = time.monotonic() - started
        previous = self.latency.get(deployment.id)
        self.latency[deployment.id] = (
            elapsed if previous is None else previous + _LATENCY_WEIGHT * (elapsed - previous)
        )
        await self.board.succeeded(deployment)
        tokens = int((turn.usage or {}).get("total_tokens") or 0)
        if deployment.tpm is not None and tokens > 0:  # counted off the answer's path
            task = asyncio.ensure_future(self.board.spent(deployment, tokens))
            self._counting.add(task)
            task.add_done_callback(self._counting.discard)
        return turn

    async def failed(self, target: Target, failure: LlmFailure, attempts: Attempts) -> None:
        """Note a failed attempt: in this call's record, and (a deployment's fault) in the
        shared health."""
        deployment = target.deployment
        attempts.count += 1
        attempts.last = failure
        attempts.tried.add(deployment.id)
        backoff = min(4.0, _BACKOFF * 2 ** (attempts.count - 1))
        wait = max(backoff, failure.retry_after or 0.0)
        attempts.not_before[deployment.id] = self._clock() + wait
        if failure.kind in RETRYABLE:
            await self.board.failed(deployment, failure, target.route, probe=target.probe)
