"""The console's API end to end, on both stores: the request log filtered over the whole log and
tailed, budgets enforced without a ``budgets`` table when the operator says so, failovers and
failures in the log and the overview, usage as JSON and CSV, keys (created, last used, never
revoking the signed-in one), a response's storage and trace, and the files' web manners (ETags,
year-long caching of hashed URLs, gzip, HEAD, the Content-Security-Policy)."""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import GatewayConfig, parse_config
from responses_gateway.store.base import UsageCounts, UsageEntry
from responses_gateway.tenancy import KEYS_FILE_ENV, TenancyPolicy, key_id_of, parse_keys
from responses_gateway.testing.script import ScriptedUpstream, Turn, Usage
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.usage.budget import BudgetPolicy
from responses_gateway.usage.pricing import parse_prices

from .conftest import MODELS, Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")

MODEL = MODELS["chat"]


class Served:
    """A gateway of its own on the session's store, with keys for a fresh tenant and an
    operator."""

    def __init__(self, stack: Stack, config: GatewayConfig, keys_file: Path | None = None) -> None:
        self.tenant = f"t{uuid.uuid4().hex[:10]}"
        self.key = f"sk-{self.tenant}"
        self.store = stack.open_store()
        app = create_app(config, self.store)
        if keys_file is not None:
            keys_file.write_text(f"{self.key}:{self.tenant}\nsk-ops:ops\n")
            app.state.tenancy_env = {KEYS_FILE_ENV: str(keys_file)}
        else:
            app.state.tenancy = TenancyPolicy(
                keys=parse_keys(f"{self.key}:{self.tenant},sk-ops:ops")
            )
        self.server: RunningServer = run_in_thread(app)

    def http(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url,
            timeout=30,
            headers={"authorization": f"Bearer {key or self.key}"},
        )


@pytest.fixture
def served(stack: Stack) -> Iterator[Served]:
    assert stack.config is not None
    config = dataclasses.replace(
        stack.config,
        operators=frozenset({"ops"}),
        prices=parse_prices({"*": {"input": 1, "cached_input": 0.5, "output": 2}}),
    )
    made = Served(stack, config)
    try:
        yield made
    finally:
        made.server.stop()


def _write(served: Served, entries: list[UsageEntry]) -> None:
    async def fill() -> None:
        for entry in entries:
            if entry.status == "refused":
                await served.store.log_request(entry)
            else:
                await served.store.record_usage(entry)

    asyncio.run(fill())


def _entry(tenant: str, i: int, status: str, at_ms: int) -> UsageEntry:
    return UsageEntry(
        tenant=tenant,
        response_id=f"{'req' if status == 'refused' else 'resp'}_{i:04d}",
        model=MODEL,
        ended_at=at_ms // 1000,
        status=status,
        counts=UsageCounts(input_tokens=2, output_tokens=1, responses=int(status != "refused")),
        extra={"ended_ms": at_ms},
    )


