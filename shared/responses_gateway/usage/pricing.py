"""The per-model price table of the configuration, and what a response's usage costs.

Owns :class:`Price` (US dollars per million tokens: input, cached input, cache writes, output)
and :class:`PriceTable` (exact model names, then Amazon Bedrock's list prices for Bedrock model
ids (:mod:`responses_gateway.usage.bedrock_prices`), then ``*`` as the default). Costs are exact
decimals; an unpriced model costs 0 (its tokens still count). Nothing here reads files or the
environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from responses_gateway.config_keys import unknown_key_message
from responses_gateway.usage.bedrock_prices import BEDROCK_PRICES, listed_model
from responses_gateway.usage.records import UsageCounts

__all__ = ["Price", "PriceError", "PriceTable", "parse_prices"]

_MILLION = Decimal(1_000_000)


class PriceError(ValueError):
    """The ``prices`` table is malformed (the message names the field)."""


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    """Cached input tokens read (default: the input price)."""
    cache_write_input: Decimal | None = None
    """Input tokens written to the prompt cache (default: the input price)."""

    def cost(self, counts: UsageCounts) -> Decimal:
        """The cost of ``counts``: uncached input, cached input, cache writes, output tokens."""
        cached = min(counts.cached_tokens, counts.input_tokens)
        written = min(counts.cache_write_tokens, counts.input_tokens - cached)
        cached_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write_input is None else self.cache_write_input
        total = (
            (counts.input_tokens - cached - written) * self.input
            + cached * cached_price
            + written * write_price
            + counts.output_tokens * self.output
        )
        return total / _MILLION


@dataclass(frozen=True, slots=True)
class PriceTable:
    """Prices by model name; ``*`` prices every other model."""

    prices: Mapping[str, Price] = field(default_factory=dict)

    def price(self, model: str) -> Price | None:
        return self.prices.get(model) or _bedrock_price(model) or self.prices.get("*")

    def cost(self, model: str, counts: UsageCounts) -> Decimal:
        """The estimated cost of ``counts`` on ``model`` (0 when the model has no price)."""
        price = self.price(model)
        return price.cost(counts) if price is not None else Decimal(0)


_BEDROCK: dict[str, Price] = {
    model: Price(
        input=listed.input,
        output=listed.output,
        cached_input=listed.cache_read,
        cache_write_input=listed.cache_write,
    )
    for model, listed in BEDROCK_PRICES.items()
}


def _bedrock_price(model: str) -> Price | None:
    listed = listed_model(model)
    return _BEDROCK[listed] if listed is not None else None


def _amount(raw: Mapping[str, Any], name: str, where: str, *, required: bool) -> Decimal | None:
    value = raw.get(name)
    if value is None:
        if required:
            raise PriceError(f"{where}.{name} is required (US dollars per million tokens)")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PriceError(f"{where}.{name} must be a number")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise PriceError(f"{where}.{name} must be a number") from None
    if not amount.is_finite() or amount < 0:
        raise PriceError(f"{where}.{name} must be a non-negative number")
    return amount


_PRICE_KEYS = frozenset({"input", "cached_input", "cache_write_input", "output"})


def parse_prices(raw: Any) -> PriceTable:
    """A :class:`PriceTable` from the config's ``prices`` table
    (``{model: {input, cached_input?, cache_write_input?, output}}``).

    Raises:
        PriceError: a malformed entry (named as ``prices.<model>.<field>``).
    """
    if raw is None:
        return PriceTable()
    if not isinstance(raw, Mapping):
        raise PriceError("prices must be a table of models")
    prices: dict[str, Price] = {}
    for model, entry in raw.items():
        where = f"prices.{model}"
        if not isinstance(entry, Mapping):
            raise PriceError(f"{where} must be a table with input and output")
        message = unknown_key_message(where, entry, _PRICE_KEYS)
        if message is not None:
            raise PriceError(message)
        input_price = _amount(entry, "input", where, required=True)
        output_price = _amount(entry, "output", where, required=True)
        assert input_price is not None and output_price is not None
        prices[str(model)] = Price(
            input=input_price,
            output=output_price,
            cached_input=_amount(entry, "cached_input", where, required=False),
            cache_write_input=_amount(entry, "cache_write_input", where, required=False),
        )
    return PriceTable(prices)
