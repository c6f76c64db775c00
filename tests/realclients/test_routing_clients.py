"""Codex and openai-agents finish multi-step turns while one of a model's two deployments
answers 429 or drops the connection on every other call.

Model ``routed`` has two deployments over the same brain-answered scripted upstream: ``flaky``
(chat wire) behind a fault proxy that faults every other call, tried first while it is available,
and ``steady`` (Responses wire) direct. The clients see one clean answer per turn; the proxy's
record shows the faults really happened and the gateway's ``x-gateway-deployment`` header (in the
access log) which deployment answered.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, ShellTool
from agents.tool import ShellCallOutcome, ShellCommandOutput, ShellCommandRequest, ShellResult
from openai import AsyncOpenAI

from responses_gateway.adapters.select import UpgradeLatch
from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.routing.router import Router
from responses_gateway.store.sqlite import SqliteStore
from responses_gateway.testing.brain import brain_turn, call_block
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.faults import Call, Fault, FaultProxy
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread

from .conftest import (
    CLIENT_KEY,
    UPSTREAM_KEY,
    Codex,
    agent_messages,
    codex_ok,
    provider_config,
)

T = TypeVar("T")
MODEL = "routed"


class FirstPick(random.Random):
    def choices(self, population: Sequence[T], *args: Any, **kwargs: Any) -> list[T]:
        return [population[0]]


def every_other() -> Callable[[Call], bool]:
    """Matches model calls 1, 3, 5... (the first of each pair faults)."""
    seen = [0]

    def match(call: Call) -> bool:
        if call.method != "POST":
            return False
        seen[0] += 1
        return seen[0] % 2 == 1

    return match


FAULTS = {
    "429": lambda: Fault(
        "respond",
        status=429,
        body=b'{"error":{"message":"slow down","type":"rate_limit_error","code":null}}',
        headers={"content-type": "application/json", "retry-after": "0"},
        match=every_other(),
        times=None,
    ),
    "drop": lambda: Fault("reset", match=every_other(), times=None),
}


class Served:
    fault = ""
    """The fault the flaky deployment's proxy injects (a key of :data:`FAULTS`)."""

    def __init__(self, tmp: Path) -> None:
        self.upstream = ScriptedUpstream(brain=brain_turn, demo=False)
        self.upstream_server = run_in_thread(create_fake_upstream_app(self.upstream))
        self.proxy = FaultProxy.start(self.upstream_server.url)
        config = parse_config(
            {
                "providers": [
                    {"name": "flaky", "base_url": f"{self.proxy.url}/v1", "api": "chat",
                     "api_key": UPSTREAM_KEY, "models": ["only-flaky"], "timeout": 10},
                    {"name": "steady", "base_url": f"{self.upstream_server.url}/v1",
                     "api": "responses", "api_key": UPSTREAM_KEY, "models": ["only-steady"]},
                ],
                "routes": [
                    # Codex sends a prompt_cache_key, which chooses the deployment (weighted
                    # rendezvous hashing): the steady sibling's tiny weight lands every key on
                    # the flaky one first, so its faults are met, and the sibling still serves
                    # the retries.
                    {"model": MODEL, "cooldown_seconds": 0.2, "max_wait_seconds": 5,
                     "deployments": [{"provider": "flaky", "model": "flaky-model"},
                                     {"provider": "steady", "model": "steady-model",
                                      "weight": 1e-9}]},
                ],
            }
        )  # fmt: skip
        self.store = SqliteStore(tmp / "gateway.db")
        self.app = create_app(config, self.store, latch=UpgradeLatch())
        self.gateway: RunningServer = run_in_thread(self.app)
        gateway = self.app.state.gateway
        gateway._router = Router(
            gateway.config, gateway.client, gateway.store, gateway.latch, rng=FirstPick()
        )

    @property
    def base_url(self) -> str:
        return f"{self.gateway.url}/v1"

    def answered_by(self) -> list[str]:
        return [str(r.json.get("model")) for r in self.upstream.model_requests()]

    def stop(self) -> None:
        self.gateway.stop()
        self.proxy.stop()
        self.upstream_server.stop()
        self.store.close()


@pytest.fixture(params=sorted(FAULTS))
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    made = Served(tmp_path)
    made.fault = request.param
    made.proxy.script(FAULTS[request.param]())
    try:
        yield made
    finally:
        made.stop()


def _faulted(served: Served) -> int:
    return sum(1 for call in served.proxy.calls if call.action != "forward")


def _recovered(served: Served) -> None:
    """How the faulted calls were answered: a 429 fails over to the steady sibling; a connection
    dropped before the first data event is called once more unstreamed on the same deployment
    (the rule of every wire: docs/contract.md), which the flaky proxy lets through."""
    assert _faulted(served) >= 1
    if served.fault == "429":
        assert "steady-model" in served.answered_by()
        return
    flaky = [
        r.json for r in served.upstream.model_requests() if r.json.get("model") == "flaky-model"
    ]
    assert any(body.get("stream") is not True for body in flaky), flaky


def test_codex_finishes_a_multi_step_turn_while_a_deployment_fails_half_the_time(
    codex_bin: Path, served: Served, tmp_path: Path
) -> None:
    home, workdir = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    (home / "config.toml").write_text(provider_config(served.base_url, MODEL))
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path), "GATEWAY_API_KEY": CLIENT_KEY,
           "NO_COLOR": "1"}  # fmt: skip
    codex = Codex(codex_bin, home, workdir, env)
    cmd = "echo routed > out.txt && cat out.txt"
    done: subprocess.CompletedProcess[str] = codex_ok(
        codex.exec(call_block("exec_command", {"cmd": cmd}))
    )
    assert (workdir / "out.txt").read_text() == "routed\n"
    (answer,) = agent_messages(done)
    assert answer.startswith("The tool returned: ") and "routed" in answer
    _recovered(served)


async def test_openai_agents_finishes_a_multi_step_turn_while_a_deployment_fails_half_the_time(
    served: Served, tmp_path: Path
) -> None:
    commands: list[str] = []

    def shell(request: ShellCommandRequest) -> ShellResult:
        outputs = []
        for command in request.data.action.commands:
            commands.append(command)
            done = subprocess.run(
                command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=10
            )
            outcome = ShellCallOutcome(type="exit", exit_code=done.returncode)
            outputs.append(ShellCommandOutput(stdout=done.stdout, stderr=done.stderr,
                                              outcome=outcome))  # fmt: skip
        return ShellResult(output=outputs)

    client = AsyncOpenAI(base_url=served.base_url, api_key=CLIENT_KEY, max_retries=0)
    agent = Agent(
        name="builder",
        instructions="Use your tools.",
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        tools=[ShellTool(executor=shell)],
    )
    command = "echo from-agents > shell.txt && cat shell.txt"
    result = await Runner.run(
        agent,
        call_block("shell", {"commands": [command]}),
        run_config=RunConfig(tracing_disabled=True),
    )
    assert commands == [command]
    assert result.final_output.startswith("The tool returned: ")
    assert "from-agents" in result.final_output
    _recovered(served)
