"""The console's whole view end to end, on both stores (issue #37): an operator's "All tenants"
lists every tenant's requests, traces and conversations, each row naming its tenant, and the
Overview's figures match the rows its links open; a routed response names the deployment that
answered; refusals keep their message and param; deleting a response or a conversation leaves
nothing of their content readable by any route (nor anywhere in the store); every tenant's
budget at a glance; the log searched by id or text, traces filtered."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import GatewayConfig, parse_config
from responses_gateway.store.base import BudgetLimits, UsageCounts, UsageEntry
from responses_gateway.tenancy import TenancyPolicy, key_id_of, parse_keys
from responses_gateway.testing.script import ScriptedUpstream, Turn, Usage
from responses_gateway.testing.server import RunningServer, run_in_thread

from .conftest import MODELS, Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")

MODEL = MODELS["chat"]


class Rig:
    """A gateway of its own on the session's store: two fresh tenants (the first's content is
    logged) and an operator."""

    def __init__(self, stack: Stack, config: GatewayConfig) -> None:
        tag = uuid.uuid4().hex[:8]
        self.tenants = [f"a{tag}", f"b{tag}"]
        self.keys = {t: f"sk-{t}" for t in self.tenants}
        self.keys["ops"] = "sk-ops"
        config = dataclasses.replace(
            config, operators=frozenset({"ops"}), log_content=frozenset({self.tenants[0]})
        )
        self.store = stack.open_store()
        app = create_app(config, self.store)
        app.state.tenancy = TenancyPolicy(
            keys=parse_keys(",".join(f"{key}:{who}" for who, key in self.keys.items()))
        )
        self.server: RunningServer = run_in_thread(app)

    def http(self, who: str) -> httpx.Client:
        return httpx.Client(
            base_url=self.server.url,
            timeout=30,
            headers={"authorization": f"Bearer {self.keys[who]}"},
        )


@pytest.fixture
def rig(stack: Stack, upstream: ScriptedUpstream) -> Iterator[Rig]:
    assert stack.config is not None
    made = Rig(stack, stack.config)
    try:
        yield made
    finally:
        made.server.stop()
        upstream.reset()


def _create(http: httpx.Client, text: str, **extra: Any) -> dict[str, Any]:
    answer = http.post("/v1/responses", json={"model": MODEL, "input": text, **extra})
    assert answer.status_code == 200, answer.text
    created: dict[str, Any] = answer.json()
    return created


def _all_rows(ops: httpx.Client, path: str, **params: str) -> list[dict[str, Any]]:
    """Every row of an operator's list over every tenant, paged two at a time."""
    rows: list[dict[str, Any]] = []
    before: str | None = None
    for _ in range(100):
        page = ops.get(path, params={"tenant": "*", "limit": "2", **params, "before": before or ""})
        assert page.status_code == 200, page.text
        body = page.json()
        assert body["tenant"] == "*"
        rows += body["data"]
        before = body["next_cursor"]
        if before is None:
            return rows
    raise AssertionError("the pages never ended")


