"""HealthBoard: two instances sharing one store agree on a cooldown within the cache's life."""

from __future__ import annotations

from tests.store.conftest import FakeClock, StoreFactory

from responses_gateway.errors import UpstreamStatusError, UpstreamTransportError
from responses_gateway.routing.deployments import Deployment, ModelRoute
from responses_gateway.routing.failures import classify
from responses_gateway.routing.health import HealthBoard, status_of

A = Deployment("route-a", None, "m")
B = Deployment("route-b", None, "m")
ROUTE = ModelRoute("m", (A, B), allowed_fails=2, cooldown_seconds=20.0)


async def test_two_instances_agree_on_a_cooldown_within_one_second(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    one = HealthBoard(make_store(), clock=clock, cache_seconds=1.0)
    two = HealthBoard(make_store(), clock=clock, cache_seconds=1.0)  # another process's store
    assert await two.view([A, B]) == {"route-a": None, "route-b": None}
    limited = UpstreamStatusError(429, "slow down")
    limited.headers["retry-after"] = "15"
    await one.failed(A, classify(limited, streamed=False), ROUTE, probe=False)
    assert status_of((await one.view([A]))["route-a"], clock()) == "cooling"
    clock.advance(0.5)
    assert (await two.view([A]))["route-a"] is None  # its cached read is still fresh
    clock.advance(0.5)
    seen = (await two.view([A]))["route-a"]
    assert seen is not None and status_of(seen, clock()) == "cooling"
    assert seen.cooldown_until == clock() - 1.0 + 15


async def test_failures_below_allowed_fails_leave_the_deployment_available(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    board = HealthBoard(make_store(), clock=clock)
    dropped = classify(UpstreamTransportError("reset"), streamed=False)
    await board.failed(B, dropped, ROUTE, probe=False)
    assert status_of((await board.view([B]))["route-b"], clock()) == "healthy"
    await board.failed(B, dropped, ROUTE, probe=False)
    assert status_of((await board.view([B]))["route-b"], clock()) == "cooling"


async def test_after_the_cooldown_one_instance_probes_and_its_success_clears_it_for_all(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    one = HealthBoard(make_store(), clock=clock)
    two = HealthBoard(make_store(), clock=clock)
    await one.failed(A, classify(UpstreamStatusError(429, "x"), streamed=False), ROUTE, probe=False)
    clock.advance(21)
    assert status_of((await one.view([A]))["route-a"], clock()) == "half_open"
    assert status_of((await two.view([A]))["route-a"], clock()) == "half_open"
    assert await one.claim_probe(A)
    assert not await two.claim_probe(A)  # the other instance waits for the probe
    await one.succeeded(A)
    clock.advance(1)
    assert (await two.view([A]))["route-a"] is None


async def test_a_failed_probe_cools_the_deployment_down_again_at_once(
    make_store: StoreFactory, clock: FakeClock
) -> None:
    board = HealthBoard(make_store(), clock=clock)
    await board.failed(
        A, classify(UpstreamStatusError(503, "x"), streamed=False), ROUTE, probe=True
    )
    assert status_of((await board.view([A]))["route-a"], clock()) == "cooling"
