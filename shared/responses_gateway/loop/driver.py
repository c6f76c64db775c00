"""The loop driver: the only place that dispatches on :data:`NextAction`.

Owns :func:`step` (run exactly one action, so a worker can checkpoint between actions),
:func:`run_loop` (step until finished) and the pure deciders ``decide_after_*`` that choose the
next action from the state alone. Each arm of :func:`step` does one job and then asks a decider;
there is no "if it has tools, loop, else return" branch anywhere else.

Budgets: before every model call the driver asks the context's budget guard (when it has one)
for a :class:`~responses_gateway.usage.budget.BudgetStatus`, and :func:`decide_within_budget`
turns it into the action: the call, or ``Finish("incomplete", reason="budget_exceeded")``.

Errors: a :class:`~responses_gateway.errors.GatewayError` raised by an adapter fails the response
through the same render step as every other ending; the exception itself is kept on
:class:`LoopContext` for the HTTP edge (which turns it into a status code when nothing has been
streamed yet).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from responses_gateway.adapters.base import Adapter, ModelCall
from responses_gateway.context.errors import (
    CONTEXT_LENGTH_MESSAGE,
    ContextLengthExceeded,
    as_context_length,
)
from responses_gateway.context.meter import ContextLimits, ContextMeter
from responses_gateway.context.tokens import TokenCount
from responses_gateway.context.truncate import is_kept, plan_truncation
from responses_gateway.errors import GatewayError, InternalError, UpstreamStatusError
from responses_gateway.ids import new_id
from responses_gateway.loop.compaction import (
    compacted_transcript,
    compaction_item,
    summary_call,
    summary_of,
)
from responses_gateway.loop.events import (
    ItemEvent,
    ItemFinished,
    NullSink,
    ResponseFinished,
    ResponseStarted,
    Sink,
)
from responses_gateway.loop.failover import decide_after_llm_failure
from responses_gateway.loop.output import OutputWriter, snapshot
from responses_gateway.loop.prepared import model_transcript
from responses_gateway.loop.reasoning import ReasoningPolicy
from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import (
    CallLlm,
    Compact,
    ExecuteTools,
    Finish,
    InterruptForApproval,
    LoopState,
    NextAction,
    Truncate,
    TurnResult,
)
from responses_gateway.loop.tools import (
    NO_GATEWAY_TOOLS,
    HostedBackend,
    ToolOutcome,
    ToolRegistry,
)
from responses_gateway.protocol.contract import check_request, lower_context_items
from responses_gateway.routing.attempts import Attempts, GiveUp
from responses_gateway.routing.failures import classify
from responses_gateway.tool_kinds import (
    CLIENT_CALL_ITEM_TYPES,
    ITEM_KINDS,
    KINDS,
    LOWERED_WIRES,
    allowed_tools_filter,
    runs_on_gateway,
    search_tools,
    tool_view,
)
from responses_gateway.usage.budget import BUDGET_EXCEEDED, BudgetStatus

__all__ = [
    "BudgetCheck",
    "LoopContext",
    "Persist",
    "cancel",
    "close_run",
    "build_model_call",
    "decide_after_call_llm",
    "decide_after_compact",
    "decide_after_execute_tools",
    "decide_before_call_llm",
    "decide_start",
    "decide_within_budget",
    "tool_budget",
    "error_object",
    "run_loop",
    "step",
]

if TYPE_CHECKING:  # the router is built by the service only for routed models
    from responses_gateway.routing.router import Router

logger = logging.getLogger(__name__)

_PASSED_PARAMS = (
    "temperature",
    "top_p",
    "max_output_tokens",
    "top_logprobs",
    "user",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
)


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
    max_tool_calls: int = 32
    """The gateway's cap on gateway tool executions per response (``max_tool_calls`` can only
    lower it)."""
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
    deployments: list[str] = field(default_factory=list)
    """The deployment that answered each model call of this run, in order (routed models)."""
    failed_attempts: list[dict[str, Any]] = field(default_factory=list)
    """Each failed attempt of a routed model call, in order: ``{"deployment", "model",
    "kind", "status"}`` (the upstream's HTTP status when it sent one; the request log keeps
    them)."""
    on_close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Run when :func:`run_loop` returns or raises (closing the run's MCP sessions)."""


