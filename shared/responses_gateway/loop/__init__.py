"""The shared agent loop.

Every request runs through :func:`run_loop`: an explicit state machine whose next action is one of
:class:`CallLlm`, :class:`Compact`, :class:`Truncate`, :class:`ExecuteTools`,
:class:`InterruptForApproval` or :class:`Finish`. There is
no request path around it: a request with no tools enters the same loop and finishes after one
model call. Adapters (``responses_gateway.adapters``) call the model; sinks
(``responses_gateway.sinks``) translate loop events to wire events; only the driver decides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from responses_gateway._lazy import lazy_attributes

if TYPE_CHECKING:
    from responses_gateway.loop.context import LoopContext
    from responses_gateway.loop.driver import (
        decide_after_call_llm,
        decide_after_compact,
        decide_after_execute_tools,
        decide_before_call_llm,
        run_loop,
        step,
    )
    from responses_gateway.loop.events import LoopEvent, NullSink, Sink
    from responses_gateway.loop.prepared import PreparedInput, prepare_input
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
    )
    from responses_gateway.loop.tools import NO_GATEWAY_TOOLS, ToolRegistry

__all__ = [
    "NO_GATEWAY_TOOLS",
    "CallLlm",
    "Compact",
    "ExecuteTools",
    "Finish",
    "InterruptForApproval",
    "LoopContext",
    "LoopEvent",
    "LoopState",
    "NextAction",
    "NullSink",
    "PreparedInput",
    "Sink",
    "ToolRegistry",
    "Truncate",
    "decide_after_call_llm",
    "decide_after_compact",
    "decide_after_execute_tools",
    "decide_before_call_llm",
    "prepare_input",
    "render_response",
    "run_loop",
    "step",
]

_LAZY: dict[str, str] = {
    "LoopContext": "context",
    "decide_after_call_llm": "driver",
    "decide_after_compact": "driver",
    "decide_after_execute_tools": "driver",
    "decide_before_call_llm": "driver",
    "run_loop": "driver",
    "step": "driver",
    "LoopEvent": "events",
    "NullSink": "events",
    "Sink": "events",
    "PreparedInput": "prepared",
    "prepare_input": "prepared",
    "render_response": "render",
    "CallLlm": "state",
    "Compact": "state",
    "ExecuteTools": "state",
    "Finish": "state",
    "InterruptForApproval": "state",
    "LoopState": "state",
    "NextAction": "state",
    "Truncate": "state",
    "NO_GATEWAY_TOOLS": "tools",
    "ToolRegistry": "tools",
}
"""Where each name lives, imported on first use: importing one submodule (the events, the state)
does not import the driver and everything it needs (the buffered function never runs a loop)."""


__getattr__ = lazy_attributes(__name__, _LAZY, globals())
