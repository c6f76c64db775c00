"""How each tenant's spend stands against its budget: the console's "Budgets at a glance".

Owns :func:`standing` (one tenant: each limit in effect with the amount spent against it, its
share, and ``over`` / ``near`` / ``ok``) and :data:`NEAR` (the share from which a limit is
flagged as near). Limits are per tenant, as the gateway enforces them (one check of the tenant's
day and month totals before each model call); a tenant that needs limits per key gives each key
a tenant of its own in the key file. Pure: the caller reads the spend
(``LedgerStore.get_spend``) and knows the policy; nothing here refuses anything
(:func:`~responses_gateway.usage.budget.budget_breach` does, with the same "at or above"
rule).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from responses_gateway.usage.records import BudgetLimits, TenantSpend

__all__ = ["NEAR", "STATES", "standing"]

NEAR = Decimal("0.8")
"""A limit is near once this share of it is spent."""
STATES = ("over", "near", "ok")
"""A tenant's state, worst first (over: at or above a limit, so refused while enforced)."""
_AMOUNTS = (
    ("daily_tokens", "day_tokens"),
    ("monthly_tokens", "month_tokens"),
    ("daily_cost_usd", "day_cost_usd"),
    ("monthly_cost_usd", "month_cost_usd"),
)
"""Each limit and the spend it is measured against."""


def _text(value: int | Decimal) -> int | str:
    return format(value, "f") if isinstance(value, Decimal) else value


def standing(tenant: str, spend: TenantSpend, limits: BudgetLimits | None) -> dict[str, Any]:
    """``{"tenant", "state", "share", "limits": [{"name", "limit", "spent", "share",
    "state"}...], "spend": {...}}``: every limit set, the worst ``state`` and the largest
    ``share`` (None when no limit is set: then ``state`` is ``ok``)."""
    rows: list[dict[str, Any]] = []
    for name, spent_name in _AMOUNTS:
        limit = getattr(limits, name) if limits is not None else None
        if limit is None:
            continue
        spent: int | Decimal = getattr(spend, spent_name)
        share = Decimal(spent) / Decimal(limit) if limit > 0 else Decimal(1)
        state = "over" if spent >= limit else "near" if share >= NEAR else "ok"
        rows.append(
            {
                "name": name,
                "limit": _text(limit),
                "spent": _text(spent),
                "share": float(round(share, 4)),
                "state": state,
            }
        )
    worst = min((STATES.index(r["state"]) for r in rows), default=len(STATES) - 1)
    return {
        "tenant": tenant,
        "state": STATES[worst],
        "share": max((r["share"] for r in rows), default=None),
        "limits": rows,
        "spend": {
            "day_tokens": spend.day_tokens,
            "day_cost_usd": _text(spend.day_cost_usd),
            "month_tokens": spend.month_tokens,
            "month_cost_usd": _text(spend.month_cost_usd),
        },
    }
