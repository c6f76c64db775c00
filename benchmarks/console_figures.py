"""The console's figures of issue #30: what a first load costs, how many API calls each page
makes, and what the overview's reads cost on DynamoDB as traffic grows.

- **First load** (Chromium, ``/usr/bin/chromium``): a new tab with an empty cache, already signed
  in, opens ``/console/`` and renders the Overview (the landing page) against a gateway with some
  traffic: the bytes it received (every response, headers included, as Chromium counts them:
  ``Network.loadingFinished.encodedDataLength``), its requests, and the time from navigation to
  the rendered page; then the same tab reloaded (the hashed files come from its cache). Median of
  ``--loads`` each.
- **API calls per page**: the ``/v1/`` requests each page makes when opened from another one (the
  sign-in's ``/me`` and ``/tenants`` are made once per tab, not per page).
- **Overview read units**: three tables on an embedded DynamoDB hold the ledger rows that 1x, 10x
  and 100x a base traffic (``--per-minute`` requests a minute, over ``--tenants`` tenants x 2
  models x 2 keys, for 7 days; 2% failed, 1% refused, durations and first tokens spread over
  milliseconds to minutes) would have added up: the rows ``record_usage`` ADDs to, built in
  memory and written whole. Then the overview's read (``read_metrics``: five-minute rows up to
  two days, hour rows beyond) is metered for each range: read units (eventually consistent, as
  the overview reads), round trips, rows and their bytes. The rows are what traffic adds to,
  not the requests, so the units grow with tenants, models, keys and occupied histogram bins,
  not with requests.

Usage::

    python benchmarks/console_figures.py [--loads 5] [--per-minute 1] [--tenants 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"]
PAGES = [
    ("overview", "#/overview?range=24h", "overview"),
    ("requests", "#/requests", "requests"),
    ("response", "#/response/{response}", "response"),
    ("traces", "#/traces", "traces"),
    ("trace", "#/trace/trace_bench", "trace"),
    ("conversations", "#/conversations", "conversations"),
    ("usage", "#/usage", "usage"),
    ("keys", "#/keys", "keys"),
    ("playground", "#/playground", "playground"),
]


def _gateway() -> tuple[Any, Any, str, str]:
    """A served gateway (SQLite) with some traffic of tenant ``alpha``; returns the servers, an
    operator key and one response id."""
    import httpx

    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore
    from responses_gateway.tenancy import KEYS_FILE_ENV
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn, Usage
    from responses_gateway.testing.server import run_in_thread

    upstream = ScriptedUpstream(demo=False)
    model = run_in_thread(create_fake_upstream_app(upstream))
    config = parse_config(
        {
            "providers": [{"name": "chat", "base_url": f"{model.url}/v1", "api": "chat"}],
            "operators": ["ops"],
            "prices": {"*": {"input": 1, "output": 3}},
        },
        env={},
    )
    folder = Path(tempfile.mkdtemp())
    (folder / "keys").write_text("sk-bench-ops:ops\nsk-bench-alpha:alpha\n")
    app = create_app(config, SqliteStore(folder / "db"))
    app.state.tenancy_env = {KEYS_FILE_ENV: str(folder / "keys")}
    gateway = run_in_thread(app)
    headers = {"authorization": "Bearer sk-bench-alpha"}
    with httpx.Client(base_url=gateway.url, headers=headers, timeout=30) as http:
        for i in range(20):
            upstream.push(Turn(text=f"answer {i}", usage=Usage(100 + i, 20)))
            response = http.post("/v1/responses", json={"model": "m", "input": "q"}).json()["id"]
        spans = [
            {
                "object": "trace.span",
                "id": "s1",
                "trace_id": "trace_bench",
                "started_at": "2026-01-01T00:00:00+00:00",
                "ended_at": "2026-01-01T00:00:01+00:00",
                "span_data": {"type": "response", "response_id": response},
            }
        ]
        trace = {"object": "trace", "id": "trace_bench", "workflow_name": "bench"}
        http.post("/v1/traces/ingest", json={"data": [trace, *spans]})
        http.post(
            "/v1/conversations",
            json={"items": [{"type": "message", "role": "user", "content": "hi"}]},
        )
    return (gateway, model), "sk-bench-ops", response, gateway.url


def _load(browser: Any, url: str, key: str, loads: int) -> dict[str, Any]:
    """Cold and warm loads of the landing page, signed in, with the tenant ``alpha`` picked."""
    cold: list[tuple[int, int, float]] = []
    warm: list[tuple[int, int, float]] = []
    files: list[str] = []
    for _ in range(loads):
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.add_init_script(
            f"sessionStorage.setItem('rg.apiKey', {json.dumps(key)});"
            "sessionStorage.setItem('rg.tenant', 'alpha');"
        )
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        received: dict[str, float] = {}
        names: dict[str, str] = {}
        cdp.on(
            "Network.requestWillBeSent",
            lambda e, names=names: names.__setitem__(e["requestId"], e["request"]["url"]),
        )
        cdp.on(
            "Network.loadingFinished",
            lambda e, got=received: got.__setitem__(e["requestId"], e["encodedDataLength"]),
        )
        for bucket in (cold, warm):
            received.clear()
            started = time.perf_counter()
            if bucket is cold:
                page.goto(f"{url}/console/#/overview")
            else:
                page.reload()
            page.wait_for_selector('#page[data-ready="overview"]', timeout=30_000)
            elapsed = (time.perf_counter() - started) * 1000
            page.wait_for_timeout(300)  # late loadingFinished events
            bucket.append((int(sum(received.values())), len(received), elapsed))
            if bucket is cold and not files:
                files = sorted(
                    names[r].split("/console/")[-1].split("?")[0] or "index.html"
                    for r in received
                    if "/console/" in names[r] and "/v1/" not in names[r]
                )
        context.close()

    def median(rows: list[tuple[int, int, float]]) -> dict[str, float]:
        return {
            "bytes": statistics.median(r[0] for r in rows),
            "requests": statistics.median(r[1] for r in rows),
            "ms": round(statistics.median(r[2] for r in rows), 1),
        }

    return {"cold": median(cold), "warm": median(warm), "cold_files": files}


def _calls(browser: Any, url: str, key: str, response: str) -> dict[str, int]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(
        f"sessionStorage.setItem('rg.apiKey', {json.dumps(key)});"
        "sessionStorage.setItem('rg.tenant', 'alpha');"
    )
    page = context.new_page()
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/v1/" in r.url else None)
    page.goto(f"{url}/console/#/playground")
    page.wait_for_selector('#page[data-ready="playground"]')
    found = {}
    for name, hash_, ready in PAGES:
        page.evaluate("() => { delete document.getElementById('page').dataset.ready; }")
        asked.clear()
        page.evaluate("h => { location.hash = h; }", hash_.format(response=response))
        page.wait_for_selector(f'#page[data-ready="{ready}"]', timeout=30_000)
        page.wait_for_timeout(200)
        found[name] = len(asked)
    context.close()
    return found


def browser_figures(loads: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    servers, key, response, url = _gateway()
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                return {
                    "first_load": _load(browser, url, key, loads),
                    "api_calls_per_page": _calls(browser, url, key, response),
                }
            finally:
                browser.close()
    finally:
        for server in servers:
            server.stop()


# -- Overview read units ----------------------------------------------------------------------

DAY = 86_400


def _rows(scale: int, per_minute: float, tenants: int, now: int, seed: int) -> list[Any]:
    """The ledger rows (hour and five-minute) a week of traffic at ``scale`` x ``per_minute``
    requests a minute adds up to."""
    from responses_gateway.store.base import UsageCounts, UsageEntry
    from responses_gateway.usage.metrics import entry_stats, merge
    from responses_gateway.usage.records import FINE_WIDTH, HOUR_WIDTH, UsageBucket

    rng = random.Random(seed)
    groups = [
        (f"tenant-{t}", f"model-{m}", f"key-{t}-{k}")
        for t in range(tenants)
        for m in range(2)
        for k in range(2)
    ]
    total = int(7 * 24 * 60 * per_minute * scale)
    rows: dict[tuple[int, int, str, str, str], UsageBucket] = {}
    for _ in range(total):
        ended = now - rng.randrange(7 * DAY)
        tenant, model, key = rng.choice(groups)
        roll = rng.random()
        status = "refused" if roll < 0.01 else "failed" if roll < 0.03 else "completed"
        duration = int(rng.lognormvariate(6.7, 1.0))  # median about 800 ms
        extra: dict[str, Any] = {"duration_ms": duration}
        if status == "completed":
            extra["ttft_ms"] = int(duration * rng.uniform(0.1, 0.6))
        counts = UsageCounts(
            input_tokens=rng.randrange(200, 4000),
            output_tokens=rng.randrange(20, 800),
            model_calls=1,
            responses=int(status != "refused"),
            cost_usd=Decimal("0.001"),
        )
        entry = UsageEntry(tenant, "r", model, ended, status, counts, api_key_id=key, extra=extra)
        stats = entry_stats(entry)
        for width in (HOUR_WIDTH, FINE_WIDTH):
            if width == FINE_WIDTH and ended < now - 3 * DAY:
                continue
            start = ended - ended % width
            row = rows.setdefault(
                (width, start, tenant, model, key),
                UsageBucket(
                    start, tenant, model, key, UsageCounts(cost_usd=Decimal(0)), width=width
                ),
            )
            row.counts.add(counts)
            merge(row.stats, stats)
    return list(rows.values())


def _item(row: Any) -> dict[str, Any]:
    """The item the ledger's ADDs leave for ``row``."""
    from datetime import UTC, datetime

    from responses_gateway.store._codec import TTL_ATTR, escape
    from responses_gateway.store._ledger import _COUNTERS
    from responses_gateway.usage.records import HOUR_WIDTH

    moment = datetime.fromtimestamp(row.hour_start, UTC)
    clock = moment.strftime("%H") if row.width == HOUR_WIDTH else moment.strftime("%H%M")
    prefix = "U" if row.width == HOUR_WIDTH else "F"
    item: dict[str, Any] = {
        "PK": {"S": f"{prefix}#{moment.strftime('%Y-%m-%d')}"},
        "SK": {
            "S": "#".join((clock, escape(row.tenant), escape(row.model), escape(row.api_key_id)))
        },
        "tenant": {"S": row.tenant},
        "model": {"S": row.model},
        "api_key": {"S": row.api_key_id},
        "cost": {"N": format(row.counts.cost_usd, "f")},
        TTL_ATTR: {"N": str(row.hour_start + 400 * DAY)},
    }
    for attr, name in _COUNTERS:
        item[attr] = {"N": str(getattr(row.counts, name))}
    for name, value in row.stats.items():
        item[name] = {"N": str(value)}
    return item


