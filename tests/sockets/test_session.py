"""Session without a transport: messages in, messages out, through a real Gateway.

A gateway over a scripted upstream served on loopback and the in-memory store; each test feeds
client messages to :meth:`Session.receive` and reads what ``send`` got.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from responses_gateway.config import parse_config
from responses_gateway.service import Gateway
from responses_gateway.sockets.session import (
    MAX_MESSAGE_BYTES_ENV,
    MAX_SECONDS_ENV,
    Session,
    SessionLimits,
)
from responses_gateway.store.base import Store
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_socket_error, check_socket_stream
from responses_gateway.usage.requestlog import RefusalGate

TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module")
def upstream_server() -> Iterator[tuple[ScriptedUpstream, RunningServer]]:
    upstream = ScriptedUpstream(demo=False)
    with run_in_thread(create_fake_upstream_app(upstream)) as server:
        yield upstream, server


class _NoStore:
    """A store nothing may touch (every create here is store:false)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was used: {name}")


@pytest.fixture
async def session(
    upstream_server: tuple[ScriptedUpstream, RunningServer],
) -> Any:
    upstream, server = upstream_server
    upstream.reset()
    config = parse_config({"providers": [{"base_url": f"{server.url}/v1", "api": "chat"}]})
    async with httpx.AsyncClient() as client:
        store: Store = _NoStore()  # type: ignore[assignment]
        messages: list[dict[str, Any]] = []
        got = asyncio.Event()

        def send(message: bytes) -> None:
            messages.append(json.loads(message))
            got.set()

        session = Session(Gateway(config, client, store), "local", send)
        session.messages = messages  # type: ignore[attr-defined]
        session.got = got  # type: ignore[attr-defined]
        yield session
        await session.close()


async def _until(session: Any, count: int) -> list[dict[str, Any]]:
    """Wait until ``count`` terminal or error messages arrived; all messages so far."""
    while sum(m["type"] in TERMINAL or m["type"] == "error" for m in session.messages) < count:
        session.got.clear()
        await session.got.wait()
    return list(session.messages)


async def test_create_then_continue_from_memory_without_the_store(
    session: Any, upstream_server: tuple[ScriptedUpstream, RunningServer]
) -> None:
    upstream = upstream_server[0]
    upstream.push(Turn(text="one"), Turn(text="two"))
    session.receive(
        json.dumps({"type": "response.create", "model": "m", "input": "a", "store": False})
    )
    first = check_socket_stream(await _until(session, 1))
    session.messages.clear()
    session.receive(
        json.dumps(
            {
                "type": "response.create",
                "model": "m",
                "input": "b",
                "store": False,
                "previous_response_id": first["id"],
            }
        )
    )
    second = check_socket_stream(await _until(session, 1))
    assert second["output"][0]["content"][0]["text"] == "two"
    assert [m["role"] for m in upstream.model_requests()[1].json["messages"]] == [
        "user",
        "assistant",
        "user",
    ]


async def test_busy_stream_is_refused_while_other_streams_run(
    session: Any, upstream_server: tuple[ScriptedUpstream, RunningServer]
) -> None:
    def by_input(body: dict[str, Any], wire: Any) -> Turn:  # whichever request arrives first
        if "first" in json.dumps(body):
            return Turn(text="slow", hold_after=2)
        return Turn(text="other")

    upstream_server[0].push(by_input, by_input)
    create = {"type": "response.create", "model": "m", "input": "first", "store": False}
    session.receive(json.dumps({**create, "stream_id": "s"}))
    session.receive(json.dumps({**create, "stream_id": "s"}))
    [busy] = [m for m in await _until(session, 1) if m["type"] == "error"]
    assert check_socket_error(busy, "s")["code"] == "stream_busy"
    assert set(session.running) == {"s"}
    session.receive(json.dumps({**create, "input": "second", "stream_id": "t"}))
    events = [
        m for m in await _until(session, 2) if m.get("stream_id") == "t" and m["type"] != "error"
    ]
    assert check_socket_stream(events, "t")["output"][0]["content"][0]["text"] == "other"


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("{nope", "invalid_json"),
        ("[1, 2]", "invalid_type"),
        (json.dumps({"type": "session.update"}), "unsupported_event_type"),
        (
            json.dumps({"type": "response.create", "model": "m", "input": "x", "stream_id": 3}),
            "invalid_type",
        ),
        (
            json.dumps({"type": "response.create", "model": "m", "input": "x", "generate": "no"}),
            "invalid_type",
        ),
        (
            json.dumps({"type": "response.create", "model": "m", "input": "x", "background": True}),
            "unsupported_parameter",
        ),
    ],
)
async def test_bad_messages_get_error_events(session: Any, message: str, code: str) -> None:
    session.receive(message)
    [error] = await _until(session, 1)
    assert check_socket_error(error)["code"] == code
    assert session.running == {}


