"""A loop that always ends, end to end: models that call a gateway-run tool on every turn, over
every wire, against real MCP servers on loopback, with the official SDK as the client.

Each case counts the upstream's model calls and the tools' executions exactly: a forced
``tool_choice`` is spent once the tool ran; a model calling a tool forever stops at the
provider's model-call cap; the same call with the same result twice in a row ends the response
(no progress); ``max_tool_calls`` counts hosted backends and tool searches too; a response past
its wall time ends with what it produced.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.testing.answers import calls_every_turn, forced_function, obeys_tool_choice
from responses_gateway.testing.bedrock import as_chat
from responses_gateway.testing.harmony import read_prompt
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import RecordedRequest, ScriptedUpstream, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import parse_sse

from .conftest import Stack

pytestmark = pytest.mark.stores("sqlite")

CAP = 5
"""The capped providers' ``max_model_calls``."""
WIRES = ("chat", "responses", "harmony", "bedrock")
LOWERED = ("chat", "harmony", "bedrock")


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


@pytest.fixture(scope="module")
def hosted() -> Iterator[RunningMcpServer]:
    with start_mcp_server("search") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(stack: Stack, hosted: RunningMcpServer) -> Iterator[RunningServer]:
    """Providers capped at :data:`CAP` model calls on every wire, one with a short wall time,
    and a web search backend on the loopback ``search`` server."""
    base = f"{stack.upstream_server.url}/v1"
    providers: list[dict[str, Any]] = [
        {"name": w, "base_url": base, "api": w, "models": [w], "max_model_calls": CAP}
        for w in WIRES
        if w != "bedrock"
    ]
    providers.append(  # signed with the runtime's credentials; the endpoint has no /v1
        {
            "name": "bedrock",
            "base_url": stack.upstream_server.url,
            "api": "bedrock",
            "aws_region": "us-east-1",
            "models": ["bedrock"],
            "max_model_calls": CAP,
        }
    )
    providers.append(
        {"name": "slow", "base_url": base, "api": "chat", "models": ["slow"], "max_loop_seconds": 1}
    )
    config = parse_config(
        {
            "providers": providers,
            "mcp_servers": [{"server_label": "hosted", "url": hosted.url}],
            "tool_backends": [{"type": "web_search", "server_label": "hosted", "tool": "search"}],
        },
        {},
    )
    policy = McpPolicy(allow_http=True, allow_loopback=True)
    with run_in_thread(create_app(config, stack.open_store(), mcp_policy=policy)) as server:
        yield server


@pytest.fixture
def sdk(
    gateway: RunningServer, upstream: ScriptedUpstream, calc: RunningMcpServer
) -> Iterator[openai.OpenAI]:
    calc.log.clear()
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0) as client:
        yield client


def _calc(server: RunningMcpServer) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": server.url,
        "require_approval": "never",
    }


def _forced(request: RecordedRequest) -> str | None:
    """The function a model call forced (harmony: as its developer message says it)."""
    if request.prompt is not None:
        prompt = read_prompt(request.json)
        assert prompt is not None
        return forced_function(prompt.chat_view)
    return forced_function(as_chat(request))  # Bedrock's Converse: as chat


def _offered(request: RecordedRequest) -> list[str]:
    if request.prompt is not None:
        prompt = read_prompt(request.json)
        assert prompt is not None
        return [t["function"]["name"] for t in prompt.chat_view["tools"]]
    body = as_chat(request)  # Bedrock's Converse: as chat
    return [t.get("name") or t["function"]["name"] for t in body.get("tools") or []]


def _create(client: openai.OpenAI, mode: str, **create: Any) -> Any:
    """A create, foreground or background (polled to its end by the SDK's retrieve)."""
    if mode == "foreground":
        return client.responses.create(**create)
    queued = client.responses.create(background=True, **create)
    done = threading.Event()
    for _ in range(500):
        response = client.responses.retrieve(queued.id)
        if response.status not in ("queued", "in_progress"):
            return response
        done.wait(0.02)
    raise AssertionError(f"{queued.id} never ended")


def _types(response: Any) -> list[str]:
    return [item.type for item in response.output]


@pytest.mark.parametrize("wire", WIRES)
def test_a_forced_tool_choice_is_spent_once_the_tool_ran(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, wire: str
) -> None:
    # GIVEN a model that calls the forced tool every time it is forced (a small local model)
    upstream.brain = obeys_tool_choice('{"a": 2, "b": 3}', "The sum is 5.")
    forced = {"type": "mcp", "server_label": "calc", "name": "add"}

    response = sdk.responses.create(
        model=wire,
        input="2+3?",
        tools=[_calc(calc)],  # type: ignore[list-item]
        tool_choice=forced,  # type: ignore[arg-type]
    )

    # THEN the first call forces the tool, the second (after it ran) leaves the model free
    assert [_forced(r) for r in upstream.model_requests()] == ["calc__add", None]
    assert calc.log.calls == [("add", {"a": 2, "b": 3})]
    assert _types(response) == ["mcp_list_tools", "mcp_call", "message"]
    assert response.status == "completed" and response.output_text == "The sum is 5."


