"""Routing under faults: a fault proxy in front of each of three scripted upstreams (``a`` on the
chat wire and ``b`` on the Responses wire serve model ``agent``; ``big`` is its larger-window
model), two gateway instances sharing one DynamoDB table (moto). Each test asserts which upstream
answered, what the client saw, and what the shared health holds afterwards. Deployment ``a`` is
always chosen first while it is available (a first-pick random source), so faults land where the
test puts them. Waits are the gateway's own bounded waits on short cooldowns; the tests sleep on
nothing and move the routers' clocks instead of waiting a second.
"""

from __future__ import annotations

import json
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
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.routing.router import DEPLOYMENT_HEADER, Router
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.tenancy import LOCAL_TENANT
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.faults import Fault, FaultProxy
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_stream, parse_sse

TABLE = "responses-gateway-routing"
T = TypeVar("T")
DEPLOYMENTS = (
    "a/agent-a",
    "b/agent-b",
    "big/big-model",
    "tight-a",
    "tight-b",
    "a-small/small-model",
    "relay-b",
    "relay-a",
)


class FirstPick(random.Random):
    """Chooses the first candidate: deployments are tried in configuration order."""

    def choices(self, population: Sequence[T], *args: Any, **kwargs: Any) -> list[T]:
        return [population[0]]


class Clock:
    """Wall time plus an offset the test moves (a second passes without waiting for it)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclass
class Upstream:
    script: ScriptedUpstream
    server: RunningServer
    proxy: FaultProxy

    def answered(self) -> list[str]:
        return [r.json.get("model", "") for r in self.script.model_requests()]


@dataclass
class Routing:
    a: Upstream
    b: Upstream
    big: Upstream
    gateways: list[RunningServer]
    apps: list[Any]
    stores: list[DynamoStore]
    clock: Clock

    def url(self, instance: int = 0) -> str:
        return f"{self.gateways[instance].url}/v1"


def _upstream() -> Upstream:
    script = ScriptedUpstream(demo=False)
    server = run_in_thread(create_fake_upstream_app(script))
    return Upstream(script, server, FaultProxy.start(server.url))


def _config(a: Upstream, b: Upstream, big: Upstream) -> Any:
    def provider(name: str, up: Upstream, api: str) -> dict[str, Any]:
        return {
            "name": name,
            "base_url": f"{up.proxy.url}/v1",
            "api": api,
            "api_key": f"sk-{name}",
            "models": [f"only-{name}"],
            "timeout": 3,
        }

    fast = {"allowed_fails": 1, "cooldown_seconds": 0.3}
    return parse_config(
        {
            "providers": [
                provider("a", a, "chat"),
                provider("b", b, "responses"),
                provider("big", big, "chat"),
                {**provider("a-small", a, "chat"), "context_window": 200},
            ],
            "routes": [
                {
                    "model": "agent",
                    "context_window_fallback": "agent-big",
                    "max_wait_seconds": 3,
                    "deployments": [
                        {"provider": "a", "model": "agent-a"},
                        {"provider": "b", "model": "agent-b"},
                    ],
                    **fast,
                },
                {"model": "agent-big", "deployments": [{"provider": "big", "model": "big-model"}]},
                {
                    "model": "small",
                    "context_window_fallback": "agent-big",
                    "deployments": [{"provider": "a-small", "model": "small-model"}],
                },
                {  # a Responses deployment first, a chat sibling, a chat fallback
                    "model": "relay",
                    "fallbacks": ["agent-big"],
                    "max_wait_seconds": 0.6,
                    "deployments": [
                        {"id": "relay-b", "provider": "b", "model": "agent-b"},
                        {"id": "relay-a", "provider": "a", "model": "agent-a"},
                    ],
                    **fast,
                },
                {
                    "model": "tight",
                    "max_wait_seconds": 0.6,
                    "max_attempts": 50,
                    "deployments": [
                        {"id": "tight-a", "provider": "a", "model": "agent-a"},
                        {"id": "tight-b", "provider": "b", "model": "agent-b"},
                    ],
                    **fast,
                },
            ],
        }
    )


@pytest.fixture(scope="module")
def dynamo() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name=TABLE)
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def routing(dynamo: LocalDynamo) -> Iterator[Routing]:
    a, b, big = _upstream(), _upstream(), _upstream()
    config = _config(a, b, big)
    stores = [DynamoStore(dynamo.client, TABLE) for _ in range(2)]  # two instances, one table
    policy = McpPolicy(allow_http=True, allow_loopback=True)
    apps = [create_app(config, store, mcp_policy=policy) for store in stores]
    gateways = [run_in_thread(app) for app in apps]
    try:
        yield Routing(a, b, big, gateways, apps, stores, Clock())
    finally:
        for gateway in gateways:
            gateway.stop()
        for up in (a, b, big):
            up.proxy.stop()
            up.server.stop()
        for store in stores:
            store.close()


@pytest.fixture
def fresh(routing: Routing) -> Routing:
    """Scripts, faults, shared health and each instance's router start over."""
    import asyncio

    for up in (routing.a, routing.b, routing.big):
        up.script.reset()
        up.proxy.script()
    routing.clock.offset = 0.0

    async def clear() -> None:
        for deployment in DEPLOYMENTS:
            await routing.stores[0].clear_health(deployment)

    asyncio.run(clear())
    for app in routing.apps:
        gateway = app.state.gateway
        gateway._router = Router(
            gateway.config,
            gateway.client,
            gateway.store,
            gateway.latch,
            clock=routing.clock,
            rng=FirstPick(),
        )
    return routing


