"""The console in a real Chromium against the served gateway and the scripted upstream.

Each test makes traffic with real clients (the official SDK, or raw HTTP shaped like Codex),
then drives the console and asserts what the page shows; every page is screenshotted to
``tests/artifacts/`` and no test may log a console error (checked by the ``console`` fixture).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ToolCall, Turn, Usage

from .conftest import KEYS, MODEL, OTHER_MODEL, ConsoleStack


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


def _client(stack: ConsoleStack, who: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.gateway.url}/v1", api_key=KEYS[who], max_retries=0)


def _codex_turn(stack: ConsoleStack, thread: str, turn: str) -> list[dict[str, Any]]:
    """One Codex-shaped turn: streamed, ``store: false``, ids in ``client_metadata`` and headers."""
    body = {
        "model": MODEL,
        "stream": True,
        "store": False,
        "input": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            }
        ],
        "include": ["reasoning.encrypted_content"],
        "tool_choice": "auto",
        "prompt_cache_key": thread,
        "client_metadata": {"session_id": thread, "thread_id": thread, "turn_id": turn},
    }
    headers = {"session-id": thread, "thread-id": thread, "originator": "codex_exec"}
    with (
        stack.http("alpha") as http,
        http.stream("POST", "/v1/responses", json=body, headers=headers) as answer,
    ):
        assert answer.status_code == 200
        events = [json.loads(line[6:]) for line in answer.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "response.completed"
    return events


def test_codex_store_false_session_shows_in_requests_under_its_thread_id(
    stack: ConsoleStack, console: Any
) -> None:
    thread = f"thr-{uuid.uuid4().hex[:10]}"
    stack.upstream.push(
        Turn(text="hello", usage=Usage(12, 3)), Turn(text="again", usage=Usage(20, 4))
    )
    first = _codex_turn(stack, thread, "turn-1")[-1]["response"]["id"]
    second = _codex_turn(stack, thread, "turn-2")[-1]["response"]["id"]

    tab = console("alpha")
    tab.open(f"#/requests?session={thread}")
    tab.wait_ready("requests")
    rows = tab.page.locator("tbody tr[data-id]")
    assert [rows.nth(i).get_attribute("data-id") for i in range(rows.count())] == [second, first]
    cells = rows.nth(0).locator("td").all_inner_texts()
    assert cells[1:3] == ["completed", MODEL]
    assert cells[4] == "24"  # 20 + 4 tokens
    assert cells[7] == second[:13] + "…"  # the id, cut: the details hold it whole
    rows.nth(0).get_by_role("button").click()  # the row's details
    details = tab.page.inner_text("tr.detail-row")
    assert second in details and "chat / chat" in details and f"thread_id={thread}" in details
    assert "no (store: false)" in details
    record = json.loads(
        tab.page.evaluate(
            "id => fetch(`/v1/console/requests/${id}`, {headers: {authorization:"
            " `Bearer ${sessionStorage.getItem('rg.apiKey')}`}}).then(r => r.text())",
            second,
        )
    )
    assert 0 <= record["ttft_ms"] <= record["duration_ms"]  # time to first token within it
    tab.shot("requests")

    tab.open(f"#/response/{first}")
    tab.wait_ready("response")
    assert "Not stored" in tab.page.inner_text("#page")
    assert thread in tab.page.inner_text("dl.facts")
    tab.shot("response-not-stored")

    phone = console("alpha", width=390, height=844)
    phone.open(f"#/requests?session={thread}")
    phone.wait_ready("requests")
    assert phone.page.locator("tbody tr[data-id]").count() == 2
    phone.fits(390)
    phone.shot("requests-phone")


def test_store_false_response_of_a_content_tenant_shows_its_logged_timeline(
    stack: ConsoleStack, console: Any
) -> None:
    stack.upstream.push(Turn(text="logged answer", usage=Usage(5, 2)))
    created = _client(stack, "beta").responses.create(
        model=MODEL, input="logged question", store=False
    )

    tab = console("beta")
    tab.open(f"#/response/{created.id}")
    tab.wait_ready("response")
    assert "content from the request log." in tab.page.inner_text("#page")
    steps = tab.page.locator("ol.timeline li")
    assert steps.count() == 2
    assert [steps.nth(i).get_attribute("data-side") for i in range(2)] == ["input", "output"]
    assert "logged question" in steps.nth(0).inner_text()
    assert "logged answer" in steps.nth(1).inner_text()
    tab.shot("response-logged-content")


def test_mcp_loop_with_approval_is_a_timeline_in_order(
    stack: ConsoleStack, console: Any, calc: RunningMcpServer
) -> None:
    tool = {"type": "mcp", "server_label": "calc", "server_url": calc.url}
    stack.upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":5,"b":5}', "call_1")], usage=Usage(30, 5)),
        Turn(text="It is 10.", usage=Usage(40, 4)),
    )
    client = _client(stack, "alpha")
    first = client.responses.create(model=MODEL, input="5+5", tools=[tool])  # type: ignore[list-item]
    request = first.output[1]
    approval = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    second = client.responses.create(
        model=MODEL,
        input=[approval],  # type: ignore[list-item]
        tools=[tool],  # type: ignore[list-item]
        previous_response_id=first.id,
    )
    assert [i.type for i in second.output] == ["mcp_call", "message"]

    tab = console("alpha")
    tab.open(f"#/response/{first.id}")
    tab.wait_ready("response")
    steps = tab.page.locator("ol.timeline > li")
    assert [steps.nth(i).get_attribute("data-type") for i in range(steps.count())] == [
        "message",
        "mcp_list_tools",
        "mcp_approval_request",
    ]
    assert "approval requested calc.add" in steps.nth(2).inner_text()

    tab.open(f"#/response/{second.id}")
    tab.wait_ready("response")
    steps = tab.page.locator("ol.timeline > li")
    assert [
        (steps.nth(i).get_attribute("data-type"), steps.nth(i).get_attribute("data-side"))
        for i in range(steps.count())
    ] == [
        ("mcp_approval_response", "input"),
        ("mcp_call", "output"),
        ("message", "output"),
    ]
    assert "10.0" in steps.nth(1).inner_text() and "It is 10." in steps.nth(2).inner_text()
    facts = tab.page.inner_text("dl.facts")
    assert "Model calls\t1" in facts or "Model calls\n1" in facts
    assert "40 (0 cached)" in facts and "4 (0 reasoning)" in facts
    tab.shot("timeline")  # docs/console-timeline.png is a copy of this screenshot

    tab.page.click(f'dl.facts a[href="#/response/{first.id}"]')  # walk the chain back
    tab.page.wait_for_selector('ol.timeline > li[data-type="mcp_approval_request"]')


def test_a_tenant_key_sees_only_its_tenant(stack: ConsoleStack, console: Any) -> None:
    stack.upstream.push(
        Turn(text="for alpha", usage=Usage(5, 1)), Turn(text="for beta", usage=Usage(6, 1))
    )
    mine = _client(stack, "alpha").responses.create(model=MODEL, input="a")
    theirs = _client(stack, "beta").responses.create(model=OTHER_MODEL, input="b")

    beta = console("beta")
    beta.open("#/requests")
    beta.wait_ready("requests")
    ids = beta.page.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert theirs.id in ids and mine.id not in ids
    assert "tenant beta" in beta.page.inner_text("#request-count")
    beta.shot("requests-tenant")
    with stack.http("beta") as http:
        denied = http.get("/v1/console/requests", params={"tenant": "alpha"})
        assert denied.status_code == 403
        assert denied.json()["error"]["code"] == "insufficient_permissions"
        assert http.get(f"/v1/console/responses/{mine.id}").status_code == 404

    ops = console("ops")
    ops.open("#/requests")
    ops.wait_ready("requests")
    ops.pick_tenant("alpha")
    ops.wait_ready("requests")
    ops.page.wait_for_selector(f'tbody tr[data-id="{mine.id}"]')
    assert theirs.id not in ops.page.locator("tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.id)"
    )


def _usage_rows(tab: Any) -> dict[str, list[int]]:
    """The usage page's table: group -> [requests, input, cached, output, reasoning] tokens."""
    rows = tab.page.locator("#usage tbody tr").evaluate_all(
        "rows => rows.map(r => [r.dataset.key, ...[...r.cells].slice(1, 6)"
        ".map(c => Number(c.textContent.replace(/,/g, '')))])"
    )
    return {row[0]: row[1:] for row in rows}


