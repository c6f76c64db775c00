"""What the DynamoDB client costs the gateway: the store's HTTP client against boto3's, one run.

A child process serves an embedded moto DynamoDB and a scripted Responses upstream, so the
measured processes hold the gateway only. Each variant then runs in fresh interpreters (one per
round, the variants rotated so load from other jobs falls on each alike), built the way a
deployed function builds it (``DynamoStore.from_env`` from Lambda's variables, the app, creates
through the app over ASGI in the same process; a first, unrecorded run warms moto up):

- ``http``: this tree, the store's calls over its own HTTP client (``store/_http.py``);
- ``boto3``: this tree with ``DYNAMODB_CLIENT=boto3`` (boto3's client, calls on the store's
  threads: the path before the HTTP client);
- ``before``: another checkout (``--tree DIR``), as it builds its store.

Per variant (medians over the rounds): building the store (its imports included), the first
stored create after that (wall and the process's CPU: what a cold start's first create pays for
the store), then ``--creates`` stored creates and as many ``store: false`` ones in blocks: median
latency and CPU per create (``time.process_time``, every thread of the process), and the stored
create's extra CPU over the unstored one (the store's share). ``botocore`` says whether the
process imported botocore by the end.

moto answers every request with ``Connection: close``, so each of those calls opens a connection,
with either client. DynamoDB keeps connections open: ``--calls`` strongly consistent GetItems of
one item through the store's ``TableClient`` against a loopback endpoint that keeps them open
(fixed answers, CRC included) show each client's own cost per call, both clients in one process,
alternated.

Usage::

    python benchmarks/dynamo_client.py [--tree DIR] [--rounds 5] [--creates 200] [--calls 2000]
        [--json PATH]

The exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TABLE = "bench-client"
TEXT = "Hello! How can I help you today?"


# -- the child serving DynamoDB and the upstream --------------------------------------------------


def serve() -> int:
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn, Wire
    from responses_gateway.testing.server import run_in_thread

    class Fixed(ScriptedUpstream):
        def next_turn(self, body: dict[str, Any], wire: Wire) -> Turn | None:
            return Turn(text=TEXT)

        def record(self, *args: Any, **kwargs: Any) -> Any:
            return None

    dynamo = start_local_dynamodb(table_name=TABLE)
    upstream = run_in_thread(create_fake_upstream_app(Fixed(demo=False)), log_level="warning")
    print(f"DYNAMO {dynamo.endpoint_url}", flush=True)
    print(f"UPSTREAM {upstream.url}", flush=True)
    print(f"KEEPALIVE {_keepalive_endpoint()}", flush=True)
    sys.stdin.buffer.read()
    upstream.stop()
    dynamo.stop()
    return 0


ITEM_KEY = {"PK": {"S": "T#bench#R#resp_1"}, "SK": {"S": "R"}}


def _keepalive_endpoint() -> str:
    """A loopback endpoint answering every request with one item, keeping connections open."""
    import threading
    import zlib

    item = {**ITEM_KEY, "body": {"B": "eJyrVspLzE1VslJKzs8rSc0rUaoFADNCBZ0="}, "n": {"N": "1"}}
    body = json.dumps({"Item": item, "ConsumedCapacity": {"CapacityUnits": 1.0}}).encode()
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n"
        b"x-amz-crc32: %d\r\ncontent-length: %d\r\n\r\n%s" % (zlib.crc32(body), len(body), body)
    )

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


# -- one measured process -----------------------------------------------------------------------


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return (wall - start[0]) * 1000, (cpu - start[1]) * 1000


def worker(creates: int) -> int:
    import httpx

    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config

    config = parse_config(
        {"providers": [{"base_url": os.environ["BENCH_UPSTREAM"] + "/v1", "api": "responses"}]},
        {},
    )
    started = _clock()
    from responses_gateway.store.dynamo import DynamoStore

    store = DynamoStore.from_env()
    build = _since(started)
    app = create_app(config, store)
    out: dict[str, Any] = {"build_ms": build[0], "build_cpu_ms": build[1]}

    async def run() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:

            async def create(stored: bool) -> None:
                body = {"model": "m", "input": "Hi", "store": stored}
                answer = await client.post("/v1/responses", json=body)
                if answer.status_code != 200:
                    raise RuntimeError(f"create answered {answer.status_code}: {answer.text}")

            first = _clock()
            await create(True)
            out["first_ms"], out["first_cpu_ms"] = _since(first)
            for _ in range(20):
                await create(True)
                await create(False)
            for stored in (True, False):
                times = []
                block = _clock()
                for _ in range(creates):
                    one = time.perf_counter()
                    await create(stored)
                    times.append((time.perf_counter() - one) * 1000)
                _, cpu = _since(block)
                name = "stored" if stored else "unstored"
                out[f"{name}_ms"] = statistics.median(times)
                out[f"{name}_cpu_ms"] = cpu / creates

    asyncio.run(run())
    store.close()
    out["botocore"] = "botocore" in sys.modules
    print("RESULT " + json.dumps(out), flush=True)
    return 0


def calls_worker(endpoint: str, calls: int, rounds: int) -> int:
    from responses_gateway.store.dynamo import DynamoStore
    from responses_gateway.store.table import make_client

    boto3_client = make_client(endpoint_url=endpoint, credentials=("bench", "bench"))
    samples: dict[str, list[tuple[float, float]]] = {"http": [], "boto3": []}

    async def measure(store: DynamoStore) -> tuple[float, float]:
        table = store._responses._db  # the store's TableClient: metering and error mapping
        for _ in range(100):
            await table.get_item("bench", ITEM_KEY)
        started = _clock()
        for _ in range(calls):
            await table.get_item("bench", ITEM_KEY)
        wall, cpu = _since(started)
        return wall * 1000 / calls, cpu * 1000 / calls

    for _ in range(rounds):
        for name in samples:
            store = DynamoStore(boto3_client, TABLE, threaded=name == "boto3")
            samples[name].append(asyncio.run(measure(store)))
            store.close()
    out = {
        name: {
            "wall_us": statistics.median(s[0] for s in runs),
            "cpu_us": statistics.median(s[1] for s in runs),
        }
        for name, runs in samples.items()
    }
    print("RESULT " + json.dumps(out), flush=True)
    return 0


# -- the driver ---------------------------------------------------------------------------------


def _child_result(args: list[str], env: dict[str, str], what: str) -> dict[str, Any]:
    """Run this script again with ``args`` and return the JSON of its last ``RESULT`` line."""
    result = subprocess.run(
        [sys.executable, __file__, *args], env=env, capture_output=True, text=True, check=False
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{what} failed: {result.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return found


def _run_variant(tree: Path, env: dict[str, str], creates: int) -> dict[str, Any]:
    child_env = {**env, "PYTHONPATH": str(tree / "shared")}
    return _child_result(["--worker", "--creates", str(creates)], child_env, "worker")


def _run_calls(endpoint: str, env: dict[str, str], calls: int, rounds: int) -> dict[str, Any]:
    args = ["--calls-worker", endpoint, "--calls", str(calls), "--rounds", str(rounds)]
    child_env = {**env, "PYTHONPATH": str(ROOT / "shared")}
    return _child_result(args, child_env, "calls worker")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tree", type=Path, default=None, help="the 'before' checkout")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--creates", type=int, default=200)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls-worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return serve()
    if args.worker:
        return worker(args.creates)
    if args.calls_worker:
        return calls_worker(args.calls_worker, args.calls, args.rounds)

    child = subprocess.Popen(
        [sys.executable, __file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    urls = dict(child.stdout.readline().split() for _ in range(3))
    base = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV", "TMPDIR")
    }
    base.update(
        {
            "DYNAMODB_TABLE": TABLE,
            "DYNAMODB_ENDPOINT_URL": urls["DYNAMO"],
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_SESSION_TOKEN": "bench-token",
            "BENCH_UPSTREAM": urls["UPSTREAM"],
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    variants: dict[str, tuple[Path, dict[str, str]]] = {
        "http": (ROOT, base),
        "boto3": (ROOT, {**base, "DYNAMODB_CLIENT": "boto3"}),
    }
    if args.tree is not None:
        variants["before"] = (args.tree.resolve(), base)
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    try:
        per_call = _run_calls(urls["KEEPALIVE"], base, args.calls, args.rounds)
        _run_variant(ROOT, base, 20)  # warms moto up (its first calls import its parsers)
        for round_number in range(args.rounds):
            names = list(variants)
            names = names[round_number % len(names) :] + names[: round_number % len(names)]
            for name in names:
                tree, env = variants[name]
                samples[name].append(_run_variant(tree, env, args.creates))
    finally:
        child.stdin.close()
        child.wait(timeout=30)

    results = {
        name: {
            key: (
                statistics.median(s[key] for s in runs)
                if key != "botocore"
                else any(s[key] for s in runs)
            )
            for key in runs[0]
        }
        for name, runs in samples.items()
    }
    report(results, per_call, args)
    if args.json:
        args.json.write_text(
            json.dumps({"results": results, "per_call": per_call, "samples": samples}, indent=2)
        )
    return 0


def report(
    results: dict[str, dict[str, Any]], per_call: dict[str, Any], args: argparse.Namespace
) -> None:
    print(
        f"{args.rounds} rounds, {args.creates} creates per block, load {os.getloadavg()[0]:.1f}, "
        f"Python {sys.version.split()[0]}"
    )
    header = (
        f"{'variant':<8} {'build ms':>9} {'first ms':>9} {'first CPU':>10} {'stored ms':>10} "
        f"{'CPU/create':>11} {'unstored ms':>12} {'CPU/create':>11} {'store CPU':>10} botocore"
    )
    print(header)
    print("-" * len(header))
    for name, row in results.items():
        store_cpu = row["stored_cpu_ms"] - row["unstored_cpu_ms"]
        print(
            f"{name:<8} {row['build_ms']:>9.1f} {row['first_ms']:>9.1f} "
            f"{row['first_cpu_ms']:>10.1f} {row['stored_ms']:>10.2f} "
            f"{row['stored_cpu_ms']:>11.2f} {row['unstored_ms']:>12.2f} "
            f"{row['unstored_cpu_ms']:>11.2f} {store_cpu:>10.2f} {row['botocore']}"
        )
    if "boto3" in results:
        http, boto = results["http"], results["boto3"]
        print(
            "http / boto3: first create "
            f"{http['first_ms'] / boto['first_ms']:.2f}x, stored create "
            f"{http['stored_ms'] / boto['stored_ms']:.2f}x latency, "
            f"{http['stored_cpu_ms'] / boto['stored_cpu_ms']:.2f}x CPU"
        )
    print(f"per GetItem over a kept-open connection ({args.calls} calls, {args.rounds} rounds):")
    for name, row in per_call.items():
        print(f"  {name:<6} {row['wall_us']:8.0f} us wall {row['cpu_us']:8.0f} us CPU")
    http_call, boto_call = per_call["http"], per_call["boto3"]
    print(
        f"  http / boto3: {http_call['wall_us'] / boto_call['wall_us']:.2f}x wall, "
        f"{http_call['cpu_us'] / boto_call['cpu_us']:.2f}x CPU"
    )


if __name__ == "__main__":
    sys.exit(main())
