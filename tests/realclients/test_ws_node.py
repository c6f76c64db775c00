"""WebSocket mode with the ``openai`` Node SDK's ``ResponsesWS`` client, over every upstream wire.

One gateway per module (chat, responses and harmony providers over one scripted upstream); the
node script (``js/ws_node.mjs``) runs a text turn, a tool round trip continued with
``store: false`` by sending only the tool output, two parallel ``stream_id``s and a fork, a
``generate: false`` warm-up continued, and an unknown ``previous_response_id``. Every server
event it received is judged here by the stream validator.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.harmony import read_prompt
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_socket_error, check_socket_stream

from .conftest import CLIENT_KEY, JS_DIR, run_node

WS_MODELS = {"chat": "ws-chat", "responses": "ws-responses", "harmony": "ws-harmony"}
TABLE = "responses-gateway-ws-node"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ScriptedUpstream, RunningServer]]:
    upstream = ScriptedUpstream(demo=False)
    dynamo = start_local_dynamodb(table_name=TABLE)
    try:
        with run_in_thread(create_fake_upstream_app(upstream)) as upstream_server:
            providers = [
                {
                    "name": wire,
                    "base_url": f"{upstream_server.url}/v1",
                    "api": wire,
                    "models": [model],
                }
                for wire, model in WS_MODELS.items()
            ]
            app = create_app(
                parse_config({"providers": providers}), DynamoStore(dynamo.client, TABLE)
            )
            with run_in_thread(app) as gateway:
                yield upstream, gateway
    finally:
        dynamo.stop()


@pytest.fixture(params=list(WS_MODELS))
def ws_wire(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _by_marker(body: dict[str, Any], wire: Any) -> Turn:
    text = read_prompt(body).text if wire == "harmony" else json.dumps(body)  # type: ignore[union-attr]
    marker = max(("alpha", "beta", "gamma"), key=text.rfind)
    return Turn(text=f"{marker} answer")


def _text(response: dict[str, Any]) -> str:
    return "".join(
        part["text"]
        for item in response["output"]
        if item["type"] == "message"
        for part in item["content"]
    )


def _sent(upstream: ScriptedUpstream, index: int) -> str:
    request = upstream.model_requests()[index]
    return request.prompt if request.prompt is not None else json.dumps(request.json)


def test_node_sdk_websocket_client(
    node_modules: Path,
    served: tuple[ScriptedUpstream, RunningServer],
    ws_wire: str,
) -> None:
    upstream, gateway = served
    upstream.reset()
    upstream.push(
        Turn(text="hello from the socket"),
        Turn(tool_calls=[ToolCall("get_weather", '{"city":"Paris"}')]),
        Turn(text="It is sunny"),
        _by_marker,
        _by_marker,
        _by_marker,
        Turn(text="42"),
    )
    done = run_node(
        JS_DIR / "ws_node.mjs",
        {
            "GATEWAY_URL": f"{gateway.url}/v1",
            "GATEWAY_KEY": CLIENT_KEY,
            "MODEL": WS_MODELS[ws_wire],
        },
        timeout=90,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    steps = json.loads(done.stdout)

    text = check_socket_stream(steps["text"])
    assert _text(text) == "hello from the socket"

    called = check_socket_stream(steps["tool_call"])
    [call] = [item for item in called["output"] if item["type"] == "function_call"]
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    answered = check_socket_stream(steps["tool_answer"])
    assert _text(answered) == "It is sunny"
    assert answered["previous_response_id"] == called["id"]
    assert "Weather in Paris?" in _sent(upstream, 2) and "sunny, 24C" in _sent(upstream, 2)

    finished = {}
    for stream in ("a", "b"):
        events = [e for e in steps["parallel"] if e.get("stream_id") == stream]
        finished[stream] = check_socket_stream(events, stream)
    assert len(steps["parallel"]) == sum(
        1 for e in steps["parallel"] if e.get("stream_id") in ("a", "b")
    )
    assert _text(finished["a"]) == "alpha answer" and _text(finished["b"]) == "beta answer"
    fork = check_socket_stream(steps["fork"], "fork")
    assert _text(fork) == "gamma answer"
    assert "alpha answer" in _sent(upstream, 5) and "beta" not in _sent(upstream, 5)

    warm = check_socket_stream(steps["warm"])
    assert warm["output"] == [] and [e["type"] for e in steps["warm"]] == [
        "response.created",
        "response.in_progress",
        "response.completed",
    ]
    assert _text(check_socket_stream(steps["warm_answer"])) == "42"
    assert "The code is 42" in _sent(upstream, 6)
    assert len(upstream.model_requests()) == 7  # the warm-up called no model

    [unknown] = steps["unknown"]
    assert check_socket_error(unknown)["code"] == "previous_response_not_found"


def test_node_sdk_tool_loop_http_state_leaving_and_refused_handshake(
    node_modules: Path,
    served: tuple[ScriptedUpstream, RunningServer],
    ws_wire: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upstream, gateway = served
    upstream.reset()
    for turn in range(20):
        upstream.push(Turn(tool_calls=[ToolCall("read_file", f'{{"path":"f{turn}"}}')]))
    upstream.push(
        Turn(text="done"),
        Turn(text="first"),
        Turn(text="second"),
        Turn(text="third"),
        Turn(text="one two three four five six", hold_after=5),
    )
    monkeypatch.setenv("GATEWAY_API_KEYS", f"{CLIENT_KEY}:team-node")
    done = run_node(
        JS_DIR / "ws_node_more.mjs",
        {
            "GATEWAY_URL": f"{gateway.url}/v1",
            "GATEWAY_KEY": CLIENT_KEY,
            "MODEL": WS_MODELS[ws_wire],
        },
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)

    responses = [check_socket_stream(events) for events in out["loop"]]
    assert len(responses) == 21 and _text(responses[-1]) == "done"
    for turn, response in enumerate(responses[:-1]):
        [call] = [i for i in response["output"] if i["type"] == "function_call"]
        assert json.loads(call["arguments"]) == {"path": f"f{turn}"}
    assert all(f"r{turn}" in _sent(upstream, 20) for turn in range(20))

    assert _text(check_socket_stream(out["on_socket"])) == "second"
    assert "alpha" in _sent(upstream, 22)
    assert out["http"]["back"] == "third"
    assert all(word in _sent(upstream, 23) for word in ("alpha", "first", "beta", "second"))

    assert upstream.wait_for_disconnects(1, timeout=10) >= 1
    pause = threading.Event()
    with httpx.Client(base_url=f"{gateway.url}/v1", timeout=10) as http:
        headers = {"authorization": f"Bearer {CLIENT_KEY}"}
        for _ in range(500):  # polls until the cleanup task stored the cancelled response
            stored = http.get(f"/responses/{out['left']}", headers=headers).json()
            if stored.get("status") == "cancelled":
                break
            pause.wait(0.02)
        assert stored["status"] == "cancelled"
        assert stored["output"][0]["content"][0]["text"].startswith("one")

    assert out["refused"] != {} and "401" in json.dumps(out["refused"])
