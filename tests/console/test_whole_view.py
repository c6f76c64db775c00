"""Issue #37 in a real Chromium at 1400 and 390 px: the operator's "All tenants" lists every
tenant's requests, traces and conversations (each row naming its tenant) and the Overview's links
open exactly the rows their figures counted; a routed response names the deployment that
answered, and plain providers show as deployments; a refusal shows the message and param its
client got; a deleted response shows "Deleted" and nothing of its content, nor does its trace;
every tenant's budget at a glance, over and near flagged; the log searched by id and text,
traces filtered, and the tenant picker changing scope on a selection, not on each arrow key."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.base import BudgetLimits, UsageCounts, UsageEntry
from responses_gateway.tenancy import TenancyPolicy, parse_keys
from responses_gateway.testing.script import Turn, Usage
from responses_gateway.testing.server import RunningServer, run_in_thread

from .conftest import KEYS, MODEL, OTHER_MODEL, ConsolePage, ConsoleStack

WIDTHS = (1400, 390)


def _run(coroutine: Any) -> Any:
    """Run a coroutine in a thread of its own (Playwright's sync driver owns this one's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _client(stack: ConsoleStack, who: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.gateway.url}/v1", api_key=KEYS[who], max_retries=0)


def _phone_or_desk(console: Any, who: str, width: int, **options: Any) -> ConsolePage:
    tab: ConsolePage = console(who, width=width, height=844 if width < 700 else 900, **options)
    return tab


def _submit(tab: ConsolePage) -> None:
    """Apply a page's filter form (the page then renders again: wait for it)."""
    tab.page.evaluate("() => { delete document.getElementById('page').dataset.ready; }")
    tab.page.click("form.filters button[type=submit]")


def _ids(tab: ConsolePage, selector: str = "tbody tr[data-id]") -> list[str]:
    ids: list[str] = tab.page.locator(selector).evaluate_all("rows => rows.map(r => r.dataset.id)")
    return ids


@pytest.mark.parametrize("width", WIDTHS)
def test_all_tenants_means_every_tenant_and_the_overviews_links_open_what_they_counted(
    stack: ConsoleStack, console: Any, width: int
) -> None:
    # GIVEN a tenant of its own with four requests under one key, one of them refused
    tenant = f"scope-{uuid.uuid4().hex[:8]}"
    key = f"key-{tenant}"
    now_ms = int(time.time() * 1000)

    async def fill() -> None:
        for i in range(4):
            refused = i == 0
            await (stack.store.log_request if refused else stack.store.record_usage)(
                UsageEntry(
                    tenant=tenant,
                    response_id=f"{'req' if refused else 'resp'}_{tenant[6:]}{i:04d}",
                    model=OTHER_MODEL,
                    ended_at=(now_ms - i * 1000) // 1000,
                    status="refused" if refused else "completed",
                    counts=UsageCounts(input_tokens=5, output_tokens=1, responses=int(not refused)),
                    api_key_id=key,
                    extra={"ended_ms": now_ms - i * 1000},
                )
            )

    _run(fill())
    # and traffic, a trace and a conversation of alpha and of beta
    stack.upstream.push(Turn(text="from alpha", usage=Usage(3, 1)), Turn(text="from beta"))
    alpha = _client(stack, "alpha").responses.create(model=MODEL, input="a").id
    beta = _client(stack, "beta").responses.create(model=MODEL, input="b").id
    for who in ("alpha", "beta"):
        with stack.http(who) as http:
            trace = {
                "object": "trace",
                "id": f"trace_{who}_{width}",
                "workflow_name": f"{who} flow",
            }
            assert http.post("/v1/traces/ingest", json={"data": [trace]}).status_code == 204
            assert (
                http.post("/v1/conversations", json={"metadata": {"who": who}}).status_code == 200
            )

    # WHEN the operator, on "All tenants", opens each list
    ops = _phone_or_desk(console, "ops", width)
    assert ops.page.input_value("#tenant-pick") == ""  # "All tenants"
    ops.open("#/requests")
    ops.wait_ready("requests")
    # THEN every tenant's rows are there, each naming its tenant
    rows = ops.page.locator("tbody tr[data-id]")
    tenant_of = dict(
        rows.evaluate_all(
            "rows => rows.map(r => [r.dataset.id, r.querySelector('td.tenant').textContent])"
        )
    )
    assert (tenant_of[alpha], tenant_of[beta]) == ("alpha", "beta")
    assert "(all tenants)" in ops.page.inner_text("#request-count")
    ops.fits(width)
    ops.shot(f"whole-requests-all-tenants-{width}")
    ops.open("#/traces")
    ops.wait_ready("traces")
    traced = ops.page.locator("tbody tr[data-id]").evaluate_all(
        "rows => rows.map(r => [r.dataset.id, r.dataset.tenant])"
    )
    assert [f"trace_alpha_{width}", "alpha"] in traced and [f"trace_beta_{width}", "beta"] in traced
    ops.fits(width)
    ops.open("#/conversations")
    ops.wait_ready("conversations")
    owners = set(
        ops.page.locator("tbody tr[data-id]").evaluate_all(
            "rows => rows.map(r => r.dataset.tenant)"
        )
    )
    assert {"alpha", "beta"} <= owners
    ops.fits(width)
    # and a record of another tenant opens in its own tenant
    ops.open("#/requests")
    ops.wait_ready("requests")
    ops.page.locator(f'tbody tr[data-id="{beta}"] button.disclose').click()  # any width
    ops.page.locator(f'tr.detail-row a[href^="#/response/{beta}"]').click()
    ops.wait_ready("response")
    assert "Tenant" in ops.page.inner_text("#page") and "beta" in ops.page.inner_text("dl.facts")
    assert ops.page.input_value("#tenant-pick") == ""  # still "All tenants"

    # WHEN it follows the Overview's "By key" link of the tenant's key
    ops.open("#/overview?range=1h")
    ops.wait_ready("overview")
    counted = ops.page.locator(f'section[aria-label="By key"] tr[data-key="{key}"] td').nth(1)
    assert counted.inner_text() == "4"
    ops.page.locator(f'section[aria-label="By key"] tr[data-key="{key}"] a').click()
    ops.wait_ready("requests")
    # THEN the Requests page shows exactly the four rows it counted, in the same range
    ids = _ids(ops)
    assert sorted(ids) == sorted(
        f"{p}_{tenant[6:]}{i:04d}" for i, p in enumerate(["req", *["resp"] * 3])
    )
    assert "4 requests shown (all tenants), filtered, ended from" in ops.page.inner_text(
        "#request-count"
    )
    assert "[object" not in ops.page.inner_text("#page")
    ops.fits(width)
    ops.shot(f"whole-overview-link-{width}")
    # and the "By tenant" link opens that tenant's rows alone
    ops.open("#/overview?range=1h")
    ops.wait_ready("overview")
    ops.page.locator(f'section[aria-label="By tenant"] tr[data-key="{tenant}"] a').click()
    ops.wait_ready("requests")
    assert len(_ids(ops)) == 4 and f"tenant {tenant}" in ops.page.inner_text("#request-count")


@pytest.fixture(scope="module")
def routed(console_stack: ConsoleStack) -> Iterator[RunningServer]:
    """A gateway on the session's store whose route's first deployment is down, and a plain
    provider beside it."""
    base = f"{console_stack.upstream_url}/v1"
    config = parse_config(
        {
            "providers": [
                {"name": "broken", "base_url": "http://127.0.0.1:9/v1", "api": "chat"},
                {"name": "good", "base_url": base, "api": "responses", "models": []},
                {"name": "plain", "base_url": base, "api": "chat", "models": [MODEL]},
            ],
            "routes": [
                {
                    "model": "routed-model",
                    "deployments": [
                        {"id": "down-first", "provider": "broken", "model": "x"},
                        {
                            "id": "up-second",
                            "provider": "good",
                            "model": OTHER_MODEL,
                            "weight": 1e-9,
                        },
                    ],
                }
            ],
            "operators": ["ops"],
        },
        env={},
    )
    app = create_app(config, console_stack.store)
    tenant = f"routed-{uuid.uuid4().hex[:6]}"
    app.state.tenancy = TenancyPolicy(keys=parse_keys(f"sk-routed:{tenant},{KEYS['ops']}:ops"))
    server = run_in_thread(app)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_deployment_that_answered_is_named_and_plain_providers_are_deployments(
    stack: ConsoleStack, routed: RunningServer, console: Any, width: int
) -> None:
    client = openai.OpenAI(base_url=f"{routed.url}/v1", api_key="sk-routed", max_retries=0)
    stack.upstream.push(
        Turn(text="answered", usage=Usage(3, 2)), Turn(text="plain", usage=Usage(2, 1))
    )
    answered = client.responses.create(model="routed-model", input="go").id
    plain = client.responses.create(model=MODEL, input="go").id
    ops = _phone_or_desk(console, "ops", width, base=routed.url, key=KEYS["ops"])
    ops.open(f"#/response/{answered}?tenant={client_tenant(ops, answered)}")
    ops.wait_ready("response")
    facts = ops.page.inner_text("dl.facts")
    assert "good / responses" in facts and "broken" not in facts.split("Failed attempts")[0]
    assert "up-second" in facts and "down-first" in facts  # answered, and the attempt that failed
    ops.fits(width)
    ops.shot(f"whole-routed-response-{width}")
    ops.open("#/overview?range=1h")
    ops.wait_ready("overview")
    deployments = ops.page.locator('section[aria-label="By deployment"] tr[data-deployment]')
    names = deployments.evaluate_all("rows => rows.map(r => r.dataset.deployment)")
    assert {"up-second", "down-first", f"plain/{MODEL}"} <= set(names)
    ops.page.locator(f'tr[data-deployment="plain/{MODEL}"] a').click()
    ops.wait_ready("requests")
    assert plain in _ids(ops)
    ops.fits(width)


def client_tenant(tab: ConsolePage, response_id: str) -> str:
    """The tenant of a response as the operator's request log names it."""
    tenant: str = tab.page.evaluate(
        """async (id) => {
          const key = sessionStorage.getItem("rg.apiKey");
          const answer = await fetch(`/v1/console/requests?tenant=*&q=${id}`,
            { headers: { authorization: `Bearer ${key}` } });
          return (await answer.json()).data[0].tenant;
        }""",
        response_id,
    )
    return tenant


@pytest.mark.parametrize("width", WIDTHS)
def test_a_refusal_shows_the_message_and_param_its_client_got(
    stack: ConsoleStack, console: Any, width: int
) -> None:
    with stack.http("alpha") as http:
        refused = http.post("/v1/responses", json={"model": MODEL})
    assert refused.status_code == 400
    rid = refused.headers["x-request-id"]
    tab = _phone_or_desk(console, "alpha", width)
    tab.expected.append("status of 400")
    tab.open(f"#/response/{rid}")
    tab.wait_ready("response")
    alert = tab.page.inner_text("#page .alert")
    assert alert == (
        "HTTP 400 · missing_required_parameter: Missing required parameter: 'input'. (param: input)"
    )
    assert "(no message)" not in tab.page.inner_text("#page")
    tab.open(f"#/requests?q={rid}")
    tab.wait_ready("requests")
    tab.page.locator(f'tbody tr[data-id="{rid}"] button.disclose').click()
    details = tab.page.inner_text("tr.detail-row")
    assert "Missing required parameter: 'input'." in details and "param: input" in details
    tab.fits(width)
    tab.shot(f"whole-refusal-{width}")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_deleted_response_shows_deleted_and_nothing_of_its_content(
    stack: ConsoleStack, console: Any, width: int
) -> None:
    secret = f"pineapple-{uuid.uuid4().hex[:8]}"
    stack.upstream.push(Turn(text=f"I heard {secret}", usage=Usage(4, 2)))
    rid = _client(stack, "beta").responses.create(model=MODEL, input=f"say {secret}").id  # logged
    trace_id = f"trace_deleted_{width}"
    span = {
        "object": "trace.span", "id": "span_deleted", "trace_id": trace_id, "parent_id": None,
        "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:00:01Z",
        "span_data": {"type": "response", "response_id": rid, "input": secret, "output": secret},
        "error": None,
    }  # fmt: skip
    with stack.http("beta") as http:
        trace = {"object": "trace", "id": trace_id, "workflow_name": "deleting"}
        assert http.post("/v1/traces/ingest", json={"data": [trace, span]}).status_code == 204
    tab = _phone_or_desk(console, "beta", width)
    tab.open(f"#/response/{rid}")
    tab.wait_ready("response")
    assert secret in tab.page.inner_text("#page")  # the content tenant's timeline, logged
    with stack.http("beta") as http:
        assert http.delete(f"/v1/responses/{rid}").json()["deleted"] is True
    tab.open(f"#/response/{rid}")
    tab.wait_ready("response")
    text = tab.page.inner_text("#page")
    assert "Deleted:" in tab.page.inner_text("#storage") and secret not in text
    assert "Timeline" not in text  # nothing left to draw
    tab.fits(width)
    tab.shot(f"whole-deleted-response-{width}")
    tab.open(f"#/trace/{trace_id}")
    tab.wait_ready("trace")
    tab.page.locator('li[data-span="span_deleted"] summary').click()
    trace_text = tab.page.inner_text("#page")
    assert secret not in trace_text and "deleted" in trace_text
    tab.fits(width)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_tenants_budget_at_a_glance_flags_over_and_near(
    stack: ConsoleStack, console: Any, width: int
) -> None:
    over, near = f"over-{uuid.uuid4().hex[:6]}", f"near-{uuid.uuid4().hex[:6]}"

    async def spend() -> None:
        for tenant, limit, used in ((over, 3000, 3910), (near, 1000, 850)):
            await stack.store.put_budget(tenant, BudgetLimits(daily_tokens=limit))
            await stack.store.record_usage(
                UsageEntry(
                    tenant=tenant,
                    response_id=f"resp_{tenant}",
                    model=MODEL,
                    ended_at=int(time.time()),
                    status="completed",
                    counts=UsageCounts(input_tokens=used, responses=1, cost_usd=Decimal("0.01")),
                )
            )

    _run(spend())
    ops = _phone_or_desk(console, "ops", width)
    ops.page.click('nav a[data-page="budgets"]')
    ops.wait_ready("budgets")
    states = ops.page.locator("tbody tr[data-tenant]").evaluate_all(
        "rows => rows.map(r => [r.dataset.tenant, r.dataset.state])"
    )
    by_tenant = dict(states)
    assert (by_tenant[over], by_tenant[near]) == ("over", "near")
    order = [s for _, s in states]
    assert order == sorted(order, key=["over", "near", "ok"].index)  # the flagged ones first
    row = ops.page.inner_text(f'tr[data-tenant="{over}"]')
    assert "Daily tokens: 3,910 of 3,000 (130%)" in row and "over" in row
    assert "enforced" in ops.page.inner_text("#budgets-enforced")
    ops.fits(width)
    ops.shot(f"whole-budgets-{width}")
    ops.open("#/usage")  # Usage says why its requests are fewer than the Overview's
    ops.wait_ready("usage")
    assert "refused before they ran" in ops.page.inner_text("#usage-refusals")


@pytest.mark.parametrize("width", WIDTHS)
def test_find_things_and_the_picker_changes_scope_on_selection_only(
    stack: ConsoleStack, console: Any, width: int
) -> None:
    word = f"walrus{uuid.uuid4().hex[:6]}"
    stack.upstream.push(Turn(text=f"a {word} here"), Turn(text="nothing"))
    found = _client(stack, "beta").responses.create(model=MODEL, input="first").id  # logged
    _client(stack, "beta").responses.create(model=MODEL, input="second")
    with stack.http("beta") as http:
        traces = [
            {"object": "trace", "id": f"trace_{word}_ok", "workflow_name": f"Billing {word}"},
            {
                "object": "trace",
                "id": f"trace_{word}_bad",
                "workflow_name": f"Billing {word} retry",
            },
        ]
        failed = {
            "object": "trace.span", "id": "s_bad", "trace_id": f"trace_{word}_bad",
            "parent_id": None, "started_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T00:00:01Z", "span_data": {"type": "function", "name": "charge"},
            "error": {"message": "declined", "data": {}},
        }  # fmt: skip
        assert http.post("/v1/traces/ingest", json={"data": [*traces, failed]}).status_code == 204
    ops = _phone_or_desk(console, "ops", width)
    # the log, searched by text (in logged content) and by id, across tenants
    ops.open("#/requests")
    ops.wait_ready("requests")
    ops.page.fill("input[name=q]", word)
    _submit(ops)
    ops.wait_ready("requests")
    assert _ids(ops) == [found]
    ops.open(f"#/requests?q={found}")
    ops.wait_ready("requests")
    assert _ids(ops) == [found]
    ops.fits(width)
    # traces filtered by workflow and errors, across tenants
    ops.open("#/traces")
    ops.wait_ready("traces")
    ops.page.fill("input[name=workflow]", word)
    ops.page.check("input[name=errors]")
    _submit(ops)
    ops.wait_ready("traces")
    assert _ids(ops) == [f"trace_{word}_bad"]
    ops.page.select_option("select[name=window]", "3600")
    ops.page.uncheck("input[name=errors]")
    _submit(ops)
    ops.wait_ready("traces")
    assert sorted(_ids(ops)) == [f"trace_{word}_bad", f"trace_{word}_ok"]
    ops.fits(width)
    ops.shot(f"whole-traces-filtered-{width}")
    # the picker: arrow keys move through it without reloading; Enter applies
    ops.open("#/requests")
    ops.wait_ready("requests")
    picker = ops.page.locator("#tenant-pick")
    picker.focus()
    ops.page.keyboard.press("ArrowDown")
    ops.page.keyboard.press("ArrowDown")
    moved = picker.input_value()
    assert moved != ""  # the keys moved the picker
    assert ops.page.locator('#page[data-ready="requests"]').count() == 1  # no reload began
    assert ops.page.evaluate("sessionStorage.getItem('rg.tenant')") is None
    assert "(all tenants)" in ops.page.inner_text("#request-count")
    ops.page.keyboard.press("Enter")
    ops.wait_ready("requests")
    assert f"tenant {moved}" in ops.page.inner_text("#request-count")
    # and a mouse selection applies at once
    ops.pick_tenant("")
    ops.wait_ready("requests")
    assert "(all tenants)" in ops.page.inner_text("#request-count")
