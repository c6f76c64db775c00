"""An ASGI tap that shows everything a served gateway emits to the spec oracle.

Owns :class:`SpecTap`: wrapped around the gateway's app (the end-to-end harness does it for every
test), it reads what the app sends, never changes it, and hands each Response object (create,
retrieve, cancel: JSON bodies and every event of a stream), each SSE event, each WebSocket-mode
message and each compaction object to :class:`~responses_gateway.testing.spec_oracle.SpecOracle`.
A violation is recorded (:attr:`SpecTap.violations`), not raised: the app's answer reaches the
client untouched, and the harness fails the test that caused it.

Which routes carry which object is the table :data:`ROUTES`; anything else passes through
unread. :class:`GatewayTaps` taps every gateway app a test session serves (with
:func:`responses_gateway.testing.server.tapping`) and hands over what they recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from responses_gateway.testing.spec_oracle import SpecOracle, SpecViolation, spec_oracle

__all__ = ["ROUTES", "GatewayTaps", "SpecTap"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("POST", re.compile(r"^/v1/responses/compact$"), "compaction"),
    ("POST", re.compile(r"^/v1/responses$"), "response"),
    ("GET", re.compile(r"^/v1/responses/[^/]+$"), "response"),
    ("POST", re.compile(r"^/v1/responses/[^/]+/cancel$"), "response"),
)
"""(method, path, what a 200 JSON body is): the HTTP routes whose answers the tap checks (a
``text/event-stream`` answer is checked event by event)."""


def _kind(scope: Scope) -> str | None:
    for method, path, kind in ROUTES:
        if scope.get("method") == method and path.match(str(scope.get("path"))):
            return kind
    return None


class _Answer:
    """One HTTP answer being read: its status, content type and body so far."""

    def __init__(self, tap: SpecTap, kind: str, where: str) -> None:
        self.tap = tap
        self.kind = kind
        self.where = where
        self.status = 0
        self.stream = False
        self.body = bytearray()
        self.pending = ""
        self.events = 0

    def start(self, message: Message) -> None:
        self.status = int(message.get("status") or 0)
        headers = {bytes(k).lower(): bytes(v) for k, v in message.get("headers") or ()}
        self.stream = headers.get(b"content-type", b"").startswith(b"text/event-stream")

    def chunk(self, data: bytes, more: bool) -> None:
        if self.status != 200:
            return
        if self.stream:
            self.pending += data.decode("utf-8", "replace").replace("\r\n", "\n")
            *frames, self.pending = self.pending.split("\n\n")
            for frame in frames:
                self.frame(frame)
            return
        self.body += data
        if not more:
            self.tap.check(self.kind, self.body, self.where)

    def frame(self, frame: str) -> None:
        data = "\n".join(
            line[5:].removeprefix(" ") for line in frame.split("\n") if line.startswith("data:")
        )
        if not data:
            return
        self.tap.check("event", data, f"{self.where} event {self.events}")
        self.events += 1


class SpecTap:
    """ASGI middleware checking what ``app`` emits against both specs.

    Args:
        app: the gateway's ASGI app.
        oracle: the oracle (by default the vendored documents').
    """

    def __init__(self, app: App, oracle: SpecOracle | None = None) -> None:
        self.app = app
        self.oracle = oracle or spec_oracle()
        self.violations: list[str] = []
        """One line per object that broke a spec, in the order they were sent."""

    def __getattr__(self, name: str) -> Any:  # ``app.state`` and the rest, as the app has them
        return getattr(self.app, name)

    def check(self, kind: str, payload: bytes | bytearray | str, where: str) -> None:
        try:
            value = json.loads(payload)
        except ValueError:
            self.violations.append(f"{where}: not JSON: {payload[:200]!r}")
            return
        try:
            if kind == "response":
                self.oracle.check_response(value, where)
            elif kind == "compaction":
                self.oracle.check_compaction(value, where)
            elif kind == "event":
                self.oracle.check_event(value, where)
            else:
                self.oracle.check_socket_event(value, where)
        except SpecViolation as violation:
            self.violations.append(str(violation))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and scope.get("path") == "/v1/responses":
            await self.app(scope, receive, self._socket_sender(scope, send))
            return
        kind = _kind(scope) if scope["type"] == "http" else None
        if kind is None:
            await self.app(scope, receive, send)
            return
        answer = _Answer(self, kind, f"{scope['method']} {scope['path']}")

        async def tapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.start(message)
            elif message["type"] == "http.response.body":
                answer.chunk(bytes(message.get("body") or b""), bool(message.get("more_body")))
            await send(message)

        await self.app(scope, receive, tapped)

    def _socket_sender(self, scope: Scope, send: Send) -> Send:
        count = 0

        async def tapped(message: Message) -> None:
            nonlocal count
            if message["type"] == "websocket.send":
                text = message.get("text")
                data = text if text is not None else bytes(message.get("bytes") or b"")
                self.check("socket", data, f"WebSocket {scope['path']} message {count}")
                count += 1
            await send(message)

        return tapped


class GatewayTaps:
    """The taps of every gateway app served while :meth:`wrap` is installed: give it to
    :func:`~responses_gateway.testing.server.tapping`, then :meth:`take` after each test."""

    def __init__(self, oracle: SpecOracle | None = None) -> None:
        self.oracle = oracle
        self.taps: list[SpecTap] = []

    def wrap(self, app: Any) -> Any:
        """A gateway app (one holding a gateway) tapped; any other app (a fake upstream, an MCP
        server) as it is."""
        if getattr(getattr(app, "state", None), "gateway", None) is None:
            return app
        tap = SpecTap(app, self.oracle)
        self.taps.append(tap)
        return tap

    def take(self) -> list[str]:
        """What every tap recorded since the last call, in order; the taps start afresh."""
        found = [line for tap in self.taps for line in tap.violations]
        for tap in self.taps:
            tap.violations.clear()
        return found
