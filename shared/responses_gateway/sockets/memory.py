"""A connection's memory: the latest response of each of its streams.

Owns what WebSocket mode keeps between two creates on one connection: per ``stream_id``, the
latest finished response with everything a continuation needs (its full history: the items it
continued, its input and its output), whether it was stored, and its stored chain. A create whose
``previous_response_id`` names one of these continues from memory, stored or not; nothing here
reads or writes the response table. :class:`LocalMemory` keeps it in process (a socket served by
this app); the API Gateway transport keeps it in DynamoDB (:mod:`responses_gateway.sockets.aws`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["DEFAULT_STREAM", "ConnectionMemory", "Latest", "LocalMemory"]

DEFAULT_STREAM = ""
"""The stream of creates that name no ``stream_id``."""


@dataclass(slots=True)
class Latest:
    """The latest response of one stream."""

    response_id: str
    history: list[dict[str, Any]] = field(default_factory=list)
    """Every item a continuation carries: the context it continued, its input, its output."""
    chain: list[str] = field(default_factory=list)
    """Its stored ancestors (oldest first); empty when it or an ancestor was not stored."""
    stored: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "response_id": self.response_id,
            "history": self.history,
            "chain": self.chain,
            "stored": self.stored,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Latest:
        return cls(
            response_id=str(data["response_id"]),
            history=list(data.get("history") or []),
            chain=list(data.get("chain") or []),
            stored=bool(data.get("stored", True)),
        )


class ConnectionMemory(Protocol):
    """Where a connection keeps the latest response of each stream."""

    async def find(self, response_id: str) -> Latest | None:
        """The stream's latest response with this id, on any stream of the connection."""
        ...

    async def remember(self, stream_id: str, latest: Latest) -> None:
        """Make ``latest`` the latest response of ``stream_id`` (and the stream idle)."""
        ...

    async def release(self, stream_id: str) -> None:
        """The stream's create ended before its loop ran: the stream is idle again."""
        ...

    async def forget(self, response_id: str) -> None:
        """A continuation of ``response_id`` failed: the connection no longer holds it (a
        ``store: false`` response then reads ``previous_response_not_found``)."""
        ...


class LocalMemory:
    """A connection's memory in process (lost with the connection, as the mode specifies)."""

    def __init__(self) -> None:
        self._latest: dict[str, Latest] = {}

    async def find(self, response_id: str) -> Latest | None:
        for latest in self._latest.values():
            if latest.response_id == response_id:
                return latest
        return None

    async def remember(self, stream_id: str, latest: Latest) -> None:
        self._latest[stream_id] = latest

    async def release(self, stream_id: str) -> None:
        return None  # the session tracks its own streams' runs

    async def forget(self, response_id: str) -> None:
        for stream, latest in list(self._latest.items()):
            if latest.response_id == response_id:
                del self._latest[stream]

    def streams(self) -> dict[str, str]:
        """Each stream's latest response id (for tests and diagnostics)."""
        return {stream: latest.response_id for stream, latest in self._latest.items()}
