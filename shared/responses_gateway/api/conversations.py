"""Routes of ``/v1/conversations``: the conversation and its ordered items.

Owns the response shapes of the Conversations API. The bodies are each door's model
(:mod:`responses_gateway.protocol.bodies`, validated before a handler runs); items are validated
as a response's input items, canonicalized like them (every item gets an id, references
resolved) and stored completed into the spec's item resources, so every item read back
validates; appends are ordered and atomic in the store.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from responses_gateway.api.deps import (
    gateway_of,
    list_object,
    page_params,
    tenant_of,
)
from responses_gateway.api.responses import read_include
from responses_gateway.api.routes import Door, RouteTable
from responses_gateway.errors import NotFoundError
from responses_gateway.ids import new_id
from responses_gateway.protocol.contract import include_gated
from responses_gateway.service import conversation_not_found
from responses_gateway.store.base import Conversation

__all__ = ["router", "routes"]

routes = RouteTable("/v1/conversations")
__getattr__ = routes.module_getattr(__name__)

if TYPE_CHECKING:
    from fastapi import APIRouter

    from responses_gateway.protocol.bodies import (
        ConversationCreateRequest,
        ConversationItemsRequest,
        ConversationUpdateRequest,
    )

    router: APIRouter
    """These routes as one FastAPI router (built on first access)."""

_MODELS = "responses_gateway.protocol.bodies:"
CREATE = Door(_MODELS + "ConversationCreateRequest", empty=True)
UPDATE = Door(_MODELS + "ConversationUpdateRequest")
ADD_ITEMS = Door(_MODELS + "ConversationItemsRequest")


async def _stored_items(request: Request, items: list[Any] | None) -> list[dict[str, Any]]:
    """Validated items as a conversation stores them: canonical (ids minted), references to the
    tenant's stored items resolved (else 400 ``item_not_found`` on ``items[i]``), and completed
    into the spec's item resources (``status`` and the rest: see
    :mod:`responses_gateway.protocol.resources`)."""
    if not items:
        return []
    from responses_gateway.loop.prepared import prepare_input, reference_ids  # on first use
    from responses_gateway.protocol.request import input_items
    from responses_gateway.protocol.resources import stored_item

    raw = input_items(items)
    wanted = reference_ids(raw)
    store = gateway_of(request).store
    resolved = await store.get_items(tenant_of(request), wanted) if wanted else {}
    prepared = prepare_input(raw, resolved=resolved, param="items")
    return [stored_item(item) for item in prepared.items]


async def _conversation(request: Request, conversation_id: str) -> Conversation:
    found = await gateway_of(request).store.get_conversation(tenant_of(request), conversation_id)
    if found is None:
        raise conversation_not_found(conversation_id)
    return found


def _item_not_found(item_id: str) -> NotFoundError:
    return NotFoundError(f"Item with id '{item_id}' not found.", param="item_id")


@routes.post("", body=CREATE)
async def create_conversation(request: Request, body: ConversationCreateRequest) -> dict[str, Any]:
    conversation = Conversation(
        tenant=tenant_of(request),
        id=new_id("conv"),
        created_at=int(time.time()),
        metadata=dict(body.metadata or {}),
    )
    items = await _stored_items(request, body.items)
    await gateway_of(request).store.create_conversation(conversation, items)
    return conversation.to_object()


@routes.get("/{conversation_id}")
async def retrieve_conversation(request: Request, conversation_id: str) -> dict[str, Any]:
    return (await _conversation(request, conversation_id)).to_object()


@routes.post("/{conversation_id}", body=UPDATE)
async def update_conversation(
    request: Request, body: ConversationUpdateRequest, conversation_id: str
) -> dict[str, Any]:
    updated = await gateway_of(request).store.update_conversation(
        tenant_of(request), conversation_id, dict(body.metadata or {})
    )
    if updated is None:
        raise conversation_not_found(conversation_id)
    return updated.to_object()


@routes.delete("/{conversation_id}")
async def delete_conversation(request: Request, conversation_id: str) -> dict[str, Any]:
    if not await gateway_of(request).store.delete_conversation(tenant_of(request), conversation_id):
        raise conversation_not_found(conversation_id)
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


@routes.post("/{conversation_id}/items", body=ADD_ITEMS)
async def create_items(
    request: Request, body: ConversationItemsRequest, conversation_id: str
) -> dict[str, Any]:
    await _conversation(request, conversation_id)
    items = await _stored_items(request, body.items)
    try:
        await gateway_of(request).store.append_items(tenant_of(request), conversation_id, items)
    except LookupError:
        raise conversation_not_found(conversation_id) from None
    include = read_include(request)
    return list_object([include_gated(i, include) for i in items], has_more=False)


@routes.get("/{conversation_id}/items")
async def list_items(request: Request, conversation_id: str) -> dict[str, Any]:
    tenant_of(request)  # authenticate before validating anything else (401 before 400)
    page = page_params(request)
    await _conversation(request, conversation_id)
    gateway = gateway_of(request)
    if page.after is not None and (
        await gateway.store.get_item(tenant_of(request), conversation_id, page.after) is None
    ):
        raise _item_not_found(page.after)
    found = await gateway.store.list_items(
        tenant_of(request), conversation_id, after=page.after, limit=page.limit, order=page.order
    )
    include = read_include(request)  # image URLs, tool results: only when asked for
    return list_object([include_gated(i, include) for i in found.data], has_more=found.has_more)


@routes.get("/{conversation_id}/items/{item_id}")
async def retrieve_item(request: Request, conversation_id: str, item_id: str) -> dict[str, Any]:
    await _conversation(request, conversation_id)
    item = await gateway_of(request).store.get_item(tenant_of(request), conversation_id, item_id)
    if item is None:
        raise _item_not_found(item_id)
    return include_gated(item, read_include(request))


@routes.delete("/{conversation_id}/items/{item_id}")
async def delete_item(request: Request, conversation_id: str, item_id: str) -> dict[str, Any]:
    conversation = await _conversation(request, conversation_id)
    if not await gateway_of(request).store.delete_item(
        tenant_of(request), conversation_id, item_id
    ):
        raise _item_not_found(item_id)
    return conversation.to_object()