def test_the_status_filter_reads_the_whole_log_in_any_case(served: Served) -> None:
    base = int(time.time() * 1000) - 500_000
    _write(
        served,
        [
            _entry(served.tenant, i, "refused" if i in (3, 10) else "completed", base + i)
            for i in range(150)
        ],
    )
    with served.http() as http:
        page = http.get("/v1/console/requests", params={"status": "REFUSED", "limit": 100}).json()
        assert [r["id"] for r in page["data"]] == ["req_0010", "req_0003"]
        assert page["has_more"] is False and page["examined"] == 150
        both = http.get("/v1/console/requests", params={"status": "refused,Completed"}).json()
        assert len(both["data"]) == 50 and both["has_more"] is True
        bad = http.get("/v1/console/requests", params={"status": "done"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "status"
        window = http.get(
            "/v1/console/requests",
            params={"since": (base + 100) / 1000, "until": (base + 105) / 1000},
        ).json()
        assert [r["id"] for r in window["data"]] == [f"resp_{i:04d}" for i in range(104, 99, -1)]


def test_a_live_tail_gets_only_what_is_newer(served: Served, upstream: ScriptedUpstream) -> None:
    with served.http() as http:
        upstream.push(Turn(text="one"), Turn(text="two"), Turn(text="three"))
        http.post("/v1/responses", json={"model": MODEL, "input": "1"})
        newest = http.get("/v1/console/requests").json()["data"][0]
        assert (
            http.get("/v1/console/requests", params={"after": newest["cursor"]}).json()["data"]
            == []
        )
        ids = [
            http.post("/v1/responses", json={"model": MODEL, "input": str(n)}).json()["id"]
            for n in (2, 3)
        ]
        tail = http.get("/v1/console/requests", params={"after": newest["cursor"]}).json()
        assert [r["id"] for r in tail["data"]] == ids[::-1] and tail["examined"] == 2


def test_budgets_set_in_the_console_are_enforced_without_a_budgets_table(
    stack: Stack, upstream: ScriptedUpstream
) -> None:
    assert stack.config is not None
    raw: dict[str, Any] = {
        "providers": [
            {"name": p.name, "base_url": p.base_url, "api": p.api, "models": list(p.models)}
            | ({"aws_region": p.aws_region} if p.aws_region else {})  # a Bedrock provider's
            for p in stack.config.providers
        ],
        "operators": ["ops"],
    }
    assert parse_config(raw, env={}).budgets is None  # no table: nothing enforced
    enforced = parse_config(raw, env={"GATEWAY_ENFORCE_BUDGETS": "1"})
    assert enforced.budgets == BudgetPolicy()
    for config, refused in ((parse_config(raw, env={}), False), (enforced, True)):
        made = Served(stack, config)
        try:
            with made.http("sk-ops") as ops:
                view = ops.put(
                    "/v1/console/budgets", params={"tenant": made.tenant}, json={"daily_tokens": 0}
                ).json()
            assert view["enforced"] is refused
            assert (view["enforcement"] is None) is refused
            if not refused:
                assert "GATEWAY_ENFORCE_BUDGETS=1" in view["enforcement"]
            upstream.push(Turn(text="over"))
            with made.http() as http:
                answer = http.post("/v1/responses", json={"model": MODEL, "input": "spend"})
            assert answer.status_code == (429 if refused else 200), answer.text
        finally:
            made.server.stop()
    upstream.reset()


def test_a_failover_and_its_failed_deployment_show_in_the_log_and_the_overview(
    stack: Stack, upstream: ScriptedUpstream
) -> None:
    assert stack.config is not None
    chat = next(p for p in stack.config.providers if p.api == "chat")
    config = parse_config(
        {
            "providers": [{"name": "p", "base_url": chat.base_url, "api": "chat", "models": []}],
            "routes": [
                {
                    "model": "routed",
                    "deployments": [
                        {"id": f"bad-{uuid.uuid4().hex[:6]}", "provider": "p", "model": "x"},
                        {"id": "good", "provider": "p", "model": "y", "weight": 1e-9},
                    ],
                }
            ],
            "operators": ["ops"],
        },
        env={},
    )
    bad = config.routes["routed"].deployments[0].id
    made = Served(stack, config)
    try:
        upstream.push(Turn(status=500), Turn(text="answered", usage=Usage(3, 2)))
        with made.http() as http:
            created = http.post("/v1/responses", json={"model": "routed", "input": "go"})
            assert created.status_code == 200, created.text
            record = http.get(f"/v1/console/requests/{created.json()['id']}").json()
            assert record["deployment"] == "good"
            assert record["attempts_failed"] == [
                {"deployment": bad, "model": "routed", "kind": "server_error", "status": 500}
            ]
            assert http.get("/v1/console/requests", params={"deployment": bad}).json()["data"] == [
                dict(record)
            ]  # found by the deployment that failed it
            overview = http.get("/v1/console/overview", params={"range": "1h"}).json()
        assert overview["tenant"] == made.tenant
        assert {d["id"]: (d["answered"], d["failed"]) for d in overview["deployments"]} == {
            "good": (1, 0),
            bad: (0, 1),
        }
        assert overview["totals"]["failovers"] == 1
        with made.http("sk-ops") as ops:
            health = ops.get("/v1/console/overview", params={"range": "1h"}).json()["deployments"]
        assert {d["id"]: d["model"] for d in health if d.get("configured")} == {
            bad: "routed",
            "good": "routed",
        }
    finally:
        made.server.stop()


def test_a_failed_response_keeps_its_message_and_the_status_its_client_got(
    served: Served,
) -> None:
    dead = {"type": "mcp", "server_label": "dead", "server_url": "http://127.0.0.1:9/mcp"}
    with served.http() as http:
        answer = http.post("/v1/responses", json={"model": MODEL, "input": "x", "tools": [dead]})
        assert answer.status_code == 424
        (record,) = http.get("/v1/console/requests", params={"status": "failed"}).json()["data"]
        assert (record["http_status"], record["error_code"]) == (424, "server_error")
        assert record["error_message"] == answer.json()["error"]["message"]
        view = http.get(f"/v1/console/responses/{record['id']}").json()
        assert view["stored"]["response"]["error"]["message"] == record["error_message"]


def test_the_overview_counts_requests_tokens_and_cost_of_the_tenant(
    served: Served, upstream: ScriptedUpstream
) -> None:
    with served.http() as http:
        upstream.push(Turn(text="a", usage=Usage(100, 10)), Turn(text="b", usage=Usage(200, 20)))
        for text in ("a", "b"):
            assert (
                http.post("/v1/responses", json={"model": MODEL, "input": text}).status_code == 200
            )
        assert (
            http.post("/v1/responses", json={"model": "unknown-model", "input": "c"}).status_code
            == 404
        )
        overview = http.get("/v1/console/overview", params={"range": "1h"}).json()
        other = http.get("/v1/console/overview", params={"range": "1h", "tenant": "ops"})
    assert other.status_code == 403  # a tenant's key sees its own tenant only
    totals = overview["totals"]
    assert overview["tenant"] == served.tenant
    assert (totals["requests"], totals["errors"]) == (3, 1)
    assert totals["statuses"] == {"completed": 2, "refused": 1}
    assert (totals["input_tokens"], totals["output_tokens"]) == (300, 30)
    assert Decimal(totals["cost_usd"]) == Decimal("0.00036")  # 300 x $1 + 30 x $2 per million
    assert overview["width"] == 300 and len(overview["buckets"]) == 12
    assert [row["key"] for row in overview["by"]["model"]] == [MODEL, "unknown-model"]


def test_usage_comes_as_json_and_csv_per_day(served: Served, upstream: ScriptedUpstream) -> None:
    with served.http() as http:
        upstream.push(Turn(text="a", usage=Usage(1000, 100)))
        assert http.post("/v1/responses", json={"model": MODEL, "input": "a"}).status_code == 200
        table = http.get("/v1/console/usage", params={"group": "model"}).json()
        text = http.get("/v1/console/usage", params={"group": "model", "format": "csv"})
        bad = http.get("/v1/console/usage", params={"group": "colour"})
    assert table["tenant"] == served.tenant and table["width"] == 86_400
    assert len(table["buckets"]) == 8  # the last 7 days and today, whole UTC days
    assert table["totals"] == [
        {
            "key": MODEL,
            "requests": 1,
            "input_tokens": 1000,
            "cached_tokens": 0,
            "output_tokens": 100,
            "reasoning_tokens": 0,
            "model_calls": 1,
            "cost_usd": "0.0012",
        }
    ]
    assert text.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(text.text)))
    assert rows[0][:3] == ["bucket_start_utc", "model", "requests"]
    assert [row[1:3] + row[-1:] for row in rows[1:]] == [[MODEL, "1", "0.0012"]]
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "group"