def test_usage_page_totals_equal_the_usage_api(stack: ConsoleStack, console: Any) -> None:
    stack.upstream.push(Turn(text="u", usage=Usage(7, 2)))
    _client(stack, "beta").responses.create(model=MODEL, input="u")
    start = int(time.time()) // 86_400 * 86_400 - 6 * 86_400
    with stack.http("ops") as http:
        page = http.get(
            "/v1/organization/usage/completions",
            params={"start_time": start, "bucket_width": "1d", "limit": 7, "group_by": "model"},
        ).json()
    results = [r for bucket in page["data"] for r in bucket["results"]]

    tab = console("ops")
    tab.open("#/usage?group=model&metric=tokens")
    tab.wait_ready("usage")
    shown = _usage_rows(tab)
    for model in {r["model"] for r in results}:
        mine = [r for r in results if r["model"] == model]
        assert shown[model][1] == sum(r["input_tokens"] for r in mine) > 0
        assert shown[model][3] == sum(r["output_tokens"] for r in mine)
    assert tab.page.locator(".chart svg rect[fill]").count() >= 1  # token bars, per UTC day
    tab.shot("usage")

    beta = console("beta")  # a tenant's key sees its own usage only
    beta.open("#/usage?group=model")
    beta.wait_ready("usage")
    assert "tenant beta" in beta.page.inner_text("#usage-status")
    with stack.http("ops") as http:
        own = http.get(
            "/v1/organization/usage/completions",
            params={"start_time": start, "limit": 7, "group_by": "model", "project_ids": "beta"},
        ).json()
    theirs = [r for bucket in own["data"] for r in bucket["results"]]
    assert sum(row[1] for row in _usage_rows(beta).values()) == sum(
        r["input_tokens"] for r in theirs
    )


