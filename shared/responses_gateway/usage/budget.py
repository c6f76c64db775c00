"""Budgets: per-tenant token and cost limits per UTC day and month.

Owns the budget configuration (:class:`BudgetPolicy`: defaults for every tenant, overrides per
tenant, and limits an operator set for one tenant in the store, which win), the pure decision
(:func:`budget_breach`: which limit the spend has reached, if any) and :class:`BudgetGuard`, the
live object the loop driver asks before each model call (through
:func:`~responses_gateway.loop.driver.decide_before_call_llm`) and the service asks before a
request starts (429 ``insufficient_quota``, before any upstream call).

Spend is what the ledger recorded (ended responses) plus, inside a running loop, that loop's own
usage so far. Responses still running elsewhere are not visible, so concurrent responses of one
tenant may overshoot a limit by at most the usage they had not yet recorded when it was crossed
(see docs/deploy.md, "Budgets"). Nothing here writes to the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from responses_gateway.config_keys import unknown_key_message
from responses_gateway.usage.pricing import PriceTable
from responses_gateway.usage.records import BudgetLimits, TenantSpend, UsageCounts

if TYPE_CHECKING:
    from responses_gateway.loop.state import LoopState
    from responses_gateway.store.base import LedgerStore

__all__ = [
    "BUDGET_EXCEEDED",
    "BudgetError",
    "BudgetGuard",
    "BudgetPolicy",
    "BudgetStatus",
    "budget_breach",
    "parse_budgets",
    "parse_limits",
    "state_counts",
]

BUDGET_EXCEEDED = "budget_exceeded"
"""``incomplete_details.reason`` of a response stopped because its tenant's budget ran out."""

_LIMIT_KEYS = ("daily_tokens", "monthly_tokens", "daily_cost_usd", "monthly_cost_usd")


class BudgetError(ValueError):
    """The ``budgets`` table is malformed (the message names the field)."""


@dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """Configured limits: ``default`` for every tenant, ``tenants`` replacing it per tenant."""

    default: BudgetLimits = field(default_factory=BudgetLimits)
    tenants: Mapping[str, BudgetLimits] = field(default_factory=dict)

    def limits_for(self, tenant: str, own: BudgetLimits | None = None) -> BudgetLimits:
        """The limits that apply: ``own`` (set in the store) first, then the configuration."""
        if own is not None:
            return own
        return self.tenants.get(tenant, self.default)


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """The answer to "may this tenant call a model now?"."""

    exceeded: str | None = None
    """The limit reached (``daily_tokens``, ``monthly_cost_usd``...), or None."""

    def message(self) -> str:
        return (
            f"You exceeded your current quota: the {self.exceeded} budget of this API key's "
            "tenant is spent. Ask the gateway's operator to raise it, or wait for the next "
            "period."
        )


def budget_breach(
    limits: BudgetLimits, spend: TenantSpend, running: UsageCounts | None = None
) -> str | None:
    """The first limit ``spend`` (plus the ``running`` loop's own usage) has reached, or None.

    A limit is reached when the amount is at or above it: a budget of 1000 tokens with 1000
    spent allows no further model call.
    """
    extra_tokens = running.total_tokens if running is not None else 0
    extra_cost = running.cost_usd if running is not None else Decimal(0)
    amounts: dict[str, int | Decimal] = {
        "daily_tokens": spend.day_tokens + extra_tokens,
        "monthly_tokens": spend.month_tokens + extra_tokens,
        "daily_cost_usd": spend.day_cost_usd + extra_cost,
        "monthly_cost_usd": spend.month_cost_usd + extra_cost,
    }
    for name in _LIMIT_KEYS:
        limit = getattr(limits, name)
        if limit is not None and amounts[name] >= limit:
            return name
    return None


