"""Every function of the stack run as Lambda runs it: AWS's runtime interface emulator.

GIVEN each function of ``template.yaml`` laid out as Lambda lays it out (its code directory,
both layers built by ``infra/layers/Makefile``, a runtime directory holding only
``awslambdaric`` and boto3), with the environment the template gives it, started by
``aws-lambda-rie`` (from the ``aws-sam-cli`` wheel) through a stand-in of the managed runtime's
bootstrap that honours ``AWS_LAMBDA_EXEC_WRAPPER``, against moto's server for DynamoDB, Secrets
Manager and Step Functions and a scripted upstream (``testing.lambda_emulator``),
WHEN events arrive shaped as API Gateway REST, API Gateway WebSocket, Step Functions and the
REQUEST authorizer send them, THEN the deployed main path works end to end: a streamed create
(the exact bytes: prelude, then SSE to ``response.completed``), a non-streamed create read back,
a background create the worker runs to the end, a cancel, a socket session, an authorizer
decision, an upstream failing mid-stream, and an invocation reaching its deadline.

The emulator returns a streamed answer in one piece: ``test_streaming_function.py`` checks the
chunks and the time to first byte through the project's stand-in of the Runtime API.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.testing import RunningServer, ScriptedUpstream, Turn
from responses_gateway.testing.lambda_emulator import (
    EmulatedFunction,
    EmulatorKit,
    LocalServices,
    emulate,
    prepare_kit,
)
from responses_gateway.testing.stream_check import parse_sse

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux")
    or sys.version_info[:2] != (3, 11)
    or shutil.which("make") is None,
    reason="the emulator runs on Linux; the layers build with make for the runtime's Python 3.11",
)

KEY = "k1a2b3c4d5"
DELIMITER = b"\x00" * 8


@pytest.fixture(scope="module")
def kit() -> EmulatorKit:
    return prepare_kit()


@pytest.fixture(scope="module")
def services(upstream_server: tuple[ScriptedUpstream, RunningServer]) -> Iterator[LocalServices]:
    started = LocalServices.start(upstream_server[1].url, upstream_key="sk-emulated-upstream")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def start(
    kit: EmulatorKit, services: LocalServices, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., EmulatedFunction]]:
    root = tmp_path_factory.mktemp("lambda")
    running: list[EmulatedFunction] = []

    def started(function: str, **options: Any) -> EmulatedFunction:
        emulated = emulate(function, kit, root / str(len(running)), services, **options)
        running.append(emulated.start())
        return emulated

    try:
        yield started
    finally:
        for emulated in running:
            emulated.stop()


@pytest.fixture(scope="module")
def streaming(start: Callable[..., EmulatedFunction]) -> EmulatedFunction:
    return start("StreamingFunction")


@pytest.fixture(scope="module")
def buffered(start: Callable[..., EmulatedFunction]) -> EmulatedFunction:
    return start("BufferedFunction")


@pytest.fixture(scope="module")
def worker(start: Callable[..., EmulatedFunction]) -> EmulatedFunction:
    return start("WorkerFunction")


def _split(raw: bytes) -> tuple[dict[str, Any], bytes]:
    head, delimiter, payload = raw.partition(DELIMITER)
    assert delimiter, raw[:300]
    metadata: dict[str, Any] = json.loads(head)
    return metadata, payload


def _create(make_event: Any, body: dict[str, Any]) -> Any:
    return make_event("POST", "/v1/responses", "/v1/responses", key_id=KEY, body=body)


def _retrieve(function: EmulatedFunction, make_event: Any, response_id: str) -> Any:
    event = make_event(
        "GET", "/v1/responses/{response_id}", f"/v1/responses/{response_id}", key_id=KEY
    )
    metadata, payload = _split(function.invoke_raw(event).content)
    assert metadata["statusCode"] == 200, payload
    return json.loads(payload)


def test_a_streamed_create_is_the_prelude_then_sse_to_completed(
    streaming: EmulatedFunction, upstream: ScriptedUpstream, make_event: Any
) -> None:
    upstream.push(Turn(text="Hello from Lambda"))
    answer = streaming.invoke_raw(
        _create(make_event, {"model": "scripted", "input": "Hi", "stream": True})
    )
    assert answer.status_code == 200
    metadata, payload = _split(answer.content)
    assert metadata["statusCode"] == 200
    assert metadata["headers"]["content-type"] == "text/event-stream; charset=utf-8"
    assert metadata["headers"]["cache-control"] == "no-cache"
    assert metadata["cookies"] == []
    events = parse_sse(payload)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert payload.startswith(b"event: response.created\ndata: ")
    assert payload.endswith(b"\n\n")
    # the upstream got the key from Secrets Manager, through the template's parameter
    assert upstream.requests[-1].headers["authorization"] == "Bearer sk-emulated-upstream"
    # one init (the exec wrapper took over: no adapter, no web server) for every invocation
    assert len(streaming.init_reports_ms()) == 1, streaming.log


def test_a_create_is_stored_and_read_back(
    streaming: EmulatedFunction,
    buffered: EmulatedFunction,
    upstream: ScriptedUpstream,
    make_event: Any,
) -> None:
    upstream.push(Turn(text="Stored answer"))
    metadata, payload = _split(
        streaming.invoke_raw(_create(make_event, {"model": "scripted", "input": "Keep it"})).content
    )
    assert metadata["statusCode"] == 200
    created = json.loads(payload)
    assert created["status"] == "completed"
    assert _retrieve(streaming, make_event, created["id"])["output"] == created["output"]
    # the buffered function (Mangum) reads the same table
    items = buffered.invoke(
        make_event(
            "GET",
            "/v1/responses/{response_id}/input_items",
            f"/v1/responses/{created['id']}/input_items",
            key_id=KEY,
        )
    )
    assert items["statusCode"] == 200
    assert json.loads(items["body"])["data"][0]["content"][0]["text"] == "Keep it"


def _queue(streaming: EmulatedFunction, make_event: Any, text: str) -> dict[str, Any]:
    """A background create through the streaming function: the queued Response object."""
    body = {"model": "scripted", "input": text, "background": True}
    metadata, payload = _split(streaming.invoke_raw(_create(make_event, body)).content)
    queued: dict[str, Any] = json.loads(payload)
    assert metadata["statusCode"] == 200 and queued["status"] == "queued", queued
    return queued


def _execution_input(services: LocalServices, response_id: str) -> dict[str, Any]:
    """The input of the state machine execution a background create started (what Step
    Functions hands the worker, through ``RunWorker``'s parameters)."""
    client = services.client("stepfunctions")
    machine = client.list_state_machines()["stateMachines"][0]["stateMachineArn"]
    for execution in client.list_executions(stateMachineArn=machine)["executions"]:
        if execution["name"].startswith(response_id):
            described = client.describe_execution(executionArn=execution["executionArn"])
            found: dict[str, Any] = json.loads(described["input"])
            return found
    raise AssertionError(f"no execution for {response_id}")


def test_a_background_create_runs_in_the_worker_to_the_end(
    streaming: EmulatedFunction,
    worker: EmulatedFunction,
    services: LocalServices,
    upstream: ScriptedUpstream,
    make_event: Any,
) -> None:
    upstream.push(Turn(text="Done in the background"))
    queued = _queue(streaming, make_event, "Later")
    step = _execution_input(services, queued["id"])
    for _ in range(10):  # the state machine's loop: RunWorker -> Decide -> RunWorker ...
        step = worker.invoke(step)
        assert set(step) >= {"tenant", "response_id", "generation", "iteration", "status"}, step
        if step["status"] == "done":
            break
    assert step["status"] == "done"
    done = _retrieve(streaming, make_event, queued["id"])
    assert done["status"] == "completed"
    assert done["output"][0]["content"][0]["text"] == "Done in the background"


def test_a_background_response_is_cancelled(
    streaming: EmulatedFunction,
    buffered: EmulatedFunction,
    upstream: ScriptedUpstream,
    make_event: Any,
) -> None:
    upstream.push(Turn(text="Never run"))
    queued = _queue(streaming, make_event, "Stop")
    answer = buffered.invoke(
        make_event(
            "POST",
            "/v1/responses/{response_id}/cancel",
            f"/v1/responses/{queued['id']}/cancel",
            key_id=KEY,
        )
    )
    assert answer["statusCode"] == 200, answer
    assert json.loads(answer["body"])["status"] == "cancelled"
    assert _retrieve(streaming, make_event, queued["id"])["status"] == "cancelled"


def test_an_upstream_failing_mid_stream_ends_the_stream_with_response_failed(
    streaming: EmulatedFunction, upstream: ScriptedUpstream, make_event: Any
) -> None:
    upstream.push(Turn(text="one two three four five", drop_after=3))
    metadata, payload = _split(
        streaming.invoke_raw(
            _create(make_event, {"model": "scripted", "input": "Hi", "stream": True})
        ).content
    )
    assert metadata["statusCode"] == 200
    events = parse_sse(payload)
    assert "response.output_text.delta" in [e["type"] for e in events]
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"]


def test_the_socket_function_holds_a_session(
    start: Callable[..., EmulatedFunction], services: LocalServices
) -> None:
    socket_function = start("SocketFunction")
    context = {
        "connectionId": "conn-emulated=",
        "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
        "stage": "prod",
        "identity": {"apiKeyId": KEY, "sourceIp": "203.0.113.7"},
        "authorizer": {"principalId": "api-key"},
    }
    connect = socket_function.invoke(
        {
            "requestContext": {**context, "routeKey": "$connect", "eventType": "CONNECT"},
            "headers": {"Authorization": "Bearer gw-key-value", "session_id": "s-1"},
            "isBase64Encoded": False,
        }
    )
    assert connect["statusCode"] == 200, socket_function.log
    table = services.client("dynamodb")

    def items() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = table.query(
            TableName=services.table_name,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": "WS#conn-emulated="}},
        )["Items"]
        return found

    (connection,) = items()
    assert connection["tenant"] == {"S": KEY}
    assert connection["client"] == {"M": {"session_id": {"S": "s-1"}}}
    # a message that is no event gets its error event posted back (moto's management API)
    message = socket_function.invoke(
        {
            "requestContext": {**context, "routeKey": "$default", "eventType": "MESSAGE"},
            "body": "not json",
            "isBase64Encoded": False,
        }
    )
    assert message["statusCode"] == 200, socket_function.log
    gone = socket_function.invoke(
        {"requestContext": {**context, "routeKey": "$disconnect", "eventType": "DISCONNECT"}}
    )
    assert gone["statusCode"] == 200
    assert items() == []
    assert len(socket_function.init_reports_ms()) == 1


def test_the_authorizer_names_the_bearer_token_as_the_api_key(
    start: Callable[..., EmulatedFunction],
) -> None:
    authorizer = start("AuthorizerFunction")
    method_arn = "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/POST/v1/responses"
    allowed = authorizer.invoke(
        {
            "type": "REQUEST",
            "methodArn": method_arn,
            "headers": {"Authorization": "Bearer gw-key-value"},
        }
    )
    assert allowed["usageIdentifierKey"] == "gw-key-value"
    statement = allowed["policyDocument"]["Statement"][0]
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == "arn:aws:execute-api:us-east-1:123456789012:abc123/prod/*"
    denied = authorizer.invoke({"type": "REQUEST", "methodArn": method_arn, "headers": {}})
    assert denied["errorMessage"] == "Unauthorized"
    assert "gw-key-value" not in authorizer.log


def test_an_invocation_reaching_its_deadline_ends_its_answer_and_the_environment_lives_on(
    start: Callable[..., EmulatedFunction], upstream: ScriptedUpstream, make_event: Any
) -> None:
    # GIVEN a streaming function whose invocations last 9 s, and an upstream that stalls
    short = start("StreamingFunction", timeout=9)
    upstream.push(Turn(text="one two three four five six", hold_after=3))
    answer = short.invoke_raw(
        _create(make_event, {"model": "scripted", "input": "Hi", "stream": True})
    )
    # THEN the answer ended before Lambda would cut it (no sandbox timeout, no restart), with
    # the response's terminal event: incomplete, keeping what the model had said
    assert "Task timed out" not in short.log and "Sandbox.Timeout" not in short.log, short.log
    metadata, payload = _split(answer.content)
    assert metadata["statusCode"] == 200
    events = parse_sse(payload)
    assert [e["type"] for e in events][:2] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] == "response.incomplete", [e["type"] for e in events]
    final = events[-1]["response"]
    assert final["incomplete_details"] == {"reason": "max_loop_seconds"}
    assert final["output"][0]["content"][0]["text"].startswith("one")
    # its upstream call was closed, its request logged, and the stored response is the same
    assert upstream.wait_for_disconnects(1) == 1
    assert [line["status"] for line in short.lines() if line.get("message") == "request"] == [200]
    assert _retrieve(short, make_event, final["id"])["status"] == "incomplete"
    # AND the same environment serves the next invocation (one init for all)
    upstream.push(Turn(text="Still here"))
    _, again = _split(
        short.invoke_raw(_create(make_event, {"model": "scripted", "input": "Hi"})).content
    )
    assert json.loads(again)["status"] == "completed"
    assert len(short.init_reports_ms()) == 1


def test_nothing_but_the_runtime_and_the_layers_is_importable(
    streaming: EmulatedFunction,
) -> None:
    paths = streaming.env["PYTHONPATH"].split(os.pathsep)
    assert [Path(p).name for p in paths] == ["python", "python", "var-runtime"]
    assert not any("site-packages" in p for p in paths)
    assert streaming.env["AWS_LAMBDA_EXEC_WRAPPER"].endswith("/var/task/bootstrap")
    assert streaming.env["UPSTREAM_API_KEY_SECRET"] == "gateway-upstream-key"
    assert "AWS_LWA_INVOKE_MODE" not in streaming.env
