"""What the console costs: its artifact, the cold start, the request log's DynamoDB units, and
the load time of the Requests page over a large log.

- **Artifact**: the bytes of ``responses_gateway/console/static`` (raw and gzipped), what the
  shared layer gains.
- **Cold start**: the app module's import time (median of ``--runs`` fresh interpreters), with
  every console module checked absent after it (the routes load on the first request under
  ``/console``, ``/v1/console/`` or ``/v1/traces/``), and what that first request's imports cost
  (wall and CPU time of the process: the CPU figure is what a busy machine distorts least).
- **Units**: ``record_usage`` (ledger + request log, one transaction), ``log_request`` (a
  refused create), one ``list_requests`` page of 100 and one ``put_traces`` batch, from the
  store's meter, against an embedded DynamoDB.
- **Page load**: ``--records`` log entries of one tenant and ``--baseline-records`` of another
  (the baseline, same table, same run; written with BatchWriteItem, the items ``record_usage``
  would write), then Chromium (``/usr/bin/chromium``) opens Requests signed in as each tenant in
  turn (alternating, so load on the machine hits both alike): the time from the hash change to
  the rows rendered, median of ``--loads`` each, and a first open with a reload (a new tab:
  the page, the sign-in, the first rows), median of ``--opens`` each; the ratios of the
  medians; and the page's data call alone (``GET /v1/console/requests``) from an HTTP client,
  median of ``2 * --loads + 1`` each (the server's and the store's share). The baseline (100
  entries by default: one full page, so both render
  the same 100 rows) tells what the log's size costs: the page reads one Query of its newest
  100 entries whatever the log holds. The read units of that Query are reported for both, and
  the CPU time of one page read in this process (store client plus the embedded DynamoDB, whose
  Query walks the whole partition in Python where DynamoDB reads only the page).

Usage::

    python benchmarks/console.py [--records 10000] [--baseline-records 100] [--runs 5]
        [--loads 11] [--opens 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "shared/responses_gateway/console/static"


def artifact() -> dict[str, int]:
    files = sorted(STATIC.iterdir())
    raw = sum(f.stat().st_size for f in files)
    zipped = sum(len(gzip.compress(f.read_bytes(), 9)) for f in files)
    return {"files": len(files), "bytes": raw, "gzip_bytes": zipped}


_DELTA = """
import time, sys
import responses_gateway.app  # noqa: F401
lazy = ("responses_gateway.api.console", "responses_gateway.api.admin",
        "responses_gateway.api.traces", "responses_gateway.store._traces",
        "responses_gateway.console")
