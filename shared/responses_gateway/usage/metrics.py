"""Request health counters: what one request-log entry adds to its metrics rows, and figures
(rates, error rates, percentiles) read back from summed rows.

Owns the names of the counters a ledger row keeps beside its token counters
(:attr:`~responses_gateway.usage.records.UsageBucket.stats`), one flat table of integers so a
store adds them with plain ``ADD`` updates:

- ``s:<status>``: requests that ended with this status (``refused``: refused before their loop
  ran, dropped refusals included);
- ``l:<bin>`` / ``t:<bin>``: the histograms of duration and time to first token, in
  milliseconds: exact below 16 ms, then eight bins per doubling (:func:`bin_of`; a bin's middle
  is at most 4.4% from any value in it), so a row holds at most about 160 bins per histogram
  whatever the traffic;
- ``d:<deployment>``: model calls a deployment answered; ``x:<deployment>``: attempts that
  failed on it; ``o:failover``: requests that needed another deployment or model.

Pure: no I/O, no store, nothing that knows HTTP. Imported on the ledger's write path, so it
imports only the standard library and the records.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from responses_gateway.usage.records import UsageEntry

__all__ = [
    "ANSWERED",
    "ERROR_STATUSES",
    "FAILED",
    "FAILOVER",
    "LATENCY",
    "STATUS",
    "TTFT",
    "bin_of",
    "count",
    "entry_stats",
    "histogram",
    "is_stat",
    "merge",
    "quantile",
    "sum_stats",
]

STATUS = "s:"
LATENCY = "l:"
TTFT = "t:"
ANSWERED = "d:"
FAILED = "x:"
FAILOVER = "o:failover"
ERROR_STATUSES = frozenset({"failed", "refused"})
"""Statuses counted as errors: the client got an error (an HTTP error or ``response.failed``).
``incomplete`` and ``cancelled`` responses are answers (a limit, the client's own cancel)."""


def is_stat(name: str) -> bool:
    """Whether a row attribute is one of these counters (their names hold a ``:``)."""
    return ":" in name


_EXACT = 16
"""Values below this many milliseconds have a bin each."""
_PER_DOUBLING = 8


def _step(ms: int) -> int:
    """The bin index of ``ms`` (>= :data:`_EXACT`): eighths of its base-2 logarithm."""
    return math.floor(_PER_DOUBLING * math.log2(ms))


def bin_of(ms: int) -> int:
    """The histogram bin of ``ms``, named by its lowest whole millisecond: ``ms`` itself below
    16, else ``int(2 ** (k / 8))`` for the ``k`` with ``2 ** (k / 8) <= ms < 2 ** ((k + 1) / 8)``
    (120 -> 117, 1234 -> 1217)."""
    ms = max(0, int(ms))
    if ms < _EXACT:
        return ms
    return int(2 ** (_step(ms) / _PER_DOUBLING))


def _bin_middle(low: int) -> float:
    """The middle of the bin named ``low`` (its geometric middle above 16 ms)."""
    if low < _EXACT:
        return float(low)
    k = math.ceil(_PER_DOUBLING * math.log2(low) - 1e-9)
    return float(round(2 ** ((k + 0.5) / _PER_DOUBLING), 1))


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _names(raw: Any) -> list[str]:
    names = raw.split(",") if isinstance(raw, str) else list(raw or [])
    return [str(name) for name in names if name]


def entry_stats(entry: UsageEntry) -> dict[str, int]:
    """The counters one request-log entry adds to its rows."""
    extra = entry.extra
    requests = 1
    dropped = _as_int(extra.get("refusals_dropped"))
    if entry.status == "refused" and dropped:
        requests += dropped  # refusals the gate did not write still happened
    stats: dict[str, int] = {f"{STATUS}{entry.status}": requests}
    duration = _as_int(extra.get("duration_ms"))
    if duration is not None:
        stats[f"{LATENCY}{bin_of(duration)}"] = 1
    ttft = _as_int(extra.get("ttft_ms"))
    if ttft is not None:
        stats[f"{TTFT}{bin_of(ttft)}"] = 1
    for deployment in _names(extra.get("deployment")):
        name = f"{ANSWERED}{deployment}"
        stats[name] = stats.get(name, 0) + 1
    failures = [a for a in extra.get("attempts_failed") or [] if isinstance(a, dict)]
    for attempt in failures:
        name = f"{FAILED}{attempt.get('deployment') or '?'}"
        stats[name] = stats.get(name, 0) + 1
    if failures:
        stats[FAILOVER] = 1
    return stats


def merge(into: dict[str, int], stats: Mapping[str, int]) -> None:
    """Add ``stats`` into ``into``."""
    for name, count in stats.items():
        into[name] = into.get(name, 0) + count


def histogram(stats: Mapping[str, int], prefix: str) -> dict[int, int]:
    """The histogram under ``prefix`` (:data:`LATENCY` or :data:`TTFT`): bin -> count."""
    found: dict[int, int] = {}
    for name, count in stats.items():
        if name.startswith(prefix) and count:
            try:
                found[int(name[len(prefix) :])] = count
            except ValueError:
                continue
    return found


def quantile(hist: Mapping[int, int], q: float) -> float | None:
    """The ``q`` quantile (0 < q <= 1) of a histogram by nearest rank: the middle of the bin
    holding the ``ceil(q * n)``-th smallest value; None when it is empty."""
    total = sum(hist.values())
    if total <= 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for low in sorted(hist):
        seen += hist[low]
        if seen >= rank:
            return _bin_middle(low)
    return _bin_middle(max(hist))  # pragma: no cover - the loop always reaches the rank


def count(stats: Mapping[str, int], prefix: str) -> dict[str, int]:
    """Counters under ``prefix`` by their name's rest (statuses, deployments)."""
    return {
        name[len(prefix) :]: value
        for name, value in stats.items()
        if name.startswith(prefix) and value
    }


def sum_stats(rows: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The counters of several rows added up."""
    total: dict[str, int] = {}
    for stats in rows:
        merge(total, stats)
    return total
