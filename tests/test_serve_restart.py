"""`responses-gateway serve` keeps its state in the SQLite file across restarts: responses, chains,
conversations and a pending MCP approval written by one process (killed with SIGKILL) are read and
continued by the next one on the same ``--db``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server

UNSET = {
    "UPSTREAM_BASE_URL",
    "GATEWAY_CONFIG",
    "DYNAMODB_TABLE",
    "GATEWAY_STORE",
    "GATEWAY_DB_PATH",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Served:
    """One ``serve`` process on a database file."""

    def __init__(self, db: Path, home: Path) -> None:
        self.port = _free_port()
        env = {k: v for k, v in os.environ.items() if k not in UNSET}
        env.update(MCP_ALLOW_HTTP="1", MCP_ALLOW_LOOPBACK="1", XDG_DATA_HOME=str(home))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "responses_gateway.cli", "serve"]
            + ["--port", str(self.port), "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        with httpx.Client(timeout=1.0) as client:
            for _ in range(400):  # bounded: each failed attempt waits up to the connect timeout
                if self.proc.poll() is not None:
                    out = self.proc.stdout.read() if self.proc.stdout else ""
                    raise AssertionError(f"serve exited early: {out}")
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    with pytest.raises(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=0.05)  # yields the CPU; returns if serve dies
        raise AssertionError("serve never became healthy")

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=15)


@pytest.fixture
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


def test_restart_on_same_db_reads_back_state_and_continues_a_pending_approval(
    tmp_path: Path, calc: RunningMcpServer
) -> None:
    db = tmp_path / "state" / "gateway.db"
    db.parent.mkdir()  # --db names a file in an existing directory
    tool: Any = {"type": "mcp", "server_label": "calc", "server_url": calc.url}
    first = Served(db, tmp_path)
    try:
        with first.client() as client:
            root = client.responses.create(model="demo", input="Hello gateway")
            chained = client.responses.create(
                model="demo", input="Hello again", previous_response_id=root.id
            )
            conversation = client.conversations.create(
                metadata={"topic": "restart"}, items=[{"role": "user", "content": "kept?"}]
            )
            in_conversation = client.responses.create(
                model="demo", input="Inside", conversation=conversation.id
            )
            pending = client.responses.create(
                model="demo", input="Please divide 6 by 3", tools=[tool]
            )
        assert [i.type for i in pending.output] == ["mcp_list_tools", "mcp_approval_request"]
    finally:
        first.kill()  # SIGKILL: no shutdown hook runs
    assert first.proc.returncode == -9

    second = Served(db, tmp_path)
    try:
        with second.client() as client:
            assert client.responses.retrieve(root.id).output_text == root.output_text
            again = client.responses.retrieve(chained.id)
            assert again.output_text == "Hello! You said: Hello again"
            assert again.previous_response_id == root.id
            items = client.responses.input_items.list(chained.id, order="asc")
            assert [i.content[0].text for i in items.data] == ["Hello again"]  # type: ignore[union-attr]
            stored = client.conversations.retrieve(conversation.id)
            assert stored.metadata == {"topic": "restart"}
            listed = client.conversations.items.list(conversation.id, order="asc")
            assert [i.type for i in listed.data] == ["message", "message", "message"]
            assert listed.data[0].content[0].text == "kept?"  # type: ignore[union-attr]
            assert listed.data[2].content[0].text == in_conversation.output_text  # type: ignore[union-attr]
            continued = client.responses.create(
                model="demo", input="And now?", previous_response_id=chained.id
            )
            assert continued.previous_response_id == chained.id

            request = pending.output[1]
            approved = client.responses.create(
                model="demo",
                input=[
                    {
                        "type": "mcp_approval_response",
                        "approval_request_id": request.id,
                        "approve": True,
                    }
                ],
                tools=[tool],
                previous_response_id=pending.id,
            )
        assert [i.type for i in approved.output] == ["mcp_call", "message"]
        call = approved.output[0]
        assert call.approval_request_id == request.id and call.output == "2.0"  # type: ignore[union-attr]
        assert approved.output_text == "The tool returned: 2.0"
    finally:
        second.stop()
