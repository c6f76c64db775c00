"""Route of ``/v1/traces/ingest``: where the agents SDK's exporter sends traces and spans.

Owns the shape check of an ingest batch (``{"data": [trace | trace.span, ...]}``, OpenAI's
``OpenAI-Beta: traces=v1`` endpoint) and its answer, 204. Objects are stored for the key's
tenant through :class:`~responses_gateway.store.base.TraceStore`; reading them is the console's
(:mod:`responses_gateway.api.console`). It never logs span contents.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from responses_gateway.api.deps import UntypedRoute, gateway_of, tenant_of
from responses_gateway.api.limits import read_json
from responses_gateway.errors import InvalidRequestError

__all__ = ["MAX_BATCH", "router", "split_batch"]

router = APIRouter(prefix="/v1/traces", route_class=UntypedRoute)

MAX_BATCH = 1000
"""Most objects in one ingest batch (the SDK's exporter sends at most 128)."""
_ID_LIMIT = 200


def _bad(message: str, param: str) -> InvalidRequestError:
    return InvalidRequestError(message, param=param, code="invalid_value")


def _check_id(value: Any, param: str) -> str:
    if not isinstance(value, str) or not value or len(value) > _ID_LIMIT:
        raise _bad(f"Invalid '{param}': expected a non-empty string id.", param)
    return value


def split_batch(body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The traces and spans of an ingest body.

    Raises:
        InvalidRequestError: not ``{"data": [...]}``, too many objects, an object that is
            neither a trace nor a span, or one without its ids.
    """
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise _bad('Invalid body: expected {"data": [trace or span objects]}.', "data")
    if len(data) > MAX_BATCH:
        raise _bad(f"Invalid 'data': at most {MAX_BATCH} objects per batch.", "data")
    traces: list[dict[str, Any]] = []
    spans: list[dict[str, Any]] = []
    for index, item in enumerate(data):
        kind = item.get("object") if isinstance(item, dict) else None
        if kind == "trace":
            _check_id(item.get("id"), f"data[{index}].id")
            traces.append(item)
        elif kind == "trace.span":
            _check_id(item.get("id"), f"data[{index}].id")
            _check_id(item.get("trace_id"), f"data[{index}].trace_id")
            spans.append(item)
        else:
            raise _bad(
                f"Invalid 'data[{index}].object': expected 'trace' or 'trace.span'.",
                f"data[{index}].object",
            )
    return traces, spans


@router.post("/ingest")
async def ingest(request: Request) -> Response:
    tenant = tenant_of(request)
    body, _ = await read_json(request)
    traces, spans = split_batch(body)
    if traces or spans:
        await gateway_of(request).store.put_traces(tenant, traces, spans)
    return Response(status_code=204)