def test_all_tenants_lists_every_tenants_rows_and_matches_the_overviews_links(
    rig: Rig, upstream: ScriptedUpstream
) -> None:
    a, b = rig.tenants
    ids: dict[str, list[str]] = {a: [], b: []}
    # The session's store holds other tests' tenants too: the lists are read from this test's
    # start, and conversations (no time filter) a hundred at a time.
    started = {"since": str(int(time.time()) - 1)}
    for tenant, count in ((a, 3), (b, 2)):
        with rig.http(tenant) as http:
            for i in range(count):
                upstream.push(Turn(text=f"{tenant} {i}", usage=Usage(5, 1)))
                ids[tenant].append(_create(http, f"hi {i}")["id"])
            refused = http.post("/v1/responses", json={"model": MODEL})  # no input
            assert refused.status_code == 400
            ids[tenant].append(refused.headers["x-request-id"])
            conversation = http.post("/v1/conversations", json={}).json()["id"]
            trace = {"object": "trace", "id": f"trace_{tenant}", "workflow_name": f"flow {tenant}"}
            assert http.post("/v1/traces/ingest", json={"data": [trace]}).status_code == 204
            ids[tenant].append(conversation)
    with rig.http("ops") as ops:
        rows = _all_rows(ops, "/v1/console/requests", **started)
        mine = [(r["tenant"], r["id"]) for r in rows if r["tenant"] in (a, b)]
        assert sorted(mine) == sorted(
            (t, rid) for t in (a, b) for rid in ids[t] if not rid.startswith("conv_")
        )
        assert len({r["id"] for r in rows}) == len(rows)  # no row twice across pages
        ends = [r["cursor"] for r in rows]
        assert ends == sorted(ends, reverse=True)  # newest first across tenants

        traces = {(t["tenant"], t["id"]) for t in _all_rows(ops, "/v1/console/traces", **started)}
        assert {(a, f"trace_{a}"), (b, f"trace_{b}")} <= traces
        conversations = {
            (c["tenant"], c["id"]) for c in _all_rows(ops, "/v1/console/conversations", limit="100")
        }
        assert {(a, ids[a][-1]), (b, ids[b][-1])} <= conversations

        overview = ops.get("/v1/console/overview", params={"range": "1h"}).json()
        span = {"since": str(overview["start"]), "until": str(overview["end"])}
        by_key = {row["key"]: row["requests"] for row in overview["by"]["api_key_id"]}
        for tenant, expected in ((a, 4), (b, 3)):  # its responses and its refusal
            key = key_id_of(rig.keys[tenant])
            linked = _all_rows(ops, "/v1/console/requests", api_key_id=key, **span)
            assert len(linked) == by_key[key] == expected
        by_tenant = {row["key"]: row["requests"] for row in overview["by"]["tenant"]}
        for tenant in (a, b):
            page = ops.get(
                "/v1/console/requests", params={"tenant": tenant, "limit": "200", **span}
            ).json()
            assert len(page["data"]) == by_tenant[tenant]
        refusals = _all_rows(ops, "/v1/console/requests", status="refused", **span)
        assert {r["tenant"] for r in refusals} >= {a, b}
    with rig.http(a) as tenant_key:  # a tenant's key never reads across tenants
        assert tenant_key.get("/v1/console/requests", params={"tenant": "*"}).status_code == 403


def test_a_routed_response_names_the_deployment_that_answered(
    stack: Stack, upstream: ScriptedUpstream
) -> None:
    assert stack.config is not None
    good = next(p for p in stack.config.providers if p.api == "responses")
    config = parse_config(
        {
            "providers": [
                {"name": "broken", "base_url": "http://127.0.0.1:9/v1", "api": "chat"},
                {"name": "good", "base_url": good.base_url, "api": "responses", "models": []},
            ],
            "routes": [
                {
                    "model": "routed",
                    "deployments": [
                        {"id": f"down-{uuid.uuid4().hex[:6]}", "provider": "broken", "model": "x"},
                        {
                            "id": "up",
                            "provider": "good",
                            "model": MODELS["responses"],
                            "weight": 1e-9,
                        },
                    ],
                }
            ],
        },
        env={},
    )
    rig = Rig(stack, config)
    try:
        upstream.push(Turn(text="answered", usage=Usage(3, 2)))
        with rig.http(rig.tenants[0]) as http:
            created = _create(http, "go", model="routed")
            record = http.get(f"/v1/console/requests/{created['id']}").json()
        assert (record["deployment"], record["provider"], record["wire"]) == (
            "up",
            "good",
            "responses",
        )
        assert [a["deployment"] for a in record["attempts_failed"]][0].startswith("down-")
    finally:
        rig.server.stop()
        upstream.reset()


