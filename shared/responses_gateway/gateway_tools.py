"""A request's MCP servers behind the loop's tool-registry seam.

Owns the per-request view of gateway-owned tools: which servers the request names (with their
secrets, kept in memory only: a ``server_url`` of its own, or the ``server_label`` of a server
the operator configured, see :func:`~responses_gateway.mcp.tools.select_server`), which of
their tools the model may see (``allowed_tools``), under which names
(:func:`~responses_gateway.loop.tools.exposed_name`), which calls need approval
(``require_approval``, approval required when omitted), listing the servers the context has no
``mcp_list_tools`` item for, and running calls through :class:`~responses_gateway.mcp.client.
McpClient`. It decides nothing about the loop. Imported only for requests with MCP tools (the MCP
client stays off the cold-start path).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from responses_gateway.config import OperatorMcpServer, ToolBackend
from responses_gateway.errors import InvalidRequestError
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState
from responses_gateway.loop.tools import GatewayTool, ToolOutcome, exposed_name
from responses_gateway.mcp.client import (
    McpClient,
    McpListError,
    McpServer,
    McpSessions,
    ToolInfo,
    protocol_error,
)
from responses_gateway.mcp.tools import (
    filter_allowed,
    function_tool,
    list_tools_item,
    listed_tools_in_context,
    needs_approval,
    select_server,
    server_from_operator,
)
from responses_gateway.protocol.request import McpTool
from responses_gateway.tool_kinds import BACKED_KINDS

__all__ = ["McpBackend", "McpToolRegistry"]


class McpToolRegistry:
    """The gateway tools of one request (implements ``loop.tools.ToolRegistry``).

    Args:
        tools: The request's ``tools`` (pass all of them, so that error ``param`` values such
            as ``tools[2].server_url`` index the request's list; tools other than ``mcp`` ones
            are skipped).
        client: Runs the listings and calls.
        context: History and input items (``mcp_list_tools`` items there are reused).
        operator_servers: The servers the operator configured (``GatewayConfig.mcp_servers``),
            selectable by ``server_label`` alone.
        sessions: The run's MCP sessions (one per server, closed by the run's owner); each
            operation connects on its own when omitted.

    Raises:
        InvalidRequestError: two MCP tools share a label, or a tool selects no usable server
            (see :func:`~responses_gateway.mcp.tools.select_server`).
    """

    def __init__(
        self,
        tools: Sequence[object],
        client: McpClient,
        context: Iterable[dict[str, Any]],
        operator_servers: Iterable[OperatorMcpServer] = (),
        sessions: McpSessions | None = None,
    ) -> None:
        operators = {server.server_label: server for server in operator_servers}
        self._specs: dict[str, McpTool] = {}
        self._servers: dict[str, McpServer] = {}
        for index, tool in enumerate(tools):
            if not isinstance(tool, McpTool):
                continue
            if tool.server_label in self._specs:
                raise InvalidRequestError(
                    f"Duplicate MCP server_label '{tool.server_label}'.",
                    param=f"tools[{index}].server_label",
                    code="invalid_value",
                )
            self._specs[tool.server_label] = tool
            self._servers[tool.server_label] = select_server(tool, operators, index=index)
        self._client = client
        self._run = _sessions_argument(sessions)
        listed = listed_tools_in_context(context)
        self._listed: dict[str, list[ToolInfo]] = {
            label: tools for label, tools in listed.items() if label in self._specs
        }
        self._definitions: list[dict[str, Any]] = []
        self._by_name: dict[str, GatewayTool] = {}
        self._index()

    def _index(self) -> None:
        self._definitions = []
        self._by_name = {}
        for label, spec in self._specs.items():
            for tool in filter_allowed(self._listed.get(label, []), spec.allowed_tools):
                name = exposed_name(label, tool.name)
                self._definitions.append(function_tool(name, tool))
                self._by_name[name] = GatewayTool(
                    label, tool.name, needs_approval(spec.require_approval, tool)
                )

    def model_tools(self) -> list[dict[str, Any]]:
        return list(self._definitions)

    def lookup(self, name: str) -> GatewayTool | None:
        return self._by_name.get(name)

    async def prepare(self, state: LoopState, out: OutputWriter) -> None:
        """List, in parallel, every server the context has no listing for; report each listing
        as an ``mcp_list_tools`` item (failed ones with their error), then fail on the first
        failure."""
        missing = [label for label in self._specs if label not in self._listed]
        if not missing:
            return
        writers = [out.mcp_list_tools(label) for label in missing]
        results = await asyncio.gather(
            *(self._client.list_tools(self._servers[label], **self._run) for label in missing),
            return_exceptions=True,
        )
        failure: McpListError | None = None
        for label, writer, result in zip(missing, writers, results, strict=True):
            if isinstance(result, McpListError):
                writer.fail(result.message)
                failure = failure or result
                continue
            if isinstance(result, BaseException):
                raise result
            allowed = filter_allowed(result, self._specs[label].allowed_tools)
            writer.complete(list_tools_item(label, allowed)["tools"])
            self._listed[label] = allowed
        if failure is not None:
            raise failure
        self._index()

    async def execute(self, call: dict[str, Any]) -> ToolOutcome:
        label = str(call.get("server_label"))
        server = self._servers.get(label)
        if server is None:
            return ToolOutcome(
                error=protocol_error(-32602, f"No MCP server '{label}' in this request's tools.")
            )
        result = await self._client.call_tool(
            server, str(call.get("name")), call.get("arguments"), **self._run
        )
        return ToolOutcome(output=result.output, error=result.error)


class McpBackend:
    """A hosted tool kind run through a tool of an operator MCP server (implements
    ``loop.tools.HostedBackend``): the call's query, code or prompt (the tool-kind table's
    :class:`~responses_gateway.tool_kinds.Backend`) goes to the tool's ``argument``."""

    def __init__(
        self,
        backend: ToolBackend,
        server: OperatorMcpServer,
        client: McpClient,
        sessions: McpSessions | None = None,
    ):
        shape = BACKED_KINDS[backend.type]
        self._backend = backend
        self._value = shape.value
        self._argument = backend.argument or shape.argument
        self._server = server_from_operator(server)
        self._client = client
        self._run = _sessions_argument(sessions)

    async def run(self, item: dict[str, Any]) -> ToolOutcome:
        result = await self._client.call_tool(
            self._server,
            self._backend.tool,
            {self._argument: self._value(item)},
            **self._run,
        )
        return ToolOutcome(output=result.output, error=result.error)


class _RunArgument(TypedDict, total=False):
    sessions: McpSessions


def _sessions_argument(sessions: McpSessions | None) -> _RunArgument:
    """The ``sessions`` keyword of the client's operations (none without a run's sessions)."""
    return {} if sessions is None else {"sessions": sessions}
