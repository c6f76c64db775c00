"""Budget decisions and configuration (usage.budget): pure, no I/O but a fake ledger."""

from __future__ import annotations

from decimal import Decimal

import pytest

from responses_gateway.loop.state import LoopState
from responses_gateway.usage.budget import (
    BudgetError,
    BudgetGuard,
    BudgetPolicy,
    budget_breach,
    parse_budgets,
    state_counts,
)
from responses_gateway.usage.pricing import Price, PriceTable
from responses_gateway.usage.records import BudgetLimits, TenantSpend, UsageCounts


def test_budget_breach_names_the_first_limit_reached() -> None:
    limits = BudgetLimits(daily_tokens=100, monthly_cost_usd=Decimal("1"))
    assert budget_breach(limits, TenantSpend(day_tokens=99)) is None
    assert budget_breach(limits, TenantSpend(day_tokens=100)) == "daily_tokens"
    assert budget_breach(limits, TenantSpend(month_cost_usd=Decimal("1.00"))) == "monthly_cost_usd"
    running = UsageCounts(input_tokens=1)
    assert budget_breach(limits, TenantSpend(day_tokens=99), running) == "daily_tokens"
    assert budget_breach(BudgetLimits(), TenantSpend(day_tokens=10**9)) is None


def test_policy_prefers_own_limits_then_the_tenant_then_the_default() -> None:
    policy = parse_budgets(
        {"daily_tokens": 10, "tenants": {"acme": {"monthly_tokens": 5, "daily_cost_usd": 0.5}}}
    )
    assert policy is not None
    assert policy.limits_for("other") == BudgetLimits(daily_tokens=10)
    assert policy.limits_for("acme") == BudgetLimits(
        monthly_tokens=5, daily_cost_usd=Decimal("0.5")
    )
    own = BudgetLimits(daily_tokens=1)
    assert policy.limits_for("acme", own) is own
    assert parse_budgets(None) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"daily_tokens": 1.5}, "budgets.daily_tokens must be a whole number of tokens"),
        ({"daily_tokens": -1}, "budgets.daily_tokens must be a non-negative number"),
        ({"weekly_tokens": 1}, "budgets: unknown key 'weekly_tokens'"),
        ({"tenants": {"a": {"daily_cost_usd": "x"}}}, "budgets.tenants.a.daily_cost_usd must be"),
        ({"tenants": []}, "budgets.tenants must be a table"),
    ],
)
def test_parse_budgets_names_the_bad_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(BudgetError, match=message.replace(".", r"\.")):
        parse_budgets(raw)


def _state(usage: dict[str, object] | None, calls: int = 0) -> LoopState:
    state = LoopState(response_id="r", created_at=1, model="m", request={}, upstream_input=[])
    state.usage = usage
    state.llm_calls = calls
    state.tool_calls_executed = 2
    return state


def test_state_counts_sum_usage_and_price_it() -> None:
    usage = {
        "input_tokens": 1000,
        "output_tokens": 200,
        "input_tokens_details": {"cached_tokens": 400},
        "output_tokens_details": {"reasoning_tokens": 50},
    }
    prices = PriceTable({"m": Price(Decimal(2), Decimal(8), Decimal(1))})
    counts = state_counts(_state(usage, calls=3), prices)
    assert (counts.input_tokens, counts.cached_tokens, counts.output_tokens) == (1000, 400, 200)
    assert (counts.reasoning_tokens, counts.model_calls, counts.tool_calls) == (50, 3, 2)
    assert counts.cost_usd == Decimal(600 * 2 + 400 * 1 + 200 * 8) / 1_000_000


class _Ledger:
    def __init__(self, spend: TenantSpend) -> None:
        self.spend = spend
        self.reads = 0

    async def get_spend(self, tenant: str, now: int) -> TenantSpend:
        self.reads += 1
        return self.spend


async def test_guard_reuses_the_admission_read_for_the_first_call_only() -> None:
    ledger = _Ledger(TenantSpend(day_tokens=5))
    guard = BudgetGuard(ledger, "t", BudgetPolicy(BudgetLimits(daily_tokens=10)), PriceTable())  # type: ignore[arg-type]
    assert (await guard.admit()).exceeded is None
    assert (await guard.status(_state(None))).exceeded is None
    assert ledger.reads == 1
    crossing = _state({"input_tokens": 4, "output_tokens": 1}, calls=1)
    assert (await guard.status(crossing)).exceeded == "daily_tokens"
    assert ledger.reads == 2


async def test_guard_uses_the_tenants_own_limits_from_the_same_read() -> None:
    ledger = _Ledger(TenantSpend(day_tokens=5, limits=BudgetLimits(daily_tokens=5)))
    guard = BudgetGuard(ledger, "t", BudgetPolicy(BudgetLimits(daily_tokens=10)), PriceTable())  # type: ignore[arg-type]
    assert (await guard.admit()).exceeded == "daily_tokens"
