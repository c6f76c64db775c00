"""The upstream HTTP client: its timeouts and pool limits, and a TLS context that the cold start
does not wait for.

Owns :func:`upstream_http_client`, the ``httpx.AsyncClient`` the app talks to model providers
with (:func:`responses_gateway.app.create_app` makes one when none is given; the Lambda edge
makes one with telemetry hooks), and :class:`PrefetchedTransport`. httpx builds the TLS context
(the CA bundle read and parsed, ~25 ms of CPU) when a client is made, on the cold start's path;
here a thread started with the client builds it (OpenSSL reads the bundle with the GIL released,
so it overlaps the rest of the start) and the first request waits only if it is not done yet.
The context, the pool and every setting are httpx's defaults for ``trust_env=False``: requests
go out exactly as from a client built the usual way, but for cookies: the client keeps none
(:class:`NoCookies`), and for idle connections, dropped before the common servers drop them
(:data:`UPSTREAM_KEEPALIVE_SECONDS`). One client serves every tenant of the process, so a cookie
an upstream set on one tenant's call would otherwise go out on every later call, whoever makes
it.

Must not decide anything about a request; it makes the client, nothing else.
"""

from __future__ import annotations

import ssl
import threading
from concurrent.futures import Future
from typing import Any

# httpcore is what httpx's transport imports when it is made: imported here, at start, so the
# first request does not (only the TLS context is left to the thread).
import httpcore  # noqa: F401
import httpx

__all__ = [
    "UPSTREAM_KEEPALIVE_SECONDS",
    "UPSTREAM_LIMITS",
    "UPSTREAM_TIMEOUT",
    "NoCookies",
    "PrefetchedTransport",
    "upstream_http_client",
]

UPSTREAM_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
"""Model calls may stream for minutes; a connection must open within 10 s."""
UPSTREAM_KEEPALIVE_SECONDS = 4.0
"""How long an idle upstream connection is kept for reuse: under the 5 s after which uvicorn
(vLLM, SGLang, LiteLLM's proxy) and llama.cpp's server close an idle connection. httpx's own
default is those same 5 s, so a call could pick a connection at the moment its server closes it
and fail with ``ReadError`` before any byte came back."""
UPSTREAM_LIMITS = httpx.Limits(
    max_connections=200, max_keepalive_connections=50, keepalive_expiry=UPSTREAM_KEEPALIVE_SECONDS
)


class NoCookies(httpx.Cookies):
    """A cookie jar that keeps nothing: ``Set-Cookie`` answers are not read (which also saves
    httpx building urllib request and response objects for every answer) and no ``Cookie``
    header is ever added."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None

    def set(self, name: str, value: str, domain: str = "", path: str = "/") -> None:
        return None

    def __bool__(self) -> bool:
        return False


class PrefetchedTransport(httpx.AsyncBaseTransport):
    """httpx's HTTP transport whose TLS context is built by a thread from construction on."""

    def __init__(self, *, limits: httpx.Limits = UPSTREAM_LIMITS) -> None:
        self._limits = limits
        self._transport: httpx.AsyncHTTPTransport | None = None
        self._context: Future[ssl.SSLContext] = Future()
        threading.Thread(target=self._build_context, name="tls-context", daemon=True).start()

    def _build_context(self) -> None:
        try:
            self._context.set_result(httpx.create_ssl_context(trust_env=False))
        except BaseException as exc:  # surfaces on the first request
            self._context.set_exception(exc)

    def _ready(self) -> httpx.AsyncHTTPTransport:
        if self._transport is None:
            self._transport = httpx.AsyncHTTPTransport(
                verify=self._context.result(), trust_env=False, limits=self._limits
            )
        return self._transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        transport = self._transport or self._ready()
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()


def upstream_http_client(
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    event_hooks: dict[str, list[Any]] | None = None,
) -> httpx.AsyncClient:
    """The upstream client: 600 s timeout (10 s to connect), 200 connections (50 kept alive, for
    :data:`UPSTREAM_KEEPALIVE_SECONDS` when idle), no proxies or ``.netrc`` from the environment,
    no cookies kept (:class:`NoCookies`), over ``transport`` (default: a
    :class:`PrefetchedTransport`)."""
    client = httpx.AsyncClient(
        timeout=UPSTREAM_TIMEOUT,
        limits=UPSTREAM_LIMITS,
        trust_env=False,
        transport=transport if transport is not None else PrefetchedTransport(),
        event_hooks=event_hooks,
    )
    # httpx's cookies setter copies into a plain jar: the attribute it reads is set directly
    client._cookies = NoCookies()
    return client
