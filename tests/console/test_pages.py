"""Every console page in Chromium at 1400 px and 390 px, with data and without: each renders,
logs no console error, never makes the page wider than the window (the request log's table fits
it whole), and says what to do next when it has nothing to show. Screenshots of each land in
``tests/artifacts/pages/``; the live tail is checked to ask only for what is newer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import openai
import pytest

from responses_gateway.testing.script import ToolCall, Turn, Usage

from .conftest import ARTIFACTS, KEYS, MODEL, ConsoleStack

WIDTHS = (1400, 390)


@dataclass
class Traffic:
    response_id: str
    trace_id: str
    conversation_id: str


@pytest.fixture(scope="module")
def traffic(console_stack: ConsoleStack) -> Traffic:
    """Alpha's traffic: stored responses (one with reasoning and a tool call, one failed), a
    conversation, a refused request and a trace with a failed tool."""
    stack = console_stack
    client = openai.OpenAI(base_url=f"{stack.gateway.url}/v1", api_key=KEYS["alpha"], max_retries=0)
    stack.upstream.reset()
    stack.upstream.push(
        Turn(
            reasoning="Weather needs a tool.",
            tool_calls=[ToolCall("weather", '{"c":"Oslo"}', "c1")],
            usage=Usage(40, 9),
        ),
        Turn(text="Sunny.", usage=Usage(60, 3)),
        Turn(status=500),
    )
    tool = {
        "type": "function",
        "name": "weather",
        "parameters": {"type": "object", "properties": {}},
    }
    first = client.responses.create(model=MODEL, input="Weather in Oslo?", tools=[tool])  # type: ignore[list-item]
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "hi"}]
    )
    client.responses.create(model=MODEL, input="and now?", conversation=conversation.id)
    with pytest.raises(openai.APIStatusError):
        client.responses.create(model=MODEL, input="fails")
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="not-a-model", input="refused")
    trace = {"object": "trace", "id": "trace_pages", "workflow_name": "Pages workflow"}
    spans = [
        {"object": "trace.span", "id": "p_agent", "trace_id": "trace_pages", "parent_id": None,
         "started_at": "2026-01-01T00:00:00+00:00", "ended_at": "2026-01-01T00:00:03+00:00",
         "span_data": {"type": "agent", "name": "Weather agent"}, "error": None},
        {"object": "trace.span", "id": "p_call", "trace_id": "trace_pages", "parent_id": "p_agent",
         "started_at": "2026-01-01T00:00:00.2+00:00", "ended_at": "2026-01-01T00:00:01+00:00",
         "span_data": {"type": "response", "response_id": first.id,
                       "usage": {"input_tokens": 40, "output_tokens": 9}}, "error": None},
        {"object": "trace.span", "id": "p_tool", "trace_id": "trace_pages", "parent_id": "p_agent",
         "started_at": "2026-01-01T00:00:01+00:00", "ended_at": "2026-01-01T00:00:02+00:00",
         "span_data": {"type": "function", "name": "weather", "input": "{}", "output": ""},
         "error": {"message": "Error running tool (non-fatal)", "data": {}}},
    ]  # fmt: skip
    with stack.http("alpha") as http:
        assert http.post("/v1/traces/ingest", json={"data": [trace, *spans]}).status_code == 204
    return Traffic(first.id, "trace_pages", conversation.id)


def _pages(traffic: Traffic) -> list[tuple[str, str, str]]:
    """(name, hash, ready) of every page with data."""
    return [
        ("overview", "#/overview?range=1h", "overview"),
        ("requests", "#/requests", "requests"),
        ("response", f"#/response/{traffic.response_id}", "response"),
        ("traces", "#/traces", "traces"),
        ("trace", f"#/trace/{traffic.trace_id}", "trace"),
        ("conversations", "#/conversations", "conversations"),
        ("conversation", f"#/conversation/{traffic.conversation_id}", "conversation"),
        ("usage", "#/usage?metric=tokens", "usage"),
        ("keys", "#/keys", "keys"),
        ("playground", "#/playground", "playground"),
    ]


EMPTY = [
    ("overview", "#/overview?range=1h", "overview", "No requests in this range yet."),
    ("requests", "#/requests", "requests", "No requests yet."),
    ("traces", "#/traces", "traces", "No traces yet."),
    ("conversations", "#/conversations", "conversations", "No conversations yet."),
    ("usage", "#/usage", "usage", "No usage in this range."),
    ("keys", "#/keys", "keys", "Budget"),
    ("playground", "#/playground", "playground", "Playground"),
]


def _tables_fit(tab: Any) -> list[str]:
    """Labels of tables wider than their wrapper (they scroll inside it)."""
    found: list[str] = tab.page.evaluate(
        "() => [...document.querySelectorAll('#page .table-wrap')]"
        ".filter(w => w.scrollWidth > w.clientWidth + 1)"
        ".map(w => w.querySelector('table').getAttribute('aria-label'))"
    )
    return found


@pytest.fixture(scope="module")
def shots() -> Iterator[Any]:
    folder = ARTIFACTS / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    yield folder


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_with_data_fits_and_logs_no_error(
    console: Any, traffic: Traffic, width: int, shots: Any
) -> None:
    tab = console("ops", width=width, height=900)
    tab.pick_tenant("alpha")
    tab.wait_ready("overview")
    for name, hash_, ready in _pages(traffic):
        tab.open(hash_)
        tab.wait_ready(ready)
        tab.page.screenshot(path=str(shots / f"{name}-{width}.png"), full_page=True)
        tab.fits(width)
        if name == "requests":
            assert _tables_fit(tab) == []  # the log fits the window: no column off screen
            assert tab.page.locator("tbody tr[data-id]").count() >= 4
    assert tab.unexpected() == []


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_without_data_says_what_to_do(console: Any, width: int, shots: Any) -> None:
    tab = console("quiet", width=width, height=900)
    assert tab.page.inner_text("#who").split() == ["quiet", "Sign", "out"]
    for name, hash_, ready, says in EMPTY:
        tab.open(hash_)
        tab.wait_ready(ready)
        tab.fits(width)
        assert says in tab.page.inner_text("#page"), name
        tab.page.screenshot(path=str(shots / f"{name}-empty-{width}.png"), full_page=True)
    tab.open("#/traces")
    tab.wait_ready("traces")
    assert "/v1/traces/ingest" in tab.page.inner_text(".empty")  # how to send traces
    tab.open("#/requests")
    tab.wait_ready("requests")
    assert "/v1/responses" in tab.page.inner_text(".empty")  # how to make a first request


def test_the_overview_lists_what_it_is_broken_down_by(console: Any, traffic: Traffic) -> None:
    tab = console("ops", width=1400)
    tab.open("#/overview?range=1h")
    tab.wait_ready("overview")
    sections = tab.page.locator(".breakdowns section").evaluate_all(
        "s => s.map(x => x.getAttribute('aria-label'))"
    )
    assert sections[:3] == ["By tenant", "By key", "By model"]
    assert tab.page.locator('.breakdowns tr[data-key="alpha"]').count() == 1
    cards = tab.page.locator(".card h3").all_inner_texts()
    assert cards == ["Requests", "Error rate", "Latency", "Time to first token", "Tokens", "Cost"]
    assert tab.page.locator(".card .chart svg").count() == 6
    tab.pick_tenant("alpha")
    tab.wait_ready("overview")
    assert "tenant alpha" in tab.page.inner_text("#overview-scope")


def test_the_live_tail_asks_only_for_what_is_newer(
    stack: ConsoleStack, console: Any, traffic: Traffic
) -> None:
    tab = console("alpha")
    tab.open("#/requests")
    tab.wait_ready("requests")
    shown = tab.page.locator("tbody tr[data-id]").count()
    newest = tab.page.get_attribute("tbody tr[data-id]", "data-id")
    asked: list[str] = []
    tab.page.on(
        "request",
        lambda r: asked.append(r.url) if "/v1/console/requests" in r.url else None,
    )
    tab.page.check("#live")
    stack.upstream.push(Turn(text="tailed", usage=Usage(2, 1)))
    created = openai.OpenAI(
        base_url=f"{stack.gateway.url}/v1", api_key=KEYS["alpha"], max_retries=0
    ).responses.create(model=MODEL, input="tail me")
    tab.page.wait_for_selector(f'tbody tr[data-id="{created.id}"]')
    assert tab.page.locator("tbody tr[data-id]").count() == shown + 1
    # every poll asked for what is newer than the newest row shown, never for the whole page
    assert asked and all("after=" in url for url in asked)
    assert newest is not None and any(newest in url for url in asked)
