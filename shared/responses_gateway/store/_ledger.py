"""The usage ledger and per-tenant budgets in DynamoDB.

Owns the item layout of :class:`~responses_gateway.store.base.LedgerStore` (see DESIGN.md,
"Usage ledger"):

- ``PK = T#<tenant>#R#<response id>``, ``SK = U``: the response's **request-log entry** and the
  ledger's idempotency marker (created only if absent);
- ``PK = U#<YYYY-MM-DD>``, ``SK = <HH>#<tenant>#<model>#<api key id>``: one **hour row** of
  counters (``it ct ot rt mc tc n cost``, and the request health counters of
  :mod:`responses_gateway.usage.metrics`, whose names hold a ``:``), one partition per UTC day
  so an operator's usage read of a day is one Query whatever the number of tenants;
- ``PK = F#<YYYY-MM-DD>``, ``SK = <HHMM>#<tenant>#<model>#<api key id>``: the same counters per
  **five minutes** (the overview's short ranges), kept :data:`FINE_RETENTION_DAYS`;
- ``PK = T#<tenant>#B``, ``SK = D#<YYYY-MM-DD>`` / ``M#<YYYY-MM>``: the tenant's **day and month
  totals** (``tok``, ``cost``), what a budget check reads (one BatchGet of two small items);
- same PK, ``SK = L``: the tenant's own **budget limits**;
- ``PK = T#<tenant>#RL``, ``SK = <end time in ms, 13 digits>#<response id>``: the tenant's **request
  log index**, a copy of the entry ordered by time, so a console page is one descending Query.

For tenants whose content is logged, the marker alone also holds the entry's content (``cb``,
compressed JSON, at most :data:`~responses_gateway.usage.requestlog.CONTENT_BYTES`; ``ce`` its
encoding), expiring with it, and removed when the response (or its conversation) is deleted
(:meth:`LedgerTable.forget_content`).

One ended response is one TransactWriteItems: the marker's conditional Put, the log index's
Put and four ADD updates (hour row, five-minute row, day and month totals). A retried writer's
transaction is cancelled by the marker's condition, so nothing is ever counted twice, and a
crash can never leave a half-counted response. It must not know about the loop or HTTP, and it
logs nothing (entries carry tenants and models only).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from responses_gateway.store._calls import WRITE_TOKEN, ConditionFailed, TableClient
from responses_gateway.store._codec import (
    SCHEMA_ATTR,
    TTL_ATTR,
    Item,
    decode_json,
    encode_json,
    escape,
    item_size,
    key,
    write_units,
)
from responses_gateway.store._responses import response_pk
from responses_gateway.store.base import (
    RECORD_VERSION,
    BudgetLimits,
    RequestPage,
    TenantSpend,
    UsageBucket,
    UsageCounts,
    UsageEntry,
)
from responses_gateway.usage.metrics import entry_stats, is_stat
from responses_gateway.usage.records import (
    FINE_WIDTH,
    HOUR_WIDTH,
    REQUEST_SCAN,
    RequestQuery,
    log_cursor,
)

__all__ = [
    "FINE_RETENTION_DAYS",
    "LEDGER_RETENTION_DAYS",
    "MAX_FINE_DAYS",
    "MAX_USAGE_DAYS",
    "LedgerTable",
    "PageCollector",
]

LEDGER_RETENTION_DAYS = 400
"""Days usage counters and totals are kept (13 months: a year-over-year month stays readable)."""
MAX_USAGE_DAYS = 62
"""Most days one :meth:`LedgerTable.read_usage` covers (one Query per day, in parallel)."""
FINE_RETENTION_DAYS = 3
"""Days five-minute rows are kept (the overview reads them for ranges up to two days)."""
MAX_FINE_DAYS = FINE_RETENTION_DAYS
"""Most UTC days one read of five-minute rows covers."""
MARKER_SK = "U"
LIMITS_SK = "L"
_DAY = 86_400
_COUNTERS = (
    ("it", "input_tokens"),
    ("ct", "cached_tokens"),
    ("ot", "output_tokens"),
    ("rt", "reasoning_tokens"),
    ("mc", "model_calls"),
    ("tc", "tool_calls"),
    ("n", "responses"),
)
"""Hour-row attribute of each integer counter of :class:`UsageCounts`."""
_LIMITS = (
    ("dt", "daily_tokens"),
    ("mt", "monthly_tokens"),
    ("dc", "daily_cost_usd"),
    ("mo", "monthly_cost_usd"),
)


def _num(value: int | Decimal) -> dict[str, str]:
    text = format(value, "f") if isinstance(value, Decimal) else str(value)
    return {"N": text}


def _day(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _budget_pk(tenant: str) -> str:
    return f"T#{escape(tenant)}#B"


def _log_pk(tenant: str) -> str:
    return f"T#{escape(tenant)}#RL"


def _log_sk(entry: UsageEntry) -> str:
    return log_cursor(entry)


def _days(start: int, end: int) -> list[int]:
    """The UTC midnights of the days ``[start, end)`` touches."""
    first = start - start % _DAY
    return list(range(first, end, _DAY))


def _clock_text(seconds: int, width: int) -> str:
    """A bucket's time within its day as its rows' SK starts (``HH`` or ``HHMM``)."""
    of_day = seconds % _DAY
    hours, minutes = divmod(of_day // 60, 60)
    return f"{hours:02d}" if width == HOUR_WIDTH else f"{hours:02d}{minutes:02d}"


_ROWS = {HOUR_WIDTH: "U", FINE_WIDTH: "F"}
"""Partition prefix of the rows of each width."""


def _row_key(entry: UsageEntry, width: int) -> Item:
    start = entry.ended_at - entry.ended_at % width
    sk = "#".join(
        (
            _clock_text(start, width),
            escape(entry.tenant),
            escape(entry.model),
            escape(entry.api_key_id),
        )
    )
    return key(f"{_ROWS[width]}#{_day(start)}", sk)


def _row_update(row_key: Item, entry: UsageEntry, stats: dict[str, int], keep: Item) -> Item:
    """The ADD update of a row (hour or five minutes): the entry's counters and ``stats``."""
    counts = entry.counts
    values: dict[str, Any] = {f":{a}": _num(getattr(counts, f)) for a, f in _COUNTERS}
    values.update(
        {
            ":cost": _num(counts.cost_usd),
            ":tenant": {"S": entry.tenant},
            ":model": {"S": entry.model},
            ":key": {"S": entry.api_key_id},
            ":ttl": keep,
        }
    )
    names = {
        "#ttl": TTL_ATTR,
        "#tenant": "tenant",
        "#model": "model",
        "#key": "api_key",
        "#cost": "cost",
        **{f"#{a}": a for a, _ in _COUNTERS},
    }
    adds = [f"#{a} :{a}" for a, _ in _COUNTERS] + ["#cost :cost"]
    for i, (name, value) in enumerate(sorted(stats.items())):
        names[f"#m{i}"] = name
        values[f":m{i}"] = _num(value)
        adds.append(f"#m{i} :m{i}")
    return {
        "Key": row_key,
        "UpdateExpression": "SET #tenant = :tenant, #model = :model, #key = :key, "
        f"#ttl = :ttl ADD {', '.join(adds)}",
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _update_size(update: Item) -> int:
    """The size of the item ``update`` writes when the row is new (its attributes by name)."""
    names = update["ExpressionAttributeNames"]
    values = update["ExpressionAttributeValues"]
    item: Item = dict(update["Key"])
    for placeholder, value in values.items():
        item[names.get("#" + placeholder[1:], placeholder[1:])] = value
    return item_size(item)


class PageCollector:
    """Gathers one page of a request-log read, newest first, from entries offered in
    descending cursor order: at most ``limit`` entries ``query`` keeps, at most
    :data:`~responses_gateway.usage.records.REQUEST_SCAN` examined when it filters; the bounds
    ``low`` and ``high`` are exclusive. Both stores page with it, so their pages agree."""

    def __init__(self, query: RequestQuery, limit: int, low: str, high: str) -> None:
        self.query = query
        self.limit = max(1, limit)
        self.low = low
        self.high = high
        self.entries: list[UsageEntry] = []
        self.examined = 0
        self.next_cursor: str | None = None
        self._last = ""
        self.done = False

    @property
    def batch(self) -> int:
        """How many entries the next read should fetch (the bounds and one more to peek)."""
        if self.query.filters:
            return REQUEST_SCAN - self.examined + 2
        return self.limit - len(self.entries) + 2

    def offer(self, cursor: str, entry: UsageEntry) -> bool:
        """Take the next older entry; True once the page is complete (read no further)."""
        if self.done:
            return True
        if cursor >= self.high or cursor <= self.low:
            return False
        if len(self.entries) == self.limit:  # one more entry exists past a full page
            self.next_cursor = self._last
            self.done = True
            return True
        self.examined += 1
        if self.query.matches(entry):
            self.entries.append(entry)
            self._last = cursor
        elif self.query.filters and self.examined >= REQUEST_SCAN:
            self.next_cursor = cursor  # searched this far: go on from here
            self.done = True
        return self.done

    def page(self) -> RequestPage:
        return RequestPage(self.entries, self.next_cursor, self.examined)


def _unescape(part: str) -> str:
    return part.replace("%23", "#").replace("%25", "%")


class LedgerTable:
    """Ledger rows, totals and budget limits on one table."""

    def __init__(
        self, db: TableClient, *, retention_seconds: int, clock: Callable[[], float] = time.time
    ) -> None:
        self._db = db
        self._marker_retention = retention_seconds
        self._clock = clock

    def _ttl(self, seconds: int) -> dict[str, str]:
        return {"N": str(int(self._clock()) + seconds)}

    async def record(self, entry: UsageEntry) -> bool:
        counts = entry.counts
        moment = datetime.fromtimestamp(entry.ended_at, UTC)
        day, month = moment.strftime("%Y-%m-%d"), moment.strftime("%Y-%m")
        keep = self._ttl(LEDGER_RETENTION_DAYS * _DAY)
        body = {"S": json.dumps(_entry_json(entry), separators=(",", ":"))}
        marker: Item = {
            **key(response_pk(entry.tenant, entry.response_id), MARKER_SK),
            "entry": body,
            SCHEMA_ATTR: {"N": str(RECORD_VERSION)},
            TTL_ATTR: self._ttl(self._marker_retention),
            WRITE_TOKEN: {"S": secrets.token_hex(8)},
            **_content_attrs(entry),
        }
        log_item: Item = {
            **key(_log_pk(entry.tenant), _log_sk(entry)),
            "entry": body,
            SCHEMA_ATTR: {"N": str(RECORD_VERSION)},
            TTL_ATTR: self._ttl(self._marker_retention),
        }
        stats = entry_stats(entry)
        rows = [
            _row_update(_row_key(entry, HOUR_WIDTH), entry, stats, keep),
            _row_update(
                _row_key(entry, FINE_WIDTH), entry, stats, self._ttl(FINE_RETENTION_DAYS * _DAY)
            ),
        ]
        total_values: dict[str, Any] = {
            ":tok": _num(counts.total_tokens),
            ":cost": _num(counts.cost_usd),
            ":ttl": keep,
        }
        totals: list[dict[str, Any]] = [
            {
                "Key": key(_budget_pk(entry.tenant), sk),
                "UpdateExpression": "SET #ttl = :ttl ADD #tok :tok, #cost :cost",
                "ExpressionAttributeNames": {"#ttl": TTL_ATTR, "#tok": "tok", "#cost": "cost"},
                "ExpressionAttributeValues": total_values,
            }
            for sk in (f"D#{day}", f"M#{month}")
        ]
        actions: list[dict[str, Any]] = [
            {
                "Put": {
                    "Item": marker,
                    "ConditionExpression": "attribute_not_exists(PK)",
                }
            },
            {"Put": {"Item": log_item}},
            *({"Update": row} for row in rows),
            *({"Update": total} for total in totals),
        ]
        units = write_units(item_size(marker)) + write_units(item_size(log_item))
        units += sum(write_units(_update_size(row)) for row in rows)
        units += sum(write_units(item_size({**t["Key"], **total_values})) for t in totals)
        try:
            await self._db.transact_write("record_usage", actions, units)
        except ConditionFailed:
            # Counted already, unless the marker holds this call's token: the client retried a
            # transaction whose answer was lost after DynamoDB applied it (the retry then fails
            # its own condition), so the count is ours.
            current = await self._db.get_item(
                "record_usage", {"PK": marker["PK"], "SK": marker["SK"]}
            )
            return current is not None and current.get(WRITE_TOKEN) == marker[WRITE_TOKEN]
        return True

    async def read(self, start: int, end: int) -> list[UsageBucket]:
        """The hour rows as the usage report reads them: rows of responses (one that holds only
        refused requests is left out), without their health counters."""
        rows = await self.read_rows(start, end, HOUR_WIDTH)
        for row in rows:
            row.stats = {}
        return [row for row in rows if row.counts.responses]

    async def read_rows(
        self, start: int, end: int, width: int, *, consistent: bool = True
    ) -> list[UsageBucket]:
        """The rows of ``width`` whose bucket starts in ``[start, end)``: one Query per UTC
        day (in parallel), each over the day's part of the range only."""
        if end <= start:
            return []
        days = _days(start, end)
        most = MAX_USAGE_DAYS if width == HOUR_WIDTH else MAX_FINE_DAYS
        if len(days) > most:
            raise ValueError(f"a read of these rows covers at most {most} days")
        op = "read_usage" if width == HOUR_WIDTH and consistent else "read_metrics"

        def bounds(midnight: int) -> tuple[str, str]:
            low = max(start, midnight)
            high = min(end, midnight + _DAY) - 1
            return f"{_clock_text(low, width)}#", f"{_clock_text(high, width)}#~"

        pages = await asyncio.gather(
            *(
                self._db.query_all(
                    op, f"{_ROWS[width]}#{_day(d)}", bounds(d), consistent=consistent
                )
                for d in days
            )
        )
        buckets: list[UsageBucket] = []
        for midnight, items in zip(days, pages, strict=True):
            for item in items:
                clock = item["SK"]["S"].split("#", 1)[0]
                offset = int(clock[:2]) * 3600 + (int(clock[2:4]) * 60 if clock[2:4] else 0)
                row_start = midnight + offset
                if start <= row_start < end:
                    buckets.append(_bucket(item, row_start, width))
        return buckets

    async def get_entry(self, tenant: str, response_id: str) -> UsageEntry | None:
        item = await self._db.get_item(
            "get_usage_entry", key(response_pk(tenant, response_id), MARKER_SK)
        )
        if item is None:
            return None
        entry = _entry_of(json.loads(item["entry"]["S"]))
        if "cb" in item:
            entry.content = decode_json(bytes(item["cb"]["B"]), item["ce"]["S"])
        return entry

    async def log_only(self, entry: UsageEntry) -> None:
        """The entry and its log item, counted nowhere but in the health counters of its hour
        and five-minute rows (a refused request): one BatchWrite and two updates, in
        parallel."""
        body = {"S": json.dumps(_entry_json(entry), separators=(",", ":"))}
        common: Item = {
            "entry": body,
            SCHEMA_ATTR: {"N": str(RECORD_VERSION)},
            TTL_ATTR: self._ttl(self._marker_retention),
        }
        stats = entry_stats(entry)
        rows = [
            _row_update(
                _row_key(entry, HOUR_WIDTH), entry, stats, self._ttl(LEDGER_RETENTION_DAYS * _DAY)
            ),
            _row_update(
                _row_key(entry, FINE_WIDTH), entry, stats, self._ttl(FINE_RETENTION_DAYS * _DAY)
            ),
        ]
        await asyncio.gather(
            self._db.batch_write(
                "log_request",
                puts=[
                    {**key(response_pk(entry.tenant, entry.response_id), MARKER_SK), **common},
                    {**key(_log_pk(entry.tenant), _log_sk(entry)), **common},
                ],
            ),
            *(
                self._db.update_item(
                    "log_request",
                    row["Key"],
                    row["UpdateExpression"],
                    names=row["ExpressionAttributeNames"],
                    values=row["ExpressionAttributeValues"],
                )
                for row in rows
            ),
        )

    async def get_entries(self, tenant: str, response_ids: list[str]) -> list[UsageEntry]:
        """The entries of these responses that exist, in the order asked (one BatchGet)."""
        keys = [key(response_pk(tenant, rid), MARKER_SK) for rid in dict.fromkeys(response_ids)]
        found = await self._db.batch_get("get_usage_entries", keys)
        entries: list[UsageEntry] = []
        for k in keys:
            item = found.get((k["PK"]["S"], MARKER_SK))
            if item is not None:
                entries.append(_entry_of(json.loads(item["entry"]["S"])))
        return entries

    async def list_requests(
        self,
        tenant: str,
        *,
        before: str | None,
        limit: int,
        after: str | None = None,
        query: RequestQuery | None = None,
    ) -> RequestPage:
        query = query or RequestQuery()
        low, high = query.bounds(before, after)
        collector = PageCollector(query, limit, low, high)
        pk = _log_pk(tenant)
        start: Item | None = None
        while not collector.done:
            items, start = await self._db.query_page(
                "list_requests",
                pk,
                (low or "0", high),
                forward=False,
                limit=collector.batch,
                start=start,
            )
            entries = [_entry_of(json.loads(item["entry"]["S"])) for item in items]
            if query.needs_content:  # a text search: the batch's content, from the markers
                await self._attach_content(tenant, entries)
            for item, entry in zip(items, entries, strict=True):
                done = collector.offer(item["SK"]["S"], entry)
                entry.content = None  # one record's read returns it, never a page
                if done:
                    break
            if start is None:
                break
        return collector.page()

    async def _attach_content(self, tenant: str, entries: list[UsageEntry]) -> None:
        """Give each entry its logged content (one BatchGet of their markers, 100 keys a
        request): what a text search of the request log matches besides the entry itself."""
        keys = [key(response_pk(tenant, e.response_id), MARKER_SK) for e in entries]
        found = await self._db.batch_get("list_requests", keys)
        for entry, marker in zip(entries, keys, strict=True):
            item = found.get((marker["PK"]["S"], MARKER_SK))
            if item is not None and "cb" in item:
                entry.content = decode_json(bytes(item["cb"]["B"]), item["ce"]["S"])

    async def forget_content(self, tenant: str, response_ids: list[str]) -> None:
        """Remove the logged content (``cb``, ``ce``) of these responses' request-log entries,
        keeping the entries and their counters: one conditional update per entry holding
        content, in parallel (an entry without content is left as it is)."""

        async def forget(response_id: str) -> None:
            with contextlib.suppress(ConditionFailed):
                await self._db.update_item(
                    "forget_content",
                    key(response_pk(tenant, response_id), MARKER_SK),
                    "REMOVE cb, ce",
                    condition="attribute_exists(cb)",
                )

        await asyncio.gather(*(forget(rid) for rid in dict.fromkeys(response_ids)))

    async def spend(self, tenant: str, now: int) -> TenantSpend:
        moment = datetime.fromtimestamp(now, UTC)
        pk = _budget_pk(tenant)
        day_key = key(pk, f"D#{moment.strftime('%Y-%m-%d')}")
        month_key = key(pk, f"M#{moment.strftime('%Y-%m')}")
        limits_key = key(pk, LIMITS_SK)
        found = await self._db.batch_get("get_spend", [day_key, month_key, limits_key])
        limits = found.get((pk, LIMITS_SK))
        day = found.get((pk, day_key["SK"]["S"]), {})
        month = found.get((pk, month_key["SK"]["S"]), {})
        return TenantSpend(
            day_tokens=int(day.get("tok", {"N": "0"})["N"]),
            day_cost_usd=Decimal(day.get("cost", {"N": "0"})["N"]),
            month_tokens=int(month.get("tok", {"N": "0"})["N"]),
            month_cost_usd=Decimal(month.get("cost", {"N": "0"})["N"]),
            limits=_limits_of(limits) if limits is not None else None,
        )

    async def put_limits(self, tenant: str, limits: BudgetLimits | None) -> None:
        limit_key = key(_budget_pk(tenant), LIMITS_SK)
        if limits is None or limits.empty:
            await self._db.delete_item("put_budget", limit_key)
            return
        item: Item = {**limit_key, SCHEMA_ATTR: {"N": str(RECORD_VERSION)}}
        for attr, name in _LIMITS:
            value = getattr(limits, name)
            if value is not None:
                item[attr] = _num(value)
        await self._db.put_item("put_budget", item)

    async def get_limits(self, tenant: str) -> BudgetLimits | None:
        item = await self._db.get_item("get_budget", key(_budget_pk(tenant), LIMITS_SK))
        return _limits_of(item) if item is not None else None


def _limits_of(item: Item) -> BudgetLimits:
    values: dict[str, Any] = {}
    for attr, name in _LIMITS:
        if attr in item:
            raw = item[attr]["N"]
            values[name] = Decimal(raw) if name.endswith("usd") else int(raw)
    return BudgetLimits(**values)


def _bucket(item: Item, start: int, width: int = HOUR_WIDTH) -> UsageBucket:
    counts = UsageCounts(cost_usd=Decimal(item.get("cost", {"N": "0"})["N"]))
    for attr, name in _COUNTERS:
        setattr(counts, name, int(item.get(attr, {"N": "0"})["N"]))
    _, tenant, model, api_key = item["SK"]["S"].split("#", 3)
    stats = {name: int(value["N"]) for name, value in item.items() if is_stat(name)}
    return UsageBucket(
        hour_start=start,
        tenant=_unescape(tenant),
        model=_unescape(model),
        api_key_id=_unescape(api_key),
        counts=counts,
        stats=stats,
        width=width,
    )


def _content_attrs(entry: UsageEntry) -> Item:
    """The marker's content attributes (``cb`` blob, ``ce`` encoding); none without content.
    Only the marker holds them: a page of the log reads the index, which never needs them."""
    if entry.content is None:
        return {}
    blob, encoding = encode_json(entry.content)
    return {"cb": {"B": blob}, "ce": {"S": encoding}}


def _entry_json(entry: UsageEntry) -> dict[str, Any]:
    counts = {name: getattr(entry.counts, name) for _, name in _COUNTERS}
    return {
        "tenant": entry.tenant,
        "response_id": entry.response_id,
        "model": entry.model,
        "ended_at": entry.ended_at,
        "status": entry.status,
        "api_key_id": entry.api_key_id,
        "background": entry.background,
        "counts": {**counts, "cost_usd": format(entry.counts.cost_usd, "f")},
        "extra": entry.extra,
    }


def _entry_of(data: dict[str, Any]) -> UsageEntry:
    raw = dict(data["counts"])
    cost = Decimal(raw.pop("cost_usd", "0"))
    return UsageEntry(
        tenant=data["tenant"],
        response_id=data["response_id"],
        model=data["model"],
        ended_at=int(data["ended_at"]),
        status=data["status"],
        counts=UsageCounts(**raw, cost_usd=cost),
        api_key_id=data.get("api_key_id", ""),
        background=bool(data.get("background")),
        extra=dict(data.get("extra") or {}),
        content=data.get("content"),
    )