def state_counts(state: LoopState, prices: PriceTable) -> UsageCounts:
    """The usage counters of a loop state (its model calls, tool calls and summed usage)."""
    usage = state.usage or {}
    details = usage.get("input_tokens_details") or {}
    counts = UsageCounts(
        input_tokens=int(usage.get("input_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0),
        cache_write_tokens=int(details.get("cache_write_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        reasoning_tokens=int(
            (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
        ),
        model_calls=state.llm_calls,
        tool_calls=state.tool_calls_executed,
        responses=1,
    )
    counts.cost_usd = prices.cost(state.model, counts)
    return counts


class BudgetGuard:
    """One request's budget checks: reads the tenant's spend (and own limits) from the ledger
    in one round trip, and answers for the loop's current usage."""

    def __init__(
        self,
        store: LedgerStore,
        tenant: str,
        policy: BudgetPolicy,
        prices: PriceTable,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._tenant = tenant
        self._policy = policy
        self._prices = prices
        self._clock = clock
        self._fresh: TenantSpend | None = None
        """A spend read for the request's start, reused by the loop's first check."""

    async def admit(self) -> BudgetStatus:
        """The status before the request runs (its own usage is nothing yet)."""
        spend = await self._store.get_spend(self._tenant, int(self._clock()))
        self._fresh = spend
        return BudgetStatus(
            budget_breach(self._policy.limits_for(self._tenant, spend.limits), spend)
        )

    async def status(self, state: LoopState) -> BudgetStatus:
        """The status before the loop's next model call: recorded spend plus this loop's usage
        (the spend read at admission is reused once, for the first call)."""
        spend, self._fresh = self._fresh, None
        if spend is None or state.llm_calls:
            spend = await self._store.get_spend(self._tenant, int(self._clock()))
        limits = self._policy.limits_for(self._tenant, spend.limits)
        return BudgetStatus(budget_breach(limits, spend, state_counts(state, self._prices)))


def parse_limits(raw: Any, where: str) -> BudgetLimits:
    """:class:`BudgetLimits` from a table of ``daily_tokens``, ``monthly_tokens``,
    ``daily_cost_usd``, ``monthly_cost_usd``.

    Raises:
        BudgetError: an unknown key or a bad value (named as ``<where>.<key>``).
    """
    if not isinstance(raw, Mapping):
        raise BudgetError(f"{where} must be a table")
    message = unknown_key_message(where, raw, (*_LIMIT_KEYS, "tenants"))
    if message is not None:
        raise BudgetError(message)
    values: dict[str, Any] = {}
    for name in _LIMIT_KEYS:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise BudgetError(f"{where}.{name} must be a number")
        try:
            amount = Decimal(str(value))
        except InvalidOperation:
            raise BudgetError(f"{where}.{name} must be a number") from None
        if not amount.is_finite() or amount < 0:
            raise BudgetError(f"{where}.{name} must be a non-negative number")
        if name.endswith("_tokens"):
            if amount != amount.to_integral_value():
                raise BudgetError(f"{where}.{name} must be a whole number of tokens")
            values[name] = int(amount)
        else:
            values[name] = amount
    return BudgetLimits(**values)


def parse_budgets(raw: Any) -> BudgetPolicy | None:
    """The config's ``budgets`` table (defaults, plus ``tenants.<tenant>`` tables); None when
    absent (no budget checks at all, not even of limits set in the store).

    Raises:
        BudgetError: a malformed entry.
    """
    if raw is None:
        return None
    default = parse_limits(raw, "budgets")
    tenants_raw = raw.get("tenants")
    if tenants_raw is None:
        tenants_raw = {}
    if not isinstance(tenants_raw, Mapping):
        raise BudgetError("budgets.tenants must be a table of tenants")
    tenants = {}
    for tenant, limits in tenants_raw.items():
        where = f"budgets.tenants.{tenant}"
        if isinstance(limits, Mapping) and "tenants" in limits:
            raise BudgetError(f"{where}: unknown key 'tenants'")
        tenants[str(tenant)] = parse_limits(limits, where)
    return BudgetPolicy(default=default, tenants=tenants)
