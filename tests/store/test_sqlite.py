"""What only the SQLite store has: its file (WAL, schema version, reopening), several stores on one
file, the purge of expired rows, its threads, and indexed access on every path. The interface
itself is tested against both stores by the other modules of this package."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.store import Conversation, StoredResponse, sqlite as sqlite_module
from responses_gateway.store.base import (
    BudgetLimits,
    Checkpoint,
    Terminal,
    UsageCounts,
    UsageEntry,
)
from responses_gateway.store.sqlite import (
    MEMORY,
    SCHEMA_VERSION,
    DatabaseVersionError,
    SqliteStore,
    connect_for_inspection,
)

from .conftest import START, FakeClock, stored_rows

DAY = 86_400
TENANT = "tenant-a"


def record(response_id: str, chain: list[str] | None = None, **extra: Any) -> StoredResponse:
    response = {
        "id": response_id,
        "object": "response",
        "created_at": int(START),
        "status": "completed",
        "output": [{"type": "message", "id": f"msg_{response_id}", "content": []}],
        **extra,
    }
    items = [{"type": "message", "id": f"in_{response_id}", "role": "user", "content": "hi"}]
    return StoredResponse(TENANT, response_id, response, items, chain=list(chain or []))


def conversation(cid: str = "conv_1") -> Conversation:
    return Conversation(tenant=TENANT, id=cid, created_at=int(START), metadata={"k": "v"})


def item(item_id: str) -> dict[str, Any]:
    return {"type": "message", "id": item_id, "role": "user", "content": item_id}


def checkpoint(version: int = 0, seq: int = 0) -> Checkpoint:
    return Checkpoint(TENANT, "resp_bg", version, seq, state={"s": version}, run={"r": 1})


def usage(response_id: str) -> UsageEntry:
    counts = UsageCounts(input_tokens=3, output_tokens=4, responses=1, cost_usd=Decimal("0.25"))
    return UsageEntry(TENANT, response_id, "m1", int(START), "completed", counts, api_key_id="k")


def pragma(path: Path, name: str) -> Any:
    conn = connect_for_inspection(str(path))
    try:
        return conn.execute(f"PRAGMA {name}").fetchone()[0]
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "gateway.db"


@pytest.fixture
def file_store(db: Path, clock: FakeClock) -> Any:
    stores: list[SqliteStore] = []

    def build(**options: Any) -> SqliteStore:
        options.setdefault("clock", clock)
        store = SqliteStore(db, **options)
        stores.append(store)
        return store

    yield build
    for store in stores:
        store.close()


def test_open_new_file_creates_it_in_wal_mode_with_schema_version(
    file_store: Any, db: Path
) -> None:
    file_store()

    assert db.is_file()
    assert pragma(db, "journal_mode") == "wal"
    assert pragma(db, "user_version") == SCHEMA_VERSION


async def test_reopen_same_file_reads_back_every_kind_of_record(file_store: Any, db: Path) -> None:
    first = file_store()
    await first.put_response(record("r1"))
    await first.put_response(record("r2", chain=["r1"]))
    await first.create_conversation(conversation(), [item("a")])
    await first.append_items(TENANT, "conv_1", [item("b")])
    await first.put_checkpoint(checkpoint(), expected_version=None)
    await first.append_events(TENANT, "resp_bg", 0, ["frame 0", "frame 1"])
    first.close()

    again = file_store()

    got = await again.get_responses(TENANT, ["r1", "r2"])
    assert [(r.id, r.chain, r.response) for r in got] == [
        ("r1", [], record("r1").response),
        ("r2", ["r1"], record("r2").response),
    ]
    assert [i["id"] for i in await again.all_items(TENANT, "conv_1")] == ["a", "b"]
    saved = await again.get_checkpoint(TENANT, "resp_bg")
    assert saved is not None and saved.state == {"s": 0}
    assert (await again.read_events(TENANT, "resp_bg", -1)).events == [
        (0, "frame 0"),
        (1, "frame 1"),
    ]


async def test_open_newer_schema_version_raises_clear_error(file_store: Any, db: Path) -> None:
    file_store().close()
    conn = connect_for_inspection(str(db))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()

    with pytest.raises(DatabaseVersionError) as caught:
        file_store()

    message = str(caught.value)
    assert str(db) in message and "newer responses-gateway" in message
    assert caught.value.status_code == 500


async def test_open_older_schema_version_without_migration_says_it_needs_migrating(
    file_store: Any, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file_store().close()
    monkeypatch.setattr(sqlite_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)

    with pytest.raises(DatabaseVersionError) as caught:
        file_store()

    message = str(caught.value)
    assert str(db) in message and "needs migrating" in message
    assert pragma(db, "user_version") == SCHEMA_VERSION  # the file is left as it was


async def test_open_older_schema_version_with_migration_upgrades_it(
    file_store: Any, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = file_store()
    await first.put_response(record("r1"))
    first.close()
    monkeypatch.setattr(sqlite_module, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setattr(
        sqlite_module,
        "_MIGRATIONS",
        {SCHEMA_VERSION: "ALTER TABLE responses ADD COLUMN note TEXT"},
    )

    again = file_store()

    assert pragma(db, "user_version") == SCHEMA_VERSION + 1
    assert await again.get_response(TENANT, "r1") is not None


async def test_open_version_1_file_migrates_it_to_the_ledger_and_keyed_appends(
    file_store: Any, db: Path
) -> None:
    db.parent.mkdir(parents=True)
    conn = connect_for_inspection(str(db))
    for statement in sqlite_module._SCHEMA.split(";"):  # the version 1 layout
        if statement.strip():
            conn.execute(statement)
    conn.execute(
        "INSERT INTO conversations (tenant, id, created_at, expires_at, metadata, next_seq) "
        "VALUES (?, 'conv_1', ?, ?, '{}', 0)",
        (TENANT, int(START), int(START) + DAY),
    )
    conn.execute("PRAGMA user_version = 1")
    conn.close()

    store = file_store()

    assert pragma(db, "user_version") == SCHEMA_VERSION
    await store.append_items(TENANT, "conv_1", [item("a")], once_key="resp_1")
    await store.append_items(TENANT, "conv_1", [item("a")], once_key="resp_1")
    assert [i["id"] for i in await store.all_items(TENANT, "conv_1")] == ["a"]
    assert await store.record_usage(usage("u1")) is True
    assert (await store.get_spend(TENANT, int(START))).day_tokens == 7


async def test_memory_store_keeps_state_for_its_lifetime(clock: FakeClock) -> None:
    store = SqliteStore(MEMORY, clock=clock)
    try:
        await store.put_response(record("r1"))
        await store.create_conversation(conversation(), [item("a")])

        got = await store.get_response(TENANT, "r1")
        assert got is not None and got.response == record("r1").response
        assert await store.get_item(TENANT, "conv_1", "a") == item("a")
    finally:
        store.close()


async def test_two_stores_on_one_file_racing_claims_and_appends_lose_nothing(
    file_store: Any,
) -> None:
    one, two = file_store(), file_store()
    await one.create_conversation(conversation(), [])
    ending = [Terminal(5, f"frame {n}", {"status": "completed", "n": n}) for n in range(8)]

    claims = await asyncio.gather(
        *(
            (one if n % 2 else two).claim_terminal(TENANT, "resp_bg", ending[n])
            for n in range(len(ending))
        )
    )
    await asyncio.gather(
        *(
            (one if n % 2 else two).append_items(
                TENANT, "conv_1", [item(f"x{n}_0"), item(f"x{n}_1")]
            )
            for n in range(20)
        )
    )

    assert claims.count(None) == 1
    winner = ending[claims.index(None)]
    assert await two.get_terminal(TENANT, "resp_bg") == winner
    ids = [i["id"] for i in await one.all_items(TENANT, "conv_1")]
    assert sorted(ids) == sorted(f"x{n}_{k}" for n in range(20) for k in range(2))
    for n in range(20):
        assert ids[ids.index(f"x{n}_0") + 1] == f"x{n}_1"


async def test_two_stores_on_one_file_racing_checkpoints_exactly_one_wins(
    file_store: Any,
) -> None:
    one, two = file_store(), file_store()
    await one.put_checkpoint(checkpoint(), expected_version=None)

    results = await asyncio.gather(
        *(
            store.put_checkpoint(checkpoint(1, seq), expected_version=0)
            for seq, store in enumerate([one, two, one, two])
        ),
        return_exceptions=True,
    )

    assert sum(r is None for r in results) == 1
    got = await two.get_checkpoint(TENANT, "resp_bg")
    assert got is not None and (got.version, got.seq) == (1, results.index(None))


async def test_purge_expired_deletes_rows_of_every_kind(file_store: Any, clock: FakeClock) -> None:
    store = file_store()
    await store.put_response(record("r1"))
    await store.create_conversation(conversation(), [item("a"), item("b")])
    await store.put_checkpoint(checkpoint(), expected_version=None)
    await store.append_events(TENANT, "resp_bg", 0, ["f"])
    await store.claim_terminal(TENANT, "resp_bg", Terminal(1, "end", {}))
    await store.journal_start(TENANT, "resp_bg", "call_1")
    # with the record's two item index entries and the checkpoint's run lease
    assert stored_rows(store, TENANT) == 11
    clock.now = START + 30 * DAY - 1
    assert await store.purge_expired() == 0

    clock.now = START + 30 * DAY

    assert await store.purge_expired() == 11
    assert stored_rows(store, TENANT) == 0


async def test_write_after_purge_interval_purges_expired_rows(
    file_store: Any, clock: FakeClock
) -> None:
    store = file_store(purge_interval=0.0)
    await store.put_response(record("old"))
    clock.now = START + 30 * DAY

    await store.put_response(record("new", created_at=int(clock.now)))

    assert stored_rows(store, TENANT) == 3  # the new record and its two item index entries
    assert await store.get_response(TENANT, "new") is not None


async def test_store_calls_run_off_the_event_loop_thread(
    file_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: set[str] = set()
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        threads.add(threading.current_thread().name)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(sqlite_module.sqlite3, "connect", connect)
    store = file_store()
    await asyncio.gather(*(store.put_response(record(f"r{n}")) for n in range(4)))
    await asyncio.gather(*(store.get_response(TENANT, f"r{n}") for n in range(4)))

    assert threads and threading.current_thread().name not in threads
    assert {name.split("_")[0] for name in threads} == {"sqlite-write", "sqlite-read"}


class Statements:
    """Every SQL statement the store's connections run (as SQLite expands it)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real_connect = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = real_connect(*args, **kwargs)
            conn.set_trace_callback(self.seen.append)
            return conn

        monkeypatch.setattr(sqlite_module.sqlite3, "connect", connect)


