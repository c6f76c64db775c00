"""What follows a failed model call: another deployment, a fallback model, or the failure.

Owns :func:`decide_after_llm_failure`, a pure decider over the call's
:class:`~responses_gateway.routing.attempts.Attempts`, the typed
:class:`~responses_gateway.routing.failures.LlmFailure` and the primary model's route. Its rules,
first match wins:

1. output of the call already reached the client: give up (never a second answer);
2. ``context_length_exceeded``: the route's larger-window model, once; else give up;
3. not retryable (a 4xx that is the request's fault): give up;
4. the route's ``max_attempts`` reached: give up;
5. a sibling deployment of the current model not failed yet: retry on it;
6. a fallback model not used yet: retry on it, in the configured order;
7. otherwise a new round on the primary model, which waits for the first deployment to come
   back (the router bounds that wait by ``max_wait_seconds``), while the wait is not used up.

Tool calls are never re-run by a retry: a model call produces tool calls, it never executes one,
and a retry only replaces a model call that produced no output. It performs no I/O.
"""

from __future__ import annotations

from responses_gateway.routing.attempts import Attempts, GiveUp, RetryOn, Verdict
from responses_gateway.routing.deployments import ModelRoute
from responses_gateway.routing.failures import LlmFailure

__all__ = ["decide_after_llm_failure"]


def decide_after_llm_failure(
    attempts: Attempts, failure: LlmFailure, route: ModelRoute, siblings_left: int
) -> Verdict:
    """The verdict on a failed model call (``route``: the primary model's; ``siblings_left``:
    deployments of the current model not failed in this round)."""
    if failure.streamed:
        return GiveUp("output already reached the client")
    if failure.kind == "context_length":
        larger = route.context_window_fallback
        if larger is not None and attempts.model != larger:
            return RetryOn(larger)
        return GiveUp("the context does not fit any configured model")
    if not failure.retryable:
        return GiveUp(f"{failure.kind} is not retryable")
    if attempts.count >= route.max_attempts:
        return GiveUp("max_attempts reached")
    if siblings_left > 0:
        return RetryOn(attempts.model)
    on_larger = attempts.model == route.context_window_fallback
    unused = [] if on_larger else [m for m in route.fallbacks if m not in attempts.fallbacks_used]
    if unused:  # (the larger model's context cannot go back to smaller ones)
        return RetryOn(unused[0])
    if attempts.waited >= route.max_wait_seconds:
        return GiveUp("max_wait_seconds used up")
    return RetryOn(attempts.model if on_larger else attempts.primary, fresh=True)
