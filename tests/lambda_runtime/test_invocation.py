"""One invocation through the gateway's Lambda runtime, against the Runtime API stand-in.

GIVEN small ASGI apps that misbehave on purpose (fail before or after their first byte, never
finish, go quiet while their client leaves), WHEN the runtime serves an API Gateway REST event
with them, THEN the answer is always ended the documented way: a 500/504 with an OpenAI error
envelope before the first byte, Lambda's error trailers after it, the deadline met with the
body ended (never cut), and a client that leaves turned into ``http.disconnect``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.lambda_runtime import invocation
from responses_gateway.lambda_runtime.api import RuntimeApi
from responses_gateway.lambda_runtime.main import serve_forever
from responses_gateway.testing.runtime_api import Recorded, RuntimeApiStandIn

EVENT = json.loads(
    (Path(__file__).parents[1] / "deploy" / "events" / "rest_api_request.json").read_text()
)


@pytest.fixture
def stand_in() -> Iterator[RuntimeApiStandIn]:
    with RuntimeApiStandIn() as api:
        yield api


def serve(stand_in: RuntimeApiStandIn, app: Any, event: Any = EVENT, **options: Any) -> Recorded:
    pending = stand_in.invoke(event, **options)
    asyncio.run(serve_forever(app, RuntimeApi(stand_in.address), limit=1))
    return pending.result(timeout=10)


async def _start(send: Any, status: int = 200, receive: Any = None) -> None:
    if receive is not None:
        assert (await receive())["type"] == "http.request"
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/event-stream"), (b"set-cookie", b"a=1")],
        }
    )


def test_the_scope_is_the_rest_event_with_its_context(stand_in: RuntimeApiStandIn) -> None:
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.update(scope)
        seen["request"] = await receive()
        await _start(send)
        await send({"type": "http.response.body", "body": b"data: 1\n\n"})

    event = {
        **EVENT,
        "httpMethod": "POST",
        "path": "/v1/responses",
        "multiValueQueryStringParameters": {"include": ["a b", "c"]},
        "body": "eyJhIjogMX0=",
        "isBase64Encoded": True,
    }
    recorded = serve(stand_in, app, event)
    assert (seen["method"], seen["path"], seen["query_string"]) == (
        "POST",
        "/v1/responses",
        b"include=a%20b&include=c",
    )
    assert seen["request"] == {"type": "http.request", "body": b'{"a": 1}', "more_body": False}
    assert seen["aws.event"]["requestContext"]["identity"]["apiKeyId"] == "k1a2b3c4d5"
    assert seen["aws.context"].aws_request_id == recorded.request_id
    assert 0 < seen["aws.context"].get_remaining_time_in_millis() <= 900_000
    assert (b"authorization", b"Bearer gw-key-value") in seen["headers"]
    assert recorded.prelude == {
        "statusCode": 200,
        "headers": {"content-type": "text/event-stream"},
        "multiValueHeaders": {},
        "cookies": ["a=1"],
    }
    assert recorded.payload == b"data: 1\n\n" and recorded.complete and not recorded.trailers


def test_a_failure_before_the_first_byte_is_a_500_envelope(stand_in: RuntimeApiStandIn) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("boom with a secret sk-123")

    recorded = serve(stand_in, app)
    assert recorded.prelude["statusCode"] == 500
    error = json.loads(recorded.payload)["error"]
    assert error["type"] == "server_error" and set(error) == {"message", "type", "param", "code"}
    assert b"sk-123" not in recorded.body
    assert recorded.complete and recorded.error_trailer is None


def test_a_failure_after_the_first_byte_ends_with_the_error_trailers(
    stand_in: RuntimeApiStandIn,
) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _start(send)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        raise ValueError("mid-stream, with a secret sk-123")

    recorded = serve(stand_in, app)
    assert recorded.payload == b"data: 1\n\n"
    assert recorded.complete  # ended, not cut
    trailer = recorded.error_trailer
    assert trailer is not None
    assert trailer[0] == "Runtime.ValueError"
    assert trailer[1]["errorType"] == "Runtime.ValueError"
    assert "sk-123" not in json.dumps(trailer)
    assert "lambda-runtime-function-error-type" in recorded.headers["trailer"].lower()


def test_at_the_deadline_the_app_is_told_its_client_left_and_the_body_ends(
    stand_in: RuntimeApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(invocation, "DEADLINE_MARGIN", 0.5)
    told: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _start(send, receive=receive)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        told.append((await receive())["type"])  # waits until the runtime says the client left
        await send({"type": "http.response.body", "body": b"data: last\n\n"})

    recorded = serve(stand_in, app, timeout_s=1.0)
    assert told == ["http.disconnect"]
    assert recorded.payload == b"data: 1\n\ndata: last\n\n"
    assert recorded.complete and recorded.error_trailer is None


def test_an_app_that_ignores_the_deadline_is_cancelled_and_reported(
    stand_in: RuntimeApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(invocation, "DEADLINE_MARGIN", 0.5)
    monkeypatch.setattr(invocation, "GRACE", 0.1)
    cancelled = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _start(send)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    recorded = serve(stand_in, app, timeout_s=1.0)
    assert cancelled.is_set()
    assert recorded.complete
    trailer = recorded.error_trailer
    assert trailer is not None and trailer[0] == "Runtime.DeadlineReached"


def test_a_deadline_before_any_byte_is_a_504_envelope(
    stand_in: RuntimeApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(invocation, "DEADLINE_MARGIN", 0.5)
    monkeypatch.setattr(invocation, "GRACE", 0.1)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.Event().wait()

    recorded = serve(stand_in, app, timeout_s=1.0)
    assert recorded.prelude["statusCode"] == 504
    assert json.loads(recorded.payload)["error"]["code"] == "timeout"


def test_a_client_that_leaves_a_quiet_answer_is_a_disconnect(stand_in: RuntimeApiStandIn) -> None:
    told: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _start(send, receive=receive)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        told.append((await receive())["type"])  # nothing more to send: only the close tells

    recorded = serve(stand_in, app, leave_after=lambda seen: b"data: 1" in seen)
    assert recorded.left and told == ["http.disconnect"]


def test_an_event_that_is_not_json_is_an_invocation_error(stand_in: RuntimeApiStandIn) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never called")

    recorded = serve(stand_in, app, b"not json")
    assert recorded.error is not None and recorded.error["errorType"] == "Runtime.InvalidEvent"


def test_a_runtime_bug_fails_one_invocation_and_the_next_is_served(
    stand_in: RuntimeApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = invocation.asgi_request
    calls: list[int] = []

    def flaky(event: Any, context: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("a bug")
        return real(event, context)

    monkeypatch.setattr(invocation, "asgi_request", flaky)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await _start(send)
        await send({"type": "http.response.body", "body": b"ok"})

    first, second = stand_in.invoke(EVENT), stand_in.invoke(EVENT)
    asyncio.run(serve_forever(app, RuntimeApi(stand_in.address), limit=2))
    failed = first.result(timeout=10)
    assert failed.error is not None and failed.error["errorType"] == "Runtime.Unknown"
    assert second.result(timeout=10).payload == b"ok"
