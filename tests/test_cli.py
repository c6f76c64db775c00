"""`responses-gateway serve` as a newcomer runs it: no upstream configured, the demo model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[str]) -> None:
    with httpx.Client(timeout=1.0) as client:
        for _ in range(400):  # bounded: each failed attempt waits up to the connect timeout
            if proc.poll() is not None:
                raise AssertionError(f"serve exited early: {proc.stdout and proc.stdout.read()}")
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.TransportError:
                with pytest.raises(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.05)  # yields the CPU; returns early if serve dies
    raise AssertionError("serve never became healthy")


UNSET = {
    "UPSTREAM_BASE_URL",
    "GATEWAY_CONFIG",
    "DYNAMODB_TABLE",
    "GATEWAY_STORE",
    "GATEWAY_DB_PATH",
}
"""Variables a newcomer has not set (the state then goes to the default SQLite file)."""


@pytest.fixture(scope="module")
def data_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user data directory of the served process (never the real home)."""
    return tmp_path_factory.mktemp("data-home")


@pytest.fixture(scope="module")
def served(data_home: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["XDG_DATA_HOME"] = str(data_home)
    proc = subprocess.Popen(
        [sys.executable, "-m", "responses_gateway.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.mark.parametrize("model", ["demo", "demo-responses"])
def test_serve_without_upstream_answers_with_the_demo_model(
    served: tuple[str, subprocess.Popen[str]], model: str
) -> None:
    url, _ = served
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as client:
        response = client.responses.create(model=model, input="Hello gateway")
        assert response.output_text == "Hello! You said: Hello gateway"
        with client.responses.stream(
            model=model,
            input="What is the weather in Paris?",
            tools=[
                {
                    "type": "function",
                    "name": "get_weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                    "strict": False,
                }
            ],
        ) as stream:
            final = stream.get_final_response()
        call = final.output[-1]
        assert call.type == "function_call"
        assert (call.name, call.arguments) == ("get_weather", '{"city": "Paris"}')


def test_serve_says_which_models_the_demo_serves_and_where_state_lives(
    served: tuple[str, subprocess.Popen[str]], data_home: Path
) -> None:
    _, proc = served
    assert proc.stdout is not None
    startup: list[str] = []
    while not startup or "listening on" not in startup[-1]:
        startup.append(proc.stdout.readline())
    # the startup log records are JSON lines, like the access log after them
    records = [json.loads(line) for line in startup if line.startswith("{")]
    (sealing,) = records
    assert sealing["level"] == "warning" and "no sealing keys configured" in sealing["msg"]
    first, second, listening = [line for line in startup if not line.startswith("{")]
    assert "serving the bundled scripted demo model" in first
    assert "'demo'" in first and "'demo-responses'" in first
    database = data_home / "responses-gateway" / "gateway.db"
    assert second == f"responses-gateway: keeping state in the SQLite database {database}\n"
    assert listening.startswith("responses-gateway: listening on http://127.0.0.1:")
    assert database.is_file()


def test_serve_enforces_console_budgets_without_a_config_file(tmp_path: Path) -> None:
    # GIVEN `serve --enforce-budgets`, keys from the environment, and no configuration file
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(
        {
            "XDG_DATA_HOME": str(tmp_path),
            "GATEWAY_API_KEYS": "sk-ops:ops,sk-team:team",
            "GATEWAY_OPERATOR_TENANTS": "ops",
        }
    )
    command = [sys.executable, "-m", "responses_gateway.cli", "serve", "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--enforce-budgets"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=30) as http:
            ops = {"authorization": "Bearer sk-ops"}
            team = {"authorization": "Bearer sk-team"}
            body = {"model": "demo", "input": "Hello"}
            assert http.post("/v1/responses", json=body, headers=team).status_code == 200
            # WHEN an operator sets the tenant's daily tokens to what it has spent
            saved = http.put(
                "/v1/console/budgets", params={"tenant": "team"}, headers=ops,
                json={"daily_tokens": 0},
            ).json()  # fmt: skip
            assert saved["enforced"] is True
            # THEN its next request is refused before it runs
            refused = http.post("/v1/responses", json=body, headers=team)
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "insufficient_quota"
    finally:
        proc.terminate()
        proc.wait(timeout=15)
