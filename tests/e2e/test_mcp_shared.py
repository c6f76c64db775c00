"""An operator stdio server marked ``shared``: one process serves every run of the gateway
process, and stops with it.

The server is ``tests/mcp/stdio_server.py``, started through code that first logs its pid; the
gateway is its own app (served with its lifespan, as ``serve`` and the streaming function are)
in front of the session's scripted upstream and DynamoDB; the client is the ``openai`` SDK.
"""

from __future__ import annotations

import sys
from pathlib import Path

import openai

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.testing.processes import alive, logged_pids, pid_logging_code
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import run_in_thread

from .conftest import MODELS, Stack

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "mcp" / "stdio_server.py"
ECHO_TOOL = {"type": "mcp", "server_label": "local", "require_approval": "never"}


def _config(upstream_url: str, log: Path, *, shared: bool) -> dict[str, object]:
    code = pid_logging_code(SERVER_SCRIPT, log)
    return {
        "providers": [{"name": "chat", "base_url": upstream_url, "api": "chat"}],
        "mcp_servers": [
            {
                "server_label": "local",
                "command": sys.executable,
                "args": ["-c", code],
                "shared": shared,
            }
        ],
    }


def _run_two_creates(
    stack: Stack, upstream: ScriptedUpstream, log: Path, *, shared: bool
) -> tuple[list[str], list[int]]:
    config = parse_config(_config(f"{stack.upstream_server.url}/v1", log, shared=shared), {})
    app = create_app(config, stack.open_store(), mcp_policy=McpPolicy())
    outputs: list[str] = []
    with run_in_thread(app) as server:
        with openai.OpenAI(
            base_url=f"{server.url}/v1", api_key="sk-client", max_retries=0
        ) as client:
            for word in ("first", "second"):
                call = ToolCall("local__echo", f'{{"text":"{word}"}}', f"call_{word}")
                upstream.push(Turn(tool_calls=[call]), Turn(text="Echoed."))
                response = client.responses.create(
                    model=MODELS["chat"], input=f"Echo {word}", tools=[ECHO_TOOL]
                )
                assert [item.type for item in response.output] == [
                    "mcp_list_tools",
                    "mcp_call",
                    "message",
                ]
                outputs.append(response.output[1].output)  # type: ignore[union-attr]
        pids = logged_pids(log)
        assert all(alive(pid) for pid in pids) == shared
    return outputs, pids


def test_a_shared_server_serves_every_run_and_stops_with_the_gateway(
    stack: Stack, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    outputs, pids = _run_two_creates(stack, upstream, tmp_path / "spawns", shared=True)

    assert outputs == ["first", "second"]
    assert len(pids) == 1  # one process for both responses (and both listings)
    assert not alive(pids[0])  # the app's shutdown stopped it


def test_a_server_not_shared_is_started_for_each_run(
    stack: Stack, upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    outputs, pids = _run_two_creates(stack, upstream, tmp_path / "spawns", shared=False)

    assert outputs == ["first", "second"]
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)
