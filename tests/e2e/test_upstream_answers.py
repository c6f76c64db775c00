"""Every output item a Responses upstream may answer with, and the loop still ends after one call.

The fault suite of issue 28: for every output item type the pinned SDK knows, with every status
its type allows (:func:`~responses_gateway.testing.answers.output_item_cases`, read from the SDK,
so a new type is covered without editing this file), a Responses upstream answers one turn with
that item and a message. Whatever the item and its status, over HTTP (streamed and not,
foreground and background) and WebSocket, with and without its tool declared, the gateway calls
the upstream exactly once, runs nothing itself (a relayed call is the upstream's: an ``mcp_call``
left ``in_progress`` is not executed), relays the item's status as it came and ends the response.
Streams pass the SDK's strict stream checker, and what the gateway sends passes both specs but
for the one fault a case's item carries from its upstream (a status the SDK allows and a spec
does not list, relayed as it came).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.answers import (
    OutputItemCase,
    output_item_cases,
    relayed_turn,
    smallest_tool,
)
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.spec_tap import GatewayTaps
from responses_gateway.testing.stream_check import check_socket_stream, check_stream, parse_sse
from responses_gateway.tool_kinds import ITEM_KINDS

from .conftest import MODELS, Stack

pytestmark = pytest.mark.stores("sqlite")

CASES = output_item_cases()
PARSED = frozenset({"message", "reasoning", "function_call"})
"""Item types the Responses adapter parses into its own items (the rest it relays as sent)."""
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@pytest.fixture(autouse=True)
def spec_conformance(spec_taps: GatewayTaps, request: pytest.FixtureRequest) -> Iterator[None]:
    """The spec tap's check (this module's own): a case whose item a spec refuses may emit that
    item's status, and nothing else that breaks a spec."""
    spec_taps.take()
    yield
    params = getattr(request.node, "callspec", None)
    case = params.params.get("case") if params is not None else None
    excused = f"'status': '{case.status}' is not one of" if case and case.spec_problem else None
    found = [f for f in spec_taps.take() if excused is None or excused not in f]
    if found:
        pytest.fail(f"{len(found)} emitted objects break a spec:\n" + "\n".join(found[:10]))


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


def _declared(case: OutputItemCase, calc: RunningMcpServer) -> dict[str, Any] | None:
    """The tool whose item ``case`` is (None: the item belongs to no declarable tool)."""
    if case.item_type.startswith("mcp_"):
        return {
            "type": "mcp",
            "server_label": "calc",
            "server_url": calc.url,
            "require_approval": "never",
        }
    if case.item_type.startswith("function_call"):
        return {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
    if case.item_type.startswith("custom_tool_call"):
        return {"type": "custom", "name": "patcher"}
    kind = ITEM_KINDS.get(case.item_type)
    return smallest_tool(kind.tool_types[0]) if kind is not None else None


CASE_PARAMS = [
    pytest.param(case, declared, id=f"{case.id}-{'declared' if declared else 'undeclared'}")
    for case in CASES
    for declared in (False, True)
]


def _request(case: OutputItemCase, declared: bool, calc: RunningMcpServer) -> dict[str, Any]:
    tool = _declared(case, calc) if declared else None
    if declared and tool is None:
        pytest.skip(f"no tool makes {case.item_type} items")
    body: dict[str, Any] = {"model": MODELS["responses"], "input": "go"}
    if tool is not None:
        body["tools"] = [tool]
    return body


def _judge(
    case: OutputItemCase, response: dict[str, Any], upstream: ScriptedUpstream, calc: Any
) -> None:
    assert len(upstream.model_requests()) == 1, response["output"]
    assert calc.log.calls == []  # nothing relayed ever runs on the gateway
    assert response["status"] in ("completed", "incomplete"), response.get("error")
    output = response["output"]
    assert output[-1]["type"] == "message" and output[-1]["status"] == "completed"
    if case.item_type not in PARSED:
        [relayed] = [i for i in output if i.get("id") == case.item["id"]]
        assert relayed["type"] == case.item_type
        assert relayed.get("status") == case.status  # as it came, unfinished or not


@pytest.fixture
def http(
    stack: Stack, upstream: ScriptedUpstream, calc: RunningMcpServer
) -> Iterator[httpx.Client]:
    calc.log.clear()
    with httpx.Client(base_url=stack.base_url, timeout=30) as client:
        yield client


def _body_of_stream(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return check_stream(parse_sse(answer.content))


def _wait(http: httpx.Client, response_id: str) -> dict[str, Any]:
    pause = threading.Event()
    for _ in range(500):
        body: dict[str, Any] = http.get(f"/responses/{response_id}").json()
        if body["status"] not in ("queued", "in_progress"):
            return body
        pause.wait(0.02)
    raise AssertionError(f"{response_id} never ended")


@pytest.mark.parametrize(("case", "declared"), CASE_PARAMS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_http_foreground_one_upstream_call_whatever_the_item(
    http: httpx.Client,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    case: OutputItemCase,
    declared: bool,
    stream: bool,
) -> None:
    upstream.push(relayed_turn(case.item))
    body = {**_request(case, declared, calc), "stream": stream}

    answer = http.post("/responses", json=body)

    response = _body_of_stream(answer) if stream else answer.json()
    _judge(case, response, upstream, calc)


@pytest.mark.parametrize(("case", "declared"), CASE_PARAMS)
@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_http_background_one_upstream_call_whatever_the_item(
    http: httpx.Client,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    case: OutputItemCase,
    declared: bool,
    stream: bool,
) -> None:
    upstream.push(relayed_turn(case.item))
    body = {**_request(case, declared, calc), "stream": stream, "background": True}

    answer = http.post("/responses", json=body)

    if stream:
        response = _body_of_stream(answer)
    else:
        assert answer.json()["status"] == "queued", answer.text
        response = _wait(http, answer.json()["id"])
    assert _wait(http, response["id"]) == response  # what is stored is what the client saw
    _judge(case, response, upstream, calc)


@pytest.mark.parametrize(("case", "declared"), CASE_PARAMS)
def test_websocket_one_upstream_call_whatever_the_item(
    stack: Stack,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    case: OutputItemCase,
    declared: bool,
) -> None:
    calc.log.clear()
    upstream.push(relayed_turn(case.item))
    body = _request(case, declared, calc)
    client = openai.OpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)

    with client.responses.connect() as connection:
        connection.send({"type": "response.create", **body})
        events: list[dict[str, Any]] = []
        while not events or events[-1]["type"] not in (*TERMINAL, "error"):
            events.append(json.loads(connection.recv_bytes()))

    response = check_socket_stream(events, None)
    _judge(case, response, upstream, calc)