def test_agents_run_traced_to_the_gateway_shows_a_waterfall_with_model_io(
    stack: ConsoleStack, console: Any
) -> None:
    from agents import (
        Agent,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_trace_processors,
        set_tracing_export_api_key,
    )
    from agents.tracing import flush_traces
    from agents.tracing.processors import default_exporter, default_processor
    from openai import AsyncOpenAI

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    stack.upstream.push(
        Turn(tool_calls=[ToolCall("add", '{"a":2,"b":3}', "call_1")], usage=Usage(21, 6)),
        Turn(text="The sum is 5.", usage=Usage(33, 5)),
    )
    exporter = default_exporter()
    endpoint = exporter.endpoint
    set_trace_processors([default_processor()])
    set_tracing_export_api_key(KEYS["alpha"])
    exporter.endpoint = f"{stack.gateway.url}/v1/traces/ingest"
    client = AsyncOpenAI(base_url=f"{stack.gateway.url}/v1", api_key=KEYS["alpha"], max_retries=0)
    agent = Agent(
        name="Adder",
        instructions="Add numbers with the tool.",
        tools=[add],
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
    )
    try:  # in a thread of its own: Playwright's sync driver owns this thread's event loop
        with ThreadPoolExecutor(1) as pool:
            result = pool.submit(asyncio.run, Runner.run(agent, "What is 2+3?")).result()
        flush_traces()
    finally:
        exporter.endpoint = endpoint
        exporter.set_api_key("")
    assert result.final_output == "The sum is 5."
    with stack.http("alpha") as http:
        newest = http.get("/v1/console/traces", params={"limit": 1}).json()["data"][0]
    trace_id = newest["id"]
    assert newest["workflow_name"] == "Agent workflow"

    tab = console("alpha")
    tab.open("#/traces")
    tab.wait_ready("traces")
    tab.page.click(f'a[href="#/trace/{trace_id}"]')
    tab.wait_ready("trace")
    kinds = tab.page.locator("ol.waterfall > li").evaluate_all(
        "rows => rows.map(r => [r.dataset.type, Number(r.dataset.depth)])"
    )
    spans = [k for k in kinds if k[0] != "custom"]
    assert [k[0] for k in spans] == ["agent", "response", "function", "response"]
    agent_depth = spans[0][1]
    assert all(depth > agent_depth for _, depth in spans[1:])  # nested under the agent
    for details in tab.page.locator("ol.waterfall details").all():
        details.evaluate("d => { d.open = true; }")
    responses = tab.page.locator('ol.waterfall > li[data-type="response"]')
    first, second = responses.nth(0).inner_text(), responses.nth(1).inner_text()
    assert "What is 2+3?" in first and "tool call add" in first  # the model call's input, output
    assert "tool output call_1" in second and "The sum is 5." in second
    assert "5" in tab.page.locator('li[data-type="function"] pre').inner_text()
    tab.shot("trace")
    with stack.http("beta") as http:
        assert http.get(f"/v1/console/traces/{trace_id}").status_code == 404


