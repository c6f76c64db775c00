"""Upstream model faults, injected by the proxy in front of the scripted upstream: each ends in a
bounded time with a clear error (502 before the stream starts, ``response.failed`` after), a
valid event stream, and a stored record that says what happened."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.reliability.conftest import MODEL, UPSTREAM_TIMEOUT, Stack

from responses_gateway.testing.faults import Fault
from responses_gateway.testing.script import Turn
from responses_gateway.testing.stream_check import check_stream, parse_sse

STREAMED = {"model": MODEL, "input": "hi", "stream": True}
LONG = " ".join(f"word{n}" for n in range(200))


def _create(http: httpx.Client, **extra: Any) -> httpx.Response:
    return http.post("/responses", json={"model": MODEL, "input": "hi", **extra})


def _stored_status(http: httpx.Client, response_id: str) -> str:
    return str(http.get(f"/responses/{response_id}").json()["status"])


@pytest.mark.parametrize("action", ["reset", "respond"])
def test_upstream_refusing_before_any_byte_is_a_502(
    http: httpx.Client, fresh: Stack, action: Any
) -> None:
    # every call: a reset before the answer is asked once more unstreamed (it may be a server
    # that breaks its streams), an HTTP error is not
    fresh.upstream_proxy.script(Fault(action, status=503, body=b"overloaded", times=None))
    answer = _create(http)
    assert answer.status_code == 502
    assert answer.json()["error"]["type"] == "server_error"
    assert fresh.upstream.requests == []
    streams = [json.loads(call.body)["stream"] for call in fresh.upstream_proxy.calls]
    assert streams == ([True, False] if action == "reset" else [True])


def test_upstream_stall_is_a_bounded_502(http: httpx.Client, fresh: Stack) -> None:
    fresh.upstream_proxy.script(Fault("stall"))
    started = time.monotonic()
    answer = _create(http)
    elapsed = time.monotonic() - started
    assert answer.status_code == 502
    assert UPSTREAM_TIMEOUT <= elapsed < UPSTREAM_TIMEOUT + 5
    wait_closed(fresh)


def wait_closed(stack: Stack) -> None:
    """No connection to the upstream proxy is left open (nothing leaked)."""
    from tests.reliability.conftest import wait_until

    wait_until(lambda: stack.upstream_proxy.open_connections == 0)


def _stream(http: httpx.Client) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with http.stream("POST", "/responses", json=STREAMED) as r:
        assert r.status_code == 200
        events = parse_sse(r.read())
    return events, check_stream(events)


@pytest.mark.parametrize(
    "fault",
    [
        Fault("cut", limit=1500),
        Fault("stall_after", limit=1500),
    ],
    ids=["reset-mid-stream", "stall-mid-stream"],
)
def test_upstream_failing_mid_stream_is_response_failed(
    http: httpx.Client, fresh: Stack, fault: Fault
) -> None:
    fresh.upstream.push(Turn(text=LONG, chunk_size=8))
    fresh.upstream_proxy.script(fault)
    started = time.monotonic()
    events, final = _stream(http)
    assert time.monotonic() - started < UPSTREAM_TIMEOUT + 5
    assert events[-1]["type"] == "response.failed"
    assert final["status"] == "failed"
    assert final["error"]["code"] == "server_error"
    assert _stored_status(http, final["id"]) == "failed"
    wait_closed(fresh)


def test_trickled_upstream_stream_arrives_whole(http: httpx.Client, fresh: Stack) -> None:
    fresh.upstream.push(Turn(text="slowly but surely", chunk_size=4))
    fresh.upstream_proxy.script(Fault("trickle", chunk=7, seconds=0.001))
    events, final = _stream(http)
    assert final["status"] == "completed"
    assert final["output"][0]["content"][0]["text"] == "slowly but surely"
    assert fresh.upstream_proxy.calls[0].action == "trickle"


def _chat_chunk(text: str) -> bytes:
    import json

    chunk = {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _never_ending() -> Iterator[bytes]:
    piece = _chat_chunk("x" * 4096)
    while True:
        yield piece


def _oversized() -> Iterator[bytes]:
    yield _chat_chunk("hello")
    yield b"data: " + b"y" * (1024 * 1024)
    while True:
        yield b"z" * (1024 * 1024)


@pytest.mark.parametrize(
    ("factory", "env", "message"),
    [
        (_never_ending, "GATEWAY_MAX_UPSTREAM_STREAM_BYTES", "exceeded the gateway's size limit"),
        (_oversized, "GATEWAY_MAX_UPSTREAM_EVENT_BYTES", "event larger than"),
    ],
    ids=["never-ending-stream", "oversized-event"],
)
def test_unbounded_upstream_streams_are_cut_with_a_clear_error(
    http: httpx.Client,
    fresh: Stack,
    monkeypatch: pytest.MonkeyPatch,
    factory: Any,
    env: str,
    message: str,
) -> None:
    monkeypatch.setenv(env, str(2 * 1024 * 1024))
    fresh.upstream_proxy.script(Fault("stream", status=200, body_factory=factory))
    events, final = _stream(http)
    assert final["status"] == "failed"
    assert message in final["error"]["message"]
    wait_closed(fresh)


def test_upstream_stall_before_first_event_of_a_stream_is_a_502(
    http: httpx.Client, fresh: Stack
) -> None:
    """Nothing was sent to the client yet: a real HTTP error, not an empty stream."""
    fresh.upstream_proxy.script(Fault("stall"))
    with http.stream("POST", "/responses", json=STREAMED) as r:
        r.read()
        assert r.status_code == 502
        assert r.json()["error"]["type"] == "server_error"
