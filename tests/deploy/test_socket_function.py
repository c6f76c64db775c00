"""The socket function (API Gateway WebSocket API) under moto: its routes, runs and state.

GIVEN the entry point loaded from ``functions/socket/``, a moto server holding the table and
the management API (``PostToConnection`` lands in moto's connection record), and the scripted
upstream, WHEN API Gateway's events ($connect, $default, $disconnect) and the asynchronous runs
$default hands over arrive, THEN: the connection's tenant and state items carry the connection's
TTL, every posted message is one event (judged by the stream validator), a store:false chain
continues from the connection's state with nothing written to the table, a busy stream and bad
messages get error events, a client that left cancels its response, and the connection limit
ends the connection.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from responses_gateway.observability import NullTelemetry, lambda_app
from responses_gateway.sockets.aws import CONNECTION_SECONDS, SocketRuntime, handle
from responses_gateway.store.local import LocalDynamo
from responses_gateway.tenancy import TenancyPolicy
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.stream_check import check_socket_error, check_socket_stream

from .conftest import load_entry

API_KEY_ID = "key-id-socket"
DOMAIN = "abc123.execute-api.us-east-1.amazonaws.com"


def _event(route: str, connection_id: str, body: Any = None, key_id: str | None = API_KEY_ID):
    context: dict[str, Any] = {
        "routeKey": route,
        "eventType": {"$connect": "CONNECT", "$disconnect": "DISCONNECT"}.get(route, "MESSAGE"),
        "connectionId": connection_id,
        "domainName": DOMAIN,
        "stage": "prod",
        "apiId": "abc123",
        "requestId": "req-1",
        "identity": {"sourceIp": "127.0.0.1"},
    }
    if key_id is not None:
        context["identity"]["apiKeyId"] = key_id
    event: dict[str, Any] = {"requestContext": context, "isBase64Encoded": False}
    if route == "$connect":
        event["headers"] = {"Authorization": "Bearer sk-client", "Host": DOMAIN}
    if body is not None:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    return event


class Harness:
    """The runtime of the socket function against moto, with the async invocations queued."""

    def __init__(self, dynamo: LocalDynamo, env: dict[str, str]) -> None:
        self.dynamo = dynamo
        self.invocations: list[dict[str, Any]] = []
        self.now = time.time()
        self.management = boto3.client(
            "apigatewaymanagementapi",
            endpoint_url=dynamo.endpoint_url,
            region_name=dynamo.region,
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )
        app: Any = lambda_app("socket", env, telemetry=NullTelemetry()).app
        self.gateway = app.state.gateway
        self.runtime = SocketRuntime(
            dynamodb=dynamo.client,
            table=dynamo.table_name,
            management=lambda url: self.management,
            invoke=self.invocations.append,
            gateway=lambda: self.gateway,
            clock=lambda: self.now,
            tenancy=TenancyPolicy.from_env(env),
        )

    def send(self, connection_id: str, body: Any) -> dict[str, Any]:
        return handle(_event("$default", connection_id, body), self.runtime)

    def run_next(self) -> None:
        """What Lambda does with the queued asynchronous invocation."""
        handle(self.invocations.pop(0), self.runtime)

    def posted(self, connection_id: str) -> list[dict[str, Any]]:
        """Every message posted to the connection so far (moto concatenates them)."""
        from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends

        backend = apigatewaymanagementapi_backends["123456789012"][self.dynamo.region]
        data = backend.connections[connection_id].data.decode()
        decoder = json.JSONDecoder()
        events, position = [], 0
        while position < len(data):
            event, position = decoder.raw_decode(data, position)
            events.append(event)
        return events

    def items(self, connection_id: str) -> dict[str, dict[str, Any]]:
        answer = self.dynamo.client.query(
            TableName=self.dynamo.table_name,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": f"WS#{connection_id}"}},
        )
        return {item["SK"]["S"]: item for item in answer["Items"]}

    def table_keys(self) -> set[str]:
        scan = self.dynamo.client.scan(TableName=self.dynamo.table_name)
        # the usage ledger (a response's marker SK = U, hour rows U#<day> and five-minute rows
        # F#<day>, a tenant's totals T#<tenant>#B, its request log T#<tenant>#RL) counts every
        # response, stored or not, and holds no content
        return {
            item["PK"]["S"]
            for item in scan["Items"]
            if not (
                item["SK"]["S"] == "U"
                or item["PK"]["S"].startswith(("U#", "F#"))
                or item["PK"]["S"].endswith(("#B", "#RL"))
            )
        }


@pytest.fixture
def harness(
    dynamo: LocalDynamo, deployed_env: dict[str, str], upstream: ScriptedUpstream
) -> Harness:
    # the connections' own items only: moto's state is shared by every server in the process
    for item in dynamo.client.scan(TableName=dynamo.table_name)["Items"]:
        if item["PK"]["S"].startswith("WS#"):
            key = {"PK": item["PK"], "SK": item["SK"]}
            dynamo.client.delete_item(TableName=dynamo.table_name, Key=key)
    from moto.apigatewaymanagementapi.models import apigatewaymanagementapi_backends

    apigatewaymanagementapi_backends["123456789012"][dynamo.region].connections.clear()
    return Harness(dynamo, deployed_env)


def _responses(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Split posted events into responses (each validated); error events stay as they are."""
    out: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "error":
            out.append(event)
            continue
        current.append(event)
        if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
            out.append(check_socket_stream(current, event.get("stream_id")))
            current = []
    assert current == []
    return out