assert not [name for name in lazy if name in sys.modules], "a console module loads at startup"
t0, c0 = time.perf_counter(), time.process_time()
import responses_gateway.api.console, responses_gateway.api.admin, responses_gateway.api.traces
import responses_gateway.store._traces
print((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000)
"""


def cold_start(runs: int) -> dict[str, float]:
    """The app's import time (no console module in it), and what the first console request's
    imports cost."""
    app = []
    delta = []
    cpu = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import responses_gateway.app"], check=True)
        app.append((time.perf_counter() - t0) * 1000)
        out = subprocess.run(
            [sys.executable, "-c", _DELTA], capture_output=True, text=True, check=True
        )
        wall, spent = out.stdout.split()
        delta.append(float(wall))
        cpu.append(float(spent))
    return {
        "app_import_process_ms": round(statistics.median(app), 1),
        "console_modules_at_startup": 0,
        "first_console_request_import_ms": round(statistics.median(delta), 2),
        "first_console_request_import_cpu_ms": round(statistics.median(cpu), 2),
    }


def _entry(tenant: str, i: int, ended_at: int) -> object:
    """A request-log entry like the ones ``record_usage`` writes for a Codex turn."""
    from responses_gateway.store.base import UsageCounts, UsageEntry

    return UsageEntry(
        tenant=tenant,
        response_id=f"resp_bench{i:06d}",
        model="scripted-chat",
        ended_at=ended_at,
        status="completed",
        counts=UsageCounts(
            input_tokens=120, output_tokens=30, model_calls=1, responses=1, cost_usd=Decimal(0)
        ),
        api_key_id="key_bench",
        extra={
            "provider": "chat",
            "wire": "chat",
            "stored": False,
            "stream": True,
            "client": {"thread_id": f"thr-{i % 50}", "session_id": f"thr-{i % 50}"},
            "ended_ms": ended_at * 1000,
            "duration_ms": 850,
            "client_tool_calls": 1,
        },
    )


def seed(client: object, table: str, tenant: str, records: int, now: int) -> None:
    """``records`` log entries of ``tenant`` (newest ``now``), 25 per BatchWriteItem."""
    from responses_gateway.store._codec import SCHEMA_ATTR, TTL_ATTR
    from responses_gateway.store._ledger import _entry_json, _log_pk, _log_sk

    items = []
    for i in range(records):
        entry = _entry(tenant, i, now - records + i)
        items.append(
            {
                "PK": {"S": _log_pk(tenant)},
                "SK": {"S": _log_sk(entry)},  # type: ignore[arg-type]
                "entry": {"S": json.dumps(_entry_json(entry), separators=(",", ":"))},  # type: ignore[arg-type]
                SCHEMA_ATTR: {"N": "1"},
                TTL_ATTR: {"N": str(now + 86_400)},
            }
        )
    for start in range(0, len(items), 25):
        client.batch_write_item(  # type: ignore[attr-defined]
            RequestItems={
                table: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            }
        )


async def page_units(store: object, tenant: str) -> float:
    """Read units of the Requests page's one Query (the newest 100 entries) of ``tenant``."""
    meter = store.meter  # type: ignore[attr-defined]
    meter.reset()
    await store.list_requests(tenant, limit=100)  # type: ignore[attr-defined]
    return float(meter.snapshot()["list_requests"].read_units)


async def page_cpu(store: object, tenants: list[str], reads: int) -> dict[str, float]:
    """Per tenant: the median CPU time of this process (the store client and the embedded
    DynamoDB, which runs in it) for one page read, the tenants alternating."""
    spent: dict[str, list[float]] = {name: [] for name in tenants}
    for i in range(reads):
        for name in tenants if i % 2 == 0 else list(reversed(tenants)):
            c0 = time.process_time()
            await store.list_requests(name, limit=100)  # type: ignore[attr-defined]
            spent[name].append((time.process_time() - c0) * 1000)
    return {name: round(statistics.median(values), 2) for name, values in spent.items()}


async def units(store: object, tenant: str) -> dict:
    from responses_gateway.store.base import UsageCounts

    now = int(time.time())
    meter = store.meter  # type: ignore[attr-defined]
    meter.reset()
    await store.record_usage(_entry(tenant, 999_998, now + 1))  # type: ignore[attr-defined]
    recorded = meter.snapshot()["record_usage"]
    refused = _entry(tenant, 999_999, now + 2)
    refused.status, refused.counts = "refused", UsageCounts()  # type: ignore[attr-defined]
    meter.reset()
    await store.log_request(refused)  # type: ignore[attr-defined]
    logged = meter.snapshot()["log_request"]
    meter.reset()
    spans = [
        {
            "object": "trace.span",
            "id": f"span_{i}",
            "trace_id": "trace_bench",
            "started_at": "2026-01-01T00:00:00Z",
            "span_data": {"type": "response", "response_id": f"resp_{i}"},
        }
        for i in range(10)
    ]
    await store.put_traces(tenant, [{"object": "trace", "id": "trace_bench"}], spans)  # type: ignore[attr-defined]
    traces = meter.snapshot()["put_traces"]
    return {
        "record_usage_write_units": recorded.write_units,
        "record_usage_round_trips": recorded.round_trips,
        "log_request_write_units": logged.write_units,
        "log_request_round_trips": logged.round_trips,
        "put_traces_1_trace_10_spans_write_units": traces.write_units,
    }


_RENDER = """async (i) => {
  const main = document.getElementById("page");
  main.replaceChildren();
  delete main.dataset.ready;
  const t0 = performance.now();
  location.hash = i % 2 ? "#/requests?status=completed" : "#/requests";
  while (document.getElementById("page").dataset.ready !== "requests" ||
         !document.querySelector("tbody tr")) {
    await new Promise((r) => requestAnimationFrame(r));
  }
  return performance.now() - t0;
}"""


def _signed_in(browser: object, url: str, key: str) -> tuple[object, float]:
    """A tab on the console signed in with ``key``, and how long its first open took (page
    load, sign-in from session storage, the Requests page's first rows)."""
    page = browser.new_page()  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    page.goto(f"{url}/console/#/requests")
    page.evaluate("k => sessionStorage.setItem('rg.apiKey', k)", key)
    page.reload()
    page.wait_for_selector('#page[data-ready="requests"] tbody tr')
    return page, (time.perf_counter() - t0) * 1000


def page_loads(
    url: str, keys: dict[str, str], loads: int, opens: int
) -> dict[str, dict[str, float]]:
    """Per tenant: the median first open with a reload (``opens`` each, after one unmeasured
    warm-up open) and the median render of ``loads`` Requests navigations; the tenants
    alternate, each starting every other round."""
    from playwright.sync_api import sync_playwright

    renders: dict[str, list[float]] = {name: [] for name in keys}
    firsts: dict[str, list[float]] = {name: [] for name in keys}
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
        )
        warm, _ = _signed_in(browser, url, next(iter(keys.values())))
        warm.close()  # type: ignore[attr-defined]
        tabs: dict[str, object] = {}
        for i in range(opens):
            for name in list(keys) if i % 2 == 0 else list(reversed(keys)):
                if name in tabs:
                    tabs[name].close()  # type: ignore[attr-defined]
                tabs[name], took = _signed_in(browser, url, keys[name])
                firsts[name].append(took)
        for i in range(loads):
            for name in list(keys) if i % 2 == 0 else list(reversed(keys)):
                renders[name].append(tabs[name].evaluate(_RENDER, i + 1))  # type: ignore[attr-defined]
        rows = {name: tabs[name].locator("tbody tr").count() for name in keys}  # type: ignore[attr-defined]
        browser.close()
    return {
        name: {
            "rows_rendered": rows[name],
            "median_render_ms": round(statistics.median(renders[name]), 1),
            "median_first_open_with_reload_ms": round(statistics.median(firsts[name]), 1),
        }
        for name in keys
    }