def error_object(error: GatewayError) -> dict[str, Any]:
    """The ``Response.error`` object for a failure: ``{"code","message"}``."""
    if isinstance(error, UpstreamStatusError) and error.upstream_status == 429:
        code = "rate_limit_exceeded"
    elif error.status_code == 400 and error.code:
        code = error.code
    else:
        code = "server_error"
    return {"code": code, "message": error.message}


def tool_budget(state: LoopState, ctx: LoopContext) -> int:
    """How many gateway tool calls this response may execute in all."""
    requested = state.request.get("max_tool_calls")
    return min(int(requested), ctx.max_tool_calls) if requested else ctx.max_tool_calls


def build_model_call(state: LoopState, ctx: LoopContext) -> ModelCall:
    """The next model call for ``state``: transcript, visible tools and the client's settings.

    The client's tools and the transcript are shown to the adapter's wire through the tool-kind
    table (:func:`responses_gateway.tool_kinds.tool_view`): relayed on the Responses wire,
    lowered to functions elsewhere. Once the tool budget is spent, the model is called with no
    tools at all, to answer.
    """
    request = state.request
    check_request(request, ctx.adapter.wire)  # refused tools (the service checked them first)
    declared = [
        {k: v for k, v in tool.items() if v is not None} for tool in request.get("tools") or []
    ]
    results = hosted_results(state)
    transcript = model_transcript(state)
    if ctx.adapter.wire in LOWERED_WIRES:  # what no function wire shows, as the contract says
        transcript = lower_context_items(transcript, keep=results)
    view = tool_view(
        declared,
        transcript,
        request.get("tool_choice"),
        ctx.adapter.wire,
        backed=frozenset(ctx.backends),
        results=results,
    )
    tools = view.tools + ctx.tools.model_tools()
    allowed = None
    if ctx.adapter.wire in LOWERED_WIRES:
        allowed = allowed_tools_filter(request.get("tool_choice"), frozenset(ctx.backends))
    if allowed is not None:  # a function wire has no allowed_tools: the list is the restriction
        tools = [tool for tool in tools if allowed(str(tool.get("name")))]
    if state.tool_calls_executed >= tool_budget(state, ctx):
        tools = []
    params: dict[str, Any] = {k: request[k] for k in _PASSED_PARAMS if request.get(k) is not None}
    if ctx.adapter.wire == "responses":
        params.update(state.passthrough)
    if state.include:
        params["include"] = list(state.include)
    if params.get("service_tier") == "auto":  # the echoed default; the upstream's own default
        del params["service_tier"]
    if request.get("parallel_tool_calls") is False and tools:
        params["parallel_tool_calls"] = False
    reasoning = request.get("reasoning") or {}
    if reasoning.get("effort") or reasoning.get("summary"):
        params["reasoning"] = {k: v for k, v in reasoning.items() if v is not None}
    text = request.get("text") or {}
    if (text.get("format") or {}).get("type", "text") != "text" or text.get("verbosity"):
        params["text"] = text
    instructions = request.get("instructions")
    return ModelCall(
        model=ctx.upstream_model,
        input=view.input,
        instructions=instructions if isinstance(instructions, str) else None,
        tools=tools,
        tool_choice=view.tool_choice if tools else None,
        exposed=dict(view.calls) if tools else {},
        params=params,
    )


def _turn(state: LoopState, kind: str) -> list[int]:
    return [
        index
        for index in range(state.turn_start, len(state.output))
        if state.output[index].get("type") == kind
    ]


def decide_after_call_llm(state: LoopState) -> NextAction:
    """Choose what follows a model call, from the state alone.

    Cut off (``length``/``content_filter``): finish ``incomplete``, running nothing. Gateway
    calls announced this turn run next; calls waiting for approval end the response; otherwise
    the response is complete (client ``function_call`` items go back to the client).
    """
    if state.last_stop == "length":
        return Finish("incomplete", reason="max_output_tokens")
    if state.last_stop == "content_filter":
        return Finish("incomplete", reason="content_filter")
    pending = [
        i for i in _turn(state, "mcp_call") if state.output[i].get("status") == "in_progress"
    ]
    pending += [
        i
        for i in range(state.turn_start, len(state.output))
        if runs_on_gateway(state.output[i]) and state.output[i].get("status") == "in_progress"
    ]
    if pending:
        return ExecuteTools(tuple(pending))
    approvals = _turn(state, "mcp_approval_request")
    if approvals:
        return InterruptForApproval(tuple(approvals))
    return Finish("completed")


