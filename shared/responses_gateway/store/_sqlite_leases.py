"""Run leases (which process drives each unfinished background run) in the SQLite store.

Owns the ``run_leases`` table: one row per background run from its first checkpoint until the
runner that drove it to its end releases it, with its ``owner`` (a runner's id; empty while the
run waits for its creator to start it) and the time its lease lapses. A row whose lease lapsed
names a run nobody drives any more (its process died): the rows are indexed by that time, so
finding them is one range read however many runs the file holds. The table is created when the
store opens (``CREATE ... IF NOT EXISTS``), so a database file of an older schema gains it
without a migration. The functions run on the store's threads inside its transactions; they must
not know about the worker, HTTP or the loop.
"""

from __future__ import annotations

import sqlite3

__all__ = ["CREATE", "NEW_RUN_GRACE", "claim", "created", "orphaned", "release", "renew"]

CREATE = """
CREATE TABLE IF NOT EXISTS run_leases (
    tenant TEXT NOT NULL,
    response_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_until REAL NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, response_id)
);
CREATE INDEX IF NOT EXISTS run_leases_lapse ON run_leases (lease_until);
CREATE INDEX IF NOT EXISTS run_leases_expiry ON run_leases (expires_at);
"""

NEW_RUN_GRACE = 30.0
"""Seconds a new run stays leased to nobody: its creator starts it at once; should the creator
die first, another process takes it over after this."""


def created(
    conn: sqlite3.Connection, tenant: str, response_id: str, now: float, expires_at: int
) -> None:
    """A run's first checkpoint was written: lease it to nobody for the grace."""
    conn.execute(
        "INSERT OR REPLACE INTO run_leases (tenant, response_id, owner, lease_until, expires_at) "
        "VALUES (?, ?, '', ?, ?)",
        (tenant, response_id, now + NEW_RUN_GRACE, expires_at),
    )


def claim(
    conn: sqlite3.Connection,
    tenant: str,
    response_id: str,
    owner: str,
    now: float,
    until: float,
    expires_at: int,
) -> bool:
    """Lease the run to ``owner`` until ``until`` unless another owner's lease is current."""
    conn.execute(
        "INSERT OR IGNORE INTO run_leases (tenant, response_id, owner, lease_until, expires_at) "
        "VALUES (?, ?, '', 0, ?)",
        (tenant, response_id, expires_at),
    )
    cursor = conn.execute(
        "UPDATE run_leases SET owner = ?, lease_until = ? WHERE tenant = ? AND response_id = ? "
        "AND (owner = ? OR owner = '' OR lease_until <= ?)",
        (owner, until, tenant, response_id, owner, now),
    )
    return cursor.rowcount > 0


def renew(conn: sqlite3.Connection, owner: str, until: float) -> int:
    cursor = conn.execute("UPDATE run_leases SET lease_until = ? WHERE owner = ?", (until, owner))
    return cursor.rowcount


def release(conn: sqlite3.Connection, tenant: str, response_id: str, owner: str) -> None:
    conn.execute(
        "DELETE FROM run_leases WHERE tenant = ? AND response_id = ? AND owner = ?",
        (tenant, response_id, owner),
    )


def orphaned(conn: sqlite3.Connection, now: float, limit: int) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT tenant, response_id FROM run_leases WHERE lease_until <= ? "
        "ORDER BY lease_until LIMIT ?",
        (now, limit),
    ).fetchall()
    return [(str(tenant), str(response_id)) for tenant, response_id in rows]