def test_a_refusal_keeps_the_message_and_param_its_client_got(rig: Rig) -> None:
    with rig.http(rig.tenants[1]) as http:
        refused = http.post("/v1/responses", json={"model": MODEL})
        error = refused.json()["error"]
        assert (refused.status_code, error["param"]) == (400, "input")
        rid = refused.headers["x-request-id"]
        record = http.get(f"/v1/console/requests/{rid}").json()
        view = http.get(f"/v1/console/responses/{rid}").json()
    assert (record["error_message"], record["error_param"]) == (error["message"], "input")
    assert record["error_code"] == error["code"] == "missing_required_parameter"
    assert view["storage"] == "refused" and view["request"]["error_message"] == error["message"]


def _routes_of(http: httpx.Client, rid: str, trace_id: str, conversation: str | None) -> str:
    """Everything every route answers about a response, as text."""
    paths = [
        f"/v1/responses/{rid}",
        f"/v1/responses/{rid}/input_items",
        f"/v1/console/requests/{rid}",
        f"/v1/console/responses/{rid}",
        f"/v1/console/traces/{trace_id}",
        "/v1/console/requests?limit=200",
        f"/v1/console/requests?q={rid}",
        "/v1/console/traces",
    ]
    if conversation is not None:
        paths += [f"/v1/conversations/{conversation}/items", "/v1/console/conversations"]
    return "\n".join(http.get(path).text for path in paths)


def test_deleting_a_response_leaves_nothing_of_its_content_readable(
    rig: Rig, stack: Stack, upstream: ScriptedUpstream
) -> None:
    secret_in, secret_out = f"in-{uuid.uuid4().hex}", f"out-{uuid.uuid4().hex}"
    logged = rig.tenants[0]  # its content is logged
    with rig.http(logged) as http:
        upstream.push(Turn(text=f"reply {secret_out}", usage=Usage(4, 2)))
        rid = _create(http, f"tell {secret_in}")["id"]
        span = {
            "object": "trace.span",
            "id": "span_del",
            "trace_id": f"trace_del_{rid}",
            "parent_id": None,
            "started_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T00:00:01Z",
            "span_data": {"type": "response", "response_id": rid, "input": secret_in},
            "error": None,
        }
        trace = {"object": "trace", "id": span["trace_id"], "workflow_name": "deleting"}
        assert http.post("/v1/traces/ingest", json={"data": [trace, span]}).status_code == 204
        before = _routes_of(http, rid, str(span["trace_id"]), None)
        assert secret_in in before and secret_out in before  # logged, before the delete
        tokens = http.get(f"/v1/console/requests/{rid}").json()["usage"]["total_tokens"]

        assert http.delete(f"/v1/responses/{rid}").json()["deleted"] is True

        after = _routes_of(http, rid, str(span["trace_id"]), None)
        view = http.get(f"/v1/console/responses/{rid}").json()
        record = http.get(f"/v1/console/requests/{rid}").json()
    assert secret_in not in after and secret_out not in after
    assert view["storage"] == "deleted" and view["stored"] is None
    assert "content" not in record and record["usage"]["total_tokens"] == tokens == 6
    everything = stack.scan_table()
    assert secret_in not in everything and secret_out not in everything


def test_deleting_a_conversation_forgets_the_logged_content_of_its_turns(
    rig: Rig, stack: Stack, upstream: ScriptedUpstream
) -> None:
    secret = f"conv-{uuid.uuid4().hex}"
    with rig.http(rig.tenants[0]) as http:
        conversation = http.post("/v1/conversations", json={}).json()["id"]
        upstream.push(Turn(text=f"noted {secret}", usage=Usage(4, 2)))
        rid = _create(http, f"remember {secret}", conversation=conversation, store=False)["id"]
        assert secret in http.get(f"/v1/console/requests/{rid}").text
        assert http.delete(f"/v1/conversations/{conversation}").json()["deleted"] is True
        after = _routes_of(http, rid, "trace_none", conversation)
    assert secret not in after
    assert secret not in stack.scan_table()


