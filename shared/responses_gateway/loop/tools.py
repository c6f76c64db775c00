"""The tool registry seam: which tool calls the gateway itself executes.

Owns the questions the loop asks about a model's tool call: is it gateway-owned (an MCP or builtin
tool the gateway runs), and does it need the client's approval first? Function tools declared by
the client are never gateway-owned: their calls return to the client as ``function_call`` items.

The executors behind gateway-owned tools (MCP) plug in here; this module holds only the seam and
the empty registry used when a request has no gateway tools.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["NO_GATEWAY_TOOLS", "NoGatewayTools", "ToolRegistry"]


class ToolRegistry(Protocol):
    """What the loop needs to know about gateway-owned tools."""

    def model_tools(self) -> list[dict[str, Any]]:
        """Gateway tools exposed to the model, as Responses ``function`` tool definitions."""
        ...

    def is_gateway_owned(self, name: str) -> bool:
        """Whether a call to ``name`` (as the model saw it) is executed by the gateway."""
        ...

    def needs_approval(self, name: str) -> bool:
        """Whether a gateway-owned call to ``name`` must be approved by the client first."""
        ...

    async def execute(self, call: dict[str, Any]) -> dict[str, Any]:
        """Run one gateway-owned call item and return the finished item."""
        ...


class NoGatewayTools:
    """The registry of a request with no gateway-owned tools."""

    def model_tools(self) -> list[dict[str, Any]]:
        return []

    def is_gateway_owned(self, name: str) -> bool:
        return False

    def needs_approval(self, name: str) -> bool:
        return False

    async def execute(self, call: dict[str, Any]) -> dict[str, Any]:
        raise LookupError(f"no gateway tool named {call.get('name')!r}")


NO_GATEWAY_TOOLS = NoGatewayTools()
