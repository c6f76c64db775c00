"""Running the calls the gateway owns: the ``ExecuteTools`` action's work.

Owns :func:`execute_tools`: the calls an ``ExecuteTools`` names (and the ones the client just
approved) run through the runner their owner names (``LoopState.owners``): ``mcp`` through the
request's MCP tools, ``backend`` through the operator's backend of a hosted kind, ``search`` by
answering a server ``tool_search_call`` from the request's tools. One budget counts them all
(:func:`~responses_gateway.loop.limits.tool_budget`): calls past it are closed without running,
and the model sees that they did not run. Also owns what a hosted run returned within the
response (:func:`hosted_results`), which later model calls of the response replay.

It never runs a call the gateway does not own (a relayed call is the upstream's, whatever its
status), and decides nothing about what follows: the driver asks ``decide_after_execute_tools``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from responses_gateway.errors import InternalError
from responses_gateway.ids import new_id
from responses_gateway.loop.context import LoopContext
from responses_gateway.loop.events import ItemEvent, Sink
from responses_gateway.loop.limits import tool_budget
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.prepared import model_transcript
from responses_gateway.loop.state import ExecuteTools, LoopState
from responses_gateway.loop.tools import ToolOutcome
from responses_gateway.tool_kinds import ITEM_KINDS, search_tools

__all__ = ["HOSTED_RESULT", "NOT_EXECUTED", "execute_tools", "hosted_results"]

HOSTED_RESULT = "hosted_tool_result"
"""The control item keeping what a gateway-run hosted call returned, for this response's later
model calls (``{"type", "item_id", "output"}``; never shown to the client or stored)."""

NOT_EXECUTED = "Not executed: the response reached its max_tool_calls limit."
"""What a call past the tool budget returns instead of running."""

Runner = Callable[[LoopState, LoopContext, OutputWriter, int], Awaitable[None]]


def hosted_results(state: LoopState) -> dict[str, str]:
    """What the hosted calls the gateway ran in this response returned, by item id."""
    return {
        str(item["item_id"]): str(item.get("output") or "")
        for item in state.control_items
        if item.get("type") == HOSTED_RESULT
    }


def _approval_request(state: LoopState, request_id: str) -> dict[str, Any]:
    for item in reversed(state.control_items + state.output):
        if item.get("type") == "mcp_approval_request" and item.get("id") == request_id:
            found: dict[str, Any] = item
            return found
    raise InternalError(f"approval request {request_id} vanished from the context")


async def execute_tools(
    state: LoopState, ctx: LoopContext, sink: Sink, action: ExecuteTools
) -> None:
    """Run the gateway calls ``action`` names, within the response's tool budget, and the
    calls the client approved (announced here as ``mcp_call`` items first)."""
    writer = ctx.writer = OutputWriter(state, sink, ctx.tools)
    indexes = list(action.output_indexes)
    if action.approved:
        state.turn_start = len(state.output)
    for request_id in action.approved:
        request = _approval_request(state, request_id)
        indexes.append(
            writer.open_mcp_call(
                server_label=str(request.get("server_label")),
                name=str(request.get("name")),
                arguments=str(request.get("arguments") or "{}"),
                approval_request_id=request_id,
            )
        )
    owned = [i for i in indexes if state.owner(i) in _RUNNERS]
    remaining = max(0, tool_budget(state, ctx.limits) - state.tool_calls_executed)
    run, skipped = owned[:remaining], owned[remaining:]
    for index in skipped:
        _SKIPPERS[str(state.owner(index))](state, writer, index)
    state.tool_calls_executed += len(run)
    await asyncio.gather(*(_RUNNERS[str(state.owner(i))](state, ctx, writer, i) for i in run))


async def _run_mcp(state: LoopState, ctx: LoopContext, writer: OutputWriter, index: int) -> None:
    """Run an ``mcp_call`` through the request's MCP tools."""
    outcome = await ctx.tools.execute(state.output[index])
    writer.finish_mcp_call(index, output=outcome.output, error=outcome.error)


