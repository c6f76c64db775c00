"""How much latency the gateway adds on top of its upstream, measured in one run.

Three processes on loopback, so the gateway never shares a GIL with anything it is measured
against:

* a scripted fake upstream (``create_fake_upstream_app`` from ``responses_gateway.testing``) that
  always answers with fixed content: model ``short`` says a short sentence, model ``long`` streams
  exactly :data:`LONG_DELTAS` one-word text deltas;
* the gateway (:func:`responses_gateway.app.create_app`) with two providers pointing at that
  upstream, ``chat/...`` over Chat Completions and ``responses/...`` over the Responses API;
* this process, the client: one keep-alive ``httpx`` connection to each server.

Both servers run in child processes started from this very file (``--serve upstream|gateway``,
an internal flag); each prints its port once it accepts connections and exits when its stdin
closes. Readiness is then confirmed by polling (a bounded loop, no fixed sleeps).

Every gateway request is paired with the equivalent direct upstream request: the exact payload the
gateway sends upstream (computed with the gateway's own request builders), streamed and read to
the end, since that is the work the gateway does for every create. The paths are interleaved (the
order rotates every iteration, so drift and position effects cancel) after a warm-up, and the
added latency is the per-iteration difference gateway - direct.

Scenarios, for each wire format (``chat`` and ``responses`` providers):

1. non-streaming: ``POST /v1/responses {"model", "input": "Hi", "store": false}`` vs the direct
   streamed call (and, for information, the direct non-streamed call);
2. streaming: ``stream: true`` with :data:`LONG_DELTAS` text deltas; time to first byte, time to
   last byte, and the added time per streamed delta.

The gateway's CPU time per create (from ``/proc/<pid>/stat``, Linux only) is reported too: on a
shared, noisy machine it moves less than wall-clock latency. The fake upstream sends its deltas
back to back, so the streaming numbers measure how fast the gateway can relay a burst (its
per-event processing cost); a real model spaces its tokens out and hides most of it.

Creates are sent with ``store: false``: this measures the relay path, not response storage.

Targets (report only, the exit status is 0 whatever the numbers): under 2 ms added at the median
for non-streaming creates, under 30 µs added per streamed event.

Usage::

    python benchmarks/overhead.py [--iterations N] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import selectors
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

import httpx

Wire: TypeAlias = Literal["chat", "responses"]

WIRES: tuple[Wire, ...] = ("chat", "responses")
SHORT_MODEL = "short"
LONG_MODEL = "long"
SHORT_TEXT = "Hello! How can I help you today?"
"""What model ``short`` answers (7 word deltas when streamed upstream)."""
LONG_DELTAS = 200
LONG_TEXT = " ".join(f"word{i:03d}" for i in range(LONG_DELTAS))
"""What model ``long`` answers: exactly :data:`LONG_DELTAS` word deltas."""
UPSTREAM_KEY = "sk-bench-upstream"
NONSTREAM_TARGET_US = 2000.0
"""Target: added latency at the median for a non-streaming create."""
PER_EVENT_TARGET_US = 30.0
"""Target: added latency per streamed event."""
DEFAULT_ITERATIONS = 250
STARTUP_TIMEOUT_S = 30.0


# -- the child processes ----------------------------------------------------------------------


def _upstream_app() -> Any:
    """The fake upstream: fixed content per model, on both wires, for every request."""
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn, Wire as ScriptWire

    turns = {SHORT_MODEL: Turn(text=SHORT_TEXT), LONG_MODEL: Turn(text=LONG_TEXT)}

    class FixedUpstream(ScriptedUpstream):
        """Answers every request from ``turns`` by model name; the script never runs out."""

        def next_turn(self, body: dict[str, Any], wire: ScriptWire) -> Turn | None:
            return turns.get(str(body.get("model")), turns[SHORT_MODEL])

        def record(self, method: str, path: str, headers: Any, body: Any, **_: Any) -> Any:
            return None  # keep no recordings: memory stays flat over thousands of requests

    return create_fake_upstream_app(FixedUpstream(demo=False))


def gateway_config(upstream_url: str) -> dict[str, Any]:
    """The gateway's providers: ``chat/<model>`` and ``responses/<model>`` to the fake."""
    base = f"{upstream_url}/v1"
    return {
        "providers": [
            {
                "name": wire,
                "base_url": base,
                "api": wire,
                "api_key": UPSTREAM_KEY,
                "prefixes": [f"{wire}/"],
                "strip_prefix": True,
            }
            for wire in WIRES
        ]
    }


