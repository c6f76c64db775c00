"""Load: many concurrent clients against one local gateway process, for a bounded time.

Scenarios (each ``--seconds`` long, default 20):

- ``stream-100`` / ``stream-200``: that many concurrent streaming clients; half of them leave
  after the first output event (they close the connection mid-stream);
- ``buffered-50``: 50 concurrent non-streaming clients.

Every request names a function tool on one request in four (the demo model then calls it), so
tool calls are counted too. After each scenario every created id is read back: a record is
*lost* when it is missing, or still unfinished once the scenario has settled; a client that left
may find its response ``cancelled`` (or ``completed`` when the model finished first). Reported
per scenario: requests sent, 5xx, records lost, duplicate tool calls (the same ``call_id`` twice
in one response), gateway RSS before and after, p50/p99 latency (to the last byte; for clients
that left, to their first output event) and the gateway's event-loop lag (p50/p99/max of a
50 ms sampler running inside the gateway).

Processes (loopback only): the scripted upstream (``--serve upstream``), the gateway with its
embedded DynamoDB (``--serve gateway``, the same process shape as ``responses-gateway serve``)
and this client. Each child prints ``PORT <n>`` and exits when its stdin closes. The numbers are
as noisy as the machine: they are reported, never asserted::

    python benchmarks/load.py [--seconds 20] [--json load.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

LAG_PERIOD = 0.05
TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


# --------------------------------------------------------------------------- child processes


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _gateway_app(upstream_url: str) -> Any:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.select import open_store

    config = parse_config(
        {"providers": [{"name": "demo", "base_url": upstream_url, "api": "chat", "default": True}]}
    )
    opened = open_store({"GATEWAY_STORE": "moto"})
    app = create_app(config, opened.store)
    lags: list[float] = []
    sampler: list[asyncio.Task[None]] = []

    async def sample() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(LAG_PERIOD)
            lags.append(time.perf_counter() - started - LAG_PERIOD)

    async def stats(request: Request) -> JSONResponse:
        reset = request.query_params.get("reset", "").lower() in ("1", "true", "yes", "on")
        if not sampler:
            sampler.append(asyncio.create_task(sample()))
        taken = sorted(lags)
        if reset:
            lags.clear()
        return JSONResponse({"rss": _rss_bytes(), "lag": taken})

    app.router.routes.append(Route("/__bench/stats", stats, methods=["GET"]))
    return app


def _serve(role: str, upstream_url: str | None) -> int:
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream
    from responses_gateway.testing.server import run_in_thread

    if role == "upstream":
        app = create_fake_upstream_app(ScriptedUpstream())  # the demo model answers all
    else:
        app = _gateway_app(str(upstream_url))
    server = run_in_thread(app)
    print(f"PORT {server.port}", flush=True)
    sys.stdin.buffer.read()
    server.stop()
    return 0


class Child:
    def __init__(self, role: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", role, *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"{role} did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# --------------------------------------------------------------------------- clients


@dataclass
class Tally:
    sent: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    created: list[tuple[str, bool]] = field(default_factory=list)
    """(response id, whether the client left mid-stream)."""
    duplicate_calls: int = 0
    errors: Counter[str] = field(default_factory=Counter)


def _body(n: int, stream: bool) -> dict[str, Any]:
    words = " ".join(f"word{i}" for i in range(60))
    body: dict[str, Any] = {"model": "demo", "input": f"Request {n}: {words}", "stream": stream}
    if n % 4 == 0:
        body["tools"] = [TOOL]
        body["input"] = f"What is the weather in Paris? ({n})"
    return body


def _count_duplicates(output: list[dict[str, Any]]) -> int:
    ids = [i.get("call_id") for i in output if i.get("type") == "function_call"]
    return len(ids) - len(set(ids))


async def _streaming_client(
    client: httpx.AsyncClient, tally: Tally, until: float, leave: bool, seed: int
) -> None:
    n = seed
    while time.monotonic() < until:
        n += 1000
        started = time.perf_counter()
        tally.sent += 1
        response_id = None
        try:
            async with client.stream("POST", "/v1/responses", json=_body(n, True)) as answer:
                tally.statuses[answer.status_code] += 1
                if answer.status_code != 200:
                    await answer.aread()
                    continue
                final: dict[str, Any] | None = None
                async for line in answer.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if event["type"] == "response.created":
                        response_id = event["response"]["id"]
                    if leave and event["type"] == "response.output_item.added":
                        break
                    if event["type"] in ("response.completed", "response.incomplete"):
                        final = event["response"]
                if final is not None:
                    tally.duplicate_calls += _count_duplicates(final["output"])
        except httpx.HTTPError as error:
            tally.errors[type(error).__name__] += 1
            continue
        tally.latencies.append(time.perf_counter() - started)
        if response_id:
            tally.created.append((response_id, leave))


async def _buffered_client(
    client: httpx.AsyncClient, tally: Tally, until: float, seed: int
) -> None:
    n = seed
    while time.monotonic() < until:
        n += 1000
        started = time.perf_counter()
        tally.sent += 1
        try:
            answer = await client.post("/v1/responses", json=_body(n, False))
        except httpx.HTTPError as error:
            tally.errors[type(error).__name__] += 1
            continue
        tally.statuses[answer.status_code] += 1
        tally.latencies.append(time.perf_counter() - started)
        if answer.status_code == 200:
            body = answer.json()
            tally.created.append((body["id"], False))
            tally.duplicate_calls += _count_duplicates(body["output"])


async def _read_back(client: httpx.AsyncClient, created: list[tuple[str, bool]]) -> Counter[str]:
    """Status of every created id: ``lost`` when missing or unfinished."""
    outcome: Counter[str] = Counter()
    gate = asyncio.Semaphore(20)

    async def one(response_id: str, left: bool) -> None:
        async with gate:
            status = None
            for _ in range(300):  # a cancelled record lands a moment after the client left
                answer = await client.get(f"/v1/responses/{response_id}")
                status = answer.json().get("status") if answer.status_code == 200 else None
                if status in ("completed", "incomplete", "cancelled", "failed"):
                    outcome[f"{status}{' (left)' if left else ''}"] += 1
                    return
                await asyncio.sleep(0.1)
            outcome["lost"] += 1
            outcome[f"lost: {status or 'missing'}{' (left)' if left else ''}"] += 1

    await asyncio.gather(*(one(i, left) for i, left in created))
    return outcome


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def scenario(
    base: str, name: str, clients: int, stream: bool, seconds: float
) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    timeout = httpx.Timeout(120.0)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=timeout) as client:
        before = (await client.get("/__bench/stats", params={"reset": True})).json()
        tally = Tally()
        until = time.monotonic() + seconds
        if stream:
            workers = [
                _streaming_client(client, tally, until, leave=i % 2 == 1, seed=i)
                for i in range(clients)
            ]
        else:
            workers = [_buffered_client(client, tally, until, seed=i) for i in range(clients)]
        await asyncio.gather(*workers)
        during = (await client.get("/__bench/stats", params={"reset": True})).json()
        outcome = await _read_back(client, tally.created)
        after = (await client.get("/__bench/stats", params={"reset": True})).json()
    lag = during["lag"]
    return {
        "scenario": name,
        "requests_sent": tally.sent,
        "status_5xx": sum(n for s, n in tally.statuses.items() if s >= 500),
        "statuses": dict(tally.statuses),
        "transport_errors": dict(tally.errors),
        "records": dict(outcome),
        "records_lost": outcome.get("lost", 0),
        "duplicate_tool_calls": tally.duplicate_calls,
        "rss_before_mb": round(before["rss"] / 2**20, 1),
        "rss_after_mb": round(after["rss"] / 2**20, 1),
        "latency_p50_ms": round(_percentile(tally.latencies, 0.5) * 1000, 1),
        "latency_p99_ms": round(_percentile(tally.latencies, 0.99) * 1000, 1),
        "loop_lag_p50_ms": round(_percentile(lag, 0.5) * 1000, 1),
        "loop_lag_p99_ms": round(_percentile(lag, 0.99) * 1000, 1),
        "loop_lag_max_ms": round(max(lag, default=float("nan")) * 1000, 1),
    }


async def big_bodies(base: str) -> dict[str, Any]:
    """A 50 MB body (413, read no further than the cap) and a 4.5 MB body (parsed on a thread)
    sent while 20 small requests run: their latency and the loop lag show whether anyone
    waited for the big ones."""
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        before = (await client.get("/__bench/stats", params={"reset": True})).json()
        huge = b'{"model": "demo", "input": "' + b"x" * 50_000_000 + b'"}'
        started = time.perf_counter()
        refused = await client.post("/v1/responses", content=huge)
        huge_s = time.perf_counter() - started
        item = {"role": "user", "content": "y" * 1100}
        large = {"model": "demo", "input": [item] * 4000, "max_output_tokens": 16}
        small_latencies: list[float] = []

        async def small() -> None:
            t0 = time.perf_counter()
            await client.post("/v1/responses", json={"model": "demo", "input": "hi"})
            small_latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        answers = await asyncio.gather(
            client.post("/v1/responses", json=large), *(small() for _ in range(20))
        )
        large_s = time.perf_counter() - started
        during = (await client.get("/__bench/stats", params={"reset": True})).json()
    return {
        "huge_50mb_status": refused.status_code,
        "huge_50mb_seconds": round(huge_s, 3),
        "large_4_5mb_status": answers[0].status_code,
        "large_4_5mb_seconds": round(large_s, 2),
        "small_p50_ms": round(_percentile(small_latencies, 0.5) * 1000, 1),
        "small_max_ms": round(max(small_latencies) * 1000, 1),
        "loop_lag_max_ms": round(max(during["lag"], default=float("nan")) * 1000, 1),
        "rss_before_mb": round(before["rss"] / 2**20, 1),
        "rss_after_mb": round(during["rss"] / 2**20, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--big-bodies", action="store_true", help="only the big-body probe")
    parser.add_argument("--serve", choices=["upstream", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--upstream-url", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.serve, args.upstream_url)
    upstream = Child("upstream")
    gateway = Child("gateway", "--upstream-url", f"{upstream.url}/v1")
    results = []
    try:
        if args.big_bodies:
            print(json.dumps(asyncio.run(big_bodies(gateway.url))))
            return 0
        for name, clients, stream in (
            ("stream-100 (half leave)", 100, True),
            ("stream-200 (half leave)", 200, True),
            ("buffered-50", 50, False),
        ):
            result = asyncio.run(scenario(gateway.url, name, clients, stream, args.seconds))
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        gateway.close()
        upstream.close()
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()}")
    header = (
        "| scenario | sent | 5xx | lost | dup calls | RSS before→after MB | p50/p99 ms "
        "| loop lag p50/p99/max ms |"
    )
    print(header)
    print("|" + "---|" * 8)
    for r in results:
        print(
            f"| {r['scenario']} | {r['requests_sent']} | {r['status_5xx']} | {r['records_lost']} "
            f"| {r['duplicate_tool_calls']} | {r['rss_before_mb']}→{r['rss_after_mb']} "
            f"| {r['latency_p50_ms']}/{r['latency_p99_ms']} "
            f"| {r['loop_lag_p50_ms']}/{r['loop_lag_p99_ms']}/{r['loop_lag_max_ms']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
