"""The console's figures: the overview (request rate, error rate, latency and time-to-first-token
percentiles, tokens and cost per bucket, broken down by tenant, key, model and deployment) and
the usage table (tokens and cost per day or hour by tenant, key or model, and its CSV).

Owns the ranges the overview offers and the bucket width each reads (:func:`window`), and how
summed ledger rows become figures (:func:`figures`, :func:`build_overview`,
:func:`build_usage`, :func:`usage_csv`). Pure: the caller reads the rows
(``LedgerStore.read_metrics`` / ``read_usage``) and any live state (deployments' health). It
knows nothing of HTTP but the :class:`~responses_gateway.errors.InvalidRequestError` a bad range
raises.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from responses_gateway.errors import InvalidRequestError
from responses_gateway.usage.metrics import (
    ANSWERED,
    ERROR_STATUSES,
    FAILED,
    FAILOVER,
    LATENCY,
    STATUS,
    TTFT,
    count,
    histogram,
    merge,
    quantile,
)
from responses_gateway.usage.records import FINE_WIDTH, HOUR_WIDTH, UsageBucket, UsageCounts

__all__ = [
    "BREAKDOWNS",
    "RANGES",
    "USAGE_GROUPS",
    "Window",
    "build_overview",
    "build_usage",
    "figures",
    "usage_csv",
    "usage_window",
    "window",
]

DAY = 86_400
RANGES = {"1h": 3600, "6h": 6 * 3600, "24h": DAY, "7d": 7 * DAY, "30d": 30 * DAY}
"""The overview's ranges (seconds, ending now)."""
_FINE_UP_TO = 2 * DAY
"""Longest range read from five-minute rows (they are kept three days); longer: hour rows."""
BREAKDOWNS = {"tenant": "tenant", "api_key_id": "api_key_id", "model": "model"}
"""Overview breakdowns: the name the answer uses -> the row field."""
USAGE_GROUPS = {"tenant": "tenant", "api_key_id": "api_key_id", "model": "model"}
"""``group`` values of the usage table -> the row field."""
_TOP = 25
"""Rows a breakdown lists (the largest by requests; the rest are summed as ``(others)``)."""
_USAGE_WIDTHS = {"1d": DAY, "1h": HOUR_WIDTH}
_MAX_USAGE_SECONDS = {"1d": 62 * DAY, "1h": 31 * DAY}


@dataclass(frozen=True, slots=True)
class Window:
    """A range of whole buckets: ``[start, end)`` in steps of ``width`` seconds."""

    start: int
    end: int
    width: int

    @property
    def starts(self) -> range:
        return range(self.start, self.end, self.width)


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param, code="invalid_value")


def window(name: str, now: int) -> Window:
    """The buckets of the range ``name`` (:data:`RANGES`) ending with the bucket holding
    ``now``: five-minute buckets up to two days, hours beyond.

    Raises:
        InvalidRequestError: an unknown range (400, ``range``).
    """
    if name not in RANGES:
        raise _bad(f"Invalid 'range': '{name}'. Use one of {', '.join(RANGES)}.", "range")
    seconds = RANGES[name]
    width = FINE_WIDTH if seconds <= _FINE_UP_TO else HOUR_WIDTH
    end = now - now % width + width
    return Window(end - seconds, end, width)


def _int(raw: str | None, name: str) -> int | None:
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise _bad(f"Invalid '{name}': expected Unix seconds.", name) from None