class _NoStore:
    """The store handed to ``create_app`` when it takes one: creates are sent with
    ``store: false`` and no ``previous_response_id``, so the relay path never touches it."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"the overhead benchmark has no response store (store.{name} used)")


def _gateway_app(upstream_url: str) -> Any:
    """The gateway app for :func:`gateway_config` (with :class:`_NoStore` if it takes a store)."""
    import inspect

    from responses_gateway.app import create_app as _create_app
    from responses_gateway.config import parse_config

    create_app: Callable[..., Any] = _create_app
    config = parse_config(gateway_config(upstream_url))
    if "store" in inspect.signature(create_app).parameters:
        return create_app(config, store=_NoStore())
    return create_app(config)


def _serve(role: str, upstream_url: str | None) -> int:
    """Child process body: serve one app, print ``PORT <n>``, exit when stdin closes."""
    from responses_gateway.testing.server import run_in_thread

    if role == "upstream":
        app = _upstream_app()
    else:
        if not upstream_url:
            raise SystemExit("--serve gateway needs --upstream-url")
        app = _gateway_app(upstream_url)
    server = run_in_thread(app, log_level="warning")
    print(f"PORT {server.port}", flush=True)
    sys.stdin.buffer.read()  # blocks (without holding the GIL) until the parent closes stdin
    server.stop()
    return 0


class Child:
    """A server child process running :func:`_serve`; stopped by closing its stdin."""

    def __init__(self, role: str, *extra: str) -> None:
        self.role = role
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", role, *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.url = f"http://127.0.0.1:{self._read_port()}"

    def _read_port(self) -> int:
        stdout = self._proc.stdout
        assert stdout is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(left):
                    continue
                line = stdout.readline()
                if not line:
                    break  # EOF: the child died
                if line.startswith("PORT "):
                    return int(line.split()[1])
        self.close()
        raise RuntimeError(f"the {self.role} process did not start")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the child used so far; None where ``/proc`` is missing."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()  # fields 3.. of proc(5); utime, stime = 14, 15
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """Close stdin (the child stops gracefully); kill it if it has not exited in 10 s."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


def wait_ready(client: httpx.Client, url: str, timeout: float = STARTUP_TIMEOUT_S) -> None:
    """Poll ``url`` until it answers 200 (a bounded loop of short-timeout requests)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if client.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
    raise RuntimeError(f"{url} did not become ready in {timeout:.0f}s")


# -- requests ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One prepared HTTP request: a client, a URL, a pre-encoded JSON body and headers."""

    name: str
    client: httpx.Client
    url: str
    body: bytes
    headers: dict[str, str]

    def send(self) -> tuple[int, int]:
        """Send it and read the answer to its last byte: ``(ttfb_ns, total_ns)``."""
        start = time.perf_counter_ns()
        first = 0
        with self.client.stream("POST", self.url, content=self.body, headers=self.headers) as r:
            for _chunk in r.iter_raw():
                if not first:
                    first = time.perf_counter_ns()
            end = time.perf_counter_ns()
            if r.status_code != 200:
                raise RuntimeError(f"{self.name}: HTTP {r.status_code}")
        return (first or end) - start, end - start

    def fetch(self) -> bytes:
        """The whole answer body (for checking what was carried, outside the timings)."""
        response = self.client.post(self.url, content=self.body, headers=self.headers)
        if response.status_code != 200:
            raise RuntimeError(f"{self.name}: HTTP {response.status_code}: {response.text[:300]}")
        return response.content