def test_files_need_no_key_and_data_calls_do(stack: ConsoleStack) -> None:
    with httpx.Client(base_url=stack.gateway.url, timeout=30) as anonymous:
        page = anonymous.get("/console/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert (
            anonymous.get("/console/console.js")
            .headers["content-type"]
            .startswith("text/javascript")
        )
        assert anonymous.get("/console/../app.py").status_code == 404
        assert anonymous.get("/console/nothing.js").status_code == 404
        assert anonymous.get("/console", follow_redirects=False).status_code == 308
        for path in ("/v1/console/me", "/v1/console/requests", "/v1/console/traces"):
            answer = anonymous.get(path)
            assert answer.status_code == 401
            assert answer.json()["error"]["code"] == "invalid_api_key"
        assert anonymous.post("/v1/traces/ingest", json={"data": []}).status_code == 401
    with stack.http("alpha") as http:
        beta = {"OpenAI-Beta": "traces=v1"}
        assert http.post("/v1/traces/ingest", json={"data": []}, headers=beta).status_code == 204
        bad = http.post("/v1/traces/ingest", json={"data": [{"object": "x"}]}, headers=beta)
        assert bad.status_code == 400
        assert bad.json()["error"]["param"] == "data[0].object"
        assert http.get("/v1/console/requests", params={"limit": 0}).status_code == 400
        assert http.get("/v1/console/me").json() == {
            "tenant": "alpha",
            "api_key_id": http.get("/v1/console/me").json()["api_key_id"],
            "operator": False,
            "budgets_enforced": True,
        }


def test_playground_streams_and_answers_an_approval(
    stack: ConsoleStack, console: Any, calc: RunningMcpServer
) -> None:
    tool = {"type": "mcp", "server_label": "calc", "server_url": calc.url}
    stack.upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":2,"b":2}', "call_1")], usage=Usage(9, 3)),
        Turn(text="Two plus two is four, as the calculator says.", usage=Usage(12, 9)),
    )
    tab = console("alpha")
    tab.open("#/playground")
    tab.wait_ready("playground")
    tab.page.fill("input[name=model]", MODEL)
    tab.page.fill("textarea[name=instructions]", "Use the calculator.")
    tab.page.fill("textarea[name=input]", "2+2?")
    tab.page.fill("textarea[name=tools]", json.dumps([tool]))
    tab.page.click("form.playground button[type=submit]")
    tab.wait_ready("played")
    assert tab.page.locator("#play-steps > li").evaluate_all(
        "items => items.map(i => i.dataset.type)"
    ) == ["mcp_list_tools", "mcp_approval_request"]
    approval = tab.page.get_by_role("group", name="Approval for add")
    assert '{"a":2,"b":2}' in approval.inner_text()
    tab.shot("playground-approval")

    approval.get_by_role("button", name="Approve").click()
    tab.page.wait_for_selector('#play-steps > li[data-type="message"]')
    tab.wait_ready("played")
    assert tab.page.inner_text("#play-text") == "Two plus two is four, as the calculator says."
    assert int(tab.page.get_attribute("#play-text", "data-deltas") or 0) > 1  # as it arrived
    assert tab.page.locator("#play-steps > li").evaluate_all(
        "items => items.map(i => i.dataset.type)"
    ) == ["mcp_call", "message"]
    assert "completed" in tab.page.inner_text("#play-status")
    sent = stack.upstream.model_requests()
    assert len(sent) == 2  # the approved call ran without asking the model again
    tab.shot("playground")


_UNLABELLED = """() => [...document.querySelectorAll('#page input, #page textarea, #page select')]
    .filter(i => i.type !== 'hidden' && i.labels.length === 0 && !i.getAttribute('aria-label'))
    .map(i => i.name || i.id)"""
"""Form fields of the page without a label (accessible markup: there must be none)."""


def _page_fits(tab: Any, width: int) -> None:
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= width + 1


