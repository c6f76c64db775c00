"""The streaming function started exactly as the Lambda Web Adapter starts it: ``run.sh``.

GIVEN ``functions/streaming/run.sh`` executed with the environment ``template.yaml`` gives the
function (plus what Lambda sets: ``LAMBDA_TASK_ROOT``, the adapter's port), pointed at an
embedded DynamoDB and a scripted upstream, WHEN the official ``openai`` SDK calls it over HTTP
with the ``x-amzn-request-context`` header the adapter fills from API Gateway's request context,
THEN SSE events reach the client while the upstream is still producing (nothing is buffered),
stored responses are scoped to the API key id, and the logs carry no body or key.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing import ScriptedUpstream, Turn

ROOT = Path(__file__).resolve().parents[2]
RUN_SH = ROOT / "functions" / "streaming" / "run.sh"
SAMPLE = json.loads((Path(__file__).parent / "events" / "rest_api_request.json").read_text())
KEY_A = "k1a2b3c4d5"
KEY_B = "k9z8y7x6w5"
PROMPT = "a confidential prompt about the launch date"


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_lines(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def wait_for_log(self, correlation_id: str) -> list[dict[str, Any]]:
        """The log lines once the request's own line is written (it follows the response's
        last byte, so a client can read the answer a moment before)."""
        for _ in range(500):
            lines = self.log_lines()
            if any(line.get("correlation_id") == correlation_id for line in lines):
                return lines
            with pytest.raises(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.01)  # yields; fails the test if the function died
        raise AssertionError(f"no log line for {correlation_id}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll the readiness path as the adapter does (bounded; no fixed sleeps)."""
    with httpx.Client(timeout=1.0) as client:
        for _ in range(600):
            if process.poll() is not None:
                raise AssertionError(f"run.sh exited early:\n{log.read_text()}")
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                with pytest.raises(subprocess.TimeoutExpired):
                    process.wait(timeout=0.05)
    raise AssertionError(f"the app never became ready:\n{log.read_text()}")


@pytest.fixture(scope="module")
def served(
    deployed_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    port = _free_port()
    log = tmp_path_factory.mktemp("streaming-function") / "stdout.log"
    inherited = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("UPSTREAM_", "GATEWAY_", "DYNAMODB_", "POWERTOOLS_", "AWS_LWA_"))
    }
    env = {
        **inherited,
        **deployed_env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LAMBDA_TASK_ROOT": str(RUN_SH.parent),
        "AWS_LWA_PORT": str(port),
        "AWS_LWA_READINESS_CHECK_PATH": "/health",
        "AWS_LWA_INVOKE_MODE": "response_stream",
    }
    with log.open("wb") as sink:
        process = subprocess.Popen([str(RUN_SH)], stdout=sink, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield Served(url, process, log)
    finally:
        process.terminate()
        process.wait(timeout=15)


def adapter_headers(key_id: str | None, request_id: str | None = None) -> dict[str, str]:
    """The headers the Lambda Web Adapter adds: API Gateway's request context and the Lambda
    context, as JSON."""
    context = copy.deepcopy(SAMPLE["requestContext"])
    context["requestId"] = request_id or str(uuid.uuid4())
    if key_id is None:
        del context["identity"]["apiKeyId"]
    else:
        context["identity"]["apiKeyId"] = key_id
    lambda_context = {
        "request_id": str(uuid.uuid4()),
        "deadline": int((time.time() + 900) * 1000),  # a fresh 15-minute invocation
        "invoked_function_arn": "arn:aws:lambda:eu-west-1:123456789012:function:streaming",
        "xray_trace_id": "Root=1-6920a1b0-0f1e2d3c4b5a69788796a5b4",
        "env_config": {"function_name": "streaming", "memory": 1024, "version": "$LATEST"},
    }
    return {
        "x-amzn-request-context": json.dumps(context),
        "x-amzn-lambda-context": json.dumps(lambda_context),
    }


def _client(served: Served, key_id: str | None) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{served.url}/v1",
        api_key="the-gateway-key-api-gateway-already-checked",
        max_retries=0,
        default_headers=adapter_headers(key_id),
    )


def test_events_arrive_before_the_upstream_finishes(
    served: Served, upstream: ScriptedUpstream
) -> None:
    # GIVEN an upstream that sends a few words and then holds the stream open
    upstream.push(Turn(text="one two three four five six seven eight", hold_after=4))
    seen: list[str] = []
    with _client(served, KEY_A) as client:
        stream = client.responses.create(model="scripted", input=PROMPT, stream=True)
        # WHEN the client reads the stream
        for event in stream:
            seen.append(event.type)
            if seen.count("response.output_text.delta") == 2:
                break
        # THEN deltas arrived while the upstream is still mid-answer (it cannot finish until
        # this client goes away), and leaving stops the upstream call
        stream.close()
    assert seen[:2] == ["response.created", "response.in_progress"]
    assert "response.completed" not in seen
    assert upstream.wait_for_disconnects(1) == 1


def test_created_responses_are_scoped_to_the_api_key_id(
    served: Served, upstream: ScriptedUpstream, deployed_env: dict[str, str]
) -> None:
    upstream.push(Turn(text="Stored answer"))
    with _client(served, KEY_A) as alpha, _client(served, KEY_B) as bravo:
        created = alpha.responses.create(model="scripted", input=PROMPT)
        assert created.output_text == "Stored answer"
        assert alpha.responses.retrieve(created.id).id == created.id
        with pytest.raises(openai.NotFoundError):
            bravo.responses.retrieve(created.id)
    upstream_key = deployed_env["UPSTREAM_API_KEY"]
    assert upstream.requests[0].headers["authorization"] == f"Bearer {upstream_key}"


def test_streamed_create_completes_and_is_stored(
    served: Served, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Streamed and stored"))
    with _client(served, KEY_A) as client:
        with client.responses.stream(model="scripted", input="Hi") as stream:
            for _ in stream:
                pass
            final = stream.get_final_response()
        assert final.output_text == "Streamed and stored"
        assert client.responses.retrieve(final.id).status == "completed"


def test_without_an_api_key_id_the_function_answers_401(served: Served) -> None:
    with _client(served, None) as client, pytest.raises(openai.AuthenticationError) as caught:
        client.responses.retrieve("resp_anything")
    assert caught.value.code == "invalid_api_key"


def test_logs_and_metrics_carry_ids_and_counts_but_no_body_or_key(
    served: Served, upstream: ScriptedUpstream, deployed_env: dict[str, str]
) -> None:
    upstream.push(Turn(text="Counted answer"))
    request_id = str(uuid.uuid4())
    with _client(served, KEY_A) as client:
        client.responses.create(
            model="scripted", input=PROMPT, extra_headers=adapter_headers(KEY_A, request_id)
        )
    lines = served.wait_for_log(request_id)
    logs = [line for line in lines if line.get("correlation_id") == request_id]
    assert [(log["message"], log["status"], log["api_key_id"]) for log in logs] == [
        ("request", 200, KEY_A)
    ]
    assert logs[0]["input_tokens"] > 0 and logs[0]["output_tokens"] == 2
    metrics = [line for line in lines if "UpstreamLatency" in line and "Requests" in line]
    assert metrics and metrics[-1]["function"] == "streaming"
    everything = served.log.read_text()
    assert PROMPT not in everything
    assert "Counted answer" not in everything
    assert deployed_env["UPSTREAM_API_KEY"] not in everything
