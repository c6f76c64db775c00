"""The local access log (observability.AccessLog, what ``serve`` prints): one JSON line per
request with method, route, status, duration, request id, tenant, key id, model, tokens and
error code; never a body or a key."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.observability import AccessLog, TelemetryMiddleware
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.tenancy import TenancyPolicy, key_id_of, parse_keys
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, Turn, Usage
from responses_gateway.testing.server import run_in_thread

KEY = "sk-access-log-secret"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, io.StringIO, ScriptedUpstream]]:
    upstream = ScriptedUpstream(demo=False)
    upstream_server = run_in_thread(create_fake_upstream_app(upstream))
    config = parse_config(
        {"providers": [{"name": "c", "base_url": f"{upstream_server.url}/v1", "api": "chat"}]}
    )
    dynamo = start_local_dynamodb(table_name="access-log")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    app = create_app(config, store)
    app.state.tenancy = TenancyPolicy(keys=parse_keys(f"{KEY}:acme"))
    lines = io.StringIO()
    server = run_in_thread(TelemetryMiddleware(app, AccessLog(lines)))
    try:
        yield server.url, lines, upstream
    finally:
        server.stop()
        upstream_server.stop()
        store.close()
        dynamo.stop()


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_one_line_per_request_with_tenant_model_tokens_and_no_secrets(
    served: tuple[str, io.StringIO, ScriptedUpstream],
) -> None:
    url, stream, upstream = served
    upstream.push(Turn(text="logged", usage=Usage(6, 2)))
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    response = client.responses.with_raw_response.create(model="m", input="a secret prompt")
    with httpx.Client(base_url=url) as http:
        http.get("/v1/responses/resp_missing", headers={"x-request-id": "req-client-1"})
        http.get("/health")  # readiness checks are not logged

    created, refused = _lines(stream)[-2:]
    assert created["request_id"] == response.headers["x-request-id"]
    assert {k: v for k, v in created.items() if k not in ("ts", "duration_ms", "request_id")} == {
        "msg": "request",
        "method": "POST",
        "route": "/v1/responses",
        "status": 200,
        "tenant": "acme",
        "api_key_id": key_id_of(KEY),
        "model": "m",
        "streamed": False,
        "input_tokens": 6,
        "output_tokens": 2,
        "tool_calls": 0,
        "error_code": None,
    }
    assert isinstance(created["duration_ms"], float)
    assert (refused["status"], refused["error_code"], refused["request_id"]) == (
        401,
        "invalid_api_key",
        "req-client-1",
    )
    text = stream.getvalue()
    assert KEY not in text and "secret prompt" not in text and "logged" not in text
