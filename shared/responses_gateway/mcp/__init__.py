"""MCP servers (a request's remote ones, and the operator's) as gateway-owned tools.

The gateway speaks MCP with its own client, on the ``httpx`` and ``asyncio`` it already runs on:
the ``mcp`` SDK is never imported (it serves as the tests' servers and oracle), so a request with
MCP tools imports a few small modules, not the SDK's ~580. The parts:

- :mod:`.security`: the SSRF guard (:func:`check_server_url`, :class:`McpPolicy`) and the
  ``httpx`` transports that dial only the checked address and bound every answer;
- :mod:`.client`: :class:`McpClient` (``list_tools`` / ``call_tool`` over streamable HTTP, SSE or
  stdio, under a deadline, errors as OpenAI ``mcp_call.error`` objects or :class:`McpListError`),
  :class:`McpSessions` (a run's sessions) and :class:`SharedMcpSessions` (the process's
  sessions of operator stdio servers marked ``shared``);
- :mod:`.rpc` (the protocol: negotiation, JSON-RPC, the server's own messages), :mod:`.modern`
  (the stateless version's envelope and headers), :mod:`.remote` (streamable HTTP and SSE),
  :mod:`.stdio` (server processes) and :mod:`.sse_decoder` (event streams);
- :mod:`.tools`: pure helpers (server selection, ``allowed_tools``, ``require_approval``,
  function names, the request's :class:`McpToolset`, ``mcp_list_tools`` items).

This package does not drive the agent loop: the loop asks it questions and runs its calls.
"""

from responses_gateway.mcp.client import (
    McpClient,
    McpLimits,
    McpListError,
    McpServer,
    McpSessions,
    SharedMcpSessions,
    ToolInfo,
    ToolResult,
    TransportKind,
    child_environment,
    http_error,
    protocol_error,
    tool_execution_error,
)
from responses_gateway.mcp.security import (
    McpPolicy,
    McpUrlRefusedError,
    ResolvedTarget,
    bounded_transport,
    check_server_url,
    redact_url,
)
from responses_gateway.mcp.tools import (
    McpToolRef,
    McpToolset,
    ToolNames,
    error_text,
    filter_allowed,
    function_tool,
    list_tools_item,
    listed_tools_in_context,
    needs_approval,
    select_server,
    server_from_operator,
    server_from_tool,
    tools_from_list_item,
)

__all__ = [
    "McpClient",
    "McpLimits",
    "McpListError",
    "McpPolicy",
    "McpServer",
    "McpSessions",
    "McpToolRef",
    "McpToolset",
    "McpUrlRefusedError",
    "ResolvedTarget",
    "SharedMcpSessions",
    "ToolInfo",
    "ToolNames",
    "ToolResult",
    "TransportKind",
    "bounded_transport",
    "check_server_url",
    "child_environment",
    "error_text",
    "filter_allowed",
    "function_tool",
    "http_error",
    "list_tools_item",
    "listed_tools_in_context",
    "needs_approval",
    "protocol_error",
    "redact_url",
    "select_server",
    "server_from_operator",
    "server_from_tool",
    "tool_execution_error",
    "tools_from_list_item",
]
