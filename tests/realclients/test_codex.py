"""Codex CLI (npm ``@openai/codex``, pinned) driving the gateway with a custom provider.

Codex talks Responses only (``wire_api = "responses"``); the gateway answers it over both
upstream wires. Each test gets its own ``CODEX_HOME`` (config.toml with the custom provider,
sessions) and working directory; ``codex exec`` runs non-interactively with the sandbox off
(the directory is a throwaway one). The scripted upstream's brain answers Codex's requests: the
prompts carry ``<<call ...>>`` blocks when a test wants a tool called.
"""

from __future__ import annotations

import json
from pathlib import Path

from responses_gateway.testing.brain import REASON, call_block

from .conftest import (
    CODEX_LITE_MODELS,
    MODELS,
    UPSTREAM_KEY,
    Codex,
    Stack,
    agent_messages,
    codex_events,
    codex_ok,
    provider_config,
    run_client,
)


def test_codex_text_turn(codex: Codex, stack: Stack, upstream: object, wire: str) -> None:
    done = codex_ok(codex.exec("say hi"))
    assert agent_messages(done) == ["You said: say hi (user turns: 1)"]
    (sent,) = stack.model_requests(wire)
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_codex_exec_command_changes_a_file(
    codex: Codex, stack: Stack, upstream: object, wire: str
) -> None:
    cmd = "echo made-by-codex > out.txt && cat out.txt"
    done = codex_ok(codex.exec(call_block("exec_command", {"cmd": cmd})))
    assert (codex.workdir / "out.txt").read_text() == "made-by-codex\n"
    (answer,) = agent_messages(done)
    assert answer.startswith("The tool returned: ") and "made-by-codex" in answer
    commands = [
        e["item"] for e in codex_events(done)
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
    done = codex_ok(codex.exec(call_block("close_agent", {"target": "nobody"})))
    (answer,) = agent_messages(done)
    assert answer.startswith("The tool returned: invalid agent id nobody"), answer
    first, second = stack.model_requests(wire)
    assert "close_agent" in json.dumps(first.json["tools"])
    assert "invalid agent id nobody" in json.dumps(second.json)


def test_codex_resume_last_sends_the_whole_history(
    codex: Codex, stack: Stack, upstream: object, wire: str
) -> None:
    codex_ok(codex.exec("first question"))
    done = codex_ok(codex.exec("resume", "--last", "second question"))
    assert agent_messages(done) == ["You said: second question (user turns: 2)"]
    last = json.dumps(stack.model_requests(wire)[-1].json)
    assert "first question" in last
    assert "You said: first question (user turns: 1)" in last


def test_codex_catalog_model_applies_a_freeform_patch(
    codex: Codex, stack: Stack, upstream: object, wire: str, model: str
) -> None:
    codex.use_catalog(model)
    patch = "*** Begin Patch\n*** Add File: hello.txt\n+hi from patch\n*** End Patch\n"
    done = codex_ok(codex.exec(call_block("apply_patch", patch)))
    assert (codex.workdir / "hello.txt").read_text() == "hi from patch\n"
    (answer,) = agent_messages(done)
    assert "Success. Updated the following files:\nA hello.txt" in answer


def test_codex_responses_lite_model_runs_a_command_through_namespaced_exec(
    codex: Codex, stack: Stack, upstream: object, wire: str
) -> None:
    # A catalog name with responses-lite requests: no `tools` key, an `additional_tools` input
    # item, commands run by JavaScript given to the freeform `exec` tool of namespace functions.
    config = codex.home / "config.toml"
    config.write_text(config.read_text().replace(MODELS[wire], CODEX_LITE_MODELS[wire], 1))
    script = (
        'const r = await tools.exec_command({cmd: "echo lite > lite.txt && cat lite.txt"});'
        " text(r.output);"
    )
    done = codex_ok(codex.exec(call_block("exec", script)))
    assert (codex.workdir / "lite.txt").read_text() == "lite\n"
    (answer,) = agent_messages(done)
    assert answer.startswith("The tool returned: Script completed") and "lite" in answer
    first = stack.model_requests(wire)[0].json
    assert first["model"] == CODEX_LITE_MODELS[wire]
    if wire == "responses":  # relayed as Codex sent it
        assert "tools" not in first and first["input"][0]["type"] == "additional_tools"
    else:  # lowered: the namespace's tools are functions, the custom one taking {"input"}
        names = [t["function"]["name"] for t in first["tools"]]
        assert "functions__exec" in names


def test_codex_sees_reasoning_and_replays_it(
    codex: Codex, stack: Stack, upstream: object, wire: str
) -> None:
    # Codex asks for reasoning summaries and reasoning.encrypted_content with store: false, and
    # sends each reasoning item back on the next request. Chat: the gateway shows the raw
    # reasoning as a summary and seals it into encrypted_content; Responses: the upstream's
    # summary is relayed, and its encrypted blob reaches the upstream again on Codex's replay.
    prompt = REASON + call_block("exec_command", {"cmd": "echo reasoned"})
    done = codex_ok(codex.exec(prompt))
    reasoning = [
        e["item"]["text"] for e in codex_events(done)
        if e.get("type") == "item.completed" and e["item"].get("type") == "reasoning"
    ]  # fmt: skip
    assert [r.strip("*") for r in reasoning] == [
        "Reasoning before step 1.",
        "Reasoning before step 2.",
    ]
    assert agent_messages(done)[-1].startswith("The tool returned: ")
    (rollout,) = (codex.home / "sessions").rglob("*.jsonl")
    replayed = [
        json.loads(line)["payload"] for line in rollout.read_text().splitlines()
        if '"type":"reasoning"' in line
    ]  # fmt: skip
    assert replayed and all(item.get("encrypted_content") for item in replayed), replayed
    if wire == "responses":  # the upstream gets its own blob back (however the gateway wraps it)
        assert "upstream-sealed-step-1" in json.dumps(stack.model_requests(wire)[1].json)


def test_codex_itself_refuses_wire_api_chat(codex_bin: Path, tmp_path: Path) -> None:
    # Why the README configures wire_api = "responses": Codex no longer speaks chat at all.
    home = tmp_path / "home"
    home.mkdir()
    config = provider_config("http://127.0.0.1:9/v1", MODELS["chat"])
    (home / "config.toml").write_text(config.replace('"responses"', '"chat"'))
    env = {"CODEX_HOME": str(home), "HOME": str(tmp_path), "GATEWAY_API_KEY": "unused"}
    argv = [str(codex_bin), "exec", "--skip-git-repo-check", "hi"]
    done = run_client(argv, env, cwd=tmp_path, timeout=30)
    assert done.returncode != 0
    assert '`wire_api = "chat"` is no longer supported' in done.stderr
