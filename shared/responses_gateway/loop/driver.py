"""The loop driver: the only place that dispatches on :data:`NextAction`.

Owns :func:`step` (run exactly one action, so a worker can checkpoint between actions),
:func:`run_loop` (step until finished) and the pure deciders ``decide_after_*`` that choose the
next action from the state alone. Each arm of :func:`step` does one job and then asks a decider;
there is no "if it has tools, loop, else return" branch anywhere else.

Bounds: every action passes :func:`~responses_gateway.loop.limits.decide_within_limits` before
it runs (model calls per response, wall time), and runs under the response's remaining wall time
(an action still running at the deadline is cut: what it produced is kept and the response ends
``incomplete``). So no upstream answer and no model can keep a loop going: the caps are checked
in this one dispatcher, not by each path that leads to a model call.

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
from typing import TYPE_CHECKING, Any

from responses_gateway.adapters.base import ModelCall
from responses_gateway.context.errors import (
    CONTEXT_LENGTH_MESSAGE,
    ContextLengthExceeded,
    as_context_length,
)
from responses_gateway.context.meter import ContextLimits
from responses_gateway.context.tokens import TokenCount
from responses_gateway.context.truncate import is_kept, plan_truncation
from responses_gateway.errors import GatewayError, InternalError, UpstreamStatusError
from responses_gateway.loop.compaction import (
    compacted_transcript,
    compaction_item,
    summary_call,
    summary_of,
)
from responses_gateway.loop.context import BudgetCheck, LoopContext, Persist
from responses_gateway.loop.events import (
    ItemFinished,
    NullSink,
    ResponseFinished,
    ResponseStarted,
    Sink,
)
from responses_gateway.loop.execution import execute_tools, hosted_results
from responses_gateway.loop.failover import decide_after_llm_failure
from responses_gateway.loop.limits import (
    DEFAULT_LIMITS,
    MAX_LOOP_SECONDS,
    MAX_MODEL_CALLS,
    NO_PROGRESS,
    LoopLimits,
    deadline,
    decide_within_limits,
    effective_tool_choice,
    no_progress,
    tool_budget,
)
from responses_gateway.loop.output import OutputWriter, snapshot
from responses_gateway.loop.prepared import model_transcript
from responses_gateway.loop.reasoning import ReasoningPolicy, restore_reasoning
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
from responses_gateway.protocol.contract import check_request, failure_code, lower_context_items
from responses_gateway.routing.attempts import Attempts, GiveUp
from responses_gateway.routing.failures import classify
from responses_gateway.tool_kinds import (
    ITEM_KINDS,
    LOWERED_WIRES,
    allowed_tools_filter,
    mcp_choice_as_functions,
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
    "presence_penalty",
    "frequency_penalty",
    "max_output_tokens",
    "max_tool_calls",
    "top_logprobs",
    "user",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
)
"""The settings a model call forwards when the client set them (``state.request`` keeps unset ones
null; the Response echoes those as OpenAI's effective values, :func:`render.echoed`)."""


def error_object(error: GatewayError) -> dict[str, Any]:
    """The ``Response.error`` object for a failure: ``{"code","message"}``, the code as the
    contract maps it (:func:`~responses_gateway.protocol.contract.failure_code`)."""
    status = error.status_code
    if isinstance(error, UpstreamStatusError) and error.upstream_status == 429:
        status = 429
    return {"code": failure_code(status, error.code), "message": error.message}


def build_model_call(state: LoopState, ctx: LoopContext) -> ModelCall:
    """The next model call for ``state``: transcript, visible tools and the client's settings.

    The client's tools and the transcript are shown to the adapter's wire through the tool-kind
    table (:func:`responses_gateway.tool_kinds.tool_view`): relayed on the Responses wire,
    lowered to functions elsewhere. Reasoning this response already produced is restored from
    the gateway's seal (:func:`~responses_gateway.loop.reasoning.restore_reasoning`), as a
    client's replayed reasoning is, so the model gets its own blob back. Once the tool budget is
    spent, the model is called with no tools at all, to answer; once a forced ``tool_choice`` was
    honoured by a gateway call, the model is called with ``auto``
    (:func:`~responses_gateway.loop.limits.effective_tool_choice`).
    """
    request = state.request
    check_request(request, ctx.adapter.wire)  # refused tools (the service checked them first)
    declared = [
        {k: v for k, v in tool.items() if v is not None} for tool in request.get("tools") or []
    ]
    results = hosted_results(state)
    # this response's own reasoning is sealed for the client: the model gets its blob back
    transcript = restore_reasoning(model_transcript(state), ctx.tenant, {})
    if ctx.adapter.wire in LOWERED_WIRES:  # what no function wire shows, as the contract says
        transcript = lower_context_items(transcript, keep=results)
    choice = effective_tool_choice(state)
    view = tool_view(
        declared,
        transcript,
        choice,
        ctx.adapter.wire,
        backed=frozenset(ctx.backends),
        results=results,
    )
    tools = view.tools + ctx.tools.model_tools()
    allowed = None
    if ctx.adapter.wire in LOWERED_WIRES:
        allowed = allowed_tools_filter(choice, frozenset(ctx.backends))
    if allowed is not None:  # a function wire has no allowed_tools: the list is the restriction
        tools = [tool for tool in tools if allowed(str(tool.get("name")))]
    if state.tool_calls_executed >= tool_budget(state, ctx.limits):
        tools = []
    tool_choice = view.tool_choice
    if ctx.adapter.wire not in LOWERED_WIRES and tools:  # MCP tools go up as functions
        tool_choice = mcp_choice_as_functions(tool_choice, [str(t.get("name")) for t in tools])
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
        tool_choice=tool_choice if tools else None,
        exposed=dict(view.calls),  # a call the model makes anyway is still read as its kind
        params=params,
    )


