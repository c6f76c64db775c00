"""Agent traces (what the agents SDK's exporter sends) in DynamoDB.

Owns the item layout of :class:`~responses_gateway.store.base.TraceStore`:

- ``PK = T#<tenant>#TR#<trace id>``, ``SK = #``: the **trace** object as exported;
- same PK, ``SK = S#<span id>``: one **span** object as exported (a span over 300 KB keeps its
  ids, times and type, and drops the rest of ``span_data``: ``"truncated": true``);
- ``PK = T#<tenant>#TL``, ``SK = <received ms, 13 digits>#<trace id>``: the tenant's **trace
  index**, newest last, holding the trace's name and group (a console page is one Query).

Every item carries the response retention's TTL. Spans may arrive before their trace (the
exporter batches); reading a trace is one Query of its partition. It must not know about HTTP or
the agents SDK's classes, and it logs nothing (spans carry model inputs and outputs).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from responses_gateway.store._calls import TableClient
from responses_gateway.store._codec import SCHEMA_ATTR, TTL_ATTR, Item, escape, key
from responses_gateway.store.base import RECORD_VERSION, TracePage

__all__ = ["MAX_SPAN_BYTES", "TraceTable", "span_order", "summary_of", "trace_text"]

MAX_SPAN_BYTES = 300_000
"""Largest span JSON stored whole (DynamoDB items stop at 400 KB)."""
TRACE_SK = "#"


def _trace_pk(tenant: str, trace_id: str) -> str:
    return f"T#{escape(tenant)}#TR#{escape(trace_id)}"


def _index_pk(tenant: str) -> str:
    return f"T#{escape(tenant)}#TL"


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def summary_of(trace: dict[str, Any], received_ms: int) -> dict[str, Any]:
    """What a trace list shows of ``trace``, received at ``received_ms``."""
    return {
        "id": str(trace["id"]),
        "workflow_name": trace.get("workflow_name"),
        "group_id": trace.get("group_id"),
        "received_ms": received_ms,
    }


def span_order(span: dict[str, Any]) -> tuple[str, str]:
    """The order of a trace's spans: ``started_at``, then ``id``."""
    return (str(span.get("started_at") or ""), str(span.get("id")))


def trace_text(span: dict[str, Any]) -> str:
    """A span's stored JSON: whole up to :data:`MAX_SPAN_BYTES`, else its ids, times and
    ``span_data`` type/name/response id with ``truncated: true``."""
    text = _dump(span)
    if len(text.encode()) <= MAX_SPAN_BYTES:
        return text
    data = span.get("span_data") or {}
    kept = {k: data[k] for k in ("type", "name", "response_id") if k in data}
    return _dump({**span, "span_data": {**kept, "truncated": True}})


class TraceTable:
    """Traces, their spans and the per-tenant trace index on one table."""

    def __init__(
        self, db: TableClient, *, retention_seconds: int, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._retention = retention_seconds
        self._clock = clock

    async def put(
        self, tenant: str, traces: list[dict[str, Any]], spans: list[dict[str, Any]]
    ) -> None:
        now = self._clock()
        ttl = {"N": str(int(now) + self._retention)}
        meta = {SCHEMA_ATTR: {"N": str(RECORD_VERSION)}, TTL_ATTR: ttl}
        puts: list[Item] = []
        received = int(now * 1000)
        for trace in traces:
            trace_id = str(trace["id"])
            puts.append(
                {**key(_trace_pk(tenant, trace_id), TRACE_SK), "body": {"S": _dump(trace)}, **meta}
            )
            summary = summary_of(trace, received)
            puts.append(
                {
                    **key(_index_pk(tenant), f"{received:013d}#{trace_id}"),
                    "body": {"S": _dump(summary)},
                    **meta,
                }
            )
        for span in spans:
            pk = _trace_pk(tenant, str(span["trace_id"]))
            puts.append({**key(pk, f"S#{span['id']}"), "body": {"S": trace_text(span)}, **meta})
        await self._db.batch_write("put_traces", puts=puts)

    async def page(self, tenant: str, *, before: str | None, limit: int) -> TracePage:
        pk = _index_pk(tenant)
        start = key(pk, before) if before is not None else None
        items, last = await self._db.query_page(
            "list_traces",
            pk,
            ("0", before or "9999999999999#~"),
            forward=False,
            limit=max(1, limit),
            start=start,
        )
        now = int(self._clock())
        traces = [json.loads(i["body"]["S"]) for i in items if _live(i, now)]
        cursor = items[-1]["SK"]["S"] if items and last is not None else None
        return TracePage(traces=traces, next_cursor=cursor)

    async def get(
        self, tenant: str, trace_id: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        items = await self._db.query_all("get_trace", _trace_pk(tenant, trace_id), ("#", "S#~"))
        now = int(self._clock())
        trace: dict[str, Any] | None = None
        spans: list[dict[str, Any]] = []
        for item in items:
            if not _live(item, now):
                continue
            body = json.loads(item["body"]["S"])
            if item["SK"]["S"] == TRACE_SK:
                trace = body
            else:
                spans.append(body)
        spans.sort(key=span_order)
        return trace, spans


def _live(item: Item, now: int) -> bool:
    ttl = item.get(TTL_ATTR)
    return ttl is None or int(ttl["N"]) > now