def test_keys_say_when_they_were_made_and_used_and_never_revoke_the_signed_in_one(
    stack: Stack, tmp_path: Path, upstream: ScriptedUpstream
) -> None:
    assert stack.config is not None
    config = dataclasses.replace(stack.config, operators=frozenset({"ops"}))
    made = Served(stack, config, keys_file=tmp_path / "keys")
    try:
        upstream.push(Turn(text="used"))
        with made.http() as http:
            assert (
                http.post("/v1/responses", json={"model": MODEL, "input": "x"}).status_code == 200
            )
        with made.http("sk-ops") as ops:
            created = ops.post(
                "/v1/console/keys", json={"tenant": "fresh", "name": "ci-bot"}
            ).json()
            listed = {k["id"]: k for k in ops.get("/v1/console/keys").json()["data"]}
            own = key_id_of("sk-ops")
            refused = ops.delete(f"/v1/console/keys/{own}", params={"tenant": "ops"})
        assert listed[created["id"]]["name"] == "ci-bot"
        assert abs(listed[created["id"]]["created_at"] - time.time()) < 60
        assert listed[own]["current"] is True and listed[created["id"]]["current"] is False
        used = listed[key_id_of(made.key)]["last_used_at"]
        assert used == int(time.time()) // 3600 * 3600  # the hour of its request
        assert listed[created["id"]]["last_used_at"] is None
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "cannot_revoke_own_key"
        assert "sk-ops:ops" in (tmp_path / "keys").read_text()
    finally:
        made.server.stop()