def test_entry_point_loads_without_the_gateway(deployed_env: dict[str, str]) -> None:
    module = load_entry("socket", "socket_handler.py", deployed_env)
    assert callable(module.handler)


def test_connect_needs_an_api_key_and_keeps_the_tenant_for_the_connection_life(
    harness: Harness,
) -> None:
    refused = handle(_event("$connect", "c-none", key_id=None), harness.runtime)
    assert refused == {"statusCode": 401}
    assert harness.items("c-none") == {}
    assert handle(_event("$connect", "c1"), harness.runtime) == {"statusCode": 200}
    connection = harness.items("c1")["C"]
    assert connection["tenant"] == {"S": API_KEY_ID}
    assert int(connection["ttl"]["N"]) == int(harness.now) + CONNECTION_SECONDS


def test_create_runs_in_an_async_invocation_and_posts_one_event_per_message(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    handle(_event("$connect", "c1"), harness.runtime)
    upstream.push(Turn(text="hello there"))
    create = {"type": "response.create", "model": "gpt-test", "input": "hi", "store": False}
    assert harness.send("c1", create) == {"statusCode": 200}
    assert harness.posted("c1") == []  # $default answered at once; nothing ran yet
    [invocation] = harness.invocations
    assert invocation["socket_run"]["tenant"] == API_KEY_ID
    assert "B#" in harness.items("c1")  # the stream is busy until the run ends
    harness.run_next()
    [response] = _responses(harness.posted("c1"))
    assert response["status"] == "completed"
    assert response["output"][0]["content"][0]["text"] == "hello there"
    items = harness.items("c1")
    assert "B#" not in items
    latest = items["L#"]
    assert latest["rid"] == {"S": response["id"]}
    assert latest["ttl"] == items["C"]["ttl"]  # the state lives as long as the connection


def test_store_false_chain_continues_from_connection_state_without_table_writes(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    handle(_event("$connect", "c1"), harness.runtime)
    before = harness.table_keys()
    upstream.push(Turn(text="first answer"), Turn(text="second answer"))
    base = {"type": "response.create", "model": "gpt-test", "store": False}
    harness.send("c1", {**base, "input": "alpha"})
    harness.run_next()
    [first] = _responses(harness.posted("c1"))
    harness.send("c1", {**base, "input": "beta", "previous_response_id": first["id"]})
    harness.run_next()
    [_, second] = _responses(harness.posted("c1"))
    assert second["output"][0]["content"][0]["text"] == "second answer"
    sent = json.dumps(upstream.model_requests()[-1].json)
    assert "alpha" in sent and "first answer" in sent and "beta" in sent
    assert harness.table_keys() == before  # only the connection's own items changed


def test_a_refused_continuation_evicts_its_base_from_the_connection(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    handle(_event("$connect", "c1"), harness.runtime)
    upstream.push(Turn(text="first answer"))
    base = {"type": "response.create", "model": "gpt-test", "store": False}
    harness.send("c1", {**base, "input": "alpha"})
    harness.run_next()
    [first] = _responses(harness.posted("c1"))
    assert any(k.startswith("L#") for k in harness.items("c1"))
    orphan = [{"type": "function_call_output", "call_id": "call_nobody", "output": "x"}]
    harness.send("c1", {**base, "input": orphan, "previous_response_id": first["id"]})
    harness.run_next()
    refused = check_socket_error(harness.posted("c1")[-1])
    assert refused["param"] == "input"
    assert not any(k.startswith("L#") for k in harness.items("c1"))  # evicted
    harness.send("c1", {**base, "input": "again", "previous_response_id": first["id"]})
    harness.run_next()
    assert check_socket_error(harness.posted("c1")[-1])["code"] == "previous_response_not_found"
    assert len(upstream.model_requests()) == 1


def test_busy_stream_bad_json_and_unknown_previous_get_error_events(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    handle(_event("$connect", "c1"), harness.runtime)
    create = {"type": "response.create", "model": "gpt-test", "input": "hi", "stream_id": "s"}
    harness.send("c1", create)
    harness.send("c1", create)  # the first has not run yet: its stream is busy
    harness.send("c1", "{oops")
    harness.send("c1", {**create, "stream_id": "t", "previous_response_id": "resp_nope"})
    busy, bad = harness.posted("c1")
    assert check_socket_error(busy, "s")["code"] == "stream_busy"
    assert check_socket_error(bad)["code"] == "invalid_json"
    harness.invocations.pop(0)
    harness.run_next()  # stream t: the unknown previous id
    [_, _, unknown] = harness.posted("c1")
    assert check_socket_error(unknown, "t")["code"] == "previous_response_not_found"
    assert "B#t" not in harness.items("c1")  # freed before the error was posted


class _Gone(Exception):
    pass


class _LeavingClient:
    """A management client whose connection goes away after ``keep`` messages."""

    exceptions = SimpleNamespace(GoneException=_Gone)

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.messages: list[dict[str, Any]] = []

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> None:  # noqa: N803
        if len(self.messages) >= self.keep:
            raise _Gone()
        self.messages.append(json.loads(Data))


def test_a_client_that_left_cancels_its_response_and_keeps_partial_output(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    handle(_event("$connect", "c1"), harness.runtime)
    leaving = _LeavingClient(keep=5)
    harness.runtime.management = lambda url: leaving
    upstream.push(Turn(text="one two three four five six", hold_after=6))
    harness.send("c1", {"type": "response.create", "model": "gpt-test", "input": "count"})
    harness.run_next()
    response_id = leaving.messages[0]["response"]["id"]
    record = harness.gateway.store
    stored = harness.runtime.loop.run_until_complete(record.get_response(API_KEY_ID, response_id))
    assert stored is not None and stored.status == "cancelled"
    assert stored.output[0]["content"][0]["text"].startswith("one")
    assert upstream.wait_for_disconnects(1, timeout=10) == 1


class _Recording:
    """Forwards to moto's management API and records what was posted and closed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.exceptions = inner.exceptions
        self.messages: list[dict[str, Any]] = []
        self.closed: list[str] = []

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> None:  # noqa: N803
        self.messages.append(json.loads(Data))
        self.inner.post_to_connection(ConnectionId=ConnectionId, Data=Data)

    def delete_connection(self, *, ConnectionId: str) -> None:  # noqa: N803
        self.closed.append(ConnectionId)
        self.inner.delete_connection(ConnectionId=ConnectionId)


def test_connection_limit_and_disconnect(harness: Harness) -> None:
    handle(_event("$connect", "c1"), harness.runtime)
    recording = _Recording(harness.management)
    harness.runtime.management = lambda url: recording
    harness.runtime.max_seconds = 60
    harness.now += 61
    harness.send("c1", {"type": "response.create", "model": "gpt-test", "input": "hi"})
    [limit] = recording.messages
    assert check_socket_error(limit)["code"] == "websocket_connection_limit_reached"
    assert recording.closed == ["c1"]  # the server ends the connection after the error
    assert harness.invocations == []
    handle(_event("$disconnect", "c1"), harness.runtime)
    assert harness.items("c1") == {}


class _PayloadTooLarge(Exception):
    pass


class _LimitedClient(_LeavingClient):
    """A management client refusing messages over ``limit`` bytes (API Gateway: 128 KB)."""

    def __init__(self, limit: int) -> None:
        super().__init__(keep=10_000)
        self.limit = limit

    def post_to_connection(self, *, ConnectionId: str, Data: bytes) -> None:  # noqa: N803
        if len(Data) > self.limit:
            raise _PayloadTooLarge()
        super().post_to_connection(ConnectionId=ConnectionId, Data=Data)


def test_an_event_over_the_message_limit_becomes_an_error_event(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    handle(_event("$connect", "c1"), harness.runtime)
    limited = _LimitedClient(limit=1500)
    harness.runtime.management = lambda url: limited
    upstream.push(Turn(text=" ".join(["word"] * 400), chunk_size=40))
    harness.send("c1", {"type": "response.create", "model": "gpt-test", "input": "long"})
    harness.run_next()
    types = [m["type"] for m in limited.messages]
    assert types[0] == "response.created"
    assert "response.completed" not in types  # it carries the whole output: over the limit
    errors = [check_socket_error(m) for m in limited.messages if m["type"] == "error"]
    assert errors and all(e["code"] == "event_too_large" for e in errors)
    response_id = limited.messages[0]["response"]["id"]
    assert f"GET /v1/responses/{response_id}" in errors[-1]["message"]


@dataclass
class _Context:
    """A Lambda context whose invocation is about to end."""

    remaining_ms: int = 60_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def _asked(body: Any) -> tuple[str, int]:
    """A chat request's first user message and its message count."""
    messages = body.get("messages") or []
    first = next((m.get("content") for m in messages if m.get("role") == "user"), None)
    return (first if isinstance(first, str) else json.dumps(first), len(messages))


def test_a_long_stored_run_hands_over_to_the_worker_and_a_follower_posts_the_rest(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    from responses_gateway.mcp.security import McpPolicy
    from responses_gateway.testing.mcp_servers import start_mcp_server

    harness.gateway._mcp_policy = McpPolicy(allow_http=True, allow_loopback=True)
    harness.runtime.hand_over_margin = 3600.0  # past the hand-over time from the first action
    handle(_event("$connect", "c1"), harness.runtime)
    with start_mcp_server("calc") as calc:
        tool = {
            "type": "mcp",
            "server_label": "calc",
            "server_url": calc.url,
            "require_approval": "never",
        }
        upstream.push(
            Turn(tool_calls=[ToolCall("calc__add", '{"a": 2, "b": 3}', "call_1")]),
            Turn(text="The sum is 5"),
        )
        create = {
            "type": "response.create",
            "model": "gpt-test",
            "input": "2+3?",
            "tools": [tool],
            "stream_id": "s",
        }
        harness.send("c1", create)
        handle(harness.invocations.pop(0), harness.runtime, _Context())  # the run
        [follow] = harness.invocations  # it handed over after its first model call
        assert follow["socket_follow"]["stream_id"] == "s"
        # one model call so far, this test's (a stray request names its own input)
        assert [_asked(r.json) for r in upstream.model_requests()] == [("2+3?", 1)]
        handle(harness.invocations.pop(0), harness.runtime, _Context())  # the follower
    events = harness.posted("c1")
    response = check_socket_stream(events, "s")  # one stream, seamless across the hand-over
    assert [item["type"] for item in response["output"]] == [
        "mcp_list_tools",
        "mcp_call",
        "message",
    ]
    assert response["output"][-1]["content"][0]["text"] == "The sum is 5"
    assert harness.invocations == []  # it ended within this follower
    items = harness.items("c1")
    assert "B#s" not in items and "L#s" not in items  # idle; the stored record continues it
    upstream.push(Turn(text="again"))
    harness.send("c1", {**create, "input": "more", "previous_response_id": response["id"]})
    harness.run_next()
    last = _responses(harness.posted("c1")[len(events) :])[-1]
    assert last["output"][-1]["content"][0]["text"] == "again"
    assert "The sum is 5" in json.dumps(upstream.model_requests()[-1].json)


def _request_log(harness: Harness) -> dict[str, Any]:
    """The connection tenant's request-log records, by id."""
    page = harness.runtime.loop.run_until_complete(
        harness.gateway.store.list_requests(API_KEY_ID, limit=200)
    )
    return {entry.response_id: entry for entry in page.entries}


def test_the_request_log_gets_the_handshake_ids_and_every_refused_message(
    harness: Harness, upstream: ScriptedUpstream
) -> None:
    # GIVEN a handshake carrying Codex's ids as headers (later messages carry no headers)
    thread = f"thr-{time.time_ns()}"
    connect = _event("$connect", "c1")
    connect["headers"].update(
        {"session_id": f"sess-{thread}", "Thread-Id": thread, "Cookie": "c=1"}
    )
    handle(connect, harness.runtime)
    connection = harness.items("c1")["C"]
    assert connection["key"] == {"S": API_KEY_ID}
    assert connection["client"] == {
        "M": {"session_id": {"S": f"sess-{thread}"}, "thread-id": {"S": thread}}
    }
    assert "sk-client" not in json.dumps(connection) and "c=1" not in json.dumps(connection)
    client = {"session_id": f"sess-{thread}", "thread_id": thread}
    before = set(_request_log(harness))

    # WHEN a create runs, a create meets its busy stream, a message is not JSON and a create
    # breaks a socket rule
    upstream.push(Turn(text="hello"))
    create = {"type": "response.create", "model": "gpt-test", "input": "hi", "store": False}
    harness.send("c1", create)
    harness.send("c1", create)  # not run yet: its stream is busy
    harness.send("c1", "{oops private")
    harness.send("c1", {**create, "background": True})
    assert len(harness.invocations) == 1  # the refused ones start no run
    harness.run_next()

    # THEN each left a record with the key id and the handshake's client ids
    posted = harness.posted("c1")
    assert [check_socket_error(e)["code"] for e in posted if e["type"] == "error"] == [
        "stream_busy",
        "invalid_json",
        "unsupported_parameter",
    ]
    [served] = [e["response"]["id"] for e in posted if e["type"] == "response.completed"]
    records = {k: v for k, v in _request_log(harness).items() if k not in before}
    assert records[served].status == "completed"
    refused = {e.extra["error_code"]: e for e in records.values() if e.status == "refused"}
    assert set(refused) == {"stream_busy", "invalid_json", "unsupported_parameter"}
    for entry in records.values():
        assert (entry.api_key_id, entry.tenant) == (API_KEY_ID, API_KEY_ID)
        assert (entry.extra["client"], entry.extra["transport"]) == (client, "websocket")
    assert refused["stream_busy"].model == "gpt-test"
    assert "private" not in repr(records)
    # the socket rule was checked before the stream was marked busy: it is free
    assert "B#" not in harness.items("c1")


def test_the_runtime_keeps_shared_mcp_servers_on_its_container_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from responses_gateway import observability

    kept: list[Any] = []
    gateway = SimpleNamespace(keep_shared_mcp=kept.append)
    built: list[str] = []

    def fake_lambda_app(function: str) -> Any:
        built.append(function)
        return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(gateway=gateway)))

    monkeypatch.setattr(observability, "lambda_app", fake_lambda_app)
    monkeypatch.setenv("DYNAMODB_TABLE", "gateway")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    runtime = SocketRuntime.from_env()
    try:
        assert runtime.gateway() is gateway and runtime.gateway() is gateway
    finally:
        runtime.loop.close()

    assert built == ["socket"]
    assert kept == [runtime.loop]
