"""Routes of ``/v1/responses``: create, retrieve, delete, input items, input tokens, compact.

Owns the response shapes of these routes and which body each door takes (a
:class:`~responses_gateway.api.routes.Door`: validated before the handler runs, by
:mod:`responses_gateway.api.doors`). Creating runs the shared loop through
:mod:`responses_gateway.api.create` (imported on the first create: the buffered function serves
none) and :mod:`responses_gateway.api.streaming`; everything else reads or deletes stored
records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from responses_gateway.api.deps import gateway_of, list_object, page_params, tenant_of, timing_of
from responses_gateway.api.routes import Door, RouteTable
from responses_gateway.background.records import current_response
from responses_gateway.background.runs import cancel_run, end_if_lost
from responses_gateway.errors import InvalidRequestError, NotFoundError
from responses_gateway.loop.render import upgraded
from responses_gateway.protocol.contract import include_gated
from responses_gateway.store.base import StoredResponse
from responses_gateway.tool_kinds import shown

__all__ = ["router", "routes"]

routes = RouteTable("/v1/responses")
__getattr__ = routes.module_getattr(__name__)

if TYPE_CHECKING:
    from fastapi import APIRouter

    from responses_gateway.protocol.bodies import CompactRequest, InputTokensRequest
    from responses_gateway.protocol.request import CreateResponseRequest

    router: APIRouter
    """These routes as one FastAPI router (built on first access)."""


def _not_found(response_id: str) -> NotFoundError:
    return NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")


async def _stored(request: Request, response_id: str) -> StoredResponse:
    record = await gateway_of(request).store.get_response(tenant_of(request), response_id)
    if record is None:
        raise _not_found(response_id)
    return record


_MODELS = "responses_gateway.protocol."
CREATE = Door(_MODELS + "request:CreateResponseRequest")
INPUT_TOKENS = Door(_MODELS + "bodies:InputTokensRequest")
COMPACT = Door(_MODELS + "bodies:CompactRequest")


@routes.post("", body=CREATE)
async def create_response(request: Request, body: CreateResponseRequest) -> Response:
    from responses_gateway.api.create import create  # the create path: on first use

    return await create(request, body)


OMITTED_TOOLS_HEADER = "x-gateway-omitted-tools"
"""Names the hosted tool types the model did not see (comma-separated); see docs/tools.md."""


DEPLOYMENT_HEADER = "x-gateway-deployment"
"""Routed models: the deployments that answered the model calls so far (comma-separated, in
order; a stream names those before its first output); see docs/routing.md."""


@routes.post("/input_tokens", body=INPUT_TOKENS)
async def count_input_tokens(request: Request, body: InputTokensRequest) -> JSONResponse:
    """The input tokens a create with this body would send, by the upstream's tokenizer where it
    has one; the ``x-token-count-source`` header says how they were counted."""
    from responses_gateway.compact import SOURCE_HEADER, count_input_tokens

    counted = await count_input_tokens(gateway_of(request), body, tenant_of(request))
    return JSONResponse(
        {"object": "response.input_tokens", "input_tokens": counted.tokens},
        headers={SOURCE_HEADER: counted.source},
    )


@routes.post("/compact", body=COMPACT)
async def compact_conversation(request: Request, body: CompactRequest) -> dict[str, Any]:
    """Compact a conversation: its user messages and one ``compaction`` item (see
    :mod:`responses_gateway.compact`)."""
    from responses_gateway.compact import compact

    return await compact(gateway_of(request), body, tenant_of(request))


def _starting_after(request: Request) -> int:
    raw = request.query_params.get("starting_after")
    if raw is None:
        return -1
    try:
        value = int(raw)
    except ValueError:
        value = -1
        raw = None
    if raw is None or value < 0:
        raise InvalidRequestError(
            "Invalid 'starting_after': expected a non-negative integer.",
            param="starting_after",
            code="invalid_value",
        )
    return value


def read_include(request: Request) -> list[str]:
    """The ``include`` query parameters of a read (``include[]=...`` or ``include=...``)."""
    return request.query_params.getlist("include[]") + request.query_params.getlist("include")


def _shown(response: Any, request: Request) -> Any:
    """A stored response as this read sees it: item result fields only when its ``include``
    query parameters ask for them (the record keeps them for later turns), and every key both
    specs require (a record an older version stored: :func:`~responses_gateway.loop.render.
    upgraded`)."""
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        return response
    include = read_include(request)
    return {**upgraded(response), "output": [shown(item, include) for item in response["output"]]}


@routes.get("/{response_id}")
async def retrieve_response(request: Request, response_id: str) -> Any:
    record = await _stored(request, response_id)
    gateway = gateway_of(request)
    if request.query_params.get("stream") != "true":
        response = await end_if_lost(gateway, record, await current_response(gateway.store, record))
        return _shown(response, request)
    after = _starting_after(request)
    checkpoint = await gateway.store.get_checkpoint(record.tenant, record.id)
    if checkpoint is None:
        raise InvalidRequestError(
            "This response cannot be streamed because it was not created with background=true.",
            param="stream",
            code="invalid_value",
        )
    if not checkpoint.run.get("stream"):
        raise InvalidRequestError(
            "This response cannot be streamed because it was not created with stream=true.",
            param="stream",
            code="invalid_value",
        )
    from responses_gateway.api.streaming import stream_log

    return stream_log(gateway, record.tenant, record.id, after, timing_of(request))


@routes.post("/{response_id}/cancel")
async def cancel_response(request: Request, response_id: str) -> dict[str, Any]:
    return await cancel_run(gateway_of(request), await _stored(request, response_id))


@routes.delete("/{response_id}")
async def delete_response(request: Request, response_id: str) -> dict[str, Any]:
    if not await gateway_of(request).store.delete_response(tenant_of(request), response_id):
        raise _not_found(response_id)
    return {"id": response_id, "object": "response", "deleted": True}


@routes.get("/{response_id}/input_items")
async def list_input_items(request: Request, response_id: str) -> dict[str, Any]:
    tenant_of(request)  # authenticate before validating anything else (401 before 400)
    page = page_params(request)
    items = (await _stored(request, response_id)).input_items
    ordered = items if page.order == "asc" else items[::-1]
    start = 0
    if page.after is not None:
        ids = [item.get("id") for item in ordered]
        if page.after not in ids:
            raise NotFoundError(f"Item with id '{page.after}' not found.", param="after")
        start = ids.index(page.after) + 1
    include = read_include(request)  # input image URLs only when asked for (results as stored)
    page_items = ordered[start : start + page.limit]
    data = [include_gated(item, include, results=False) for item in page_items]
    return list_object(data, has_more=start + page.limit < len(ordered))
