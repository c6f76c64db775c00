"""End-to-end fixtures: the gateway served over HTTP in front of the scripted fake upstream.

One fake upstream and one gateway per session (each on a loopback port, in a thread); the script,
the recordings and the upgrade latch are reset before every test. The client is the official
``openai`` SDK with retries off, so every upstream request a test causes is one it can count.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.adapters.select import UpgradeLatch
from responses_gateway.app import create_app
from responses_gateway.config import GatewayConfig, parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread

UPSTREAM_KEY = "sk-upstream-secret-key"

MODELS = {"chat": "scripted-chat", "responses": "scripted-responses", "harmony": "scripted-harmony"}
"""The model name that routes to each wire format."""
CHAT_REPLAY_MODEL = "scripted-chat-replay"
"""A chat provider with ``send_reasoning_content`` and ``send_verbosity`` on."""


TABLE = "responses-gateway-e2e"

PROMPTS = {
    "pmpt_support": {
        "default_version": "2",
        "versions": {
            "1": {"instructions": "You help with {{product}}."},
            "2": {
                "instructions": "You help with {{product}}, for {{customer}}.",
                "input": [{"role": "user", "content": "My name is {{customer}}."}],
            },
        },
    }
}
"""The operator's prompt templates (``GATEWAY_CONFIG`` ``prompts``)."""


@dataclass
class Stack:
    upstream: ScriptedUpstream
    upstream_server: RunningServer
    gateway_server: RunningServer
    latch: UpgradeLatch
    dynamo: LocalDynamo
    config: GatewayConfig | None = None
    store: DynamoStore | None = None

    @property
    def base_url(self) -> str:
        return f"{self.gateway_server.url}/v1"

    def wait_for_status(self, response_id: str, status: str, timeout: float = 10.0) -> Any:
        """Poll GET /responses/{id} until it has ``status`` (records written by a cleanup task
        after a disconnect land a moment after the client is gone)."""
        pause = threading.Event()
        with httpx.Client(base_url=self.base_url, timeout=10) as client:
            for _ in range(int(timeout / 0.02)):
                answer = client.get(f"/responses/{response_id}")
                if answer.status_code == 200 and answer.json()["status"] == status:
                    return answer.json()
                pause.wait(0.02)
        raise AssertionError(f"{response_id} never reached status {status!r}")

    def scan_table(self) -> str:
        """Everything stored in the table as text, compressed and chunked bodies decoded (for
        secret scans: a scan of raw bytes would miss what zlib hides)."""
        texts: list[str] = []
        chunks: dict[tuple[str, str], list[tuple[int, bytes]]] = {}
        for page in self.dynamo.client.get_paginator("scan").paginate(TableName=TABLE):
            for item in page["Items"]:
                texts.append(repr(item))
                if "body" in item:
                    texts.append(_inflate(bytes(item["body"]["B"])))
                if "d" in item:
                    prefix, index = item["SK"]["S"].rsplit("#", 1)
                    chunks.setdefault((item["PK"]["S"], prefix), []).append(
                        (int(index), bytes(item["d"]["B"]))
                    )
        for parts in chunks.values():
            texts.append(_inflate(b"".join(part for _, part in sorted(parts))))
        return "\n".join(texts)


def _inflate(blob: bytes) -> str:
    try:
        return zlib.decompress(blob).decode("utf-8", "replace")
    except zlib.error:
        return blob.decode("utf-8", "replace")


@pytest.fixture(scope="session")
def stack() -> Iterator[Stack]:
    upstream = ScriptedUpstream(demo=False)
    upstream_server = run_in_thread(create_fake_upstream_app(upstream))
    base = f"{upstream_server.url}/v1"
    config = parse_config(
        {
            "providers": [
                {
                    "name": "chat",
                    "base_url": base,
                    "api": "chat",
                    "api_key": UPSTREAM_KEY,
                    "models": [MODELS["chat"]],
                },
                {
                    "name": "responses",
                    "base_url": base,
                    "api": "responses",
                    "api_key": UPSTREAM_KEY,
                    "models": [MODELS["responses"]],
                },
                {
                    "name": "harmony",
                    "base_url": base,
                    "api": "harmony",
                    "api_key": UPSTREAM_KEY,
                    "models": [MODELS["harmony"]],
                },
                {
                    "name": "chat-strict",
                    "base_url": base,
                    "api": "chat",
                    "models": ["scripted-chat-strict"],
                    "hosted_tools": "reject",
                },
                {
                    "name": "chat-replay",  # a chat server that takes reasoning_content/verbosity
                    "base_url": base,
                    "api": "chat",
                    "api_key": UPSTREAM_KEY,
                    "models": [CHAT_REPLAY_MODEL],
                    "send_reasoning_content": True,
                    "send_verbosity": True,
                },
                {
                    "name": "auto",
                    "base_url": base,
                    "api": "auto",
                    "prefixes": ["auto/"],
                    "strip_prefix": True,
                },
            ],
            "prompts": PROMPTS,
        }
    )
    latch = UpgradeLatch()
    dynamo = start_local_dynamodb(table_name=TABLE)
    store = DynamoStore(dynamo.client, TABLE)
    policy = McpPolicy(allow_http=True, allow_loopback=True)  # test MCP servers are local
    gateway_server = run_in_thread(create_app(config, store, latch=latch, mcp_policy=policy))
    try:
        yield Stack(upstream, upstream_server, gateway_server, latch, dynamo, config, store)
    finally:
        gateway_server.stop()
        upstream_server.stop()
        dynamo.stop()


@pytest.fixture
def upstream(stack: Stack) -> ScriptedUpstream:
    stack.upstream.reset()
    stack.latch.clear()
    return stack.upstream


@pytest.fixture
def client(stack: Stack, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0) as c:
        yield c


@pytest.fixture
def http(stack: Stack, upstream: ScriptedUpstream) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.base_url, timeout=30) as c:
        yield c


@pytest.fixture(params=["chat", "responses", "harmony"])
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def model(wire: str) -> str:
    return MODELS[wire]
