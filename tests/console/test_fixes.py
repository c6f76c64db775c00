"""What issue #30 found broken or wrong in the console, each pinned in a real Chromium: a status
filter that only looked at the newest page, traces past the first 100, a Playground error that
lost the form, budgets saved but not enforced, failed spans drawn as successes, Chat Completions
reasoning shown as encrypted, deleted responses called not stored, and failed responses without
their error and HTTP status. Each test failed on the console before the fix."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest
from playwright.sync_api import Browser

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.base import UsageCounts, UsageEntry
from responses_gateway.store.sqlite import SqliteStore
from responses_gateway.tenancy import KEYS_FILE_ENV
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn, Usage
from responses_gateway.testing.server import RunningServer, run_in_thread

from .conftest import KEYS, MODEL, ConsolePage, ConsoleStack, ensure_chromium


def _client(stack: ConsoleStack, who: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.gateway.url}/v1", api_key=KEYS[who], max_retries=0)


def _run(coroutine: Any) -> Any:
    """Run a coroutine in a thread of its own (Playwright's sync driver owns this one's loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_a_status_filter_finds_refusals_anywhere_in_the_log(
    stack: ConsoleStack, console: Any
) -> None:
    # GIVEN a tenant with 325 records, two refused ones among the oldest (issue #30's case)
    tenant = f"logbook-{int(time.time() * 1000)}"
    base = int(time.time() * 1000) - 600_000

    async def fill() -> None:
        for i in range(325):
            refused = i in (3, 10)
            await (stack.store.log_request if refused else stack.store.record_usage)(
                UsageEntry(
                    tenant=tenant,
                    response_id=f"{'req' if refused else 'resp'}_{i:04d}",
                    model=MODEL,
                    ended_at=(base + i) // 1000,
                    status="refused" if refused else "completed",
                    counts=UsageCounts(input_tokens=3, output_tokens=1, responses=int(not refused)),
                    extra={"ended_ms": base + i, "http_status": 400} if refused else {},
                )
            )

    _run(fill())
    # WHEN an operator filters its log by status, in any case
    ops = console("ops")
    ops.open(f"#/requests?tenant={tenant}&status=Refused")
    ops.wait_ready("requests")
    # THEN both refusals show at once, from the whole log
    ids = ops.page.locator("tbody tr[data-id]").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert ids == ["req_0010", "req_0003"]
    assert "2 requests shown" in ops.page.inner_text("#request-count")
    assert ops.page.input_value("select[name=status]") == "refused"  # a list, not free text
    assert ops.page.locator("select[name=status] option").all_inner_texts() == [
        "Any status",
        "completed",
        "incomplete",
        "failed",
        "cancelled",
        "refused",
    ]
    ops.shot("requests-filtered-refused")


def test_every_trace_is_reachable_by_paging(stack: ConsoleStack, console: Any) -> None:
    # GIVEN 105 traces of one tenant (the list used to ask for 100 and stop)
    with stack.http("beta") as http:
        for batch in range(3):
            traces = [
                {"object": "trace", "id": f"trace_page_{batch * 35 + i:03d}", "workflow_name": "w"}
                for i in range(35)
            ]
            assert http.post("/v1/traces/ingest", json={"data": traces}).status_code == 204
    tab = console("beta")
    tab.open("#/traces")
    tab.wait_ready("traces")
    rows = tab.page.locator("tbody tr[data-id]")
    # WHEN the user pages back THEN the oldest trace is reached
    older = tab.page.get_by_role("button", name="Older")
    for _ in range(5):
        if older.is_hidden():
            break
        shown = rows.count()
        older.click()
        rows.nth(shown).wait_for()  # the next page arrived
    assert tab.page.locator('tbody tr[data-id="trace_page_000"]').count() == 1
    assert rows.count() >= 105 and older.is_hidden()


def test_a_playground_error_keeps_the_form_and_the_nav_still_works(
    stack: ConsoleStack, console: Any
) -> None:
    tab = console("alpha")
    tab.open("#/playground")
    tab.wait_ready("playground")
    tab.page.fill("input[name=model]", MODEL)
    tab.page.fill("textarea[name=input]", "keep me")
    tab.page.fill("textarea[name=tools]", "[{not json")
    tab.page.click("form.playground button[type=submit]")
    tab.wait_ready("play-error")
    # THEN the error shows under the form, and the form is as the user left it
    assert "Tools:" in tab.page.inner_text("#play-error")
    assert tab.page.input_value("textarea[name=input]") == "keep me"
    assert tab.page.input_value("textarea[name=tools]") == "[{not json"
    assert stack.upstream.model_requests() == []  # nothing was sent

    tab.page.fill("textarea[name=tools]", "")
    tab.page.fill("input[name=model]", "no-such-model")
    tab.expected.append("status of 404")  # Chromium logs the refused create's answer
    tab.page.click("form.playground button[type=submit]")
    tab.wait_ready("play-error")
    assert "HTTP 404" in tab.page.inner_text("#play-error")
    assert tab.page.input_value("input[name=model]") == "no-such-model"
    tab.shot("playground-error")

    # WHEN the user clicks the Playground link of the page they are on THEN it reloads, the form
    # kept in the tab's session
    tab.page.evaluate("() => { delete document.getElementById('page').dataset.ready; }")
    tab.page.click('nav a[data-page="playground"]')
    tab.wait_ready("playground")
    assert tab.page.input_value("textarea[name=input]") == "keep me"
    assert tab.page.inner_text("#play-error") == ""


@pytest.fixture(scope="module")
def unbudgeted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """A gateway whose configuration has no ``budgets`` table (SQLite, the scripted upstream)."""
    upstream = ScriptedUpstream(demo=False)
    model = run_in_thread(create_fake_upstream_app(upstream))
    config = parse_config(
        {
            "providers": [{"name": "chat", "base_url": f"{model.url}/v1", "api": "chat"}],
            "operators": ["ops"],
        },
        env={},
    )
    app = create_app(config, SqliteStore(tmp_path_factory.mktemp("unbudgeted") / "db"))
    keys = tmp_path_factory.mktemp("unbudgeted-keys") / "keys"
    keys.write_text(f"{KEYS['ops']}:ops\n")
    app.state.tenancy_env = {KEYS_FILE_ENV: str(keys)}
    gateway = run_in_thread(app)
    try:
        yield gateway
    finally:
        gateway.stop()
        model.stop()


def test_a_budget_saved_where_none_is_enforced_says_so_and_how(
    browser: Browser, unbudgeted: RunningServer
) -> None:
    ensure_chromium()
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        tab = ConsolePage(page, unbudgeted.url)
        page.on("pageerror", lambda exc: tab.errors.append(str(exc)))
        page.goto(f"{unbudgeted.url}/console/#/keys")
        page.fill("#api-key", KEYS["ops"])
        page.click("#signin-form button[type=submit]")
        tab.wait_ready("keys")
        page.fill("#budget-tenant", "team-x")
        page.fill("#limit-daily_tokens", "10")
        page.click("#budget-form button[type=submit]")
        page.wait_for_selector("#budget-status:has-text('not enforced')")
        note = page.inner_text("#budget-enforcement")
        assert "Not enforced" in note and "GATEWAY_ENFORCE_BUDGETS=1" in note
        assert "--enforce-budgets" in note
        tab.shot("keys-budget-not-enforced")
        assert tab.errors == []
    finally:
        context.close()


def test_failed_spans_and_triggered_guardrails_are_marked(
    stack: ConsoleStack, console: Any
) -> None:
    def span(sid: str, parent: str | None, data: dict[str, Any], error: Any = None) -> dict:
        return {
            "object": "trace.span",
            "id": sid,
            "trace_id": "trace_marked",
            "parent_id": parent,
            "started_at": "2026-01-01T00:00:00+00:00",
            "ended_at": "2026-01-01T00:00:01+00:00",
            "span_data": data,
            "error": error,
        }

    batch = [
        {"object": "trace", "id": "trace_marked", "workflow_name": "guarded"},
        span("sp_agent", None, {"type": "agent", "name": "A"}),
        span(
            "sp_tool", "sp_agent", {"type": "function", "name": "boom"}, {"message": "Tool failed"}
        ),
        span("sp_guard", "sp_agent", {"type": "guardrail", "name": "g", "triggered": True}),
        span("sp_ok", "sp_agent", {"type": "guardrail", "name": "ok", "triggered": False}),
    ]
    with stack.http("alpha") as http:
        assert http.post("/v1/traces/ingest", json={"data": batch}).status_code == 204
    tab = console("alpha")
    tab.open("#/traces")
    tab.wait_ready("traces")
    row = tab.page.locator('tbody tr[data-id="trace_marked"]').inner_text()
    assert row.split("\t")[-2:] == ["2", "0"]  # two errors, no tokens
    tab.open("#/trace/trace_marked")
    tab.wait_ready("trace")
    marked = tab.page.locator("ol.waterfall > li.span-bad").evaluate_all(
        "rows => rows.map(r => r.dataset.span)"
    )
    assert sorted(marked) == ["sp_guard", "sp_tool"]
    assert "Tool failed" in tab.page.inner_text('li[data-span="sp_tool"]')
    assert "guardrail triggered" in tab.page.inner_text('li[data-span="sp_guard"]')
    assert tab.page.locator('li[data-span="sp_ok"] .bar-bad').count() == 0
    tab.shot("trace-errors")


def test_chat_completions_reasoning_shows_its_text(stack: ConsoleStack, console: Any) -> None:
    stack.upstream.push(
        Turn(reasoning="The user greets me, so I greet back.", text="Hi!", usage=Usage(4, 6))
    )
    created = _client(stack, "alpha").responses.create(model=MODEL, input="Hello")
    assert [item.type for item in created.output] == ["reasoning", "message"]
    tab = console("alpha")
    tab.open(f"#/response/{created.id}")
    tab.wait_ready("response")
    step = tab.page.locator('ol.timeline > li[data-type="reasoning"]').inner_text()
    assert "The user greets me, so I greet back." in step and "encrypted" not in step


def test_a_deleted_response_is_called_deleted(stack: ConsoleStack, console: Any) -> None:
    stack.upstream.push(Turn(text="gone soon", usage=Usage(3, 2)))
    client = _client(stack, "alpha")
    created = client.responses.create(model=MODEL, input="delete me")
    client.responses.delete(created.id)
    tab = console("alpha")
    tab.open(f"#/response/{created.id}")
    tab.wait_ready("response")
    text = tab.page.inner_text("#page")
    assert "Deleted: it was stored" in text and "store: false" not in text


def test_a_failed_response_shows_its_error_and_the_clients_http_status(
    stack: ConsoleStack, console: Any
) -> None:
    dead = {"type": "mcp", "server_label": "dead", "server_url": "http://127.0.0.1:9/mcp"}
    with stack.http("alpha") as http:
        answer = http.post(
            "/v1/responses", json={"model": MODEL, "input": "use it", "tools": [dead]}
        )
    assert answer.status_code == 424
    with stack.http("alpha") as http:
        (record,) = [
            r
            for r in http.get("/v1/console/requests", params={"status": "failed"}).json()["data"]
            if r["error_message"] == answer.json()["error"]["message"]
        ]
    assert record["http_status"] == 424 and record["error_code"] == "server_error"
    tab = console("alpha")
    tab.open(f"#/response/{record['id']}")
    tab.wait_ready("response")
    alert = tab.page.inner_text("div.alert")
    assert "HTTP 424" in alert and answer.json()["error"]["message"] in alert
    tab.shot("response-failed")


def test_the_playground_answers_a_function_call_by_hand(stack: ConsoleStack, console: Any) -> None:
    stack.upstream.push(
        Turn(tool_calls=[ToolCall("lookup", '{"q":"answer"}', "call_7")], usage=Usage(9, 4)),
        Turn(text="The answer is 42.", usage=Usage(15, 6)),
    )
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
    tab = console("alpha")
    tab.open("#/playground")
    tab.wait_ready("playground")
    tab.page.fill("input[name=model]", MODEL)
    tab.page.fill("textarea[name=input]", "look it up")
    tab.page.fill("textarea[name=tools]", json.dumps([tool]))
    tab.page.click("form.playground button[type=submit]")
    tab.wait_ready("played")
    answer = tab.page.locator('form.call[data-call="call_7"]')
    assert 'lookup({"q":"answer"})' in answer.inner_text()
    answer.locator("textarea").fill("42")
    tab.page.evaluate("() => { delete document.getElementById('page').dataset.ready; }")
    answer.get_by_role("button", name="Send output").click()
    tab.wait_ready("played")
    assert tab.page.inner_text("#play-text") == "The answer is 42."
    sent = stack.upstream.model_requests()[-1].json["messages"]
    assert {"role": "tool", "tool_call_id": "call_7", "content": "42"}.items() <= sent[-1].items()
    tab.shot("playground-function-call")


def test_the_playground_polls_a_background_response_to_its_end(
    stack: ConsoleStack, console: Any
) -> None:
    stack.upstream.push(Turn(text="Done in the background.", usage=Usage(5, 4)))
    tab = console("alpha")
    tab.open("#/playground")
    tab.wait_ready("playground")
    tab.page.fill("input[name=model]", MODEL)
    tab.page.fill("textarea[name=input]", "take your time")
    tab.page.fill("textarea[name=tools]", "")
    tab.page.uncheck("input[name=stream]")
    tab.page.check("input[name=background]")
    tab.page.click("form.playground button[type=submit]")
    tab.wait_ready("played")
    assert tab.page.inner_text("#play-status").startswith("completed")
    assert tab.page.inner_text("#play-text") == "Done in the background."
