"""The worker function's container: one event loop and one gateway for every invocation, and
shared MCP servers kept warm on that loop."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from responses_gateway import observability
from responses_gateway.background import entry


class _Gateway:
    def __init__(self) -> None:
        self.kept: list[Any] = []

    def keep_shared_mcp(self, loop: Any) -> None:
        self.kept.append(loop)


def test_the_container_loop_serves_every_invocation_and_keeps_shared_mcp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gateway = _Gateway()
    built: list[str] = []

    def lambda_app(function: str) -> Any:
        built.append(function)
        return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(gateway=gateway)))

    monkeypatch.setattr(observability, "lambda_app", lambda_app)
    monkeypatch.setattr(entry._Runtime, "loop", None)
    monkeypatch.setattr(entry._Runtime, "gateway", None)
    try:
        loop, first = entry._gateway()
        again, second = entry._gateway()
    finally:
        if entry._Runtime.loop is not None:
            entry._Runtime.loop.close()

    assert (again, second) == (loop, first) and first is gateway  # type: ignore[comparison-overlap]
    assert built == ["worker"]
    assert gateway.kept == [loop]
