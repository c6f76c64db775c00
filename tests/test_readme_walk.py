"""The README walked as a newcomer types it: its commands, in order, in a fresh copy of the
repository, on the default SQLite store and then on DynamoDB.

What stands in for the newcomer's machine: the repository's tracked files copied to an empty
directory (a fresh clone), ``python`` on ``PATH`` being the machine's own Python, and a ``pip``
in the new virtualenv that answers ``pip install -e '.[dev]'`` by linking the copy into the
virtualenv and the packages this test session already installed (installing them again would
take minutes and the network; the command line is the README's, checked against
``pyproject.toml``'s extras and scripts). Everything else is the README's text, read from it
here: the quick start's two commands (the second in a new terminal: no virtualenv active), its
``curl`` and Python examples, ``create-table`` and the usage, budgets and keys commands. Only
the port is changed (a free one instead of 8080, on a machine shared with other tests).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import site
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from responses_gateway.store.local import LocalDynamo, start_local_dynamodb

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")

PYTHON_SHIM = '''#!{session}
"""The machine's ``python`` before any virtualenv: ``-m venv DIR`` makes the virtualenv (with
the walk's pip), anything else runs the machine's own Python."""
import os, subprocess, sys
from pathlib import Path
args = sys.argv[1:]
if args[:2] != ["-m", "venv"]:
    os.execv({base!r}, [{base!r}, *args])
target = Path(args[2]).resolve()
subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
(site,) = target.glob("lib/python*/site-packages")
(site / "_walk_session.pth").write_text("\\n".join({session_sites!r}) + "\\n")
pip = target / "bin" / "pip"
pip.write_text("#!" + str(target / "bin" / "python") + "\\n" + {pip_source!r})
pip.chmod(0o755)
'''

PIP_SOURCE = '''"""The walk's pip: answers ``pip install -e '.[extras]'`` as an editable install
does (a path file to the package directory, the console scripts), the session having the rest."""
import re, sys, sysconfig, tomllib
from pathlib import Path
args = sys.argv[1:]
editable = args[:2] == ["install", "-e"] and len(args) == 3
match = re.fullmatch(r"\\.(?:\\[([\\w,-]+)\\])?", args[2]) if editable else None
if match is None:
    sys.exit(f"the walk's pip stands in for `pip install -e '.[dev]'` only, not {args}")
project = tomllib.loads(Path("pyproject.toml").read_text())
known = project["project"]["optional-dependencies"]
for extra in (match.group(1) or "").split(","):
    if extra and extra not in known:
        sys.exit(f"unknown extra {extra!r}")
purelib = Path(sysconfig.get_paths()["purelib"])
where = project["tool"]["setuptools"]["packages"]["find"]["where"]
(purelib / "_walk_editable.pth").write_text("".join(str(Path(w).resolve()) + "\\n" for w in where))
bin_dir = Path(sys.executable).parent
for name, target in project["project"]["scripts"].items():
    module, function = target.split(":")
    script = bin_dir / name
    script.write_text(
        f"#!{sys.executable}\\nimport sys\\nfrom {module} import {function}\\n"
        f"sys.exit({function}())\\n"
    )
    script.chmod(0o755)
print("Successfully installed responses-gateway (linked: the walk's pip)")
'''


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _block_after(heading: str, language: str, nth: int = 0) -> str:
    """The ``nth`` fenced block of ``language`` after ``heading`` in the README."""
    section = README[README.index(heading) :]
    blocks = re.findall(rf"```{language}\n(.*?)```", section, re.DOTALL)
    return str(blocks[nth])


def _commands(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


@dataclass
class Machine:
    """The newcomer's directory and terminal environment."""

    clone: Path
    env: dict[str, str]
    port: int

    def terminal(self, script: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """``script`` in a new bash (no virtualenv active), in the clone."""
        return subprocess.run(
            ["bash", "-c", script],
            cwd=self.clone,
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def local(self, text: str) -> str:
        """README text with the walk's port instead of 8080."""
        return text.replace("127.0.0.1:8080", f"127.0.0.1:{self.port}")


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Machine:
    home = tmp_path_factory.mktemp("newcomer")
    clone = home / "responses-gateway"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    shims = home / "bin"
    shims.mkdir()
    base = getattr(sys, "_base_executable", sys.executable)
    python = shims / "python"
    python.write_text(
        PYTHON_SHIM.format(
            session=sys.executable,
            base=base,
            session_sites=[*site.getsitepackages()],
            pip_source=PIP_SOURCE,
        )
    )
    python.chmod(0o755)
    session_bin = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p != session_bin]
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GATEWAY_", "UPSTREAM_", "DYNAMODB_", "PYTEST_", "VIRTUAL_ENV"))
    }
    env.update(
        PATH=os.pathsep.join([str(shims), *path]),
        XDG_DATA_HOME=str(home / "data"),
    )
    return Machine(clone, env, _free_port())


@dataclass
class Serving:
    proc: subprocess.Popen[str]
    startup: list[str]


