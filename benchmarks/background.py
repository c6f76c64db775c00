"""What background mode costs, against the same response run in the foreground, in one run.

Runs a :class:`~responses_gateway.service.Gateway` (no HTTP) on an embedded moto DynamoDB
server, the scripted Chat Completions upstream and a loopback ``calc`` MCP server, and for two
scripts (a plain text answer, and a three-call MCP loop: list, add, divide, answer) measures:

- DynamoDB read/write units and round trips of the whole response (the background one created
  with and without ``stream``: only a streamed one logs its events): a foreground create
  (``run_loop`` + its record) against a background one (create: checkpoint, first events,
  record; then the worker: every checkpoint, event batch, journal entry, the terminal claim and
  the record);
- wall time: a foreground create to its end, a background create to its ``queued`` answer, and
  the background worker to the end (medians over ``--iterations``), reported as ratios against
  the foreground create of the same run.

Usage::

    python benchmarks/background.py [--iterations N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from responses_gateway.background.runs import start_background
from responses_gateway.background.worker import run_worker
from responses_gateway.config import parse_config
from responses_gateway.loop import NullSink, run_loop
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.service import Gateway
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.mcp_servers import start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import run_in_thread

TENANT = "bench"


class _NoLauncher:
    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        return None

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        return None


def _text(upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(text=" ".join(["word"] * 60)))


def _mcp(upstream: ScriptedUpstream) -> None:
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":2,"b":3}', "call_1")]),
        Turn(tool_calls=[ToolCall("calc__divide", '{"a":10,"b":4}', "call_2")]),
        Turn(text="5 and 2.5."),
    )


async def _units(store: DynamoStore, action: Callable[[], Any]) -> tuple[dict[str, int], float]:
    store.meter.reset()
    started = time.perf_counter()
    await action()
    elapsed = time.perf_counter() - started
    total = store.meter.total()
    units = {
        "read_units": total.read_units,
        "write_units": total.write_units,
        "round_trips": total.round_trips,
    }
    return units, elapsed


async def measure(iterations: int) -> dict[str, Any]:
    upstream = ScriptedUpstream(demo=False)
    upstream_server = run_in_thread(create_fake_upstream_app(upstream))
    dynamo = start_local_dynamodb(table_name="bench-background")
    calc = start_mcp_server("calc")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    config = parse_config(
        {
            "providers": [
                {
                    "name": "chat",
                    "base_url": f"{upstream_server.url}/v1",
                    "api": "chat",
                    "models": ["bench"],
                }
            ]
        }
    )
    tool = {
        "type": "mcp",
        "server_label": "calc",
        "server_url": calc.url,
        "require_approval": "never",
    }
    results: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(trust_env=False) as client:
            gateway = Gateway(
                config,
                client,
                store,
                mcp_policy=McpPolicy(allow_http=True, allow_loopback=True),
                launcher=_NoLauncher(),
            )
            scenarios = (
                ("text", _text, [], False),
                ("mcp loop", _mcp, [tool], False),
                ("mcp loop, streamed (events logged)", _mcp, [tool], True),
            )
            for name, script, tools, streamed in scenarios:
                body = {"model": "bench", "input": "Go", "tools": tools}
                fore: list[float] = []
                queued: list[float] = []
                worker: list[float] = []
                fore_units: dict[str, int] = {}
                back_units: dict[str, int] = {}
                for _ in range(iterations):
                    script(upstream)
                    run = await gateway.prepare(dict(body), TENANT)
                    fore_units, elapsed = await _units(
                        store, lambda run=run: run_loop(run.state, run.ctx, NullSink())
                    )
                    fore.append(elapsed)

                    script(upstream)
                    background = {**body, "background": True, "stream": streamed}
                    run = await gateway.prepare(background, TENANT)
                    create_units, elapsed = await _units(
                        store, lambda run=run: start_background(gateway, run)
                    )
                    queued.append(elapsed)
                    rid = run.state.response_id
                    work_units, elapsed = await _units(
                        store, lambda rid=rid: run_worker(gateway, TENANT, rid)
                    )
                    worker.append(elapsed)
                    back_units = {k: create_units[k] + work_units[k] for k in create_units}
                fore_ms = statistics.median(fore) * 1000
                results[name] = {
                    "foreground_units": fore_units,
                    "background_units": back_units,
                    "foreground_create_ms": round(fore_ms, 2),
                    "background_queued_ms": round(statistics.median(queued) * 1000, 2),
                    "background_worker_ms": round(statistics.median(worker) * 1000, 2),
                    "queued_vs_foreground": round(statistics.median(queued) * 1000 / fore_ms, 2),
                    "background_total_vs_foreground": round(
                        (statistics.median(queued) + statistics.median(worker)) * 1000 / fore_ms,
                        2,
                    ),
                }
    finally:
        store.close()
        calc.stop()
        dynamo.stop()
        upstream_server.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = asyncio.run(measure(args.iterations))
    for name, row in results.items():
        print(f"{name}:")
        for key, value in row.items():
            print(f"  {key}: {value}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