def api_reads(url: str, keys: dict[str, str], reads: int) -> dict[str, float]:
    """Per tenant: the median wall time of the page's data call (``GET /v1/console/requests``,
    100 entries) from a plain HTTP client, the tenants alternating: the server's and the
    store's share of a page load."""
    import httpx

    took: dict[str, list[float]] = {name: [] for name in keys}
    with httpx.Client(base_url=url, timeout=60) as http:
        for i in range(reads):
            for name in list(keys) if i % 2 == 0 else list(reversed(keys)):
                t0 = time.perf_counter()
                answer = http.get(
                    "/v1/console/requests",
                    params={"limit": 100},
                    headers={"authorization": f"Bearer {keys[name]}"},
                )
                took[name].append((time.perf_counter() - t0) * 1000)
                answer.raise_for_status()
    return {name: round(statistics.median(values), 1) for name, values in took.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--baseline-records", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--loads", type=int, default=11)
    parser.add_argument("--opens", type=int, default=5)
    args = parser.parse_args()

    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.dynamo import DynamoStore
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.tenancy import TenancyPolicy, parse_keys
    from responses_gateway.testing.server import run_in_thread

    result: dict[str, object] = {"artifact": artifact(), "cold_start": cold_start(args.runs)}
    dynamo = start_local_dynamodb(table_name="console-bench")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    tenants = {"large": args.records, "baseline": args.baseline_records}
    now = int(time.time())
    for tenant, records in tenants.items():
        seed(dynamo.client, dynamo.table_name, tenant, records, now)
    result["dynamodb"] = asyncio.run(units(store, "units"))
    result["dynamodb"]["requests_page_read_units"] = {  # type: ignore[index]
        tenant: asyncio.run(page_units(store, tenant)) for tenant in tenants
    }
    result["dynamodb"]["requests_page_read_cpu_ms"] = asyncio.run(  # type: ignore[index]
        page_cpu(store, list(tenants), args.loads * 2 + 1)
    )
    config = parse_config(
        {
            "providers": [
                {
                    "name": "chat",
                    "base_url": "http://127.0.0.1:9/v1",
                    "api": "chat",
                    "models": ["scripted-chat"],
                }
            ]
        },
        env={},
    )
    app = create_app(config, store)
    keys = {tenant: f"sk-bench-{tenant}" for tenant in tenants}
    app.state.tenancy = TenancyPolicy(
        keys=parse_keys(",".join(f"{k}:{t}" for t, k in keys.items()))
    )
    server = run_in_thread(app)
    try:
        loads = page_loads(server.url, keys, args.loads, args.opens)
        reads = api_reads(server.url, keys, args.loads * 2 + 1)
    finally:
        server.stop()
        store.close()
        dynamo.stop()
    for tenant, median in reads.items():
        loads[tenant]["median_data_call_ms"] = median
    large, baseline = loads["large"], loads["baseline"]
    result["requests_page"] = {
        "records": args.records,
        "baseline_records": args.baseline_records,
        "loads_each": args.loads,
        "opens_each": args.opens,
        "large": large,
        "baseline": baseline,
        "render_ratio_large_over_baseline": round(
            large["median_render_ms"] / baseline["median_render_ms"], 2
        ),
        "data_call_ratio_large_over_baseline": round(
            large["median_data_call_ms"] / baseline["median_data_call_ms"], 2
        ),
        "first_open_ratio_large_over_baseline": round(
            large["median_first_open_with_reload_ms"]
            / baseline["median_first_open_with_reload_ms"],
            2,
        ),
    }
    print(json.dumps(result, indent=2))  # noqa: T201


if __name__ == "__main__":
    main()
