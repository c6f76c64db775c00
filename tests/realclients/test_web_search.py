"""Hosted ``web_search`` from real clients (openai-agents' ``WebSearchTool``, Codex CLI's
``web_search``) through the gateway, over both wires.

The gateway's operator backs ``web_search`` with a loopback MCP search server
(``tool_backends`` in the gateway config). On the chat wire the model calls the lowered
``web_search`` function, the gateway runs the search on that server and the client sees
OpenAI's ``web_search_call`` item; on the Responses wire the upstream runs hosted tools itself
and the gateway relays its ``web_search_call``. The clients never run anything: they only read
the items.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, WebSearchTool
from openai import AsyncOpenAI

from responses_gateway.testing.brain import brain_turn, call_block
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream

from .conftest import CLIENT_KEY, Codex, Stack, agent_messages, codex_events, codex_ok, serve_stack

RUN = RunConfig(tracing_disabled=True)


@pytest.fixture(scope="module")
def search() -> Iterator[RunningMcpServer]:
    with start_mcp_server("search") as server:
        yield server


@pytest.fixture(scope="module")
def stack(search: RunningMcpServer) -> Iterator[Stack]:
    backends = {
        "mcp_servers": [{"server_label": "search", "url": search.url}],
        "tool_backends": [{"type": "web_search", "server_label": "search", "tool": "search"}],
    }
    with serve_stack(ScriptedUpstream(brain=brain_turn, demo=False), backends) as served:
        yield served


async def test_web_search_tool(
    stack: Stack, upstream: object, search: RunningMcpServer, wire: str, model: str
) -> None:
    search.log.clear()
    client = AsyncOpenAI(base_url=stack.base_url, api_key=CLIENT_KEY, max_retries=0)
    agent = Agent(
        name="researcher",
        instructions="Search when asked.",
        model=OpenAIResponsesModel(model=model, openai_client=client),
        tools=[WebSearchTool()],
    )
    prompt = call_block("web_search", {"query": "responses gateway"})
    result = await Runner.run(agent, prompt, run_config=RUN)

    (call,) = [i.raw_item for i in result.new_items if i.type == "tool_call_item"]
    assert call.type == "web_search_call"
    assert call.status == "completed"
    assert call.action.type == "search" and call.action.query == "responses gateway"
    if wire == "chat":  # the gateway ran the search on the operator's MCP server
        expected = "1. responses gateway: https://example.com/responses-gateway"
        assert result.final_output == f"The tool returned: {expected}"
        assert search.log.calls == [("search", {"query": "responses gateway"})]
        assert len(stack.model_requests(wire)) == 2
    else:  # an OpenAI upstream runs hosted tools itself
        assert result.final_output == "Searched the web for: responses gateway"
        assert search.log.calls == []
        assert len(stack.model_requests(wire)) == 1


def test_codex_web_search(
    codex: Codex, stack: Stack, upstream: object, search: RunningMcpServer, wire: str
) -> None:
    search.log.clear()
    done = codex_ok(codex.exec(call_block("web_search", {"query": "codex gateway"})))
    searches = [
        e["item"] for e in codex_events(done)
        if e.get("type") == "item.completed" and e["item"].get("type") == "web_search"
    ]  # fmt: skip
    assert [s["query"] for s in searches] == ["codex gateway"]
    if wire == "chat":
        expected = "1. codex gateway: https://example.com/codex-gateway"
        assert agent_messages(done) == [f"The tool returned: {expected}"]
        assert search.log.calls == [("search", {"query": "codex gateway"})]
    else:
        assert agent_messages(done) == ["Searched the web for: codex gateway"]
        assert search.log.calls == []
