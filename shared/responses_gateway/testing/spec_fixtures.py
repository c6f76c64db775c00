"""The pytest side of the spec tap: fixtures a test directory's conftest imports so that every
gateway app its tests serve is held to both specs.

Owns :func:`spec_taps` (session: every app :func:`~responses_gateway.testing.server.run_in_thread`
serves while the session runs is wrapped by :class:`~responses_gateway.testing.spec_tap.
GatewayTaps`), :func:`spec_conformance` (autouse: a test after which anything a gateway sent broke
a spec fails at teardown, naming it) and the :func:`pytest_terminal_summary` hook (the session's
totals). A conftest imports the three names; nothing here runs otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from responses_gateway.testing.server import tapping
from responses_gateway.testing.spec_oracle import spec_oracle
from responses_gateway.testing.spec_tap import GatewayTaps

__all__ = ["pytest_terminal_summary", "spec_conformance", "spec_taps"]


@pytest.fixture(scope="session", autouse=True)
def spec_taps() -> Iterator[GatewayTaps]:
    taps = GatewayTaps()
    with tapping(taps.wrap):
        yield taps


@pytest.fixture(autouse=True)
def spec_conformance(spec_taps: GatewayTaps) -> Iterator[None]:
    """Fails the test if anything a gateway sent during it broke either spec."""
    spec_taps.take()
    yield
    found = spec_taps.take()
    if found:
        more = f"\n... and {len(found) - 10} more" if len(found) > 10 else ""
        shown = "\n".join(found[:10]) + more
        pytest.fail(f"{len(found)} emitted objects break a spec:\n{shown}", pytrace=False)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The session's totals: how many objects of each kind were held to both specs."""
    counts = spec_oracle().counts if spec_oracle.cache_info().currsize else None
    if counts:
        shown = ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items()))
        terminalreporter.write_line(f"spec oracle (OpenAI + Open Responses): {shown}")
