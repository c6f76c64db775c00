"""The console's read endpoints end to end, on both stores: what a request leaves in the request
log (HTTP and WebSocket mode, served or refused before its loop), conversations listed and
walked, traces ingested then read with their response spans joined, and the content kept only
for the tenants ``request_log.content_tenants`` names."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.tenancy import TenancyPolicy, parse_keys
from responses_gateway.testing.script import ScriptedUpstream, Turn, Usage
from responses_gateway.testing.server import run_in_thread
from responses_gateway.usage.requestlog import RefusalGate

from .conftest import MODELS, Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")

MODEL = MODELS["chat"]


def _records(http: httpx.Client, **params: str) -> list[dict[str, Any]]:
    answer = http.get("/console/requests", params={"limit": "200", **params})
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data


def test_codex_store_false_turn_is_logged_with_its_ids_ttft_and_its_plain_provider(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    thread = f"thr-{uuid.uuid4().hex[:10]}"
    upstream.push(Turn(text="one two three", usage=Usage(11, 3)))
    body = {
        "model": MODEL,
        "stream": True,
        "store": False,
        "input": "hi",
        "client_metadata": {"thread_id": thread, "turn_id": "turn-1"},
    }
    headers = {"session-id": f"sess-{thread}", "originator": "codex_exec"}
    with http.stream("POST", "/responses", json=body, headers=headers) as answer:
        events = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data:")]
    response_id = events[-1]["response"]["id"]

    (record,) = _records(http, session=thread)

    assert record["id"] == response_id
    assert (record["status"], record["model"], record["tenant"]) == ("completed", MODEL, "local")
    assert (record["provider"], record["wire"], record["transport"]) == ("chat", "chat", "http")
    # A plain provider answers as the router names an unrouted model's one deployment.
    assert (record["stored"], record["stream"]) == (False, True)
    assert record["deployment"] == f"chat/{MODEL}"
    assert record["client"] == {
        "thread_id": thread,
        "turn_id": "turn-1",
        "session_id": f"sess-{thread}",
        "originator": "codex_exec",
    }
    assert record["usage"]["total_tokens"] == 14
    assert isinstance(record["ttft_ms"], int) and isinstance(record["duration_ms"], int)
    assert 0 <= record["ttft_ms"] <= record["duration_ms"]
    assert http.get(f"/console/requests/{response_id}").json() == record


def test_content_is_logged_only_for_the_tenants_the_operator_names(
    stack: Stack, upstream: ScriptedUpstream
) -> None:
    assert stack.config is not None
    config = dataclasses.replace(stack.config, log_content=frozenset({"logged"}))
    app = create_app(config, stack.open_store())
    app.state.tenancy = TenancyPolicy(keys=parse_keys("sk-logged:logged,sk-plain:plain"))
    gateway = run_in_thread(app)
    body = {"model": MODEL, "store": False, "input": "say hi"}
    try:
        ids: dict[str, str] = {}
        for tenant in ("logged", "plain"):
            upstream.push(Turn(text=f"hi {tenant}"))
            with httpx.Client(base_url=gateway.url, timeout=30) as http:
                auth = {"authorization": f"Bearer sk-{tenant}"}
                created = http.post("/v1/responses", json=body, headers=auth)
                assert created.status_code == 200, created.text
                ids[tenant] = created.json()["id"]
                record = http.get(f"/v1/console/requests/{ids[tenant]}", headers=auth).json()
                view = http.get(f"/v1/console/responses/{ids[tenant]}", headers=auth).json()
            assert view["stored"] is None and view["request"] == record
            if tenant == "logged":
                assert record["content"]["input"][0].pop("id").startswith("msg_")
                parameters = record["content"].pop("request")
                assert (parameters["store"], parameters["tools"]) == (False, [])
                assert record["content"] == {
                    "input": [
                        {  # as stored: completed into the spec's item resource
                            "type": "message",
                            "role": "user",
                            "content": [{"type": "input_text", "text": "say hi"}],
                            "status": "completed",
                        }
                    ],
                    "output": created.json()["output"],
                    "truncated": False,
                }
            else:
                assert "content" not in record
            assert record["stored"] is False and record["tenant"] == tenant
    finally:
        gateway.stop()


def test_buffered_create_records_its_time_to_first_token(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="fine"))
    created = client.responses.create(model=MODEL, input="how are you")
    record = http.get(f"/console/requests/{created.id}").json()
    assert record["stream"] is False and record["stored"] is True
    assert 0 <= record["ttft_ms"] <= record["duration_ms"]


def test_creates_refused_before_the_loop_are_logged_with_the_error_their_client_got(
    stack: Stack, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    # refusals earlier tests sent (malformed WebSocket messages...) used up the session gateway's
    # refusal budget: this test starts with a full one
    stack.gateway.refusals = RefusalGate()
    thread = f"thr-{uuid.uuid4().hex[:10]}"
    unknown = http.post(
        "/responses",
        json={"model": "no-such-model", "input": "hi", "client_metadata": {"thread_id": thread}},
    )
    invalid = http.post(
        "/responses",
        json={"model": MODEL, "input": "hi", "temperature": "hot"},
        headers={"thread-id": thread},
    )
    assert (unknown.status_code, invalid.status_code) == (404, 400)

    records = _records(http, session=thread)

    assert [r["id"] for r in records] == [
        invalid.headers["x-request-id"],
        unknown.headers["x-request-id"],
    ]
    bad, missing = records
    assert (missing["status"], missing["http_status"], missing["model"]) == (
        "refused",
        404,
        "no-such-model",
    )
    assert missing["error_code"] == "model_not_found"
    assert missing["error_type"] == unknown.json()["error"]["type"]
    assert (bad["status"], bad["http_status"], bad["model"]) == ("refused", 400, MODEL)
    assert bad["error_param"] == invalid.json()["error"]["param"]
    assert bad["error_message"] == invalid.json()["error"]["message"]
    assert missing["error_message"] == unknown.json()["error"]["message"]
    assert bad["usage"]["total_tokens"] == 0
    assert upstream.requests == []  # nothing was sent upstream


def _next_of(connection: Any, kind: str) -> dict[str, Any]:
    while True:
        event: dict[str, Any] = json.loads(connection.recv_bytes())
        if event["type"] == kind:
            return event


def test_websocket_creates_leave_records_served_and_refused(
    stack: Stack, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    thread = f"thr-{uuid.uuid4().hex[:10]}"
    upstream.push(Turn(text="over the socket", usage=Usage(7, 2)))
    client = openai.OpenAI(
        base_url=stack.base_url,
        api_key="sk-client",
        max_retries=0,
        default_headers={"thread-id": thread},
    )
    with client.responses.connect() as connection:
        connection.send({"type": "response.create", "model": MODEL, "input": "hi"})
        served = _next_of(connection, "response.completed")["response"]["id"]
        connection.send({"type": "response.create", "model": "no-such-model", "input": "x"})
        assert _next_of(connection, "error")["error"]["code"] == "model_not_found"

    records = _records(http, session=thread)

    assert [(r["status"], r["transport"]) for r in records] == [
        ("refused", "websocket"),
        ("completed", "websocket"),
    ]
    assert records[1]["id"] == served and records[1]["usage"]["total_tokens"] == 9
    assert records[1]["stored"] is True and isinstance(records[1]["ttft_ms"], int)
    assert records[0]["error_code"] == "model_not_found"


def test_websocket_messages_refused_before_their_run_are_logged_with_the_handshake_ids(
    stack: Stack, upstream: ScriptedUpstream
) -> None:
    # a gateway of its own: the session's gateway's refusal gate is shared by every test
    assert stack.config is not None
    app = create_app(stack.config, stack.open_store())
    app.state.tenancy = TenancyPolicy(keys=parse_keys("sk-sockets:sockets"))
    gateway = run_in_thread(app)
    thread = f"thr-{uuid.uuid4().hex[:10]}"
    client = openai.OpenAI(
        base_url=f"{gateway.url}/v1",
        api_key="sk-sockets",
        max_retries=0,
        default_headers={"thread-id": thread, "session_id": f"sess-{thread}"},
    )
    create = {"type": "response.create", "model": MODEL, "input": "private words"}
    try:
        with client.responses.connect() as connection:
            connection.send_raw("{not json, private words")
            assert _next_of(connection, "error")["error"]["code"] == "invalid_json"
            connection.send_raw(json.dumps({"type": "session.update", "model": MODEL}))
            assert _next_of(connection, "error")["error"]["code"] == "unsupported_event_type"
            connection.send_raw(json.dumps({**create, "background": True}))
            assert _next_of(connection, "error")["error"]["code"] == "unsupported_parameter"
        with httpx.Client(base_url=gateway.url, timeout=30) as http:
            answer = http.get(
                "/v1/console/requests",
                params={"session": thread},
                headers={"authorization": "Bearer sk-sockets"},
            )
    finally:
        gateway.stop()

    records = {r["error_code"]: r for r in answer.json()["data"]}

    assert set(records) == {"invalid_json", "unsupported_event_type", "unsupported_parameter"}
    for record in records.values():
        assert (record["status"], record["transport"], record["http_status"]) == (
            "refused",
            "websocket",
            400,
        )
        assert record["client"] == {"thread_id": thread, "session_id": f"sess-{thread}"}
        assert record["tenant"] == "sockets" and record["usage"]["total_tokens"] == 0
    assert records["invalid_json"]["model"] == ""  # the message is never read past its JSON
    assert records["unsupported_parameter"]["model"] == MODEL
    assert records["unsupported_parameter"]["error_param"] == "background"
    assert "private words" not in json.dumps(records)
    assert upstream.requests == []


def test_background_runs_record_their_time_to_first_token(
    stack: Stack, client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="later, in the background", usage=Usage(5, 4)))
    queued = client.responses.create(model=MODEL, input="run it later", background=True)
    stack.wait_for_status(queued.id, "completed")

    record = http.get(f"/console/requests/{queued.id}").json()

    assert (record["status"], record["background"]) == ("completed", True)
    assert isinstance(record["ttft_ms"], int) and isinstance(record["duration_ms"], int)
    assert 0 <= record["ttft_ms"] <= record["duration_ms"]


def test_conversations_are_listed_newest_first_and_walked_in_order(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    tag = uuid.uuid4().hex[:8]
    older = client.conversations.create(metadata={"tag": tag, "n": "1"})
    newer = client.conversations.create(
        metadata={"tag": tag, "n": "2"},
        items=[{"type": "message", "role": "user", "content": "first"}],
    )
    upstream.push(Turn(text="answer"))
    client.responses.create(model=MODEL, input="second", conversation=newer.id)
    client.conversations.update(older.id, metadata={"tag": tag, "n": "one"})

    page = http.get("/console/conversations", params={"limit": "200"}).json()
    mine = [c for c in page["data"] if c["metadata"].get("tag") == tag]
    assert {(c["id"], c["metadata"]["n"]) for c in mine} == {(newer.id, "2"), (older.id, "one")}
    order = [(c["created_at"], c["id"]) for c in mine]  # newest first; ids break a tie
    assert order == sorted(order, reverse=True)

    first = http.get(f"/console/conversations/{newer.id}/items", params={"limit": "2"}).json()
    assert first["conversation"]["id"] == newer.id and first["has_more"] is True
    rest = http.get(
        f"/console/conversations/{newer.id}/items", params={"after": first["last_id"]}
    ).json()
    texts = [
        (i["role"], i["content"][0]["text"])
        for i in first["data"] + rest["data"]
        if i["type"] == "message"
    ]
    assert texts == [("user", "first"), ("user", "second"), ("assistant", "answer")]
    assert rest["has_more"] is False
    missing = http.get("/console/conversations/conv_missing/items")
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "conversation_id"


def test_traces_ingested_are_listed_and_joined_to_the_response(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="traced answer"))
    created = client.responses.create(model=MODEL, input="trace me")
    trace_id = f"trace_{uuid.uuid4().hex}"
    batch = {
        "data": [
            {"object": "trace", "id": trace_id, "workflow_name": "Agent workflow"},
            {
                "object": "trace.span",
                "id": "span_1",
                "trace_id": trace_id,
                "started_at": "2026-01-01T00:00:00.000Z",
                "ended_at": "2026-01-01T00:00:01.000Z",
                "span_data": {"type": "response", "response_id": created.id},
            },
        ]
    }
    sent = http.post("/traces/ingest", json=batch, headers={"OpenAI-Beta": "traces=v1"})
    assert sent.status_code == 204

    listed = http.get("/console/traces").json()["data"]
    assert listed[0]["id"] == trace_id and listed[0]["workflow_name"] == "Agent workflow"
    view = http.get(f"/console/traces/{trace_id}").json()
    (span,) = view["spans"]
    assert span["gateway"]["output"][0]["content"][0]["text"] == "traced answer"
    assert span["gateway"]["input_items"][0]["content"][0]["text"] == "trace me"
