"""How ``responses-gateway serve`` performs as its store fills: SQLite (the default) against the
embedded moto endpoint (``GATEWAY_STORE=moto``, the default before SQLite).

For each store and each size, the store is filled with N typical stored responses (about 4.6 KB
of JSON each) **through the store API in bulk** (``put_response`` calls in parallel batches, not
HTTP), then a real ``responses-gateway serve`` process is started on it and this script measures,
over HTTP with one keep-alive connection per server (latency, client side, request to last
byte). Every server runs at the same time and the requests rotate over them, so load from other
jobs on the machine falls on every size alike:

- ``GET``: ``GET /v1/responses/{id}`` of a random stored response;
- ``GET missing``: ``GET /v1/responses/{id}`` of an id that does not exist (404);
- ``create``: ``POST /v1/responses`` (``store`` defaults to true) to the bundled demo model;
- ``chain``: a create with ``previous_response_id`` = a random stored response.

Then throughput: C concurrent clients (16 and 64) sending 2 x C creates with ``store: false``
and with ``store: true`` in alternating rounds (``--rounds`` each), in requests per second (the
median of the rounds), and their ratio, for the fullest and the emptiest SQLite store and the
emptiest moto store. A request that fails with a transport
error or a 502 (a keep-alive connection closed by the server, or by the demo upstream inside
``serve``, at that very moment: it happens after idle gaps between rounds) is sent again and
counted (``resent``).

SQLite is filled in its file before ``serve`` opens it. moto lives inside the ``serve`` process
(as ``GATEWAY_STORE=moto`` runs it): the script reads its endpoint from the startup line and fills
it over HTTP. moto answers a Query by walking the whole table, so it is measured at 100 and 3,000
records only (10,000 would take minutes per size).

Usage::

    python benchmarks/local_store.py [--sizes 100,10000,100000] [--moto-sizes 100,3000]
        [--iterations 200] [--json PATH]

The exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from responses_gateway.store import StoredResponse
from responses_gateway.store.base import Store

TENANT = "local"
"""The tenant of a gateway run without API keys."""
NOW = int(time.time())
_WORDS = [
    *("the", "a", "weather", "city", "forecast", "rain", "wind", "sun", "cloud", "temperature"),
    *("degrees", "tomorrow", "today", "morning", "evening", "light", "heavy", "chance", "mild"),
    *("warm", "cold", "north", "south", "river", "bridge", "museum", "train", "ticket", "price"),
    *("hotel", "room", "breakfast", "open", "closed", "street", "map", "walk", "minutes", "hours"),
]
_PROSE = [" ".join(random.Random(seed).choice(_WORDS) for _ in range(300)) for seed in range(64)]


def typical_record(n: int) -> StoredResponse:
    """A stored response of about 4.6 KB of JSON: reasoning, a tool call and an answer."""
    rid = f"resp_bench{n:07d}"
    output = [
        {
            "type": "reasoning",
            "id": f"rs_{rid}",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": _PROSE[n % 64][:900]}],
        },
        {
            "type": "function_call",
            "id": f"fc_{rid}",
            "call_id": f"call_{rid}",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "status": "completed",
        },
        {
            "type": "message",
            "id": f"msg_{rid}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": _PROSE[(n + 7) % 64], "annotations": []}],
        },
    ]
    response = {
        "id": rid,
        "object": "response",
        "created_at": NOW,
        "status": "completed",
        "model": "demo",
        "output": output,
        "previous_response_id": None,
        "usage": {"input_tokens": 420, "output_tokens": 180, "total_tokens": 600},
        "tools": [],
        "metadata": {},
        "store": True,
    }
    content = [{"type": "input_text", "text": _PROSE[(n + 13) % 64][:400]}]
    items = [{"type": "message", "id": f"in_{rid}", "role": "user", "content": content}]
    return StoredResponse(TENANT, rid, response, items)


async def fill(store: Store, count: int, batch: int = 500) -> float:
    """``count`` typical records through ``put_response``, ``batch`` at a time; returns seconds."""
    started = time.perf_counter()
    for first in range(0, count, batch):
        await asyncio.gather(
            *(
                store.put_response(typical_record(n))
                for n in range(first, min(count, first + batch))
            )
        )
    return time.perf_counter() - started


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(env: dict[str, str], args: list[str]) -> Iterator[tuple[str, list[str]]]:
    """A ``responses-gateway serve`` process (demo model); yields its URL and startup lines."""
    port = _free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("UPSTREAM_", "GATEWAY_"))}
    clean.pop("DYNAMODB_TABLE", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "responses_gateway.cli", "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**clean, **env},
    )
    lines: list[str] = []
    assert proc.stdout is not None
    try:
        while True:  # the listening line comes once the store is open
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"serve exited: {''.join(lines)}")
            lines.append(line)
            if "listening on" in line:
                break
        # Keep reading what serve logs, or a full pipe would block it mid-request.
        threading.Thread(target=_drain, args=(proc.stdout, lines), daemon=True).start()
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=2.0) as client:
            for _ in range(500):
                try:
                    if client.get(f"{url}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.02)  # benchmark harness only: waiting for the port to open
        yield url, lines
    except BaseException:
        print("".join(line for line in lines[-40:] if "INFO httpx" not in line), file=sys.stderr)
        raise
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _drain(stream: Any, lines: list[str]) -> None:
    for line in stream:
        lines.append(line)


@dataclass
class Target:
    """One running ``serve`` to measure: its store kind, size and URL."""

    kind: str
    size: int
    url: str
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=f"{self.url}/v1", timeout=60.0)


def _send(target: Target, op: str, rng: random.Random) -> float:
    """One request of ``op``; returns its latency in ms."""
    stored = f"resp_bench{rng.randrange(target.size):07d}"
    started = time.perf_counter()
    if op == "GET":
        answer = target.client.get(f"/responses/{stored}")
    elif op == "GET missing":
        answer = target.client.get(f"/responses/resp_missing{rng.random()}")
    elif op == "create":
        answer = target.client.post("/responses", json={"model": "demo", "input": "Hi"})
    else:
        body = {"model": "demo", "input": "And then?", "previous_response_id": stored}
        answer = target.client.post("/responses", json=body)
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status_code != (404 if op == "GET missing" else 200):
        raise RuntimeError(f"{op} on {target.kind}: {answer.status_code} {answer.text[:200]}")
    return elapsed


OPS = ("GET", "GET missing", "create", "chain")


def latencies(targets: list[Target], iterations: int) -> dict[tuple[str, int], Any]:
    """Every op on every target, interleaved: each round sends each op to every target in a
    rotating order, so load from other jobs on the machine falls on all of them alike."""
    rng = random.Random(7)
    times: dict[tuple[str, int], dict[str, list[float]]] = {
        (t.kind, t.size): {op: [] for op in OPS} for t in targets
    }
    for target in targets:  # warm-up
        for _ in range(10):
            _send(target, "create", rng)
    for n in range(iterations):
        for op in OPS:
            if op in ("create", "chain") and n % 2:
                continue  # creates grow the store: half as many
            shift = n % len(targets)
            for target in targets[shift:] + targets[:shift]:
                times[(target.kind, target.size)][op].append(_send(target, op, rng))
    return {key: {op: _summary(t) for op, t in ops.items()} for key, ops in times.items()}


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered), 2),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
    }


async def _burst(url: str, concurrency: int, total: int, store: bool) -> tuple[float, int]:
    """Requests per second of ``total`` creates sent by ``concurrency`` clients (after one
    warm-up request per client), and how many had to be sent again after a transport error."""
    body = {"model": "demo", "input": "Hi", "store": store}
    remaining = 0
    retried = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=f"{url}/v1", timeout=120.0, limits=limits) as client:

        async def create() -> None:
            nonlocal retried
            for _ in range(3):
                try:
                    answer = await client.post("/responses", json=body)
                except httpx.TransportError:
                    # A pooled connection the server closed at that very moment: send again.
                    answer = None
                # 502: the same race between the gateway and the demo upstream it embeds.
                if answer is not None and answer.status_code == 200:
                    return
                if answer is not None and answer.status_code != 502:
                    raise RuntimeError(f"create failed: {answer.status_code}")
                retried += 1
            raise RuntimeError("create failed three times")

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                await create()

        await asyncio.gather(*(create() for _ in range(concurrency)))  # open the connections
        remaining = total
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - started), retried


def throughput(url: str, concurrency: int, rounds: int) -> dict[str, float]:
    """Alternating rounds of store:false and store:true creates; the median rate of each."""
    total = concurrency * 2
    plain: list[float] = []
    stored: list[float] = []
    retried = 0
    for _ in range(rounds):
        for rates, store in ((plain, False), (stored, True)):
            rate, again = asyncio.run(_burst(url, concurrency, total, store))
            rates.append(rate)
            retried += again
    rate_plain, rate_stored = statistics.median(plain), statistics.median(stored)
    return {
        "store_false_rps": round(rate_plain, 1),
        "store_true_rps": round(rate_stored, 1),
        "ratio": round(rate_stored / rate_plain, 2),
        "resent": retried,
    }


def fill_sqlite(size: int, workdir: Path) -> Path:
    from responses_gateway.store.sqlite import SqliteStore

    db = workdir / f"gateway-{size}.db"
    store = SqliteStore(db)
    try:
        filled = asyncio.run(fill(store, size))
    finally:
        store.close()
    print(f"  sqlite: {size} records written in {filled:.1f} s ({db.stat().st_size >> 20} MB)")
    return db


def fill_moto(size: int, lines: list[str]) -> None:
    from responses_gateway.store.dynamo import DynamoStore
    from responses_gateway.store.local import DEFAULT_LOCAL_TABLE
    from responses_gateway.store.table import make_client

    found = re.search(r"\(moto\) at (http://[0-9.:]+)", "".join(lines))
    if found is None:
        raise RuntimeError(f"no moto endpoint in {lines}")
    client = make_client(endpoint_url=found.group(1), credentials=("local", "local"))
    store = DynamoStore(client, DEFAULT_LOCAL_TABLE)
    try:
        filled = asyncio.run(fill(store, size, batch=50))
    finally:
        store.close()
    print(f"  moto: {size} records written in {filled:.1f} s")


def _table(results: dict[str, dict[int, dict[str, Any]]]) -> str:
    ops = OPS
    lines = [
        "Latency, median (p90) in ms, one client:",
        f"  {'store':<7}{'stored':>9}" + "".join(f"{op:>20}" for op in ops),
    ]
    for kind, sizes in results.items():
        for size, result in sizes.items():
            cells = "".join(
                f"{result[op]['median_ms']:>10.2f} ({result[op]['p90_ms']:>6.2f})" for op in ops
            )
            lines.append(f"  {kind:<7}{size:>9}{cells}")
        if len(sizes) > 1:
            small, large = sizes[min(sizes)], sizes[max(sizes)]
            ratios = "".join(
                f"{large[op]['median_ms'] / small[op]['median_ms']:>19.2f}x" for op in ops
            )
            lines.append(f"  {kind:<7}{f'{max(sizes)}/{min(sizes)}':>9}{ratios}")
    lines += [
        "",
        "Throughput, creates per second (store:false vs store:true, same run):",
        f"  {'store':<7}{'stored':>9}{'clients':>9}{'store:false':>14}{'store:true':>13}"
        f"{'ratio':>8}",
    ]
    for kind, sizes in results.items():
        for size, result in sizes.items():
            for clients, rates in result.get("throughput", {}).items():
                lines.append(
                    f"  {kind:<7}{size:>9}{clients:>9}{rates['store_false_rps']:>14.1f}"
                    f"{rates['store_true_rps']:>13.1f}{rates['ratio']:>7.2f}x"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--moto-sizes", default="100,3000")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6, help="throughput rounds per mode")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    moto_sizes = [int(s) for s in args.moto_sizes.split(",") if s]
    results: dict[str, dict[int, dict[str, Any]]] = {"sqlite": {}, "moto": {}}
    with tempfile.TemporaryDirectory(prefix="local-store-bench-") as work, ExitStack() as stack:
        targets: list[Target] = []
        for size in sizes:
            print(f"sqlite, {size} stored responses", flush=True)
            db = fill_sqlite(size, Path(work))
            url, _ = stack.enter_context(serve({}, ["--db", str(db)]))
            targets.append(Target("sqlite", size, url))
        for size in moto_sizes:
            print(f"moto, {size} stored responses", flush=True)
            url, lines = stack.enter_context(serve({"GATEWAY_STORE": "moto"}, []))
            fill_moto(size, lines)
            targets.append(Target("moto", size, url))
        print(f"latency: {args.iterations} rounds over {len(targets)} servers", flush=True)
        for (kind, size), summary in latencies(targets, args.iterations).items():
            results[kind][size] = dict(summary)
        print(_table({kind: sizes for kind, sizes in results.items() if sizes}), flush=True)
        # Throughput on the fullest SQLite store, the emptiest one, and moto as today's reference.
        picked = {(t.kind, t.size): t for t in targets}
        chosen = [("sqlite", max(sizes, default=0)), ("sqlite", min(sizes, default=0))]
        chosen += [("moto", min(moto_sizes))] if moto_sizes else []
        for key in dict.fromkeys(k for k in chosen if k in picked):
            print(f"throughput: {key[0]} at {key[1]}", flush=True)
            results[key[0]][key[1]]["throughput"] = {
                c: throughput(picked[key].url, c, args.rounds) for c in (16, 64)
            }
        for target in targets:
            target.client.close()
    results = {kind: sizes for kind, sizes in results.items() if sizes}
    print()
    print(_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
