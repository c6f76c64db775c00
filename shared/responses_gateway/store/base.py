"""The repository interface for server-side state, and its records.

Owns what the rest of the gateway may ask of storage: stored responses (one record per response:
the rendered Response object, its own input items, its links) and conversations (metadata plus an
ordered list of items). Implementations (``store.dynamo``) own keys, item layout, chunking of large
payloads, TTL and consistency; callers never see DynamoDB shapes.

Every call is scoped to a ``tenant`` (the API key's identity; ``"local"`` when serving locally):
a record created by one tenant is invisible to another. Expired records are reported as missing
even before DynamoDB's TTL sweeper deletes them. Records never hold secrets: callers pass the
echoed request (MCP ``headers``/``authorization`` already dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "RECORD_VERSION",
    "Conversation",
    "ConversationStore",
    "ItemPage",
    "ResponseStore",
    "Store",
    "StoredResponse",
]

RECORD_VERSION = 1
"""Schema version written on every record."""


@dataclass(slots=True)
class StoredResponse:
    """One stored response."""

    tenant: str
    id: str
    response: dict[str, Any]
    """The rendered Response object (status, output, usage, echoed request fields)."""
    input_items: list[dict[str, Any]]
    """This response's own input items (not the history), each with an ``id``, in order."""
    chain: list[str] = field(default_factory=list)
    """Ids of the responses this one continues, oldest first (``previous_response_id`` is last)."""
    conversation_id: str | None = None
    expires_at: int = 0
    """Unix seconds after which the record is gone (DynamoDB TTL attribute)."""

    @property
    def status(self) -> str:
        return str(self.response.get("status"))

    @property
    def output(self) -> list[dict[str, Any]]:
        return list(self.response.get("output") or [])


@dataclass(slots=True)
class Conversation:
    """A conversation's metadata (its items are read separately)."""

    tenant: str
    id: str
    created_at: int
    metadata: dict[str, str] = field(default_factory=dict)
    expires_at: int = 0

    def to_object(self) -> dict[str, Any]:
        """The API's ``Conversation`` object."""
        return {
            "id": self.id,
            "object": "conversation",
            "created_at": self.created_at,
            "metadata": dict(self.metadata),
        }


@dataclass(slots=True)
class ItemPage:
    """One page of a conversation's items."""

    data: list[dict[str, Any]]
    has_more: bool


class ResponseStore(Protocol):
    """Stored responses."""

    async def put_response(self, record: StoredResponse) -> None:
        """Write (or overwrite) a response record, all of it or nothing."""
        ...

    async def get_response(self, tenant: str, response_id: str) -> StoredResponse | None:
        """A strongly consistent read; None when missing, deleted or expired."""
        ...

    async def get_responses(self, tenant: str, response_ids: list[str]) -> list[StoredResponse]:
        """Several records in a bounded number of round trips (strongly consistent), in the
        order asked; missing, deleted or expired ones are left out."""
        ...

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        """Delete a record; False when there was none (or it had expired)."""
        ...


class ConversationStore(Protocol):
    """Conversations and their ordered items."""

    async def create_conversation(
        self, conversation: Conversation, items: list[dict[str, Any]]
    ) -> None:
        """Create a conversation with initial items (each with an ``id``)."""
        ...

    async def get_conversation(self, tenant: str, conversation_id: str) -> Conversation | None: ...

    async def update_conversation(
        self, tenant: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        """Replace the metadata; None when the conversation does not exist."""
        ...

    async def delete_conversation(self, tenant: str, conversation_id: str) -> bool: ...

    async def append_items(
        self, tenant: str, conversation_id: str, items: list[dict[str, Any]]
    ) -> None:
        """Append items (each with an ``id``) atomically and in order: concurrent appends never
        lose or interleave items. Raises ``LookupError`` when the conversation does not exist."""
        ...

    async def list_items(
        self,
        tenant: str,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: Literal["asc", "desc"] = "desc",
    ) -> ItemPage:
        """A page of items after the item with id ``after`` (exclusive), in ``order``."""
        ...

    async def all_items(self, tenant: str, conversation_id: str) -> list[dict[str, Any]]:
        """Every item, oldest first (the context of a response in this conversation)."""
        ...

    async def get_item(
        self, tenant: str, conversation_id: str, item_id: str
    ) -> dict[str, Any] | None: ...

    async def delete_item(self, tenant: str, conversation_id: str, item_id: str) -> bool: ...


class Store(ResponseStore, ConversationStore, Protocol):
    """Everything the gateway persists."""
