"""The SQLite store across processes: a writer killed with SIGKILL mid-write leaves every record
whole or absent, and two processes writing one file lose nothing and agree on every claim."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from responses_gateway.store.sqlite import SqliteStore, connect_for_inspection

WRITER = r"""
import asyncio, hashlib, os, sys, time
from responses_gateway.store import Conversation, StoredResponse
from responses_gateway.store.base import Terminal
from responses_gateway.store.sqlite import SqliteStore

async def main(path, name, count, size):
    store = SqliteStore(path)
    now = int(time.time())
    try:
        await store.create_conversation(Conversation("t", "conv", now), [])
    except Exception:
        pass  # the other writer created it
    won = await store.claim_terminal("t", "resp_race", Terminal(1, name, {"by": name}))
    print("claim", "won" if won is None else "lost", flush=True)
    for n in range(count):
        blob = os.urandom(size).hex()
        response = {"id": f"{name}{n}", "created_at": now, "status": "completed",
                    "blob": blob, "digest": hashlib.sha256(blob.encode()).hexdigest()}
        await store.put_response(StoredResponse("t", f"{name}{n}", response, []))
        items = [{"id": f"{name}{n}_{k}", "type": "message", "blob": blob[:1000]} for k in range(3)]
        await store.append_items("t", "conv", items)
        print("wrote", n, flush=True)
    store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


def start_writer(db: Path, name: str, count: int, size: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), name, str(count), str(size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def check_whole(db: Path) -> tuple[list[str], list[list[str]]]:
    """Every record and every append in the file is whole: returns the record ids and the
    appends (item ids) found, in order."""
    conn = connect_for_inspection(str(db))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    store = SqliteStore(db)
    try:

        async def read() -> tuple[list[str], list[dict[str, object]]]:
            conn = connect_for_inspection(str(db))
            ids = [r[0] for r in conn.execute("SELECT id FROM responses ORDER BY id")]
            conn.close()
            records = await store.get_responses("t", ids)
            for record in records:
                blob = str(record.response["blob"])
                assert hashlib.sha256(blob.encode()).hexdigest() == record.response["digest"]
            items = await store.all_items("t", "conv")
            return [r.id for r in records], items

        ids, items = asyncio.run(read())
    finally:
        store.close()
    appends = [[str(i["id"]) for i in items[k : k + 3]] for k in range(0, len(items), 3)]
    for append in appends:
        prefix = append[0].rsplit("_", 1)[0]
        assert append == [f"{prefix}_{k}" for k in range(3)], append
    return ids, appends


def test_writer_killed_mid_write_leaves_each_record_whole_or_absent(tmp_path: Path) -> None:
    db = tmp_path / "gateway.db"
    writer = start_writer(db, "w", 10_000, 200_000)
    assert writer.stdout is not None
    written: list[int] = []
    try:
        assert writer.stdout.readline().startswith("claim")
        while len(written) < 25:
            line = writer.stdout.readline()
            assert line, writer.stderr.read() if writer.stderr else "writer died"
            written.append(int(line.split()[1]))
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL

    ids, appends = check_whole(db)

    # Everything acknowledged before the kill is there; the write in flight is whole or absent.
    assert {f"w{n}" for n in written} <= set(ids)
    assert len(ids) - len(written) in (0, 1)
    assert [a[0] for a in appends[: len(written)]] == [f"w{n}_0" for n in written]


def test_two_processes_on_one_file_lose_no_write_and_agree_on_the_claim(tmp_path: Path) -> None:
    count = 60
    db = tmp_path / "gateway.db"
    SqliteStore(db).close()  # created up front, so both writers open an existing file
    writers = [start_writer(db, name, count, 2_000) for name in ("a", "b")]
    outputs = []
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
        outputs.append(out.splitlines())

    ids, appends = check_whole(db)

    assert sorted(line for out in outputs for line in out if line.startswith("claim")) == [
        "claim lost",
        "claim won",
    ]
    assert sorted(ids) == sorted(f"{name}{n}" for name in "ab" for n in range(count))
    assert len(appends) == 2 * count
    for name in "ab":  # each writer's appends keep their order
        mine = [a[0] for a in appends if a[0].startswith(name)]
        assert mine == [f"{name}{n}_0" for n in range(count)]
    conn = connect_for_inspection(str(db))
    try:
        terminal = conn.execute("SELECT body, enc FROM terminals").fetchall()
    finally:
        conn.close()
    assert len(terminal) == 1
