"""The overview's figures against what the client measured, on both stores.

A client drives traffic with known latencies (a fault proxy holds each upstream call 40, 80,
160, 320 or 640 ms), known failures (the upstream answers 500: the client gets 502) and refusals
(an unknown model: 404), streamed so it can time the first token and the answer's end, with
prices so every response costs a known amount. Then the overview must say what the client saw:
the same request and error counts, error rate, rate per minute, tokens and cost exactly; latency
and time-to-first-token percentiles (nearest rank) between what the upstream was made to wait
at that rank and what the client measured, each widened by the histogram's bin (4.5%): the
gateway's clock runs inside the client's, and the client's own overhead is not bounded on a
shared machine (another test process can hold a core), so no wall-time margin is assumed. The
gateway's latency runs to the answer's end, before the response's record and ledger entry are
written (they carry it): the client's final event comes one store write later, which the test
prints apart (``write_ms``). On DynamoDB the page itself is read too: the figures it prints are
the API's.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.store.sqlite import SqliteStore
from responses_gateway.tenancy import TenancyPolicy, parse_keys
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.faults import Fault, FaultProxy
from responses_gateway.testing.script import ScriptedUpstream, Turn, Usage
from responses_gateway.testing.server import RunningServer, run_in_thread

from .conftest import ConsolePage

DELAYS = {40: 68, 80: 22, 160: 3, 320: 4, 640: 3}
"""Upstream delay in ms -> how many streamed requests wait that long. With the 8 fast failures
and refusals the percentiles' ranks (p50, p95, p99 of 108 latencies and of 100 times to first
token) fall inside a group and never on its edge or the maximum, where one slow outlier on the
client's side (this machine is shared) would move them."""
FAILED = 4
REFUSED = 4
PRICE = {"input": Decimal("0.5"), "cached_input": Decimal("0.25"), "output": Decimal("1.5")}


@dataclass
class Measured:
    """What the client saw."""

    latency_ms: list[float] = field(default_factory=list)
    """To the answer's end: the last output item done (or the error answer)."""
    final_ms: list[float] = field(default_factory=list)
    """To the final event (after the gateway wrote the response's record)."""
    ttft_ms: list[float] = field(default_factory=list)
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)


@dataclass
class Rig:
    gateway: RunningServer
    key: str
    upstream: ScriptedUpstream
    proxy: FaultProxy


def _asks(text: str) -> Any:
    """A proxy rule matching the upstream calls whose body holds ``text``."""
    return lambda call: text.encode() in call.body


