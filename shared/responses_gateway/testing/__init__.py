"""Deterministic test doubles shipped with the package, like ``agents.testing``.

Owns the scripted upstream model servers: :class:`ScriptedUpstream` (a FIFO of :class:`Turn`
plus a recording of received requests), the fake upstream ASGI app speaking the real Chat
Completions and Responses wire formats (:func:`create_fake_upstream_app`), the offline ``demo``
model (:func:`demo_turn`) and the loopback server runner (:func:`run_in_thread`,
:func:`serve_fake_upstream`). Production code paths never import this package except to serve
the bundled ``demo`` model.

Typical use::

    upstream = ScriptedUpstream(Turn(text="Hi!"), demo=False)
    with run_in_thread(create_fake_upstream_app(upstream)) as server:
        ...  # point the gateway at server.url + "/v1"
        assert upstream.requests[0].headers["authorization"] == "Bearer sk-upstream"
"""

from responses_gateway.testing.demo import DEMO_MODEL, demo_turn
from responses_gateway.testing.fake_upstream import (
    SimulatedDisconnect,
    create_fake_upstream_app,
    default_usage,
)
from responses_gateway.testing.script import (
    ChatEnd,
    FinishReason,
    RecordedRequest,
    ScriptedUpstream,
    ToolCall,
    Turn,
    TurnFactory,
    Usage,
    Wire,
    error_envelope,
)
from responses_gateway.testing.server import RunningServer, run_in_thread, serve_fake_upstream

__all__ = [
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
