"""The tool registry seam: which tool calls the gateway itself executes, and how they look.

Owns the questions the loop asks about a model's tool call: is it gateway-owned (an MCP tool the
gateway runs), under which server label and tool name, does it need the client's approval first,
and how to run it. Function tools declared by the client are never gateway-owned: their calls
return to the client as ``function_call`` items. Also owns the names gateway tools are exposed
under to the model (:func:`exposed_name`), which must be stable across turns because a stored
``mcp_call`` is replayed to the model as a call to that name.

The MCP executor behind the seam lives in :mod:`responses_gateway.gateway_tools`; this module
holds only the seam and the empty registry of a request with no gateway tools.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from responses_gateway.tool_kinds import exposed_name

if TYPE_CHECKING:  # annotations only: the writer imports this module
    from responses_gateway.loop.output import OutputWriter
    from responses_gateway.loop.state import LoopState

__all__ = [
    "NO_GATEWAY_TOOLS",
    "GatewayTool",
    "HostedBackend",
    "NoGatewayTools",
    "ToolOutcome",
    "ToolRegistry",
    "exposed_name",
]


@dataclass(frozen=True, slots=True)
class GatewayTool:
    """A tool the gateway runs, as one exposed name resolves."""

    server_label: str
    name: str
    """The tool's own name on its server."""
    needs_approval: bool


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What running a gateway tool produced: ``output`` text, or an ``mcp_call.error`` object."""

    output: str | None = None
    error: dict[str, Any] | None = None


class ToolRegistry(Protocol):
    """What the loop needs to know about, and do with, gateway-owned tools."""

    def model_tools(self) -> list[dict[str, Any]]:
        """Gateway tools exposed to the model, as Responses ``function`` tool definitions."""
        ...

    def lookup(self, name: str) -> GatewayTool | None:
        """The gateway tool behind an exposed name; None for a client function."""
        ...

    async def prepare(self, state: LoopState, out: OutputWriter) -> None:
        """Make the tools known before the first model call: list each server the context has
        no ``mcp_list_tools`` item for, reporting the listing through ``out``.

        Raises:
            GatewayError: a listing failed (the response fails; 424 when nothing was streamed).
        """
        ...

    async def execute(self, call: dict[str, Any]) -> ToolOutcome:
        """Run one ``mcp_call`` item (its server, name and arguments); never raises for tool
        failures, which come back as an error object."""
        ...


class HostedBackend(Protocol):
    """Runs one hosted tool kind (``web_search``) for chat and harmony models: the operator's
    configured backend (see :class:`responses_gateway.config.ToolBackend`)."""

    async def run(self, item: dict[str, Any]) -> ToolOutcome:
        """Run the call item (``web_search_call``: its ``action.query``); never raises for
        tool failures, which come back as an error object."""
        ...


class NoGatewayTools:
    """The registry of a request with no gateway-owned tools."""

    def model_tools(self) -> list[dict[str, Any]]:
        return []

    def lookup(self, name: str) -> GatewayTool | None:
        return None

    async def prepare(self, state: LoopState, out: OutputWriter) -> None:
        return None

    async def execute(self, call: dict[str, Any]) -> ToolOutcome:
        raise LookupError(f"no gateway tool named {call.get('name')!r}")


NO_GATEWAY_TOOLS = NoGatewayTools()