def upstream_payload(wire: Wire, model: str) -> dict[str, Any]:
    """The exact streamed payload the gateway sends upstream for ``{"input": "Hi"}``.

    Built with the gateway's own request builders from the model call the loop makes for a
    one-message input, so the direct path carries the same bytes as the gateway's upstream call.
    """
    from responses_gateway.adapters.base import ModelCall
    from responses_gateway.adapters.chat_completions import to_chat_request
    from responses_gateway.adapters.responses_api import to_responses_request

    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}
    call = ModelCall(model=model, input=[message])
    return to_chat_request(call) if wire == "chat" else to_responses_request(call)


def _json_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class Calls:
    """The requests compared for one wire and one scenario."""

    gateway: Call
    direct: Call
    direct_json: Call | None
    """The direct non-streamed call (non-streaming scenario only)."""


def make_calls(wire: Wire, gateway: httpx.Client, upstream: httpx.Client, *, stream: bool) -> Calls:
    """The gateway create and its direct upstream equivalents for one scenario."""
    model = LONG_MODEL if stream else SHORT_MODEL
    create: dict[str, Any] = {"model": f"{wire}/{model}", "input": "Hi", "store": False}
    if stream:
        create["stream"] = True
    json_headers = {"content-type": "application/json", "authorization": "Bearer sk-client"}
    gw = Call(f"gateway/{wire}", gateway, "/v1/responses", _json_bytes(create), json_headers)
    path = "/v1/chat/completions" if wire == "chat" else "/v1/responses"
    payload = upstream_payload(wire, model)
    up_headers = {"content-type": "application/json", "authorization": f"Bearer {UPSTREAM_KEY}"}
    direct = Call(
        f"direct/{wire}",
        upstream,
        path,
        _json_bytes(payload),
        {**up_headers, "accept": "text/event-stream"},
    )
    direct_json = None
    if not stream:
        plain = {k: v for k, v in payload.items() if k not in ("stream", "stream_options")}
        direct_json = Call(f"direct-json/{wire}", upstream, path, _json_bytes(plain), up_headers)
    return Calls(gw, direct, direct_json)


def _sse_data(raw: bytes) -> Iterator[dict[str, Any]]:
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[6:])


def _gateway_text(raw: bytes, stream: bool) -> tuple[str, int]:
    """``(text, number of text deltas)`` of a gateway answer; checks it completed."""
    if not stream:
        response = json.loads(raw)
        if response.get("status") != "completed":
            raise RuntimeError(f"gateway response not completed: {response.get('status')}")
        return response["output"][0]["content"][0]["text"], 0
    events = list(_sse_data(raw))
    if events[-1].get("type") != "response.completed":
        raise RuntimeError(f"gateway stream ended with {events[-1].get('type')}")
    deltas = [e["delta"] for e in events if e.get("type") == "response.output_text.delta"]
    return "".join(deltas), len(deltas)


def _direct_text(wire: Wire, raw: bytes) -> tuple[str, int]:
    """``(text, number of text deltas)`` of a direct streamed upstream answer."""
    if wire == "responses":
        events = list(_sse_data(raw))
        deltas = [e["delta"] for e in events if e.get("type") == "response.output_text.delta"]
    else:
        chunks = list(_sse_data(raw))
        deltas = [
            c["choices"][0]["delta"]["content"]
            for c in chunks
            if c.get("choices") and c["choices"][0]["delta"].get("content")
        ]
    return "".join(deltas), len(deltas)


def check_calls(wire: Wire, calls: Calls, *, stream: bool) -> int:
    """Check both paths carry the same fixed content; return the number of streamed deltas."""
    expected = LONG_TEXT if stream else SHORT_TEXT
    gw_text, gw_deltas = _gateway_text(calls.gateway.fetch(), stream)
    up_text, up_deltas = _direct_text(wire, calls.direct.fetch())
    if gw_text != expected or up_text != expected:
        raise RuntimeError(f"{wire}: unexpected content: {gw_text[:60]!r} / {up_text[:60]!r}")
    if stream and gw_deltas != up_deltas:
        raise RuntimeError(f"{wire}: gateway sent {gw_deltas} deltas, upstream {up_deltas}")
    return up_deltas


