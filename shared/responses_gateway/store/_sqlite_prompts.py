"""Operator prompt templates in the SQLite store.

Owns the ``prompt_versions`` table (one row per prompt version: its body as JSON, and whether it
is the prompt's default) and the functions :class:`~responses_gateway.store.sqlite.SqliteStore`
runs on its writer thread. The table is created on first use (``CREATE TABLE IF NOT EXISTS``),
so a database file of an older schema version gains it without a migration; every call goes
through the writer, so the creation never meets a read-only connection. Prompts are global and
never expire. It must not know about the template syntax or HTTP.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from responses_gateway.store.base import PromptVersionExists, StoredPrompt

__all__ = ["get_prompt", "put_prompt_version"]

_CREATE = """
CREATE TABLE IF NOT EXISTS prompt_versions (
    prompt_id TEXT NOT NULL,
    version TEXT NOT NULL,
    body TEXT NOT NULL,
    is_default INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (prompt_id, version)
)
"""


def put_prompt_version(
    conn: sqlite3.Connection,
    prompt_id: str,
    version: str,
    body: dict[str, Any],
    make_default: bool,
) -> None:
    conn.execute(_CREATE)
    try:
        conn.execute(
            "INSERT INTO prompt_versions (prompt_id, version, body) VALUES (?, ?, ?)",
            (prompt_id, version, json.dumps(body, separators=(",", ":"), ensure_ascii=False)),
        )
    except sqlite3.IntegrityError:
        raise PromptVersionExists(f"{prompt_id} {version}") from None
    if make_default:
        conn.execute(
            "UPDATE prompt_versions SET is_default = (version = ?) WHERE prompt_id = ?",
            (version, prompt_id),
        )


def get_prompt(conn: sqlite3.Connection, prompt_id: str) -> StoredPrompt | None:
    conn.execute(_CREATE)
    rows = conn.execute(
        "SELECT version, body, is_default FROM prompt_versions WHERE prompt_id = ?",
        (prompt_id,),
    ).fetchall()
    if not rows:
        return None
    default = next((str(r[0]) for r in rows if r[2]), None)
    return StoredPrompt(prompt_id, {str(r[0]): json.loads(r[1]) for r in rows}, default)
