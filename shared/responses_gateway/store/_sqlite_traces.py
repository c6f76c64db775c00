"""Trace tallies and response-to-trace links in the SQLite store.

Owns the ``trace_stats`` table (per trace: spans, errors, tokens added at each ingest, its first
start and last end) and the ``trace_links`` table (the trace a ``response`` span names), both
created when the store opens (``CREATE ... IF NOT EXISTS``: no schema migration), and the
functions :class:`~responses_gateway.store.sqlite.SqliteStore` runs inside its transactions.
The figures mean what the DynamoDB store's tally means (``_traces.py``). It must not know about
HTTP or the agents SDK's classes.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from responses_gateway.store._codec import decode_json, encode_json
from responses_gateway.store._traces import (
    Tally,
    _earlier,
    forgotten_span,
    names_response,
    response_links,
    tallies,
    trace_text,
)

__all__ = ["CREATE", "add_tallies", "forget_spans", "read_tallies", "trace_of"]

CREATE = """
CREATE TABLE IF NOT EXISTS trace_stats (
    tenant TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    spans INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    started TEXT NOT NULL,
    ended TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, trace_id)
);
CREATE INDEX IF NOT EXISTS trace_stats_expiry ON trace_stats (expires_at);
CREATE TABLE IF NOT EXISTS trace_links (
    tenant TEXT NOT NULL,
    response_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, response_id)
);
CREATE INDEX IF NOT EXISTS trace_links_expiry ON trace_links (expires_at);
"""


def add_tallies(
    conn: sqlite3.Connection,
    tenant: str,
    spans: list[dict[str, Any]],
    expires: int,
    now: int,
) -> None:
    """Add a batch of spans to their traces' tallies, and note the responses they name."""
    for trace_id, tally in tallies(spans).items():
        row = conn.execute(
            "SELECT spans, errors, tokens, started, ended, expires_at FROM trace_stats "
            "WHERE tenant = ? AND trace_id = ?",
            (tenant, trace_id),
        ).fetchone()
        if row is not None and int(row[5]) > now:
            tally.spans += int(row[0])
            tally.errors += int(row[1])
            tally.tokens += int(row[2])
            if row[3] and (not tally.started or _earlier(row[3], tally.started)):
                tally.started = row[3]
            if row[4] and (not tally.ended or _earlier(tally.ended, row[4])):
                tally.ended = row[4]
        conn.execute(
            "INSERT OR REPLACE INTO trace_stats "
            "(tenant, trace_id, spans, errors, tokens, started, ended, expires_at) "
            "VALUES (?,?,?,?,?,?,?,?)",
            (
                tenant,
                trace_id,
                tally.spans,
                tally.errors,
                tally.tokens,
                tally.started,
                tally.ended,
                expires,
            ),
        )
    for rid, (trace_id, span_id) in response_links(spans).items():
        conn.execute(
            "INSERT OR REPLACE INTO trace_links (tenant, response_id, trace_id, span_id, "
            "expires_at) VALUES (?,?,?,?,?)",
            (tenant, rid, trace_id, span_id, expires),
        )


def read_tallies(
    conn: sqlite3.Connection, tenant: str, trace_ids: list[str], now: int
) -> dict[str, Tally]:
    """The live tallies of these traces (by primary key)."""
    found: dict[str, Tally] = {}
    if not trace_ids:
        return found
    marks = ",".join("?" * len(trace_ids))
    for trace_id, spans, errors, tokens, started, ended in conn.execute(
        "SELECT trace_id, spans, errors, tokens, started, ended FROM trace_stats "
        f"WHERE tenant = ? AND trace_id IN ({marks}) AND expires_at > ?",
        (tenant, *trace_ids, now),
    ):
        found[trace_id] = Tally(int(spans), int(errors), int(tokens), started, ended)
    return found


def trace_of(conn: sqlite3.Connection, tenant: str, response_id: str, now: int) -> str | None:
    row = conn.execute(
        "SELECT trace_id FROM trace_links WHERE tenant = ? AND response_id = ? AND expires_at > ?",
        (tenant, response_id, now),
    ).fetchone()
    return None if row is None else str(row[0])


def forget_spans(conn: sqlite3.Connection, tenant: str, response_ids: list[str]) -> None:
    """Rewrite the spans naming these responses without their content (their traces found
    through ``trace_links``; each span keeps its row and expiry)."""
    wanted = set(response_ids)
    marks = ",".join("?" * len(wanted))
    traces = [
        str(row[0])
        for row in conn.execute(
            f"SELECT DISTINCT trace_id FROM trace_links WHERE tenant = ? "
            f"AND response_id IN ({marks})",
            (tenant, *wanted),
        )
    ]
    for trace_id in traces:
        rows = conn.execute(
            "SELECT span_id, body, enc FROM trace_spans WHERE tenant = ? AND trace_id = ?",
            (tenant, trace_id),
        ).fetchall()
        for span_id, body, enc in rows:
            span = decode_json(bytes(body), enc)
            if names_response(span, wanted):
                new_body, new_enc = encode_json(json.loads(trace_text(forgotten_span(span))))
                conn.execute(
                    "UPDATE trace_spans SET body = ?, enc = ? "
                    "WHERE tenant = ? AND trace_id = ? AND span_id = ?",
                    (new_body, new_enc, tenant, trace_id, span_id),
                )
