"""Cold start and first requests of the streaming function, in CPU time as well as wall time.

Each run is a fresh interpreter that imports ``streaming_app`` (``lambda_app``: DynamoDB store,
Powertools telemetry, this environment's packages) and then sends, in process (no HTTP server:
``httpx.ASGITransport``), two stored creates then two ``store: false`` creates with an MCP tool
(``first_process``), or two ``store: false`` creates (``unstored_process``). For each step it
reports the wall time and the **main thread's CPU time** (``time.thread_time``): what the event
loop's thread spent, which a loaded machine distorts far less than wall time, and which leaves
out the threads the gateway starts on purpose (the store's prefetch, the TLS context).

The wall time of a first create is mostly the DynamoDB store's construction (boto3, on the
prefetch thread) and its first calls: a stored create waits for them, and a ``store: false``
create too (the usage ledger writes to the store). The main thread's CPU is the gateway's own
part.

Usage::

    python benchmarks/first_request.py [--runs 5] [--tree DIR ...] [--json PATH]

``--tree`` (repeatable) runs other checkouts' ``shared/`` and ``functions/`` (before/after in
one run, interleaved). It reports, it does not assert.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import floor
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.mcp_servers import start_mcp_server
from responses_gateway.testing.server import run_in_thread

_CHILD = r"""
import asyncio, json, sys, time
wall, cpu = time.perf_counter(), time.thread_time()
import streaming_app
steps = {"import": ((time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000)}
import httpx
bodies = json.loads(sys.argv[1])
async def main():
    headers = {"authorization": "Bearer sk-bench"}
    transport = httpx.ASGITransport(app=streaming_app.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw", headers=headers,
                                 timeout=60) as client:
        for name, body in bodies:
            wall, cpu = time.perf_counter(), time.thread_time()
            answer = await client.post("/v1/responses", json=body)
            steps[name] = ((time.perf_counter() - wall) * 1000, (time.thread_time() - cpu) * 1000)
            assert answer.status_code == 200, answer.text
asyncio.run(main())
print("RESULT", json.dumps(steps))
"""


def _plans(mcp_url: str) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    stored = {"model": "short", "input": "Hi"}
    unstored = {**stored, "store": False}
    tool = {"type": "mcp", "server_label": "calc", "server_url": mcp_url}
    with_mcp = {**unstored, "tools": [{**tool, "require_approval": "never"}]}
    return {
        "first_process": [
            ("first create (stored)", stored),
            ("second create (stored)", stored),
            ("first create with MCP tools", with_mcp),
            ("second create with MCP tools", with_mcp),
        ],
        "unstored_process": [
            ("first create (store: false)", unstored),
            ("second create (store: false)", unstored),
        ],
    }


def measure(trees: list[Path], runs: int) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """tree -> step -> [(wall ms, main-thread CPU ms)] over ``runs`` interleaved runs."""
    dynamo = start_local_dynamodb(table_name="first-request")
    upstream = run_in_thread(floor._upstream_app())
    calc = start_mcp_server("calc")
    results: dict[str, dict[str, list[tuple[float, float]]]] = {str(t): {} for t in trees}
    prefix = tempfile.TemporaryDirectory()
    try:
        plans = _plans(calc.url)
        bytecode = floor.Bytecode(Path(prefix.name))  # as deployed: no spawn compiles a module
        for tree in trees:
            env = floor._cold_env(tree, "streaming", upstream.url, dynamo)
            for plan in plans.values():
                bytecode.warm(env, functools.partial(_run, plan=plan))
        bytecode.seal()
        for _ in range(runs):
            for tree in trees:
                env = bytecode.env(floor._cold_env(tree, "streaming", upstream.url, dynamo))
                for plan in plans.values():
                    for step, figures in _run(env, plan).items():
                        results[str(tree)].setdefault(step, []).append(figures)
    finally:
        prefix.cleanup()
        calc.stop()
        upstream.stop()
        dynamo.stop()
    return results


def _run(
    env: dict[str, str], plan: list[tuple[str, dict[str, Any]]]
) -> dict[str, tuple[float, float]]:
    """One fresh interpreter through ``plan``: step -> (wall ms, main-thread CPU ms)."""
    answer = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(plan)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [x for x in answer.stdout.splitlines() if x.startswith("RESULT ")]
    if answer.returncode != 0 or not lines:
        raise RuntimeError(answer.stderr[-3000:])
    return {step: tuple(figures) for step, figures in json.loads(lines[-1][7:]).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", type=Path, action="append", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    trees = args.tree or [floor.ROOT]
    results = measure(trees, args.runs)
    for tree, steps in results.items():
        print(f"{tree}  (medians of {args.runs} runs; import: both processes)")
        print(f"  {'step':34} {'wall':>10} {'main-thread CPU':>16}")
        for step, samples in steps.items():
            wall = statistics.median(s[0] for s in samples)
            cpu = statistics.median(s[1] for s in samples)
            print(f"  {step:34} {wall:7.1f} ms {cpu:13.1f} ms")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