def test_every_tenants_budget_at_a_glance(rig: Rig) -> None:
    over, near = rig.tenants
    now = int(time.time())

    async def spend() -> None:
        for tenant, limit, used in ((over, 3000, 3910), (near, 1000, 850)):
            await rig.store.put_budget(tenant, BudgetLimits(daily_tokens=limit))
            await rig.store.record_usage(
                UsageEntry(
                    tenant=tenant,
                    response_id=f"resp_{tenant}",
                    model=MODEL,
                    ended_at=now,
                    status="completed",
                    counts=UsageCounts(input_tokens=used, responses=1, cost_usd=Decimal("0.1")),
                )
            )

    asyncio.run(spend())
    with rig.http("ops") as ops:
        answer = ops.get("/v1/console/budgets/all").json()
    with rig.http(over) as tenant_key:
        assert tenant_key.get("/v1/console/budgets/all").status_code == 403
    rows = {r["tenant"]: r for r in answer["data"]}
    assert (rows[over]["state"], rows[near]["state"]) == ("over", "near")
    assert rows[over]["limits"] == [
        {"name": "daily_tokens", "limit": 3000, "spent": 3910, "share": 1.3033, "state": "over"}
    ]
    states = [r["state"] for r in answer["data"]]
    assert states == sorted(states, key=["over", "near", "ok"].index)  # worst first


def test_the_log_is_searched_by_id_or_text_and_traces_are_filtered(
    rig: Rig, upstream: ScriptedUpstream
) -> None:
    logged, plain = rig.tenants
    word = f"zebra{uuid.uuid4().hex[:6]}"
    with rig.http(logged) as http:
        upstream.push(Turn(text=f"a {word}"), Turn(text="other"))
        found = _create(http, "first")["id"]
        _create(http, "second")
    with rig.http(plain) as http:
        upstream.push(Turn(text=f"a {word}"))
        hidden = _create(http, "third")["id"]  # its content is not logged: text cannot match
        traces = [
            {"object": "trace", "id": f"trace_ok_{word}", "workflow_name": "Billing run"},
            {"object": "trace", "id": f"trace_bad_{word}", "workflow_name": "Billing retry"},
            {"object": "trace", "id": f"trace_other_{word}", "workflow_name": "Search"},
        ]
        bad_span = {
            "object": "trace.span",
            "id": "span_bad",
            "trace_id": f"trace_bad_{word}",
            "parent_id": None,
            "started_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T00:00:01Z",
            "span_data": {"type": "function", "name": "charge"},
            "error": {"message": "declined", "data": {}},
        }
        assert http.post("/v1/traces/ingest", json={"data": [*traces, bad_span]}).status_code == 204
    with rig.http("ops") as ops:
        by_id = ops.get("/v1/console/requests", params={"tenant": "*", "q": hidden}).json()
        assert [(r["tenant"], r["id"]) for r in by_id["data"]] == [(plain, hidden)]
        by_text = ops.get("/v1/console/requests", params={"tenant": "*", "q": word}).json()
        assert [r["id"] for r in by_text["data"]] == [found]
        billing = ops.get(
            "/v1/console/traces", params={"tenant": plain, "workflow": "billing"}
        ).json()
        assert {t["id"] for t in billing["data"]} == {f"trace_ok_{word}", f"trace_bad_{word}"}
        failing = ops.get(
            "/v1/console/traces", params={"tenant": "*", "workflow": "billing", "errors": "1"}
        ).json()
        assert [(t["tenant"], t["id"]) for t in failing["data"]] == [(plain, f"trace_bad_{word}")]
        future = ops.get(
            "/v1/console/traces", params={"tenant": plain, "since": str(int(time.time()) + 60)}
        ).json()
        assert future["data"] == []
