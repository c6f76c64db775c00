"""Bedrock regions as deployments of one route: two scripted Bedrock upstreams (``east`` and
``west``, each a provider signed for its own region) serve the route ``claude`` through the same
cross-region inference profile. The first deployment is always tried first while it is available
(a first-pick random source), so faults land where the test puts them; each test asserts which
region answered, what the client saw and what the health holds afterwards.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.routing.router import DEPLOYMENT_HEADER, Router
from responses_gateway.store.sqlite import SqliteStore
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_stream, parse_sse

PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
EAST, WEST = "east-1", "west-2"
T = TypeVar("T")


class FirstPick(random.Random):
    """Chooses the first candidate: deployments are tried in configuration order."""

    def choices(self, population: Sequence[T], *args: Any, **kwargs: Any) -> list[T]:
        return [population[0]]


@dataclass
class Regions:
    east: ScriptedUpstream
    west: ScriptedUpstream
    servers: list[RunningServer]
    gateway: RunningServer
    app: Any
    store: SqliteStore


@pytest.fixture(scope="module")
def regions() -> Iterator[Regions]:
    east, west = ScriptedUpstream(demo=False), ScriptedUpstream(demo=False)
    servers = [run_in_thread(create_fake_upstream_app(s)) for s in (east, west)]

    def provider(name: str, region: str, server: RunningServer) -> dict[str, Any]:
        return {"name": name, "api": "bedrock", "base_url": server.url, "aws_region": region}

    config = parse_config(
        {
            "providers": [
                provider("east", "us-east-1", servers[0]),
                provider("west", "us-west-2", servers[1]),
            ],
            "routes": [
                {
                    "model": "claude",
                    "allowed_fails": 1,
                    "cooldown_seconds": 30,
                    "max_attempts": 2,
                    "max_wait_seconds": 0.5,
                    "deployments": [
                        {"id": EAST, "provider": "east", "model": PROFILE},
                        {"id": WEST, "provider": "west", "model": PROFILE},
                    ],
                }
            ],
        },
        {},
    )
    store = SqliteStore()
    app = create_app(config, store)
    gateway = run_in_thread(app)
    try:
        yield Regions(east, west, servers, gateway, app, store)
    finally:
        gateway.stop()
        for server in servers:
            server.stop()
        store.close()


@pytest.fixture
def fresh(regions: Regions) -> Regions:
    async def clear() -> None:
        for deployment in (EAST, WEST):
            await regions.store.clear_health(deployment)

    asyncio.run(clear())
    for script in (regions.east, regions.west):
        script.reset()
    gateway = regions.app.state.gateway
    gateway._router = Router(gateway.config, gateway.client, gateway.store, gateway.latch,
                             rng=FirstPick())  # fmt: skip
    return regions


@pytest.fixture
def client(fresh: Regions) -> Iterator[openai.OpenAI]:
    url = f"{fresh.gateway.url}/v1"
    with openai.OpenAI(base_url=url, api_key="sk-client", max_retries=0) as c:
        yield c


def _health(regions: Regions, deployment: str) -> Any:
    return asyncio.run(regions.store.read_health([deployment])).get(deployment)


def test_a_throttled_region_cools_down_and_the_call_moves_to_the_other(
    fresh: Regions, client: openai.OpenAI
) -> None:
    fresh.east.push(Turn.http_error(429, "Too many requests, please wait before trying again."))
    fresh.west.push(Turn(text="from west"), Turn(text="west again"))

    raw = client.responses.with_raw_response.create(model="claude", input="hi")

    response = raw.parse()
    assert (response.status, response.output_text) == ("completed", "from west")
    assert raw.headers[DEPLOYMENT_HEADER] == WEST
    (throttled,) = fresh.east.model_requests()
    assert throttled.path == "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    assert "/us-east-1/bedrock/" in throttled.headers["authorization"]
    assert "/us-west-2/bedrock/" in fresh.west.model_requests()[0].headers["authorization"]
    cooling = _health(fresh, EAST)
    assert 28 < cooling.cooldown_until - time.time() <= 30  # no retry-after: the route's cooldown
    assert client.responses.create(model="claude", input="again").output_text == "west again"
    assert len(fresh.east.model_requests()) == 1  # the cooling region is not tried


def test_every_region_throttled_is_one_429_with_the_retry_hint(
    fresh: Regions, client: openai.OpenAI
) -> None:
    for script in (fresh.east, fresh.west):
        script.push(Turn.http_error(429, "Too many requests, please wait before trying again."))

    with pytest.raises(openai.RateLimitError) as raised:
        client.responses.create(model="claude", input="hi")

    assert raised.value.status_code == 429
    assert raised.value.response.headers["x-should-retry"] == "true"
    assert raised.value.body["code"] == "rate_limit_exceeded"  # type: ignore[index]


def test_a_model_stream_error_after_the_first_event_fails_the_response_once(
    fresh: Regions,
) -> None:
    failing = Turn(
        text="one two three four",
        error_event_after=3,
        error_body={"error": {"message": "The model stopped: overloaded."}},
    )
    fresh.east.push(failing)
    fresh.west.push(Turn(text="never asked"))
    with httpx.Client(base_url=f"{fresh.gateway.url}/v1", timeout=30) as http:
        body = {"model": "claude", "input": "hi", "stream": True}
        events = parse_sse(http.post("/responses", json=body).content)

    final = check_stream(events)
    assert events[-1]["type"] == "response.failed"
    assert final["error"]["message"] == "The model stopped: overloaded."
    assert final["output"][0]["status"] == "incomplete"
    assert fresh.west.model_requests() == []  # output had reached the client: never retried
