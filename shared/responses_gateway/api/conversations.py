"""Routes of ``/v1/conversations``: the conversation and its ordered items.

Owns request parsing and response shapes of the Conversations API. Items are canonicalized like a
response's input (every item gets an id); appends are ordered and atomic in the store.
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
from responses_gateway.api.limits import read_json
from responses_gateway.api.responses import read_include
from responses_gateway.api.routes import RouteTable
from responses_gateway.errors import InvalidRequestError, NotFoundError
from responses_gateway.ids import new_id
from responses_gateway.protocol.contract import include_gated
from responses_gateway.service import conversation_not_found
from responses_gateway.store.base import Conversation

__all__ = ["router", "routes"]

routes = RouteTable("/v1/conversations")
__getattr__ = routes.module_getattr(__name__)

if TYPE_CHECKING:
    from fastapi import APIRouter

    router: APIRouter
    """These routes as one FastAPI router (built on first access)."""

_MAX_ITEMS = 20


async def _body(request: Request) -> dict[str, Any]:
    tenant_of(request)  # authenticate before reading the body
    data, _ = await read_json(request, allow_empty=True)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidRequestError("The request body must be a JSON object.", code="invalid_type")
    return data


def _metadata(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequestError(
            "Invalid type for 'metadata': expected an object.",
            param="metadata",
            code="invalid_type",
        )
    if len(value) > 16:
        raise InvalidRequestError(
            "Invalid 'metadata': too many properties. Expected an object with at most 16 "
            f"properties, but got an object with {len(value)} properties instead.",
            param="metadata",
            code="object_above_max_properties",
        )
    for key, item in value.items():
        if len(key) > 64:
            raise InvalidRequestError(
                f"Invalid 'metadata': key '{key[:70]}' is longer than 64 characters.",
                param="metadata",
                code="string_above_max_length",
            )
        if not isinstance(item, str) or len(item) > 512:
            raise InvalidRequestError(
                f"Invalid 'metadata.{key}': expected a string of at most 512 characters.",
                param=f"metadata.{key}",
                code="invalid_value",
            )
    return dict(value)


def _items(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(i, dict) for i in value):
        raise InvalidRequestError(
            "Invalid type for 'items': expected an array of objects.",
            param="items",
            code="invalid_type",
        )
    if len(value) > _MAX_ITEMS:
        raise InvalidRequestError(
            f"Invalid 'items': array too long. Expected an array with maximum length "
            f"{_MAX_ITEMS}, but got an array with length {len(value)} instead.",
            param="items",
            code="array_above_max_length",
        )
    from responses_gateway.loop.prepared import prepare_input  # a create's: on first use
    from responses_gateway.protocol.request import parse_create_request, request_input

    try:  # the same item rules as a response's input
        parsed = parse_create_request({"model": "-", "input": value})
    except InvalidRequestError as error:
        if error.param and error.param.startswith("input"):
            error.param = "items" + error.param.removeprefix("input")
            error.message = error.message.replace("'input", "'items")
        raise
    return prepare_input(request_input(parsed)).items


async def _conversation(request: Request, conversation_id: str) -> Conversation:
    found = await gateway_of(request).store.get_conversation(tenant_of(request), conversation_id)
    if found is None:
        raise conversation_not_found(conversation_id)
    return found


def _item_not_found(item_id: str) -> NotFoundError:
    return NotFoundError(f"Item with id '{item_id}' not found.", param="item_id")


@routes.post("")
async def create_conversation(request: Request) -> dict[str, Any]:
    data = await _body(request)
    conversation = Conversation(
        tenant=tenant_of(request),
        id=new_id("conv"),
        created_at=int(time.time()),
        metadata=_metadata(data.get("metadata")),
    )
    await gateway_of(request).store.create_conversation(conversation, _items(data.get("items")))
    return conversation.to_object()


@routes.get("/{conversation_id}")
async def retrieve_conversation(request: Request, conversation_id: str) -> dict[str, Any]:
    return (await _conversation(request, conversation_id)).to_object()


@routes.post("/{conversation_id}")
async def update_conversation(request: Request, conversation_id: str) -> dict[str, Any]:
    data = await _body(request)
    if "metadata" not in data:
        raise InvalidRequestError(
            "Missing required parameter: 'metadata'.",
            param="metadata",
            code="missing_required_parameter",
        )
    updated = await gateway_of(request).store.update_conversation(
        tenant_of(request), conversation_id, _metadata(data["metadata"])
    )
    if updated is None:
        raise conversation_not_found(conversation_id)
    return updated.to_object()


@routes.delete("/{conversation_id}")
async def delete_conversation(request: Request, conversation_id: str) -> dict[str, Any]:
    if not await gateway_of(request).store.delete_conversation(tenant_of(request), conversation_id):
        raise conversation_not_found(conversation_id)
    return {"id": conversation_id, "object": "conversation.deleted", "deleted": True}


@routes.post("/{conversation_id}/items")
async def create_items(request: Request, conversation_id: str) -> dict[str, Any]:
    data = await _body(request)
    if "items" not in data:
        raise InvalidRequestError(
            "Missing required parameter: 'items'.",
            param="items",
            code="missing_required_parameter",
        )
    items = _items(data["items"])
    await _conversation(request, conversation_id)
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
