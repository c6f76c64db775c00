"""Codex CLI (npm ``@openai/codex``, pinned) driving the gateway with a custom provider.

Codex talks Responses only (``wire_api = "responses"``); the gateway answers it over both
upstream wires. Each test gets its own ``CODEX_HOME`` (config.toml with the custom provider,
sessions) and working directory; ``codex exec`` runs non-interactively with the sandbox off
(the directory is a throwaway one). The scripted upstream's brain answers Codex's requests: the
prompts carry ``<<call ...>>`` blocks when a test wants a tool called.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.testing.brain import call_block

from .conftest import CLIENT_KEY, UPSTREAM_KEY, Stack, run_client

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


def events(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    """``codex exec --json`` output: one JSON event per line."""
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def agent_messages(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [
        e["item"]["text"]
        for e in events(done)
        if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
    ]


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert not [e for e in events(done) if e.get("type") in ("error", "turn.failed")]
    return done


def test_codex_text_turn(codex: Codex, stack: Stack, upstream: object, wire: str) -> None:
    done = ok(codex.exec("say hi"))
    assert agent_messages(done) == ["You said: say hi (user turns: 1)"]
    (sent,) = stack.model_requests(wire)
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_codex_exec_command_changes_a_file(
    codex: Codex, stack: Stack, upstream: object, wire: str
) -> None:
    cmd = "echo made-by-codex > out.txt && cat out.txt"
    done = ok(codex.exec(call_block("exec_command", {"cmd": cmd})))
    assert (codex.workdir / "out.txt").read_text() == "made-by-codex\n"
    (answer,) = agent_messages(done)
    assert answer.startswith("The tool returned: ") and "made-by-codex" in answer
    commands = [
        e["item"] for e in events(done)
        if e.get("type") == "item.completed" and e["item"].get("type") == "command_execution"
    ]  # fmt: skip
    assert [c["exit_code"] for c in commands] == [0]
    assert cmd in commands[0]["command"]
    assert len(stack.model_requests(wire)) == 2


def test_codex_namespaced_tool_call_reaches_its_namespace(
    codex: Codex, stack: Stack, upstream: object, wire: str
) -> None:
    # close_agent lives in Codex's multi_agent_v1 namespace: Codex only runs it (and answers
    # "invalid agent id") if the call comes back as name + namespace, not a flattened name.
    done = ok(codex.exec(call_block("close_agent", {"target": "nobody"})))
    (answer,) = agent_messages(done)
    assert answer.startswith("The tool returned: invalid agent id nobody"), answer
    first, second = stack.model_requests(wire)
    assert "close_agent" in json.dumps(first.json["tools"])
    assert "invalid agent id nobody" in json.dumps(second.json)


def test_codex_resume_last_sends_the_whole_history(
    codex: Codex, stack: Stack, upstream: object, wire: str
) -> None:
    ok(codex.exec("first question"))
    done = ok(codex.exec("resume", "--last", "second question"))
    assert agent_messages(done) == ["You said: second question (user turns: 2)"]
    last = json.dumps(stack.model_requests(wire)[-1].json)
    assert "first question" in last
    assert "You said: first question (user turns: 1)" in last


def test_codex_catalog_model_applies_a_freeform_patch(
    codex: Codex, stack: Stack, upstream: object, wire: str, model: str
) -> None:
    codex.use_catalog(model)
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi from patch\n*** End Patch\n"
    done = ok(codex.exec(call_block("apply_patch", patch)))
    assert (codex.workdir / "hello.txt").read_text() == "hi from patch\n"
    (answer,) = agent_messages(done)
    assert "Success. Updated the following files:\nA hello.txt" in answer
