"""The tool-call journal: a background worker never runs a recorded tool call twice.

Owns :class:`JournaledTools`, a :class:`~responses_gateway.loop.tools.ToolRegistry` wrapper used
by the background worker only. Before a gateway tool call runs, the journal records that it
started; when it returns, its outcome. A worker that resumes from a checkpoint re-runs the
``ExecuteTools`` action it was in, and for each call:

- a recorded outcome is returned as it was, without calling the tool again;
- a call that started but has no recorded outcome (the worker died while it ran) is **not
  retried**: it fails honestly with an ``mcp_tool_execution_error`` saying it may or may not have
  taken effect. Tools have side effects, and a blind retry could repeat them; the model sees the
  error and can decide to call again;
- a call never started runs normally.

Calls are keyed by what stays stable across resumes: the approval request a call answers, or
else its ``mcp_call`` item id (fixed in the checkpoint that announced it). It decides nothing
about the loop.
"""

from __future__ import annotations

from typing import Any

from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState
from responses_gateway.loop.tools import GatewayTool, ToolOutcome, ToolRegistry
from responses_gateway.store.base import BackgroundStore

__all__ = ["INTERRUPTED", "JournaledTools", "journal_key"]

INTERRUPTED: dict[str, Any] = {
    "type": "mcp_tool_execution_error",
    "content": [
        {
            "type": "text",
            "text": (
                "The gateway lost this tool call's result: its worker stopped while the call "
                "ran. The call may or may not have taken effect; it was not retried."
            ),
        }
    ],
}
"""The error of a call that started in a worker that died before recording its outcome."""


def journal_key(call: dict[str, Any]) -> str:
    """The journal key of an ``mcp_call`` item: stable across resumes of the same action."""
    approval = call.get("approval_request_id")
    return f"a:{approval}" if approval else f"c:{call.get('id')}"


class JournaledTools:
    """``inner`` with every execution journaled in ``store`` (see the module docstring)."""

    def __init__(
        self, inner: ToolRegistry, store: BackgroundStore, tenant: str, response_id: str
    ) -> None:
        self._inner = inner
        self._store = store
        self._tenant = tenant
        self._id = response_id

    def model_tools(self) -> list[dict[str, Any]]:
        return self._inner.model_tools()

    def lookup(self, name: str) -> GatewayTool | None:
        return self._inner.lookup(name)

    async def prepare(self, state: LoopState, out: OutputWriter) -> None:
        await self._inner.prepare(state, out)

    async def execute(self, call: dict[str, Any]) -> ToolOutcome:
        key = journal_key(call)
        entry = await self._store.journal_start(self._tenant, self._id, key)
        if entry is not None:
            if entry.get("state") == "finished":
                outcome = entry.get("outcome") or {}
                return ToolOutcome(output=outcome.get("output"), error=outcome.get("error"))
            return ToolOutcome(error=INTERRUPTED)
        outcome = await self._inner.execute(call)
        await self._store.journal_finish(
            self._tenant, self._id, key, {"output": outcome.output, "error": outcome.error}
        )
        return outcome
