"""Agent traces (what the agents SDK's exporter sends) in DynamoDB.

Owns the item layout of :class:`~responses_gateway.store.base.TraceStore`:

- ``PK = T#<tenant>#TR#<trace id>``, ``SK = #``: the **trace** object as exported;
- same PK, ``SK = S#<span id>``: one **span** object as exported (a span over 300 KB keeps its
  ids, times and type, and drops the rest of ``span_data``: ``"truncated": true``);
- same PK, ``SK = T``: the trace's **tally** (``n`` spans, ``e`` errors, ``tok`` tokens added
  at each ingest, ``lo``/``hi`` its first start and last end), what the trace list shows;
- ``PK = T#<tenant>#TL``, ``SK = <received ms, 13 digits>#<trace id>``: the tenant's **trace
  index**, newest last, holding the trace's name and group (a console page is one Query, and
  one BatchGet of the page's tallies);
- ``PK = T#<tenant>#R#<response id>``, ``SK = TR``: the **trace of a response** a ``response``
  span names (the response's partition, outside every range a response's reads or deletes
  cover), so the response's page links to its trace.

Every item carries the response retention's TTL. Spans may arrive before their trace (the
exporter batches); reading a trace is one Query of its partition. It must not know about HTTP or
the agents SDK's classes, and it logs nothing (spans carry model inputs and outputs).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from responses_gateway.store._calls import ConditionFailed, TableClient
from responses_gateway.store._codec import SCHEMA_ATTR, TTL_ATTR, Item, escape, key
from responses_gateway.store._responses import response_pk
from responses_gateway.store.base import RECORD_VERSION, TracePage

__all__ = [
    "MAX_SPAN_BYTES",
    "Tally",
    "TraceTable",
    "forgotten_span",
    "names_response",
    "response_links",
    "span_order",
    "summary_of",
    "tallies",
    "trace_text",
    "with_tally",
]

MAX_SPAN_BYTES = 300_000
"""Largest span JSON stored whole (DynamoDB items stop at 400 KB)."""
TRACE_SK = "#"
TALLY_SK = "T"
LINK_SK = "TR"


@dataclass(slots=True)
class Tally:
    """What a batch of spans adds to its trace's figures."""

    spans: int = 0
    errors: int = 0
    """Spans with an ``error``, and guardrails that triggered."""
    tokens: int = 0
    """Input + output tokens of the spans that report usage (model calls)."""
    started: str = ""
    """The earliest ``started_at`` (ISO 8601, as exported)."""
    ended: str = ""
    """The latest ``ended_at``."""


