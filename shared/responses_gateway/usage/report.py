"""The usage report: ledger hour rows folded into OpenAI's completions-usage page.

Owns the query rules of ``GET /v1/organization/usage/completions`` (:func:`parse_query`:
``start_time``, ``end_time``, ``bucket_width`` ``1d`` or ``1h``, ``group_by`` of ``project_id``
(the tenant), ``api_key_id`` and ``model``, the matching filters, ``limit`` and ``page``) and the
page it answers (:func:`build_page`, OpenAI's ``UsageResponse`` of ``UsageTimeBucket`` objects
holding ``organization.usage.completions.result`` objects). Pure: the caller reads the rows
(``LedgerStore.read_usage(*query.read_range())``). ``1m`` buckets are refused: the ledger counts
by hour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from responses_gateway.errors import InvalidRequestError
from responses_gateway.usage.records import UsageBucket, UsageCounts

__all__ = ["GROUPS", "UsageQuery", "build_page", "parse_query", "totals_by"]

_WIDTHS = {"1d": 86_400, "1h": 3_600}
_LIMITS = {"1d": (7, 31), "1h": (24, 168)}
"""Default and largest ``limit`` per bucket width (OpenAI's)."""
GROUPS = {"project_id": "tenant", "api_key_id": "api_key_id", "model": "model"}
"""``group_by`` values and the ledger row field each groups on (a project is a tenant)."""
_FILTERS = {"project_ids": "tenant", "api_key_ids": "api_key_id", "models": "model"}


@dataclass(frozen=True, slots=True)
class UsageQuery:
    """A validated usage query."""

    start_time: int
    end_time: int
    width: int
    limit: int
    first_bucket: int
    """Start of this page's first bucket (from ``page``, else ``start_time`` aligned down)."""
    group_by: tuple[str, ...] = ()
    filters: Mapping[str, frozenset[str]] | None = None

    def read_range(self) -> tuple[int, int]:
        """The ``[start, end)`` of ledger hours this page needs."""
        return self.first_bucket, min(self.end_time, self.first_bucket + self.limit * self.width)


_INTEGER_BOUND = 2**53
"""The largest magnitude a query value may have (the stores keep times as 64-bit integers,
and bucket arithmetic must not leave that range)."""


def _integer(raw: str | None, name: str) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequestError(
            f"Invalid type for '{name}': expected an integer, but got '{raw}' instead.",
            param=name,
            code="invalid_type",
        ) from None
    if not -_INTEGER_BOUND <= value <= _INTEGER_BOUND:
        raise InvalidRequestError(
            f"Invalid '{name}': integer out of range. Expected a value between "
            f"{-_INTEGER_BOUND} and {_INTEGER_BOUND}.",
            param=name,
            code="invalid_value",
        )
    return value


def _values(params: Mapping[str, Sequence[str]], name: str) -> list[str]:
    found: list[str] = []
    for key in (name, f"{name}[]"):
        for value in params.get(key, ()):
            found += [v for v in value.split(",") if v]
    return found


def parse_query(params: Mapping[str, Sequence[str]], *, now: int) -> UsageQuery:
    """Validate the query parameters (every value of each name, as a multi-dict gives them).

    Raises:
        InvalidRequestError: a missing ``start_time``, an unknown width or group, a bad limit,
            range or page cursor (400, naming the parameter).
    """

    def one(name: str) -> str | None:
        values = params.get(name) or ()
        return values[-1] if values else None

    start = _integer(one("start_time"), "start_time")
    if start is None:
        raise InvalidRequestError(
            "Missing required parameter: 'start_time'.",
            param="start_time",
            code="missing_required_parameter",
        )
    end = _integer(one("end_time"), "end_time")
    end = now if end is None else end
    if end <= start:
        raise InvalidRequestError(
            "'end_time' must be after 'start_time'.", param="end_time", code="invalid_value"
        )
    width_name = one("bucket_width") or "1d"
    if width_name not in _WIDTHS:
        raise InvalidRequestError(
            f"Invalid value for 'bucket_width': '{width_name}'. This gateway supports '1d' and "
            "'1h' (its ledger counts by hour).",
            param="bucket_width",
            code="invalid_value",
        )
    width = _WIDTHS[width_name]
    default_limit, max_limit = _LIMITS[width_name]
    limit = _integer(one("limit"), "limit") or default_limit
    if not 1 <= limit <= max_limit:
        raise InvalidRequestError(
            f"Invalid 'limit': expected a value between 1 and {max_limit} for "
            f"bucket_width {width_name}, but got {limit} instead.",
            param="limit",
            code="invalid_value",
        )
    aligned = start - start % width
    first = aligned
    page = one("page")
    if page:
        cursor = _integer(page, "page")
        if cursor is None or cursor < aligned or cursor >= end or (cursor - aligned) % width:
            raise InvalidRequestError("Invalid 'page' cursor.", param="page", code="invalid_value")
        first = cursor
    group_by = tuple(dict.fromkeys(_values(params, "group_by")))
    for group in group_by:
        if group not in GROUPS:
            raise InvalidRequestError(
                f"Invalid value for 'group_by': '{group}'. This gateway groups by "
                f"{', '.join(GROUPS)}.",
                param="group_by",
                code="invalid_value",
            )
    filters = {name: frozenset(values) for name in _FILTERS if (values := _values(params, name))}
    return UsageQuery(
        start_time=start,
        end_time=end,
        width=width,
        limit=limit,
        first_bucket=first,
        group_by=group_by,
        filters=filters,
    )


def _kept(row: UsageBucket, filters: Mapping[str, frozenset[str]] | None) -> bool:
    return all(getattr(row, _FILTERS[name]) in allowed for name, allowed in (filters or {}).items())


def _result(counts: UsageCounts, group: Mapping[str, str]) -> dict[str, Any]:
    return {
        "object": "organization.usage.completions.result",
        "input_tokens": counts.input_tokens,
        "output_tokens": counts.output_tokens,
        "input_cached_tokens": counts.cached_tokens,
        "input_audio_tokens": 0,
        "output_audio_tokens": 0,
        "num_model_requests": counts.model_calls,
        "project_id": group.get("project_id"),
        "user_id": None,
        "api_key_id": group.get("api_key_id"),
        "model": group.get("model"),
        "batch": None,
    }


def build_page(query: UsageQuery, rows: Iterable[UsageBucket]) -> dict[str, Any]:
    """The ``page`` object for ``query`` from the ledger rows of its :meth:`read_range`."""
    _, read_end = query.read_range()
    buckets: dict[int, dict[tuple[str, ...], UsageCounts]] = {}
    starts = range(query.first_bucket, read_end, query.width)
    for start in starts:
        buckets[start] = {}
    for row in rows:
        if not _kept(row, query.filters):
            continue
        start = row.hour_start - (row.hour_start - query.first_bucket) % query.width
        if start not in buckets:
            continue
        group = tuple(getattr(row, GROUPS[name]) for name in query.group_by)
        buckets[start].setdefault(group, UsageCounts()).add(row.counts)
    data = []
    for start, groups in buckets.items():
        results = [
            _result(counts, dict(zip(query.group_by, group, strict=True)))
            for group, counts in sorted(groups.items())
        ]
        data.append(
            {
                "object": "bucket",
                "start_time": start,
                "end_time": start + query.width,
                "results": results,
            }
        )
    has_more = read_end < query.end_time
    return {
        "object": "page",
        "data": data,
        "has_more": has_more,
        "next_page": str(read_end) if has_more else None,
    }


def totals_by(
    rows: Iterable[UsageBucket], fields: Sequence[str]
) -> dict[tuple[str, ...], UsageCounts]:
    """Rows summed by the given row fields (``tenant``, ``model``, ``api_key_id``): the CLI's
    table, with costs."""
    totals: dict[tuple[str, ...], UsageCounts] = {}
    for row in rows:
        group = tuple(getattr(row, name) for name in fields)
        totals.setdefault(group, UsageCounts(cost_usd=Decimal(0))).add(row.counts)
    return totals