def decide_after_execute_tools(state: LoopState) -> NextAction:
    """After gateway tools ran: wait for approvals asked this turn, return the turn's client
    calls to the client, or call the model again with the results."""
    approvals = _turn(state, "mcp_approval_request")
    if approvals:
        return InterruptForApproval(tuple(approvals))
    client_calls = [
        i
        for kind in CLIENT_CALL_ITEM_TYPES
        for i in _turn(state, kind)
        if not runs_on_gateway(state.output[i])
    ]
    if client_calls:
        return Finish("completed")
    return CallLlm()


def decide_start(
    approved: tuple[str, ...], transcript: list[dict[str, Any]] | None = None
) -> NextAction:
    """The first action: run the calls the client just approved; compact when the input ends
    with ``compaction_trigger``; else call the model."""
    if approved:
        return ExecuteTools(approved=approved)
    if transcript and transcript[-1].get("type") == "compaction_trigger":
        return Compact("client")
    return CallLlm()


def _context_length_failure() -> Finish:
    return Finish(
        "failed", error={"code": "context_length_exceeded", "message": CONTEXT_LENGTH_MESSAGE}
    )


def decide_before_call_llm(
    state: LoopState, limits: ContextLimits, measured: TokenCount | None
) -> NextAction | None:
    """Whether the next model call must wait for the context to shrink; None: call now.

    Past the ``context_management`` threshold, compact (once per model call: never twice in a
    row). Past the window (minus the tokens reserved for the answer), truncate the oldest items
    under ``truncation: auto``; when nothing more can go, or under ``disabled``, fail with
    ``context_length_exceeded`` without calling the model.
    """
    if measured is None:
        return None
    tokens = measured.tokens
    just_compacted = bool(state.output) and state.output[-1].get("type") == "compaction"
    if (
        limits.compact_threshold is not None
        and tokens > limits.compact_threshold
        and not just_compacted
    ):
        return Compact("threshold")
    if limits.window is None or tokens + limits.reserve <= limits.window:
        return None
    if limits.truncation == "auto":
        excess = tokens + limits.reserve - limits.window
        count = plan_truncation(state.upstream_input, tokens, excess)
        if count:
            return Truncate(count)
    return _context_length_failure()


def decide_after_compact(state: LoopState, action: Compact) -> NextAction:
    """After compacting: a client's ``compaction_trigger`` ends the response with the item;
    a threshold compaction goes on to the model call it was made for."""
    return Finish("completed") if action.trigger == "client" else CallLlm()


async def _fit_context(
    state: LoopState, ctx: LoopContext
) -> tuple[NextAction | None, ModelCall | None]:
    """Measure the next call against its limits and ask the decider whether it may go; also
    the call it measured (None without a meter), which is the call to make if it may."""
    if ctx.meter is None:
        return None, None
    call = build_model_call(state, ctx)
    limits = await ctx.meter.limits(call)
    measured = await ctx.meter.measure(call, ctx.adapter.wire, limits)
    action = decide_before_call_llm(state, limits, measured)
    if action is not None:
        logger.info(
            "context of %s: %s tokens (%s), window %s: %s",
            state.response_id,
            measured.tokens if measured else None,
            measured.source if measured else None,
            limits.window,
            action.kind,
        )
    if isinstance(action, Finish) and action.outcome == "failed":
        ctx.failure = ContextLengthExceeded()
    return action, call


def _larger_model(before: NextAction | None, state: LoopState, ctx: LoopContext) -> str | None:
    """The route's larger-window model when the context was found too long for the model's
    own window before calling it (the call then goes there directly)."""
    if not isinstance(before, Finish) or ctx.router is None or not ctx.router.routes(state.model):
        return None
    if (before.error or {}).get("code") != "context_length_exceeded":
        return None
    return ctx.router.route_of(state.model).context_window_fallback