def usage_window(
    start: str | None, end: str | None, width: str | None, now: int
) -> tuple[Window, str]:
    """The usage table's buckets: ``start`` (default: 7 days before now) to ``end`` (default:
    now), whole UTC days (``1d``, at most 62) or hours (``1h``, at most 31 days).

    Raises:
        InvalidRequestError: a bad bound or width, an empty or too long range (400).
    """
    name = width or "1d"
    if name not in _USAGE_WIDTHS:
        raise _bad(f"Invalid 'width': '{name}'. Use '1d' or '1h'.", "width")
    step = _USAGE_WIDTHS[name]
    last = _int(end, "end")
    last = now if last is None else last
    first = _int(start, "start")
    first = last - 7 * DAY if first is None else first
    if last <= first:
        raise _bad("'end' must be after 'start'.", "end")
    aligned_start = first - first % step
    aligned_end = -(-last // step) * step
    if aligned_end - aligned_start > _MAX_USAGE_SECONDS[name]:
        most = _MAX_USAGE_SECONDS[name] // DAY
        raise _bad(f"A usage range of '{name}' buckets covers at most {most} days.", "start")
    return Window(aligned_start, aligned_end, step), name


def _money(value: Decimal) -> str:
    return format(value, "f")


def _percentiles(stats: Mapping[str, int], prefix: str) -> dict[str, float | None]:
    hist = histogram(stats, prefix)
    return {name: quantile(hist, q) for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))}


def figures(counts: UsageCounts, stats: Mapping[str, int], seconds: int) -> dict[str, Any]:
    """The figures of summed rows covering ``seconds``: requests (responses that ran, and
    requests refused before their loop), errors (failed and refused), statuses, rate per
    minute, latency and time-to-first-token percentiles (ms, two significant digits), tokens,
    model calls and cost."""
    statuses = count(stats, STATUS)
    requests = sum(statuses.values()) or counts.responses  # rows older than the counters
    errors = sum(statuses.get(status, 0) for status in ERROR_STATUSES)
    return {
        "requests": requests,
        "errors": errors,
        "error_rate": errors / requests if requests else None,
        "rate_per_min": requests * 60 / seconds if seconds else None,
        "statuses": statuses,
        "failovers": stats.get(FAILOVER, 0),
        "latency_ms": _percentiles(stats, LATENCY),
        "ttft_ms": _percentiles(stats, TTFT),
        "input_tokens": counts.input_tokens,
        "cached_tokens": counts.cached_tokens,
        "output_tokens": counts.output_tokens,
        "reasoning_tokens": counts.reasoning_tokens,
        "model_calls": counts.model_calls,
        "cost_usd": _money(counts.cost_usd),
    }


class _Sum:
    __slots__ = ("counts", "stats")

    def __init__(self) -> None:
        self.counts = UsageCounts(cost_usd=Decimal(0))
        self.stats: dict[str, int] = {}

    def add(self, row: UsageBucket) -> None:
        self.counts.add(row.counts)
        merge(self.stats, row.stats)


def _breakdown(rows: Iterable[UsageBucket], field: str, seconds: int) -> list[dict[str, Any]]:
    sums: dict[str, _Sum] = {}
    for row in rows:
        sums.setdefault(str(getattr(row, field)), _Sum()).add(row)
    found = [(key, figures(s.counts, s.stats, seconds)) for key, s in sums.items()]
    found.sort(key=lambda pair: (-pair[1]["requests"], -float(pair[1]["cost_usd"]), pair[0]))
    listed = [{"key": key, **shown} for key, shown in found[:_TOP]]
    if len(found) > _TOP:
        rest = _Sum()
        for key, _ in found[_TOP:]:
            rest.counts.add(sums[key].counts)
            merge(rest.stats, sums[key].stats)
        listed.append({"key": "(others)", **figures(rest.counts, rest.stats, seconds)})
    return listed


def _deployments(stats: Mapping[str, int]) -> list[dict[str, Any]]:
    answered = count(stats, ANSWERED)
    failed = count(stats, FAILED)
    return [
        {"id": name, "answered": answered.get(name, 0), "failed": failed.get(name, 0)}
        for name in sorted(set(answered) | set(failed))
    ]


