"""A tiny MCP server over stdio for the client's stdio tests, written without the ``mcp`` SDK.

Run as ``python stdio_server.py [MODE]``. It speaks newline-delimited JSON-RPC on stdin/stdout:
``server/discover`` is answered "method not found" (so the client falls back to the
``initialize`` handshake), then ``initialize``, ``ping``, ``tools/list`` and ``tools/call``.
Starting it costs a bare interpreter, not the SDK's imports, so the tests stay quick.

Tools: ``echo`` (``{"text"}`` back as text), ``env`` (the process environment as JSON), ``fail``
(a tool error), ``big`` (``{"size"}`` characters) and ``hang`` (never answered; the process exits
when its stdin closes, as a well-behaved stdio server does); callable but not listed: ``die``
(the process exits without answering), ``ask`` (before answering, sends a progress notification,
a ``ping`` and an ``elicitation/create`` request to the client, and answers with the client's two
answers) and ``cancelled`` (answers with the ``notifications/cancelled`` messages received so
far).

Modes: ``exit`` (exit with status 3 before reading anything), ``garbage`` (answer every request
with a line that is not JSON), ``many`` (list 50 tools), ``noisy`` (write a banner line that is not
JSON before anything else), ``stubborn`` (ignore a closed stdin and ``SIGTERM``: only ``SIGKILL``
stops it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

__all__ = ["main"]

_TOOLS = [
    {
        "name": "echo",
        "description": "Echo text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    },
    {"name": "env", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "fail", "inputSchema": {"type": "object", "properties": {}}},
    {
        "name": "big",
        "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}},
    },
    {"name": "hang", "inputSchema": {"type": "object", "properties": {}}},
]

_cancelled: list[dict[str, Any]] = []


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _text(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def _call(params: dict[str, Any]) -> dict[str, Any] | None:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if name == "echo":
        return _text(str(arguments.get("text", "")))
    if name == "env":
        return _text(json.dumps(dict(os.environ), sort_keys=True))
    if name == "fail":
        return _text("it failed on purpose", error=True)
    if name == "big":
        return _text("x" * int(arguments.get("size", 0)))
    if name == "hang":
        return None
    if name == "die":
        sys.exit(4)
    if name == "ask":
        _send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
        _send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        elicit = {"message": "Your name?", "requestedSchema": schema}
        _send({"jsonrpc": "2.0", "id": "srv-2", "method": "elicitation/create", "params": elicit})
        answers: dict[str, Any] = {}
        while len(answers) < 2:
            message = json.loads(sys.stdin.readline())
            if message.get("id") in ("srv-1", "srv-2"):
                answers[message["id"]] = message
        return _text(json.dumps([answers["srv-1"], answers["srv-2"]]))
    if name == "cancelled":
        return _text(json.dumps(_cancelled))
    return _text(f"Unknown tool: {name}", error=True)


def main(mode: str) -> None:
    if mode == "exit":
        sys.exit(3)
    if mode == "noisy":
        sys.stdout.write("Starting the stdio test server...\n")
        sys.stdout.flush()
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tools = _TOOLS
    if mode == "many":
        tools = [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(50)]
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "notifications/cancelled":
            _cancelled.append(message["params"])
        if "id" not in message:
            continue  # a notification
        if mode == "garbage":
            sys.stdout.write("this is not json\n")
            sys.stdout.flush()
            continue
        ident, method = message["id"], message.get("method")
        params = message.get("params") or {}
        result: dict[str, Any] | None
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stdio-test", "version": "1"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            result = _call(params)
            if result is None:
                continue  # never answered
        else:
            _send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": method}})
            continue
        _send({"jsonrpc": "2.0", "id": ident, "result": result})
    if mode == "stubborn":
        while True:
            signal.pause()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