def test_limits_come_from_the_environment() -> None:
    limits = SessionLimits.from_env({MAX_SECONDS_ENV: "90", MAX_MESSAGE_BYTES_ENV: "1000"})
    assert limits == SessionLimits(max_seconds=90.0, max_message_bytes=1000)
    assert SessionLimits.from_env({}) == SessionLimits()


class _LogOnly:
    """A store that takes request-log records and nothing else."""

    def __init__(self) -> None:
        self.logged: list[Any] = []

    async def log_request(self, entry: Any) -> None:
        self.logged.append(entry)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the store was used: {name}")


async def test_refused_messages_are_logged_with_the_handshake_ids_under_the_gate() -> None:
    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1", "api": "chat"}]})
    store = _LogOnly()
    now = [0.0]
    async with httpx.AsyncClient() as client:
        gateway = Gateway(config, client, store)  # type: ignore[arg-type]
        gateway.refusals = RefusalGate(per_tenant=1.0, tenant_burst=2.0, clock=lambda: now[0])
        sent: list[dict[str, Any]] = []
        headers = {"thread-id": "thr-1", "authorization": "Bearer sk-secret-value"}
        session = Session(
            gateway,
            "acme",
            lambda m: sent.append(json.loads(m)),
            api_key_id="key_1",
            client_headers=headers,
        )
        session.receive("{nope secret-words")
        session.receive(json.dumps({"type": "session.update", "model": "m-x"}))
        session.receive(json.dumps({"type": "response.create", "model": "m", "background": True}))
        await session.settle()
        now[0] = 1.0  # one more token for the tenant
        session.receive(json.dumps({"type": "response.create", "model": "m", "stream_id": 7}))
        await session.close()

    assert [check_socket_error(m)["code"] for m in sent] == [
        "invalid_json",
        "unsupported_event_type",
        "unsupported_parameter",  # refused, counted, not written (the tenant's burst is 2)
        "invalid_type",
    ]
    assert [(e.status, e.model, e.api_key_id, e.tenant) for e in store.logged] == [
        ("refused", "", "key_1", "acme"),
        ("refused", "m-x", "key_1", "acme"),
        ("refused", "m", "key_1", "acme"),
    ]
    first, _, last = (entry.extra for entry in store.logged)
    assert first["transport"] == "websocket" and first["client"] == {"thread_id": "thr-1"}
    assert (first["http_status"], first["error_code"]) == (400, "invalid_json")
    assert (last["error_code"], last["error_param"], last["refusals_dropped"]) == (
        "invalid_type",
        "stream_id",
        1,
    )
    logged = repr(store.logged)
    assert "secret-words" not in logged and "sk-secret-value" not in logged


def test_without_an_event_loop_a_refusal_is_only_answered() -> None:
    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1", "api": "chat"}]})
    sent: list[bytes] = []
    gateway = Gateway(config, None, _NoStore())  # type: ignore[arg-type]
    Session(gateway, "local", sent.append).receive("{nope")
    assert check_socket_error(json.loads(sent[0]))["code"] == "invalid_json"
