"""The launcher seam: a launcher made on first use, on a worker thread, once; the in-process
runner's run leases (several runners on one store)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from responses_gateway.app import _default_launcher
from responses_gateway.background.launcher import DeferredLauncher, Launcher
from responses_gateway.background.local import GATEWAY_RESTARTED, LocalLauncher, lease_seconds
from responses_gateway.background.runs import WORKER_LOST
from responses_gateway.background.stepfunctions import StepFunctionsLauncher
from responses_gateway.store.base import Checkpoint
from responses_gateway.store.sqlite import SqliteStore


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, int]] = []

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        self.calls.append(("start", tenant, response_id, generation))

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        self.calls.append(("stop", tenant, response_id, generation))


def test_the_launcher_is_made_once_on_a_worker_thread_at_first_use() -> None:
    made_on: list[str] = []
    inner = Recording()

    def make() -> Launcher:
        made_on.append(threading.current_thread().name)
        return inner

    launcher = DeferredLauncher(make)
    assert made_on == []  # nothing made yet

    async def use() -> None:
        await asyncio.gather(launcher.start("t", "resp_1"), launcher.start("t", "resp_2", 3))
        await launcher.stop("t", "resp_1", 1)

    asyncio.run(use())

    assert len(made_on) == 1 and made_on[0] != threading.current_thread().name
    assert sorted(inner.calls) == [
        ("start", "t", "resp_1", 0),
        ("start", "t", "resp_2", 3),
        ("stop", "t", "resp_1", 1),
    ]


def test_a_state_machine_in_the_environment_gives_step_functions_on_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:gw-background"
    monkeypatch.setenv("BACKGROUND_STATE_MACHINE_ARN", arn)
    gateway = SimpleNamespace(store=object())  # a store that keeps no run leases

    launcher = _default_launcher(gateway)  # type: ignore[arg-type]

    assert isinstance(launcher, DeferredLauncher)
    made = asyncio.run(launcher._get())
    assert isinstance(made, StepFunctionsLauncher)
    monkeypatch.delenv("BACKGROUND_STATE_MACHINE_ARN")
    assert isinstance(_default_launcher(gateway), LocalLauncher)  # type: ignore[arg-type]


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_runners_sharing_a_store_take_over_only_runs_whose_lease_lapsed(
    tmp_path: Path,
) -> None:
    clock = _Clock()
    store = SqliteStore(tmp_path / "gw.db", clock=clock)
    held = asyncio.Event()
    calls: list[tuple[str, str]] = []
    lost: list[tuple[str, str, dict[str, Any]]] = []

    def worker(name: str, crash: bool = False) -> Any:
        async def work(tenant: str, response_id: str, generation: int) -> str:
            calls.append((name, response_id))
            if crash:
                raise RuntimeError("the worker crashed")
            if name == "a":
                await held.wait()  # "a" is still running its first action
            return "done"

        return work

    async def on_lost(tenant: str, response_id: str, error: dict[str, Any]) -> None:
        lost.append((tenant, response_id, error))

    first = LocalLauncher(worker("a"), on_lost, leases=store, lease=10)
    second = LocalLauncher(worker("b"), on_lost, leases=store, lease=10)
    crashing = LocalLauncher(worker("c", crash=True), on_lost, leases=store, lease=10)
    try:
        for response_id in ("resp_live", "resp_dead"):
            checkpoint = Checkpoint("t", response_id, 0, 0, {}, {})
            await store.put_checkpoint(checkpoint, expected_version=None)
        await first.start("t", "resp_live")
        await first.start("t", "resp_dead")
        assert await second.recover() == 0  # leased to a live runner
        await second.start("t", "resp_live")  # a start elsewhere does not steal it either
        assert calls == [("a", "resp_live"), ("a", "resp_dead")]

        clock.now += 11  # "a" stopped renewing: it died
        assert await second.recover() == 2
        await second.drain()
        assert sorted(calls[2:]) == [("b", "resp_dead"), ("b", "resp_live")]
        assert lost == []
        assert await store.orphaned_runs(10) == []  # released once done

        await store.put_checkpoint(Checkpoint("t", "resp_x", 0, 0, {}, {}), expected_version=None)
        clock.now += 60  # its creator died before starting it
        assert await crashing.recover() == 1
        await crashing.drain()
        assert calls[-3:] == [("c", "resp_x")] * 3  # the first try and two retries
        assert lost == [("t", "resp_x", GATEWAY_RESTARTED)]
        assert await store.orphaned_runs(10) == []

        await store.put_checkpoint(Checkpoint("t", "resp_y", 0, 0, {}, {}), expected_version=None)
        await crashing.start("t", "resp_y")  # its own run, not taken over
        await crashing.drain()
        assert lost[-1] == ("t", "resp_y", WORKER_LOST)
    finally:
        held.set()
        await first.drain()
        store.close()


def test_the_run_lease_comes_from_the_environment_and_is_at_least_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GATEWAY_RUN_LEASE_SECONDS", raising=False)
    assert lease_seconds() == 10.0
    monkeypatch.setenv("GATEWAY_RUN_LEASE_SECONDS", "2.5")
    assert lease_seconds() == 2.5
    monkeypatch.setenv("GATEWAY_RUN_LEASE_SECONDS", "0")  # would sweep in a tight loop
    assert lease_seconds() == 1.0