@pytest.fixture(scope="module")
def own_dynamo() -> Iterator[LocalDynamo]:
    """An embedded DynamoDB of this module's own: the session's holds every other test's items,
    and moto copies the whole table on each transaction (a ledger write then takes as long as
    the table is large, which a client waits for and the gateway's own clock does not count)."""
    local = start_local_dynamodb(table_name="console-figures")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(params=["dynamodb", "sqlite"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    upstream = ScriptedUpstream(demo=False)
    model = run_in_thread(create_fake_upstream_app(upstream))
    proxy = FaultProxy.start(model.url)
    proxy.script(
        *(
            Fault(
                "delay",
                match=lambda c, d=d: f"wait-{d}".encode() in c.body,
                seconds=d / 1000,
                times=None,
            )
            for d in DELAYS
        ),
        Fault("respond", match=_asks("please-fail"), status=500, times=None),
    )
    provider = {"name": "chat", "base_url": f"{proxy.url}/v1", "api": "chat", "models": ["timed"]}
    prices = {"*": {k: str(v) for k, v in PRICE.items()}}
    config = parse_config({"providers": [provider], "prices": prices}, env={})
    if request.param == "dynamodb":
        local: LocalDynamo = request.getfixturevalue("own_dynamo")
        store: Any = DynamoStore(local.client, local.table_name)
    else:
        store = SqliteStore(tmp_path / "figures.db")
    tenant = f"figures-{uuid.uuid4().hex[:8]}"
    key = f"sk-{tenant}"
    app = create_app(config, store)
    app.state.tenancy = TenancyPolicy(keys=parse_keys(f"{key}:{tenant}"))
    gateway = run_in_thread(app)
    try:
        yield Rig(gateway, key, upstream, proxy)
    finally:
        gateway.stop()
        proxy.stop()
        model.stop()
        store.close()


def _cost(usage: dict[str, Any]) -> Decimal:
    cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
    fresh = int(usage["input_tokens"]) - cached
    total = fresh * PRICE["input"] + cached * PRICE["cached_input"]
    return (total + int(usage["output_tokens"]) * PRICE["output"]) / 1_000_000


def _drive(rig: Rig) -> Measured:
    for i in range(sum(DELAYS.values())):
        rig.upstream.push(Turn(text="one two three", usage=Usage(100 + 7 * i, 10 + i % 5)))
    jobs: list[dict[str, Any]] = [
        {"model": "timed", "input": f"wait-{d}", "stream": True}
        for d, n in DELAYS.items()
        for _ in range(n)
    ]
    jobs += [{"model": "timed", "input": "please-fail"} for _ in range(FAILED)]
    jobs += [{"model": "no-such-model", "input": "refused"} for _ in range(REFUSED)]
    measured = Measured()

    def send(body: dict[str, Any]) -> tuple[float, float | None, int, dict[str, Any] | None]:
        headers = {"authorization": f"Bearer {rig.key}"}
        with httpx.Client(base_url=rig.gateway.url, timeout=30, headers=headers) as http:
            started = time.perf_counter()
            first: float | None = None
            done: float | None = None
            final: dict[str, Any] | None = None
            with http.stream("POST", "/v1/responses", json=body) as answer:
                status = answer.status_code
                for line in answer.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    now = (time.perf_counter() - started) * 1000
                    if event["type"] == "response.output_text.delta" and first is None:
                        first = now
                    if event["type"] == "response.output_item.done":
                        done = now
                    if event["type"] == "response.completed":
                        final = event["response"]
            ended = (time.perf_counter() - started) * 1000
            return done or ended, ended, first, status, final

    for latency, ended, first, status, final in map(send, jobs):  # one at a time: no queue
        measured.latency_ms.append(latency)
        measured.final_ms.append(ended)
        if first is not None:
            measured.ttft_ms.append(first)
        if status != 200 or final is None:
            measured.errors += 1
            continue
        measured.input_tokens += final["usage"]["input_tokens"]
        measured.output_tokens += final["usage"]["output_tokens"]
        measured.cost += _cost(final["usage"])
    return measured


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(q * len(ordered)) - 1]


BIN = 0.05
"""The histogram's bin width (4.5%), rounded up."""


def _within(server: float | None, waited: float, client: float) -> bool:
    """At least what the upstream was made to wait, at most what the client saw (each give or
    take a bin)."""
    return server is not None and waited * (1 - BIN) <= server <= client * (1 + BIN)


def test_the_overview_says_what_the_client_measured(
    rig: Rig, console: Any, request: pytest.FixtureRequest
) -> None:
    measured = _drive(rig)
    total = sum(DELAYS.values()) + FAILED + REFUSED
    assert measured.errors == FAILED + REFUSED and len(measured.ttft_ms) == sum(DELAYS.values())
    with httpx.Client(
        base_url=rig.gateway.url, headers={"authorization": f"Bearer {rig.key}"}
    ) as http:
        overview = http.get("/v1/console/overview", params={"range": "1h"}).json()
    totals = overview["totals"]
    waits = [float(d) for d, n in DELAYS.items() for _ in range(n)]  # the streamed requests'
    quick = [0.0] * (FAILED + REFUSED)  # failures and refusals wait for nothing
    report = {
        q: {
            "latency": (
                totals["latency_ms"][q],
                _nearest_rank(waits + quick, p),
                _nearest_rank(measured.latency_ms, p),
            ),
            "ttft": (
                totals["ttft_ms"][q],
                _nearest_rank(waits, p),
                _nearest_rank(measured.ttft_ms, p),
            ),
        }
        for q, p in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
    }
    writes = [end - done for end, done in zip(measured.final_ms, measured.latency_ms, strict=True)]
    print(json.dumps({**report, "write_ms": _nearest_rank(writes, 0.5)}))  # noqa: T201 - the log

    assert totals["requests"] == total
    assert totals["errors"] == measured.errors
    assert totals["error_rate"] == measured.errors / total
    assert totals["statuses"] == {
        "completed": sum(DELAYS.values()),
        "failed": FAILED,
        "refused": REFUSED,
    }
    assert totals["rate_per_min"] == total / 60  # over the hour's range
    assert totals["input_tokens"] == measured.input_tokens
    assert totals["output_tokens"] == measured.output_tokens
    assert Decimal(totals["cost_usd"]) == measured.cost
    for q, pair in report.items():
        for name, (server, waited, client) in pair.items():
            assert _within(server, waited, client), (q, name, server, waited, client)
    bucketed = sum(b["requests"] for b in overview["buckets"])
    assert bucketed == total  # every request in one of the range's buckets

    if request.node.callspec.params["rig"] == "dynamodb":  # the page prints the API's figures
        _check_page(console, rig, overview)


def _check_page(console: Any, rig: Rig, overview: dict[str, Any]) -> None:
    totals = overview["totals"]
    tab: ConsolePage = console("figures", base=rig.gateway.url, key=rig.key, width=1400)
    tab.open("#/overview?range=1h")
    tab.wait_ready("overview")
    figure = {
        name: tab.page.locator(f'.card[aria-label="{name}"] .big').inner_text()
        for name in ("Requests", "Error rate", "Latency", "Time to first token")
    }
    rate = totals["error_rate"]
    assert figure["Error rate"] == (f"{100 * rate:.1f}%" if rate < 0.1 else f"{100 * rate:.0f}%")
    assert tab.page.locator('.card[aria-label="Requests"] .muted').inner_text() == (
        f"{totals['requests']} in all"
    )
    assert figure["Latency"] == f"p50 {round(totals['latency_ms']['p50'])} ms"
    assert figure["Time to first token"] == f"p50 {round(totals['ttft_ms']['p50'])} ms"
    tab.expected.append("status of 404")  # none here; the tab only reads
    tab.shot("overview-measured")