async def _run_backend(
    state: LoopState, ctx: LoopContext, writer: OutputWriter, index: int
) -> None:
    """Run a hosted call (``web_search_call``, ``file_search_call``...) through the kind's
    configured backend; its result goes into the item's own fields (the tool-kind table's
    :class:`~responses_gateway.tool_kinds.Backend`), so later turns replay it from the item."""
    item = state.output[index]
    kind = ITEM_KINDS[str(item["type"])]
    backend = ctx.backends.get(kind.name)
    if backend is None:  # the backend is gone (a resumed loop on another configuration)
        outcome = ToolOutcome(error={"message": "No backend is configured for this tool."})
    else:
        outcome = await backend.run(item)
    text = _outcome_text(outcome)
    state.control_items.append({"type": HOSTED_RESULT, "item_id": item["id"], "output": text})
    if outcome.error is None and kind.backend is not None:
        item.update(kind.backend.result(item, text))
        for name, data in kind.backend.progress(item, text, index):
            writer.sink.emit(ItemEvent(name, data))
        name = f"response.{item['type']}.completed"
        writer.sink.emit(ItemEvent(name, {"item_id": item["id"], "output_index": index}))
    writer.finish_call_item(index, "completed" if outcome.error is None else "failed")


def _outcome_text(outcome: ToolOutcome) -> str:
    if outcome.error is None:
        return outcome.output or ""
    error = outcome.error
    message = error.get("message") if isinstance(error, dict) else None
    if message is None and isinstance(error, dict) and isinstance(error.get("content"), list):
        texts = [str(p.get("text")) for p in error["content"] if isinstance(p, dict)]
        message = "\n".join(texts) or None
    return f"The tool failed: {message or error}"


async def _search_tools(
    state: LoopState, ctx: LoopContext, writer: OutputWriter, index: int
) -> None:
    """Answer the server ``tool_search_call`` at ``index`` with a ``tool_search_output`` whose
    tools the next model call can use."""
    call = state.output[index]
    tools = search_tools(
        state.request.get("tools") or [], model_transcript(state), call.get("arguments")
    )
    _answer_search(writer, index, tools)


def _answer_search(writer: OutputWriter, index: int, tools: list[dict[str, Any]]) -> None:
    call = writer.state.output[index]
    writer.finish_call_item(index)
    writer.add_item(
        {
            "id": new_id("tso"),
            "type": "tool_search_output",
            "call_id": call.get("call_id"),
            "execution": "server",
            "status": "completed",
            "tools": tools,
        }
    )


_RUNNERS: dict[str, Runner] = {"mcp": _run_mcp, "backend": _run_backend, "search": _search_tools}
"""Each gateway owner (``LoopState.owners``) -> how its calls run."""


def _skip_mcp(state: LoopState, writer: OutputWriter, index: int) -> None:
    error = {
        "type": "mcp_tool_execution_error",
        "content": [{"type": "text", "text": NOT_EXECUTED}],
    }
    writer.finish_mcp_call(index, error=error, status="incomplete")


def _skip_backend(state: LoopState, writer: OutputWriter, index: int) -> None:
    item = state.output[index]
    state.control_items.append(
        {"type": HOSTED_RESULT, "item_id": item["id"], "output": NOT_EXECUTED}
    )
    writer.finish_call_item(index, ITEM_KINDS[str(item["type"])].cut_off)


def _skip_search(state: LoopState, writer: OutputWriter, index: int) -> None:
    _answer_search(writer, index, [])


_SKIPPERS: dict[str, Callable[[LoopState, OutputWriter, int], None]] = {
    "mcp": _skip_mcp,
    "backend": _skip_backend,
    "search": _skip_search,
}
"""Each gateway owner -> how a call of it past the tool budget is closed without running (the
model is told it did not run)."""