async def test_every_request_path_statement_uses_an_index_never_a_scan(
    file_store: Any, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = Statements()
    statements.install(monkeypatch)
    store = file_store()
    statements.seen.clear()
    await store.put_response(record("r1"))
    await store.put_response(record("r2", chain=["r1"]))
    await store.put_response(record("r3", chain=["r1", "r2"]))
    await store.get_response(TENANT, "r3")
    await store.get_response(TENANT, "missing")
    await store.get_responses(TENANT, ["r1", "r2", "r3"])
    await store.get_responses(TENANT, ["r3", "r2"])
    await store.get_items(TENANT, ["msg_r1", "in_r2", "missing"])
    await store.create_conversation(conversation(), [item("a"), item("b")])
    await store.append_items(TENANT, "conv_1", [item("c")])
    await store.get_conversation(TENANT, "conv_1")
    await store.update_conversation(TENANT, "conv_1", {"x": "y"})
    await store.list_items(TENANT, "conv_1", after="b", order="asc")
    await store.list_items(TENANT, "conv_1", after="b", order="desc")
    await store.all_items(TENANT, "conv_1")
    await store.get_item(TENANT, "conv_1", "a")
    await store.delete_item(TENANT, "conv_1", "a")
    await store.put_checkpoint(checkpoint(), expected_version=None)
    await store.put_checkpoint(checkpoint(1), expected_version=0)
    await store.get_checkpoint(TENANT, "resp_bg")
    await store.cancel_requested(TENANT, "resp_bg")
    await store.request_cancel(TENANT, "resp_bg")
    await store.append_events(TENANT, "resp_bg", 0, ["f0"])
    await store.read_events(TENANT, "resp_bg", -1)
    await store.last_event_seq(TENANT, "resp_bg")
    await store.truncate_events(TENANT, "resp_bg", 0)
    await store.claim_terminal(TENANT, "resp_bg", Terminal(1, "end", {}))
    await store.get_terminal(TENANT, "resp_bg")
    await store.journal_start(TENANT, "resp_bg", "c1")
    await store.journal_finish(TENANT, "resp_bg", "c1", {"output": "x"})
    await store.append_items(TENANT, "conv_1", [item("d")], once_key="resp_k")
    await store.append_items(TENANT, "conv_1", [item("d")], once_key="resp_k")
    await store.record_usage(usage("u1"))
    await store.record_usage(usage("u1"))
    await store.record_usage(usage("u2"))
    await store.read_usage(int(START) - 3600, int(START) + DAY)
    await store.get_usage_entry(TENANT, "u1")
    await store.put_budget(TENANT, BudgetLimits(daily_tokens=5))
    await store.get_budget(TENANT)
    await store.get_spend(TENANT, int(START))
    await store.put_budget(TENANT, None)
    await store.delete_response(TENANT, "r1")
    await store.delete_conversation(TENANT, "conv_1")
    await store.purge_expired()

    queries = [s for s in statements.seen if s.split()[0].upper() in {"SELECT", "UPDATE", "DELETE"}]
    assert len(queries) > 30
    conn = connect_for_inspection(str(db))
    try:
        for query in queries:
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}")]
            assert not [step for step in plan if step.startswith("SCAN")], (query, plan)
    finally:
        conn.close()
