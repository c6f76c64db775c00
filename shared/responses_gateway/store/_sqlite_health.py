"""Deployment health and per-minute call counters in the SQLite store.

Owns two tables, created on first use (``CREATE TABLE IF NOT EXISTS``, so the database's schema
version does not change): ``deployment_health`` (one row per deployment: failures in the window,
cooldown end, probe lease, expiry) and ``deployment_calls`` (requests and tokens per deployment
and Unix minute; rows older than two minutes are deleted as new ones are counted). Every function
runs inside the caller's write transaction, so each is atomic across processes sharing the file.
The failure rule is the DynamoDB store's (:func:`~responses_gateway.store._health.after_failure`).
"""

from __future__ import annotations

import sqlite3

from responses_gateway.store._health import after_failure, health_ttl
from responses_gateway.store.base import DeploymentHealth

__all__ = ["claim_probe", "clear_health", "count_call", "read_health", "record_failure"]

_TABLES = """
CREATE TABLE IF NOT EXISTS deployment_health (
    deployment TEXT PRIMARY KEY,
    fails INTEGER NOT NULL,
    window_start REAL NOT NULL,
    cooldown_until REAL NOT NULL,
    probe_until REAL NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS deployment_calls (
    deployment TEXT NOT NULL,
    minute INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (deployment, minute)
)
"""


def _ensure(conn: sqlite3.Connection) -> None:
    for statement in _TABLES.split(";"):
        conn.execute(statement)


def _row(conn: sqlite3.Connection, deployment: str, now: float) -> DeploymentHealth | None:
    row = conn.execute(
        "SELECT fails, window_start, cooldown_until, probe_until FROM deployment_health "
        "WHERE deployment = ? AND expires_at > ?",
        (deployment, now),
    ).fetchone()
    return None if row is None else DeploymentHealth(int(row[0]), row[1], row[2], row[3])


def read_health(
    conn: sqlite3.Connection, deployments: list[str], now: float
) -> dict[str, DeploymentHealth]:
    _ensure(conn)
    found = {d: _row(conn, d, now) for d in deployments}
    return {d: health for d, health in found.items() if health is not None}


def record_failure(
    conn: sqlite3.Connection,
    deployment: str,
    now: float,
    allowed_fails: int,
    window: float,
    cooldown: float,
) -> DeploymentHealth:
    _ensure(conn)
    new = after_failure(
        _row(conn, deployment, now),
        now=now,
        allowed_fails=allowed_fails,
        window=window,
        cooldown=cooldown,
    )
    conn.execute(
        "INSERT OR REPLACE INTO deployment_health VALUES (?, ?, ?, ?, ?, ?)",
        (
            deployment,
            new.fails,
            new.window_start,
            new.cooldown_until,
            new.probe_until,
            health_ttl(new, window),
        ),
    )
    return new


def claim_probe(conn: sqlite3.Connection, deployment: str, now: float, lease: float) -> bool:
    _ensure(conn)
    cursor = conn.execute(
        "UPDATE deployment_health SET probe_until = ? WHERE deployment = ? "
        "AND cooldown_until > 0 AND cooldown_until <= ? AND probe_until <= ? AND expires_at > ?",
        (now + lease, deployment, now, now, now),
    )
    return cursor.rowcount == 1


def clear_health(conn: sqlite3.Connection, deployment: str) -> None:
    _ensure(conn)
    conn.execute("DELETE FROM deployment_health WHERE deployment = ?", (deployment,))


def count_call(
    conn: sqlite3.Connection,
    deployment: str,
    minute: int,
    requests: int,
    tokens: int,
    rpm: int | None,
    tpm: int | None,
) -> bool:
    _ensure(conn)
    conn.execute(
        "DELETE FROM deployment_calls WHERE deployment = ? AND minute < ?",
        (deployment, minute - 2),
    )
    row = conn.execute(
        "SELECT requests, tokens FROM deployment_calls WHERE deployment = ? AND minute = ?",
        (deployment, minute),
    ).fetchone()
    seen_requests, seen_tokens = (0, 0) if row is None else (int(row[0]), int(row[1]))
    if (rpm is not None and seen_requests >= rpm) or (tpm is not None and seen_tokens >= tpm):
        return False
    conn.execute(
        "INSERT INTO deployment_calls VALUES (?, ?, ?, ?) ON CONFLICT (deployment, minute) "
        "DO UPDATE SET requests = requests + excluded.requests, tokens = tokens + excluded.tokens",
        (deployment, minute, requests, tokens),
    )
    return True
