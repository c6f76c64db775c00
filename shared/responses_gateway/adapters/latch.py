"""The ``auto`` wire's upgrade latch: which providers this process speaks Responses to.

Owns :class:`UpgradeLatch` and the process-wide :data:`PROCESS_LATCH` (re-exported by
:mod:`responses_gateway.adapters.select`, which latches and reads it). Kept apart from the
adapters so the app can hold the latch without importing them (a function that never calls a
model never does). Holds provider URLs only, never tenant data; decides nothing.
"""

from __future__ import annotations

import threading

__all__ = ["PROCESS_LATCH", "UpgradeLatch"]


class UpgradeLatch:
    """Providers (by base URL) upgraded from Chat Completions to Responses in this process."""

    def __init__(self) -> None:
        self._upgraded: set[str] = set()
        self._lock = threading.Lock()

    def is_upgraded(self, base_url: str) -> bool:
        return base_url in self._upgraded

    def upgrade(self, base_url: str) -> None:
        with self._lock:
            self._upgraded.add(base_url)

    def clear(self) -> None:
        with self._lock:
            self._upgraded.clear()


PROCESS_LATCH = UpgradeLatch()
"""The process-wide latch. It holds provider URLs only, never tenant data."""