def test_keys_page_creates_a_key_budgets_it_and_revokes_it(
    stack: ConsoleStack, console: Any
) -> None:
    ops = console("ops")
    ops.open("#/keys")
    ops.wait_ready("keys")
    assert ops.page.evaluate(_UNLABELLED) == []
    listed = ops.page.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
    assert len(listed) == len(KEYS)  # ids only: a key's value is never listed
    assert not any(value in ops.page.inner_text("#page") for value in KEYS.values())

    ops.page.fill("#key-tenant", "gamma")
    ops.page.click("#key-form button[type=submit]")
    value = ops.page.wait_for_selector("#new-key-value").inner_text()
    key_id = ops.page.inner_text("#new-key p").split()[2]
    ops.page.wait_for_selector(f'tbody tr[data-id="{key_id}"]')
    assert f"{value}:gamma" in stack.keys_file.read_text()

    ops.page.fill("#budget-tenant", "gamma")
    ops.page.fill("#limit-daily_tokens", "0")
    ops.page.click("#budget-form button[type=submit]")
    ops.page.wait_for_selector("#budget-status:has-text('Saved the limits of gamma')")
    assert "enforced from the next request" in ops.page.inner_text("#budget-status")
    assert "Daily tokens: 0" in ops.page.inner_text("#budget-spend")
    ops.shot("keys")

    gamma = openai.OpenAI(base_url=f"{stack.gateway.url}/v1", api_key=value, max_retries=0)
    with pytest.raises(openai.RateLimitError) as spent:
        gamma.responses.create(model=MODEL, input="over budget")
    refused_id = spent.value.response.headers["x-request-id"]

    ops.page.click(f'button[aria-label="Revoke key {key_id}"]')
    ops.page.click(f'button[aria-label="Revoke key {key_id}"]:has-text("Confirm revoke")')
    ops.page.wait_for_selector(f'tbody tr[data-id="{key_id}"]', state="detached")
    with pytest.raises(openai.AuthenticationError) as revoked:
        gamma.responses.create(model=MODEL, input="revoked")
    unauthenticated_id = revoked.value.response.headers["x-request-id"]

    ops.open("#/requests?tenant=gamma")  # a link naming its tenant picks it
    ops.wait_ready("requests")
    row = ops.page.wait_for_selector(f'tbody tr[data-id="{refused_id}"]')
    assert "refused" in row.inner_text() and "insufficient_quota" in row.inner_text()
    with stack.http("ops") as http:
        logged = http.get(
            "/v1/console/requests", params={"tenant": "(unauthenticated)", "limit": 200}
        ).json()["data"]
    (failed,) = [r for r in logged if r["id"] == unauthenticated_id]
    assert (failed["http_status"], failed["error_code"]) == (401, "invalid_api_key")
    assert failed["model"] == "" and failed["api_key_id"] == ""  # the body is never read

    phone = console("ops", width=390, height=844)
    phone.open("#/keys")
    phone.wait_ready("keys")
    _page_fits(phone, 390)
    phone.shot("keys-phone")

    beta = console("beta")
    beta.open("#/keys")
    beta.wait_ready("keys")
    assert "needs an operator key" in beta.page.inner_text("#page")
    assert beta.page.input_value("#budget-tenant") == "beta"
    with stack.http("beta") as http:
        denied = http.post("/v1/console/keys", json={"tenant": "beta"})
        assert denied.status_code == 403
        assert (
            http.put("/v1/console/budgets", params={"tenant": "beta"}, json={}).status_code == 403
        )


def test_conversations_page_lists_and_walks_a_conversation(
    stack: ConsoleStack, console: Any
) -> None:
    client = _client(stack, "alpha")
    conversation = client.conversations.create(
        metadata={"topic": "walk"},
        items=[{"type": "message", "role": "user", "content": "first question"}],
    )
    stack.upstream.push(Turn(text="the answer", usage=Usage(8, 2)))
    client.responses.create(model=MODEL, input="second question", conversation=conversation.id)

    tab = console("alpha")
    tab.open("#/conversations")
    tab.wait_ready("conversations")
    row = tab.page.locator(f'tbody tr[data-id="{conversation.id}"]')
    assert "topic=walk" in row.inner_text()
    assert tab.page.evaluate(_UNLABELLED) == []
    tab.shot("conversations")

    row.get_by_role("link", name=conversation.id).click()
    tab.wait_ready("conversation")
    steps = tab.page.locator("ol.timeline > li")
    assert steps.evaluate_all("items => items.map(i => i.dataset.side)") == [
        "user",
        "user",
        "assistant",
    ]
    assert [text.split("\n")[-1] for text in steps.all_inner_texts()] == [
        "first question",
        "second question",
        "the answer",
    ]
    tab.shot("conversation")

    phone = console("alpha", width=390, height=844)
    phone.open(f"#/conversation/{conversation.id}")
    phone.wait_ready("conversation")
    _page_fits(phone, 390)
    phone.open("#/conversations")
    phone.wait_ready("conversations")
    _page_fits(phone, 390)
    phone.shot("conversations-phone")