def _instant(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def span_failed(span: dict[str, Any]) -> bool:
    """Whether a span is an error: it carries ``error``, or it is a triggered guardrail."""
    data = span.get("span_data") or {}
    return bool(span.get("error")) or (
        data.get("type") == "guardrail" and bool(data.get("triggered"))
    )


def span_tokens(span: dict[str, Any]) -> int:
    """The input + output tokens a span's ``usage`` reports (0 without usage)."""
    usage = (span.get("span_data") or {}).get("usage")
    if not isinstance(usage, dict):
        return 0
    total = 0
    for name in ("input_tokens", "output_tokens"):
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            total += value
    return total


def _earlier(a: str, b: str) -> bool:
    """Whether instant ``a`` is before ``b`` (ISO 8601 texts; unparseable ones compare as text)."""
    first, second = _instant(a), _instant(b)
    if first is not None and second is not None:
        try:
            return first < second
        except TypeError:  # one has a zone and the other not
            pass
    return a < b


def tallies(spans: Iterable[dict[str, Any]]) -> dict[str, Tally]:
    """Each trace's :class:`Tally` of ``spans``."""
    found: dict[str, Tally] = {}
    for span in spans:
        tally = found.setdefault(str(span["trace_id"]), Tally())
        tally.spans += 1
        tally.errors += span_failed(span)
        tally.tokens += span_tokens(span)
        started = str(span.get("started_at") or "")
        ended = str(span.get("ended_at") or started)
        if started and (not tally.started or _earlier(started, tally.started)):
            tally.started = started
        if ended and (not tally.ended or _earlier(tally.ended, ended)):
            tally.ended = ended
    return found


def response_links(spans: Iterable[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Response id -> (trace id, span id) of the ``response`` spans naming a response."""
    links: dict[str, tuple[str, str]] = {}
    for span in spans:
        data = span.get("span_data") or {}
        rid = data.get("response_id")
        if data.get("type") == "response" and isinstance(rid, str) and rid:
            links[rid] = (str(span["trace_id"]), str(span["id"]))
    return links


_KEPT_WHEN_FORGOTTEN = ("type", "name", "response_id", "model", "usage")
"""What a span naming a deleted response keeps of its ``span_data`` (no inputs or outputs)."""


def names_response(span: dict[str, Any], response_ids: set[str]) -> bool:
    """Whether ``span``'s ``span_data.response_id`` is one of ``response_ids``."""
    return (span.get("span_data") or {}).get("response_id") in response_ids


def forgotten_span(span: dict[str, Any]) -> dict[str, Any]:
    """``span`` without the content of the response it names (deleted, or its conversation
    was): its ids, times and ``span_data`` type, name, response id, model and usage stay, with
    ``deleted: true``; an error keeps its message only."""
    data = span.get("span_data") or {}
    kept = {k: data[k] for k in _KEPT_WHEN_FORGOTTEN if k in data}
    forgotten = {**span, "span_data": {**kept, "deleted": True}}
    error = span.get("error")
    if isinstance(error, dict):
        forgotten["error"] = {"message": error.get("message")}
    return forgotten


def with_tally(summary: dict[str, Any], tally: Tally | None) -> dict[str, Any]:
    """A trace summary with its figures: ``spans``, ``errors``, ``tokens``, ``started_at``,
    ``ended_at`` and ``duration_ms`` (None when unknown)."""
    tally = tally or Tally()
    duration = None
    first, last = _instant(tally.started), _instant(tally.ended)
    if first is not None and last is not None:
        try:
            duration = max(0, round((last - first).total_seconds() * 1000))
        except TypeError:
            duration = None
    return {
        **summary,
        "spans": tally.spans,
        "errors": tally.errors,
        "tokens": tally.tokens,
        "started_at": tally.started or None,
        "ended_at": tally.ended or None,
        "duration_ms": duration,
    }


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
        for rid, (trace_id, span_id) in response_links(spans).items():
            puts.append(
                {
                    **key(response_pk(tenant, rid), LINK_SK),
                    "trace": {"S": trace_id},
                    "span": {"S": span_id},
                    **meta,
                }
            )
        await self._db.batch_write("put_traces", puts=puts)
        await asyncio.gather(
            *(self._add_tally(tenant, t, tally, ttl) for t, tally in tallies(spans).items())
        )

    async def _add_tally(self, tenant: str, trace_id: str, tally: Tally, ttl: Item) -> None:
        """ADD the counters and move ``lo``/``hi`` where this batch reaches further (three
        updates of the tally, in parallel; a failed condition leaves its attribute)."""
        tally_key = key(_trace_pk(tenant, trace_id), TALLY_SK)

        async def move(name: str, value: str, condition: str) -> None:
            with contextlib.suppress(ConditionFailed):  # another batch reached further
                await self._db.update_item(
                    "put_traces",
                    tally_key,
                    f"SET {name} = :v",
                    condition=condition,
                    values={":v": {"S": value}},
                )

        moves = []
        if tally.started:
            moves.append(move("lo", tally.started, "attribute_not_exists(lo) OR lo > :v"))
        if tally.ended:
            moves.append(move("hi", tally.ended, "attribute_not_exists(hi) OR hi < :v"))
        await asyncio.gather(
            self._db.update_item(
                "put_traces",
                tally_key,
                "SET #ttl = :ttl ADD n :n, e :e, tok :tok",
                names={"#ttl": TTL_ATTR},
                values={
                    ":ttl": ttl,
                    ":n": {"N": str(tally.spans)},
                    ":e": {"N": str(tally.errors)},
                    ":tok": {"N": str(tally.tokens)},
                },
            ),
            *moves,
        )

    async def trace_of(self, tenant: str, response_id: str) -> str | None:
        item = await self._db.get_item(
            "trace_of_response", key(response_pk(tenant, response_id), LINK_SK)
        )
        if item is None or not _live(item, int(self._clock())):
            return None
        return str(item["trace"]["S"])

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
        found = await self._db.batch_get(
            "list_traces", [key(_trace_pk(tenant, t["id"]), TALLY_SK) for t in traces]
        )
        summaries = []
        for trace in traces:
            item = found.get((_trace_pk(tenant, trace["id"]), TALLY_SK))
            summaries.append(with_tally(trace, _tally_of(item) if item else None))
        return TracePage(traces=summaries, next_cursor=cursor)

    async def forget(self, tenant: str, response_ids: list[str]) -> None:
        """Rewrite the spans naming these responses without their content
        (:func:`forgotten_span`): one read of each response's trace link, one Query of each
        trace so linked, one batch write of the spans rewritten (they keep their TTL)."""
        wanted = set(response_ids)
        links = await self._db.batch_get(
            "forget_spans", [key(response_pk(tenant, rid), LINK_SK) for rid in wanted]
        )
        traces = {str(item["trace"]["S"]) for item in links.values()}
        puts: list[Item] = []
        for trace_id in traces:
            pk = _trace_pk(tenant, trace_id)
            for item in await self._db.query_all("forget_spans", pk, ("S#", "S#~")):
                span = json.loads(item["body"]["S"])
                if names_response(span, wanted):
                    body = {"S": trace_text(forgotten_span(span))}
                    puts.append({**item, "body": body})
        if puts:
            await self._db.batch_write("forget_spans", puts=puts)

    async def get(
        self, tenant: str, trace_id: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        items = await self._db.query_all("get_trace", _trace_pk(tenant, trace_id), ("#", "S#~"))
        now = int(self._clock())
        trace: dict[str, Any] | None = None
        spans: list[dict[str, Any]] = []
        for item in items:
            sk = item["SK"]["S"]
            if not _live(item, now) or not (sk == TRACE_SK or sk.startswith("S#")):
                continue
            body = json.loads(item["body"]["S"])
            if sk == TRACE_SK:
                trace = body
            else:
                spans.append(body)
        spans.sort(key=span_order)
        return trace, spans


def _tally_of(item: Item) -> Tally:
    def number(name: str) -> int:
        return int(item.get(name, {"N": "0"})["N"])

    return Tally(
        spans=number("n"),
        errors=number("e"),
        tokens=number("tok"),
        started=item.get("lo", {"S": ""})["S"],
        ended=item.get("hi", {"S": ""})["S"],
    )


def _live(item: Item, now: int) -> bool:
    ttl = item.get(TTL_ATTR)
    return ttl is None or int(ttl["N"]) > now