async def _read(store: Any, start: int, end: int, width: int) -> dict[str, Any]:
    store.meter.reset()
    rows = await store.read_metrics(start, end, width=width)
    spent = store.meter.snapshot()["read_metrics"]
    return {
        "rows": len(rows),
        "read_units": spent.read_units,
        "round_trips": spent.round_trips,
    }


def overview_units(per_minute: float, tenants: int) -> dict[str, Any]:
    from responses_gateway.store._codec import item_size
    from responses_gateway.store.dynamo import DynamoStore
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.store.table import create_table, make_client
    from responses_gateway.usage.overview import window

    local = start_local_dynamodb(table_name="overview-1x")
    now = int(time.time())
    found: dict[str, Any] = {}
    try:
        for scale in (1, 10, 100):
            table = f"overview-{scale}x"
            create_table(local.client, table)
            rows = _rows(scale, per_minute, tenants, now, seed=scale)
            items = [_item(row) for row in rows]
            for i in range(0, len(items), 25):
                local.client.batch_write_item(
                    RequestItems={table: [{"PutRequest": {"Item": it}} for it in items[i : i + 25]]}
                )
            # moto's Query walks the whole table in Python: give its answers time
            slow = make_client(
                endpoint_url=local.endpoint_url, credentials=("local", "local"), read_timeout=300
            )
            store = DynamoStore(slow, table)
            try:
                by_range = {}
                for name in ("1h", "24h", "7d", "30d"):
                    span = window(name, now)
                    by_range[name] = asyncio.run(_read(store, span.start, span.end, span.width))
            finally:
                store.close()
            found[f"{scale}x"] = {
                "requests_per_day": int(24 * 60 * per_minute * scale),
                "rows_written": len(items),
                "row_bytes_median": int(statistics.median(item_size(i) for i in items)),
                "overview": by_range,
            }
    finally:
        local.stop()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--per-minute", type=float, default=1.0)
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--skip-browser", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    if not args.skip_browser:
        report.update(browser_figures(args.loads))
    report["overview_read_units"] = overview_units(args.per_minute, args.tenants)
    print(json.dumps(report, indent=2))  # noqa: T201


if __name__ == "__main__":
    main()
