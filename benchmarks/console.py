"""What the console costs: its artifact, the cold start, the request log's DynamoDB units, and
the load time of the Requests page over a large log.

- **Artifact**: the bytes of ``responses_gateway/console/static`` (raw and gzipped), what the
  shared layer gains.
- **Cold start**: the app module's import time (median of ``--runs`` fresh interpreters), with
  every console module checked absent after it (the routes load on the first request under
  ``/console``, ``/v1/console/`` or ``/v1/traces/``), and what that first request's imports cost.
- **Units**: ``record_usage`` (ledger + request log, one transaction), ``log_request`` (a
  refused create), one ``list_requests`` page of 100 and one ``put_traces`` batch, from the
  store's meter, against an embedded DynamoDB.
- **Page load**: ``--records`` log entries of one tenant (written with BatchWriteItem, the items
  ``record_usage`` would write), then Chromium (``/usr/bin/chromium``) opens Requests; the time
  from the hash change to the first page rendered, median of ``--loads``.

Usage::

    python benchmarks/console.py [--records 10000] [--runs 5] [--loads 5]
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
t0 = time.perf_counter()
import responses_gateway.api.console, responses_gateway.api.admin, responses_gateway.api.traces
import responses_gateway.store._traces
print((time.perf_counter() - t0) * 1000)
"""


def cold_start(runs: int) -> dict[str, float]:
    """The app's import time (no console module in it), and what the first console request's
    imports cost."""
    app = []
    delta = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import responses_gateway.app"], check=True)
        app.append((time.perf_counter() - t0) * 1000)
        out = subprocess.run(
            [sys.executable, "-c", _DELTA], capture_output=True, text=True, check=True
        )
        delta.append(float(out.stdout.strip()))
    return {
        "app_import_process_ms": round(statistics.median(app), 1),
        "console_modules_at_startup": 0,
        "first_console_request_import_ms": round(statistics.median(delta), 2),
    }


async def units_and_seed(store: object, tenant: str, records: int, client: object) -> dict:
    from responses_gateway.store._codec import SCHEMA_ATTR, TTL_ATTR
    from responses_gateway.store._ledger import _entry_json, _log_pk, _log_sk
    from responses_gateway.store.base import UsageCounts, UsageEntry

    def entry(i: int, now: int) -> UsageEntry:
        return UsageEntry(
            tenant=tenant,
            response_id=f"resp_bench{i:06d}",
            model="scripted-chat",
            ended_at=now - records + i,
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
                "ended_ms": (now - records + i) * 1000,
                "duration_ms": 850,
                "client_tool_calls": 1,
            },
        )

    now = int(time.time())
    meter = store.meter  # type: ignore[attr-defined]
    meter.reset()
    await store.record_usage(entry(records, now + 1))  # type: ignore[attr-defined]
    recorded = meter.snapshot()["record_usage"]
    items = []
    for i in range(records):
        e = entry(i, now)
        items.append(
            {
                "PK": {"S": _log_pk(tenant)},
                "SK": {"S": _log_sk(e)},
                "entry": {"S": json.dumps(_entry_json(e), separators=(",", ":"))},
                SCHEMA_ATTR: {"N": "1"},
                TTL_ATTR: {"N": str(now + 86_400)},
            }
        )
    for start in range(0, len(items), 25):
        client.batch_write_item(  # type: ignore[attr-defined]
            RequestItems={
                store.table_name: [  # type: ignore[attr-defined]
                    {"PutRequest": {"Item": item}} for item in items[start : start + 25]
                ]
            }
        )
    refused = entry(records + 1, now + 2)
    refused.status, refused.counts = "refused", UsageCounts()
    meter.reset()
    await store.log_request(refused)  # type: ignore[attr-defined]
    logged = meter.snapshot()["log_request"]
    meter.reset()
    await store.list_requests(tenant, limit=100)  # type: ignore[attr-defined]
    page = meter.snapshot()["list_requests"]
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
        "list_requests_page_100_read_units": page.read_units,
        "list_requests_round_trips": page.round_trips,
        "put_traces_1_trace_10_spans_write_units": traces.write_units,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--loads", type=int, default=5)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.dynamo import DynamoStore
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.tenancy import TenancyPolicy, parse_keys
    from responses_gateway.testing.server import run_in_thread

    result: dict[str, object] = {"artifact": artifact(), "cold_start": cold_start(args.runs)}
    dynamo = start_local_dynamodb(table_name="console-bench")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    tenant = "bench"
    result["dynamodb"] = asyncio.run(units_and_seed(store, tenant, args.records, dynamo.client))
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
    app.state.tenancy = TenancyPolicy(keys=parse_keys(f"sk-bench:{tenant}"))
    server = run_in_thread(app)
    loads: list[float] = []
    try:
        with sync_playwright() as driver:
            browser = driver.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page()
            page.goto(f"{server.url}/console/")
            page.fill("#api-key", "sk-bench")
            page.click("#signin-form button[type=submit]")
            page.wait_for_selector('#page[data-ready="requests"]')
            for i in range(args.loads):
                ms = page.evaluate(
                    """async (i) => {
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
                    }""",
                    i + 1,
                )
                loads.append(ms)
            rows = page.locator("tbody tr").count()
            cold = browser.new_page()
            t0 = time.perf_counter()
            cold.goto(f"{server.url}/console/")
            cold.evaluate("k => sessionStorage.setItem('rg.apiKey', k)", "sk-bench")
            cold.reload()
            cold.wait_for_selector('#page[data-ready="requests"]')
            full = (time.perf_counter() - t0) * 1000
            browser.close()
    finally:
        server.stop()
        store.close()
        dynamo.stop()
    result["requests_page"] = {
        "records": args.records,
        "rows_rendered": rows,
        "median_render_ms": round(statistics.median(loads), 1),
        "first_open_with_reload_ms": round(full, 1),
    }
    print(json.dumps(result, indent=2))  # noqa: T201


if __name__ == "__main__":
    main()
