"""The usage ledger, the usage API and budgets end to end: the official SDK against the served
gateway (API keys for several tenants, an operator key), the scripted upstream, real MCP servers
and a DynamoDB endpoint of this module's own (so the usage API's totals are exactly this
module's responses)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.tenancy import TenancyPolicy, key_id_of, parse_keys
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn, Usage
from responses_gateway.testing.server import RunningServer, run_in_thread

KEYS = {
    "alpha": "sk-alpha",
    "alpha2": "sk-alpha-second",
    "beta": "sk-beta",
    "crowd": "sk-crowd",
    "tight": "sk-tight",
    "midloop": "sk-midloop",
    "ops": "sk-operator",
}
TENANT_OF = {"alpha2": "alpha"}
MODEL = "scripted-chat"
OTHER_MODEL = "scripted-responses"
BEDROCK_MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
"""Served by a Bedrock provider and priced by Bedrock's list prices (no ``prices`` entry)."""


@dataclass
class UsageStack:
    upstream: ScriptedUpstream
    gateway: RunningServer
    dynamo: LocalDynamo
    store: DynamoStore

    def client(self, who: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.gateway.url}/v1", api_key=KEYS[who], max_retries=0)

    def usage(self, who: str, **params: Any) -> httpx.Response:
        with httpx.Client(base_url=self.gateway.url, timeout=30) as http:
            return http.get(
                "/v1/organization/usage/completions",
                params=params,
                headers={"authorization": f"Bearer {KEYS[who]}"},
            )


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


@pytest.fixture(scope="module")
def usage_stack() -> Iterator[UsageStack]:
    upstream = ScriptedUpstream(demo=False)
    upstream_server = run_in_thread(create_fake_upstream_app(upstream))
    base = f"{upstream_server.url}/v1"
    config = parse_config(
        {
            "providers": [
                {"name": "chat", "base_url": base, "api": "chat", "models": [MODEL]},
                {"name": "resp", "base_url": base, "api": "responses", "models": [OTHER_MODEL]},
                {
                    "name": "bedrock",
                    "base_url": upstream_server.url,
                    "api": "bedrock",
                    "aws_region": "us-east-1",
                    "models": [BEDROCK_MODEL],
                },
            ],
            "prices": {MODEL: {"input": 2, "cached_input": 1, "output": 8}},
            "budgets": {
                "tenants": {"tight": {"daily_tokens": 10}, "midloop": {"daily_tokens": 20}}
            },
            "operators": ["ops"],
        },
        env={},
    )
    dynamo = start_local_dynamodb(table_name="usage-e2e")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    app = create_app(config, store, mcp_policy=McpPolicy(allow_http=True, allow_loopback=True))
    app.state.tenancy = TenancyPolicy(
        keys=parse_keys(",".join(f"{key}:{TENANT_OF.get(who, who)}" for who, key in KEYS.items()))
    )
    gateway = run_in_thread(app)
    try:
        yield UsageStack(upstream, gateway, dynamo, store)
    finally:
        gateway.stop()
        upstream_server.stop()
        store.close()
        dynamo.stop()


@pytest.fixture
def stack(usage_stack: UsageStack) -> UsageStack:
    usage_stack.upstream.reset()
    return usage_stack


def _today() -> int:
    now = int(time.time())
    return now - now % 86_400


def _by_project(stack: UsageStack) -> dict[str, dict[str, Any]]:
    answer = stack.usage("ops", start_time=_today(), group_by="project_id", limit=1)
    assert answer.status_code == 200, answer.text
    (bucket,) = answer.json()["data"]
    return {r["project_id"]: r for r in bucket["results"]}


def _wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.01)  # polling observable state (the record), not waiting blindly


def _calc(server: RunningMcpServer) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": server.url,
        "require_approval": "never",
    }