@pytest.fixture
def client(fresh: Routing) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fresh.url(), api_key="sk-client", max_retries=0) as c:
        yield c


def _rate_limited(seconds: int) -> Fault:
    body = {
        "error": {
            "message": "Rate limit reached",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    return Fault(
        "respond",
        status=429,
        body=json.dumps(body).encode(),
        headers={"content-type": "application/json", "retry-after": str(seconds)},
    )


def _health(routing: Routing, deployment: str) -> Any:
    import asyncio

    return asyncio.run(routing.stores[0].read_health([deployment])).get(deployment)


def _request_log(routing: Routing) -> list[Any]:
    """Every request-log entry of the default tenant, oldest first."""
    import asyncio

    page = asyncio.run(routing.stores[0].list_requests(LOCAL_TENANT, limit=100))
    return list(reversed(page.entries))


def test_a_429_with_retry_after_moves_the_call_to_the_sibling(
    fresh: Routing, client: openai.OpenAI
) -> None:
    fresh.a.proxy.script(_rate_limited(20))
    fresh.b.script.push(Turn(text="from b"), Turn(text="b again"))
    raw = client.responses.with_raw_response.create(model="agent", input="hi")
    response = raw.parse()
    assert (response.status, response.output_text) == ("completed", "from b")
    assert raw.headers[DEPLOYMENT_HEADER] == "b/agent-b"
    assert fresh.a.script.requests == [] and fresh.b.answered() == ["agent-b"]
    cooldown = _health(fresh, "a/agent-a")
    assert 19 < cooldown.cooldown_until - time.time() <= 20  # retry-after, shared
    # The next call does not try the cooling deployment at all.
    assert client.responses.create(model="agent", input="again").output_text == "b again"
    assert len(fresh.a.proxy.calls) == 1
    # The request log names the deployment that answered each request (console, #21).
    logged = {e.response_id: e.extra.get("deployment") for e in _request_log(fresh)}
    assert logged[response.id] == "b/agent-b"


@pytest.mark.parametrize("death", ["answer lost", "stream cut after its role chunk"])
def test_death_before_the_first_token_is_retried_on_the_sibling(fresh: Routing, death: str) -> None:
    if death == "answer lost":
        fresh.a.proxy.script(Fault("reset_after"))
        fresh.a.script.push(Turn(text="lost answer"))
    else:  # 200, then the chat stream's opening {"role": "assistant"} chunk, then a reset
        fresh.a.script.push(Turn(text="lost answer", drop_after=1))
    fresh.b.script.push(Turn(text="the answer"))
    with (
        httpx.Client(base_url=fresh.url(), timeout=30) as http,
        http.stream(
            "POST", "/responses", json={"model": "agent", "input": "hi", "stream": True}
        ) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers[DEPLOYMENT_HEADER] == "b/agent-b"
        events = parse_sse(answer.read())
    final = check_stream(events)
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert (final["status"], deltas) == ("completed", "the answer")
    # a stream broken before its first data event (the role chunk is none) is asked again
    # unstreamed first, on the same deployment; a's script is spent, so the sibling answers
    assert fresh.a.answered() == ["agent-a", "agent-a"] and fresh.b.answered() == ["agent-b"]


def test_after_the_first_token_the_client_gets_one_clean_failure_and_no_duplicate(
    fresh: Routing,
) -> None:
    text = " ".join(f"word{n}" for n in range(200))
    fresh.a.script.push(Turn(text=text, chunk_size=8))
    fresh.a.proxy.script(Fault("cut", limit=1500))
    fresh.b.script.push(Turn(text="must not be used"))
    with (
        httpx.Client(base_url=fresh.url(), timeout=30) as http,
        http.stream(
            "POST", "/responses", json={"model": "agent", "input": "hi", "stream": True}
        ) as answer,
    ):
        assert answer.status_code == 200
        events = parse_sse(answer.read())
    final = check_stream(events)
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert events[-1]["type"] == "response.failed" and final["error"]["code"] == "server_error"
    assert deltas and text.startswith(deltas)  # one prefix, nothing repeated
    assert fresh.b.script.requests == []


def test_a_context_length_error_falls_back_to_the_larger_model(
    fresh: Routing, client: openai.OpenAI
) -> None:
    fresh.a.script.push(
        Turn.http_error(
            400,
            "This model's maximum context length is 8192 tokens.",
            code="context_length_exceeded",
        )
    )
    fresh.big.script.push(Turn(text="read it all"))
    raw = client.responses.with_raw_response.create(model="agent", input="a very long input")
    assert raw.parse().output_text == "read it all"
    assert raw.headers[DEPLOYMENT_HEADER] == "big/big-model"
    assert fresh.big.answered() == ["big-model"] and fresh.b.script.requests == []
    assert _health(fresh, "a/agent-a") is None  # not the deployment's fault


def test_a_context_known_too_long_for_the_window_goes_to_the_larger_model_directly(
    fresh: Routing, client: openai.OpenAI
) -> None:
    fresh.big.script.push(Turn(text="fits here"))
    long_input = " ".join(f"word{n}" for n in range(400))
    raw = client.responses.with_raw_response.create(model="small", input=long_input)
    assert raw.parse().output_text == "fits here"
    assert raw.headers[DEPLOYMENT_HEADER] == "big/big-model"
    # The small window's server was only asked to count the tokens, never to answer.
    assert [r.path for r in fresh.a.script.model_requests()] == ["/tokenize"]


@pytest.mark.parametrize(
    "field",
    [{"prompt_cache_retention": "24h"}, {"prompt_cache_options": {"mode": "explicit"}}],
    ids=["echoed", "not-echoed"],
)
def test_a_call_never_fails_over_to_a_wire_that_would_drop_a_field_it_sets(
    fresh: Routing, client: openai.OpenAI, field: dict[str, Any]
) -> None:
    # Both fields: relayed on the Responses wire, refused on chat (the field table).
    fresh.b.proxy.script(Fault("respond", status=500, times=None))
    with pytest.raises(openai.APIStatusError) as failed:
        client.responses.create(model="relay", input="hi", extra_body=field)
    assert failed.value.status_code == 502 and "HTTP 500" in failed.value.message
    assert fresh.a.script.requests == [] and fresh.big.script.requests == []
    assert len(fresh.b.proxy.calls) == 2  # only the Responses deployment, in two rounds

    # The same request without the field fails over to the chat sibling as usual.
    fresh.a.script.push(Turn(text="from a"))
    raw = client.responses.with_raw_response.create(model="relay", input="hi")
    assert raw.parse().output_text == "from a"
    assert raw.headers[DEPLOYMENT_HEADER] == "relay-a"
    assert not set(field) & set(fresh.a.script.model_requests()[0].json)


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


def test_a_tool_call_already_run_is_never_run_again_when_the_next_call_fails_over(
    fresh: Routing, client: openai.OpenAI, calc: RunningMcpServer
) -> None:
    calc.log.clear()
    fresh.a.script.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a": 1, "b": 2}', "call_1")]),
        Turn.http_error(503, "overloaded"),
    )
    fresh.b.script.push(Turn(text="1 + 2 = 3"))
    raw = client.responses.with_raw_response.create(
        model="agent",
        input="add",
        tools=[
            {
                "type": "mcp",
                "server_label": "calc",
                "server_url": calc.url,
                "require_approval": "never",
            }
        ],
    )
    response = raw.parse()
    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    assert response.output_text == "1 + 2 = 3"
    assert calc.log.calls == [("add", {"a": 1, "b": 2})]
    assert raw.headers[DEPLOYMENT_HEADER] == "a/agent-a,b/agent-b"
    sent = fresh.b.script.model_requests()[0].json["input"]
    assert [item["type"] for item in sent][-2:] == ["function_call", "function_call_output"]


def test_two_instances_sharing_the_store_agree_on_a_cooldown_within_a_second(
    fresh: Routing,
) -> None:
    fresh.a.script.push(Turn(text="a, seen by two"), Turn(text="a, still cached by two"))
    fresh.b.script.push(Turn(text="b, for one"), Turn(text="b, for two"))
    with (
        openai.OpenAI(base_url=fresh.url(0), api_key="k", max_retries=0) as one,
        openai.OpenAI(base_url=fresh.url(1), api_key="k", max_retries=0) as two,
    ):
        assert two.responses.create(model="agent", input="x").output_text == "a, seen by two"
        fresh.a.proxy.script(_rate_limited(30))
        assert one.responses.create(model="agent", input="x").output_text == "b, for one"
        # Instance two read the health less than a second ago: it may still pick a.
        assert two.responses.create(model="agent", input="x").output_text == (
            "a, still cached by two"
        )
        fresh.clock.offset += 1.0  # one second later, it reads the shared cooldown
        assert two.responses.create(model="agent", input="x").output_text == "b, for two"
    assert [call.action for call in fresh.a.proxy.calls] == ["respond", "forward"]  # since scripted


def test_every_deployment_down_waits_for_the_first_to_return_then_succeeds(
    fresh: Routing, client: openai.OpenAI
) -> None:
    fresh.a.proxy.script(Fault("respond", status=503, body=b"down"))
    fresh.b.proxy.script(Fault("respond", status=503, body=b"down"))
    fresh.a.script.push(Turn(text="back again"))
    started = time.monotonic()
    raw = client.responses.with_raw_response.create(model="agent", input="hi")
    waited = time.monotonic() - started
    assert raw.parse().output_text == "back again"
    assert raw.headers[DEPLOYMENT_HEADER] == "a/agent-a"
    assert 0.3 <= waited < 3  # the cooldown, within the bounded wait
    assert _health(fresh, "a/agent-a") is None  # the probe answered: healthy for everyone


def test_every_deployment_down_past_the_bounded_wait_fails_with_the_last_cause(
    fresh: Routing, client: openai.OpenAI
) -> None:
    for up in (fresh.a, fresh.b):
        up.proxy.script(Fault("respond", status=503, body=b"down", times=None))
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="tight", input="hi")
    assert time.monotonic() - started < 3
    error = caught.value
    assert error.status_code == 502
    body: Any = error.body
    assert body["type"] == "server_error"
    assert body["message"].startswith("No deployment of model 'tight' could answer (")
    assert "Last cause:" in body["message"]
    assert error.response.headers.get("retry-after") is not None