# -- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stats:
    """A distribution summary, in microseconds."""

    n: int
    median: float
    p90: float
    p99: float
    mean: float
    min: float

    @classmethod
    def of(cls, values_us: Sequence[float]) -> Stats:
        cuts = statistics.quantiles(values_us, n=100, method="inclusive")
        return cls(
            n=len(values_us),
            median=statistics.median(values_us),
            p90=cuts[89],
            p99=cuts[98],
            mean=statistics.fmean(values_us),
            min=min(values_us),
        )


CpuProbe: TypeAlias = Callable[[], "float | None"]
"""The gateway process's CPU seconds so far (None when unknown)."""


@dataclass(frozen=True, slots=True)
class Samples:
    """What :func:`measure` observed."""

    timings: list[list[tuple[int, int]]]
    """Per call, per iteration: ``(ttfb_ns, total_ns)``."""
    gateway_cpu_us: float | None
    """Gateway CPU time per iteration (it serves one request per iteration), in microseconds."""


def measure(calls: Sequence[Call], iterations: int, warmup: int, cpu: CpuProbe) -> Samples:
    """Send each call once per iteration, order rotating; time each one.

    The rotation walks every permutation of the calls, so each one is first, middle and last
    equally often. The garbage collector is off while timing (collected between iterations).
    """
    orders = list(itertools.permutations(range(len(calls))))
    for i in range(warmup):
        for index in orders[i % len(orders)]:
            calls[index].send()
    samples: list[list[tuple[int, int]]] = [[] for _ in calls]
    gc.collect()
    gc.disable()
    cpu_before = cpu()
    try:
        for i in range(iterations):
            for index in orders[i % len(orders)]:
                samples[index].append(calls[index].send())
            if i % 50 == 49:
                gc.collect()
    finally:
        gc.enable()
    cpu_after = cpu()
    per_create = None
    if cpu_before is not None and cpu_after is not None:
        per_create = (cpu_after - cpu_before) * 1e6 / iterations
    return Samples(samples, per_create)


def _us(ns: int) -> float:
    return ns / 1000.0


def _added(gw: Sequence[int], direct: Sequence[int]) -> list[float]:
    return [_us(g - d) for g, d in zip(gw, direct, strict=True)]


def run_nonstream(calls: Calls, iterations: int, warmup: int, cpu: CpuProbe) -> dict[str, Any]:
    """Scenario 1 for one wire: totals of each path and the paired added latency."""
    assert calls.direct_json is not None
    samples = measure([calls.gateway, calls.direct, calls.direct_json], iterations, warmup, cpu)
    gw_t, direct_t, plain_t = ([t for _, t in s] for s in samples.timings)
    return {
        "gateway_cpu_per_create_us": samples.gateway_cpu_us,
        "gateway": Stats.of([_us(t) for t in gw_t]),
        "direct_stream": Stats.of([_us(t) for t in direct_t]),
        "direct_json": Stats.of([_us(t) for t in plain_t]),
        "added_vs_stream": Stats.of(_added(gw_t, direct_t)),
        "added_vs_json": Stats.of(_added(gw_t, plain_t)),
    }


def run_stream(
    calls: Calls, deltas: int, iterations: int, warmup: int, cpu: CpuProbe
) -> dict[str, Any]:
    """Scenario 2 for one wire: TTFB and total of each path, added latency, per-delta cost."""
    samples = measure([calls.gateway, calls.direct], iterations, warmup, cpu)
    gw, direct = samples.timings
    added_total = _added([t for _, t in gw], [t for _, t in direct])
    return {
        "deltas": deltas,
        "gateway_cpu_per_create_us": samples.gateway_cpu_us,
        "gateway_ttfb": Stats.of([_us(f) for f, _ in gw]),
        "direct_ttfb": Stats.of([_us(f) for f, _ in direct]),
        "gateway_total": Stats.of([_us(t) for _, t in gw]),
        "direct_total": Stats.of([_us(t) for _, t in direct]),
        "added_ttfb": Stats.of(_added([f for f, _ in gw], [f for f, _ in direct])),
        "added_total": Stats.of(added_total),
        "added_per_delta": Stats.of([a / deltas for a in added_total]),
    }


