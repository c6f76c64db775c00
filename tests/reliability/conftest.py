"""Reliability fixtures: the served gateway with a fault proxy in front of each dependency.

One stack per session: moto's DynamoDB behind a :class:`FaultProxy` (the store's boto3 client
dials the proxy, with short timeouts and 3 attempts so exhausted retries end within seconds), the
scripted upstream behind another (the provider's read timeout is 3 s), and the gateway with small
request limits (so limit tests send small bodies). Scripts, recordings and the upstream are reset
before every test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.api.limits import Limits
from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.client import McpClient, McpLimits
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.store.table import make_client
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.faults import FaultProxy
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread

TABLE = "responses-gateway-reliability"
MODEL = "scripted-chat"
LIMITS = Limits(
    max_body_bytes=1024 * 1024,
    max_input_items=50,
    max_tools=8,
    max_json_depth=16,
    max_string_chars=200_000,
    stream_buffer_bytes=64 * 1024,
    stream_stall_seconds=2,
)
UPSTREAM_TIMEOUT = 3.0
MCP_TIMEOUT = 2.0
STORE_READ_TIMEOUT = 1.5
STORE_ATTEMPTS = 3


@dataclass
class Stack:
    upstream: ScriptedUpstream
    upstream_proxy: FaultProxy
    dynamo_proxy: FaultProxy
    dynamo: LocalDynamo
    store: DynamoStore
    gateway: RunningServer

    @property
    def base_url(self) -> str:
        return f"{self.gateway.url}/v1"

    def response_ids(self) -> list[str]:
        """Ids of every stored response META in the table (read from moto directly)."""
        ids = []
        pages = self.dynamo.client.get_paginator("scan").paginate(
            TableName=TABLE,
            ProjectionExpression="PK, SK",
            FilterExpression="SK = :r",
            ExpressionAttributeValues={":r": {"S": "R"}},
        )
        for page in pages:
            for item in page["Items"]:
                pk, sk = item["PK"]["S"], item["SK"]["S"]
                if sk == "R" and "#R#" in pk:
                    ids.append(pk.rsplit("#R#", 1)[1])
        return ids


def wait_until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll ``check`` until it returns something truthy (observable state, not a sleep)."""
    pause = threading.Event()
    for _ in range(int(timeout / 0.02)):
        value = check()
        if value:
            return value
        pause.wait(0.02)
    raise AssertionError("condition never held")


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    upstream = ScriptedUpstream(demo=False)
    upstream_server = run_in_thread(create_fake_upstream_app(upstream))
    upstream_proxy = FaultProxy.start(upstream_server.url)
    dynamo = start_local_dynamodb(table_name=TABLE)
    dynamo_proxy = FaultProxy.start(dynamo.endpoint_url)
    client = make_client(
        endpoint_url=dynamo_proxy.url,
        credentials=("local", "local"),
        max_attempts=STORE_ATTEMPTS,
        connect_timeout=1.0,
        read_timeout=STORE_READ_TIMEOUT,
    )
    store = DynamoStore(client, TABLE)
    config = parse_config(
        {
            "providers": [
                {
                    "name": "chat",
                    "base_url": f"{upstream_proxy.url}/v1",
                    "api": "chat",
                    "api_key": "sk-upstream",
                    "models": [MODEL],
                    "timeout": UPSTREAM_TIMEOUT,
                }
            ]
        }
    )
    policy = McpPolicy(allow_http=True, allow_loopback=True)  # test MCP servers are local
    app = create_app(config, store, limits=LIMITS, mcp_policy=policy)
    app.state.gateway._mcp_client = McpClient(policy, limits=McpLimits(call_timeout=MCP_TIMEOUT))
    gateway = run_in_thread(app)
    try:
        yield Stack(upstream, upstream_proxy, dynamo_proxy, dynamo, store, gateway)
    finally:
        gateway.stop()
        upstream_proxy.stop()
        dynamo_proxy.stop()
        upstream_server.stop()
        dynamo.stop()
        store.close()


@pytest.fixture
def fresh(stack: Stack) -> Stack:
    stack.upstream.reset()
    stack.upstream_proxy.script()
    stack.dynamo_proxy.script()
    return stack


@pytest.fixture
def client(fresh: Stack) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fresh.base_url, api_key="sk-client", max_retries=0) as c:
        yield c


@pytest.fixture
def http(fresh: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fresh.base_url, timeout=60) as c:
        yield c
