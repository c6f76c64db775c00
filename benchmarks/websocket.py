"""A 20-tool-call agent loop three ways: HTTP with stored chains, HTTP with the full history each
turn (``store: false``), and WebSocket mode (``store: false``, only the new items each turn).

Runs in one process, on loopback: the scripted model upstream (chat wire), the gateway (uvicorn
in a thread, DynamoDB on the embedded moto endpoint) and the client. Every loop is the same
script: a ~4 KB first user message and two function tools, 20 model turns that each call a tool
(answered with a ~1 KB tool output), then a final text answer. HTTP turns stream (SSE, read to the
end, as Codex does); socket turns read events up to the terminal one.

Reports, per mode: the median time of a whole loop (21 creates) over ``--iterations`` loops, and
the request bytes the client sends per turn (mean, and the last turn's). Never asserts.

    python benchmarks/websocket.py [--iterations 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import run_in_thread

TABLE = "bench-websocket"
TURNS = 20
MODEL = "bench-model"
TOOLS = [
    {
        "type": "function",
        "name": name,
        "description": f"The {name} tool.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    }
    for name in ("read_file", "run_tests")
]
FIRST_MESSAGE = "Fix the failing test in the repository. " + "Context line. " * 280
TOOL_OUTPUT = "output line\n" * 85
TERMINAL = {"response.completed", "response.incomplete", "response.failed"}

Loop = Callable[[], list[int]]
"""Runs one whole agent loop; returns the request bytes sent per turn."""


def _script(upstream: ScriptedUpstream) -> None:
    for turn in range(TURNS):
        upstream.push(Turn(tool_calls=[ToolCall("read_file", f'{{"path":"f{turn}.py"}}')]))
    upstream.push(Turn(text="All tests pass now."))


def _calls(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "function_call"]


def _sse_response(client: httpx.Client, body: bytes) -> dict[str, Any]:
    """POST a streamed create and read it to the end; the terminal event's response."""
    final: dict[str, Any] = {}
    headers = {"content-type": "application/json"}
    with client.stream("POST", "/responses", content=body, headers=headers) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event["type"] in TERMINAL:
                    final = event["response"]
    return final


def _outputs(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "function_call_output", "call_id": call["call_id"], "output": TOOL_OUTPUT}
        for call in _calls(response)
    ]


def http_stored(client: httpx.Client) -> list[int]:
    sent: list[int] = []
    body: dict[str, Any] = {"model": MODEL, "input": FIRST_MESSAGE, "tools": TOOLS, "stream": True}
    for _ in range(TURNS + 1):
        raw = json.dumps(body).encode()
        sent.append(len(raw))
        response = _sse_response(client, raw)
        body = {
            "model": MODEL,
            "previous_response_id": response["id"],
            "input": _outputs(response),
            "tools": TOOLS,
            "stream": True,
        }
    return sent


def http_full_history(client: httpx.Client) -> list[int]:
    sent: list[int] = []
    history: list[dict[str, Any]] = [{"role": "user", "content": FIRST_MESSAGE}]
    for _ in range(TURNS + 1):
        body = {"model": MODEL, "input": history, "tools": TOOLS, "stream": True, "store": False}
        raw = json.dumps(body).encode()
        sent.append(len(raw))
        response = _sse_response(client, raw)
        history = [*history, *response["output"], *_outputs(response)]
    return sent


def socket_loop(connection: Any) -> list[int]:
    sent: list[int] = []
    create: dict[str, Any] = {
        "type": "response.create",
        "model": MODEL,
        "input": FIRST_MESSAGE,
        "tools": TOOLS,
        "store": False,
    }
    for _ in range(TURNS + 1):
        raw = json.dumps(create)
        sent.append(len(raw.encode()))
        connection.send_raw(raw)
        while True:
            event = json.loads(connection.recv_bytes())
            if event["type"] in TERMINAL:
                response = event["response"]
                break
            if event["type"] == "error":
                raise RuntimeError(event)
        create = {
            "type": "response.create",
            "model": MODEL,
            "previous_response_id": response["id"],
            "input": _outputs(response),
            "tools": TOOLS,
            "store": False,
        }
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args()

    upstream = ScriptedUpstream(demo=False)
    dynamo = start_local_dynamodb(table_name=TABLE)
    results: dict[str, dict[str, float]] = {}
    with run_in_thread(create_fake_upstream_app(upstream)) as model_server:
        provider = {"base_url": model_server.url + "/v1", "api": "chat"}
        config = parse_config({"providers": [provider]})
        app = create_app(config, DynamoStore(dynamo.client, TABLE))
        with run_in_thread(app) as gateway:
            base = gateway.url + "/v1"
            sdk = openai.OpenAI(base_url=base, api_key="sk-bench", max_retries=0)
            with (
                httpx.Client(base_url=base, timeout=60) as client,
                sdk.responses.connect() as connection,
            ):
                modes: dict[str, Loop] = {
                    "http, stored chain": lambda: http_stored(client),
                    "http, full history (store:false)": lambda: http_full_history(client),
                    "websocket (store:false)": lambda: socket_loop(connection),
                }
                times: dict[str, list[float]] = {name: [] for name in modes}
                sizes: dict[str, list[int]] = {}
                for iteration in range(args.iterations + 1):  # the first round warms up
                    for name, run in modes.items():
                        upstream.reset()
                        _script(upstream)
                        started = time.perf_counter()
                        sent = run()
                        elapsed = time.perf_counter() - started
                        if iteration:
                            times[name].append(elapsed)
                        sizes[name] = sent
    dynamo.stop()
    print(f"{TURNS}-tool-call loop ({TURNS + 1} creates), median of {args.iterations} loops:")
    print(f"{'mode':36} {'loop ms':>9} {'per turn ms':>12} {'bytes/turn':>11} {'last turn':>10}")
    for name in times:
        loop_ms = statistics.median(times[name]) * 1000
        mean_bytes = statistics.mean(sizes[name])
        results[name] = {
            "loop_ms": round(loop_ms, 1),
            "per_turn_ms": round(loop_ms / (TURNS + 1), 2),
            "bytes_per_turn_mean": round(mean_bytes),
            "bytes_last_turn": sizes[name][-1],
        }
        print(
            f"{name:36} {loop_ms:9.1f} {loop_ms / (TURNS + 1):12.2f} "
            f"{mean_bytes:11.0f} {sizes[name][-1]:10d}"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
