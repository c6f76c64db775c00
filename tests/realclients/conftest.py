"""Real-client fixtures: the pinned npm clients, installed by the test session, and how to run them.

Owns the Node side of the real-client tests: ``npm ci`` of ``tests/realclients/package.json``
(exact versions, ``package-lock.json`` committed) into ``tests/realclients/node_modules`` once per
lock file, under a file lock so concurrent sessions never install over each other; the path of
the installed ``codex`` CLI; and :func:`run_node` / :func:`run_client` for scripts kept in
``tests/realclients/js/``. A missing ``node``/``npm`` or a failed install fails the tests loudly:
nothing here skips. It also serves what the clients talk to: one gateway (both upstream wires,
embedded DynamoDB) in front of one scripted upstream per test module, answered by the
transcript-reading brain (:mod:`responses_gateway.testing.brain`) unless a test pushes turns.
Every gateway app served here is held to OpenAI's spec and the Open Responses spec, as in the
end-to-end suites (:mod:`responses_gateway.testing.spec_fixtures`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from responses_gateway.adapters.select import UpgradeLatch
from responses_gateway.app import create_app
from responses_gateway.config import GatewayConfig, parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.testing.brain import brain_turn
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import RecordedRequest, ScriptedUpstream
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.spec_fixtures import (  # noqa: F401 - fixtures and a hook
    pytest_terminal_summary,
    spec_conformance,
    spec_taps,
)

HERE = Path(__file__).resolve().parent
"""``tests/realclients``: package.json, package-lock.json and node_modules live here."""
JS_DIR = HERE / "js"
"""The node scripts the tests run."""
NODE_MODULES = HERE / "node_modules"
STAMP = NODE_MODULES / ".responses-gateway-installed"
"""Written after a successful ``npm ci``: the digest of the manifest and lock it installed."""
LOCK_FILE = HERE / ".npm-install.lock"
MIN_NODE_MAJOR = 20
INSTALL_TIMEOUT = 600.0

__all__ = [
    "CLIENT_KEY",
    "CODEX_LITE_MODELS",
    "CODEX_TIMEOUT",
    "Codex",
    "HERE",
    "JS_DIR",
    "MODELS",
    "NODE_MODULES",
    "Stack",
    "UPSTREAM_KEY",
    "agent_messages",
    "catalog_for",
    "codex_events",
    "codex_ok",
    "gateway_config",
    "install_node_modules",
    "provider_config",
    "run_client",
    "run_node",
    "serve_stack",
]


def _fail(message: str) -> NoReturn:
    pytest.fail(message, pytrace=False)


def _digest() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        h.update(name.encode())
        h.update((HERE / name).read_bytes())
    return h.hexdigest()


def _installed() -> bool:
    try:
        return STAMP.read_text().strip() == _digest()
    except FileNotFoundError:
        return False


def _node_major() -> int:
    node = shutil.which("node")
    if node is None:
        _fail(f"node is not on PATH: the real-client tests need Node {MIN_NODE_MAJOR}+ and npm")
    out = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().lstrip("v").split(".")[0])


def install_node_modules() -> Path:
    """Run ``npm ci`` in ``tests/realclients`` unless node_modules matches the lock; return it.

    Serialised across processes with ``flock`` on ``.npm-install.lock``; the stamp is written
    only after a successful install, so an interrupted install is redone by the next session.
    Fails the calling test (never skips) when node/npm is missing or the install fails.
    """
    if _installed():
        return NODE_MODULES
    major = _node_major()
    if major < MIN_NODE_MAJOR:
        _fail(f"node {major} found; the real-client tests need Node {MIN_NODE_MAJOR}+")
    npm = shutil.which("npm")
    if npm is None:
        _fail("npm is not on PATH: the real-client tests install their clients with `npm ci`")
    with LOCK_FILE.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _installed():  # another session installed while we waited
                return NODE_MODULES
            started = time.monotonic()
            result = subprocess.run(
                [str(npm), "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=HERE,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
            )
            if result.returncode != 0:
                _fail(
                    f"`npm ci` in {HERE} failed ({result.returncode}):\n"
                    f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
                )
            STAMP.write_text(_digest() + "\n")
            took = time.monotonic() - started
            print(f"\nrealclients: npm ci took {took:.1f}s")  # noqa: T201 (shown with -s)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return NODE_MODULES


def _bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group; on timeout kill the whole group and fail."""
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        _fail(
            f"{argv[0]} timed out after {timeout}s: {' '.join(argv[1:])[:300]}\n"
            f"stdout:\n{out[-4000:]}\nstderr:\n{err[-4000:]}"
        )
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _base_env(env: Mapping[str, str]) -> dict[str, str]:
    """PATH, HOME and locale from this process plus ``env``: no stray OPENAI_* leaks in."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    merged = {k: os.environ[k] for k in keep if k in os.environ}
    merged.update(env)
    return merged


def run_node(
    script: Path, env: Mapping[str, str], timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run ``node <script>`` (a file in ``tests/realclients/js``) with ``env``, bounded in time.

    The scripts resolve their packages from ``tests/realclients/node_modules``. The environment
    is ``env`` plus PATH/HOME/locale only. A timeout kills the process group and fails the test.
    """
    node = shutil.which("node")
    if node is None:
        _fail("node is not on PATH")
    return _bounded([str(node), str(script)], env=_base_env(env), cwd=HERE, timeout=timeout)


