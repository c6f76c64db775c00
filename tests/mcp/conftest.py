"""Fixtures for the MCP layer: real SDK servers on loopback, a client allowed to dial them, spies.

The servers start once per session (each in its own uvicorn thread). Tests are local, so the
client's policy allows http and loopback; the SSRF tests build their own strict policies.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from responses_gateway.mcp import McpClient, McpPolicy
from responses_gateway.testing.mcp_servers import McpServerPool


@pytest.fixture(scope="session")
def mcp_servers() -> Iterator[McpServerPool]:
    pool = McpServerPool()
    yield pool
    pool.stop()


@pytest.fixture
def client() -> McpClient:
    """A client with the policy of a local development setup (http and loopback allowed)."""
    return McpClient(McpPolicy(allow_http=True, allow_loopback=True))


@pytest.fixture
def dialled(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every address a socket tried to connect to during the test (connecting is refused)."""
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> Any:
        attempts.append(address)
        raise ConnectionRefusedError("test spy: no connections allowed")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


@pytest.fixture
def unused_port() -> Iterator[int]:
    """A loopback port that refuses connections (bound, never listening)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    yield int(sock.getsockname()[1])
    sock.close()
