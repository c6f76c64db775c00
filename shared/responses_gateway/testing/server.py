"""Running an ASGI app on loopback: in a background thread for tests, or in the foreground.

Owns :func:`run_in_thread` (a real uvicorn server in a daemon thread with its own event loop,
used for the fake upstream, the gateway app in end-to-end tests and the benchmarks) and
:func:`serve_fake_upstream` (the blocking server behind ``responses-gateway fake-upstream``).
Readiness and shutdown are observed, never waited for with fixed sleeps: the listening socket is
bound before the thread starts (so the port is known at once) and a ``threading.Event`` is set
when uvicorn's startup finishes. It knows nothing about what the app serves; a test harness may
wrap every app it serves (:func:`tapping`, how the end-to-end suites hold what gateways emit to
the specs).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Literal

import uvicorn
from starlette.types import ASGIApp

from responses_gateway.sockets.serving import LazyWebSocketProtocol
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream

__all__ = ["RunningServer", "run_in_thread", "serve_fake_upstream", "tapping"]

_TAPS: list[Callable[[ASGIApp], ASGIApp]] = []


@contextlib.contextmanager
def tapping(wrap: Callable[[ASGIApp], ASGIApp]) -> Iterator[None]:
    """While inside, every app :func:`run_in_thread` serves is served as ``wrap(app)`` (``wrap``
    returns the app itself for apps it leaves alone)."""
    _TAPS.append(wrap)
    try:
        yield
    finally:
        _TAPS.remove(wrap)


class _ThreadServer(uvicorn.Server):
    """A uvicorn server that reports readiness and can be woken to exit at once."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().startup(sockets=sockets)
        finally:
            self.ready.set()

    async def main_loop(self) -> None:
        # uvicorn's loop polls ``should_exit`` every 100 ms; this one also wakes on request_exit().
        wakeup = asyncio.Event()
        self._wakeup = wakeup
        self._loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    def request_exit(self) -> None:
        """Ask the server to shut down gracefully (thread-safe)."""
        self.should_exit = True
        loop, wakeup = self._loop, self._wakeup
        if loop is not None and wakeup is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(wakeup.set)


class RunningServer:
    """A uvicorn server running in a daemon thread; stop it with :meth:`stop` or ``with``."""

    def __init__(self, server: _ThreadServer, thread: threading.Thread, host: str, port: int):
        self._server = server
        self._thread = thread
        self.host = host
        """The host the server listens on."""
        self.port = port
        """The real port (never 0)."""

    @property
    def url(self) -> str:
        """``http://<host>:<port>``, without a trailing slash (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server thread is still alive."""
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down gracefully (lifespan shutdown included) and join the thread. Idempotent.

        Open responses get uvicorn's ``timeout_graceful_shutdown`` to finish; if the thread is
        still alive after ``timeout`` seconds the server is forced to exit.
        """
        self._server.request_exit()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RunningServer(url={self.url!r}, running={self.running})"


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP: asyncio only sets TCP_NODELAY on accepted sockets whose proto
    # says TCP, and without it every response pays a ~40 ms Nagle/delayed-ACK stall.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def run_in_thread(
    app: ASGIApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    log_level: str = "warning",
    lifespan: Literal["auto", "on", "off"] = "auto",
    startup_timeout: float = 10.0,
    graceful_timeout: int = 5,
) -> RunningServer:
    """Serve ``app`` with uvicorn in a daemon thread; return once it accepts connections.

    Args:
        app: Any ASGI 3 application.
        host: The interface to bind (loopback by default).
        port: The port; 0 picks a free one (read it from ``.port``/``.url``).
        log_level: uvicorn's log level. Global logging is not reconfigured: uvicorn's records
            propagate to the root logger (so pytest captures them).
        lifespan: uvicorn's lifespan mode; startup and shutdown hooks run in the server thread.
        startup_timeout: Seconds to wait for startup before giving up.
        graceful_timeout: Seconds open responses get to finish when stopping.

    Raises:
        OSError: the address could not be bound.
        RuntimeError: the app failed to start (e.g. its lifespan startup raised).
        TimeoutError: startup did not finish within ``startup_timeout``.
    """
    for wrap in _TAPS:
        app = wrap(app)
    sock = _bind(host, port)
    real_port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app,
        host=host,
        port=real_port,
        log_config=None,
        log_level=log_level,
        lifespan=lifespan,
        ws=LazyWebSocketProtocol,
        timeout_graceful_shutdown=graceful_timeout,
    )
    server = _ThreadServer(config)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # SystemExit when startup fails; reported below
            failure.append(exc)
        finally:
            server.ready.set()
            sock.close()

    thread = threading.Thread(target=run, name=f"uvicorn-{real_port}", daemon=True)
    thread.start()
    running = RunningServer(server, thread, host, real_port)
    if not server.ready.wait(startup_timeout):
        running.stop(timeout=1.0)
        raise TimeoutError(f"server on port {real_port} did not start in {startup_timeout}s")
    if not server.started:
        running.stop(timeout=1.0)
        cause = failure[0] if failure else None
        raise RuntimeError(f"server on port {real_port} failed to start: {cause!r}") from cause
    return running


def serve_fake_upstream(
    host: str,
    port: int,
    upstream: ScriptedUpstream | None = None,
    *,
    log_level: str = "info",
) -> None:
    """Serve the fake upstream (the demo model unless ``upstream`` is given) until interrupted."""
    uvicorn.run(
        create_fake_upstream_app(upstream),
        host=host,
        port=port,
        log_level=log_level,
        ws="none",
    )
