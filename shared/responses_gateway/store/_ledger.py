"""The usage ledger and per-tenant budgets in DynamoDB.

Owns the item layout of :class:`~responses_gateway.store.base.LedgerStore` (see DESIGN.md,
"Usage ledger"):

- ``PK = T#<tenant>#R#<response id>``, ``SK = U``: the response's **request-log entry** and the
  ledger's idempotency marker (created only if absent);
- ``PK = U#<YYYY-MM-DD>``, ``SK = <HH>#<tenant>#<model>#<api key id>``: one **hour row** of
  counters (``it ct ot rt mc tc n cost``), one partition per UTC day so an operator's usage read
  of a day is one Query whatever the number of tenants;
- ``PK = T#<tenant>#B``, ``SK = D#<YYYY-MM-DD>`` / ``M#<YYYY-MM>``: the tenant's **day and month
  totals** (``tok``, ``cost``), what a budget check reads (one BatchGet of two small items);
- same PK, ``SK = L``: the tenant's own **budget limits**;
- ``PK = T#<tenant>#RL``, ``SK = <end time in ms, 13 digits>#<response id>``: the tenant's **request
  log index**, a copy of the entry ordered by time, so a console page is one descending Query.

For tenants whose content is logged, the marker alone also holds the entry's content (``cb``,
compressed JSON, at most :data:`~responses_gateway.usage.requestlog.CONTENT_BYTES`; ``ce`` its
encoding), expiring with it.

One ended response is one TransactWriteItems: the marker's conditional Put, the log index's
Put and three ADD updates. A retried writer's transaction is cancelled by the marker's
condition, so nothing is ever counted twice, and a crash can never leave a half-counted
response. It must not know about the loop or HTTP, and it logs nothing (entries carry
tenants and models only).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
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

__all__ = ["LEDGER_RETENTION_DAYS", "MAX_USAGE_DAYS", "LedgerTable"]

LEDGER_RETENTION_DAYS = 400
"""Days usage counters and totals are kept (13 months: a year-over-year month stays readable)."""
MAX_USAGE_DAYS = 62
"""Most days one :meth:`LedgerTable.read_usage` covers (one Query per day, in parallel)."""
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
    ended_ms = entry.extra.get("ended_ms")
    if not isinstance(ended_ms, int):
        ended_ms = entry.ended_at * 1000
    return f"{ended_ms:013d}#{entry.response_id}"


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
        day, hour, month = (
            moment.strftime("%Y-%m-%d"),
            moment.strftime("%H"),
            moment.strftime("%Y-%m"),
        )
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
        row_key = key(
            f"U#{day}",
            f"{hour}#{escape(entry.tenant)}#{escape(entry.model)}#{escape(entry.api_key_id)}",
        )
        row_values: dict[str, Any] = {f":{a}": _num(getattr(counts, f)) for a, f in _COUNTERS}
        row_values.update(
            {
                ":cost": _num(counts.cost_usd),
                ":tenant": {"S": entry.tenant},
                ":model": {"S": entry.model},
                ":key": {"S": entry.api_key_id},
                ":ttl": keep,
            }
        )
        adds = ", ".join(f"#{a} :{a}" for a, _ in _COUNTERS)
        row_update = {
            "Key": row_key,
            "UpdateExpression": f"SET #tenant = :tenant, #model = :model, #key = :key, "
            f"#ttl = :ttl ADD {adds}, #cost :cost",
            "ExpressionAttributeNames": {
                "#ttl": TTL_ATTR,
                "#tenant": "tenant",
                "#model": "model",
                "#key": "api_key",
                "#cost": "cost",
                **{f"#{a}": a for a, _ in _COUNTERS},
            },
            "ExpressionAttributeValues": row_values,
        }
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
            {"Update": row_update},
            *({"Update": total} for total in totals),
        ]
        units = write_units(item_size(marker)) + write_units(item_size(log_item))
        units += write_units(item_size({**row_key, **row_values}))
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
        if end <= start:
            return []
        first = datetime.fromtimestamp(start - start % _DAY, UTC)
        days: list[str] = []
        moment = first
        while int(moment.timestamp()) < end:
            days.append(moment.strftime("%Y-%m-%d"))
            moment += timedelta(days=1)
        if len(days) > MAX_USAGE_DAYS:
            raise ValueError(f"a usage read covers at most {MAX_USAGE_DAYS} days")
        pages = await asyncio.gather(
            *(self._db.query_all("read_usage", f"U#{d}", ("00#", "23#~")) for d in days)
        )
        buckets: list[UsageBucket] = []
        for day, items in zip(days, pages, strict=True):
            day_start = int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())
            for item in items:
                hour_start = day_start + int(item["SK"]["S"][:2]) * 3600
                if start <= hour_start < end:
                    buckets.append(_bucket(item, hour_start))
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
        """The entry and its log item, counted nowhere (a refused request): one BatchWrite."""
        body = {"S": json.dumps(_entry_json(entry), separators=(",", ":"))}
        common: Item = {
            "entry": body,
            SCHEMA_ATTR: {"N": str(RECORD_VERSION)},
            TTL_ATTR: self._ttl(self._marker_retention),
        }
        await self._db.batch_write(
            "log_request",
            puts=[
                {**key(response_pk(entry.tenant, entry.response_id), MARKER_SK), **common},
                {**key(_log_pk(entry.tenant), _log_sk(entry)), **common},
            ],
        )

    async def list_requests(self, tenant: str, *, before: str | None, limit: int) -> RequestPage:
        pk = _log_pk(tenant)
        high = before if before is not None else "9999999999999#~"
        start = key(pk, before) if before is not None else None
        items, last = await self._db.query_page(
            "list_requests", pk, ("0", high), forward=False, limit=max(1, limit), start=start
        )
        entries = [_entry_of(json.loads(item["entry"]["S"])) for item in items]
        cursor = items[-1]["SK"]["S"] if items and last is not None else None
        return RequestPage(entries=entries, next_cursor=cursor)

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


def _bucket(item: Item, hour_start: int) -> UsageBucket:
    counts = UsageCounts(cost_usd=Decimal(item.get("cost", {"N": "0"})["N"]))
    for attr, name in _COUNTERS:
        setattr(counts, name, int(item.get(attr, {"N": "0"})["N"]))
    _, tenant, model, api_key = item["SK"]["S"].split("#", 3)
    return UsageBucket(
        hour_start=hour_start,
        tenant=_unescape(tenant),
        model=_unescape(model),
        api_key_id=_unescape(api_key),
        counts=counts,
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
