"""The tool-kind table: how every Responses tool type is shown to each upstream wire.

Owns :data:`KINDS` (one :class:`ToolKind` per tool family: ``function``, ``custom``, ``shell``,
``local_shell``, ``apply_patch``, ``computer``, ``tool_search`` and the hosted tools) and the
three questions the rest of the gateway asks it:

* what the model sees (:func:`tool_view`): on the Responses wire, the client's tools relayed as
  they are; on the Chat Completions and harmony wires, each tool lowered to a ``function`` under a
  collision-free, turn-stable exposed name (namespaces flattened to ``<namespace>__<name>``,
  built-in tools under their type), the transcript's call items lowered to ``function_call`` /
  ``function_call_output`` pairs under the same names, and ``tool_choice`` mapped to the exposed
  function;
* what a call of an exposed function becomes (:meth:`Exposed.item`): the kind's own item
  (``custom_tool_call``, ``shell_call``, ``apply_patch_call``...) with the arguments mapped to its
  fields, plus the kind's stream events (:meth:`ToolKind.events`);
* what happens to a hosted tool (``web_search``, ``file_search``...) off the Responses wire, where
  nobody can run it: the provider's policy (:data:`HostedPolicy`) omits it, visibly, or rejects
  the request (:func:`hosted_tools_without_backend`).

Tools arriving in ``input`` count too: a Codex ``additional_tools`` item's tools are offered like
declared ones (the item itself never goes upstream on a lowering wire), and the tools of a
``tool_search_output`` item become callable. Tools marked ``defer_loading`` stay hidden until a
``tool_search_output`` loads them.

This module is pure data and pure functions: no I/O, no loop state, no events of its own. MCP
tools are not here: the gateway runs them (:mod:`responses_gateway.gateway_tools`).
"""

from responses_gateway.tool_kinds.search import search_tools
from responses_gateway.tool_kinds.table import (
    BACKED_KINDS,
    CALL_ITEM_TYPES,
    CLIENT_CALL_ITEM_TYPES,
    HOSTED_ITEM_TYPES,
    ITEM_KINDS,
    KINDS,
    Backend,
    Exposed,
    ToolKind,
    exposed_name,
    hosted_seen,
    item_id_prefix,
    kind_of,
    lowered_owner,
    shown,
)
from responses_gateway.tool_kinds.view import (
    HOSTED_POLICIES,
    LOWERED_WIRES,
    HostedPolicy,
    ToolView,
    allowed_tools_filter,
    hosted_tools_without_backend,
    lower_items,
    mcp_choice_as_functions,
    tool_view,
)

__all__ = [
    "allowed_tools_filter",
    "BACKED_KINDS",
    "CALL_ITEM_TYPES",
    "CLIENT_CALL_ITEM_TYPES",
    "HOSTED_ITEM_TYPES",
    "HOSTED_POLICIES",
    "ITEM_KINDS",
    "KINDS",
    "LOWERED_WIRES",
    "Backend",
    "Exposed",
    "HostedPolicy",
    "ToolKind",
    "ToolView",
    "exposed_name",
    "hosted_seen",
    "hosted_tools_without_backend",
    "item_id_prefix",
    "kind_of",
    "lower_items",
    "mcp_choice_as_functions",
    "lowered_owner",
    "search_tools",
    "shown",
    "tool_view",
]