def test_two_tenants_totals_equal_the_sum_of_their_responses(
    stack: UsageStack, calc: RunningMcpServer
) -> None:
    before = _by_project(stack) if stack.usage("ops", start_time=_today()).json()["data"] else {}
    upstream = stack.upstream
    responses: dict[str, list[Any]] = {"alpha": [], "beta": []}
    calls: dict[str, int] = {"alpha": 0, "beta": 0}
    alpha, alpha2, beta = stack.client("alpha"), stack.client("alpha2"), stack.client("beta")

    upstream.push(Turn(text="one", usage=Usage(11, 3, cached_tokens=4)))
    responses["alpha"].append(alpha.responses.create(model=MODEL, input="non-stream"))
    upstream.push(Turn(text="two", usage=Usage(13, 5, reasoning_tokens=2)))
    with alpha2.responses.stream(model=MODEL, input="stream") as stream:
        responses["alpha"].append(stream.get_final_response())
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":2,"b":3}', "call_1")], usage=Usage(17, 7)),
        Turn(text="5", usage=Usage(19, 1)),
    )
    responses["alpha"].append(
        alpha.responses.create(model=MODEL, input="2+3?", tools=[_calc(calc)])  # type: ignore[list-item]
    )
    calls["alpha"] = 4
    upstream.push(Turn(text="background", usage=Usage(23, 9)))
    queued = beta.responses.create(model=MODEL, input="later", background=True)
    _wait_for(lambda: beta.responses.retrieve(queued.id).status == "completed")
    responses["beta"].append(beta.responses.retrieve(queued.id))
    upstream.push(Turn(text="other wire", usage=Usage(29, 2)))
    responses["beta"].append(beta.responses.create(model=OTHER_MODEL, input="responses wire"))
    calls["beta"] = 2

    after = _by_project(stack)
    for tenant, made in responses.items():
        old = before.get(tenant, {})
        got = after[tenant]
        assert got["input_tokens"] - old.get("input_tokens", 0) == sum(
            r.usage.input_tokens for r in made
        )
        assert got["output_tokens"] - old.get("output_tokens", 0) == sum(
            r.usage.output_tokens for r in made
        )
        assert got["input_cached_tokens"] - old.get("input_cached_tokens", 0) == sum(
            r.usage.input_tokens_details.cached_tokens for r in made
        )
        assert got["num_model_requests"] - old.get("num_model_requests", 0) == calls[tenant]
    # The request-log entries carry tool calls, reasoning and cost (2 / 1 / 8 $ per 1M tokens).
    mcp_entry = stack_entry(stack, "alpha", responses["alpha"][2].id)
    assert (mcp_entry["tool_calls"], mcp_entry["model_calls"]) == (1, 2)
    assert stack_entry(stack, "alpha", responses["alpha"][1].id)["reasoning_tokens"] == 2
    first = stack_entry(stack, "alpha", responses["alpha"][0].id)
    assert first["cost_usd"] == str((7 * 2 + 4 * 1 + 3 * 8) / 1_000_000)


def stack_entry(stack: UsageStack, tenant: str, response_id: str) -> dict[str, Any]:
    import asyncio

    async def read() -> Any:
        return await stack.store.get_usage_entry(tenant, response_id)

    entry = asyncio.run(read())
    assert entry is not None
    counts = entry.counts
    return {
        "tool_calls": counts.tool_calls,
        "model_calls": counts.model_calls,
        "reasoning_tokens": counts.reasoning_tokens,
        "cost_usd": str(float(counts.cost_usd)),
    }


def test_bedrock_cache_reads_and_writes_are_priced_at_bedrocks_list_prices(
    stack: UsageStack,
) -> None:
    usage = Usage(2_000, 100, cached_tokens=1_000, cache_write_tokens=500)
    stack.upstream.push(Turn(text="cached", usage=usage))
    answer = stack.client("beta").responses.with_raw_response.create(
        model=BEDROCK_MODEL, input="a long shared prefix"
    )
    body = answer.http_response.json()
    assert body["usage"]["input_tokens"] == 2_000
    assert body["usage"]["input_tokens_details"] == {
        "cached_tokens": 1_000,
        "cache_write_tokens": 500,
    }
    # Claude Sonnet 4.5: $3 input, $0.30 cache read, $3.75 cache write, $15 output per 1M tokens
    expected = (500 * 3 + 1_000 * 0.30 + 500 * 3.75 + 100 * 15) / 1_000_000
    assert float(stack_entry(stack, "beta", body["id"])["cost_usd"]) == pytest.approx(expected)