@pytest.mark.parametrize("mode", ["foreground", "background"])
@pytest.mark.parametrize("wire", WIRES)
def test_a_model_calling_an_mcp_tool_forever_stops_at_the_model_call_cap(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, wire: str, mode: str
) -> None:
    upstream.brain = calls_every_turn("calc__add", lambda n: json.dumps({"a": n, "b": 1}))

    response = _create(sdk, mode, model=wire, input="count", tools=[_calc(calc)])

    assert len(upstream.model_requests()) == CAP
    assert [args["a"] for _, args in calc.log.calls] == list(range(1, CAP))  # the last: nobody
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_model_calls"
    assert _types(response) == ["mcp_list_tools"] + ["mcp_call"] * CAP
    assert [i.status for i in response.output[1:]] == ["completed"] * (CAP - 1) + ["incomplete"]  # type: ignore[union-attr]
    assert response.usage is not None and response.usage.input_tokens > 0  # every call counted


@pytest.mark.parametrize("wire", WIRES)
def test_the_same_call_with_the_same_result_twice_in_a_row_ends_the_response(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, wire: str
) -> None:
    upstream.brain = calls_every_turn("calc__add", lambda n: '{"a": 2, "b": 3}')

    response = sdk.responses.create(model=wire, input="add", tools=[_calc(calc)])  # type: ignore[list-item]

    assert len(upstream.model_requests()) == 2
    assert len(calc.log.calls) == 2
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "no_progress"


@pytest.mark.parametrize("wire", WIRES)
def test_past_max_tool_calls_a_model_that_keeps_calling_runs_nothing_more(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, wire: str
) -> None:
    upstream.brain = calls_every_turn("calc__add", lambda n: json.dumps({"a": n, "b": 1}))

    response = sdk.responses.create(
        model=wire,
        input="count",
        tools=[_calc(calc)],  # type: ignore[list-item]
        max_tool_calls=2,
    )

    requests = upstream.model_requests()
    assert len(requests) == CAP and len(calc.log.calls) == 2
    assert [bool(_offered(r)) for r in requests] == [True, True, False, False, False]
    calls = [i for i in response.output if i.type == "mcp_call"]
    assert [c.status for c in calls] == ["completed"] * 2 + ["incomplete"] * 3  # type: ignore[union-attr]
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_model_calls"


@pytest.mark.parametrize("wire", LOWERED)
def test_a_hosted_backend_called_every_turn_stops_at_the_cap_and_counts_as_tool_calls(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, wire: str
) -> None:
    upstream.brain = calls_every_turn("web_search", lambda n: json.dumps({"query": f"q{n}"}))

    capped = sdk.responses.create(model=wire, input="search", tools=[{"type": "web_search"}])
    assert len(upstream.model_requests()) == CAP
    searches = [i for i in capped.output if i.type == "web_search_call"]
    assert [s.status for s in searches] == ["completed"] * (CAP - 1) + ["failed"]  # type: ignore[union-attr]
    assert capped.incomplete_details is not None
    assert capped.incomplete_details.reason == "max_model_calls"

    upstream.reset()
    budget = sdk.responses.create(
        model=wire, input="search", tools=[{"type": "web_search"}], max_tool_calls=1
    )
    searches = [i for i in budget.output if i.type == "web_search_call"]
    assert [s.status for s in searches][:2] == ["completed", "failed"]  # never ran
    assert [bool(_offered(r)) for r in upstream.model_requests()][:2] == [True, False]


@pytest.mark.parametrize("wire", LOWERED)
def test_a_server_tool_search_every_turn_ends(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, wire: str
) -> None:
    upstream.brain = calls_every_turn("tool_search", lambda n: '{"query": "weather"}')
    deferred = {"type": "function", "name": "get_weather", "defer_loading": True}

    response = sdk.responses.create(
        model=wire,
        input="find a tool",
        tools=[{"type": "tool_search"}, deferred],  # type: ignore[list-item]
    )

    assert len(upstream.model_requests()) == 2
    assert _types(response) == ["tool_search_call", "tool_search_output"] * 2
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "no_progress"


@pytest.mark.parametrize("stream", [False, True])
def test_a_response_past_its_wall_time_ends_incomplete_with_what_it_produced(
    sdk: openai.OpenAI, upstream: ScriptedUpstream, stream: bool
) -> None:
    # GIVEN an upstream that sends three events, then holds its stream open forever
    upstream.push(Turn(text="partial words here and more", hold_after=3))

    if stream:
        events = list(sdk.responses.create(model="slow", input="go", stream=True))
        assert [e.type for e in events[-2:]] == ["response.output_item.done", "response.incomplete"]
        response = events[-1].response  # type: ignore[union-attr]
    else:
        response = sdk.responses.create(model="slow", input="go")

    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_loop_seconds"
    assert _types(response) == ["message"] and response.output[0].status == "incomplete"  # type: ignore[union-attr]
    assert response.output_text.startswith("partial")
    assert upstream.wait_for_disconnects(1) == 1  # the upstream stream was closed


def test_a_compaction_cut_by_the_wall_time_leaves_no_empty_compaction_item(
    gateway: RunningServer, upstream: ScriptedUpstream
) -> None:
    # GIVEN a summary call whose stream the upstream holds open forever
    upstream.push(Turn(text="a summary that never ends", hold_after=2))
    trigger = [{"role": "user", "content": "hi"}, {"type": "compaction_trigger"}]
    body = {"model": "slow", "stream": True, "input": trigger}

    url = f"{gateway.url}/v1/responses"
    events = parse_sse(httpx.post(url, json=body, timeout=30).content)

    assert events[-1]["type"] == "response.incomplete"
    final = events[-1]["response"]
    assert final["incomplete_details"] == {"reason": "max_loop_seconds"}
    assert final["output"] == []  # never a compaction item without its sealed content
    assert not [e for e in events if e["type"] == "response.output_item.done"]
    stored = httpx.get(f"{url}/{final['id']}", timeout=30).json()
    assert stored["output"] == [] and stored["status"] == "incomplete"
