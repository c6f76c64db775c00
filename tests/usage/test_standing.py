"""A tenant's spend against its limits: each limit's share and state (over at or above it, as
the budget check refuses; near from 80%), the worst state and largest share; no limit is ok."""

from __future__ import annotations

from decimal import Decimal

from responses_gateway.usage.records import BudgetLimits, TenantSpend
from responses_gateway.usage.standing import standing


def test_each_limit_stands_over_near_or_ok_and_the_tenant_takes_the_worst() -> None:
    spend = TenantSpend(day_tokens=3000, day_cost_usd=Decimal("0.85"), month_tokens=3000)
    limits = BudgetLimits(
        daily_tokens=3000,
        monthly_tokens=100_000,
        daily_cost_usd=Decimal("1"),
        monthly_cost_usd=None,
    )
    found = standing("t", spend, limits)
    assert [(r["name"], r["state"], r["share"]) for r in found["limits"]] == [
        ("daily_tokens", "over", 1.0),  # at the limit: refused
        ("monthly_tokens", "ok", 0.03),
        ("daily_cost_usd", "near", 0.85),
    ]
    assert (found["state"], found["share"]) == ("over", 1.0)
    assert found["limits"][2]["limit"] == "1" and found["limits"][2]["spent"] == "0.85"


def test_no_limit_is_ok_with_no_share() -> None:
    found = standing("t", TenantSpend(day_tokens=10), None)
    assert (found["state"], found["share"], found["limits"]) == ("ok", None, [])
    assert found["spend"]["day_tokens"] == 10