# -- reporting --------------------------------------------------------------------------------


def _ms(us: float) -> str:
    return f"{us / 1000:.3f} ms"


def _row(label: str, stats: Stats, fmt: Callable[[float], str] = _ms) -> str:
    values = (fmt(stats.median), fmt(stats.p90), fmt(stats.p99), fmt(stats.min))
    return f"  {label:<34}" + "".join(f"{v:>12}" for v in values)


def _header(title: str) -> list[str]:
    cols = ("median", "p90", "p99", "min")
    return [title, f"  {'':<34}" + "".join(f"{c:>12}" for c in cols)]


def _cpu(us: float | None) -> str:
    return "n/a (no /proc)" if us is None else _ms(us)


def _verdict(value: float, target: float) -> str:
    return "PASS" if value < target else "MISS"


def report(results: dict[str, Any]) -> str:
    """The human-readable report for :func:`run_all`'s results."""
    env = results["environment"]
    lines = [
        "responses-gateway overhead benchmark",
        f"  machine: {env['cpus']} CPUs, {env['platform']}, Python {env['python']}, "
        f"load average at start {env['load_average']}",
        f"  servers: uvicorn {env['uvicorn']} ({env['loop']}, {env['http']}), "
        "client / gateway / fake upstream in 3 processes, loopback",
        f"  iterations: {results['iterations']} non-streaming, "
        f"{results['stream_iterations']} streaming, per wire (after warm-up)",
        "",
    ]
    verdicts: list[str] = []
    for wire in WIRES:
        ns = results["nonstream"][wire]
        lines += _header(f"Non-streaming create, {wire} upstream (input 'Hi', total latency)")
        lines.append(_row("direct upstream, streamed", ns["direct_stream"]))
        lines.append(_row("direct upstream, not streamed", ns["direct_json"]))
        lines.append(_row("gateway", ns["gateway"]))
        lines.append(_row("added (gateway - direct streamed)", ns["added_vs_stream"]))
        lines.append(_row("added (gateway - direct json)", ns["added_vs_json"]))
        ratio = ns["gateway"].median / ns["direct_stream"].median
        ratio_json = ns["gateway"].median / ns["direct_json"].median
        lines.append(
            f"  ratio gateway/direct (medians): {ratio:.2f}x streamed, {ratio_json:.2f}x json"
        )
        lines.append(f"  gateway CPU per create (mean): {_cpu(ns['gateway_cpu_per_create_us'])}")
        added = ns["added_vs_stream"].median
        verdict = _verdict(added, NONSTREAM_TARGET_US)
        verdicts.append(
            f"  {verdict}  non-streaming, {wire}: added median {_ms(added)} "
            f"(target < {_ms(NONSTREAM_TARGET_US)})"
        )
        lines.append("")
    for wire in WIRES:
        st = results["stream"][wire]
        lines += _header(f"Streaming create, {wire} upstream ({st['deltas']} text deltas)")
        lines.append(_row("direct upstream TTFB", st["direct_ttfb"]))
        lines.append(_row("gateway TTFB", st["gateway_ttfb"]))
        lines.append(_row("added TTFB", st["added_ttfb"]))
        lines.append(_row("direct upstream total", st["direct_total"]))
        lines.append(_row("gateway total", st["gateway_total"]))
        lines.append(_row("added total", st["added_total"]))
        lines.append(_row("added per delta", st["added_per_delta"], lambda v: f"{v:.1f} us"))
        ratio = st["gateway_total"].median / st["direct_total"].median
        lines.append(f"  ratio gateway/direct total (medians): {ratio:.2f}x")
        cpu = st["gateway_cpu_per_create_us"]
        per_delta_cpu = "" if cpu is None else f", {cpu / st['deltas']:.1f} us per delta"
        lines.append(f"  gateway CPU per create (mean): {_cpu(cpu)}{per_delta_cpu}")
        per = st["added_per_delta"].median
        verdicts.append(
            f"  {_verdict(per, PER_EVENT_TARGET_US)}  streaming, {wire}: added {per:.1f} us "
            f"per streamed event (target < {PER_EVENT_TARGET_US:.0f} us)"
        )
        lines.append("")
    lines += ["Targets (medians; the benchmark reports, it does not fail):", *verdicts]
    return "\n".join(lines)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Stats):
        return {
            "n": value.n,
            "median_us": round(value.median, 2),
            "p90_us": round(value.p90, 2),
            "p99_us": round(value.p99, 2),
            "mean_us": round(value.mean, 2),
            "min_us": round(value.min, 2),
        }
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 2)
    return value