def build_overview(
    rows: Iterable[UsageBucket], span: Window, *, tenant: str | None = None
) -> dict[str, Any]:
    """The overview of ``rows`` (of ``span``'s width) over ``span``: a point per bucket, the
    totals, the breakdowns and the deployments' answered and failed calls; only ``tenant``'s
    rows when given."""
    kept = [
        row
        for row in rows
        if span.start <= row.hour_start < span.end and (tenant is None or row.tenant == tenant)
    ]
    per_bucket: dict[int, _Sum] = {start: _Sum() for start in span.starts}
    total = _Sum()
    for row in kept:
        start = row.hour_start - (row.hour_start - span.start) % span.width
        per_bucket[start].add(row)
        total.add(row)
    seconds = span.end - span.start
    return {
        "object": "gateway.overview",
        "start": span.start,
        "end": span.end,
        "width": span.width,
        "tenant": tenant,
        "totals": figures(total.counts, total.stats, seconds),
        "buckets": [
            {"start": start, **figures(s.counts, s.stats, span.width)}
            for start, s in per_bucket.items()
        ],
        "by": {name: _breakdown(kept, field, seconds) for name, field in BREAKDOWNS.items()},
        "deployments": _deployments(total.stats),
    }


_USAGE_FIELDS = (
    "requests",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "reasoning_tokens",
    "model_calls",
    "cost_usd",
)


def _usage_figures(counts: UsageCounts) -> dict[str, Any]:
    return {
        "requests": counts.responses,
        "input_tokens": counts.input_tokens,
        "cached_tokens": counts.cached_tokens,
        "output_tokens": counts.output_tokens,
        "reasoning_tokens": counts.reasoning_tokens,
        "model_calls": counts.model_calls,
        "cost_usd": _money(counts.cost_usd),
    }


def build_usage(
    rows: Iterable[UsageBucket],
    span: Window,
    *,
    group: str | None = None,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Tokens and cost per bucket of ``span`` (days or hours), per value of ``group``
    (:data:`USAGE_GROUPS`; None: one group), of ``tenant``'s rows when given.

    Raises:
        InvalidRequestError: an unknown group (400, ``group``).
    """
    if group is not None and group not in USAGE_GROUPS:
        raise _bad(f"Invalid 'group': '{group}'. Use one of {', '.join(USAGE_GROUPS)}.", "group")
    field = USAGE_GROUPS.get(group or "")
    per_bucket: dict[int, dict[str, UsageCounts]] = {start: {} for start in span.starts}
    totals: dict[str, UsageCounts] = {}
    for row in rows:
        if not span.start <= row.hour_start < span.end:
            continue
        if tenant is not None and row.tenant != tenant:
            continue
        key = str(getattr(row, field)) if field else "all"
        start = row.hour_start - (row.hour_start - span.start) % span.width
        per_bucket[start].setdefault(key, UsageCounts(cost_usd=Decimal(0))).add(row.counts)
        totals.setdefault(key, UsageCounts(cost_usd=Decimal(0))).add(row.counts)
    order = sorted(totals, key=lambda k: (-totals[k].cost_usd, -totals[k].total_tokens, k))
    everything = UsageCounts(cost_usd=Decimal(0))
    for counts in totals.values():
        everything.add(counts)
    return {
        "object": "gateway.usage",
        "start": span.start,
        "end": span.end,
        "width": span.width,
        "group": group,
        "tenant": tenant,
        "keys": order,
        "total": _usage_figures(everything),
        "totals": [{"key": key, **_usage_figures(totals[key])} for key in order],
        "buckets": [
            {
                "start": start,
                "groups": [
                    {"key": key, **_usage_figures(groups[key])} for key in order if key in groups
                ],
            }
            for start, groups in per_bucket.items()
        ],
    }


def usage_csv(table: Mapping[str, Any]) -> str:
    """The usage table as CSV: one line per bucket and group that has usage (bucket start in
    ISO 8601 UTC, the group, then :data:`_USAGE_FIELDS`)."""
    from datetime import UTC, datetime

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["bucket_start_utc", table.get("group") or "group", *_USAGE_FIELDS])
    for bucket in table["buckets"]:
        when = datetime.fromtimestamp(bucket["start"], UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for group in bucket["groups"]:
            writer.writerow([when, group["key"], *(group[f] for f in _USAGE_FIELDS)])
    return out.getvalue()