@contextmanager
def _serve(machine: Machine, command: str, **extra: str) -> Iterator[Serving]:
    proc = subprocess.Popen(
        ["bash", "-c", f"{command} --port {machine.port}"],
        cwd=machine.clone,
        env={**machine.env, **extra},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # the whole command line is stopped at the end
    )
    assert proc.stdout is not None
    startup: list[str] = []
    while not startup or "listening on" not in startup[-1]:
        line = proc.stdout.readline()
        assert line, f"serve ended before listening: {''.join(startup)}"
        startup.append(line)
    try:
        with httpx.Client(timeout=1.0) as client:
            for _ in range(400):
                try:
                    if client.get(f"http://127.0.0.1:{machine.port}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    with pytest.raises(subprocess.TimeoutExpired):
                        proc.wait(timeout=0.05)
        yield Serving(proc, startup)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _try_the_examples(machine: Machine) -> None:
    """The quick start's curl commands and Python example, checked against what it says."""
    curl = machine.terminal(machine.local(_block_after("## Quick start", "bash", 1)))
    assert curl.returncode == 0, curl.stderr
    first, end = json.JSONDecoder().raw_decode(curl.stdout)
    assert first["output"][-1]["content"][0]["text"] == "Hello! You said: Hello gateway"
    events = re.findall(r"^event: (\S+)$", curl.stdout[end:], re.MULTILINE)
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert "response.reasoning_text.delta" in events  # "Think about ..." streams reasoning
    example = machine.local(_block_after("## Quick start", "python"))
    ran = machine.terminal(f". .venv/bin/activate && python -c {shlex.quote(example)}")
    assert ran.returncode == 0, ran.stderr
    printed = ran.stdout.splitlines()
    for comment in re.findall(r"# (.+)$", example, re.MULTILINE):
        assert comment in printed, (comment, printed)


USAGE_BLOCK = _block_after("## Usage, budgets and keys", "bash")


def _operate(machine: Machine, **store: str) -> str:
    """The usage, budgets and keys commands, in order, in the activated virtualenv."""
    done = machine.terminal(". .venv/bin/activate\n" + USAGE_BLOCK, **store)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("The key is shown once: store it now.") == 2
    out = done.stdout
    assert out.count("key:    ") == 2
    assert "  own limits:  daily 50000 tokens\n" in out
    assert re.search(r"^tenant\s+model\s+api key\s+input\s+", out, re.MULTILINE), out
    assert re.search(r"^local\s+demo\s+", out, re.MULTILINE), out  # the quick start's requests
    assert re.search(r"^revoked key_[0-9a-f]{16} \(team-b\)$", out, re.MULTILINE), out
    return out


def test_the_readme_walked_on_the_default_store(machine: Machine) -> None:
    first, second = _commands(_block_after("## Quick start", "bash"))
    assert first.endswith("responses-gateway serve") and "-n 2" in second

    # 1. the first command, as typed: the virtualenv, the install, serve on the SQLite file
    with _serve(machine, first) as serving:
        text = "".join(serving.startup)
        database = Path(machine.env["XDG_DATA_HOME"]) / "responses-gateway" / "gateway.db"
        assert f"keeping state in the SQLite database {database}\n" in text
        assert "Successfully installed responses-gateway" in text
        _try_the_examples(machine)

    # 2. the second command, in a new terminal (nothing active), on a small part of the suite
    tests = machine.terminal(f"{second} tests/test_tool_kinds.py")
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert re.search(r"\d+ passed", tests.stdout), tests.stdout

    # 3. usage, budgets and keys on the same default store
    _operate(machine)

    # 4. the scripted upstream alone (Development)
    (fake,) = re.findall(r"`(responses-gateway fake-upstream[^`]*)`", README)
    port = _free_port()
    command = fake.replace("--port 8001", f"--port {port}")
    proc = subprocess.Popen(
        ["bash", "-c", f". .venv/bin/activate && exec {command}"],
        cwd=machine.clone,
        env=machine.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == (
            f"responses-gateway: scripted fake upstream on http://127.0.0.1:{port}/v1\n"
        )
        with httpx.Client(timeout=5.0) as client:
            for _ in range(400):
                try:
                    models = client.get(f"http://127.0.0.1:{port}/v1/models")
                    break
                except httpx.TransportError:
                    with pytest.raises(subprocess.TimeoutExpired):
                        proc.wait(timeout=0.05)
        assert models.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def dynamodb() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name="walk-unused")
    try:
        yield local
    finally:
        local.stop()


def test_the_readme_walked_on_dynamodb(machine: Machine, dynamodb: LocalDynamo) -> None:
    first, _ = _commands(_block_after("## Quick start", "bash"))
    if not (machine.clone / ".venv").exists():
        machine.terminal(first.removesuffix(" && responses-gateway serve"))
    credentials = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    # `responses-gateway create-table --table NAME [--endpoint-url URL] [--region REGION]`
    created = machine.terminal(
        f". .venv/bin/activate && responses-gateway create-table --table walk "
        f"--endpoint-url {dynamodb.endpoint_url}",
        **credentials,
    )
    assert created.stdout == "responses-gateway: table walk created\n", created.stderr
    store = {"DYNAMODB_TABLE": "walk", "DYNAMODB_ENDPOINT_URL": dynamodb.endpoint_url}
    with _serve(
        machine, ". .venv/bin/activate && responses-gateway serve", **credentials, **store
    ) as serving:
        assert "keeping state in the DynamoDB table walk at DYNAMODB_ENDPOINT_URL\n" in "".join(
            serving.startup
        )
        _try_the_examples(machine)
    _operate(machine, **credentials, **store)
