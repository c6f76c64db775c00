"""Run leases in the SQLite store: a new run is leased to nobody for a grace, then to the runner
that claims it; another runner takes it only once the lease lapsed; renewals and releases touch
only their owner's runs; the lapsed runs are found by one indexed read."""

from __future__ import annotations

from pathlib import Path

from responses_gateway.store._sqlite_leases import NEW_RUN_GRACE
from responses_gateway.store.base import Checkpoint, RunLeases
from responses_gateway.store.sqlite import SqliteStore, connect_for_inspection


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def _new_run(store: SqliteStore, response_id: str) -> None:
    checkpoint = Checkpoint("t", response_id, 0, 2, {"status": "queued"}, {})
    await store.put_checkpoint(checkpoint, expected_version=None)


async def test_a_new_run_is_claimed_by_one_runner_and_taken_over_only_after_its_lease_lapsed(
    tmp_path: Path,
) -> None:
    clock = Clock()
    store = SqliteStore(tmp_path / "gw.db", clock=clock)
    assert isinstance(store, RunLeases)
    try:
        await _new_run(store, "resp_1")
        assert await store.orphaned_runs(10) == []  # its creator starts it at once
        assert await store.claim_run("t", "resp_1", "a", 10)
        assert await store.claim_run("t", "resp_1", "a", 10)  # its own: renewed
        assert not await store.claim_run("t", "resp_1", "b", 10)

        clock.now += 6
        assert await store.renew_runs("a", 10) == 1
        clock.now += 9  # 15 s after the claim, 9 after the renewal
        assert await store.orphaned_runs(10) == []
        assert not await store.claim_run("t", "resp_1", "b", 10)

        clock.now += 1  # the renewal lapsed: "a" died
        assert await store.orphaned_runs(10) == [("t", "resp_1")]
        assert await store.claim_run("t", "resp_1", "b", 10)
        assert not await store.claim_run("t", "resp_1", "a", 10)  # "a" lost it
        assert await store.renew_runs("a", 10) == 0
        await store.release_run("t", "resp_1", "a")  # not its lease: nothing happens
        assert not await store.claim_run("t", "resp_1", "c", 10)

        await store.release_run("t", "resp_1", "b")  # the run is done
        clock.now += 3600
        assert await store.orphaned_runs(10) == []
    finally:
        store.close()


async def test_a_run_whose_creator_died_before_starting_it_lapses_after_the_grace(
    tmp_path: Path,
) -> None:
    clock = Clock()
    store = SqliteStore(tmp_path / "gw.db", clock=clock)
    try:
        await _new_run(store, "resp_old")
        clock.now += 1
        await _new_run(store, "resp_new")
        clock.now += NEW_RUN_GRACE - 0.5
        assert await store.orphaned_runs(10) == [("t", "resp_old")]
        clock.now += 1
        assert await store.orphaned_runs(10) == [("t", "resp_old"), ("t", "resp_new")]
        assert await store.orphaned_runs(1) == [("t", "resp_old")]
    finally:
        store.close()


async def test_deleting_a_response_deletes_its_lease_and_the_lapse_read_uses_the_index(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "gw.db")
    try:
        await _new_run(store, "resp_1")
        await store.delete_response("t", "resp_1")
        conn = connect_for_inspection(str(tmp_path / "gw.db"))
        try:
            assert conn.execute("SELECT COUNT(*) FROM run_leases").fetchone()[0] == 0
            plan = conn.execute(
                "EXPLAIN QUERY PLAN SELECT tenant, response_id FROM run_leases "
                "WHERE lease_until <= ? ORDER BY lease_until LIMIT ?",
                (0, 10),
            ).fetchall()
            assert "run_leases_lapse" in " ".join(str(row) for row in plan)
        finally:
            conn.close()
    finally:
        store.close()
