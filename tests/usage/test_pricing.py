"""The price table (usage.pricing)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from responses_gateway.usage.pricing import PriceError, parse_prices
from responses_gateway.usage.records import UsageCounts


def test_prices_by_exact_model_then_star_and_unpriced_models_cost_nothing() -> None:
    table = parse_prices({"a": {"input": 1, "output": 2}, "*": {"input": "0.5", "output": 0}})
    counts = UsageCounts(input_tokens=1_000_000, cached_tokens=500_000, output_tokens=1_000_000)
    assert table.cost("a", counts) == Decimal(3)  # cached input at the input price by default
    assert table.cost("b", counts) == Decimal("0.5")
    assert parse_prices(None).cost("a", counts) == 0


def test_cached_input_price_applies_to_cached_tokens_only() -> None:
    table = parse_prices({"a": {"input": 2, "cached_input": 1, "output": 0}})
    counts = UsageCounts(input_tokens=3_000_000, cached_tokens=1_000_000)
    assert table.cost("a", counts) == Decimal(5)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"a": {"input": 1}}, "prices.a.output is required"),
        ({"a": {"input": -1, "output": 1}}, "prices.a.input must be a non-negative number"),
        ({"a": {"input": True, "output": 1}}, "prices.a.input must be a number"),
        ({"a": {"input": 1, "output": 1, "extra": 1}}, "prices.a: unknown key 'extra'"),
        ({"a": 3}, "prices.a must be a table"),
    ],
)
def test_bad_prices_name_the_field(raw: object, message: str) -> None:
    with pytest.raises(PriceError, match=message.replace(".", r"\.")):
        parse_prices(raw)
