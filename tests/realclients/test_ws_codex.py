"""Codex CLI (pinned) with its built-in OpenAI provider pointed at the gateway: WebSocket mode.

``openai_base_url`` makes Codex open ``ws://HOST/v1/responses`` first (``real-clients.md``); with
the upgrade refused it prints ``Reconnecting... n/5`` and falls back to HTTP, several seconds
later. The test asserts the socket is used (the gateway counts upgrades), that none of those
lines appear, and that the turn is answered. The turn's duration over the socket and over a custom
HTTP provider (medians of alternating runs) is printed for the record, not asserted: a timed
assertion fails on a loaded machine and proves nothing the absent fallback lines do not.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from responses_gateway.adapters.select import UpgradeLatch
from responses_gateway.app import create_app
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.brain import brain_turn
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread

from .conftest import (
    CLIENT_KEY,
    MODELS,
    TABLE,
    agent_messages,
    codex_ok,
    gateway_config,
    provider_config,
    run_client,
)

CODEX_TIMEOUT = 60.0
RUNS = 3


class _UpgradeCounter:
    """Counts WebSocket connections the app accepts a scope for."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.sockets = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            self.sockets += 1
        await self.app(scope, receive, send)


@dataclass
class Served:
    upstream: ScriptedUpstream
    gateway: RunningServer
    counter: _UpgradeCounter

    @property
    def base_url(self) -> str:
        return f"{self.gateway.url}/v1"


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    upstream = ScriptedUpstream(brain=brain_turn, demo=False)
    with ExitStack() as stack:
        upstream_server = stack.enter_context(run_in_thread(create_fake_upstream_app(upstream)))
        dynamo = start_local_dynamodb(table_name=TABLE + "-ws")
        stack.callback(dynamo.stop)
        app = create_app(
            gateway_config(upstream_server.url),
            DynamoStore(dynamo.client, TABLE + "-ws"),
            latch=UpgradeLatch(),
        )
        counter = _UpgradeCounter(app)
        gateway = stack.enter_context(run_in_thread(counter))
        yield Served(upstream, gateway, counter)


def _home(tmp: Path, name: str, config: str) -> dict[str, str]:
    home = tmp / name
    home.mkdir()
    (home / "config.toml").write_text(config)
    return {"CODEX_HOME": str(home), "HOME": str(tmp), "NO_COLOR": "1"}


def _exec(
    codex: Path, env: dict[str, str], workdir: Path, prompt: str
) -> tuple[float, subprocess.CompletedProcess[str]]:
    argv = [
        str(codex),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        prompt,
    ]
    started = time.perf_counter()
    done = run_client(argv, env, cwd=workdir, timeout=CODEX_TIMEOUT)
    return time.perf_counter() - started, done


def test_codex_uses_the_socket_with_openai_base_url(
    codex_bin: Path, served: Served, tmp_path: Path
) -> None:
    model = MODELS["chat"]
    workdir = tmp_path / "work"
    workdir.mkdir()
    socket_env = _home(
        tmp_path, "socket-home", f'model = "{model}"\nopenai_base_url = "{served.base_url}"\n'
    )
    login = run_client(
        [str(codex_bin), "login", "--with-api-key"],
        socket_env,
        cwd=workdir,
        timeout=30,
        stdin=CLIENT_KEY,
    )
    assert login.returncode == 0, login.stderr
    http_env = {
        **_home(tmp_path, "http-home", provider_config(served.base_url, model)),
        "GATEWAY_API_KEY": CLIENT_KEY,
    }
    socket_times: list[float] = []
    http_times: list[float] = []
    for run in range(RUNS):
        served.upstream.reset()
        before = served.counter.sockets
        took, done = _exec(codex_bin, socket_env, workdir, f"say hi {run}")
        codex_ok(done)
        printed = done.stdout + done.stderr
        assert "Reconnecting" not in printed and "Falling back" not in printed, printed[-3000:]
        assert agent_messages(done) == [f"You said: say hi {run} (user turns: 1)"]
        assert served.counter.sockets > before  # the turn went over WebSocket mode
        socket_times.append(took)
        took, done = _exec(codex_bin, http_env, workdir, f"say hi {run}")
        codex_ok(done)
        http_times.append(took)
    socket_turn, http_turn = statistics.median(socket_times), statistics.median(http_times)
    print(f"\ncodex turn: socket {socket_turn:.2f}s, custom HTTP provider {http_turn:.2f}s")
    print(f"codex printed (last socket run):\n{printed}")
