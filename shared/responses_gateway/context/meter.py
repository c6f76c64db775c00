"""The live context meter the loop driver asks before each model call.

Owns :class:`ContextLimits` (the numbers the loop's pure ``decide_before_call_llm`` judges a
call by: window, compaction threshold, truncation mode, tokens reserved for the answer) and
:class:`ContextMeter`, which gathers them for one response and measures a call only when a limit
could be passed: a call whose :func:`~.tokens.upper_bound` is under every limit is not counted,
and the upstream is asked for windows only once a call could exceed :data:`DISCOVERY_FLOOR`
tokens (so small requests never cost a listing on a cold start).

Must not: decide anything (the driver's deciders do) or call the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from responses_gateway.adapters.base import ModelCall
from responses_gateway.config import Provider
from responses_gateway.context.tokens import TokenCount, TokenCounter, upper_bound
from responses_gateway.context.windows import WindowDirectory

__all__ = ["DEFAULT_THRESHOLD_SHARE", "DISCOVERY_FLOOR", "ContextLimits", "ContextMeter"]

DISCOVERY_FLOOR = 2048
"""Calls surely below this many tokens never trigger a ``/models`` lookup."""
DEFAULT_THRESHOLD_SHARE = 0.8
"""``context_management`` compaction with no ``compact_threshold``: this share of the window."""


@dataclass(frozen=True, slots=True)
class ContextLimits:
    """What a model call must fit, for one response."""

    window: int | None = None
    """The model's context window in tokens (None: unknown)."""
    compact_threshold: int | None = None
    """Compact when the context passes this many tokens (``context_management``)."""
    truncation: Literal["auto", "disabled"] = "disabled"
    reserve: int = 0
    """Tokens kept free for the answer (``max_output_tokens``)."""

    @property
    def bound(self) -> int | None:
        """The smallest input size at which a limit applies (None: no limit at all)."""
        bounds = [b for b in (self.compact_threshold,) if b is not None]
        if self.window is not None:
            bounds.append(max(0, self.window - self.reserve))
        return min(bounds) if bounds else None


class ContextMeter:
    """Limits and measurements for the model calls of one response.

    Args:
        provider: where the calls go.
        counter: the process's token counter.
        windows: the process's window directory.
        compaction: the request's ``context_management`` compaction entry (``{"type":
            "compaction", "compact_threshold"?}``), or None.
        request: the echoed request (``truncation``, ``max_output_tokens``).
    """

    def __init__(
        self,
        provider: Provider,
        counter: TokenCounter,
        windows: WindowDirectory,
        *,
        compaction: dict[str, Any] | None = None,
        request: dict[str, Any] | None = None,
    ) -> None:
        self.provider = provider
        self._counter = counter
        self._windows = windows
        self._compaction = compaction
        request = request or {}
        self._truncation: Literal["auto", "disabled"] = (
            "auto" if request.get("truncation") == "auto" else "disabled"
        )
        self._reserve = int(request.get("max_output_tokens") or 0)

    async def limits(self, call: ModelCall) -> ContextLimits:
        """The limits of ``call``'s model (its window looked up only when it could matter)."""
        configured = self.provider.context_windows.get(call.model) or self.provider.context_window
        window = configured
        if window is None and upper_bound(call) > DISCOVERY_FLOOR:
            window = await self._windows.window(self.provider, call.model)
        threshold = None
        if self._compaction is not None:
            threshold = self._compaction.get("compact_threshold")
            if threshold is None and window is not None:
                threshold = int(window * DEFAULT_THRESHOLD_SHARE)
        return ContextLimits(window, threshold, self._truncation, self._reserve)

    async def measure(self, call: ModelCall, wire: str, limits: ContextLimits) -> TokenCount | None:
        """``call``'s input tokens, or None when no limit can apply to it."""
        bound = limits.bound
        if bound is None or upper_bound(call) <= bound:
            return None
        return await self._counter.count(self.provider, wire, call)

    async def count(self, call: ModelCall, wire: str) -> TokenCount:
        """``call``'s input tokens, always counted."""
        return await self._counter.count(self.provider, wire, call)