async def _call_routed(
    state: LoopState,
    ctx: LoopContext,
    writer: OutputWriter,
    router: Router,
    larger: str | None = None,
) -> TurnResult:
    """One model call through the router: each failed attempt is judged by
    :func:`decide_after_llm_failure` (another deployment, a fallback model, or the failure).
    ``larger``: start on the route's larger-window model (the context is known not to fit)."""
    attempts = Attempts(primary=state.model, model=larger or "")
    policy = router.route_of(state.model)
    while True:
        target = await router.acquire(attempts)
        ctx.adapter = target.adapter
        ctx.upstream_model = target.deployment.upstream_model
        call = build_model_call(state, ctx)
        writer.calls = call.exposed
        ctx.deployments.append(target.deployment.id)  # named by a stream's headers already
        try:
            turn: TurnResult = await router.call(target, call, writer)
        except GatewayError as error:
            ctx.deployments.pop()
            failure = classify(
                as_context_length(error), streamed=len(state.output) > state.turn_start
            )
            await router.failed(target, failure, attempts)
            ctx.failed_attempts.append(
                {
                    "deployment": target.deployment.id,
                    "model": attempts.model,
                    "kind": failure.kind,
                    "status": getattr(failure.error, "upstream_status", None)
                    or failure.error.status_code,
                }
            )
            verdict = decide_after_llm_failure(
                attempts, failure, policy, router.siblings_left(attempts)
            )
            logger.info(
                "model call of %s failed on %s (%s): %s",
                state.response_id,
                target.deployment.id,
                failure.kind,
                verdict,
            )
            if isinstance(verdict, GiveUp):
                raise failure.error from None
            attempts.apply(verdict)
            continue
        return turn


def decide_within_budget(state: LoopState, budget: BudgetStatus | None) -> NextAction:
    """Whether the pending model call may run: a spent budget ends the response
    ``incomplete`` (reason ``budget_exceeded``) with what it produced so far."""
    if budget is not None and budget.exceeded is not None:
        return Finish("incomplete", reason=BUDGET_EXCEEDED)
    return CallLlm()


async def _call_llm(state: LoopState, ctx: LoopContext, sink: Sink) -> NextAction:
    policy = ReasoningPolicy.of(state.request, state.include, ctx.tenant, ctx.adapter.wire)
    writer = ctx.writer = OutputWriter(state, sink, ctx.tools, policy)
    try:
        if state.llm_calls == 0:
            await ctx.tools.prepare(state, writer)
        before, measured = await _fit_context(state, ctx)
        larger = _larger_model(before, state, ctx)
        if before is not None:
            if larger is None:
                return before
            ctx.failure = None  # not a failure: the larger-window model takes the call
        state.turn_start = len(state.output)
        if ctx.router is not None:
            turn = await _call_routed(state, ctx, writer, ctx.router, larger)
        else:  # the call measured is this call: nothing it is built from changed since
            call = measured if measured is not None else build_model_call(state, ctx)
            writer.calls = call.exposed
            turn = await ctx.adapter.call_llm(call, writer)
    except GatewayError as error:
        writer.close_open("incomplete")
        error = as_context_length(error)
        ctx.failure = error
        return Finish("failed", error=error_object(error))
    except Exception:  # a bug in an adapter must still end the response properly
        logger.exception("model call failed unexpectedly")
        writer.close_open("incomplete")
        ctx.failure = InternalError("The gateway failed to process the model's answer.")
        return Finish("failed", error=error_object(ctx.failure))
    state.llm_calls += 1
    state.add_usage(turn.usage)
    state.last_stop = turn.stop
    writer.close_open("completed" if turn.stop == "stop" else "incomplete")
    return decide_after_call_llm(state)


async def _compact(state: LoopState, ctx: LoopContext, sink: Sink, action: Compact) -> NextAction:
    """Ask the model for a summary of the transcript (no tools), emit it as a sealed
    ``compaction`` item, and continue from the summary."""
    writer = ctx.writer = OutputWriter(state, sink, ctx.tools)
    call = summary_call(build_model_call(state, ctx))
    transcript = call.input
    scratch = LoopState(
        response_id=state.response_id,
        created_at=state.created_at,
        model=state.model,
        request={},
        upstream_input=[],
    )
    index = writer.open_compaction()
    try:
        turn = await ctx.adapter.call_llm(call, OutputWriter(scratch, NullSink()))
    except GatewayError as error:
        writer.close_open("incomplete")
        del state.output[index:]  # a compaction item without content is no item
        error = as_context_length(error)
        ctx.failure = error
        return Finish("failed", error=error_object(error))
    state.llm_calls += 1
    state.add_usage(turn.usage)
    summary = summary_of(scratch.output)
    item = compaction_item(summary, tenant=ctx.tenant, item_id=str(state.output[index]["id"]))
    writer.finish_compaction(index, str(item["encrypted_content"]))
    state.upstream_input = compacted_transcript(transcript, summary)
    return decide_after_compact(state, action)


