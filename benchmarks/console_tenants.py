"""What an operator's cross-tenant reads cost ("All tenants", issue #37): DynamoDB read units
and round trips, and milliseconds, at 10 and 1,000 tenants, on both stores.

Each tenant gets ``--entries`` request-log entries (written with ``record_usage``, so their
hour rows exist: that is how the tenant list finds them; five busy tenants get ``--busy``), one
of them refused, one trace and one conversation, and a budget. Then, per store and tenant
count, the median of ``--reads`` of:

- **tenants**: the tenant list every cross-tenant read starts from (one read of the last 7
  days' hour rows, :func:`responses_gateway.api.console.known_tenants`);
- **requests page**: 100 entries of every tenant, newest first
  (:func:`store.fanout.requests_across`: a k-way merge reading a few entries of each tenant,
  16 reads at a time, then more of the tenants whose rows run out);
- **refusals page**: the same filtered by ``status=refused`` (each tenant's read examines its
  whole log here: ``--entries`` entries);
- **traces page** and **conversations page**: 50 of every tenant's;
- **budgets**: every tenant's spend against its limits (one ``get_spend`` each);

and, as the baseline measured in the same run, one tenant's own requests page (one Query): the
ratios say what the fan-out costs against it. DynamoDB runs embedded (moto, in this process: its
milliseconds are CPU here, not network round trips; the units are computed from item sizes as
DynamoDB bills them, at least one per Query; moto's Query is made to read its partition rather
than sort the whole table, :func:`_partition_queries`). SQLite is a file in a temporary
directory.

Usage::

    python benchmarks/console_tenants.py [--tenants 10,1000] [--entries 3] [--busy 150]
        [--reads 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

_DAY = 86_400
_GATE = 16
_BUSY_TENANTS = 5
"""The first tenants, whose logs hold ``--busy`` entries (a page of every tenant's log then
depends on how much of each log it reads)."""


def _entry(tenant: str, i: int, ended_ms: int, refused: bool) -> Any:
    from responses_gateway.store.base import UsageCounts, UsageEntry

    return UsageEntry(
        tenant=tenant,
        response_id=f"{'req' if refused else 'resp'}_{tenant}x{i:04d}",
        model="scripted-chat",
        ended_at=ended_ms // 1000,
        status="refused" if refused else "completed",
        counts=UsageCounts(
            input_tokens=0 if refused else 120,
            output_tokens=0 if refused else 30,
            model_calls=int(not refused),
            responses=int(not refused),
            cost_usd=Decimal("0.001") if not refused else Decimal(0),
        ),
        api_key_id=f"key_{tenant}",
        extra={"ended_ms": ended_ms, "duration_ms": 850, "provider": "chat", "wire": "chat"},
    )


async def _gated(calls: list[Callable[[], Awaitable[Any]]]) -> None:
    gate = asyncio.Semaphore(_GATE)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await call()

    await asyncio.gather(*(one(c) for c in calls))


async def seed(store: Any, tenants: list[str], entries: int, busy: int) -> None:
    from responses_gateway.store.base import BudgetLimits, Conversation

    now_ms = int(time.time() * 1000)
    calls: list[Callable[[], Awaitable[Any]]] = []
    for n, tenant in enumerate(tenants):
        for i in range(busy if n < _BUSY_TENANTS else entries):
            entry = _entry(tenant, i, now_ms - n * 3 - i * 7_001, refused=i == 0)
            write = store.log_request if i == 0 else store.record_usage
            calls.append(lambda w=write, e=entry: w(e))
        trace = {"object": "trace", "id": f"trace_{tenant}", "workflow_name": "bench"}
        calls.append(lambda t=tenant, tr=trace: store.put_traces(t, [tr], []))
        conversation = Conversation(
            tenant=tenant, id=f"conv_{tenant}", created_at=now_ms // 1000, expires_at=0
        )
        calls.append(lambda c=conversation: store.create_conversation(c, []))
        limits = BudgetLimits(daily_tokens=1000)
        calls.append(lambda t=tenant, lim=limits: store.put_budget(t, lim))
    await _gated(calls)


async def tenant_list(store: Any) -> list[str]:
    """What :func:`~responses_gateway.api.console.known_tenants` reads: 7 days of hour rows."""
    from responses_gateway.usage.records import HOUR_WIDTH

    now = int(time.time())
    start = now - now % HOUR_WIDTH - 6 * _DAY
    rows = await store.read_metrics(start, now + 1, width=HOUR_WIDTH)
    return sorted({row.tenant for row in rows})


def _reads(store: Any, tenants: list[str]) -> dict[str, Callable[[], Awaitable[Any]]]:
    from responses_gateway.store.fanout import (
        conversations_across,
        requests_across,
        traces_across,
    )
    from responses_gateway.usage.records import RequestQuery

    async def budgets() -> None:
        now = int(time.time())
        await _gated([lambda t=t: store.get_spend(t, now) for t in tenants])

    return {
        "tenants": lambda: tenant_list(store),
        "requests_page_100": lambda: requests_across(
            store, tenants, before=None, after=None, limit=100, query=RequestQuery()
        ),
        "refusals_page_100": lambda: requests_across(
            store,
            tenants,
            before=None,
            after=None,
            limit=100,
            query=RequestQuery(statuses=frozenset({"refused"})),
        ),
        "traces_page_50": lambda: traces_across(store, tenants, before=None, limit=50),
        "conversations_page_50": lambda: conversations_across(
            store, tenants, before=None, limit=50
        ),
        "budgets": budgets,
        "baseline_one_tenant_requests_page_100": lambda: store.list_requests(tenants[0], limit=100),
    }


async def measure(store: Any, tenants: list[str], reads: int) -> dict[str, dict[str, Any]]:
    found = await tenant_list(store)
    assert set(tenants) <= set(found), "the tenant list misses seeded tenants"
    page = await _reads(store, tenants)["requests_page_100"]()
    assert 0 < len(page.entries) <= 100
    out: dict[str, dict[str, Any]] = {}
    for name, read in _reads(store, tenants).items():
        times: list[float] = []
        units: list[int] = []
        trips: list[int] = []
        for _ in range(reads):
            meter = getattr(store, "meter", None)
            if meter is not None:
                meter.reset()
            t0 = time.perf_counter()
            await read()
            times.append((time.perf_counter() - t0) * 1000)
            if meter is not None:
                total = meter.total()
                units.append(total.read_units)
                trips.append(total.round_trips)
        out[name] = {"median_ms": round(statistics.median(times), 1)}
        if units:
            out[name]["read_units"] = units[-1]
            out[name]["round_trips"] = trips[-1]
    base = out["baseline_one_tenant_requests_page_100"]["median_ms"]
    for figures in out.values():
        figures["ms_ratio_to_baseline"] = round(figures["median_ms"] / base, 1) if base else None
    return out


def _partition_queries() -> None:
    """Make moto's Query of the table read its partition, as DynamoDB does: moto sorts every
    item of the table on each Query (``Table.all_items``), so at 1,000 tenants one Query costs
    this machine hundreds of milliseconds and a page of every tenant many minutes. Only the
    time changes: the items a Query returns, and so the units, are the same."""
    from moto.dynamodb.models.table import Table  # type: ignore[import-untyped]

    if getattr(Table.query, "_partitioned", False):
        return
    whole = Table.query

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("index_name") or hash_key is None:
            return whole(self, hash_key, *args, **kwargs)
        self.all_items = lambda: list(self.items.get(hash_key, {}).values())
        try:
            return whole(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    query._partitioned = True  # type: ignore[attr-defined]
    setattr(Table, "query", query)  # noqa: B010


def run_dynamo(count: int, entries: int, busy: int, reads: int) -> dict[str, Any]:
    from responses_gateway.store.dynamo import DynamoStore
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.store.table import make_client

    _partition_queries()
    local = start_local_dynamodb(table_name=f"tenants-bench-{count}")
    # moto answers one request at a time, each Query walking the table in Python: at 1,000
    # tenants the 16 reads in flight queue for longer than the default read timeout
    client = make_client(
        endpoint_url=local.endpoint_url, credentials=("local", "local"), read_timeout=600
    )
    store = DynamoStore(client, local.table_name)
    try:
        tenants = [f"t{i:04d}" for i in range(count)]
        t0 = time.perf_counter()
        asyncio.run(seed(store, tenants, entries, busy))
        seeded = round(time.perf_counter() - t0, 1)
        return {"seed_s": seeded, **asyncio.run(measure(store, tenants, reads))}
    finally:
        store.close()
        local.stop()


def run_sqlite(count: int, entries: int, busy: int, reads: int) -> dict[str, Any]:
    from responses_gateway.store.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(str(Path(folder) / "bench.db"))
        try:
            tenants = [f"t{i:04d}" for i in range(count)]
            t0 = time.perf_counter()
            asyncio.run(seed(store, tenants, entries, busy))
            seeded = round(time.perf_counter() - t0, 1)
            return {"seed_s": seeded, **asyncio.run(measure(store, tenants, reads))}
        finally:
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", default="10,1000")
    parser.add_argument("--entries", type=int, default=3)
    parser.add_argument("--busy", type=int, default=150)
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()
    result: dict[str, Any] = {
        "entries_per_tenant": args.entries,
        "entries_of_the_5_busy_tenants": args.busy,
        "reads_each": args.reads,
    }
    for count in (int(c) for c in args.tenants.split(",")):
        found: dict[str, Any] = {}
        result[f"{count}_tenants"] = found
        for kind, run in (("sqlite", run_sqlite), ("dynamodb", run_dynamo)):
            found[kind] = run(count, args.entries, args.busy, args.reads)
            print(json.dumps({f"{count}_tenants_{kind}": found[kind]}), flush=True)  # noqa: T201
    print(json.dumps(result, indent=2))  # noqa: T201


if __name__ == "__main__":
    main()
