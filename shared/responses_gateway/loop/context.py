"""The live parts of one loop run: what the driver and the tool runner are handed.

Owns :class:`LoopContext` (the adapter, the gateway tools and hosted backends, the caps, the
persister, the budget guard, the router... of one run, never serialized, unlike
:class:`~responses_gateway.loop.state.LoopState`), and the two seams it names: :data:`Persist`
and :class:`BudgetCheck`. It holds no secrets of its own and decides nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from responses_gateway.adapters.base import Adapter
from responses_gateway.context.meter import ContextMeter
from responses_gateway.errors import GatewayError
from responses_gateway.loop.limits import DEFAULT_LIMITS, LoopLimits
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState
from responses_gateway.loop.tools import NO_GATEWAY_TOOLS, HostedBackend, ToolRegistry
from responses_gateway.usage.budget import BudgetStatus

if TYPE_CHECKING:  # the router is built by the service only for routed models
    from responses_gateway.routing.router import Router

__all__ = ["BudgetCheck", "LoopContext", "Persist"]


Persist = Callable[[LoopState, dict[str, Any]], Awaitable[None]]
"""Stores a finished response (state and its rendered object) before the client hears of it."""


class BudgetCheck(Protocol):
    """Answers whether the response's tenant may make another model call."""

    async def status(self, state: LoopState) -> BudgetStatus: ...


@dataclass(slots=True)
class LoopContext:
    """The live, per-invocation parts of a loop run (never serialized)."""

    adapter: Adapter
    upstream_model: str
    tools: ToolRegistry = NO_GATEWAY_TOOLS
    limits: LoopLimits = DEFAULT_LIMITS
    """The caps of this response's loop: model calls, gateway tool calls (the request's
    ``max_tool_calls`` can only lower that one), wall time."""
    persist: Persist | None = None
    """Called at every ending, before the terminal event: a stored response is written before
    the client can see it finish (and so before it can chain to it)."""
    failure: GatewayError | None = None
    """The error that failed the response, for the HTTP edge."""
    writer: OutputWriter | None = None
    """The writer of the model call in progress (so a cancellation can close its items)."""
    backends: dict[str, HostedBackend] = field(default_factory=dict)
    """Hosted tool kinds the gateway runs on this (chat or harmony) wire, by kind name."""
    budget: BudgetCheck | None = None
    """Asked before every model call (None: no budget applies)."""
    extra: dict[str, Any] = field(default_factory=dict)
    meter: ContextMeter | None = None
    """Limits and token counts of this response's model calls (None: no context checks)."""
    tenant: str = "local"
    """Whose response this is (compaction items and reasoning are sealed for it)."""
    router: Router | None = None
    """Sends each model call to a deployment of the model's route and retries it elsewhere
    (:mod:`responses_gateway.loop.failover`); None: the one ``adapter`` takes every call."""
    refused_wires: frozenset[str] = frozenset()
    """Wires that refuse a field the request set: the router sends none of its calls to a
    deployment on one of them (a sibling or fallback of another wire)."""
    deployments: list[str] = field(default_factory=list)
    """The deployment that answered each model call of this run, in order (routed models)."""
    failed_attempts: list[dict[str, Any]] = field(default_factory=list)
    """Each failed attempt of a routed model call, in order: ``{"deployment", "model",
    "kind", "status"}`` (the upstream's HTTP status when it sent one; the request log keeps
    them)."""
    on_close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run when :func:`run_loop` returns or raises (closing the run's MCP sessions)."""