def run_client(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path,
    timeout: float = 60.0,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run an installed client binary (e.g. the ``codex`` CLI), bounded in time like run_node."""
    return _bounded(argv, env=_base_env(env), cwd=cwd, timeout=timeout, stdin=stdin)


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """``tests/realclients/node_modules``, installed with ``npm ci`` from the committed lock."""
    return install_node_modules()


@pytest.fixture(scope="session")
def codex_bin(node_modules: Path) -> Iterator[Path]:
    """The installed ``codex`` CLI (the npm launcher, which runs the platform's native binary)."""
    codex = node_modules / ".bin" / "codex"
    if not codex.exists():
        _fail(f"{codex} is missing after npm ci")
    version = run_client([str(codex), "--version"], {}, cwd=HERE, timeout=30)
    pinned = json.loads((HERE / "package.json").read_text())["dependencies"]["@openai/codex"]
    if version.returncode != 0 or version.stdout.split() != ["codex-cli", pinned]:
        _fail(f"`codex --version` is not codex-cli {pinned}: {version.stdout}{version.stderr}")
    yield codex


# -- the gateway the clients talk to -------------------------------------------------------------

UPSTREAM_KEY = "sk-upstream-realclients"
CLIENT_KEY = "sk-client-realclients"
MODELS = {"chat": "scripted-chat", "responses": "scripted-responses"}
"""The model name that routes to each upstream wire (names outside Codex's catalog)."""
CODEX_LITE_MODELS = {"chat": "gpt-6-sol", "responses": "gpt-6.1-sol"}
"""Names in Codex's catalog that get its responses-lite requests (tools in an ``additional_tools``
input item, command runs through a freeform ``exec`` tool in namespace ``functions``)."""
WIRES = tuple(MODELS)
TABLE = "responses-gateway-realclients"


@dataclass
class Stack:
    """A served gateway in front of one scripted upstream (both wires), on loopback."""

    upstream: ScriptedUpstream
    upstream_server: RunningServer
    gateway_server: RunningServer
    dynamo: LocalDynamo

    @property
    def base_url(self) -> str:
        """The gateway's ``/v1`` base URL, as clients are configured with it."""
        return f"{self.gateway_server.url}/v1"

    def model_requests(self, wire: str) -> list[RecordedRequest]:
        """What the upstream was asked on ``wire`` (``chat`` or ``responses``), oldest first."""
        path = "/v1/chat/completions" if wire == "chat" else "/v1/responses"
        return [r for r in self.upstream.model_requests() if r.path == path]


def gateway_config(upstream_url: str, extra: Mapping[str, Any] | None = None) -> GatewayConfig:
    """One provider per wire over the scripted upstream, plus ``extra`` top-level config keys."""
    providers = [
        {
            "name": wire,
            "base_url": f"{upstream_url}/v1",
            "api": wire,
            "api_key": UPSTREAM_KEY,
            "models": [model, CODEX_LITE_MODELS[wire]],
        }
        for wire, model in MODELS.items()
    ]
    return parse_config({"providers": providers, **(extra or {})})


@contextmanager
def serve_stack(
    upstream: ScriptedUpstream, extra_config: Mapping[str, Any] | None = None
) -> Iterator[Stack]:
    """Serve the scripted upstream and a gateway in front of it (embedded DynamoDB)."""
    with ExitStack() as stack:
        upstream_server = stack.enter_context(run_in_thread(create_fake_upstream_app(upstream)))
        dynamo = start_local_dynamodb(table_name=TABLE)
        stack.callback(dynamo.stop)
        config = gateway_config(upstream_server.url, extra_config)
        store = DynamoStore(dynamo.client, TABLE)
        policy = McpPolicy(allow_http=True, allow_loopback=True)  # test MCP servers are local
        app = create_app(config, store, latch=UpgradeLatch(), mcp_policy=policy)
        gateway_server = stack.enter_context(run_in_thread(app))
        yield Stack(upstream, upstream_server, gateway_server, dynamo)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """One gateway and one scripted upstream per test module; the brain answers by default."""
    with serve_stack(ScriptedUpstream(brain=brain_turn, demo=False)) as served:
        yield served


@pytest.fixture
def upstream(stack: Stack) -> ScriptedUpstream:
    """The module's scripted upstream, its script and recordings reset for this test."""
    stack.upstream.reset()
    return stack.upstream


@pytest.fixture(params=WIRES)
def wire(request: pytest.FixtureRequest) -> str:
    """The upstream wire a test runs over: ``chat`` or ``responses``."""
    return str(request.param)


@pytest.fixture
def model(wire: str) -> str:
    """The model name that routes to ``wire``."""
    return MODELS[wire]


# -- Codex CLI --------------------------------------------------------------------------------

CODEX_TIMEOUT = 60.0


@dataclass
class Codex:
    """One Codex installation: its home, working directory and how to run ``codex exec``."""

    bin: Path
    home: Path
    workdir: Path
    env: dict[str, str]

    def exec(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``codex exec [args...] --json ... <prompt>`` (the prompt is the last argument)."""
        argv = [
            str(self.bin),
            "exec",
            *args[:-1],
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            args[-1],
        ]
        return run_client(argv, self.env, cwd=self.workdir, timeout=CODEX_TIMEOUT)

    def use_catalog(self, model: str) -> None:
        """Give ``model`` the catalog tool set through ``model_catalog_json``."""
        catalog = self.home / "catalog.json"
        catalog.write_text(catalog_for(model))
        config = self.home / "config.toml"
        config.write_text(f'model_catalog_json = "{catalog}"\n' + config.read_text())


def provider_config(base_url: str, model: str) -> str:
    """config.toml for a custom provider pointing at the gateway (as the README shows)."""
    return (
        f'model = "{model}"\n'
        'model_provider = "gateway"\n'
        "\n"
        "[model_providers.gateway]\n"
        'name = "responses-gateway"\n'
        f'base_url = "{base_url}"\n'
        'env_key = "GATEWAY_API_KEY"\n'
        'wire_api = "responses"\n'
    )


def catalog_for(model: str) -> str:
    """A minimal ``model_catalog_json`` entry giving ``model`` the catalog's tools: a freeform
    (``custom``) ``apply_patch`` besides family A's (the fields Codex 0.169 requires)."""
    entry = {
        "slug": model,
        "display_name": model,
        "base_instructions": "You are a coding agent working in the user's directory.",
        "apply_patch_tool_type": "freeform",
        "shell_type": "shell_command",
        "context_window": 128000,
        "supported_reasoning_levels": [],
        "visibility": "list",
        "supported_in_api": True,
        "priority": 1,
        "support_verbosity": False,
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "experimental_supported_tools": [],
    }
    return json.dumps({"models": [entry]})


@pytest.fixture
def codex(codex_bin: Path, stack: Stack, model: str, tmp_path: Path) -> Codex:
    """Codex with its own home (config.toml: the gateway as a custom provider, ``model``) and
    an empty working directory."""
    home = tmp_path / "codex-home"
    workdir = tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    (home / "config.toml").write_text(provider_config(stack.base_url, model))
    env = {
        "CODEX_HOME": str(home),
        "HOME": str(tmp_path),
        "GATEWAY_API_KEY": CLIENT_KEY,
        "NO_COLOR": "1",
    }
    return Codex(codex_bin, home, workdir, env)


def codex_events(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """``codex exec --json`` output: one JSON event per line."""
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def agent_messages(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The texts of the agent messages ``codex exec --json`` reported, in order."""
    return [
        e["item"]["text"]
        for e in codex_events(done)
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]


def codex_ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """Assert ``codex exec`` exited 0 and reported no error event; return its result."""
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert not [e for e in codex_events(done) if e.get("type") in ("error", "turn.failed")]
    return done
