"""What the gateway's own code costs per create and per streamed event: one process, no sockets.

The gateway app (``create_app``, the ``responses`` wire, ``store: false``, floor.py's ledger-only
store) is called as an ASGI app, with the body already received; its upstream is an
``httpx.MockTransport`` replaying the fixed-content upstream's recorded answers (floor.py's
``short``, 7 deltas, and ``long``, 300 deltas), one chunk per SSE event as uvicorn sends them. So
the figures are the gateway's Python work (Starlette's middleware and routing, validation, the
loop, the adapter's parsing, the sink, httpx's client-side request handling) without h11, the
sockets or the upstream, which floor.py measures around it.

- CPU: ``time.process_time`` over ``-n`` creates after a warm-up, per create (``short``) and per
  streamed event (``long`` / 300); each checkout in its own process, the checkouts alternating
  for ``--rounds``, medians. Contention on a shared machine moves it far less than wall time.
- ``--instructions``: instructions per create under valgrind's callgrind (deterministic: the
  same code gives the same count whatever else runs), by difference of two runs of
  ``--instruction-runs`` creates so the start-up cancels out. Slow (a minute or more each).

Usage::

    python benchmarks/hot_path.py [--trees . /tmp/base] [-n 2000] [--rounds 3] [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DELTAS = 300
MODELS = {"short": "create", "long": "stream"}


def _record() -> dict[str, bytes]:
    """The fixed-content upstream's answers to the gateway's upstream request, per model."""
    import httpx

    from floor import _upstream_app

    async def fetch() -> dict[str, bytes]:
        transport = httpx.ASGITransport(app=_upstream_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://up") as client:
            answers = {}
            for model in MODELS:
                item = {"type": "message", "role": "user", "content": "Hi"}
                body = {"model": model, "input": [item], "stream": True, "store": False}
                answers[model] = (await client.post("/v1/responses", json=body)).content
            return answers

    return asyncio.run(fetch())


def _child(model: str, count: int, warmup: int, answer: bytes) -> float:
    """CPU seconds of ``count`` creates of ``model`` through the app in this process."""
    import httpx

    from floor import _LedgerOnly, gateway_config
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config

    frames = [frame + b"\n\n" for frame in answer.split(b"\n\n") if frame]

    class Replay(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for frame in frames:
                yield frame

    def upstream(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream; charset=utf-8"}
        return httpx.Response(200, headers=headers, stream=Replay())

    client = httpx.AsyncClient(transport=httpx.MockTransport(upstream))
    config = parse_config(gateway_config("http://up.test"), {})
    app = create_app(config, _LedgerOnly(), client=client)  # type: ignore[arg-type]
    stream = model == "long"
    create: dict[str, Any] = {"model": model, "input": "Hi", "store": False}
    if stream:
        create["stream"] = True
    body = json.dumps(create, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer sk-bench"),
        (b"content-length", str(len(body)).encode()),
    ]

    async def one() -> None:
        done = asyncio.Event()
        received = False
        status: list[int] = []

        async def receive() -> dict[str, Any]:
            nonlocal received
            if not received:
                received = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/responses",
            "raw_path": b"/v1/responses",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
        }
        await app(scope, receive, send)
        done.set()
        if status != [200]:
            raise RuntimeError(f"the create answered {status}")

    async def run() -> float:
        for _ in range(warmup):
            await one()
        started = time.process_time()
        for _ in range(count):
            await one()
        return time.process_time() - started

    return asyncio.run(run())


def _spawn(tree: Path, args: list[str], answers: Path, valgrind: bool = False) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree / "shared"), str(HERE)]))
    command = [sys.executable, str(Path(__file__)), "--child", "--answers", str(answers), *args]
    if valgrind:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{tree}: {done.stderr[-2000:]}")
    return done.stdout + done.stderr


def _instructions(tree: Path, model: str, runs: int, answers: Path) -> float:
    counts = []
    for count in (runs // 5, runs):
        out = _spawn(tree, ["--model", model, "-n", str(count), "--warmup", "10"], answers, True)
        match = re.search(r"Collected : (\d+)", out)
        if match is None:
            raise RuntimeError(f"no instruction count from valgrind: {out[-500:]}")
        counts.append(int(match.group(1)))
    return (counts[1] - counts[0]) / (runs - runs // 5)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--answers", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--model", default="short", help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--trees", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("-n", type=int, default=2000, help="creates per round (streams: n/10)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--instructions", action="store_true")
    parser.add_argument("--instruction-runs", type=int, default=100)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.child:
        answers = json.loads(args.answers.read_text())
        seconds = _child(args.model, args.n, args.warmup, answers[args.model].encode())
        print(f"CPU {seconds}")
        return 0
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind")
    trees = [tree.resolve() for tree in args.trees]
    answers_file = Path(f"/tmp/hot_path_answers_{os.getpid()}.json")
    answers_file.write_text(json.dumps({k: v.decode() for k, v in _record().items()}))
    results: dict[str, dict[str, Any]] = {str(tree): {} for tree in trees}
    try:
        for model, kind in MODELS.items():
            count = args.n if model == "short" else max(20, args.n // 10)
            per_unit = 1 if model == "short" else DELTAS
            samples: dict[Path, list[float]] = {tree: [] for tree in trees}
            for _ in range(args.rounds):
                for tree in trees:
                    out = _spawn(tree, ["--model", model, "-n", str(count)], answers_file)
                    seconds = float(re.findall(r"CPU (\S+)", out)[-1])
                    samples[tree].append(seconds * 1e6 / count / per_unit)
            for tree in trees:
                results[str(tree)][f"{kind}_cpu_us"] = statistics.median(samples[tree])
                if args.instructions:
                    runs = (
                        args.instruction_runs if model == "short" else args.instruction_runs // 10
                    )
                    per = _instructions(tree, model, max(runs, 10), answers_file) / per_unit
                    results[str(tree)][f"{kind}_instructions"] = per
    finally:
        answers_file.unlink(missing_ok=True)
    base = results[str(trees[-1])]
    print(f"load {os.getloadavg()[0]:.2f}; ratios against the last tree ({trees[-1]})")
    for tree in trees:
        figures = results[str(tree)]
        line = [f"{tree}:"]
        line.append(f"CPU per create {figures['create_cpu_us']:8.1f} us")
        line.append(f"({figures['create_cpu_us'] / base['create_cpu_us']:.2f}x)")
        line.append(f"per streamed event {figures['stream_cpu_us']:6.2f} us")
        line.append(f"({figures['stream_cpu_us'] / base['stream_cpu_us']:.2f}x)")
        if args.instructions:
            line.append(f"instructions per create {figures['create_instructions'] / 1e6:.3f} M")
            line.append(f"({figures['create_instructions'] / base['create_instructions']:.2f}x)")
            line.append(f"per event {figures['stream_instructions'] / 1e3:.1f} k")
            line.append(f"({figures['stream_instructions'] / base['stream_instructions']:.2f}x)")
        print(" ".join(line))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