def test_a_response_page_says_where_its_record_went_and_links_its_trace(
    served: Served, upstream: ScriptedUpstream
) -> None:
    with served.http() as http:
        upstream.push(Turn(text="kept"), Turn(text="dropped"), Turn(text="gone"))
        kept = http.post("/v1/responses", json={"model": MODEL, "input": "a"}).json()["id"]
        dropped = http.post(
            "/v1/responses", json={"model": MODEL, "input": "b", "store": False}
        ).json()["id"]
        gone = http.post("/v1/responses", json={"model": MODEL, "input": "c"}).json()["id"]
        assert http.delete(f"/v1/responses/{gone}").status_code == 200
        span = {
            "object": "trace.span",
            "id": "span_1",
            "trace_id": "trace_of_kept",
            "started_at": "2026-01-01T00:00:00+00:00",
            "span_data": {"type": "response", "response_id": kept},
        }
        assert http.post("/v1/traces/ingest", json={"data": [span]}).status_code == 204
        views = {
            rid: http.get(f"/v1/console/responses/{rid}").json() for rid in (kept, dropped, gone)
        }
    assert [views[rid]["storage"] for rid in (kept, dropped, gone)] == [
        "stored",
        "not_stored",
        "deleted",
    ]
    assert views[kept]["trace_id"] == "trace_of_kept" and views[gone]["trace_id"] is None


def test_console_files_have_web_manners(stack: Stack) -> None:
    with httpx.Client(base_url=stack.gateway_server.url, timeout=30) as anonymous:
        page = anonymous.get("/console/", headers={"accept-encoding": "identity"})
        head = anonymous.head("/console/", headers={"accept-encoding": "identity"})
        zipped = anonymous.get("/console/", headers={"accept-encoding": "gzip"})
    assert page.status_code == head.status_code == 200
    assert head.content == b"" and head.headers["content-length"] == page.headers["content-length"]
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
    assert "script-src 'self' 'sha256-" in policy and "unsafe-inline" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-cache"
    assert zipped.headers["content-encoding"] == "gzip" and zipped.text == page.text
    script = page.text.split('src="', 2)[-1].split('"')[0]
    assert script.startswith("console.js?v=")
    with httpx.Client(base_url=stack.gateway_server.url, timeout=30) as anonymous:
        hashed = anonymous.get(f"/console/{script}", headers={"accept-encoding": "gzip"})
        again = anonymous.get(
            f"/console/{script}",
            headers={"accept-encoding": "gzip", "if-none-match": hashed.headers["etag"]},
        )
        plain = anonymous.get("/console/console.js")
    assert hashed.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert hashed.headers["content-encoding"] == "gzip"
    assert hashed.content == plain.content  # httpx undid the gzip
    assert again.status_code == 304 and again.content == b""
    assert plain.headers["cache-control"] == "no-cache"  # unhashed: revalidated
    assert "/console/overview.js?v=" in page.text  # every module by its hashed URL (import map)


def test_console_json_is_compressed(served: Served) -> None:
    with served.http() as http:
        big = http.get(
            "/v1/console/overview", params={"range": "24h"}, headers={"accept-encoding": "gzip"}
        )
    assert big.headers["content-encoding"] == "gzip"  # httpx decoded it
    assert big.json()["object"] == "gateway.overview"


def test_an_operator_picks_tenants_seen_lately_refused_keys_included(served: Served) -> None:
    with served.http() as http:
        assert http.post("/v1/responses", json={"model": "nope", "input": "x"}).status_code == 404
        assert http.get("/v1/console/tenants").json()["data"] == [served.tenant]
    with served.http("sk-not-a-key") as stranger:
        assert (
            stranger.post("/v1/responses", json={"model": MODEL, "input": "x"}).status_code == 401
        )
    with served.http("sk-ops") as ops:
        tenants = ops.get("/v1/console/tenants").json()["data"]
    assert served.tenant in tenants and "ops" in tenants
    assert tenants[-1] == "(unauthenticated)"  # refused for their key, listed last


def test_the_model_list_is_the_configurations(served: Served, stack: Stack) -> None:
    assert stack.config is not None
    with served.http() as http:
        listed = http.get("/v1/console/models").json()
    names = {m["id"] for m in listed["data"]}
    assert names == {model for p in stack.config.providers for model in p.models}
    assert listed["any_name"] is any(p.catch_all for p in stack.config.providers)
