"""HealthBoard: two instances sharing one store agree on a cooldown within the cache's life."""

from __future__ import annotations

import uuid

import pytest
from tests.store.conftest import FakeClock, StoreFactory

from responses_gateway.errors import UpstreamStatusError, UpstreamTransportError
from responses_gateway.routing.deployments import Deployment, ModelRoute
from responses_gateway.routing.failures import classify
from responses_gateway.routing.health import HealthBoard, status_of

ROUTE = ModelRoute("m", (), allowed_fails=2, cooldown_seconds=20.0)
"""The failure policy (the boards never read its deployments)."""


@pytest.fixture
def pair() -> tuple[Deployment, Deployment]:
    """Two deployments of this test only (DynamoDB tests share one table)."""
    suffix = uuid.uuid4().hex[:8]
    return Deployment(f"a-{suffix}", None, "m"), Deployment(f"b-{suffix}", None, "m")


async def test_two_instances_agree_on_a_cooldown_within_one_second(
    make_store: StoreFactory, clock: FakeClock, pair: tuple[Deployment, Deployment]
) -> None:
    a, b = pair
    one = HealthBoard(make_store(), clock=clock, cache_seconds=1.0)
    two = HealthBoard(make_store(), clock=clock, cache_seconds=1.0)  # another process's store
    assert await two.view([a, b]) == {a.id: None, b.id: None}
    limited = UpstreamStatusError(429, "slow down")
    limited.headers["retry-after"] = "15"
    await one.failed(a, classify(limited, streamed=False), ROUTE, probe=False)
    assert status_of((await one.view([a]))[a.id], clock()) == "cooling"
    clock.advance(0.5)
    assert (await two.view([a]))[a.id] is None  # its cached read is still fresh
    clock.advance(0.5)
    seen = (await two.view([a]))[a.id]
    assert seen is not None and status_of(seen, clock()) == "cooling"
    assert seen.cooldown_until == clock() - 1.0 + 15


async def test_failures_below_allowed_fails_leave_the_deployment_available(
    make_store: StoreFactory, clock: FakeClock, pair: tuple[Deployment, Deployment]
) -> None:
    a, b = pair
    board = HealthBoard(make_store(), clock=clock)
    dropped = classify(UpstreamTransportError("reset"), streamed=False)
    await board.failed(b, dropped, ROUTE, probe=False)
    assert status_of((await board.view([b]))[b.id], clock()) == "healthy"
    await board.failed(b, dropped, ROUTE, probe=False)
    assert status_of((await board.view([b]))[b.id], clock()) == "cooling"


async def test_after_the_cooldown_one_instance_probes_and_its_success_clears_it_for_all(
    make_store: StoreFactory, clock: FakeClock, pair: tuple[Deployment, Deployment]
) -> None:
    a, b = pair
    one = HealthBoard(make_store(), clock=clock)
    two = HealthBoard(make_store(), clock=clock)
    await one.failed(a, classify(UpstreamStatusError(429, "x"), streamed=False), ROUTE, probe=False)
    clock.advance(21)
    assert status_of((await one.view([a]))[a.id], clock()) == "half_open"
    assert status_of((await two.view([a]))[a.id], clock()) == "half_open"
    assert await one.claim_probe(a)
    assert not await two.claim_probe(a)  # the other instance waits for the probe
    await one.succeeded(a)
    clock.advance(1)
    assert (await two.view([a]))[a.id] is None


async def test_a_failed_probe_cools_the_deployment_down_again_at_once(
    make_store: StoreFactory, clock: FakeClock, pair: tuple[Deployment, Deployment]
) -> None:
    a, b = pair
    board = HealthBoard(make_store(), clock=clock)
    await board.failed(
        a, classify(UpstreamStatusError(503, "x"), streamed=False), ROUTE, probe=True
    )
    assert status_of((await board.view([a]))[a.id], clock()) == "cooling"


class _CountingReads:
    """a store wrapper counting ``read_health`` round trips."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.reads = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    async def read_health(self, deployment_ids: list[str]) -> object:
        self.reads += 1
        return await self.inner.read_health(deployment_ids)  # type: ignore[attr-defined]


async def test_past_three_quarters_of_its_life_the_view_is_refreshed_beside_the_call_not_before_it(
    make_store: StoreFactory, clock: FakeClock, pair: tuple[Deployment, Deployment]
) -> None:
    a, b = pair
    store = _CountingReads(make_store())
    board = HealthBoard(store, clock=clock, cache_seconds=1.0)  # type: ignore[arg-type]
    other = HealthBoard(make_store(), clock=clock)
    await board.view([a])
    await other.failed(
        a, classify(UpstreamStatusError(429, "x"), streamed=False), ROUTE, probe=False
    )
    clock.advance(0.8)
    assert (await board.view([a]))[a.id] is None  # the cached view, answered at once
    await board.settled()
    assert store.reads == 2
    seen = (await board.view([a]))[a.id]  # refreshed in the background meanwhile
    assert seen is not None and status_of(seen, clock()) == "cooling"
    assert store.reads == 2
