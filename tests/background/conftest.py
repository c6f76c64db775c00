"""Background fixtures: a moto DynamoDB endpoint, the scripted upstream and a calc MCP server per
module; a gateway (no HTTP) per test, whose launcher only records what it was asked, so each test
drives the worker itself, one invocation at a time."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.service import Gateway
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread


class RecordingLauncher:
    """A launcher that runs nothing: it records starts and stops."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str, int]] = []
        self.stopped: list[tuple[str, str, int]] = []

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        self.started.append((tenant, response_id, generation))

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        self.stopped.append((tenant, response_id, generation))


@pytest.fixture(scope="module")
def dynamo() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name="background-tests")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[tuple[ScriptedUpstream, RunningServer]]:
    upstream = ScriptedUpstream(demo=False)
    server = run_in_thread(create_fake_upstream_app(upstream))
    try:
        yield upstream, server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


@pytest.fixture
def upstream(upstream_server: tuple[ScriptedUpstream, RunningServer]) -> ScriptedUpstream:
    upstream_server[0].reset()
    return upstream_server[0]


@pytest.fixture
def tenant() -> str:
    return f"tenant-{uuid.uuid4().hex}"


@pytest.fixture
def launcher() -> RecordingLauncher:
    return RecordingLauncher()


@pytest.fixture
async def gateway(
    dynamo: LocalDynamo,
    upstream_server: tuple[ScriptedUpstream, RunningServer],
    launcher: RecordingLauncher,
) -> AsyncIterator[Gateway]:
    config = parse_config(
        {
            "providers": [
                {
                    "name": "chat",
                    "base_url": f"{upstream_server[1].url}/v1",
                    "api": "chat",
                    "models": ["scripted-chat"],
                }
            ]
        }
    )
    store = DynamoStore(dynamo.client, dynamo.table_name)
    async with httpx.AsyncClient(trust_env=False) as client:
        policy = McpPolicy(allow_http=True, allow_loopback=True)
        yield Gateway(config, client, store, mcp_policy=policy, launcher=launcher)
    store.close()


def calc_tool(server: RunningMcpServer) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": server.url,
        "require_approval": "never",
    }
