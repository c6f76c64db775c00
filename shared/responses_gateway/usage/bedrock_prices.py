"""Amazon Bedrock's on-demand list prices, so a Bedrock model costs what it costs unconfigured.

Owns :data:`BEDROCK_PRICES` (US dollars per million tokens, US East (N. Virginia) on-demand,
standard tier, as AWS published them in 2025, not re-checked against the pricing page from here:
input, cache read, cache write, output) and :func:`listed_model`, which finds the listed model an
id names, whatever inference profile it is called through (``us.``, ``eu.``, ``apac.``,
``global.``... prefixes; the same model bills at its own price).
:class:`~responses_gateway.usage.pricing.PriceTable` turns them into prices, under the operator's
``prices``, which win (other regions, other tiers and newer prices are configured there). Nothing
here reads files or the network.
"""

from __future__ import annotations

from decimal import Decimal
from typing import NamedTuple

__all__ = ["BEDROCK_PRICES", "ListPrice", "listed_model"]


class ListPrice(NamedTuple):
    """US dollars per million tokens."""

    input: Decimal
    cache_read: Decimal
    cache_write: Decimal | None
    """None: no cache-write charge (the input price)."""
    output: Decimal


def _price(input_: str, cache_read: str, cache_write: str | None, output: str) -> ListPrice:
    written = Decimal(cache_write) if cache_write is not None else None
    return ListPrice(Decimal(input_), Decimal(cache_read), written, Decimal(output))


_SONNET = _price("3", "0.30", "3.75", "15")
_OPUS = _price("15", "1.50", "18.75", "75")

BEDROCK_PRICES: dict[str, ListPrice] = {
    "anthropic.claude-sonnet-4-5-20250929-v1:0": _SONNET,
    "anthropic.claude-sonnet-4-20250514-v1:0": _SONNET,
    "anthropic.claude-3-7-sonnet-20250219-v1:0": _SONNET,
    "anthropic.claude-opus-4-1-20250805-v1:0": _OPUS,
    "anthropic.claude-opus-4-20250514-v1:0": _OPUS,
    "anthropic.claude-haiku-4-5-20251001-v1:0": _price("1", "0.10", "1.25", "5"),
    "anthropic.claude-3-5-haiku-20241022-v1:0": _price("0.80", "0.08", "1", "4"),
    "amazon.nova-pro-v1:0": _price("0.80", "0.20", None, "3.20"),
    "amazon.nova-lite-v1:0": _price("0.06", "0.015", None, "0.24"),
    "amazon.nova-micro-v1:0": _price("0.035", "0.00875", None, "0.14"),
    "openai.gpt-oss-120b-1:0": _price("0.15", "0.15", None, "0.60"),
    "openai.gpt-oss-20b-1:0": _price("0.07", "0.07", None, "0.30"),
}
"""Model id -> its list price (Amazon Nova and gpt-oss charge no cache writes)."""

_GEOGRAPHIES = ("us.", "us-gov.", "eu.", "apac.", "jp.", "au.", "ca.", "global.")


def listed_model(model: str) -> str | None:
    """The listed model a Bedrock model id or inference profile id names; None when not listed."""
    if model in BEDROCK_PRICES:
        return model
    for prefix in _GEOGRAPHIES:
        if model.startswith(prefix) and model[len(prefix) :] in BEDROCK_PRICES:
            return model[len(prefix) :]
    return None
