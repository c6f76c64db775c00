"""The record of one model call's attempts across deployments and fallback models.

Owns :class:`Attempts` (plain data: the model being tried, the deployments that failed this
round, when each may be tried again, the fallbacks used, the time spent waiting, the last
failure) and the two verdicts of the loop's failover decider, :class:`RetryOn` and
:class:`GiveUp`. It decides nothing and performs no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from responses_gateway.routing.failures import LlmFailure

__all__ = ["Attempts", "GiveUp", "RetryOn", "Verdict"]


@dataclass(frozen=True, slots=True)
class RetryOn:
    """Call again, on a deployment of ``model``."""

    model: str
    fresh: bool = False
    """Start a new round: deployments that failed before may be tried again once they may
    (their cooldown or backoff passed, within the bounded wait)."""


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Fail the model call with the last failure's error."""

    reason: str


Verdict = RetryOn | GiveUp


@dataclass(slots=True)
class Attempts:
    """One model call's attempts so far."""

    primary: str
    """The model the request named."""
    model: str = ""
    """The model being tried now (the primary, a fallback, or the larger-window model)."""
    tried: set[str] = field(default_factory=set)
    """Deployments that failed in this round."""
    not_before: dict[str, float] = field(default_factory=dict)
    """Deployment id -> Unix seconds before which this call does not try it again."""
    fallbacks_used: list[str] = field(default_factory=list)
    count: int = 0
    """Upstream attempts that failed."""
    waited: float = 0.0
    """Seconds spent waiting for a deployment to become available."""
    last: LlmFailure | None = None
    answered_by: list[str] = field(default_factory=list)
    key: str | None = None
    """The request's ``prompt_cache_key``: when set, the deployment is chosen by it
    (:func:`~responses_gateway.routing.choose.by_key`) instead of by the route's strategy."""
    refused_wires: frozenset[str] = frozenset()
    """Wires that refuse a field the request set
    (:func:`~responses_gateway.protocol.contract.wire_refusals`): no deployment on one of them
    takes this call, whichever model it serves."""

    def __post_init__(self) -> None:
        if not self.model:
            self.model = self.primary

    def apply(self, verdict: RetryOn) -> None:
        """Move on as ``verdict`` says."""
        if verdict.model != self.model:
            if verdict.model != self.primary:
                self.fallbacks_used.append(verdict.model)
            self.model = verdict.model
            self.tried.clear()
        if verdict.fresh:
            self.tried.clear()