def _truncate(state: LoopState, action: Truncate) -> NextAction:
    """Drop the oldest ``action.count`` transcript items (system/developer messages stay)."""
    dropped, rest = state.upstream_input[: action.count], state.upstream_input[action.count :]
    state.upstream_input = [item for item in dropped if is_kept(item)] + rest
    return CallLlm()


_NOT_EXECUTED = {
    "type": "mcp_tool_execution_error",
    "content": [
        {"type": "text", "text": "Not executed: the response reached its max_tool_calls limit."}
    ],
}


def _approval_request(state: LoopState, request_id: str) -> dict[str, Any]:
    for item in reversed(state.control_items + state.output):
        if item.get("type") == "mcp_approval_request" and item.get("id") == request_id:
            found: dict[str, Any] = item
            return found
    raise InternalError(f"approval request {request_id} vanished from the context")


async def _execute_tools(
    state: LoopState, ctx: LoopContext, sink: Sink, action: ExecuteTools
) -> NextAction:
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
    local = [i for i in indexes if runs_on_gateway(state.output[i])]
    indexes = [i for i in indexes if i not in local]
    await asyncio.gather(*(_run_on_gateway(state, ctx, writer, i) for i in local))
    remaining = max(0, tool_budget(state, ctx) - state.tool_calls_executed)
    run, skipped = indexes[:remaining], indexes[remaining:]
    for index in skipped:
        writer.finish_mcp_call(index, error=_NOT_EXECUTED, status="incomplete")
    outcomes = await asyncio.gather(*(ctx.tools.execute(state.output[i]) for i in run))
    for index, outcome in zip(run, outcomes, strict=True):
        state.tool_calls_executed += 1
        writer.finish_mcp_call(index, output=outcome.output, error=outcome.error)
    return decide_after_execute_tools(state)


HOSTED_RESULT = "hosted_tool_result"
"""The control item keeping what a gateway-run hosted call returned, for this response's later
model calls (``{"type", "item_id", "output"}``; never shown to the client or stored)."""


def hosted_results(state: LoopState) -> dict[str, str]:
    """What the hosted calls the gateway ran in this response returned, by item id."""
    return {
        str(item["item_id"]): str(item.get("output") or "")
        for item in state.control_items
        if item.get("type") == HOSTED_RESULT
    }


async def _run_on_gateway(
    state: LoopState, ctx: LoopContext, writer: OutputWriter, index: int
) -> None:
    state.tool_calls_executed += 1
    runner = _GATEWAY_RUNNERS[str(state.output[index].get("type"))]
    await runner(state, ctx, writer, index)


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


_GATEWAY_RUNNERS = {
    "tool_search_call": _search_tools,
    **{kind.item_type: _run_backend for kind in KINDS if kind.backend and kind.item_type},
}
"""Call item types the gateway runs itself (``runs_on_gateway``) -> their runner."""


def _settle(state: LoopState, sink: Sink) -> None:
    """Close tool calls that were announced but will never run (the response is ending)."""
    for index, item in enumerate(state.output):
        kind = ITEM_KINDS.get(str(item.get("type")))
        pending = item.get("type") == "mcp_call" or runs_on_gateway(item)
        if pending and item.get("status") == "in_progress":
            item["status"] = kind.cut_off if kind is not None else "incomplete"
            sink.emit(ItemFinished(index, snapshot(item)))


def _interrupt_for_approval(state: LoopState, action: InterruptForApproval) -> NextAction:
    """End the response waiting for the client's approval of the calls at
    ``action.output_indexes`` (their approval requests and pending state belong to the MCP
    tool executor, which is not part of this gateway version yet)."""
    return Finish("completed")