def _turn(state: LoopState, kind: str) -> list[int]:
    return [
        index
        for index in range(state.turn_start, len(state.output))
        if state.output[index].get("type") == kind
    ]


def decide_after_call_llm(state: LoopState, limits: LoopLimits = DEFAULT_LIMITS) -> NextAction:
    """Choose what follows a model call, from the state alone.

    Cut off (``length``/``content_filter``): finish ``incomplete``, running nothing. The calls
    this turn made that the gateway owns (``LoopState.owners``; never a call the upstream ran or
    relayed, whatever its status) run next, unless no model call may follow them (the cap is
    reached: they would run for nobody); calls waiting for approval end the response;
    otherwise the response is complete (client calls go back to the client).
    """
    if state.last_stop == "length":
        return Finish("incomplete", reason="max_output_tokens")
    if state.last_stop == "content_filter":
        return Finish("incomplete", reason="content_filter")
    pending = state.gateway_calls(state.turn_start)
    if pending and state.llm_calls >= limits.max_model_calls:
        return Finish("incomplete", reason=MAX_MODEL_CALLS)
    if pending:
        return ExecuteTools(tuple(pending))
    approvals = _turn(state, "mcp_approval_request")
    if approvals:
        return InterruptForApproval(tuple(approvals))
    return Finish("completed")


def decide_after_execute_tools(state: LoopState) -> NextAction:
    """After gateway tools ran: wait for approvals asked this turn, return the turn's client
    calls to the client, end a round that repeated the previous one exactly (no progress), or
    call the model again with the results."""
    approvals = _turn(state, "mcp_approval_request")
    if approvals:
        return InterruptForApproval(tuple(approvals))
    client_calls = [
        i for i in range(state.turn_start, len(state.output)) if state.owner(i) == "client"
    ]
    if client_calls:
        return Finish("completed")
    if no_progress(state):
        return Finish("incomplete", reason=NO_PROGRESS)
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
    return ctx.router.policy_for(state.model, ctx.refused_wires).context_window_fallback


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
    key = state.request.get("prompt_cache_key")  # the contract's row: the routing key
    attempts = Attempts(
        primary=state.model, model=larger or "", key=key, refused_wires=ctx.refused_wires
    )
    policy = router.policy_for(state.model, ctx.refused_wires)
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
        state.turns.append(state.turn_start)
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
    _note_unfinished(state)
    return decide_after_call_llm(state, ctx.limits)


def _note_unfinished(state: LoopState) -> None:
    """Log the upstream's calls of this turn that it left unfinished: they are relayed as they
    came (the upstream owns them; the gateway neither completes nor runs them)."""
    for index in range(state.turn_start, len(state.output)):
        item = state.output[index]
        if state.owner(index) == "upstream" and item.get("status") == "in_progress":
            logger.info(
                "upstream left %s %s of %s in_progress: relayed as it came",
                item.get("type"),
                item.get("id"),
                state.response_id,
            )


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
    except asyncio.CancelledError:  # cut by the wall time (or the client): no item either
        del state.output[index:]
        raise
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


async def _execute_tools(
    state: LoopState, ctx: LoopContext, sink: Sink, action: ExecuteTools
) -> NextAction:
    await execute_tools(state, ctx, sink, action)
    return decide_after_execute_tools(state)


def _settle(state: LoopState, sink: Sink) -> None:
    """Close the gateway's calls that were announced but will never run (the response is
    ending). Calls of the upstream stay as it left them: the gateway never finishes those."""
    for index in state.gateway_calls():
        item = state.output[index]
        if item.get("status") == "in_progress":
            kind = ITEM_KINDS.get(str(item.get("type")))
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
    """Run one action of the loop; return True once the response has finished.

    Every action is first held to the response's limits, and runs within its remaining wall
    time: an action cut by the deadline keeps what it produced and ends the response
    ``incomplete`` (``max_loop_seconds``) at the next step.
    """
    if not state.started:
        state.started = True
        sink.emit(ResponseStarted(render_response(state)))
    now = time.time()
    if state.started_at is None:
        state.started_at = now
    action = decide_within_limits(state, state.take_next_action(), ctx.limits, now)
    if isinstance(action, CallLlm) and ctx.budget is not None:
        action = decide_within_budget(state, await ctx.budget.status(state))
    if isinstance(action, Finish):
        await _finish(state, action, ctx, sink)
        return True
    scope = asyncio.timeout(deadline(state, ctx.limits, now) - time.time())
    try:
        async with scope:
            state.set_next_action(await _dispatch(state, ctx, sink, action))
    except TimeoutError:
        if not scope.expired():
            raise
        logger.info("%s reached its wall time during %s", state.response_id, action.kind)
        if ctx.writer is not None:
            ctx.writer.close_open("incomplete")
        state.set_next_action(Finish("incomplete", reason=MAX_LOOP_SECONDS))
    return False


async def _dispatch(
    state: LoopState, ctx: LoopContext, sink: Sink, action: NextAction
) -> NextAction:
    """Run one action that is not the ending; return the next action."""
    if isinstance(action, CallLlm):
        return await _call_llm(state, ctx, sink)
    if isinstance(action, Compact):
        return await _compact(state, ctx, sink, action)
    if isinstance(action, Truncate):
        return _truncate(state, action)
    if isinstance(action, ExecuteTools):
        return await _execute_tools(state, ctx, sink, action)
    if isinstance(action, InterruptForApproval):
        return _interrupt_for_approval(state, action)
    raise TypeError(f"unknown loop action {action!r}")  # pragma: no cover - exhaustive


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
