"""The streaming function started as Lambda starts it: its ``bootstrap``, against a Runtime API.

GIVEN ``functions/streaming/bootstrap`` executed with the environment ``template.yaml`` gives the
function (plus what Lambda sets: ``LAMBDA_TASK_ROOT``, ``AWS_LAMBDA_RUNTIME_API``), pointed at
an embedded DynamoDB, a scripted upstream and the project's stand-in of the Runtime API (which,
unlike AWS's emulator, keeps each chunk of a streamed answer and when it came), WHEN API
Gateway REST events arrive one after another in the same warm process, THEN each answer is
API Gateway's streaming format (metadata prelude, eight NUL bytes, the payload), SSE events
leave while the upstream is still producing, a client that leaves stops the upstream, stored
responses are scoped to the API key id, and nothing of one invocation reaches the next.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.testing import ScriptedUpstream, Turn
from responses_gateway.testing.runtime_api import Recorded, RuntimeApiStandIn

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = ROOT / "functions" / "streaming" / "bootstrap"
KEY_A = "k1a2b3c4d5"
KEY_B = "k9z8y7x6w5"
PROMPT = "a confidential prompt about the launch date"


@dataclass
class Function:
    api: RuntimeApiStandIn
    process: subprocess.Popen[bytes]
    log: Path

    def invoke(self, event: Any, **options: Any) -> Recorded:
        recorded = self.api.invoke(event, **options).result(timeout=60)
        assert self.process.poll() is None, self.log.read_text()
        return recorded

    def log_lines(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def wait_idle(self) -> None:
        """Until the runtime waits on ``/next`` again (it has finished the last invocation)."""
        if not self.api.waiting_for_next.wait(60):
            raise AssertionError(f"the runtime never asked for the next event:\n{self.log_text}")

    @property
    def log_text(self) -> str:
        return self.log.read_text()


@pytest.fixture(scope="module")
def function(
    deployed_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Function]:
    log = tmp_path_factory.mktemp("streaming-function") / "stdout.log"
    inherited = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("UPSTREAM_", "GATEWAY_", "DYNAMODB_", "POWERTOOLS_", "AWS_LAMBDA"))
    }
    api = RuntimeApiStandIn()
    env = {
        **inherited,
        **deployed_env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LAMBDA_TASK_ROOT": str(BOOTSTRAP.parent),
        "AWS_LAMBDA_RUNTIME_API": api.address,
        "AWS_LAMBDA_FUNCTION_NAME": "streaming",
    }
    with log.open("wb") as sink:
        process = subprocess.Popen([str(BOOTSTRAP)], stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        served = Function(api, process, log)
        served.wait_idle()
        yield served
    finally:
        process.terminate()
        process.wait(timeout=15)
        api.stop()


def _create(make_event: Any, key_id: str | None, body: dict[str, Any], **extra: Any) -> Any:
    return make_event("POST", "/v1/responses", "/v1/responses", key_id=key_id, body=body, **extra)


def _sse_events(payload: bytes) -> list[dict[str, Any]]:
    events = []
    for frame in payload.decode().split("\n\n"):
        data = [line[6:] for line in frame.splitlines() if line.startswith("data: ")]
        if data:
            events.append(json.loads("".join(data)))
    return events


def test_a_streamed_create_is_the_prelude_then_sse_to_completed(
    function: Function, upstream: ScriptedUpstream, make_event: Any
) -> None:
    upstream.push(Turn(text="Streamed and stored"))
    recorded = function.invoke(
        _create(make_event, KEY_A, {"model": "scripted", "input": "Hi", "stream": True})
    )
    # THEN the bytes are API Gateway's format: the metadata, eight NUL bytes, then the SSE
    assert recorded.headers["lambda-runtime-function-response-mode"] == "streaming"
    assert recorded.headers["transfer-encoding"] == "chunked"
    assert recorded.complete and not recorded.trailers
    head, delimiter, payload = recorded.body.partition(b"\x00" * 8)
    metadata = json.loads(head)
    assert delimiter and metadata["statusCode"] == 200
    assert metadata["headers"]["content-type"].startswith("text/event-stream")
    assert metadata["cookies"] == [] and metadata["multiValueHeaders"] == {}
    assert recorded.chunks[0].data == head + delimiter  # the head leaves before the body
    events = _sse_events(payload)
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert payload.endswith(b"\n\n")
    final = events[-1]["response"]
    assert final["output"][0]["content"][0]["text"] == "Streamed and stored"
    # AND the stored response reads back through the same function, for the same key only
    function.wait_idle()
    read = function.invoke(
        make_event(
            "GET", "/v1/responses/{response_id}", f"/v1/responses/{final['id']}", key_id=KEY_A
        )
    )
    assert read.prelude["statusCode"] == 200
    assert json.loads(read.payload)["status"] == "completed"
    other = function.invoke(
        make_event(
            "GET", "/v1/responses/{response_id}", f"/v1/responses/{final['id']}", key_id=KEY_B
        )
    )
    assert other.prelude["statusCode"] == 404


def test_events_leave_while_the_upstream_is_still_producing_and_leaving_stops_it(
    function: Function, upstream: ScriptedUpstream, make_event: Any
) -> None:
    # GIVEN an upstream that sends a few words and then holds the stream open
    upstream.push(Turn(text="one two three four five six seven eight", hold_after=4))
    # WHEN the client leaves after two deltas (the connection closes under the answer)
    recorded = function.invoke(
        _create(make_event, KEY_A, {"model": "scripted", "input": PROMPT, "stream": True}),
        leave_after=lambda seen: seen.count(b"response.output_text.delta") >= 2,
    )
    # THEN the head and those deltas left (each write its own chunk) while the upstream could
    # not finish,
    assert recorded.left
    assert len(recorded.chunks) >= 2
    assert recorded.chunks[0].data.endswith(b"\x00" * 8)
    assert b"response.completed" not in recorded.body
    # and the function noticed: it closed the upstream stream (the response is cancelled)
    assert upstream.wait_for_disconnects(1) == 1
    function.wait_idle()


def test_many_invocations_in_one_environment_share_nothing(
    function: Function, upstream: ScriptedUpstream, make_event: Any
) -> None:
    for index in range(6):
        upstream.push(Turn(text=f"answer {index}"))
    answers = []
    for index in range(6):
        key = KEY_A if index % 2 == 0 else KEY_B
        recorded = function.invoke(
            _create(make_event, key, {"model": "scripted", "input": f"question {index}"})
        )
        body = json.loads(recorded.payload)
        answers.append((body["output"][0]["content"][0]["text"], recorded.prelude["statusCode"]))
        function.wait_idle()
    assert answers == [(f"answer {index}", 200) for index in range(6)]
    # the same request id never reaches two requests' log lines
    by_request = {}
    for line in function.log_lines():
        if line.get("message") == "request":
            by_request.setdefault(line["correlation_id"], []).append(line["lambda_request_id"])
    assert all(len(set(ids)) == 1 for ids in by_request.values())


def test_a_large_event_arrives_whole(
    function: Function, upstream: ScriptedUpstream, make_event: Any
) -> None:
    upstream.push(Turn(text="Read it all"))
    text = "x" * 3_000_000  # a 3 MB input, over any single read's size
    recorded = function.invoke(_create(make_event, KEY_A, {"model": "scripted", "input": text}))
    assert recorded.prelude["statusCode"] == 200, recorded.payload[:500]
    sent = upstream.requests[-1].json
    assert sent["messages"][-1]["content"] == text


def test_without_an_api_key_id_the_function_answers_401(
    function: Function, make_event: Any
) -> None:
    recorded = function.invoke(
        make_event("GET", "/v1/responses/{response_id}", "/v1/responses/resp_x", key_id=None)
    )
    assert recorded.prelude["statusCode"] == 401
    assert json.loads(recorded.payload)["error"]["code"] == "invalid_api_key"


def test_an_event_that_is_not_an_api_request_is_an_invocation_error(function: Function) -> None:
    recorded = function.invoke({"source": "aws.events", "detail": {}})
    assert recorded.error is not None
    assert recorded.error["header"] == "Runtime.InvalidEvent"
    assert not recorded.chunks


def test_logs_carry_ids_and_counts_but_no_body_or_key(
    function: Function,
    upstream: ScriptedUpstream,
    make_event: Any,
    deployed_env: dict[str, str],
) -> None:
    upstream.push(Turn(text="Counted answer"))
    event = _create(make_event, KEY_A, {"model": "scripted", "input": PROMPT})
    request_id = event["requestContext"]["requestId"]
    recorded = function.invoke(event)
    function.wait_idle()
    logs = [line for line in function.log_lines() if line.get("correlation_id") == request_id]
    assert [(log["message"], log["status"], log["api_key_id"]) for log in logs] == [
        ("request", 200, KEY_A)
    ]
    assert logs[0]["lambda_request_id"] == recorded.request_id
    assert logs[0]["input_tokens"] > 0 and logs[0]["output_tokens"] == 2
    everything = function.log_text
    assert PROMPT not in everything
    assert "Counted answer" not in everything
    assert deployed_env["UPSTREAM_API_KEY"] not in everything
    assert uuid.UUID(recorded.request_id)