async def _finish_writing(write: Awaitable[None], response_id: str) -> None:
    """Await ``write`` to its end even if the task is cancelled meanwhile (a client leaving
    while the record is written): a record write cut between its steps would leave no record
    at all. The cancellation is re-raised once the write is done."""
    job = asyncio.ensure_future(write)
    try:
        await asyncio.shield(job)
    except asyncio.CancelledError:
        if not job.done():
            logger.info("cancelled while storing %s: finishing the write first", response_id)
            await asyncio.wait({job})
        if not job.cancelled() and job.exception() is not None:
            logger.error("could not store response %s: %s", response_id, job.exception())
        raise


async def _persist(state: LoopState, ctx: LoopContext) -> dict[str, Any]:
    response = render_response(state)
    if ctx.persist is None:
        return response
    try:
        await _finish_writing(
            ctx.persist(state, render_response(state, stored=True)), state.response_id
        )
    except GatewayError as error:
        logger.error("could not store response %s: %s", state.response_id, error.message)
        ctx.failure = InternalError("The response could not be stored.")
        state.status = "failed"
        state.incomplete_reason = None
        state.error = error_object(ctx.failure)
        state.completed_at = None
        response = render_response(state)
    return response


async def _finish(state: LoopState, action: Finish, ctx: LoopContext, sink: Sink) -> None:
    _settle(state, sink)
    state.status = action.outcome
    state.incomplete_reason = action.reason
    state.error = action.error
    if action.outcome == "completed":
        state.completed_at = int(time.time())
    sink.emit(ResponseFinished(await _persist(state, ctx)))


async def cancel(state: LoopState, ctx: LoopContext) -> None:
    """End ``state`` as ``cancelled``: close what was open, keep what was produced, store it.

    Used when the client went away (a synchronous response is cancelled by terminating its
    connection). No event is emitted: nobody is listening.
    """
    if ctx.writer is not None:
        ctx.writer.close_open("incomplete")
    _settle(state, NullSink())
    state.status = "cancelled"
    state.incomplete_reason = None
    state.error = None
    state.set_next_action(Finish("cancelled"))
    await _persist(state, ctx)


async def step(state: LoopState, ctx: LoopContext, sink: Sink) -> bool:
    """Run one action of the loop; return True once the response has finished."""
    if not state.started:
        state.started = True
        sink.emit(ResponseStarted(render_response(state)))
    action = state.take_next_action()
    if isinstance(action, CallLlm) and ctx.budget is not None:
        action = decide_within_budget(state, await ctx.budget.status(state))
    if isinstance(action, CallLlm):
        state.set_next_action(await _call_llm(state, ctx, sink))
    elif isinstance(action, Compact):
        state.set_next_action(await _compact(state, ctx, sink, action))
    elif isinstance(action, Truncate):
        state.set_next_action(_truncate(state, action))
    elif isinstance(action, ExecuteTools):
        state.set_next_action(await _execute_tools(state, ctx, sink, action))
    elif isinstance(action, InterruptForApproval):
        state.set_next_action(_interrupt_for_approval(state, action))
    elif isinstance(action, Finish):
        await _finish(state, action, ctx, sink)
        return True
    else:  # pragma: no cover - exhaustive over NextAction
        raise TypeError(f"unknown loop action {action!r}")
    return False


async def run_loop(
    state: LoopState,
    ctx: LoopContext,
    sink: Sink,
    *,
    pause: Callable[[LoopState], bool] | None = None,
) -> LoopState:
    """Run the loop to its end (or until ``pause``) and return the state.

    ``pause`` is asked between two actions (never before the first, never after the last): when
    it answers True the loop stops there, unfinished (``state.status`` stays ``in_progress``), so
    its caller can hand the state over to a worker (a foreground request near its deadline).

    If the task running it is cancelled (the client disconnected), the response is stored as
    ``cancelled`` with everything produced so far, and the cancellation propagates.
    """
    try:
        while not await step(state, ctx, sink):
            if pause is not None and pause(state):
                break
    except asyncio.CancelledError:
        if state.status == "in_progress":
            await asyncio.shield(cancel(state, ctx))
        raise
    finally:
        await close_run(ctx)
    return state


async def close_run(ctx: LoopContext) -> None:
    """Run the context's closers (its MCP sessions), shielded from a cancellation of the caller:
    whoever drives :func:`step` calls it when the run stops (:func:`run_loop` does)."""
    if ctx.on_close:
        await asyncio.shield(_close(ctx))


async def _close(ctx: LoopContext) -> None:
    for close in ctx.on_close:
        await close()