def test_twenty_concurrent_responses_of_one_tenant_are_totalled_exactly(
    stack: UsageStack,
) -> None:
    before = _by_project(stack).get("crowd", {}).get("input_tokens", 0)
    stack.upstream.push(*(Turn(text=f"r{i}", usage=Usage(100 + i, 1)) for i in range(20)))
    client = stack.client("crowd")
    with ThreadPoolExecutor(max_workers=20) as pool:
        made = list(
            pool.map(lambda i: client.responses.create(model=MODEL, input=f"q{i}"), range(20))
        )
    assert all(r.status == "completed" for r in made)
    total = sum(r.usage.input_tokens for r in made)
    assert total == sum(100 + i for i in range(20))
    assert _by_project(stack)["crowd"]["input_tokens"] - before == total


def test_usage_api_shape_grouping_and_access(stack: UsageStack) -> None:
    stack.upstream.push(Turn(text="a", usage=Usage(3, 1)), Turn(text="b", usage=Usage(5, 1)))
    stack.client("alpha").responses.create(model=MODEL, input="a")
    stack.client("alpha2").responses.create(model=MODEL, input="b")

    answer = stack.usage(
        "ops",
        start_time=_today(),
        end_time=_today() + 86_400,
        bucket_width="1h",
        group_by=["model", "api_key_id"],
        project_ids="alpha",
        limit=24,
    )
    assert answer.status_code == 200
    page = answer.json()
    assert (page["object"], page["has_more"], page["next_page"]) == ("page", False, None)
    assert len(page["data"]) == 24
    assert [b["end_time"] - b["start_time"] for b in page["data"]] == [3600] * 24
    results = [r for b in page["data"] for r in b["results"]]
    keys = {r["api_key_id"] for r in results}
    assert keys == {key_id_of(KEYS["alpha"]), key_id_of(KEYS["alpha2"])}
    for result in results:
        assert set(result) == {
            "object",
            "input_tokens",
            "output_tokens",
            "input_cached_tokens",
            "input_audio_tokens",
            "output_audio_tokens",
            "num_model_requests",
            "project_id",
            "user_id",
            "api_key_id",
            "model",
            "batch",
        }
        assert result["object"] == "organization.usage.completions.result"
        assert (result["model"], result["project_id"]) == (MODEL, None)
        assert (result["input_audio_tokens"], result["output_audio_tokens"]) == (0, 0)

    paged = stack.usage("ops", start_time=_today() - 86_400 * 3, limit=2).json()
    assert paged["has_more"] is True and len(paged["data"]) == 2
    rest = stack.usage("ops", start_time=_today() - 86_400 * 3, page=paged["next_page"]).json()
    assert [b["start_time"] for b in rest["data"]] == [_today() - 86_400, _today()]

    denied = stack.usage("alpha", start_time=_today())
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "insufficient_permissions"
    with httpx.Client(base_url=stack.gateway.url) as http:
        assert (
            http.get("/v1/organization/usage/completions", params={"start_time": 0}).status_code
            == 401
        )
    minutes = stack.usage("ops", start_time=_today(), bucket_width="1m")
    assert (minutes.status_code, minutes.json()["error"]["param"]) == (400, "bucket_width")


