"""run_in_thread starts and stops real uvicorn servers quickly; serve_fake_upstream runs the CLI's.

No sleeps: readiness is the server's own startup event, and the subprocess test waits for
uvicorn's "running" log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

import responses_gateway.testing as testing
from responses_gateway.testing import (
    RunningServer,
    ScriptedUpstream,
    Turn,
    create_fake_upstream_app,
    run_in_thread,
)
from responses_gateway.testing.server import _bind


def make_app(events: list[str]) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        events.append(f"startup:{threading.current_thread().name}")
        yield
        events.append("shutdown")

    async def hello(request: Request) -> Response:
        return PlainTextResponse("hello")

    async def forever(request: Request) -> Response:
        async def body() -> AsyncIterator[bytes]:
            yield b"first\n"
            await asyncio.Event().wait()  # never set: only shutdown ends this response
            yield b"never"  # pragma: no cover

        return StreamingResponse(body(), media_type="text/plain")

    return Starlette(routes=[Route("/hello", hello), Route("/forever", forever)], lifespan=lifespan)


def test_run_in_thread_serves_and_stops_with_lifespan() -> None:
    events: list[str] = []

    with run_in_thread(make_app(events)) as server:
        assert server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert server.running
        assert events == [f"startup:uvicorn-{server.port}"]
        assert httpx.get(server.url + "/hello").text == "hello"

    assert not server.running
    assert events[-1] == "shutdown"
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/hello")


def test_bind_listening_socket_says_tcp_so_accepted_sockets_get_nodelay() -> None:
    # asyncio sets TCP_NODELAY only on accepted sockets whose proto says TCP; without it every
    # response pays a ~40 ms Nagle/delayed-ACK stall (measured in benchmarks, not asserted here).
    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def test_stop_is_idempotent() -> None:
    server = run_in_thread(make_app([]), lifespan="off")
    server.stop()
    server.stop()
    assert not server.running
    assert "running=False" in repr(server)


def test_stop_does_not_hang_on_an_open_stream() -> None:
    server = run_in_thread(make_app([]), graceful_timeout=0)
    with httpx.Client(base_url=server.url) as client, client.stream("GET", "/forever") as r:
        chunks = r.iter_bytes()
        assert next(chunks) == b"first\n"
        server.stop(timeout=5)
        assert not server.running
        with contextlib.suppress(httpx.HTTPError):
            for _ in chunks:
                pass


def test_startup_failure_is_reported() -> None:
    @contextlib.asynccontextmanager
    async def broken(app: Starlette) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield  # pragma: no cover

    with pytest.raises(RuntimeError, match="failed to start"):
        run_in_thread(Starlette(lifespan=broken))


def test_port_in_use_is_an_os_error() -> None:
    with run_in_thread(make_app([]), lifespan="off") as server, pytest.raises(OSError):
        run_in_thread(make_app([]), port=server.port)


def test_explicit_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with run_in_thread(make_app([]), port=port, lifespan="off") as server:
        assert server.port == port
        assert httpx.get(f"http://127.0.0.1:{port}/hello").status_code == 200


def test_servers_run_side_by_side() -> None:
    a_up, b_up = ScriptedUpstream(Turn(text="A")), ScriptedUpstream(Turn(text="B"))
    with (
        run_in_thread(create_fake_upstream_app(a_up)) as a,
        run_in_thread(create_fake_upstream_app(b_up)) as b,
    ):
        for server, expected in ((a, "A"), (b, "B")):
            response = httpx.post(server.url + "/v1/responses", json={"input": "x"}).json()
            assert response["output"][0]["content"][0]["text"] == expected
    assert len(a_up.requests) == len(b_up.requests) == 1


def test_simulated_drops_do_not_log_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    upstream = ScriptedUpstream(Turn(text="a b c", drop_after=1))
    caplog.set_level(logging.WARNING)
    with run_in_thread(create_fake_upstream_app(upstream)) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(server.url + "/v1/responses", json={"input": "x", "stream": True})
        upstream.push(Turn(text="ok"))
        assert httpx.post(server.url + "/v1/responses", json={"input": "x"}).status_code == 200
    assert not [r for r in caplog.records if "Exception in ASGI" in r.getMessage()]


@pytest.fixture
def fake_upstream_process() -> Iterator[tuple[subprocess.Popen[str], int]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = (
        "from responses_gateway.testing import serve_fake_upstream; "
        f"serve_fake_upstream('127.0.0.1', {port})"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()


def test_serve_fake_upstream_runs_the_demo_in_the_foreground(
    fake_upstream_process: tuple[subprocess.Popen[str], int],
) -> None:
    proc, port = fake_upstream_process
    assert proc.stderr is not None
    for line in proc.stderr:  # blocks until uvicorn says it is listening
        if "Uvicorn running on" in line:
            break
    else:
        pytest.fail("the fake upstream exited before listening")

    url = f"http://127.0.0.1:{port}"
    assert httpx.get(url + "/v1/models").json()["data"][0]["id"] == "demo"
    body = {"model": "demo", "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(url + "/v1/chat/completions", json=body).json()
    assert answer["choices"][0]["message"]["content"] == "Hello! You said: hi"

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=10) == 0


def test_exported_api_is_explicit() -> None:
    assert sorted(testing.__all__) == sorted(
        [
            "DEMO_MODEL",
            "ChatEnd",
            "FinishReason",
            "RecordedRequest",
            "RunningServer",
            "ScriptedUpstream",
            "SimulatedDisconnect",
            "ToolCall",
            "Turn",
            "TurnFactory",
            "Usage",
            "Wire",
            "create_fake_upstream_app",
            "default_usage",
            "demo_turn",
            "error_envelope",
            "run_in_thread",
            "serve_fake_upstream",
        ]
    )
    for name in testing.__all__:
        assert getattr(testing, name) is not None
    assert isinstance(RunningServer.url, property)
