"""Every row of issue #12's table, each beside the bare pass-through measured in the same run.

Processes on loopback: a fixed-content upstream (``short``: 7 deltas, ``long``: 300 deltas,
``tool``: an MCP tool call then text), the bare pass-through (``benchmarks/passthrough.py``:
uvicorn + httpx byte relay of ``POST /v1/responses``), the gateway (``create_app`` with the
``responses`` wire, ``store: false`` creates, an operator stdio MCP server) and this client.
``--tree DIR`` runs the gateway (and the cold starts) from another checkout's ``shared/`` and
``functions/`` (e.g. ``git worktree``/``git archive`` of the base commit), so a before/after
pair is measured by the same client, upstream and pass-through in one run.

Rows (medians; ratios to the pass-through of the same run):

- added latency, non-streaming ``store: false``: (gateway - direct upstream) against
  (pass-through - direct upstream), per iteration paired, the three paths rotated;
- added per streamed event (300 deltas): the same over the whole stream, divided by 300;
- CPU per create and per streamed event: the gateway's and the pass-through's process CPU time
  (``/proc/<pid>/stat``, user + system) over those same paired loops, per request (per event):
  what scheduling on a shared machine does not distort;
- import-to-ready of the streaming and buffered functions' entry modules (in-process
  ``perf_counter`` around the import, fresh interpreter each run, this environment's packages);
- first create after a cold start (uvicorn serving ``streaming_app``: spawn to ``/health``, then
  one stored create against an embedded DynamoDB; and, in other processes, one ``store: false``
  create, which makes no DynamoDB call on its path), then the first create with MCP tools minus
  the second one (what the first MCP request pays for importing and connecting);
- MCP stdio per operation: (create with list + call + 2 model calls - 2 plain creates) / 2, the
  run's MCP cost shared by its two operations (one process per run since the sessions are reused);
  and the same for the server configured again with ``shared = true`` (one process for the
  gateway process, started by a warm-up create);
- artifact size per function (from ``--build-dir`` when ``sam build`` made one);
- throughput (requests per second) at 16 and 64 concurrent clients, non-streaming and
  streaming, gateway against pass-through;
- gateway RSS after start, after the latency rows (warm), after the throughput rows (64
  concurrent streams: a high-water mark) and after ``--rss-requests`` more requests (growth).

Reports, never asserts (exit 1 only when a server fails to start).

Usage::

    python benchmarks/floor.py [--tree DIR] [--iterations 200] [--seconds 4] [--runs 5]
                               [--rss-requests 10000] [--build-dir .aws-sam/build] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from overhead import Call, Child, wait_ready  # noqa: E402

SHORT_TEXT = "Hello! How can I help you today?"
DELTAS = 300
LONG_TEXT = " ".join(f"w{i:03d}" for i in range(DELTAS))
TIME_TOOL: dict[str, Any] = {"type": "mcp", "server_label": "time", "require_approval": "never"}
SHARED_TIME_TOOL: dict[str, Any] = {**TIME_TOOL, "server_label": "time_shared"}
CALC_LABEL = "calc"


# -- child processes --------------------------------------------------------------------------


def _upstream_app() -> Any:
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn, Wire

    short, long = Turn(text=SHORT_TEXT), Turn(text=LONG_TEXT)
    call = Turn(tool_calls=[ToolCall("time__get_current_time", '{"timezone":"UTC"}', "c1")])
    shared_call = Turn(
        tool_calls=[ToolCall("time_shared__get_current_time", '{"timezone":"UTC"}', "c1")]
    )

    class FixedUpstream(ScriptedUpstream):
        def next_turn(self, body: dict[str, Any], wire: Wire) -> Turn | None:
            model = str(body.get("model"))
            if model == "long":
                return long
            if model in ("tool", "tool_shared"):
                text = json.dumps(body)
                answered = '"role": "tool"' in text or "function_call_output" in text
                return short if answered else call if model == "tool" else shared_call
            return short

        def record(self, method: str, path: str, headers: Any, body: Any, **_: Any) -> Any:
            return None

    return create_fake_upstream_app(FixedUpstream(demo=False))


def gateway_config(upstream_url: str) -> dict[str, Any]:
    return {
        "providers": [{"name": "up", "base_url": f"{upstream_url}/v1", "api": "responses"}],
        "mcp_servers": [
            {
                "server_label": "time",
                "command": sys.executable,
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            },
            {
                "server_label": "time_shared",
                "command": sys.executable,
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                "shared": True,
            },
        ],
    }


class _LedgerOnly:
    """The gateway's store here: creates are ``store: false``, so only the usage ledger is
    written; it counts and keeps nothing (the RSS rows then show the gateway, not a store)."""

    async def record_usage(self, entry: Any) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the floor benchmark has no response store (store.{name} used)")


def _serve(role: str, upstream_url: str) -> int:
    if os.environ.get("FLOOR_PLAIN_ASYNCIO"):  # uvicorn falls back to asyncio and h11
        sys.modules["uvloop"] = None  # type: ignore[assignment]
        sys.modules["httptools"] = None  # type: ignore[assignment]
    from responses_gateway.testing.server import run_in_thread

    if role == "upstream":
        app = _upstream_app()
    elif role == "passthrough":
        from passthrough import passthrough_app

        app = passthrough_app(upstream_url)
    else:
        from responses_gateway.app import create_app
        from responses_gateway.config import OperatorMcpServer, parse_config

        raw = gateway_config(upstream_url)
        if "shared" not in OperatorMcpServer.__dataclass_fields__:  # a --tree from before them
            raw["mcp_servers"] = [s for s in raw["mcp_servers"] if not s.get("shared")]
        app = create_app(parse_config(raw, {}), _LedgerOnly())  # type: ignore[arg-type]
    server = run_in_thread(app, log_level="warning")
    print(f"PORT {server.port}", flush=True)
    sys.stdin.buffer.read()
    server.stop()
    return 0


def _server_stack() -> str:
    """The event loop and HTTP parser uvicorn picks for this script's servers (``auto``)."""
    import importlib.util

    if os.environ.get("FLOOR_PLAIN_ASYNCIO"):
        return "asyncio + h11"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return f"{loop} + {http}"


