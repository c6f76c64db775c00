"""End-to-end fixtures: the gateway served over HTTP in front of the scripted fake upstream.

One fake upstream and one gateway per session and store kind (each on a loopback port, in a
thread); the script, the recordings and the upgrade latch are reset before every test. The client
is the official ``openai`` SDK with retries off, so every upstream request a test causes is one it
can count.

Every module runs on the DynamoDB store (through an embedded moto server), as deployed; a module
marked ``pytest.mark.stores("dynamodb", "sqlite")`` runs a second time on the SQLite store ``serve``
uses by default (a file in a temporary directory), so the stores are checked end to end without
running every module twice.

Every gateway app a test serves (the session's, and any a test builds and runs with
``run_in_thread``) is tapped (:mod:`responses_gateway.testing.spec_fixtures`): each Response
object, SSE event, WebSocket message and compaction object it sends is checked against OpenAI's
spec and the Open Responses spec, and a test after which any broke one fails at teardown
(``spec_conformance``). The session's totals are printed at the end.
"""

from __future__ import annotations

import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.adapters.select import UpgradeLatch
from responses_gateway.app import create_app
from responses_gateway.config import GatewayConfig, parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.base import Store
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.store.sqlite import SqliteStore, connect_for_inspection
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.spec_fixtures import (  # noqa: F401 - fixtures and a hook
    pytest_terminal_summary,
    spec_conformance,
    spec_taps,
)

UPSTREAM_KEY = "sk-upstream-secret-key"

MODELS = {
    "chat": "scripted-chat",
    "responses": "scripted-responses",
    "harmony": "scripted-harmony",
    "bedrock": "scripted-bedrock",
}
"""The model name that routes to each wire format (Bedrock's: the Converse API, SigV4-signed)."""
CHAT_REPLAY_MODEL = "scripted-chat-replay"


def wire_provider(wire: str, model: str, upstream_url: str, **extra: Any) -> dict[str, Any]:
    """One provider serving ``model`` on ``wire`` from the scripted upstream at ``upstream_url``
    (Bedrock's: signed with the runtime's credentials, at the root, not ``/v1``)."""
    if wire == "bedrock":
        where = {"base_url": upstream_url, "aws_region": "us-east-1"}
    else:
        where = {"base_url": f"{upstream_url}/v1"}
    return {"name": wire, **where, "api": wire, "models": [model], **extra}


"""A chat provider with ``send_reasoning_content`` and ``send_verbosity`` on."""


TABLE = "responses-gateway-e2e"
STORE_KINDS = ("dynamodb",)
"""The stores a module runs on unless it is marked ``stores(...)``."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "store_kind" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("stores")
    kinds = list(marker.args) if marker else list(STORE_KINDS)
    metafunc.parametrize("store_kind", kinds, indirect=True, scope="session")


@pytest.fixture(scope="session")
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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
    kind: str
    """``dynamodb`` (moto) or ``sqlite``."""
    dynamo: LocalDynamo | None = None
    db_path: Path | None = None
    config: GatewayConfig | None = None
    store: Store | None = None
    gateway: Any = None
    """The served app's :class:`~responses_gateway.service.Gateway`."""
    _extra: list[Any] = field(default_factory=list)

    def open_store(self, clock: Callable[[], float] | None = None) -> Store:
        """Another store on the session's table or database file (with its own ``clock``);
        closed with the session. A SQLite store with its own clock never purges on its own: it
        would delete what the session's store still sees as live."""
        options: dict[str, Any] = {} if clock is None else {"clock": clock}
        made: Any
        if self.dynamo is not None:
            made = DynamoStore(self.dynamo.client, TABLE, **options)
        else:
            assert self.db_path is not None
            purge = {} if clock is None else {"purge_interval": None}
            made = SqliteStore(self.db_path, **options, **purge)
        self._extra.append(made)
        store: Store = made
        return store

    def close_stores(self) -> None:
        for made in self._extra:
            made.close()

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
        """Everything stored (in the table or the database file) as text, compressed and chunked
        bodies decoded (for secret scans: a scan of raw bytes would miss what zlib hides)."""
        if self.dynamo is None:
            return self._scan_database()
        texts: list[str] = []
        chunks: dict[tuple[str, str], list[tuple[int, bytes]]] = {}
        for page in self.dynamo.client.get_paginator("scan").paginate(TableName=TABLE):
            for item in page["Items"]:
                texts.append(repr(item))
                body = item.get("body", {})
                if "B" in body:
                    texts.append(_inflate(bytes(body["B"])))
                elif "S" in body:  # agent traces and spans: JSON text
                    texts.append(body["S"])
                if "d" in item:
                    prefix, index = item["SK"]["S"].rsplit("#", 1)
                    chunks.setdefault((item["PK"]["S"], prefix), []).append(
                        (int(index), bytes(item["d"]["B"]))
                    )
        for parts in chunks.values():
            texts.append(_inflate(b"".join(part for _, part in sorted(parts))))
        return "\n".join(texts)

    def _scan_database(self) -> str:
        assert self.db_path is not None
        texts: list[str] = []
        conn = connect_for_inspection(str(self.db_path))
        try:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                for row in conn.execute(f"SELECT * FROM {table}"):
                    texts += [_inflate(bytes(v)) if isinstance(v, bytes) else repr(v) for v in row]
        except sqlite3.Error as exc:
            raise AssertionError(f"cannot read the database: {exc}") from exc
        finally:
            conn.close()
        return "\n".join(texts)


def _inflate(blob: bytes) -> str:
    try:
        return zlib.decompress(blob).decode("utf-8", "replace")
    except zlib.error:
        return blob.decode("utf-8", "replace")


@pytest.fixture(scope="session")
def stack(store_kind: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
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
                    "name": "bedrock",  # signed with the runtime's credentials: no key
                    "base_url": upstream_server.url,
                    "api": "bedrock",
                    "aws_region": "us-east-1",
                    "models": [MODELS["bedrock"]],
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
            "operators": ["local"],  # keyless tests may use the operator endpoints (prompts)
        }
    )
    latch = UpgradeLatch()
    dynamo: LocalDynamo | None = None
    db_path: Path | None = None
    store: Any
    if store_kind == "dynamodb":
        dynamo = start_local_dynamodb(table_name=TABLE)
        store = DynamoStore(dynamo.client, TABLE)
    else:
        db_path = tmp_path_factory.mktemp("e2e-sqlite") / "gateway.db"
        store = SqliteStore(db_path)
    policy = McpPolicy(allow_http=True, allow_loopback=True)  # test MCP servers are local
    app = create_app(config, store, latch=latch, mcp_policy=policy)
    gateway_server = run_in_thread(app)
    stack = Stack(
        upstream,
        upstream_server,
        gateway_server,
        latch,
        store_kind,
        dynamo=dynamo,
        db_path=db_path,
        config=config,
        store=store,
        gateway=app.state.gateway,
    )
    try:
        yield stack
    finally:
        gateway_server.stop()
        upstream_server.stop()
        stack.close_stores()
        store.close()
        if dynamo is not None:
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


@pytest.fixture(params=["chat", "responses", "harmony", "bedrock"])
def wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def model(wire: str) -> str:
    return MODELS[wire]
