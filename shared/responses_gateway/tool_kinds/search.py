"""The gateway's own ``tool_search`` (execution ``server`` on function-only wires): a word
match over the deferred tools' names and descriptions.

Pure: it ranks tool definitions and returns them as a ``tool_search_output`` carries them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from responses_gateway.tool_kinds._shapes import tools_of
from responses_gateway.tool_kinds.view import declared_tools

__all__ = ["search_tools"]


def _words(text: Any) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", str(text or "").lower()))


def _deferred(tools: Iterable[dict[str, Any]]) -> list[tuple[str | None, dict[str, Any]]]:
    """``(namespace, tool)`` of every tool marked ``defer_loading``."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for tool in tools:
        if tool.get("type") == "namespace":
            label = str(tool.get("name") or "")
            found += [(label, t) for t in tools_of(tool) if t.get("defer_loading")]
        elif tool.get("defer_loading"):
            found.append((None, tool))
    return found


def search_tools(
    tools: Iterable[dict[str, Any]], transcript: list[dict[str, Any]], arguments: Any
) -> list[dict[str, Any]]:
    """Run a server ``tool_search``: the deferred tools (declared, or in ``additional_tools``)
    whose names and descriptions share the most words with ``arguments["query"]``, best first,
    at most ``limit`` (default 8); namespaced matches come back inside their namespace, as a
    ``tool_search_output`` carries them."""
    query = arguments.get("query") if isinstance(arguments, dict) else None
    limit = arguments.get("limit") if isinstance(arguments, dict) else None
    limit = int(limit) if isinstance(limit, int | float) and limit > 0 else 8
    wanted = _words(query)
    scored: list[tuple[int, int, str | None, dict[str, Any]]] = []
    namespaces = {
        str(t.get("name")): t
        for t in declared_tools(tools, transcript)
        if t.get("type") == "namespace"
    }
    for position, (namespace, tool) in enumerate(_deferred(declared_tools(tools, transcript))):
        words = _words(f"{namespace or ''} {tool.get('name')} {tool.get('description')}")
        words |= _words(str(tool.get("name") or "").replace("_", " "))
        score = len(wanted & words)
        if score:
            scored.append((-score, position, namespace, tool))
    out: list[dict[str, Any]] = []
    grouped: dict[str, dict[str, Any]] = {}
    for _, _, namespace, tool in sorted(scored, key=lambda s: (s[0], s[1]))[:limit]:
        loaded = {k: v for k, v in tool.items() if k != "defer_loading"}
        if namespace is None:
            out.append(loaded)
            continue
        if namespace not in grouped:
            source = namespaces.get(namespace, {})
            grouped[namespace] = {
                "type": "namespace",
                "name": namespace,
                "description": source.get("description") or "",
                "tools": [],
            }
            out.append(grouped[namespace])
        grouped[namespace]["tools"].append(loaded)
    return out
