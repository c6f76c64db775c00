"""The usage ledger's records: counters, one response's entry, hour rows, spend and limits.

Owns plain data shared by the store interface (:class:`~responses_gateway.store.base.LedgerStore`,
which re-exports these) and the accounting logic; no I/O. Kept outside ``store`` so the
configuration can use them without importing a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = [
    "BudgetLimits",
    "RequestPage",
    "TenantSpend",
    "UsageBucket",
    "UsageCounts",
    "UsageEntry",
]


@dataclass(slots=True)
class UsageCounts:
    """Usage counters: what one response added, or a sum of many."""

    input_tokens: int = 0
    """Input tokens, cached ones included (OpenAI's ``input_tokens``)."""
    cached_tokens: int = 0
    output_tokens: int = 0
    """Output tokens, reasoning ones included."""
    reasoning_tokens: int = 0
    model_calls: int = 0
    """Upstream model calls made (OpenAI's ``num_model_requests``)."""
    tool_calls: int = 0
    """Gateway-executed tool calls (MCP)."""
    responses: int = 0
    """Responses that ended (1 for one entry)."""
    cost_usd: Decimal = field(default_factory=Decimal)
    """Estimated cost from the configured price table (exact decimal; 0 for unpriced models)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: UsageCounts) -> None:
        """Add ``other`` into these counters."""
        self.input_tokens += other.input_tokens
        self.cached_tokens += other.cached_tokens
        self.output_tokens += other.output_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.model_calls += other.model_calls
        self.tool_calls += other.tool_calls
        self.responses += other.responses
        self.cost_usd += other.cost_usd


@dataclass(slots=True)
class UsageEntry:
    """One ended response's usage: what the ledger adds, and its request-log entry.

    ``response_id`` is the idempotency key: recording the same response twice (a retried worker,
    a settle after a crash) counts it once.
    """

    tenant: str
    response_id: str
    model: str
    """The model name the client asked for (the price table and ``group_by=model`` key)."""
    ended_at: int
    """Unix seconds of the ending; picks the hour, day and month buckets (UTC)."""
    status: str
    counts: UsageCounts
    api_key_id: str = ""
    """The API key's id (``group_by=api_key_id``); empty when serving without keys."""
    background: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    """Further request-log fields (JSON; never bodies, headers or keys)."""
    content: dict[str, Any] | None = None
    """The request's input and the response's output items, for the tenants whose content the
    operator logs (``request_log.content_tenants``; bounded, see
    :func:`~responses_gateway.usage.requestlog.logged_content`); None otherwise, and in pages
    of the log (only one record's read returns it)."""


@dataclass(slots=True)
class UsageBucket:
    """The usage of one (hour, tenant, model, API key): one ledger counter row."""

    hour_start: int
    """Unix seconds of the hour's start (UTC)."""
    tenant: str
    model: str
    api_key_id: str
    counts: UsageCounts


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """A tenant's limits; None = no limit. Tokens are input + output tokens."""

    daily_tokens: int | None = None
    monthly_tokens: int | None = None
    daily_cost_usd: Decimal | None = None
    monthly_cost_usd: Decimal | None = None

    @property
    def empty(self) -> bool:
        return all(
            value is None
            for value in (
                self.daily_tokens,
                self.monthly_tokens,
                self.daily_cost_usd,
                self.monthly_cost_usd,
            )
        )


@dataclass(slots=True)
class TenantSpend:
    """What a tenant has spent in the current UTC day and month (sums of recorded responses)."""

    day_tokens: int = 0
    day_cost_usd: Decimal = field(default_factory=Decimal)
    month_tokens: int = 0
    month_cost_usd: Decimal = field(default_factory=Decimal)
    limits: BudgetLimits | None = None
    """The tenant's own limits (:meth:`LedgerStore.put_budget`), read in the same round trip."""


@dataclass(slots=True)
class RequestPage:
    """One page of a tenant's request log, newest first."""

    entries: list[UsageEntry]
    next_cursor: str | None = None
    """Pass as ``before`` to read the next (older) page; None on the last page."""
