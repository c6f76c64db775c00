"""The Lambda edge (``responses_gateway.observability``): what telemetry learns from a response,
what it emits, the upstream key from SSM / Secrets Manager, the lazy store and the app factory."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import boto3  # type: ignore[import-untyped]
import httpx
import pytest

from responses_gateway.config import ConfigError
from responses_gateway.observability import (
    LazyStore,
    NullTelemetry,
    PowertoolsTelemetry,
    RequestRecord,
    TelemetryMiddleware,
    lambda_app,
    load_lambda_config,
    make_telemetry,
    upstream_api_key,
    upstream_client,
)
from responses_gateway.sinks.sse import encode_frame
from responses_gateway.store.local import LocalDynamo
from responses_gateway.tenancy import TenancyConfigError


class Recorder:
    """Telemetry that keeps what it is told."""

    def __init__(self) -> None:
        self.started: list[RequestRecord] = []
        self.finished: list[RequestRecord] = []
        self.upstream: list[tuple[int, float]] = []

    def request_started(self, record: RequestRecord) -> None:
        self.started.append(record)

    def request_finished(self, record: RequestRecord) -> None:
        self.finished.append(record)

    def upstream_response(self, status: int, latency_ms: float) -> None:
        self.upstream.append((status, latency_ms))


def _scope(method: str, path: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(k.encode(), v.encode()) for k, v in (headers or {}).items()],
    }


async def _serve(middleware: TelemetryMiddleware, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    await middleware(scope, receive, send)
    return sent


def _app(status: int, content_type: str, chunks: list[bytes]) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(b"content-type", content_type.encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for index, chunk in enumerate(chunks):
            more = index < len(chunks) - 1
            await send({"type": "http.response.body", "body": chunk, "more_body": more})

    return app


RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [
        {"type": "reasoning", "id": "rs_1"},
        {"type": "function_call", "id": "fc_1", "name": "a", "arguments": "{}"},
        {"type": "function_call", "id": "fc_2", "name": "b", "arguments": "{}"},
    ],
    "usage": {"input_tokens": 11, "output_tokens": 22, "total_tokens": 33},
}


async def test_a_json_create_counts_usage_and_tool_calls() -> None:
    recorder = Recorder()
    body = json.dumps(RESPONSE).encode()
    app = _app(200, "application/json", [body[:10], body[10:]])
    sent = await _serve(TelemetryMiddleware(app, recorder), _scope("POST", "/v1/responses"))
    assert b"".join(m.get("body", b"") for m in sent) == body  # passed through untouched
    (record,) = recorder.finished
    assert (record.status, record.input_tokens, record.output_tokens) == (200, 11, 22)
    assert (record.tool_calls, record.streamed, record.error_type) == (2, False, None)
    assert record.duration_ms >= 0


async def test_a_streamed_create_counts_the_terminal_event_across_chunks() -> None:
    recorder = Recorder()
    frames = (
        encode_frame("response.created", {"type": "response.created", "response": {}})
        + encode_frame("response.output_text.delta", {"type": "x", "delta": "hi"})
        + encode_frame("response.completed", {"type": "response.completed", "response": RESPONSE})
    )
    chunks = [frames[i : i + 7] for i in range(0, len(frames), 7)]
    app = _app(200, "text/event-stream; charset=utf-8", chunks)
    await _serve(TelemetryMiddleware(app, recorder), _scope("POST", "/v1/responses"))
    (record,) = recorder.finished
    assert record.streamed
    assert (record.input_tokens, record.output_tokens, record.tool_calls) == (11, 22, 2)


async def test_a_failed_stream_is_an_error_of_its_code() -> None:
    recorder = Recorder()
    failed = {**RESPONSE, "status": "failed", "error": {"code": "server_error", "message": "x"}}
    frames = encode_frame("response.failed", {"type": "response.failed", "response": failed})
    app = _app(200, "text/event-stream", [frames])
    await _serve(TelemetryMiddleware(app, recorder), _scope("POST", "/v1/responses"))
    assert recorder.finished[0].error_type == "server_error"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"type": "invalid_request_error", "code": "model_not_found"}, "model_not_found"),
        ({"type": "rate_limit_error", "code": None}, "rate_limit_error"),
        ({}, "404"),
    ],
)
async def test_an_error_envelope_is_an_error_of_its_code_or_type(
    error: dict[str, Any], expected: str
) -> None:
    recorder = Recorder()
    body = json.dumps({"error": error}).encode()
    app = _app(404, "application/json", [body])
    await _serve(TelemetryMiddleware(app, recorder), _scope("GET", "/v1/responses/x"))
    assert recorder.finished[0].error_type == expected


async def test_readiness_checks_are_not_observed() -> None:
    recorder = Recorder()
    await _serve(
        TelemetryMiddleware(_app(200, "application/json", [b"{}"]), recorder),
        _scope("GET", "/health"),
    )
    assert recorder.finished == []


async def test_request_ids_come_from_the_adapter_headers_only_when_trusted() -> None:
    context = json.dumps({"requestId": "apigw-req-1", "identity": {"apiKeyId": "key-1"}})
    lambda_context = json.dumps({"request_id": "lambda-req-1"})
    headers = {
        "x-amzn-request-context": context,
        "x-amzn-lambda-context": lambda_context,
        "x-request-id": "client-req",
    }
    app = _app(200, "application/json", [b"{}"])
    trusted, untrusted = Recorder(), Recorder()
    scope = _scope("GET", "/v1/conversations/c", headers)
    await _serve(TelemetryMiddleware(app, trusted, trust_lambda_context=True), scope)
    await _serve(TelemetryMiddleware(app, untrusted), scope)
    record = trusted.finished[0]
    assert (record.request_id, record.api_key_id, record.lambda_request_id) == (
        "apigw-req-1",
        "key-1",
        "lambda-req-1",
    )
    assert record.cold_start is True
    record = untrusted.finished[0]
    assert (record.request_id, record.api_key_id) == ("client-req", None)


async def test_upstream_client_reports_latency_and_status() -> None:
    recorder = Recorder()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429 if request.url.path.endswith("busy") else 200, json={})

    async with upstream_client(recorder, transport=httpx.MockTransport(answer)) as client:
        await client.post("http://upstream.test/v1/chat/completions")
        await client.post("http://upstream.test/v1/busy")
    assert [status for status, _ in recorder.upstream] == [200, 429]
    assert all(latency >= 0 for _, latency in recorder.upstream)


def test_powertools_telemetry_emits_emf_by_error_type_and_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    telemetry = PowertoolsTelemetry("streaming", route_library_logs=False)
    record = RequestRecord(
        method="POST",
        path="/v1/responses",
        request_id="req-42",
        status=429,
        error_type="rate_limit_exceeded",
        input_tokens=3,
    )
    capsys.readouterr()
    telemetry.request_started(record)
    telemetry.upstream_response(429, 12.5)
    telemetry.request_finished(record)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    by_metric = {
        metric["Name"]: line
        for line in lines
        if "_aws" in line
        for directive in line["_aws"]["CloudWatchMetrics"]
        for metric in directive["Metrics"]
    }
    assert by_metric["Errors"]["ErrorType"] == "rate_limit_exceeded"
    assert by_metric["UpstreamErrors"]["Status"] == "429"
    assert by_metric["Requests"]["InputTokens"] == [3.0]
    assert by_metric["UpstreamLatency"]["UpstreamLatency"] == [12.5]
    for line in by_metric.values():
        assert line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ResponsesGateway"
        assert line["function"] == "streaming"
    (log,) = [line for line in lines if line.get("message") == "request"]
    assert (log["correlation_id"], log["status"], log["error_type"]) == (
        "req-42",
        429,
        "rate_limit_exceeded",
    )


def test_without_powertools_telemetry_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aws_lambda_powertools", None)
    assert isinstance(make_telemetry("buffered"), NullTelemetry)


# -- the upstream key ---------------------------------------------------------------------------


@pytest.fixture
def aws(dynamo: LocalDynamo, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """SSM and Secrets Manager on the embedded moto endpoint, for boto3 clients built now."""
    import aws_lambda_powertools.utilities.parameters.base as parameters_base

    monkeypatch.setenv("AWS_ENDPOINT_URL", dynamo.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setenv("AWS_DEFAULT_REGION", dynamo.region)
    monkeypatch.setattr(parameters_base, "DEFAULT_PROVIDERS", {})
    yield {
        "ssm": boto3.client("ssm", region_name=dynamo.region),
        "secrets": boto3.client("secretsmanager", region_name=dynamo.region),
    }


def test_key_from_an_ssm_securestring(aws: dict[str, Any]) -> None:
    aws["ssm"].put_parameter(
        Name="/gw/test/upstream-key", Value="sk-from-ssm", Type="SecureString", Overwrite=True
    )
    env = {
        "UPSTREAM_BASE_URL": "https://api.example.com/v1",
        "UPSTREAM_API_KEY_PARAMETER": "/gw/test/upstream-key",
    }
    config = load_lambda_config(env)
    assert config.providers[0].api_key == "sk-from-ssm"
    assert "sk-from-ssm" not in repr(config)


@pytest.mark.parametrize(
    ("secret", "key"),
    [("sk-plain-secret", "sk-plain-secret"), ('{"api_key": "sk-json-secret"}', "sk-json-secret")],
)
def test_key_from_a_secrets_manager_secret(aws: dict[str, Any], secret: str, key: str) -> None:
    name = f"gw/test/{key}"
    aws["secrets"].create_secret(Name=name, SecretString=secret)
    assert upstream_api_key({"UPSTREAM_API_KEY_SECRET": name}) == key


def test_unreadable_key_is_a_config_error_naming_the_source(aws: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="/gw/test/missing"):
        upstream_api_key({"UPSTREAM_API_KEY_PARAMETER": "/gw/test/missing"})
    aws["secrets"].create_secret(Name="gw/test/json-without-key", SecretString='{"other": "sk-x"}')
    with pytest.raises(ConfigError, match="holds no upstream key") as caught:
        upstream_api_key({"UPSTREAM_API_KEY_SECRET": "gw/test/json-without-key"})
    assert "sk-x" not in str(caught.value)


def test_key_sources_are_exclusive_and_optional() -> None:
    assert upstream_api_key({}) is None
    with pytest.raises(ConfigError, match="not both"):
        upstream_api_key({"UPSTREAM_API_KEY_PARAMETER": "a", "UPSTREAM_API_KEY_SECRET": "b"})
    with pytest.raises(ConfigError, match="UPSTREAM_BASE_URL"):
        load_lambda_config({})


# -- the store and the app ------------------------------------------------------------------------


def test_lazy_store_builds_once_on_first_use() -> None:
    built: list[int] = []

    class Fake:
        async def get_response(self, tenant: str, response_id: str) -> None:
            return None

    def factory() -> Any:
        built.append(1)
        return Fake()

    store = LazyStore(factory)
    assert not store.built and built == []
    assert store.get_response is not None
    assert store.get() is store.get()
    assert built == [1]


def test_lazy_store_prefetches_in_the_background_and_retries_failures() -> None:
    entered, release = threading.Event(), threading.Event()
    attempts: list[str] = []

    def factory() -> Any:
        attempts.append(threading.current_thread().name)
        entered.set()
        release.wait(5)
        if len(attempts) == 1:
            raise RuntimeError("first build fails")
        return object()

    store = LazyStore(factory)
    store.prefetch()
    assert entered.wait(5)  # the prefetch thread is building
    store.prefetch()  # once only, and it does not wait for the build in progress
    release.set()
    built = store.get()  # waits for the prefetch, which failed, then builds again
    assert store.built and store.get() is built
    assert attempts[0] == "store-prefetch"
    assert len(attempts) == 2


def test_lambda_app_fails_fast_on_bad_configuration(deployed_env: dict[str, str]) -> None:
    without_table = {k: v for k, v in deployed_env.items() if k != "DYNAMODB_TABLE"}
    with pytest.raises(ConfigError, match="DYNAMODB_TABLE"):
        lambda_app("buffered", without_table, telemetry=NullTelemetry())
    with pytest.raises(TenancyConfigError):
        lambda_app(
            "buffered", {**deployed_env, "GATEWAY_API_KEYS": ":x"}, telemetry=NullTelemetry()
        )


async def test_lambda_app_builds_the_store_when_the_first_request_arrives(
    deployed_env: dict[str, str],
) -> None:
    app = lambda_app("streaming", deployed_env, telemetry=NullTelemetry())
    store = app.app.state.lazy_store  # type: ignore[attr-defined]
    assert not store.built
    context = json.dumps({"requestId": "r-1", "identity": {"apiKeyId": "key-1"}})
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://fn") as client:
        assert (await client.get("/health")).status_code == 200
        assert not store.built  # readiness checks do not build it
        answer = await client.get(
            "/v1/responses/resp_missing", headers={"x-amzn-request-context": context}
        )
        assert answer.status_code == 404
    assert store.built
