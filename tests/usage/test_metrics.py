"""Request health counters (usage.metrics): histogram bins, percentiles by nearest rank, and
what one request-log entry adds."""

from __future__ import annotations

import math
import random

from responses_gateway.usage.metrics import (
    bin_of,
    count,
    entry_stats,
    histogram,
    quantile,
    sum_stats,
)
from responses_gateway.usage.records import UsageCounts, UsageEntry


def test_bins_are_exact_below_16_ms_then_eight_per_doubling() -> None:
    assert [bin_of(v) for v in (0, 7, 15, 16, 17, 120, 1234, 56_789)] == [
        0,
        7,
        15,
        16,
        16,
        117,
        1217,
        55_108,
    ]
    assert bin_of(-5) == 0
    lows = sorted({bin_of(v) for v in range(16, 3_600_000, 7)})
    assert len(lows) <= 8 * 18  # about 160 bins from 16 ms to an hour
    for value in (16, 100, 999, 12_345, 600_000):  # each value near its bin's middle
        middle = quantile({bin_of(value): 1}, 1.0)
        assert middle is not None and abs(middle - value) <= 0.045 * value


def test_quantiles_are_within_five_percent_of_the_nearest_rank() -> None:
    values = [random.Random(7).randint(1, 90_000) for _ in range(5000)]
    hist: dict[int, int] = {}
    for value in values:
        hist[bin_of(value)] = hist.get(bin_of(value), 0) + 1
    ordered = sorted(values)
    for q in (0.5, 0.95, 0.99):
        exact = ordered[math.ceil(q * len(values)) - 1]
        found = quantile(hist, q)
        assert found is not None and abs(found - exact) <= max(1, 0.05 * exact)
    assert quantile({}, 0.5) is None
    assert quantile({5: 1, 117: 1}, 0.5) == 5 and quantile({5: 1, 117: 1}, 0.51) == 122.6


def _entry(status: str, **extra: object) -> UsageEntry:
    return UsageEntry("t", "r", "m", 0, status, UsageCounts(), extra=dict(extra))


def test_entry_stats_count_status_times_deployments_and_failovers() -> None:
    stats = entry_stats(
        _entry(
            "completed",
            duration_ms=1234,
            ttft_ms=87,
            deployment="east,east,west",
            attempts_failed=[{"deployment": "north", "kind": "rate_limited"}, "junk"],
        )
    )
    assert stats == {
        "s:completed": 1,
        "l:1217": 1,
        "t:82": 1,
        "d:east": 2,
        "d:west": 1,
        "x:north": 1,
        "o:failover": 1,
    }
    assert entry_stats(_entry("refused", refusals_dropped=3, duration_ms=2)) == {
        "s:refused": 4,
        "l:2": 1,
    }
    assert entry_stats(_entry("failed", duration_ms="slow")) == {"s:failed": 1}


def test_rows_add_up_and_read_back_by_prefix() -> None:
    total = sum_stats([{"s:failed": 1, "l:117": 2}, {"s:failed": 2, "l:5": 1, "d:a": 4}])
    assert total == {"s:failed": 3, "l:117": 2, "l:5": 1, "d:a": 4}
    assert histogram(total, "l:") == {117: 2, 5: 1}
    assert count(total, "d:") == {"a": 4}
