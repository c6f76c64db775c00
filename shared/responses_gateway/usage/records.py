"""The usage ledger's records: counters, one response's entry, hour rows, spend and limits.

Owns plain data shared by the store interface (:class:`~responses_gateway.store.base.LedgerStore`,
which re-exports these) and the accounting logic; no I/O. Kept outside ``store`` so the
configuration can use them without importing a store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = [
    "FINE_WIDTH",
    "HOUR_WIDTH",
    "REQUEST_SCAN",
    "BudgetLimits",
    "RequestPage",
    "RequestQuery",
    "TenantSpend",
    "UsageBucket",
    "UsageCounts",
    "UsageEntry",
    "log_cursor",
]

HOUR_WIDTH = 3600
"""Seconds of a ledger hour row."""
FINE_WIDTH = 300
"""Seconds of a fine metrics row (five minutes: the overview's short ranges)."""
REQUEST_SCAN = 1000
"""Most request-log entries one filtered page read examines (a page that stops there carries a
cursor to go on from)."""


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
    cache_write_tokens: int = 0
    """Input tokens written to the prompt cache (within ``input_tokens``): priced into
    ``cost_usd``, not kept by the ledger's counters."""

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
        self.cache_write_tokens += other.cache_write_tokens


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
    """The usage of one (hour or five minutes, tenant, model, API key): one ledger counter row."""

    hour_start: int
    """Unix seconds of the bucket's start (UTC): an hour's, or five minutes' for fine rows."""
    tenant: str
    model: str
    api_key_id: str
    counts: UsageCounts
    stats: dict[str, int] = field(default_factory=dict)
    """Request health counters (statuses, latency and time-to-first-token histograms,
    deployments' answered and failed calls), named as :mod:`responses_gateway.usage.metrics`
    names them; empty for rows written before they existed."""
    width: int = HOUR_WIDTH
    """Seconds the bucket covers (:data:`HOUR_WIDTH` or :data:`FINE_WIDTH`)."""


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
    examined: int = 0
    """Entries the read examined (a filtered page may examine many more than it returns)."""


def log_cursor(entry: UsageEntry) -> str:
    """The entry's place in its tenant's log: its end in milliseconds (13 digits), ``#``, its
    response id. Pages are ordered by it, and it is the cursor (``before``/``after``) that
    starts a read just past the entry, on either store."""
    ended_ms = entry.extra.get("ended_ms")
    if not isinstance(ended_ms, int):
        ended_ms = entry.ended_at * 1000
    return f"{ended_ms:013d}#{entry.response_id}"


def _session_ids(entry: UsageEntry) -> set[str]:
    client = entry.extra.get("client") or {}
    return {str(value) for value in client.values()} if isinstance(client, dict) else set()


def _deployments(entry: UsageEntry) -> list[str]:
    raw = entry.extra.get("deployment") or ""
    names = raw.split(",") if isinstance(raw, str) else [str(d) for d in raw]
    return [name for name in names if name]


def _holds_text(entry: UsageEntry, text: str) -> bool:
    """Whether ``text`` (lower case) is in the entry's searchable fields or logged content."""
    extra = entry.extra
    fields = [
        entry.response_id,
        entry.model,
        entry.api_key_id,
        str(extra.get("error_message") or ""),
        str(extra.get("error_code") or ""),
        *sorted(_session_ids(entry)),
    ]
    if any(text in field.lower() for field in fields):
        return True
    if entry.content is None:
        return False
    return text in json.dumps(entry.content, ensure_ascii=False).lower()


@dataclass(frozen=True, slots=True)
class RequestQuery:
    """What a request-log read keeps: every condition set must hold (None/empty: any)."""

    statuses: frozenset[str] = frozenset()
    """Statuses kept (``completed``, ``incomplete``, ``failed``, ``cancelled``, ``refused``...)."""
    model: str | None = None
    api_key_id: str | None = None
    deployment: str | None = None
    """A deployment that answered one of the response's model calls, or failed one."""
    session: str | None = None
    """Any of the client's ids (session, thread, turn, request or trace id)."""
    since_ms: int | None = None
    """Entries that ended at or after this instant (Unix milliseconds)."""
    until_ms: int | None = None
    """Entries that ended before this instant (Unix milliseconds)."""
    text: str | None = None
    """Text found, in any case, in the response id, model, key id, error, client ids or, where
    the tenant's content is logged, the logged input and output (the read then needs each
    examined entry's content: :attr:`needs_content`)."""

    @property
    def filters(self) -> bool:
        """Whether any condition besides the time range is set (the read must examine)."""
        return bool(
            self.statuses
            or self.model
            or self.api_key_id
            or self.deployment
            or self.session
            or self.text
        )

    @property
    def needs_content(self) -> bool:
        """Whether matching reads the entries' logged content (a text search)."""
        return bool(self.text)

    def bounds(self, before: str | None, after: str | None) -> tuple[str, str]:
        """The ``(low, high)`` cursor range a read covers: entries with ``low < cursor <
        high`` (``low`` is ``""`` and ``high`` ``"~"`` when unbounded)."""
        high = "~" if before is None else before
        if self.until_ms is not None:
            high = min(high, f"{self.until_ms:013d}")
        low = "" if after is None else after
        if self.since_ms is not None:
            low = max(low, f"{self.since_ms - 1:013d}#~")
        return low, high

    def matches(self, entry: UsageEntry) -> bool:
        """Whether ``entry`` passes every condition but the time range (the read's bounds)."""
        if self.statuses and entry.status not in self.statuses:
            return False
        if self.model is not None and entry.model != self.model:
            return False
        if self.api_key_id is not None and entry.api_key_id != self.api_key_id:
            return False
        if self.session is not None and self.session not in _session_ids(entry):
            return False
        if self.deployment is not None:
            failed = entry.extra.get("attempts_failed") or []
            tried = _deployments(entry) + [
                str(a.get("deployment")) for a in failed if isinstance(a, dict)
            ]
            if self.deployment not in tried:
                return False
        return self.text is None or _holds_text(entry, self.text.lower())
