"""Gateway-executed MCP tools end to end: real MCP servers on loopback (built with the `mcp` SDK),
the scripted model upstream, the official SDK as the client, over every upstream wire format."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.bedrock import as_chat, signature_of
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import RecordedRequest, ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import MODELS, Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


@pytest.fixture(scope="module")
def calc_sse() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc", "sse") as server:
        yield server


def _tool(server: RunningMcpServer, **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": server.url,
        "require_approval": "never",
        **extra,
    }


def _call(tool: str, arguments: str, call_id: str = "call_1") -> ToolCall:
    return ToolCall(f"calc__{tool}", arguments, call_id)


def _model_inputs(upstream: ScriptedUpstream) -> list[Any]:
    """What each model call was shown: chat messages, Responses input, or the harmony prompt."""
    return [
        r.prompt if r.prompt is not None else r.json.get("messages") or r.json.get("input")
        for r in upstream.model_requests()
    ]


def _offered(request: RecordedRequest) -> list[str]:
    """The names of the tools a model call offered."""
    if request.prompt is not None:  # harmony: declared in the developer message
        return re.findall(r"^type (\w+) = ", request.prompt, re.MULTILINE)
    body = as_chat(request)  # Bedrock's Converse: as chat
    return [t.get("name") or t["function"]["name"] for t in body.get("tools") or []]


def test_single_mcp_call_runs_and_the_model_answers(
    client: openai.OpenAI,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    wire: str,
    model: str,
) -> None:
    upstream.push(Turn(tool_calls=[_call("add", '{"a":2,"b":3}')]), Turn(text="It is 5."))
    response = client.responses.create(model=model, input="2+3?", tools=[_tool(calc)])  # type: ignore[list-item]

    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    listing, call, _ = response.output
    assert listing.server_label == "calc"  # type: ignore[union-attr]
    assert [t.name for t in listing.tools] == ["add", "divide", "repeat"]  # type: ignore[union-attr]
    assert (call.name, call.arguments, call.output, call.error) == (  # type: ignore[union-attr]
        "add",
        '{"a":2,"b":3}',
        "5.0",
        None,
    )
    assert call.approval_request_id is None  # type: ignore[union-attr]
    assert call.id.startswith("mcp_")
    assert response.output_text == "It is 5."
    echoed = response.tools[0].model_dump()
    assert echoed["server_url"] == calc.base_url  # no path, query or userinfo
    assert echoed["headers"] is None and echoed["authorization"] is None

    first, second = upstream.model_requests()
    assert _offered(first) == ["calc__add", "calc__divide", "calc__repeat"]
    if wire == "harmony":
        assert second.prompt is not None
        assert second.prompt.endswith(
            "<|start|>user<|message|>2+3?<|end|>"
            "<|start|>assistant to=functions.calc__add<|channel|>commentary <|constrain|>json"
            '<|message|>{"a":2,"b":3}<|call|>'
            "<|start|>functions.calc__add to=assistant<|channel|>commentary<|message|>5.0<|end|>"
            "<|start|>assistant"
        )
    else:
        last = as_chat(second).get("messages") or second.json.get("input")
        assert "5.0" in json.dumps(last[-1])


def test_streamed_mcp_flow_passes_the_contract_and_the_strict_helper(
    client: openai.OpenAI,
    http: httpx.Client,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    model: str,
) -> None:
    upstream.push(Turn(tool_calls=[_call("add", '{"a":1,"b":1}')]), Turn(text="2"))
    body = {"model": model, "input": "1+1", "tools": [_tool(calc)], "stream": True}
    events = parse_sse(http.post("/responses", json=body).content)
    final = check_stream(events)
    kinds = [e["type"] for e in events]
    start = kinds.index("response.output_item.added")
    assert kinds[start : start + 4] == [
        "response.output_item.added",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.output_item.done",
    ]
    call_at = kinds.index("response.mcp_call.in_progress")
    assert kinds[call_at - 1 : call_at + 5] == [
        "response.output_item.added",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
        "response.output_item.done",
    ]
    assert final["output"][1]["output"] == "2.0"

    upstream.push(Turn(tool_calls=[_call("add", '{"a":1,"b":1}')]), Turn(text="2"))
    with client.responses.stream(model=model, input="1+1", tools=[_tool(calc)]) as stream:  # type: ignore[list-item]
        done = stream.get_final_response()
    assert [i.type for i in done.output] == ["mcp_list_tools", "mcp_call", "message"]


def test_parallel_calls_and_a_tool_error_go_back_to_the_model(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    upstream.push(
        Turn(
            tool_calls=[_call("add", '{"a":1,"b":2}', "c1"), _call("divide", '{"a":1,"b":0}', "c2")]
        ),
        Turn(text="done"),
    )
    response = client.responses.create(model=model, input="go", tools=[_tool(calc)])  # type: ignore[list-item]
    calls = [i for i in response.output if i.type == "mcp_call"]
    assert [(c.name, c.status) for c in calls] == [("add", "completed"), ("divide", "failed")]  # type: ignore[union-attr]
    assert calls[1].error is not None  # type: ignore[union-attr]
    sent = json.dumps(_model_inputs(upstream)[-1])
    assert "zero" in sent.lower()


def test_multi_step_loop_then_client_function_call(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    upstream.push(
        Turn(tool_calls=[_call("add", '{"a":1,"b":2}', "c1")]),
        Turn(tool_calls=[_call("add", '{"a":3,"b":3}', "c2"), ToolCall("get_weather", "{}", "c3")]),
    )
    response = client.responses.create(
        model=model,
        input="go",
        tools=[_tool(calc), weather],  # type: ignore[list-item]
    )
    assert [i.type for i in response.output] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_call",
        "function_call",
    ]
    assert [i.output for i in response.output if i.type == "mcp_call"] == ["3.0", "6.0"]  # type: ignore[union-attr]
    assert len(upstream.model_requests()) == 2


def test_chained_turn_reuses_the_listing(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    upstream.push(Turn(text="hi"), Turn(tool_calls=[_call("add", '{"a":1,"b":1}')]), Turn(text="2"))
    first = client.responses.create(model=model, input="hi", tools=[_tool(calc)])  # type: ignore[list-item]
    assert [i.type for i in first.output] == ["mcp_list_tools", "message"]
    second = client.responses.create(
        model=model,
        input="1+1",
        tools=[_tool(calc)],
        previous_response_id=first.id,  # type: ignore[list-item]
    )
    assert [i.type for i in second.output] == ["mcp_call", "message"]


def test_allowed_tools_limits_what_the_model_sees(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    upstream.push(Turn(text="ok"))
    response = client.responses.create(
        model=model,
        input="hi",
        tools=[_tool(calc, allowed_tools=["add"])],  # type: ignore[list-item]
    )
    assert [t.name for t in response.output[0].tools] == ["add"]  # type: ignore[union-attr]
    assert _offered(upstream.model_requests()[0]) == ["calc__add"]


def test_sse_transport_server_works(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc_sse: RunningMcpServer
) -> None:
    upstream.push(Turn(tool_calls=[_call("add", '{"a":4,"b":4}')]), Turn(text="8"))
    response = client.responses.create(
        model="scripted-chat",
        input="4+4",
        tools=[_tool(calc_sse)],  # type: ignore[list-item]
    )
    assert [i.output for i in response.output if i.type == "mcp_call"] == ["8.0"]  # type: ignore[union-attr]


# -- approvals ------------------------------------------------------------------------------


def _approval_turns(upstream: ScriptedUpstream) -> None:
    upstream.push(Turn(tool_calls=[_call("add", '{"a":5,"b":5}')]), Turn(text="It is 10."))


def test_approval_required_by_default_then_approved_via_previous_response_id(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    tool = {k: v for k, v in _tool(calc).items() if k != "require_approval"}
    _approval_turns(upstream)
    first = client.responses.create(model=model, input="5+5", tools=[tool])  # type: ignore[list-item]
    assert first.status == "completed"
    assert [i.type for i in first.output] == ["mcp_list_tools", "mcp_approval_request"]
    request = first.output[1]
    assert request.id.startswith("mcpr_") and request.name == "add"  # type: ignore[union-attr]

    approval = {"type": "mcp_approval_response", "approval_request_id": request.id, "approve": True}
    second = client.responses.create(
        model=model,
        input=[approval],
        tools=[tool],
        previous_response_id=first.id,  # type: ignore[list-item]
    )
    assert [i.type for i in second.output] == ["mcp_call", "message"]
    call = second.output[0]
    assert call.approval_request_id == request.id and call.output == "10.0"  # type: ignore[union-attr]
    assert len(upstream.model_requests()) == 2  # the approved call ran without asking the model

    again = (
        client.responses.create(
            model=model,
            input=[approval],
            tools=[tool],
            previous_response_id=second.id,  # type: ignore[list-item]
        )
        if upstream.push(Turn(text="still 10")) is None
        else None
    )
    assert again is not None
    assert [i.type for i in again.output] == ["message"]  # a duplicate approval acts once


def test_approval_via_replayed_history_and_denial(
    client: openai.OpenAI,
    http: httpx.Client,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    model: str,
) -> None:
    tool = _tool(calc, require_approval="always")
    _approval_turns(upstream)
    first = http.post(
        "/responses", json={"model": model, "input": "5+5", "tools": [tool], "store": False}
    ).json()
    history = [{"role": "user", "content": "5+5"}, *first["output"]]
    request_id = first["output"][-1]["id"]

    upstream.push(Turn(text="Okay, I won't."))
    denied = http.post(
        "/responses",
        json={
            "model": model,
            "tools": [tool],
            "input": [
                *history,
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": request_id,
                    "approve": False,
                    "reason": "not now",
                },
            ],
        },
    ).json()
    assert [i["type"] for i in denied["output"]] == ["message"]
    sent = json.dumps(_model_inputs(upstream)[-1])
    assert "denied" in sent and "not now" in sent

    forged = http.post(
        "/responses",
        json={
            "model": model,
            "tools": [tool],
            "input": [
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": "mcpr_forged",
                    "approve": True,
                }
            ],
        },
    )
    assert forged.status_code == 400
    assert forged.json()["error"]["param"] == "input[0].approval_request_id"


def test_per_tool_approval_filter(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    tool = _tool(calc, require_approval={"never": {"tool_names": ["add"]}})
    upstream.push(
        Turn(
            tool_calls=[_call("add", '{"a":1,"b":1}', "c1"), _call("divide", '{"a":4,"b":2}', "c2")]
        ),
    )
    response = client.responses.create(model=model, input="go", tools=[tool])  # type: ignore[list-item]
    assert [i.type for i in response.output] == [
        "mcp_list_tools",
        "mcp_call",
        "mcp_approval_request",
    ]
    assert response.output[1].output == "2.0"  # type: ignore[union-attr]


# -- limits and failures --------------------------------------------------------------------


def test_max_tool_calls_cuts_off_then_one_last_call_without_tools(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    upstream.push(
        Turn(tool_calls=[_call("add", '{"a":1,"b":1}', "c1"), _call("add", '{"a":2,"b":2}', "c2")]),
        Turn(text="partial answer"),
    )
    response = client.responses.create(
        model=model,
        input="go",
        tools=[_tool(calc)],
        max_tool_calls=1,  # type: ignore[list-item]
    )
    assert response.status == "completed" and response.incomplete_details is None
    calls = [i for i in response.output if i.type == "mcp_call"]
    assert [c.status for c in calls] == ["completed", "incomplete"]  # type: ignore[union-attr]
    last = upstream.model_requests()[-1]
    assert _offered(last) == []
    assert last.prompt is None or "# Tools" not in last.prompt


def test_unreachable_server_listing_is_424(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    tool = {
        "type": "mcp",
        "server_label": "calc",
        "server_url": "http://127.0.0.1:9/mcp",
        "require_approval": "never",
    }
    answer = http.post("/responses", json={"model": model, "input": "hi", "tools": [tool]})
    assert answer.status_code == 424
    assert answer.json()["error"]["message"].startswith(
        "Error retrieving tool list from MCP server: 'calc'."
    )
    assert upstream.model_requests() == []

    events = parse_sse(
        http.post(
            "/responses", json={"model": model, "input": "hi", "tools": [tool], "stream": True}
        ).content
    )
    kinds = [e["type"] for e in events]
    assert "response.mcp_list_tools.failed" in kinds and kinds[-1] == "response.failed"
    check_stream(events)


def test_blocked_server_url_is_refused_before_dialling(
    http: httpx.Client, upstream: ScriptedUpstream, model: str
) -> None:
    tool = {"type": "mcp", "server_label": "meta", "server_url": "http://169.254.169.254/mcp"}
    answer = http.post("/responses", json={"model": model, "input": "hi", "tools": [tool]})
    assert answer.status_code == 424
    assert answer.json()["error"]["code"] == "url_not_allowed"


def test_mcp_secrets_are_sent_but_never_echoed_or_stored(
    stack: Stack,
    http: httpx.Client,
    upstream: ScriptedUpstream,
    calc: RunningMcpServer,
    model: str,
) -> None:
    secrets = {"authorization": "tok-secret-4242", "headers": {"X-Custom": "hdr-secret-4242"}}
    with start_mcp_server("echo_auth") as server:
        tool = {
            "type": "mcp",
            "server_label": "calc",
            "server_url": server.url + "?q=q-secret",
            "require_approval": "never",
            **secrets,
        }
        upstream.push(Turn(tool_calls=[_call("echo_headers", "{}")]), Turn(text="ok"))
        body = http.post(  # store: false, since this tool's output repeats the token
            "/responses", json={"model": model, "input": "hi", "tools": [tool], "store": False}
        ).json()
    call = next(i for i in body["output"] if i["type"] == "mcp_call")
    assert "Bearer tok-secret-4242" in call["output"] and "hdr-secret-4242" in call["output"]
    echoed = json.dumps(body["tools"])
    for secret in ("tok-secret-4242", "hdr-secret-4242", "q-secret", "/mcp"):
        assert secret not in echoed

    stored_tool = {**_tool(calc), **secrets}
    upstream.push(Turn(tool_calls=[_call("add", '{"a":1,"b":1}')]), Turn(text="2"))
    assert (
        http.post(
            "/responses", json={"model": model, "input": "1+1", "tools": [stored_tool]}
        ).status_code
        == 200
    )
    dump = stack.scan_table()
    assert '"calc__add"' in dump or '"add"' in dump  # the scan does see stored bodies
    assert "tok-secret-4242" not in dump and "hdr-secret-4242" not in dump


def test_hanging_tool_times_out_into_an_error_the_model_sees(
    stack: Stack, upstream: ScriptedUpstream, model: str
) -> None:
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.mcp.client import McpClient, McpLimits
    from responses_gateway.mcp.security import McpPolicy
    from responses_gateway.testing.server import run_in_thread

    config = parse_config(
        {"providers": [{"base_url": stack.upstream_server.url + "/v1", "api": "chat"}]}
    )
    app = create_app(
        config,
        stack.open_store(),
        mcp_policy=McpPolicy(allow_http=True, allow_loopback=True),
    )
    app.state.gateway._mcp_client = McpClient(  # a short call budget, to keep the test quick
        McpPolicy(allow_http=True, allow_loopback=True), limits=McpLimits(call_timeout=1.0)
    )
    with start_mcp_server("hanging") as mcp, run_in_thread(app) as server:
        tool = {
            "type": "mcp",
            "server_label": "slow",
            "server_url": mcp.url,
            "require_approval": "never",
        }
        upstream.push(Turn(tool_calls=[ToolCall("slow__hang", "{}", "c1")]), Turn(text="gave up"))
        body = httpx.post(
            f"{server.url}/v1/responses",
            timeout=30,
            json={"model": "m", "input": "go", "tools": [tool]},
        ).json()
    call = next(i for i in body["output"] if i["type"] == "mcp_call")
    assert call["status"] == "failed"
    assert call["error"]["type"] in {"mcp_protocol_error", "http_error"}
    assert body["output"][-1]["content"][0]["text"] == "gave up"


async def test_openai_agents_hosted_mcp_tool_with_and_without_approval(
    stack: Stack, upstream: ScriptedUpstream, calc: RunningMcpServer, model: str
) -> None:
    from agents import Agent, HostedMCPTool, OpenAIResponsesModel, RunConfig, Runner
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    run = RunConfig(tracing_disabled=True)
    free = HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "calc",  # type: ignore[typeddict-item]
            "server_url": calc.url,
            "require_approval": "never",
        }
    )
    agent = Agent(
        name="calc", model=OpenAIResponsesModel(model=model, openai_client=client), tools=[free]
    )
    upstream.push(Turn(tool_calls=[_call("add", '{"a":2,"b":3}')]), Turn(text="It is 5."))
    result = await Runner.run(agent, "2+3?", run_config=run)
    assert result.final_output == "It is 5."

    asked: list[str] = []

    def approve(request: Any) -> Any:
        asked.append(request.data.name)
        return {"approve": True}

    gated = HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "calc",
            "server_url": calc.url,  # type: ignore[typeddict-item]
            "require_approval": "always",
        },
        on_approval_request=approve,
    )
    agent = Agent(
        name="calc", model=OpenAIResponsesModel(model=model, openai_client=client), tools=[gated]
    )
    upstream.push(Turn(tool_calls=[_call("add", '{"a":4,"b":4}')]), Turn(text="It is 8."))
    result = await Runner.run(agent, "4+4?", run_config=run)
    assert asked == ["add"]
    assert result.final_output == "It is 8."


@pytest.mark.parametrize("wire", ["responses", "bedrock"])
def test_the_upstreams_own_reasoning_blob_goes_back_to_it_between_gateway_calls(
    client: openai.OpenAI, upstream: ScriptedUpstream, calc: RunningMcpServer, wire: str
) -> None:
    """Within one response the model's reasoning before a gateway-run call goes back to it with
    its own blob (a Responses upstream's encrypted_content, Bedrock's signature), not the
    gateway's seal, which only the client sees."""
    blob = "gAAAA-upstream-blob" if wire == "responses" else None
    upstream.push(
        Turn(
            reasoning="Add them.",
            encrypted_content=blob,
            tool_calls=[_call("add", '{"a":2,"b":3}', "c1")],
        ),
        Turn(text="5"),
    )
    response = client.responses.create(
        model=MODELS[wire],
        input="2+3?",
        tools=[_tool(calc)],  # type: ignore[list-item]
        include=["reasoning.encrypted_content"],
    )
    assert response.output_text == "5"
    sealed = next(i for i in response.output if i.type == "reasoning").encrypted_content
    assert sealed is not None and sealed.startswith("rgw1.")
    second = upstream.model_requests()[-1].json
    if wire == "responses":
        sent = [i for i in second["input"] if i.get("type") == "reasoning"]
        assert [i["encrypted_content"] for i in sent] == [blob]
    else:
        blocks = [b for m in second["messages"] for b in m["content"] if "reasoningContent" in b]
        thought = {"text": "Add them.", "signature": signature_of("Add them.")}
        assert blocks == [{"reasoningContent": {"reasoningText": thought}}]
