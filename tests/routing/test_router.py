"""Router.acquire on the SQLite store with an injected clock and sleep: which deployment takes
a call, per-minute limits, and the bounded wait when none is available."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.store.conftest import FakeClock

from responses_gateway.config import parse_config
from responses_gateway.errors import UpstreamStatusError
from responses_gateway.routing.attempts import Attempts
from responses_gateway.routing.choose import by_key
from responses_gateway.routing.failures import classify
from responses_gateway.routing.router import DeploymentsUnavailable, Router
from responses_gateway.store.sqlite import SqliteStore

CONFIG = parse_config(
    {
        "providers": [{"name": "p", "base_url": "http://127.0.0.1:9/v1", "api": "chat",
                       "models": ["solo"]}],
        "routes": [
            {"model": "m", "max_wait_seconds": 5, "cooldown_seconds": 3,
             "deployments": [{"id": "one", "provider": "p", "model": "x", "rpm": 1},
                             {"id": "two", "provider": "p", "model": "y", "weight": 1e-9}]},
            {"model": "even",
             "deployments": [{"id": f"e{n}", "provider": "p", "model": "z"} for n in range(3)]},
        ],
    }
)  # fmt: skip


class Sleeper:
    """An injected sleep that moves the clock instead of waiting."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.slept: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.advance(seconds)


@pytest.fixture
def store(clock: FakeClock) -> Iterator[SqliteStore]:
    made = SqliteStore(":memory:", clock=clock)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def router(store: SqliteStore, clock: FakeClock) -> Router:
    sleeper = Sleeper(clock)
    made = Router(CONFIG, httpx.AsyncClient(), store, clock=clock, sleep=sleeper)
    made.sleeper = sleeper  # type: ignore[attr-defined]
    return made


def _limited() -> Any:
    return classify(UpstreamStatusError(429, "slow down"), streamed=False)


async def test_the_weighted_choice_takes_the_heavier_deployment(router: Router) -> None:
    assert (await router.acquire(Attempts("m"))).deployment.id == "one"


async def test_a_prompt_cache_key_takes_the_deployment_it_lands_on_every_time(
    router: Router,
) -> None:
    deployments = router.route_of("even").deployments
    keys = [f"k{n}" for n in range(30)]
    landed = {key: by_key(deployments, key).id for key in keys}
    assert len(set(landed.values())) == 3  # the keys spread over the three
    for key in keys * 2:
        assert (await router.acquire(Attempts("even", key=key))).deployment.id == landed[key]


async def test_a_deployment_at_its_rpm_sends_the_call_to_its_sibling(router: Router) -> None:
    assert (await router.acquire(Attempts("m"))).deployment.id == "one"
    assert (await router.acquire(Attempts("m"))).deployment.id == "two"


async def test_every_deployment_cooling_waits_in_steps_for_the_first_to_return(
    router: Router, clock: FakeClock
) -> None:
    route = router.route_of("m")
    for deployment in route.deployments:
        await router.board.failed(deployment, _limited(), route, probe=False)
    attempts = Attempts("m")
    target = await router.acquire(attempts)
    assert target.probe  # the first back is probed
    assert router.sleeper.slept == [1.0, 1.0, 1.0]  # type: ignore[attr-defined]
    assert attempts.waited == 3.0


async def test_nothing_available_within_the_bounded_wait_is_a_503_with_retry_after(
    store: SqliteStore, clock: FakeClock
) -> None:
    router = Router(CONFIG, httpx.AsyncClient(), store, clock=clock, sleep=Sleeper(clock))
    route = router.route_of("m")
    for deployment in route.deployments:
        await store.record_failure(deployment.id, now=clock(), allowed_fails=1, window=60,
                                   cooldown=60)  # fmt: skip
    with pytest.raises(DeploymentsUnavailable) as caught:
        await router.acquire(Attempts("m"))
    assert caught.value.status_code == 503 and caught.value.code == "deployments_unavailable"
    assert caught.value.headers["retry-after"] == "60"


async def test_a_model_without_a_route_is_one_implicit_deployment(router: Router) -> None:
    target = await router.acquire(Attempts("solo"))
    assert (target.deployment.id, target.deployment.upstream_model) == ("p/solo", "solo")


MIXED = parse_config(
    {
        "providers": [
            {"name": "c", "base_url": "http://127.0.0.1:9/v1", "api": "chat", "models": ["c1"]},
            {"name": "r", "base_url": "http://127.0.0.1:9/v1", "api": "responses",
             "models": ["r1"]},
        ],
        "routes": [
            {"model": "mixed", "fallbacks": ["chat-only", "relay-only"],
             "context_window_fallback": "chat-only",
             "deployments": [{"id": "mr", "provider": "r", "model": "x"},
                             {"id": "mc", "provider": "c", "model": "x"}]},
            {"model": "chat-only", "deployments": [{"id": "co", "provider": "c", "model": "y"}]},
            {"model": "relay-only", "deployments": [{"id": "ro", "provider": "r", "model": "z"}]},
        ],
    }
)  # fmt: skip


async def test_a_wire_refusing_the_request_takes_none_of_its_calls(
    store: SqliteStore, clock: FakeClock
) -> None:
    router = Router(MIXED, httpx.AsyncClient(), store, clock=clock, sleep=Sleeper(clock))
    refused = frozenset({"chat"})

    policy = router.policy_for("mixed", refused)

    assert (policy.fallbacks, policy.context_window_fallback) == (("relay-only",), None)
    assert router.policy_for("mixed", frozenset()) is router.route_of("mixed")
    attempts = Attempts(primary="mixed", refused_wires=refused)
    assert router.siblings_left(attempts) == 1
    assert (await router.acquire(attempts)).deployment.id == "mr"
    attempts.tried.add("mr")
    with pytest.raises(DeploymentsUnavailable):  # the chat sibling is never offered
        await router.acquire(attempts)
