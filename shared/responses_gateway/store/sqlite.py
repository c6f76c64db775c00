"""The embedded SQLite implementation of :class:`~responses_gateway.store.base.Store`.

Owns one database file (stdlib ``sqlite3``, WAL mode): its schema and schema version, the
connections and the threads they run on, and every access pattern of the interface. Semantics are
the DynamoDB store's (``dynamo.py``): strongly consistent reads, conditional writes for
checkpoints, terminal claims and the tool-call journal, batch reads, retention (expired rows read
as gone at once and are purged in the background of later writes), tenant isolation and the same
item and page ordering. The layout is written up in ``DESIGN.md`` ("SQLite store").

Threads: every SQLite call runs on the store's own threads, never on the event loop. Writes go
through **one writer thread** (one connection; each write is one ``BEGIN IMMEDIATE`` transaction,
so a conditional write reads and writes under the file's write lock), reads through a small pool
of reader threads (one connection each; WAL lets them read while the writer writes). A ``:memory:``
database has a single connection, so there reads share the writer thread. Several processes may
open the same file: SQLite's file locks serialize their writers (``busy_timeout``).

It must not know about HTTP, the API's error envelopes or the agent loop. It never logs record
contents (user data).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, TypeVar

from responses_gateway.store import (
    _sqlite_health,
    _sqlite_leases,
    _sqlite_metrics,
    _sqlite_prompts,
    _sqlite_traces,
)
from responses_gateway.store._background import _fencing_version
from responses_gateway.store._calls import StoreError
from responses_gateway.store._codec import decode_json, encode_json
from responses_gateway.store._ledger import (
    _COUNTERS,
    _LIMITS,
    FINE_RETENTION_DAYS,
    LEDGER_RETENTION_DAYS,
    MAX_FINE_DAYS,
    MAX_USAGE_DAYS,
    PageCollector,
    _entry_json,
    _entry_of,
    _log_sk,
)
from responses_gateway.store._responses import _extend_digest, chain_digest
from responses_gateway.store.base import (
    BudgetLimits,
    Checkpoint,
    CheckpointConflict,
    Conversation,
    ConversationPage,
    DeploymentHealth,
    EventRead,
    ItemPage,
    RequestPage,
    RequestQuery,
    StoredPrompt,
    StoredResponse,
    TenantSpend,
    Terminal,
    TracePage,
    UsageBucket,
    UsageCounts,
    UsageEntry,
)
from responses_gateway.usage.metrics import entry_stats
from responses_gateway.usage.records import FINE_WIDTH, HOUR_WIDTH

__all__ = [
    "MEMORY",
    "SCHEMA_VERSION",
    "DatabaseVersionError",
    "SqliteStore",
]

_log = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY = ":memory:"
"""The path of a private, in-memory database (tests)."""

SCHEMA_VERSION = 3
"""The layout version, kept in the file as ``PRAGMA user_version``."""

MAX_SEQUENCE = 9_999_999_999
"""The largest event sequence number (as the DynamoDB store)."""

_DAY = 86_400
_IN_CLAUSE = 500
"""Ids per ``IN (...)`` of a batch read."""
_PURGE_BATCH = 500
"""Rows deleted per purge transaction (keeps each write lock short)."""

_SCHEMA = """
CREATE TABLE responses (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    depth INTEGER NOT NULL,
    prev TEXT,
    digest TEXT NOT NULL,
    chain BLOB,
    conversation_id TEXT,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX responses_expiry ON responses (expires_at);

CREATE TABLE response_items (
    tenant TEXT NOT NULL,
    item_id TEXT NOT NULL,
    response_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    PRIMARY KEY (tenant, item_id)
);
CREATE INDEX response_items_by_response ON response_items (tenant, response_id);
CREATE INDEX response_items_expiry ON response_items (expires_at);

CREATE TABLE conversations (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    next_seq INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX conversations_expiry ON conversations (expires_at);

CREATE TABLE conversation_items (
    tenant TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    item_id TEXT,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    PRIMARY KEY (tenant, conversation_id, seq)
);
CREATE INDEX conversation_items_by_id ON conversation_items (tenant, conversation_id, item_id, seq);
CREATE INDEX conversation_items_expiry ON conversation_items (expires_at);

CREATE TABLE checkpoints (
    tenant TEXT NOT NULL,
    response_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    cancel INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    PRIMARY KEY (tenant, response_id)
);
CREATE INDEX checkpoints_expiry ON checkpoints (expires_at);

CREATE TABLE events (
    tenant TEXT NOT NULL,
    response_id TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    PRIMARY KEY (tenant, response_id, last_seq)
);
CREATE INDEX events_expiry ON events (expires_at);

CREATE TABLE terminals (
    tenant TEXT NOT NULL,
    response_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    PRIMARY KEY (tenant, response_id)
);
CREATE INDEX terminals_expiry ON terminals (expires_at);

CREATE TABLE journal (
    tenant TEXT NOT NULL,
    response_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    state TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB,
    enc TEXT,
    PRIMARY KEY (tenant, response_id, call_id)
);
CREATE INDEX journal_expiry ON journal (expires_at);
"""

_SCHEMA_2 = """
CREATE TABLE conversation_once (
    tenant TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    once_key TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, conversation_id, once_key)
);
CREATE INDEX conversation_once_expiry ON conversation_once (expires_at);

CREATE TABLE usage_entries (
    tenant TEXT NOT NULL,
    response_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    PRIMARY KEY (tenant, response_id)
);
CREATE INDEX usage_entries_expiry ON usage_entries (expires_at);

CREATE TABLE usage_hours (
    hour_start INTEGER NOT NULL,
    tenant TEXT NOT NULL,
    model TEXT NOT NULL,
    api_key TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    model_calls INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    responses INTEGER NOT NULL,
    cost TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (hour_start, tenant, model, api_key)
);
CREATE INDEX usage_hours_expiry ON usage_hours (expires_at);

CREATE TABLE usage_totals (
    tenant TEXT NOT NULL,
    period TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    cost TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, period)
);
CREATE INDEX usage_totals_expiry ON usage_totals (expires_at);

CREATE TABLE budgets (
    tenant TEXT NOT NULL PRIMARY KEY,
    limits TEXT NOT NULL
);
"""
"""Version 2: keyed conversation appends and the usage ledger (additive: new tables only)."""

_SCHEMA_3 = """
ALTER TABLE usage_entries ADD COLUMN log_key TEXT;
CREATE INDEX usage_entries_log ON usage_entries (tenant, log_key);

CREATE INDEX conversations_by_time ON conversations (tenant, created_at, id);

CREATE TABLE traces (
    tenant TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    listed TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    summary TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id)
);
CREATE INDEX traces_listed ON traces (tenant, listed);
CREATE INDEX traces_expiry ON traces (expires_at);

CREATE TABLE trace_spans (
    tenant TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    expires_at INTEGER NOT NULL,
    body BLOB NOT NULL,
    enc TEXT NOT NULL,
    PRIMARY KEY (tenant, trace_id, span_id)
);
CREATE INDEX trace_spans_expiry ON trace_spans (expires_at);
"""
"""Version 3: the request log's order (``usage_entries.log_key``, the DynamoDB log index's
sort key), conversations by creation time, and agent traces with their spans."""

_TABLES = (
    "responses",
    "response_items",
    "conversations",
    "conversation_items",
    "checkpoints",
    "events",
    "terminals",
    "journal",
    "conversation_once",
    "usage_entries",
    "usage_hours",
    "usage_totals",
    "traces",
    "trace_spans",
    "usage_metrics",
    "trace_stats",
    "trace_links",
    "run_leases",
)
"""Every table but ``budgets``: each has ``expires_at`` (indexed) and is purged of expired rows."""

_ADDED = _sqlite_metrics.CREATE + _sqlite_traces.CREATE + _sqlite_leases.CREATE
"""Tables added without a schema version (``IF NOT EXISTS``), created whenever the store opens:
a file of this version, or an older one, gains them; an older gateway ignores them."""

_BACKGROUND_TABLES = ("checkpoints", "events", "terminals", "journal", "run_leases")
"""Tables keyed by (tenant, response_id): a response's background rows."""

