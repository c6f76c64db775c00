"""Metrics rows (the overview's pre-aggregated buckets) in the SQLite store.

Owns the ``usage_metrics`` table: one row per (width, bucket start, tenant, model, API key) with
the ledger's token counters and the request health counters of
:mod:`responses_gateway.usage.metrics` (JSON), for hour rows (kept with the ledger) and
five-minute rows (kept :data:`~responses_gateway.store._ledger.FINE_RETENTION_DAYS`). The table
and its index are created when the store opens (``CREATE ... IF NOT EXISTS``), so a database
file of an older schema gains them without a migration. The functions run on the store's
threads inside its transactions; they must not know about HTTP or the loop.
"""

from __future__ import annotations

import json
import sqlite3
from decimal import Decimal

from responses_gateway.store._ledger import _COUNTERS
from responses_gateway.store.base import UsageBucket, UsageCounts, UsageEntry
from responses_gateway.usage.metrics import merge

__all__ = ["CREATE", "add_rows", "read_rows"]

_COLUMNS = [name for _, name in _COUNTERS]

CREATE = f"""
CREATE TABLE IF NOT EXISTS usage_metrics (
    width INTEGER NOT NULL,
    bucket_start INTEGER NOT NULL,
    tenant TEXT NOT NULL,
    model TEXT NOT NULL,
    api_key TEXT NOT NULL,
    {", ".join(f"{c} INTEGER NOT NULL" for c in _COLUMNS)},
    cost TEXT NOT NULL,
    stats TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (width, bucket_start, tenant, model, api_key)
);
CREATE INDEX IF NOT EXISTS usage_metrics_expiry ON usage_metrics (expires_at);
"""
"""The table, and the expiry index the purge walks (statements separated by ``;``)."""


def add_rows(
    conn: sqlite3.Connection,
    entry: UsageEntry,
    stats: dict[str, int],
    widths: dict[int, int],
    now: int,
) -> None:
    """Add the entry's counters and ``stats`` to its row of each width (``{width:
    expires_at}``); a row past its expiry starts again from zero."""
    counts = entry.counts
    for width, expires in widths.items():
        row_key = (
            width,
            entry.ended_at - entry.ended_at % width,
            entry.tenant,
            entry.model,
            entry.api_key_id,
        )
        row = conn.execute(
            f"SELECT {', '.join(_COLUMNS)}, cost, stats, expires_at FROM usage_metrics "
            "WHERE width = ? AND bucket_start = ? AND tenant = ? AND model = ? AND api_key = ?",
            row_key,
        ).fetchone()
        live = row is not None and int(row[-1]) > now
        added = [
            (int(row[i]) if live else 0) + getattr(counts, name) for i, name in enumerate(_COLUMNS)
        ]
        cost = (Decimal(row[len(_COLUMNS)]) if live else Decimal(0)) + counts.cost_usd
        merged: dict[str, int] = json.loads(row[len(_COLUMNS) + 1]) if live else {}
        merge(merged, stats)
        conn.execute(
            f"INSERT OR REPLACE INTO usage_metrics (width, bucket_start, tenant, model, api_key, "
            f"{', '.join(_COLUMNS)}, cost, stats, expires_at) "
            f"VALUES ({','.join('?' * (len(_COLUMNS) + 8))})",
            (*row_key, *added, format(cost, "f"), json.dumps(merged), expires),
        )


def read_rows(
    conn: sqlite3.Connection, start: int, end: int, width: int, now: int
) -> list[UsageBucket]:
    """The live rows of ``width`` whose bucket starts in ``[start, end)`` (one indexed range)."""
    buckets: list[UsageBucket] = []
    for row in conn.execute(
        f"SELECT bucket_start, tenant, model, api_key, {', '.join(_COLUMNS)}, cost, stats "
        "FROM usage_metrics WHERE width = ? AND bucket_start >= ? AND bucket_start < ? "
        "AND expires_at > ?",
        (width, start, end, now),
    ):
        counts = UsageCounts(cost_usd=Decimal(row[-2]))
        for offset, name in enumerate(_COLUMNS, 4):
            setattr(counts, name, int(row[offset]))
        buckets.append(
            UsageBucket(
                hour_start=int(row[0]),
                tenant=row[1],
                model=row[2],
                api_key_id=row[3],
                counts=counts,
                stats=json.loads(row[-1]),
                width=width,
            )
        )
    return buckets
