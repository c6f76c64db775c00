"""The upstream client: httpx's settings and TLS context, the context built off the caller's
thread."""

from __future__ import annotations

import asyncio
import ssl
import threading
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from responses_gateway.testing.server import run_in_thread
from responses_gateway.upstream_http import (
    UPSTREAM_KEEPALIVE_SECONDS,
    PrefetchedTransport,
    upstream_http_client,
)


def test_the_tls_context_is_built_by_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    built_on: list[str] = []
    real = httpx.create_ssl_context

    def recording(**kwargs: Any) -> ssl.SSLContext:
        built_on.append(threading.current_thread().name)
        return real(**kwargs)

    monkeypatch.setattr(httpx, "create_ssl_context", recording)
    transport = PrefetchedTransport()
    context = transport._context.result(timeout=30)

    assert built_on == ["tls-context"]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_the_tls_context_is_httpxs_own() -> None:
    ours = PrefetchedTransport()._context.result(timeout=30)
    theirs = httpx.create_ssl_context(trust_env=False)

    assert ours.cert_store_stats() == theirs.cert_store_stats()
    assert (ours.options, ours.minimum_version) == (theirs.options, theirs.minimum_version)
    assert ours.get_ciphers() == theirs.get_ciphers()


async def _echo(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"{request.method} {request.headers.get('x-probe')}")


def test_requests_go_out_through_the_prefetched_transport() -> None:
    server = run_in_thread(Starlette(routes=[Route("/echo", _echo, methods=["POST"])]))
    seen: list[int] = []

    async def hook(response: httpx.Response) -> None:
        seen.append(response.status_code)

    async def call() -> str:
        async with upstream_http_client(event_hooks={"response": [hook]}) as client:
            assert client.timeout == httpx.Timeout(600.0, connect=10.0)
            answer = await client.post(f"{server.url}/echo", headers={"x-probe": "1"})
            return answer.text

    try:
        assert asyncio.run(call()) == "POST 1"
    finally:
        server.stop()
    assert seen == [200]


async def _cookie_jar(request: Request) -> PlainTextResponse:
    """Sets a cookie on every answer and echoes the ``Cookie`` header it was sent."""
    answer = PlainTextResponse(request.headers.get("cookie", "-"))
    answer.set_cookie("session", "tenant-a-secret")
    return answer


def test_a_cookie_an_upstream_sets_is_never_sent_back() -> None:
    # one client serves every tenant: a cookie kept from one call would go out on the next
    server = run_in_thread(Starlette(routes=[Route("/jar", _cookie_jar, methods=["POST"])]))

    async def calls() -> tuple[list[str], bool]:
        async with upstream_http_client() as client:
            sent = [(await client.post(f"{server.url}/jar")).text for _ in range(2)]
            return sent, bool(client.cookies)

    try:
        sent, kept = asyncio.run(calls())
    finally:
        server.stop()
    assert sent == ["-", "-"]
    assert kept is False


def test_an_idle_connection_is_dropped_before_a_uvicorn_server_drops_it() -> None:
    import uvicorn

    server_closes_after = uvicorn.Config(Starlette()).timeout_keep_alive  # vLLM, SGLang, ours
    pool = PrefetchedTransport()._ready()._pool

    assert pool._keepalive_expiry == UPSTREAM_KEEPALIVE_SECONDS < server_closes_after