def environment() -> dict[str, Any]:
    """What the numbers were measured on."""
    import importlib.util

    import uvicorn

    import responses_gateway

    return {
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()]
        if hasattr(os, "getloadavg")
        else None,
        "package": str(Path(responses_gateway.__file__).parent),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "uvicorn": uvicorn.__version__,
        "loop": "uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        "http": "httptools" if importlib.util.find_spec("httptools") else "h11",
    }


def run_all(iterations: int, stream_iterations: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Start the servers, run every scenario on both wires, stop the servers."""
    env = environment()
    started = time.monotonic()
    upstream = Child("upstream")
    gateway: Child | None = None
    try:
        gateway = Child("gateway", "--upstream-url", upstream.url)
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        with (
            httpx.Client(base_url=upstream.url, limits=limits, trust_env=False) as up_client,
            httpx.Client(base_url=gateway.url, limits=limits, trust_env=False) as gw_client,
        ):
            wait_ready(up_client, "/v1/models")
            wait_ready(gw_client, "/health")
            log(
                f"servers ready in {time.monotonic() - started:.1f}s "
                f"(gateway pid {gateway.pid}, upstream pid {upstream.pid})"
            )
            nonstream: dict[str, Any] = {}
            stream: dict[str, Any] = {}
            for wire in WIRES:
                calls = make_calls(wire, gw_client, up_client, stream=False)
                check_calls(wire, calls, stream=False)
                log(f"non-streaming, {wire}: {iterations} iterations")
                nonstream[wire] = run_nonstream(
                    calls, iterations, max(20, iterations // 10), gateway.cpu_seconds
                )
            for wire in WIRES:
                calls = make_calls(wire, gw_client, up_client, stream=True)
                deltas = check_calls(wire, calls, stream=True)
                log(f"streaming, {wire}: {stream_iterations} iterations")
                stream[wire] = run_stream(
                    calls,
                    deltas,
                    stream_iterations,
                    max(5, stream_iterations // 10),
                    gateway.cpu_seconds,
                )
    finally:
        if gateway is not None:
            gateway.close()
        upstream.close()
    return {
        "environment": env,
        "iterations": iterations,
        "stream_iterations": stream_iterations,
        "elapsed_s": round(time.monotonic() - started, 1),
        "targets": {
            "nonstream_added_median_us": NONSTREAM_TARGET_US,
            "stream_added_per_event_us": PER_EVENT_TARGET_US,
        },
        "nonstream": nonstream,
        "stream": stream,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--iterations",
        type=int,
        default=DEFAULT_ITERATIONS,
        help=f"non-streaming iterations per wire (default {DEFAULT_ITERATIONS}); the streaming "
        "scenario runs a fifth as many (at least 20)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers here")
    parser.add_argument("--serve", choices=("upstream", "gateway"), help=argparse.SUPPRESS)
    parser.add_argument("--upstream-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.serve, args.upstream_url)
    if args.iterations < 10:
        parser.error("--iterations must be at least 10")

    def log(message: str) -> None:
        print(f"[overhead] {message}", file=sys.stderr, flush=True)

    try:
        results = run_all(args.iterations, max(20, args.iterations // 5), log)
    except RuntimeError as exc:  # a server did not start or answered wrongly: nothing measured
        log(f"setup failed: {exc}")
        return 1
    print(report(results))
    if args.json is not None:
        args.json.write_text(json.dumps(_jsonable(results), indent=2) + "\n", encoding="utf-8")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
