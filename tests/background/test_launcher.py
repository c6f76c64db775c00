"""The launcher seam: a launcher made on first use, on a worker thread, once."""

from __future__ import annotations

import asyncio
import threading

import pytest

from responses_gateway.app import _default_launcher
from responses_gateway.background.launcher import DeferredLauncher, Launcher
from responses_gateway.background.local import LocalLauncher
from responses_gateway.background.stepfunctions import StepFunctionsLauncher


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
    gateway = object()

    launcher = _default_launcher(gateway)  # type: ignore[arg-type]

    assert isinstance(launcher, DeferredLauncher)
    made = asyncio.run(launcher._get())
    assert isinstance(made, StepFunctionsLauncher)
    monkeypatch.delenv("BACKGROUND_STATE_MACHINE_ARN")
    assert isinstance(_default_launcher(gateway), LocalLauncher)  # type: ignore[arg-type]