_MIGRATIONS: dict[int, str] = {1: _SCHEMA_2, 2: _SCHEMA_3}
"""SQL that upgrades a file from schema version N to N + 1."""


class DatabaseVersionError(StoreError):
    """The database file was written with another schema version than this gateway's."""


def _version_error(path: str, found: int) -> DatabaseVersionError:
    if found > SCHEMA_VERSION:
        return DatabaseVersionError(
            f"the database {path} has schema version {found}, written by a newer "
            f"responses-gateway; this one reads version {SCHEMA_VERSION}. Upgrade the gateway, "
            "or point GATEWAY_DB_PATH (--db) at another file."
        )
    return DatabaseVersionError(
        f"the database {path} has schema version {found} and needs migrating to version "
        f"{SCHEMA_VERSION}, but this gateway has no migration from version {found}. Move the "
        "file aside (or point GATEWAY_DB_PATH / --db at a new file) to start empty, or open it "
        "with the gateway release that wrote it to export what you need."
    )


def _blob(value: Any) -> tuple[bytes, str]:
    return encode_json(value)


def _value(body: bytes, enc: str) -> Any:
    try:
        return decode_json(bytes(body), enc)
    except ValueError as exc:
        raise StoreError(f"a stored record is unreadable: {exc}") from exc


class _Connections:
    """One connection per thread of this store, all opened with the same settings."""

    def __init__(self, path: str, busy_timeout: float) -> None:
        self.path = path
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[sqlite3.Connection] = []

    def get(self, *, read_only: bool = False) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout,
                isolation_level=None,  # transactions are explicit (BEGIN ... COMMIT)
                check_same_thread=False,  # used by one thread; closed by the owner at the end
            )
            conn.execute("PRAGMA synchronous = NORMAL")
            if read_only:
                conn.execute("PRAGMA query_only = 1")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def close_all(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:
                _log.warning("could not close a SQLite connection", exc_info=True)


class SqliteStore:
    """Stored responses, conversations and background-mode state in one SQLite file (see
    DESIGN.md, "SQLite store")."""

    def __init__(
        self,
        path: str | os.PathLike[str] = MEMORY,
        *,
        retention_days: int = 30,
        clock: Callable[[], float] = time.time,
        readers: int = 4,
        busy_timeout: float = 30.0,
        purge_interval: float | None = 600.0,
    ) -> None:
        """Open (creating it if needed) the database at ``path``.

        Args:
            path: the database file (its directory is created), or ``:memory:``.
            retention_days: days a record lives when it does not say (``expires_at``).
            clock: Unix seconds now (injected by tests).
            readers: reader threads (each with its own connection) for a file.
            busy_timeout: seconds a write waits for another process's write lock.
            purge_interval: expired rows are deleted when the store opens and after a write
                once this many seconds have passed since the last purge; None: only by
                :meth:`purge_expired`.
        """
        if retention_days < 1:
            raise ValueError("retention_days must be at least 1")
        self.path = str(path)
        self.retention_days = retention_days
        self._retention = retention_days * _DAY
        self._clock = clock
        self._purge_interval = purge_interval
        self._next_purge = 0.0 if purge_interval is not None else float("inf")
        memory = self.path == MEMORY
        if not memory:
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            self.path = str(Path(self.path).expanduser())
        self._connections = _Connections(self.path, busy_timeout)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-write")
        self._readers = (
            self._writer
            if memory
            else ThreadPoolExecutor(max_workers=max(1, readers), thread_name_prefix="sqlite-read")
        )
        self._read_only = not memory
        try:
            self._writer.submit(self._open).result()
        except BaseException:
            self.close()
            raise

    # Opening, closing, purging

    def _open(self) -> None:
        conn = self._connections.get()
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                found = int(conn.execute("PRAGMA user_version").fetchone()[0])
                if found == 0:
                    for statement in (_SCHEMA + _SCHEMA_2 + _SCHEMA_3).split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                elif found != SCHEMA_VERSION:
                    while found < SCHEMA_VERSION and found in _MIGRATIONS:
                        for statement in _MIGRATIONS[found].split(";"):
                            if statement.strip():
                                conn.execute(statement)
                        found += 1
                        conn.execute(f"PRAGMA user_version = {found}")
                    if found != SCHEMA_VERSION:
                        raise _version_error(self.path, found)
                for statement in _ADDED.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the SQLite database {self.path}: {exc}") from exc
        if self._purge_interval is not None:
            self._purge_now(conn)

    def close(self) -> None:
        """Finish the calls in flight, then close every connection."""
        self._writer.shutdown(wait=True)
        if self._readers is not self._writer:
            self._readers.shutdown(wait=True)
        self._connections.close_all()

    def _now(self) -> int:
        return int(self._clock())

    def _expires(self) -> int:
        return self._now() + self._retention

    def _purge_now(self, conn: sqlite3.Connection) -> int:
        """Delete expired rows, a batch per transaction; returns how many went."""
        now = self._now()
        removed = 0
        for table in _TABLES:
            while True:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    cursor = conn.execute(
                        f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} "
                        "WHERE expires_at <= ? LIMIT ?)",
                        (now, _PURGE_BATCH),
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                removed += cursor.rowcount
                if cursor.rowcount < _PURGE_BATCH:
                    break
        if self._purge_interval is not None:
            self._next_purge = time.monotonic() + self._purge_interval
        return removed

    async def purge_expired(self) -> int:
        """Delete every expired row now (it also happens on its own, at most every
        ``purge_interval`` seconds, after a write); returns how many rows went."""
        return await self._run(self._writer, "purge_expired", self._purge_now)

    # Running calls on the store's threads

    async def _run(
        self,
        executor: ThreadPoolExecutor,
        op: str,
        fn: Callable[..., T],
        *args: Any,
    ) -> T:
        read_only = executor is not self._writer and self._read_only

        def call() -> T:
            conn = self._connections.get(read_only=read_only)
            try:
                return fn(conn, *args)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite failed during {op}: {type(exc).__name__}") from exc

        return await asyncio.get_running_loop().run_in_executor(executor, call)

    async def _read(self, op: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` in one read transaction (one consistent snapshot)."""

        def snapshot(conn: sqlite3.Connection, *inner: Any) -> T:
            conn.execute("BEGIN")
            try:
                return fn(conn, *inner)
            finally:
                conn.execute("COMMIT")

        return await self._run(self._readers, op, snapshot, *args)

    async def _write(self, op: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` in one ``BEGIN IMMEDIATE`` transaction, committed when it returns
        and rolled back when it raises."""

        def transaction(conn: sqlite3.Connection, *inner: Any) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn, *inner)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if time.monotonic() >= self._next_purge:
                try:
                    self._purge_now(conn)
                except sqlite3.Error:
                    _log.warning("could not purge expired rows; will retry", exc_info=True)
            return result

        return await self._run(self._writer, op, transaction, *args)

    # Stored responses

    async def put_response(self, record: StoredResponse) -> None:
        await self._write("put_response", self._put_response, record)

    def _put_response(self, conn: sqlite3.Connection, record: StoredResponse) -> None:
        created = record.response.get("created_at")
        created = int(created) if isinstance(created, int | float) else self._now()
        expires = record.expires_at or created + self._retention
        body, enc = _blob({"response": record.response, "input_items": record.input_items})
        chain = record.chain
        chain_blob = json.dumps(chain[:-1]).encode() if len(chain) > 1 else None
        conn.execute(
            "INSERT OR REPLACE INTO responses (tenant, id, created_at, expires_at, body, enc, "
            "depth, prev, digest, chain, conversation_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                record.tenant,
                record.id,
                created,
                expires,
                body,
                enc,
                len(chain),
                chain[-1] if chain else None,
                chain_digest(chain),
                chain_blob,
                record.conversation_id,
            ),
        )
        # The item index (item_reference): the latest stored occurrence of an id wins.
        by_id = {
            str(i["id"]): i
            for i in [*record.input_items, *record.output]
            if isinstance(i.get("id"), str) and i.get("id")
        }
        conn.executemany(
            "INSERT OR REPLACE INTO response_items (tenant, item_id, response_id, expires_at, "
            "body, enc) VALUES (?,?,?,?,?,?)",
            [
                (record.tenant, item_id, record.id, expires, *_blob(item))
                for item_id, item in by_id.items()
            ],
        )

    async def get_response(self, tenant: str, response_id: str) -> StoredResponse | None:
        found = await self._read("get_response", self._get_responses, tenant, [response_id], True)
        return found[0] if found else None

    async def get_responses(self, tenant: str, response_ids: list[str]) -> list[StoredResponse]:
        if not response_ids:
            return []
        return await self._read("get_responses", self._get_responses, tenant, response_ids, False)

    def _get_responses(
        self, conn: sqlite3.Connection, tenant: str, ids: list[str], with_chains: bool
    ) -> list[StoredResponse]:
        wanted = list(dict.fromkeys(ids))
        now = self._now()
        rows: dict[str, tuple[Any, ...]] = {}
        for part in _groups(wanted, _IN_CLAUSE):
            marks = ",".join("?" * len(part))
            columns = "id, expires_at, body, enc, depth, prev, digest, conversation_id"
            if with_chains:
                columns += ", chain"
            for row in conn.execute(
                f"SELECT {columns} FROM responses WHERE tenant = ? AND id IN ({marks}) "
                "AND expires_at > ?",
                (tenant, *part, now),
            ):
                rows[row[0]] = row
        chains = _stored_chains(rows) if with_chains else _derive_chains(rows)
        missing = [i for i in rows if i not in chains]
        for part in _groups(missing, _IN_CLAUSE):
            marks = ",".join("?" * len(part))
            partial = {
                row[0]: (*rows[row[0]], row[1])
                for row in conn.execute(
                    f"SELECT id, chain FROM responses WHERE tenant = ? AND id IN ({marks})",
                    (tenant, *part),
                )
                if row[0] in rows
            }
            chains.update(_stored_chains(partial))
        records = {
            rid: StoredResponse(
                tenant=tenant,
                id=rid,
                **_decoded_body(row[2], row[3]),
                chain=chains[rid],
                conversation_id=row[7],
                expires_at=int(row[1]),
            )
            for rid, row in rows.items()
            if rid in chains
        }
        return [records[i] for i in ids if i in records]

    async def get_items(self, tenant: str, item_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Stored items by id (``item_reference``): one read of the item index by primary key."""
        wanted = list(dict.fromkeys(item_ids))
        if not wanted:
            return {}
        return await self._read("get_items", self._get_items, tenant, wanted)

    def _get_items(
        self, conn: sqlite3.Connection, tenant: str, wanted: list[str]
    ) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for part in _groups(wanted, _IN_CLAUSE):
            marks = ",".join("?" * len(part))
            for item_id, body, enc in conn.execute(
                "SELECT item_id, body, enc FROM response_items "
                f"WHERE tenant = ? AND item_id IN ({marks}) AND expires_at > ?",
                (tenant, *part, self._now()),
            ):
                found[item_id] = _value(body, enc)
        return {i: found[i] for i in wanted if i in found}

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        """Delete the record, its item index entries and every background row of the response,
        in one transaction."""
        return await self._write("delete_response", self._delete_response, tenant, response_id)

    def _delete_response(self, conn: sqlite3.Connection, tenant: str, response_id: str) -> bool:
        key = (tenant, response_id)
        row = conn.execute(
            "SELECT expires_at FROM responses WHERE tenant = ? AND id = ?", key
        ).fetchone()
        conn.execute("DELETE FROM responses WHERE tenant = ? AND id = ?", key)
        # Entries a later response re-used point at that one, and stay.
        conn.execute("DELETE FROM response_items WHERE tenant = ? AND response_id = ?", key)
        for table in _BACKGROUND_TABLES:
            conn.execute(
                f"DELETE FROM {table} WHERE tenant = ? AND response_id = ?", (tenant, response_id)
            )
        _forget_content(conn, tenant, [response_id])
        return row is not None and int(row[0]) > self._now()

    # Conversations

    async def create_conversation(
        self, conversation: Conversation, items: list[dict[str, Any]]
    ) -> None:
        encoded = [(_item_id(item), *_blob(item)) for item in items]
        await self._write("create_conversation", self._create_conversation, conversation, encoded)

    def _create_conversation(
        self,
        conn: sqlite3.Connection,
        conversation: Conversation,
        encoded: list[tuple[str | None, bytes, str]],
    ) -> None:
        key = (conversation.tenant, conversation.id)
        existing = conn.execute(
            "SELECT expires_at FROM conversations WHERE tenant = ? AND id = ?", key
        ).fetchone()
        if existing is not None:
            if int(existing[0]) > self._now():
                raise StoreError(f"conversation {conversation.id} already exists")
            _delete_conversation_rows(conn, *key)
        expires = conversation.expires_at or conversation.created_at + self._retention
        conn.execute(
            "INSERT INTO conversations (tenant, id, created_at, expires_at, metadata, next_seq) "
            "VALUES (?,?,?,?,?,?)",
            (*key, conversation.created_at, expires, json.dumps(conversation.metadata), 0),
        )
        _insert_items(conn, *key, 0, expires, encoded)

    async def get_conversation(self, tenant: str, conversation_id: str) -> Conversation | None:
        return await self._read("get_conversation", self._conversation, tenant, conversation_id)

    def _conversation(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str
    ) -> Conversation | None:
        row = conn.execute(
            "SELECT created_at, expires_at, metadata FROM conversations "
            "WHERE tenant = ? AND id = ? AND expires_at > ?",
            (tenant, conversation_id, self._now()),
        ).fetchone()
        if row is None:
            return None
        return Conversation(
            tenant=tenant,
            id=conversation_id,
            created_at=int(row[0]),
            metadata=json.loads(row[2]),
            expires_at=int(row[1]),
        )

    async def update_conversation(
        self, tenant: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        return await self._write(
            "update_conversation", self._update_conversation, tenant, conversation_id, metadata
        )

    def _update_conversation(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        conn.execute(
            "UPDATE conversations SET metadata = ? WHERE tenant = ? AND id = ? AND expires_at > ?",
            (json.dumps(metadata), tenant, conversation_id, self._now()),
        )
        return self._conversation(conn, tenant, conversation_id)

    async def delete_conversation(self, tenant: str, conversation_id: str) -> bool:
        return await self._write(
            "delete_conversation", self._delete_conversation, tenant, conversation_id
        )

    def _delete_conversation(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str
    ) -> bool:
        turns = [
            str(row[0])
            for row in conn.execute(
                "SELECT once_key FROM conversation_once WHERE tenant = ? AND conversation_id = ?",
                (tenant, conversation_id),
            )
        ]
        expires = _delete_conversation_rows(conn, tenant, conversation_id)
        if expires is not None and turns:
            _forget_content(conn, tenant, turns)
        return expires is not None and expires > self._now()

    async def list_conversations(
        self, tenant: str, *, before: str | None = None, limit: int = 50
    ) -> ConversationPage:
        """One indexed range read by (created_at, id), newest first."""
        return await self._read(
            "list_conversations", self._list_conversations, tenant, before, limit
        )

    def _list_conversations(
        self, conn: sqlite3.Connection, tenant: str, before: str | None, limit: int
    ) -> ConversationPage:
        limit = max(1, limit)
        created, _, after_id = (before or "").partition("#")
        bound = (int(created), after_id) if created.isdigit() else (2**62, "")
        rows = conn.execute(
            "SELECT id, created_at, expires_at, metadata FROM conversations "
            "INDEXED BY conversations_by_time WHERE tenant = ? AND (created_at, id) < (?, ?) "
            "AND expires_at > ? ORDER BY created_at DESC, id DESC LIMIT ?",
            (tenant, *bound, self._now(), limit + 1),
        ).fetchall()
        more = len(rows) > limit
        found = [
            Conversation(
                tenant=tenant,
                id=row[0],
                created_at=int(row[1]),
                metadata=json.loads(row[3]),
                expires_at=int(row[2]),
            )
            for row in rows[:limit]
        ]
        cursor = f"{found[-1].created_at:010d}#{found[-1].id}" if more else None
        return ConversationPage(conversations=found, next_cursor=cursor)

    async def append_items(
        self,
        tenant: str,
        conversation_id: str,
        items: list[dict[str, Any]],
        *,
        once_key: str | None = None,
    ) -> None:
        """Append in one transaction; with ``once_key``, nothing happens when the marker
        ``(conversation, once_key)`` exists, else the items and the marker are inserted."""
        encoded = [(_item_id(item), *_blob(item)) for item in items]
        await self._write(
            "append_items", self._append_items, tenant, conversation_id, encoded, once_key
        )

    def _append_items(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        conversation_id: str,
        encoded: list[tuple[str | None, bytes, str]],
        once_key: str | None,
    ) -> None:
        row = conn.execute(
            "SELECT next_seq, expires_at FROM conversations "
            "WHERE tenant = ? AND id = ? AND expires_at > ?",
            (tenant, conversation_id, self._now()),
        ).fetchone()
        if row is None:
            raise LookupError(f"conversation {conversation_id} not found")
        if not encoded:
            return
        start, expires = int(row[0]), int(row[1])
        if once_key is not None:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO conversation_once (tenant, conversation_id, once_key, "
                "expires_at) VALUES (?,?,?,?)",
                (tenant, conversation_id, once_key, expires),
            )
            if cursor.rowcount == 0:  # appended already (the marker commits with the items)
                return
        _insert_items(conn, tenant, conversation_id, start, expires, encoded)

    async def list_items(
        self,
        tenant: str,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: Literal["asc", "desc"] = "desc",
    ) -> ItemPage:
        """A page of items; raises ``LookupError`` when the conversation or ``after`` is unknown."""
        return await self._read(
            "list_items", self._list_items, tenant, conversation_id, after, max(1, limit), order
        )

    def _list_items(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        conversation_id: str,
        after: str | None,
        limit: int,
        order: Literal["asc", "desc"],
    ) -> ItemPage:
        self._require_conversation(conn, tenant, conversation_id)
        forward = order == "asc"
        bound = -1 if forward else MAX_SEQUENCE * 1000
        if after is not None:
            found = _latest_seq(conn, tenant, conversation_id, after)
            if found is None:
                raise LookupError(f"item {after} not found in conversation {conversation_id}")
            bound = found
        compare, direction = (">", "ASC") if forward else ("<", "DESC")
        rows = conn.execute(
            "SELECT body, enc FROM conversation_items WHERE tenant = ? AND conversation_id = ? "
            f"AND seq {compare} ? ORDER BY seq {direction} LIMIT ?",
            (tenant, conversation_id, bound, limit + 1),
        ).fetchall()
        items = [_value(body, enc) for body, enc in rows]
        return ItemPage(data=items[:limit], has_more=len(items) > limit)

    async def all_items(self, tenant: str, conversation_id: str) -> list[dict[str, Any]]:
        """Every item, oldest first; raises ``LookupError`` when the conversation is unknown."""
        return await self._read("all_items", self._all_items, tenant, conversation_id)

    def _all_items(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str
    ) -> list[dict[str, Any]]:
        self._require_conversation(conn, tenant, conversation_id)
        rows = conn.execute(
            "SELECT body, enc FROM conversation_items WHERE tenant = ? AND conversation_id = ? "
            "ORDER BY seq",
            (tenant, conversation_id),
        )
        return [_value(body, enc) for body, enc in rows]

    async def get_item(
        self, tenant: str, conversation_id: str, item_id: str
    ) -> dict[str, Any] | None:
        return await self._read("get_item", self._get_item, tenant, conversation_id, item_id)

    def _get_item(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str, item_id: str
    ) -> dict[str, Any] | None:
        if self._conversation(conn, tenant, conversation_id) is None:
            return None
        row = conn.execute(
            "SELECT body, enc FROM conversation_items WHERE tenant = ? AND conversation_id = ? "
            "AND item_id = ? ORDER BY seq DESC LIMIT 1",
            (tenant, conversation_id, item_id),
        ).fetchone()
        return None if row is None else dict(_value(row[0], row[1]))

    async def delete_item(self, tenant: str, conversation_id: str, item_id: str) -> bool:
        return await self._write("delete_item", self._delete_item, tenant, conversation_id, item_id)

    def _delete_item(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str, item_id: str
    ) -> bool:
        if self._conversation(conn, tenant, conversation_id) is None:
            return False
        seq = _latest_seq(conn, tenant, conversation_id, item_id)
        if seq is None:
            return False
        conn.execute(
            "DELETE FROM conversation_items WHERE tenant = ? AND conversation_id = ? AND seq = ?",
            (tenant, conversation_id, seq),
        )
        return True

    def _require_conversation(
        self, conn: sqlite3.Connection, tenant: str, conversation_id: str
    ) -> None:
        if self._conversation(conn, tenant, conversation_id) is None:
            raise LookupError(f"conversation {conversation_id} not found")

    # Background responses: checkpoint

    async def put_checkpoint(self, checkpoint: Checkpoint, *, expected_version: int | None) -> None:
        """Raises ``CheckpointConflict`` when fenced out, ``ValueError`` when
        ``checkpoint.version`` is not ``expected_version + 1`` (0 for the first write)."""
        _fencing_version(checkpoint, expected_version)
        await self._write("put_checkpoint", self._put_checkpoint, checkpoint, expected_version)

    def _put_checkpoint(
        self, conn: sqlite3.Connection, checkpoint: Checkpoint, expected_version: int | None
    ) -> None:
        key = (checkpoint.tenant, checkpoint.response_id)
        row = conn.execute(
            "SELECT version, cancel FROM checkpoints "
            "WHERE tenant = ? AND response_id = ? AND expires_at > ?",
            (*key, self._now()),
        ).fetchone()
        if expected_version is None:
            allowed = row is None
        else:
            allowed = row is not None and int(row[0]) == expected_version and not row[1]
        if not allowed:
            raise CheckpointConflict(
                f"checkpoint of {checkpoint.response_id} was advanced or cancelled"
            )
        body, enc = _blob({"state": checkpoint.state, "run": checkpoint.run})
        expires = checkpoint.expires_at or self._expires()
        conn.execute(
            "INSERT OR REPLACE INTO checkpoints (tenant, response_id, version, seq, cancel, "
            "expires_at, body, enc) VALUES (?,?,?,?,0,?,?,?)",
            (*key, checkpoint.version, checkpoint.seq, expires, body, enc),
        )
        if expected_version is None:  # a new run: its creator starts it (run leases)
            _sqlite_leases.created(conn, *key, self._clock(), expires)

    async def get_checkpoint(self, tenant: str, response_id: str) -> Checkpoint | None:
        return await self._read("get_checkpoint", self._get_checkpoint, tenant, response_id)

    def _get_checkpoint(
        self, conn: sqlite3.Connection, tenant: str, response_id: str
    ) -> Checkpoint | None:
        row = conn.execute(
            "SELECT version, seq, cancel, expires_at, body, enc FROM checkpoints "
            "WHERE tenant = ? AND response_id = ? AND expires_at > ?",
            (tenant, response_id, self._now()),
        ).fetchone()
        if row is None:
            return None
        data = _value(row[4], row[5])
        return Checkpoint(
            tenant=tenant,
            response_id=response_id,
            version=int(row[0]),
            seq=int(row[1]),
            state=data["state"],
            run=data["run"],
            cancel_requested=bool(row[2]),
            expires_at=int(row[3]),
        )

    async def request_cancel(self, tenant: str, response_id: str) -> bool:
        return await self._write("request_cancel", self._request_cancel, tenant, response_id)

    def _request_cancel(self, conn: sqlite3.Connection, tenant: str, response_id: str) -> bool:
        cursor = conn.execute(
            "UPDATE checkpoints SET cancel = 1 "
            "WHERE tenant = ? AND response_id = ? AND expires_at > ?",
            (tenant, response_id, self._now()),
        )
        return cursor.rowcount > 0

    async def cancel_requested(self, tenant: str, response_id: str) -> bool:
        return await self._read("cancel_requested", self._cancel_requested, tenant, response_id)

    def _cancel_requested(self, conn: sqlite3.Connection, tenant: str, response_id: str) -> bool:
        row = conn.execute(
            "SELECT cancel FROM checkpoints "
            "WHERE tenant = ? AND response_id = ? AND expires_at > ?",
            (tenant, response_id, self._now()),
        ).fetchone()
        return row is not None and bool(row[0])

    # Background responses: run leases (several processes on one file)

    async def claim_run(self, tenant: str, response_id: str, owner: str, seconds: float) -> bool:
        now = self._clock()
        return await self._write(
            "claim_run",
            _sqlite_leases.claim,
            tenant,
            response_id,
            owner,
            now,
            now + seconds,
            self._expires(),
        )

    async def renew_runs(self, owner: str, seconds: float) -> int:
        return await self._write("renew_runs", _sqlite_leases.renew, owner, self._clock() + seconds)

    async def release_run(self, tenant: str, response_id: str, owner: str) -> None:
        await self._write("release_run", _sqlite_leases.release, tenant, response_id, owner)

    async def orphaned_runs(self, limit: int) -> list[tuple[str, str]]:
        return await self._read("orphaned_runs", _sqlite_leases.orphaned, self._clock(), limit)

    # Background responses: event log

    async def append_events(
        self, tenant: str, response_id: str, first_seq: int, frames: list[str]
    ) -> None:
        if not frames:
            return
        last = first_seq + len(frames) - 1
        if first_seq < 0 or last > MAX_SEQUENCE:
            raise ValueError(f"sequence numbers must be within 0..{MAX_SEQUENCE}")
        await self._write(
            "append_events", self._append_events, tenant, response_id, first_seq, frames
        )

    def _append_events(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        response_id: str,
        first_seq: int,
        frames: list[str],
    ) -> None:
        body, enc = _blob(frames)
        conn.execute(
            "INSERT OR REPLACE INTO events (tenant, response_id, last_seq, first_seq, "
            "expires_at, body, enc) VALUES (?,?,?,?,?,?,?)",
            (
                tenant,
                response_id,
                first_seq + len(frames) - 1,
                first_seq,
                self._expires(),
                body,
                enc,
            ),
        )

    async def read_events(self, tenant: str, response_id: str, after: int) -> EventRead:
        return await self._read(
            "read_events", self._read_events, tenant, response_id, max(after, -1)
        )

    def _read_events(
        self, conn: sqlite3.Connection, tenant: str, response_id: str, after: int
    ) -> EventRead:
        now = self._now()
        terminal = self._terminal(conn, tenant, response_id)
        frames: dict[int, str] = {}
        for first, body, enc in conn.execute(
            "SELECT first_seq, body, enc FROM events WHERE tenant = ? AND response_id = ? "
            "AND last_seq > ? AND expires_at > ? ORDER BY last_seq",
            (tenant, response_id, after, now),
        ):
            for offset, frame in enumerate(_value(body, enc)):
                frames[int(first) + offset] = frame
        end = terminal.sequence_number if terminal is not None else MAX_SEQUENCE + 1
        events = [(seq, frames[seq]) for seq in sorted(frames) if after < seq < end]
        return EventRead(events=events, terminal=terminal)

    async def last_event_seq(self, tenant: str, response_id: str) -> int:
        return await self._read("last_event_seq", self._last_event_seq, tenant, response_id)

    def _last_event_seq(self, conn: sqlite3.Connection, tenant: str, response_id: str) -> int:
        row = conn.execute(
            "SELECT last_seq, expires_at FROM events WHERE tenant = ? AND response_id = ? "
            "ORDER BY last_seq DESC LIMIT 1",
            (tenant, response_id),
        ).fetchone()
        # As the DynamoDB store: batches are written in sequence order, so when the highest has
        # expired every batch below it has too.
        if row is None or int(row[1]) <= self._now():
            return -1
        return int(row[0])

    async def truncate_events(self, tenant: str, response_id: str, from_seq: int) -> None:
        from_seq = max(from_seq, 0)
        if from_seq > MAX_SEQUENCE:
            return
        await self._write("truncate_events", self._truncate_events, tenant, response_id, from_seq)

    def _truncate_events(
        self, conn: sqlite3.Connection, tenant: str, response_id: str, from_seq: int
    ) -> None:
        conn.execute(
            "DELETE FROM events WHERE tenant = ? AND response_id = ? AND last_seq >= ?",
            (tenant, response_id, from_seq),
        )

    # Background responses: terminal

    async def claim_terminal(
        self, tenant: str, response_id: str, terminal: Terminal
    ) -> Terminal | None:
        return await self._write(
            "claim_terminal", self._claim_terminal, tenant, response_id, terminal
        )

    def _claim_terminal(
        self, conn: sqlite3.Connection, tenant: str, response_id: str, terminal: Terminal
    ) -> Terminal | None:
        winner = self._terminal(conn, tenant, response_id)
        if winner is not None:
            return winner
        body, enc = _blob({"frame": terminal.frame, "response": terminal.response})
        conn.execute(
            "INSERT OR REPLACE INTO terminals (tenant, response_id, seq, expires_at, body, enc) "
            "VALUES (?,?,?,?,?,?)",
            (tenant, response_id, terminal.sequence_number, self._expires(), body, enc),
        )
        return None

    async def get_terminal(self, tenant: str, response_id: str) -> Terminal | None:
        return await self._read("get_terminal", self._terminal, tenant, response_id)

    def _terminal(self, conn: sqlite3.Connection, tenant: str, response_id: str) -> Terminal | None:
        row = conn.execute(
            "SELECT seq, body, enc FROM terminals "
            "WHERE tenant = ? AND response_id = ? AND expires_at > ?",
            (tenant, response_id, self._now()),
        ).fetchone()
        if row is None:
            return None
        data = _value(row[1], row[2])
        return Terminal(int(row[0]), data["frame"], data["response"])

    # Background responses: tool-call journal

    async def journal_start(
        self, tenant: str, response_id: str, call_id: str
    ) -> dict[str, Any] | None:
        return await self._write("journal_start", self._journal_start, tenant, response_id, call_id)

    def _journal_start(
        self, conn: sqlite3.Connection, tenant: str, response_id: str, call_id: str
    ) -> dict[str, Any] | None:
        row = conn.execute(
            "SELECT state, body, enc FROM journal WHERE tenant = ? AND response_id = ? "
            "AND call_id = ? AND expires_at > ?",
            (tenant, response_id, call_id, self._now()),
        ).fetchone()
        if row is not None:
            if row[0] != "finished":
                return {"state": str(row[0])}
            return {"state": "finished", "outcome": _value(row[1], row[2])}
        conn.execute(
            "INSERT OR REPLACE INTO journal (tenant, response_id, call_id, state, expires_at) "
            "VALUES (?,?,?,'started',?)",
            (tenant, response_id, call_id, self._expires()),
        )
        return None

    async def journal_finish(
        self, tenant: str, response_id: str, call_id: str, outcome: dict[str, Any]
    ) -> None:
        await self._write(
            "journal_finish", self._journal_finish, tenant, response_id, call_id, outcome
        )

    def _journal_finish(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        response_id: str,
        call_id: str,
        outcome: dict[str, Any],
    ) -> None:
        body, enc = _blob(outcome)
        conn.execute(
            "INSERT OR REPLACE INTO journal (tenant, response_id, call_id, state, expires_at, "
            "body, enc) VALUES (?,?,?,'finished',?,?,?)",
            (tenant, response_id, call_id, self._expires(), body, enc),
        )

    # Usage ledger and budgets

    async def record_usage(self, entry: UsageEntry) -> bool:
        """One transaction: insert the response's entry (the idempotency marker) if absent,
        and only then add to its hour row and its tenant's day and month totals."""
        data = _entry_json(entry)
        if entry.content is not None:  # logged content: in the entry's (compressed) body
            data["content"] = entry.content
        body, enc = _blob(data)
        return await self._write("record_usage", self._record_usage, entry, body, enc)

    def _record_usage(
        self, conn: sqlite3.Connection, entry: UsageEntry, body: bytes, enc: str
    ) -> bool:
        now = self._now()
        # An expired marker is gone (as a read says): replace it and count again.
        conn.execute(
            "DELETE FROM usage_entries WHERE tenant = ? AND response_id = ? AND expires_at <= ?",
            (entry.tenant, entry.response_id, now),
        )
        cursor = conn.execute(
            "INSERT OR IGNORE INTO usage_entries "
            "(tenant, response_id, expires_at, body, enc, log_key) VALUES (?,?,?,?,?,?)",
            (entry.tenant, entry.response_id, now + self._retention, body, enc, _log_sk(entry)),
        )
        if cursor.rowcount == 0:
            return False
        counts = entry.counts
        keep = now + LEDGER_RETENTION_DAYS * _DAY
        hour_key = (
            entry.ended_at - entry.ended_at % 3600,
            entry.tenant,
            entry.model,
            entry.api_key_id,
        )
        columns = [name for _, name in _COUNTERS]
        row = conn.execute(
            f"SELECT {', '.join(columns)}, cost, expires_at FROM usage_hours "
            "WHERE hour_start = ? AND tenant = ? AND model = ? AND api_key = ?",
            hour_key,
        ).fetchone()
        live = row is not None and int(row[-1]) > now
        added = [
            (int(row[i]) if live else 0) + getattr(counts, name) for i, name in enumerate(columns)
        ]
        cost = (Decimal(row[len(columns)]) if live else Decimal(0)) + counts.cost_usd
        conn.execute(
            f"INSERT OR REPLACE INTO usage_hours (hour_start, tenant, model, api_key, "
            f"{', '.join(columns)}, cost, expires_at) "
            f"VALUES ({','.join('?' * (len(columns) + 6))})",
            (*hour_key, *added, _decimal_text(cost), keep),
        )
        moment = datetime.fromtimestamp(entry.ended_at, UTC)
        for period in (f"D#{moment:%Y-%m-%d}", f"M#{moment:%Y-%m}"):
            total = conn.execute(
                "SELECT tokens, cost, expires_at FROM usage_totals WHERE tenant = ? AND period = ?",
                (entry.tenant, period),
            ).fetchone()
            alive = total is not None and int(total[2]) > now
            tokens = (int(total[0]) if alive else 0) + counts.total_tokens
            spent = (Decimal(total[1]) if alive else Decimal(0)) + counts.cost_usd
            conn.execute(
                "INSERT OR REPLACE INTO usage_totals (tenant, period, tokens, cost, expires_at) "
                "VALUES (?,?,?,?,?)",
                (entry.tenant, period, tokens, _decimal_text(spent), keep),
            )
        self._add_metrics(conn, entry, now)
        return True

    def _add_metrics(self, conn: sqlite3.Connection, entry: UsageEntry, now: int) -> None:
        widths = {
            HOUR_WIDTH: now + LEDGER_RETENTION_DAYS * _DAY,
            FINE_WIDTH: now + FINE_RETENTION_DAYS * _DAY,
        }
        _sqlite_metrics.add_rows(conn, entry, entry_stats(entry), widths, now)

    async def read_metrics(self, start: int, end: int, *, width: int) -> list[UsageBucket]:
        """One indexed range read of ``usage_metrics``."""
        if end <= start:
            return []
        first = start - start % _DAY
        most = MAX_USAGE_DAYS if width == HOUR_WIDTH else MAX_FINE_DAYS
        if -(-(end - first) // _DAY) > most:
            raise ValueError(f"a read of these rows covers at most {most} days")
        return await self._read(
            "read_metrics", _sqlite_metrics.read_rows, start, end, width, self._now()
        )

    async def read_usage(self, start: int, end: int) -> list[UsageBucket]:
        """Raises ``ValueError`` when the range covers more than ``MAX_USAGE_DAYS`` UTC days."""
        if end <= start:
            return []
        first = start - start % _DAY
        if -(-(end - first) // _DAY) > MAX_USAGE_DAYS:
            raise ValueError(f"a usage read covers at most {MAX_USAGE_DAYS} days")
        return await self._read("read_usage", self._read_usage, start, end)

    def _read_usage(self, conn: sqlite3.Connection, start: int, end: int) -> list[UsageBucket]:
        columns = [name for _, name in _COUNTERS]
        buckets: list[UsageBucket] = []
        for row in conn.execute(
            f"SELECT hour_start, tenant, model, api_key, {', '.join(columns)}, cost "
            "FROM usage_hours WHERE hour_start >= ? AND hour_start < ? AND expires_at > ?",
            (start, end, self._now()),
        ):
            counts = UsageCounts(cost_usd=Decimal(row[-1]))
            for offset, name in enumerate(columns, 4):
                setattr(counts, name, int(row[offset]))
            buckets.append(
                UsageBucket(
                    hour_start=int(row[0]),
                    tenant=row[1],
                    model=row[2],
                    api_key_id=row[3],
                    counts=counts,
                )
            )
        return buckets

    async def get_usage_entry(self, tenant: str, response_id: str) -> UsageEntry | None:
        return await self._read("get_usage_entry", self._usage_entry, tenant, response_id)

    def _usage_entry(
        self, conn: sqlite3.Connection, tenant: str, response_id: str
    ) -> UsageEntry | None:
        row = conn.execute(
            "SELECT body, enc FROM usage_entries "
            "WHERE tenant = ? AND response_id = ? AND expires_at > ?",
            (tenant, response_id, self._now()),
        ).fetchone()
        return None if row is None else _entry_of(_value(row[0], row[1]))

    async def log_request(self, entry: UsageEntry) -> None:
        """One transaction: the entry, and its health counters in its metrics rows."""
        body, enc = _blob(_entry_json(entry))

        def log(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR REPLACE INTO usage_entries "
                "(tenant, response_id, expires_at, body, enc, log_key) VALUES (?,?,?,?,?,?)",
                (entry.tenant, entry.response_id, self._expires(), body, enc, _log_sk(entry)),
            )
            self._add_metrics(conn, entry, self._now())

        await self._write("log_request", log)

    async def get_usage_entries(self, tenant: str, response_ids: list[str]) -> list[UsageEntry]:
        """``SELECT ... response_id IN (...)`` by primary key (500 ids per statement)."""
        return await self._read(
            "get_usage_entries", self._usage_entries, tenant, list(dict.fromkeys(response_ids))
        )

    def _usage_entries(
        self, conn: sqlite3.Connection, tenant: str, response_ids: list[str]
    ) -> list[UsageEntry]:
        found: dict[str, UsageEntry] = {}
        for group in _groups(response_ids, _IN_CLAUSE):
            marks = ",".join("?" * len(group))
            for rid, body, enc in conn.execute(
                f"SELECT response_id, body, enc FROM usage_entries WHERE tenant = ? "
                f"AND response_id IN ({marks}) AND expires_at > ?",
                (tenant, *group, self._now()),
            ):
                entry = _entry_of(_value(body, enc))
                entry.content = None
                found[rid] = entry
        return [found[rid] for rid in response_ids if rid in found]

    async def list_requests(
        self,
        tenant: str,
        *,
        before: str | None = None,
        limit: int = 50,
        after: str | None = None,
        query: RequestQuery | None = None,
    ) -> RequestPage:
        """Indexed range reads of the tenant's entries by ``log_key``, newest first (one,
        unfiltered; with filters, until ``limit`` matches or ``REQUEST_SCAN`` examined)."""
        return await self._read(
            "list_requests", self._list_requests, tenant, before, limit, after, query
        )

    def _list_requests(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        before: str | None,
        limit: int,
        after: str | None,
        query: RequestQuery | None,
    ) -> RequestPage:
        query = query or RequestQuery()
        low, high = query.bounds(before, after)
        collector = PageCollector(query, limit, low, high)
        while not collector.done:
            batch = collector.batch
            rows = conn.execute(
                "SELECT log_key, body, enc FROM usage_entries INDEXED BY usage_entries_log "
                "WHERE tenant = ? AND log_key IS NOT NULL AND log_key > ? AND log_key < ? "
                "AND expires_at > ? ORDER BY log_key DESC LIMIT ?",
                (tenant, low, high, self._now(), batch),
            ).fetchall()
            for log_key, body, enc in rows:
                entry = _entry_of(_value(body, enc))
                high = log_key
                done = collector.offer(log_key, entry)  # a text search matches the content
                entry.content = None  # one record's read returns it, never a page
                if done:
                    break
            if len(rows) < batch:
                break
        return collector.page()

    def _keyset_page(
        self,
        conn: sqlite3.Connection,
        sql: str,
        tenant: str,
        before: str | None,
        limit: int,
    ) -> tuple[list[Any], str | None]:
        """A newest-first page of ``sql`` (parameters: tenant, key bound, now, row count) keyed by
        its first column: at most ``limit`` rows, and the next page's cursor (None on the last)."""
        limit = max(1, limit)
        rows = conn.execute(
            sql, (tenant, before if before is not None else "~", self._now(), limit + 1)
        ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return rows, (rows[-1][0] if more else None)

    async def get_spend(self, tenant: str, now: int) -> TenantSpend:
        return await self._read("get_spend", self._spend, tenant, now)

    def _spend(self, conn: sqlite3.Connection, tenant: str, now: int) -> TenantSpend:
        moment = datetime.fromtimestamp(now, UTC)
        totals: list[tuple[int, Decimal]] = []
        for period in (f"D#{moment:%Y-%m-%d}", f"M#{moment:%Y-%m}"):
            row = conn.execute(
                "SELECT tokens, cost FROM usage_totals "
                "WHERE tenant = ? AND period = ? AND expires_at > ?",
                (tenant, period, self._now()),
            ).fetchone()
            totals.append((0, Decimal(0)) if row is None else (int(row[0]), Decimal(row[1])))
        (day_tokens, day_cost), (month_tokens, month_cost) = totals
        return TenantSpend(
            day_tokens=day_tokens,
            day_cost_usd=day_cost,
            month_tokens=month_tokens,
            month_cost_usd=month_cost,
            limits=self._budget(conn, tenant),
        )

    async def put_budget(self, tenant: str, limits: BudgetLimits | None) -> None:
        await self._write("put_budget", self._put_budget, tenant, limits)

    def _put_budget(
        self, conn: sqlite3.Connection, tenant: str, limits: BudgetLimits | None
    ) -> None:
        if limits is None or limits.empty:
            conn.execute("DELETE FROM budgets WHERE tenant = ?", (tenant,))
            return
        values = {
            name: str(getattr(limits, name))
            for _, name in _LIMITS
            if getattr(limits, name) is not None
        }
        conn.execute(
            "INSERT OR REPLACE INTO budgets (tenant, limits) VALUES (?, ?)",
            (tenant, json.dumps(values)),
        )

    async def get_budget(self, tenant: str) -> BudgetLimits | None:
        return await self._read("get_budget", self._budget, tenant)

    # Prompt templates (every call goes through the writer: its table is created on first use)

    async def put_prompt_version(
        self, prompt_id: str, version: str, body: dict[str, Any], *, make_default: bool
    ) -> None:
        await self._write(
            "put_prompt_version",
            _sqlite_prompts.put_prompt_version,
            prompt_id,
            version,
            body,
            make_default,
        )

    async def get_prompt(self, prompt_id: str) -> StoredPrompt | None:
        return await self._write("get_prompt", _sqlite_prompts.get_prompt, prompt_id)

    # Deployment health (routing): every call goes through the writer, so the tables it
    # creates on first use never meet a read-only connection.

    async def read_health(self, deployment_ids: list[str]) -> dict[str, DeploymentHealth]:
        return await self._write(
            "read_health", _sqlite_health.read_health, deployment_ids, self._clock()
        )

    async def record_failure(
        self,
        deployment_id: str,
        *,
        now: float,
        allowed_fails: int,
        window: float,
        cooldown: float,
    ) -> DeploymentHealth:
        return await self._write(
            "record_failure",
            _sqlite_health.record_failure,
            deployment_id,
            now,
            allowed_fails,
            window,
            cooldown,
        )

    async def claim_probe(self, deployment_id: str, *, now: float, lease: float) -> bool:
        return await self._write(
            "claim_probe", _sqlite_health.claim_probe, deployment_id, now, lease
        )

    async def clear_health(self, deployment_id: str) -> None:
        await self._write("clear_health", _sqlite_health.clear_health, deployment_id)

    async def count_call(
        self,
        deployment_id: str,
        *,
        minute: int,
        requests: int,
        tokens: int,
        rpm: int | None = None,
        tpm: int | None = None,
    ) -> bool:
        return await self._write(
            "count_call",
            _sqlite_health.count_call,
            deployment_id,
            minute,
            requests,
            tokens,
            rpm,
            tpm,
        )

    def _budget(self, conn: sqlite3.Connection, tenant: str) -> BudgetLimits | None:
        row = conn.execute("SELECT limits FROM budgets WHERE tenant = ?", (tenant,)).fetchone()
        if row is None:
            return None
        values: dict[str, Any] = {
            name: Decimal(text) if name.endswith("usd") else int(text)
            for name, text in json.loads(row[0]).items()
        }
        return BudgetLimits(**values)

    # Agent traces

    async def put_traces(
        self, tenant: str, traces: list[dict[str, Any]], spans: list[dict[str, Any]]
    ) -> None:
        """One transaction: each trace replaces its row (listed again as received now), each
        span its row."""
        await self._write("put_traces", self._put_traces, tenant, traces, spans)

    def _put_traces(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        traces: list[dict[str, Any]],
        spans: list[dict[str, Any]],
    ) -> None:
        from responses_gateway.store._traces import summary_of, trace_text

        expires = self._expires()
        received = int(self._clock() * 1000)
        for trace in traces:
            trace_id = str(trace["id"])
            body, enc = _blob(trace)
            conn.execute(
                "INSERT OR REPLACE INTO traces "
                "(tenant, trace_id, listed, expires_at, body, enc, summary) VALUES (?,?,?,?,?,?,?)",
                (
                    tenant,
                    trace_id,
                    f"{received:013d}#{trace_id}",
                    expires,
                    body,
                    enc,
                    json.dumps(summary_of(trace, received)),
                ),
            )
        for span in spans:
            body, enc = _blob(json.loads(trace_text(span)))
            conn.execute(
                "INSERT OR REPLACE INTO trace_spans "
                "(tenant, trace_id, span_id, expires_at, body, enc) VALUES (?,?,?,?,?,?)",
                (tenant, str(span["trace_id"]), str(span["id"]), expires, body, enc),
            )
        _sqlite_traces.add_tallies(conn, tenant, spans, expires, self._now())

    async def list_traces(
        self, tenant: str, *, before: str | None = None, limit: int = 50
    ) -> TracePage:
        """One indexed range read of the tenant's traces, most recently received first."""
        return await self._read("list_traces", self._list_traces, tenant, before, limit)

    def _list_traces(
        self, conn: sqlite3.Connection, tenant: str, before: str | None, limit: int
    ) -> TracePage:
        from responses_gateway.store._traces import with_tally

        rows, cursor = self._keyset_page(
            conn,
            "SELECT listed, summary FROM traces WHERE tenant = ? AND listed < ? "
            "AND expires_at > ? ORDER BY listed DESC LIMIT ?",
            tenant,
            before,
            limit,
        )
        summaries = [json.loads(summary) for _, summary in rows]
        found = _sqlite_traces.read_tallies(
            conn, tenant, [str(t["id"]) for t in summaries], self._now()
        )
        return TracePage(
            traces=[with_tally(t, found.get(str(t["id"]))) for t in summaries],
            next_cursor=cursor,
        )

    async def trace_of_response(self, tenant: str, response_id: str) -> str | None:
        return await self._read(
            "trace_of_response", _sqlite_traces.trace_of, tenant, response_id, self._now()
        )

    async def get_trace(
        self, tenant: str, trace_id: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        return await self._read("get_trace", self._get_trace, tenant, trace_id)

    def _get_trace(
        self, conn: sqlite3.Connection, tenant: str, trace_id: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        from responses_gateway.store._traces import span_order

        now = self._now()
        row = conn.execute(
            "SELECT body, enc FROM traces WHERE tenant = ? AND trace_id = ? AND expires_at > ?",
            (tenant, trace_id, now),
        ).fetchone()
        spans: list[dict[str, Any]] = [
            _value(body, enc)
            for body, enc in conn.execute(
                "SELECT body, enc FROM trace_spans "
                "WHERE tenant = ? AND trace_id = ? AND expires_at > ?",
                (tenant, trace_id, now),
            )
        ]
        spans.sort(key=span_order)
        return (None if row is None else _value(row[0], row[1])), spans


# Helpers (run on the store's threads)


def _decimal_text(value: Decimal) -> str:
    return format(value, "f")


def _groups(values: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    return (values[i : i + size] for i in range(0, len(values), size))


def _item_id(item: dict[str, Any]) -> str | None:
    return str(item["id"]) if item.get("id") else None


def _decoded_body(body: bytes, enc: str) -> dict[str, Any]:
    data = _value(body, enc)
    return {"response": data["response"], "input_items": data["input_items"]}


def _insert_items(
    conn: sqlite3.Connection,
    tenant: str,
    conversation_id: str,
    start: int,
    expires: int,
    encoded: list[tuple[str | None, bytes, str]],
) -> None:
    conn.executemany(
        "INSERT INTO conversation_items (tenant, conversation_id, seq, item_id, expires_at, "
        "body, enc) VALUES (?,?,?,?,?,?,?)",
        [
            (tenant, conversation_id, seq, item_id, expires, body, enc)
            for seq, (item_id, body, enc) in enumerate(encoded, start)
        ],
    )
    conn.execute(
        "UPDATE conversations SET next_seq = ? WHERE tenant = ? AND id = ?",
        (start + len(encoded), tenant, conversation_id),
    )


def _latest_seq(
    conn: sqlite3.Connection, tenant: str, conversation_id: str, item_id: str
) -> int | None:
    """The sequence number of the latest item with ``item_id`` (a repeated id means the last)."""
    row = conn.execute(
        "SELECT MAX(seq) FROM conversation_items "
        "WHERE tenant = ? AND conversation_id = ? AND item_id = ?",
        (tenant, conversation_id, item_id),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def _forget_content(conn: sqlite3.Connection, tenant: str, response_ids: list[str]) -> None:
    """Remove what was logged of these responses' items, in the caller's transaction: their
    request-log records' ``content`` (the records and their counters stay) and the content of
    the trace spans naming them."""
    for group in _groups(list(dict.fromkeys(response_ids)), _IN_CLAUSE):
        marks = ",".join("?" * len(group))
        rows = conn.execute(
            f"SELECT response_id, body, enc FROM usage_entries WHERE tenant = ? "
            f"AND response_id IN ({marks})",
            (tenant, *group),
        ).fetchall()
        for rid, body, enc in rows:
            data = _value(body, enc)
            if isinstance(data, dict) and data.pop("content", None) is not None:
                new_body, new_enc = _blob(data)
                conn.execute(
                    "UPDATE usage_entries SET body = ?, enc = ? "
                    "WHERE tenant = ? AND response_id = ?",
                    (new_body, new_enc, tenant, rid),
                )
        _sqlite_traces.forget_spans(conn, tenant, list(group))


def _delete_conversation_rows(
    conn: sqlite3.Connection, tenant: str, conversation_id: str
) -> int | None:
    """Delete a conversation and its items; returns its ``expires_at`` (None if there was none)."""
    key = (tenant, conversation_id)
    row = conn.execute(
        "SELECT expires_at FROM conversations WHERE tenant = ? AND id = ?", key
    ).fetchone()
    conn.execute("DELETE FROM conversations WHERE tenant = ? AND id = ?", key)
    for table in ("conversation_items", "conversation_once"):
        conn.execute(
            f"DELETE FROM {table} WHERE tenant = ? AND conversation_id = ?",
            (tenant, conversation_id),
        )
    return None if row is None else int(row[0])


def _stored_chains(rows: dict[str, tuple[Any, ...]]) -> dict[str, list[str]]:
    """Chains read from the ``chain`` column (the last value of each row)."""
    chains: dict[str, list[str]] = {}
    for rid, row in rows.items():
        depth, prev, stored = int(row[4]), row[5], row[-1]
        if depth == 0:
            chains[rid] = []
        elif depth == 1:
            chains[rid] = [prev]
        else:
            chains[rid] = [*json.loads(stored), prev]
    return chains


def _derive_chains(rows: dict[str, tuple[Any, ...]]) -> dict[str, list[str]]:
    """Chains known without reading the ``chain`` column: depth 0 and 1, and a record whose
    previous response is in the same batch with a known chain, checked by the digests (so a
    chain is only derived when it is exactly the one stored). Reading N ancestors thus reads
    O(N) bytes, not O(N^2)."""
    chains: dict[str, list[str]] = {}
    for rid, row in sorted(rows.items(), key=lambda kv: int(kv[1][4])):
        depth, prev, digest = int(row[4]), row[5], row[6]
        if depth == 0:
            chains[rid] = []
            continue
        if depth == 1:
            prefix, base = [], ""
        elif prev in chains:
            prefix, base = chains[prev], rows[prev][6]
        else:
            continue
        if _extend_digest(base, prev) == digest:
            chains[rid] = [*prefix, prev]
    return chains


def connect_for_inspection(path: str) -> sqlite3.Connection:
    """A plain connection to a store's file (tests and tools: counting rows, integrity checks)."""
    return sqlite3.connect(path, isolation_level=None, timeout=30.0)
