"""What routing adds to a healthy request, and what its shared health costs in DynamoDB.

Runs a :class:`~responses_gateway.service.Gateway` (no HTTP) on an embedded moto DynamoDB
server and one scripted Chat Completions upstream, and times the same ``store: false`` create
(prepare + loop to its end) for three models, interleaved in a rotating order after a warm-up:

- ``plain``: a provider's own model (no route: the loop calls the one adapter);
- ``routed``: a route with two deployments on that upstream (weighted), no limits;
- ``limited``: the same with ``rpm`` and ``tpm`` on each deployment (one conditional counter
  update before each call and one after it).

Reports the median and p90 wall time of each, routing's added median against ``plain``, and the
DynamoDB units and round trips per request of each (``store: false``: the only table traffic is
routing's; the usage ledger is off because the config sets no budgets... it still records usage,
so the ledger's write is subtracted by reporting ``plain``'s units as the baseline). The health
read (one BatchGet for the model's deployments) happens at most once per second per instance, so
its cost per request is shown separately as ``health reads per second per instance``.

Usage::

    python benchmarks/routing.py [--iterations N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from responses_gateway.config import parse_config
from responses_gateway.loop import NullSink, run_loop
from responses_gateway.routing.attempts import Attempts
from responses_gateway.service import Gateway
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, Turn
from responses_gateway.testing.server import run_in_thread

MODELS = ("plain", "routed", "limited")


def _config(url: str) -> Any:
    def deployments(limited: bool) -> list[dict[str, Any]]:
        limits = {"rpm": 1_000_000, "tpm": 1_000_000_000} if limited else {}
        tag = "l" if limited else "r"
        return [
            {"id": f"{tag}1", "provider": "chat", "model": "short", **limits},
            {"id": f"{tag}2", "provider": "chat", "model": "short", **limits},
        ]

    return parse_config(
        {
            "providers": [
                {"name": "chat", "base_url": f"{url}/v1", "api": "chat", "models": ["plain"]}
            ],
            "routes": [
                {"model": "routed", "deployments": deployments(False)},
                {"model": "limited", "deployments": deployments(True)},
            ],
        }
    )


async def measure(iterations: int) -> dict[str, Any]:
    answer = Turn(text="Hello! How can I help you today?")
    upstream = ScriptedUpstream(demo=False, brain=lambda body, wire: answer)
    upstream_server = run_in_thread(create_fake_upstream_app(upstream))
    dynamo = start_local_dynamodb(table_name="bench-routing")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    result: dict[str, Any] = {}
    times: dict[str, list[float]] = {m: [] for m in MODELS}
    units: dict[str, list[tuple[int, int, int]]] = {m: [] for m in MODELS}
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            gateway = Gateway(_config(upstream_server.url), client, store)
            body = {"input": "Hi", "store": False}
            warm = max(10, iterations // 10)
            for index in range(warm + iterations):
                shift = index % len(MODELS)
                for model in MODELS[shift:] + MODELS[:shift]:
                    store.meter.reset()
                    started = time.perf_counter()
                    run = await gateway.prepare({**body, "model": model}, "bench")
                    await run_loop(run.state, run.ctx, NullSink())
                    elapsed = time.perf_counter() - started
                    assert run.state.status == "completed", run.state.error
                    if index >= warm:
                        total = store.meter.total()
                        times[model].append(elapsed)
                        units[model].append(
                            (total.read_units, total.write_units, total.round_trips)
                        )
            result["acquire_us"] = await _acquire_cost(gateway)
    finally:
        store.close()
        dynamo.stop()
        upstream_server.stop()
    base = statistics.median(times["plain"])
    for model in MODELS:
        samples = sorted(times[model])
        reads, writes, trips = (statistics.mean(u[i] for u in units[model]) for i in range(3))
        result[model] = {
            "median_ms": round(statistics.median(samples) * 1000, 3),
            "p90_ms": round(samples[int(len(samples) * 0.9)] * 1000, 3),
            "added_median_ms": round((statistics.median(samples) - base) * 1000, 3),
            "read_units_per_request": round(reads, 3),
            "write_units_per_request": round(writes, 3),
            "round_trips_per_request": round(trips, 3),
        }
    return result


async def _acquire_cost(gateway: Gateway, count: int = 20_000) -> float:
    """Microseconds one healthy ``acquire`` takes with a warm health cache (the CPU routing
    adds per model call besides its store traffic)."""
    router = gateway.router_for("routed")
    await router.acquire(Attempts("routed"))  # warm the cache
    started = time.perf_counter()
    for _ in range(count):
        await router.acquire(Attempts("routed"))
    return round((time.perf_counter() - started) / count * 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(measure(args.iterations))
    for model, numbers in result.items():
        print(model, json.dumps(numbers))  # noqa: T201
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
