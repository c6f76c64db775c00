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


def test_cache_writes_are_priced_apart_within_the_input_tokens() -> None:
    table = parse_prices(
        {"a": {"input": 2, "cached_input": 1, "cache_write_input": 3, "output": 0}}
    )
    counts = UsageCounts(
        input_tokens=4_000_000, cached_tokens=1_000_000, cache_write_tokens=2_000_000
    )
    assert table.cost("a", counts) == Decimal(1 * 2 + 1 * 1 + 2 * 3)
    plain = parse_prices({"a": {"input": 2, "output": 0}})
    assert plain.cost("a", counts) == Decimal(8)  # cache writes at the input price by default


@pytest.mark.parametrize(
    "model",
    [
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ],
)
def test_bedrock_models_cost_their_list_price_through_any_inference_profile(model: str) -> None:
    counts = UsageCounts(
        input_tokens=3_000_000,
        cached_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        output_tokens=1_000_000,
    )
    assert parse_prices(None).cost(model, counts) == Decimal("3") + Decimal("0.30") + Decimal(
        "3.75"
    ) + Decimal("15")


def test_configured_prices_win_over_bedrocks_and_bedrocks_over_the_default() -> None:
    model = "amazon.nova-pro-v1:0"
    counts = UsageCounts(input_tokens=1_000_000)
    assert parse_prices({"*": {"input": 9, "output": 9}}).cost(model, counts) == Decimal("0.80")
    assert parse_prices({model: {"input": 1, "output": 1}}).cost(model, counts) == Decimal(1)
    assert parse_prices(None).cost("us.unknown.model-v1:0", counts) == 0