def test_a_tenant_over_budget_is_refused_before_any_upstream_call(stack: UsageStack) -> None:
    client = stack.client("tight")
    stack.upstream.push(Turn(text="spent", usage=Usage(8, 4)))
    assert client.responses.create(model=MODEL, input="first").status == "completed"
    seen = len(stack.upstream.requests)

    with pytest.raises(openai.RateLimitError) as refused:
        client.responses.create(model=MODEL, input="second")
    assert refused.value.status_code == 429
    assert refused.value.code == "insufficient_quota"
    assert refused.value.body["type"] == "insufficient_quota"  # type: ignore[index]
    with pytest.raises(openai.RateLimitError):
        client.responses.create(model=MODEL, input="streamed", stream=True)
    with pytest.raises(openai.RateLimitError):
        client.responses.create(model=MODEL, input="queued", background=True)
    assert len(stack.upstream.requests) == seen  # the upstream saw nothing more


def test_a_loop_crossing_its_budget_stops_incomplete_without_another_model_call(
    stack: UsageStack, calc: RunningMcpServer
) -> None:
    stack.upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":1,"b":2}', "call_1")], usage=Usage(18, 4)),
        Turn(text="never asked"),
    )
    events = list(
        stack.client("midloop").responses.create(
            model=MODEL,
            input="1+2?",
            tools=[_calc(calc)],
            stream=True,  # type: ignore[list-item]
        )
    )
    assert events[-1].type == "response.incomplete"
    response = events[-1].response  # type: ignore[union-attr]
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "budget_exceeded"
    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call"]
    assert response.output[1].output == "3.0"  # type: ignore[union-attr]
    assert len(stack.upstream.model_requests()) == 1
    assert stack.upstream.pending == 1
    assert response.usage is not None and response.usage.total_tokens == 22


def test_an_approval_and_its_continuation_are_each_counted(
    stack: UsageStack, calc: RunningMcpServer
) -> None:
    client = stack.client("beta")
    zero = {"input_tokens": 0, "output_tokens": 0, "num_model_requests": 0}
    listed = stack.usage("ops", start_time=_today()).json()["data"]
    before = _by_project(stack).get("beta", zero) if listed else zero
    tool = {k: v for k, v in _calc(calc).items() if k != "require_approval"}
    stack.upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":5,"b":5}', "call_1")], usage=Usage(31, 3)),
        Turn(text="It is 10.", usage=Usage(37, 4)),
    )
    first = client.responses.create(model=MODEL, input="5+5", tools=[tool])  # type: ignore[list-item]
    assert [i.type for i in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    approval = {
        "type": "mcp_approval_response",
        "approval_request_id": first.output[1].id,  # type: ignore[union-attr]
        "approve": True,
    }
    second = client.responses.create(
        model=MODEL,
        input=[approval],
        tools=[tool],
        previous_response_id=first.id,  # type: ignore[list-item]
    )
    assert [i.type for i in second.output] == ["mcp_call", "message"]
    after = _by_project(stack)["beta"]
    assert after["input_tokens"] - before["input_tokens"] == 31 + 37
    assert after["output_tokens"] - before["output_tokens"] == 3 + 4
    assert after["num_model_requests"] - before["num_model_requests"] == 2
    assert stack_entry(stack, "beta", second.id)["tool_calls"] == 1


def test_only_operator_keys_may_put_prompt_versions(stack: UsageStack) -> None:
    with httpx.Client(base_url=f"{stack.gateway.url}/v1", timeout=30) as http:
        body = {"instructions": "Answer in {{language}}."}

        def put(who: str) -> httpx.Response:
            headers = {"authorization": f"Bearer {KEYS[who]}"}
            return http.post("/organization/prompts/pmpt_ops/versions", json=body, headers=headers)

        refused = put("alpha")
        accepted = put("ops")
        read = http.get(
            "/organization/prompts/pmpt_ops", headers={"authorization": "Bearer sk-beta"}
        )

    assert (refused.status_code, refused.json()["error"]["code"]) == (
        403,
        "insufficient_permissions",
    )
    assert (accepted.status_code, accepted.json()["version"]) == (200, "1")
    assert read.status_code == 403
    stack.upstream.push(Turn(text="Shwmae"))
    answer = stack.client("beta").responses.create(
        model=MODEL, input="hi", prompt={"id": "pmpt_ops", "variables": {"language": "Welsh"}}
    )
    assert answer.instructions == "Answer in Welsh."