class Server(Child):
    """A child serving one role of this script (the gateway's from ``tree`` when given)."""

    def __init__(self, role: str, upstream_url: str, tree: Path | None) -> None:
        self.role = role
        env = dict(os.environ)
        if tree is not None and role == "gateway":
            env["PYTHONPATH"] = os.pathsep.join([str(tree / "shared"), str(HERE)])
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--serve", role, "--upstream-url", upstream_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.url = f"http://127.0.0.1:{self._read_port()}"

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


# -- latency -----------------------------------------------------------------------------------

PATH = "/v1/responses"
HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}


def _body(model: str, stream: bool, prefix: str = "") -> bytes:
    body: dict[str, Any] = {"model": prefix + model, "input": "Hi", "store": False}
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":")).encode()


def paired(calls: Sequence[Call], iterations: int, warmup: int) -> list[list[int]]:
    """Total ns per call, rotating the order each iteration; GC off while timing."""
    totals: list[list[int]] = [[] for _ in calls]
    for i in range(warmup + iterations):
        order = [(i + k) % len(calls) for k in range(len(calls))]
        gc.disable()
        try:
            for index in order:
                _, total = calls[index].send()
                if i >= warmup:
                    totals[index].append(total)
        finally:
            gc.enable()
    return totals


def latency_rows(
    urls: dict[str, str], iterations: int, cpu: dict[str, Callable[[], float | None]]
) -> dict[str, Any]:
    """Added latency per path (medians of paired differences) and, from ``cpu`` (the
    pass-through's and the gateway's CPU seconds so far), their CPU per request."""
    with (
        httpx.Client(base_url=urls["upstream"], timeout=30) as up,
        httpx.Client(base_url=urls["passthrough"], timeout=30) as pt,
        httpx.Client(base_url=urls["gateway"], timeout=30) as gw,
    ):
        out: dict[str, Any] = {}
        scenarios = ((False, "short", iterations), (True, "long", max(20, iterations // 4)))
        for stream, model, n in scenarios:
            calls = [
                Call("direct", up, "/v1/responses", _body(model, stream), HEADERS),
                Call("passthrough", pt, "/v1/responses", _body(model, stream), HEADERS),
                Call("gateway", gw, "/v1/responses", _body(model, stream), HEADERS),
            ]
            for call in calls:
                call.fetch()
            warmup = max(5, n // 10)
            before = {name: read() for name, read in cpu.items()}
            direct, passthrough, gateway = paired(calls, n, warmup)
            spent = {name: _spent(before[name], read()) for name, read in cpu.items()}
            pt_added = statistics.median(p - d for p, d in zip(passthrough, direct, strict=True))
            gw_added = statistics.median(g - d for g, d in zip(gateway, direct, strict=True))
            key = "stream" if stream else "nonstream"
            scale = DELTAS if stream else 1
            out[key] = {
                "direct_us": statistics.median(direct) / 1000 / scale,
                "passthrough_added_us": pt_added / 1000 / scale,
                "gateway_added_us": gw_added / 1000 / scale,
            }
            for name, seconds in spent.items():
                if seconds is not None:
                    out[key][f"{name}_cpu_us"] = seconds * 1e6 / (warmup + n) / scale
        return out


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


# -- throughput and memory -----------------------------------------------------------------------


async def _rps(url: str, body: bytes, clients: int, seconds: float) -> tuple[float, int, int]:
    """Answered requests per second, requests sent, and how many failed (a non-200 answer, or
    a connection the server side dropped: counted, not fatal, on a loaded machine)."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    done = 0
    failed = 0
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal done, failed
            while time.perf_counter() < deadline:
                request = client.build_request("POST", PATH, content=body, headers=HEADERS)
                try:
                    async with contextlib.aclosing(await client.send(request, stream=True)) as r:
                        async for _ in r.aiter_raw():
                            pass
                except httpx.TransportError:
                    failed += 1
                    continue
                if r.status_code == 200:
                    done += 1
                else:
                    failed += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return done / elapsed, done + failed, failed


def throughput_rows(urls: dict[str, str], seconds: float) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    sent = 0
    for stream in (False, True):
        model = "long" if stream else "short"
        for clients in (16, 64):
            row = {}
            for target in ("passthrough", "gateway"):
                rps, count, failed = asyncio.run(
                    _rps(urls[target], _body(model, stream), clients, seconds)
                )
                row[target] = rps
                row[f"{target}_failed"] = failed
                if target == "gateway":
                    sent += count
            out[f"{'stream' if stream else 'nonstream'}_{clients}"] = row
    return out, sent


async def _send_many(url: str, total: int, clients: int = 16) -> None:
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    left = total
    body = _body("short", False)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                answer = await client.post("/v1/responses", content=body, headers=HEADERS)
                answer.raise_for_status()

        await asyncio.gather(*(worker() for _ in range(clients)))


# -- MCP stdio -----------------------------------------------------------------------------------


def stdio_rows(gateway_url: str, iterations: int) -> dict[str, float]:
    def create(model: str, tools: list[dict[str, Any]]) -> float:
        body = {"model": model, "input": "What time is it?", "store": False, "tools": tools}
        started = time.perf_counter()
        answer = client.post("/v1/responses", json=body)
        elapsed = time.perf_counter() - started
        if answer.status_code != 200:
            raise RuntimeError(f"MCP create answered {answer.status_code}: {answer.text[:300]}")
        return elapsed * 1000

    with httpx.Client(base_url=gateway_url, timeout=120, headers=HEADERS) as client:
        create("tool", [TIME_TOOL])  # warm-up (the gateway imports the MCP client once)
        try:
            create("tool_shared", [SHARED_TIME_TOOL])  # starts the shared server's process
            can_share = True
        except RuntimeError:  # a --tree from before shared servers
            can_share = False
        plain: list[float] = []
        mcp: list[float] = []
        shared: list[float] = []
        for _ in range(iterations):
            plain.append(create("short", []) + create("short", []))
            mcp.append(create("tool", [TIME_TOOL]))
            if can_share:
                shared.append(create("tool_shared", [SHARED_TIME_TOOL]))
    rows = {
        "create_list_call_ms": statistics.median(mcp),
        "per_operation_ms": (statistics.median(mcp) - statistics.median(plain)) / 2,
    }
    if shared:
        rows["per_operation_shared_ms"] = (statistics.median(shared) - statistics.median(plain)) / 2
    return rows


# -- cold start ----------------------------------------------------------------------------------

_IMPORT_PROBE = """
import sys, time
started = time.perf_counter()
import {module}
print("READY", (time.perf_counter() - started) * 1000)
"""


def _cold_env(tree: Path, function: str, upstream_url: str, dynamo: Any) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "VIRTUAL_ENV", "SYSTEMROOT", "TMPDIR")
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(
                [str(tree / "functions" / function), str(tree / "shared")]
            ),
            "DYNAMODB_TABLE": dynamo.table_name,
            "DYNAMODB_ENDPOINT_URL": dynamo.endpoint_url,
            "AWS_REGION": dynamo.region,
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "UPSTREAM_BASE_URL": f"{upstream_url}/v1",
            "UPSTREAM_API": "responses",
            "MCP_ALLOW_HTTP": "1",
            "MCP_ALLOW_LOOPBACK": "1",
            "POWERTOOLS_SERVICE_NAME": "responses-gateway",
            "POWERTOOLS_METRICS_NAMESPACE": "ResponsesGateway",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


class Bytecode:
    """Bytecode for the cold rows, as the deployed layer ships it (``infra/layers/Makefile``:
    compiled ahead, without column ranges, unchecked-hash): a ``PYTHONPYCACHEPREFIX`` the spawned
    interpreters read, so no measured spawn compiles a module from source (this machine sets
    ``PYTHONDONTWRITEBYTECODE``, so without it every spawn compiled the gateway afresh).

    :meth:`warm` runs a command once, unmeasured, with writing on: every module it imports (the
    standard library's and the packages' too, since a prefix replaces every ``__pycache__``)
    lands in the prefix; :meth:`seal` recompiles them as the layer does. Measured runs use
    :meth:`env`, which still forbids writing."""

    def __init__(self, prefix: Path) -> None:
        self.prefix = prefix

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` reading bytecode from the prefix (and writing none)."""
        return {**env, "PYTHONPYCACHEPREFIX": str(self.prefix), "PYTHONDONTWRITEBYTECODE": "1"}

    def warm(self, env: dict[str, str], run: Callable[[dict[str, str]], object]) -> None:
        """``run(env')`` once with bytecode written to the prefix (its figures are dropped)."""
        writing = {k: v for k, v in self.env(env).items() if k != "PYTHONDONTWRITEBYTECODE"}
        run({**writing, "PYTHONNODEBUGRANGES": "1"})

    def seal(self) -> int:
        """Recompile every module in the prefix as the layer does; how many there are."""
        script = (
            "import py_compile, sys\n"
            "mode = py_compile.PycInvalidationMode.UNCHECKED_HASH\n"
            "for line in sys.stdin.read().splitlines():\n"
            "    source, pyc = line.split('\\t')\n"
            "    py_compile.compile(source, cfile=pyc, doraise=True, invalidation_mode=mode)\n"
        )
        pairs = []
        tag = f".{sys.implementation.cache_tag}.pyc"
        for pyc in self.prefix.rglob(f"*{tag}"):
            name = pyc.name[: -len(tag)] + ".py"
            source = Path("/") / pyc.relative_to(self.prefix).parent / name
            if source.is_file():
                pairs.append(f"{source}\t{pyc}")
        env = {**os.environ, "PYTHONNODEBUGRANGES": "1"}
        subprocess.run(
            [sys.executable, "-c", script], input="\n".join(pairs), text=True, env=env, check=True
        )
        return len(pairs)


def import_to_ready(env: dict[str, str], module: str, runs: int) -> float:
    values = []
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-c", _IMPORT_PROBE.format(module=module)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [line for line in result.stdout.splitlines() if line.startswith("READY ")]
        if result.returncode != 0 or not lines:
            raise RuntimeError(f"{module} failed to import: {result.stderr[-2000:]}")
        values.append(float(lines[-1].split()[1]))
    return statistics.median(values)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def first_requests(env: dict[str, str], mcp_url: str, *, stored: bool = True) -> dict[str, float]:
    """Spawn uvicorn on ``streaming_app``; time ``/health``, the first create, MCP creates.

    With ``stored=False`` the creates are ``store: false`` (no DynamoDB call on their path; the
    store is still prefetched in the background from the first request on) and the MCP creates
    are left out."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "streaming_app:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
            "--no-access-log",
            *(
                ["--loop", "asyncio", "--http", "h11"]
                if os.environ.get("FLOOR_PLAIN_ASYNCIO")
                else []
            ),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    mcp_tool = {
        "type": "mcp",
        "server_label": CALC_LABEL,
        "server_url": mcp_url,
        "require_approval": "never",
    }
    try:
        with httpx.Client(base_url=url, timeout=60, headers=HEADERS) as client:
            while True:
                if process.poll() is not None:
                    err = process.stderr.read().decode() if process.stderr else ""
                    raise RuntimeError(f"uvicorn exited: {err[-2000:]}")
                try:
                    if client.get("/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=0.002)
            ready = time.perf_counter()

            def timed(body: dict[str, Any]) -> float:
                t0 = time.perf_counter()
                answer = client.post("/v1/responses", json=body)
                if answer.status_code != 200:
                    raise RuntimeError(f"create answered {answer.status_code}: {answer.text[:300]}")
                return (time.perf_counter() - t0) * 1000

            plain: dict[str, Any] = {"model": "short", "input": "Hi"}
            if not stored:
                plain["store"] = False
            first = timed(plain)
            second = timed(plain)
            if not stored:
                return {"first_create_unstored_ms": first, "second_create_unstored_ms": second}
            mcp_body = {"model": "short", "input": "Hi", "tools": [mcp_tool], "store": False}
            mcp_first = timed(mcp_body)
            mcp_second = timed(mcp_body)
    finally:
        process.terminate()
        process.wait(timeout=15)
    return {
        "spawn_to_ready_ms": (ready - started) * 1000,
        "first_create_ms": first,
        "second_create_ms": second,
        "first_mcp_extra_ms": mcp_first - mcp_second,
    }


def cold_rows(tree: Path, upstream_url: str, runs: int) -> dict[str, Any]:
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.testing.mcp_servers import start_mcp_server

    dynamo = start_local_dynamodb(table_name="floor")
    out: dict[str, Any] = {}
    entries = (("streaming", "streaming_app"), ("buffered", "buffered_handler"))
    try:
        with start_mcp_server("calc") as calc, tempfile.TemporaryDirectory() as prefix:
            bytecode = Bytecode(Path(prefix))
            for function, module in entries:
                env = _cold_env(tree, function, upstream_url, dynamo)
                bytecode.warm(env, functools.partial(import_to_ready, module=module, runs=1))
            env = _cold_env(tree, "streaming", upstream_url, dynamo)
            bytecode.warm(env, lambda e: first_requests(e, calc.url))
            bytecode.warm(env, lambda e: first_requests(e, calc.url, stored=False))
            out["bytecode_modules"] = bytecode.seal()
            for function, module in entries:
                env = bytecode.env(_cold_env(tree, function, upstream_url, dynamo))
                out[f"{function}_import_ms"] = import_to_ready(env, module, runs)
            env = bytecode.env(_cold_env(tree, "streaming", upstream_url, dynamo))
            samples = [first_requests(env, calc.url) for _ in range(runs)]
            unstored = [first_requests(env, calc.url, stored=False) for _ in range(runs)]
        for key in samples[0]:
            out[key] = statistics.median(s[key] for s in samples)
        for key in unstored[0]:
            out[key] = statistics.median(s[key] for s in unstored)
    finally:
        dynamo.stop()
    return out


# -- report --------------------------------------------------------------------------------------


def report(results: dict[str, Any], log: Callable[[str], None]) -> None:
    lat = results.get("latency", {})
    log(f"machine: {os.cpu_count()} CPUs, load {results['load']}, Python {sys.version.split()[0]}")
    log(f"gateway tree: {results['tree']}")
    log(f"servers (uvicorn): {results.get('server_stack', '?')}")
    log("")
    log(f"{'row':58} {'gateway':>12} {'pass-through':>13} {'ratio':>7}")

    def row(label: str, gw: float, pt: float | None, unit: str) -> None:
        ratio = f"{gw / pt:6.2f}x" if pt else "      -"
        pts = f"{pt:10.1f} {unit}" if pt is not None else f"{'-':>13}"
        log(f"{label:58} {gw:9.1f} {unit} {pts} {ratio}")

    if "nonstream" in lat:
        n, s = lat["nonstream"], lat["stream"]
        row(
            "added latency, non-streaming store:false (median)",
            n["gateway_added_us"],
            n["passthrough_added_us"],
            "us",
        )
        row(
            f"added per streamed event ({DELTAS} deltas)",
            s["gateway_added_us"],
            s["passthrough_added_us"],
            "us",
        )
        if "gateway_cpu_us" in n and "passthrough_cpu_us" in n:
            row("CPU per create, non-streaming", n["gateway_cpu_us"], n["passthrough_cpu_us"], "us")
            row("CPU per streamed event", s["gateway_cpu_us"], s["passthrough_cpu_us"], "us")
    cold = results.get("cold", {})
    if cold:
        row("streaming function, import-to-ready", cold["streaming_import_ms"], None, "ms")
        row("buffered function, import-to-ready", cold["buffered_import_ms"], None, "ms")
        row("streaming: spawn to /health (uvicorn)", cold["spawn_to_ready_ms"], None, "ms")
        row(
            "first create after a cold start (stored)",
            cold["first_create_ms"],
            cold["second_create_ms"],
            "ms",
        )
        if "first_create_unstored_ms" in cold:
            row(
                "first create after a cold start (store: false)",
                cold["first_create_unstored_ms"],
                cold["second_create_unstored_ms"],
                "ms",
            )
        row(
            "first request with MCP tools, extra over the second",
            cold["first_mcp_extra_ms"],
            None,
            "ms",
        )
    if "stdio" in results:
        row(
            "MCP stdio server, per operation (list + call, one run)",
            results["stdio"]["per_operation_ms"],
            None,
            "ms",
        )
        if "per_operation_shared_ms" in results["stdio"]:
            row(
                "MCP stdio server marked shared, per operation (warm process)",
                results["stdio"]["per_operation_shared_ms"],
                None,
                "ms",
            )
    for name, figures in results.get("sizes", {}).items():
        if name.endswith("Function"):
            row(f"artifact {name} (unzipped)", figures["unzipped_mb"], None, "MB")
    for key, figures in results.get("throughput", {}).items():
        mode, clients = key.split("_")
        failed = figures.get("gateway_failed", 0), figures.get("passthrough_failed", 0)
        row(
            f"throughput {mode}, {clients} clients (rps)"
            + (f" failed {failed[0]}/{failed[1]}" if any(failed) else ""),
            figures["gateway"],
            figures["passthrough"],
            "/s",
        )
    if "rss" in results:
        rss = results["rss"]
        row("gateway RSS after start", rss["start_mb"], rss["passthrough_start_mb"], "MB")
        if "warm_mb" in rss:
            warm = rss["warm_mb"], rss["passthrough_warm_mb"]
            row("gateway RSS after the latency rows", *warm, "MB")
        if "throughput_mb" in rss:
            row(
                "gateway RSS after the throughput rows",
                rss["throughput_mb"],
                rss["passthrough_throughput_mb"],
                "MB",
            )
        row(
            f"gateway RSS after {rss['requests']} more requests",
            rss["after_mb"],
            rss["passthrough_after_mb"],
            "MB",
        )
    log("(cold rows: the second column is the second create, not the pass-through)")
    if cold.get("bytecode_modules"):
        log(
            "(cold rows on bytecode compiled ahead, as deployed: "
            f"{cold['bytecode_modules']} modules)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--upstream-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--stdio-iterations", type=int, default=3)
    parser.add_argument("--rss-requests", type=int, default=10_000)
    parser.add_argument("--build-dir", type=Path, default=ROOT / ".aws-sam/build")
    parser.add_argument("--skip", default="", help="comma list: latency,cold,stdio,throughput,rss")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--plain-asyncio",
        action="store_true",
        help="serve on asyncio + h11 even where uvloop and httptools are installed",
    )
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.serve, args.upstream_url)
    skip = set(filter(None, args.skip.split(",")))
    tree = args.tree.resolve()
    results: dict[str, Any] = {"tree": str(tree), "load": f"{os.getloadavg()[0]:.2f}"}
    if args.plain_asyncio:
        os.environ["FLOOR_PLAIN_ASYNCIO"] = "1"  # the servers below inherit it
    results["server_stack"] = _server_stack()
    log = print
    upstream = Server("upstream", "", None)
    try:
        pt = Server("passthrough", upstream.url, None)
        gw = Server("gateway", upstream.url, None if tree == ROOT else tree)
        try:
            urls = {"upstream": upstream.url, "passthrough": pt.url, "gateway": gw.url}
            with httpx.Client(timeout=5) as probe:
                wait_ready(probe, f"{gw.url}/health")
                wait_ready(probe, f"{pt.url}/health")
            rss: dict[str, Any] = {"start_mb": gw.rss_mb(), "passthrough_start_mb": pt.rss_mb()}
            if "latency" not in skip:
                cpu = {"passthrough": pt.cpu_seconds, "gateway": gw.cpu_seconds}
                results["latency"] = latency_rows(urls, args.iterations, cpu)
                rss.update(warm_mb=gw.rss_mb(), passthrough_warm_mb=pt.rss_mb())
            if "throughput" not in skip:
                results["throughput"], _ = throughput_rows(urls, args.seconds)
                rss.update(throughput_mb=gw.rss_mb(), passthrough_throughput_mb=pt.rss_mb())
            if "rss" not in skip:  # growth: this many requests after everything above
                asyncio.run(_send_many(gw.url, args.rss_requests))
                asyncio.run(_send_many(pt.url, args.rss_requests))
                rss.update(requests=args.rss_requests, after_mb=gw.rss_mb())
                rss.update(passthrough_after_mb=pt.rss_mb())
                results["rss"] = rss
            if "stdio" not in skip:  # last: it imports the MCP client, which the RSS rows exclude
                results["stdio"] = stdio_rows(gw.url, args.stdio_iterations)
        finally:
            gw.close()
            pt.close()
        if "cold" not in skip:
            results["cold"] = cold_rows(tree, upstream.url, args.runs)
    finally:
        upstream.close()
    if args.build_dir.is_dir():
        from cold_start import artifact_sizes

        results["sizes"] = artifact_sizes(args.build_dir)
    report(results, log)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
