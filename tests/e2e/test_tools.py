"""Every tool type over every upstream wire, end to end with the official SDK.

Chat and harmony upstreams see lowered functions (the tool-kind table); their calls come back to
the client as the kinds' own items with the kinds' events, and replayed history maps back to the
same exposed names. A Responses upstream's items and events are relayed as they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.testing import hosted
from responses_gateway.testing.mcp_servers import start_mcp_server
from responses_gateway.testing.script import RelayedItem, ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import MODELS, TABLE, Stack, wire_provider

NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents.",
    "tools": [
        {
            "type": "function",
            "name": "close_agent",
            "description": "Close an agent.",
            "parameters": {
                "type": "object",
                "properties": {"target": {"type": "string"}},
                "required": ["target"],
            },
            "strict": False,
        }
    ],
}
APPLY_PATCH_CUSTOM = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": 'start: "*** Begin Patch"'},
}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"


def _model_payload(upstream: ScriptedUpstream, index: int = -1) -> dict[str, Any]:
    return upstream.model_requests()[index].json


def _stream(http: httpx.Client, body: dict[str, Any]) -> tuple[httpx.Response, dict[str, Any]]:
    answer = http.post("/responses", json={**body, "stream": True})
    assert answer.status_code == 200, answer.text
    events = parse_sse(answer.content)
    final = check_stream(events)
    return answer, {"final": final, "types": [e["type"] for e in events], "events": events}


def _offered(payload: dict[str, Any]) -> list[str]:
    """Tool names a chat upstream was offered."""
    return [t["function"]["name"] for t in payload.get("tools") or []]


def _tool_messages(payload: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in payload["messages"] if m["role"] in ("assistant", "tool")]


LOWERED = ["chat", "harmony"]
FIXTURES = Path(__file__).parent.parent / "fixtures" / "codex"
"""Captured Codex CLI 0.169 requests (copied from the shared reference)."""


# --------------------------------------------------------------------------- namespace


def _call(wire: str, exposed: str, arguments: dict[str, Any], native: Any) -> Turn:
    """The model calling ``exposed`` (lowered wires) or producing ``native`` (Responses)."""
    if wire == "responses":
        if isinstance(native, ToolCall):
            return Turn(tool_calls=[native])
        return Turn(relayed_items=[native])
    return Turn(tool_calls=[ToolCall(exposed, json.dumps(arguments), call_id="call_1")])


def test_namespaced_call_returns_inner_name_and_namespace_and_replays_under_one_name(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    native = ToolCall("close_agent", '{"target": "a1"}', "call_1", namespace="multi_agent_v1")
    upstream.push(_call(wire, "multi_agent_v1__close_agent", {"target": "a1"}, native))

    with client.responses.stream(model=model, input="close it", tools=[NAMESPACE]) as stream:
        final = stream.get_final_response()

    (call,) = final.output
    assert call.type == "function_call"
    assert (call.name, call.namespace, call.arguments) == (
        "close_agent",
        "multi_agent_v1",
        '{"target": "a1"}',
    )
    if wire == "chat":
        assert _offered(_model_payload(upstream)) == ["multi_agent_v1__close_agent"]

    upstream.push(Turn(text="closed"))
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "ok"}
    second = client.responses.create(
        model=model, previous_response_id=final.id, input=[result], tools=[NAMESPACE]
    )
    assert second.output_text == "closed"
    payload = _model_payload(upstream)
    if wire == "chat":
        calls, output = _tool_messages(payload)
        assert calls["tool_calls"] == [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "multi_agent_v1__close_agent",
                    "arguments": '{"target": "a1"}',
                },
            }
        ]
        assert output == {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
    elif wire == "responses":
        replayed = [i for i in payload["input"] if i["type"] == "function_call"]
        assert replayed[0]["namespace"] == "multi_agent_v1"
        assert replayed[0]["name"] == "close_agent"


# --------------------------------------------------------------------------- custom


def test_custom_tool_call_streams_its_input_events_and_replays(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    native = hosted.custom_tool_call("ctc_up", "call_1", "apply_patch", [PATCH[:10], PATCH[10:]])
    upstream.push(_call(wire, "apply_patch", {"input": PATCH}, native))

    _, streamed = _stream(http, {"model": model, "input": "patch", "tools": [APPLY_PATCH_CUSTOM]})

    (call,) = streamed["final"]["output"]
    assert {k: call[k] for k in ("type", "name", "input", "status")} == {
        "type": "custom_tool_call",
        "name": "apply_patch",
        "input": PATCH,
        "status": "completed",
    }
    assert "response.custom_tool_call_input.done" in streamed["types"]
    assert "response.function_call_arguments.delta" not in streamed["types"]
    if wire in LOWERED:
        assert streamed["types"][2:7] == [
            "response.output_item.added",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed",
        ]
    if wire == "chat":
        (offered,) = _model_payload(upstream)["tools"]
        assert offered["function"]["name"] == "apply_patch"
        assert offered["function"]["parameters"]["required"] == ["input"]
        assert 'start: "*** Begin Patch"' in offered["function"]["description"]

    # The SDK's strict helper accepts the same stream.
    upstream.push(_call(wire, "apply_patch", {"input": PATCH}, native))
    with client.responses.stream(model=model, input="patch", tools=[APPLY_PATCH_CUSTOM]) as s:
        final = s.get_final_response()
    assert final.output[0].type == "custom_tool_call"

    upstream.push(Turn(text="patched"))
    answer = {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Done."}
    second = client.responses.create(model=model, input=[call, answer], tools=[APPLY_PATCH_CUSTOM])
    assert second.output_text == "patched"
    if wire == "chat":
        calls, output = _tool_messages(_model_payload(upstream))
        assert calls["tool_calls"] == [
            {
                "id": call["call_id"],
                "type": "function",
                "function": {"name": "apply_patch", "arguments": json.dumps({"input": PATCH})},
            }
        ]
        assert output == {"role": "tool", "tool_call_id": call["call_id"], "content": "Done."}
    elif wire == "responses":
        sent = _model_payload(upstream)["input"]
        assert [i["type"] for i in sent] == ["custom_tool_call", "custom_tool_call_output"]


# --------------------------------------------------------------------------- built-in tools

BUILTINS: list[tuple[dict[str, Any], str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    (
        {"type": "shell"},
        "shell",
        {"commands": ["ls -la"], "timeout_ms": 1000},
        {
            "type": "shell_call",
            "action": {"commands": ["ls -la"], "timeout_ms": 1000, "max_output_length": None},
        },
        {
            "type": "shell_call_output",
            "output": [
                {"stdout": "a.txt", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
            ],
        },
    ),
    (
        {"type": "local_shell"},
        "local_shell",
        {"command": ["ls"], "working_directory": "/tmp"},
        {
            "type": "local_shell_call",
            "action": {
                "type": "exec",
                "command": ["ls"],
                "env": {},
                "timeout_ms": None,
                "user": None,
                "working_directory": "/tmp",
            },
        },
        {"type": "local_shell_call_output", "output": "a.txt"},
    ),
    (
        {"type": "apply_patch"},
        "apply_patch",
        {"type": "create_file", "path": "a.txt", "diff": "+hi"},
        {
            "type": "apply_patch_call",
            "operation": {"type": "create_file", "path": "a.txt", "diff": "+hi"},
        },
        {"type": "apply_patch_call_output", "status": "completed", "output": "created"},
    ),
    (
        {
            "type": "computer_use_preview",
            "display_width": 800,
            "display_height": 600,
            "environment": "browser",
        },
        "computer",
        {"action": {"type": "click", "x": 1, "y": 2, "button": "left"}},
        {
            "type": "computer_call",
            "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
            "pending_safety_checks": [],
        },
        {
            "type": "computer_call_output",
            "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="},
        },
    ),
]


REPLAYED_ARGUMENTS = {
    "shell": {"commands": ["ls -la"], "timeout_ms": 1000},
    "local_shell": {"command": ["ls"], "env": {}, "working_directory": "/tmp"},
    "apply_patch": {"type": "create_file", "path": "a.txt", "diff": "+hi"},
    "computer": {"action": {"type": "click", "x": 1, "y": 2, "button": "left"}},
}
"""What a replayed call's function arguments are (the item's fields, nulls left out)."""


@pytest.mark.parametrize("wire", LOWERED)
@pytest.mark.parametrize(("tool", "exposed", "arguments", "fields", "reply"), BUILTINS)
def test_builtin_tool_call_comes_back_as_its_item_and_its_output_replays(
    client: openai.OpenAI,
    http: httpx.Client,
    upstream: ScriptedUpstream,
    model: str,
    wire: str,
    tool: dict[str, Any],
    exposed: str,
    arguments: dict[str, Any],
    fields: dict[str, Any],
    reply: dict[str, Any],
) -> None:
    upstream.push(_call(wire, exposed, arguments, None))

    _, streamed = _stream(http, {"model": model, "input": "go", "tools": [tool]})

    (call,) = streamed["final"]["output"]
    assert {k: call[k] for k in fields} == fields
    assert call["status"] == "completed"
    assert call["call_id"] == "call_1" or wire == "harmony"  # harmony calls carry no id
    if fields["type"] == "shell_call":
        assert "response.shell_call_command.done" in streamed["types"]
    if wire == "chat":
        assert _offered(_model_payload(upstream)) == [exposed]

    upstream.push(_call(wire, exposed, arguments, None))
    with client.responses.stream(model=model, input="go", tools=[tool]) as s:
        assert s.get_final_response().output[0].type == fields["type"]

    upstream.push(Turn(text="done"))
    second = client.responses.create(
        model=model,
        previous_response_id=streamed["final"]["id"],
        input=[{**reply, "call_id": call["call_id"]}],
        tools=[tool],
    )
    assert second.output_text == "done"
    if wire == "chat":
        messages = _tool_messages(_model_payload(upstream))
        assert messages[0]["tool_calls"][0]["function"]["name"] == exposed
        replayed = json.loads(messages[0]["tool_calls"][0]["function"]["arguments"])
        assert replayed == REPLAYED_ARGUMENTS[exposed]
        assert messages[1]["role"] == "tool" and messages[1]["tool_call_id"] == "call_1"
        assert messages[1]["content"]


# --------------------------------------------------------------------------- hosted tools


def test_hosted_web_search_is_omitted_visibly_on_function_wires(
    http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(Turn(text="no search here"))
    body = {"model": model, "input": "news?", "tools": [{"type": "web_search"}]}

    answer = http.post("/responses", json=body)

    assert answer.status_code == 200, answer.text
    if wire == "responses":
        assert "x-gateway-omitted-tools" not in answer.headers
        assert _model_payload(upstream)["tools"] == [{"type": "web_search"}]
    else:
        assert answer.headers["x-gateway-omitted-tools"] == "web_search"
        assert "tools" not in _model_payload(upstream) or wire == "harmony"
    assert answer.json()["tools"] == [{"type": "web_search"}]  # echoed as sent


def test_hosted_tool_rejected_under_the_reject_policy(
    http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    tool = {"type": "file_search", "vector_store_ids": ["vs_1"]}
    body = {"model": "scripted-chat-strict", "input": "x", "tools": [tool]}

    answer = http.post("/responses", json=body)

    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "tools[0].type"
    assert "file_search" in answer.json()["error"]["message"]
    assert upstream.model_requests() == []


EVERY_RESULT = [
    "web_search_call.action.sources",
    "file_search_call.results",
    "code_interpreter_call.outputs",
]
RELAYED: list[RelayedItem] = [
    hosted.web_search_call("ws_1", "weather paris", ["https://example.com"]),
    hosted.image_generation_call("ig_1", ["AAA", "BBB"], "CCC"),
    hosted.code_interpreter_call("ci_1", "print(1)", "1"),
    hosted.file_search_call("fs_1", ["q"]),
    hosted.tool_search_call("tsc_1", "call_ts", {"query": "agents"}, execution="server"),
    hosted.tool_search_output("tso_1", "call_ts", [NAMESPACE]),
    hosted.shell_call("sh_1", "call_sh", ["ls", "pwd"]),
]


@pytest.mark.parametrize("relayed", RELAYED, ids=lambda r: str(r.done["type"]))
def test_responses_upstream_items_and_events_are_relayed_exactly(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, relayed: RelayedItem
) -> None:
    upstream.push(Turn(relayed_items=[relayed], text="here"))
    body = {"model": "scripted-responses", "input": "go", "include": EVERY_RESULT}

    _, streamed = _stream(http, body)

    assert streamed["final"]["output"][0] == relayed.done
    own = [e for e in streamed["events"] if e["type"] in {x["type"] for x in relayed.events}]
    assert [e["type"] for e in own] == [e["type"] for e in relayed.events]
    assert all(e["output_index"] == 0 for e in own)

    upstream.push(Turn(relayed_items=[relayed], text="here"))
    with client.responses.stream(model="scripted-responses", input="go") as stream:
        final = stream.get_final_response()
    assert final.output[0].type == relayed.done["type"]


@pytest.mark.parametrize("wire", LOWERED)
def test_apply_patch_call_cut_off_by_the_model_passes_the_strict_stream_helper(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    cut = Turn(
        tool_calls=[ToolCall("apply_patch", '{"type": "create_file", "path": "a.txt"', "call_1")],
        finish="length",
    )
    tools: Any = [{"type": "apply_patch"}]
    upstream.push(cut)

    _, streamed = _stream(http, {"model": model, "input": "patch", "tools": tools})

    final = streamed["final"]
    assert (final["status"], final["incomplete_details"]) == (
        "incomplete",
        {"reason": "max_output_tokens"},
    )
    assert [(i["type"], i["status"]) for i in final["output"]] == [
        ("apply_patch_call", "in_progress")
    ]

    upstream.push(cut)
    with client.responses.stream(model=model, input="patch", tools=tools) as stream:
        events = list(stream)  # parsed strictly, each event as its SDK type
    assert events[-1].type == "response.incomplete"
    output = events[-1].response.output
    assert [(i.type, i.status) for i in output] == [("apply_patch_call", "in_progress")]


# --------------------------------------------------------------------------- tool_search


def _deferred_namespace() -> dict[str, Any]:
    inner = {**NAMESPACE["tools"][0], "defer_loading": True}
    return {**NAMESPACE, "tools": [inner]}


@pytest.mark.parametrize("wire", LOWERED)
def test_client_tool_search_hides_deferred_tools_until_loaded(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    tools = [{"type": "tool_search", "execution": "client"}, _deferred_namespace()]
    upstream.push(_call(wire, "tool_search", {"query": "agent"}, None))

    first = client.responses.create(model=model, input="find agent tools", tools=tools)

    (search,) = first.output
    assert search.type == "tool_search_call"
    assert (search.arguments, search.execution) == ({"query": "agent"}, "client")
    assert search.call_id == "call_1" or wire == "harmony"
    if wire == "chat":
        assert _offered(_model_payload(upstream)) == ["tool_search"]

    loaded = {
        "type": "tool_search_output",
        "call_id": search.call_id,
        "execution": "client",
        "status": "completed",
        "tools": [NAMESPACE],
    }
    upstream.push(_call(wire, "multi_agent_v1__close_agent", {"target": "x"}, None))
    second = client.responses.create(
        model=model, previous_response_id=first.id, input=[loaded], tools=tools
    )

    (call,) = second.output
    assert (call.type, call.name, call.namespace) == (
        "function_call",
        "close_agent",
        "multi_agent_v1",
    )
    if wire == "chat":
        payload = _model_payload(upstream)
        assert _offered(payload) == ["tool_search", "multi_agent_v1__close_agent"]
        assert payload["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "Loaded tools: multi_agent_v1",
        }


# --------------------------------------------------------------------------- tool_choice


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ({"type": "custom", "name": "apply_patch"}, "apply_patch"),
        (
            {"type": "function", "name": "close_agent", "namespace": "multi_agent_v1"},
            "multi_agent_v1__close_agent",
        ),
        ({"type": "mcp", "server_label": "docs", "name": "search"}, "docs__search"),
    ],
)
def test_forced_tool_choice_maps_to_the_exposed_function_on_chat(
    client: openai.OpenAI, upstream: ScriptedUpstream, choice: dict[str, Any], sent: str
) -> None:
    upstream.push(Turn(text="ok"))

    client.responses.create(
        model="scripted-chat",
        input="x",
        tools=[APPLY_PATCH_CUSTOM, NAMESPACE],
        tool_choice=choice,  # type: ignore[arg-type]
    )

    assert _model_payload(upstream)["tool_choice"] == {
        "type": "function",
        "function": {"name": sent},
    }


# --------------------------------------------------------------------------- state round trips


def test_custom_tool_call_round_trips_through_a_conversation(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    conversation = client.conversations.create()
    upstream.push(_call("chat", "apply_patch", {"input": PATCH}, None))
    first = client.responses.create(
        model="scripted-chat",
        conversation=conversation.id,
        input="patch",
        tools=[APPLY_PATCH_CUSTOM],
    )
    call = first.output[0]
    assert call.type == "custom_tool_call"

    upstream.push(Turn(text="done"))
    answer = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "ok"}
    client.responses.create(
        model="scripted-chat",
        conversation=conversation.id,
        input=[answer],  # type: ignore[list-item]
        tools=[APPLY_PATCH_CUSTOM],
    )

    messages = _tool_messages(_model_payload(upstream))
    assert messages[0]["tool_calls"][0]["function"]["name"] == "apply_patch"
    assert messages[1] == {"role": "tool", "tool_call_id": call.call_id, "content": "ok"}
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.type for i in items][-2:] == ["custom_tool_call_output", "message"]
    assert "custom_tool_call" in [i.type for i in items]


# --------------------------------------------------------------------------- Codex requests


@pytest.fixture
def codex() -> Any:
    def load(name: str) -> dict[str, Any]:
        body: dict[str, Any] = json.loads((FIXTURES / name).read_text(encoding="utf-8"))
        return body

    return load


@pytest.mark.parametrize("family", ["a", "b", "c"])
def test_codex_first_requests_run_over_the_chat_wire(
    stack: Stack, http: httpx.Client, upstream: ScriptedUpstream, family: str, codex: Any
) -> None:
    body = {**codex(f"family-{family}-first-request.json"), "model": "scripted-chat"}
    upstream.push(Turn(text="hello"))

    answer, streamed = _stream(http, body)

    assert streamed["final"]["status"] == "completed"
    payload = _model_payload(upstream)
    names = _offered(payload)
    assert all(m["role"] != "additional_tools" for m in payload["messages"])
    if family == "a":
        assert answer.headers["x-gateway-omitted-tools"] == "web_search"
        assert "multi_agent_v1__close_agent" in names and "exec_command" in names
    if family == "b":
        assert answer.headers["x-gateway-omitted-tools"] == "web_search"
        assert "apply_patch" in names and "tool_search" in names
    if family == "c":
        assert "x-gateway-omitted-tools" not in answer.headers
        assert "functions__exec" in names and "collaboration__spawn_agent" in names
        assert not any("additional_tools" in json.dumps(m) for m in payload["messages"])


@pytest.mark.parametrize("wire", LOWERED)
def test_server_tool_search_runs_on_the_gateway_and_loads_the_matches(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    tools = [{"type": "tool_search"}, _deferred_namespace()]
    upstream.push(_call(wire, "tool_search", {"query": "close agent"}, None))
    upstream.push(_call(wire, "multi_agent_v1__close_agent", {"target": "x"}, None))

    _, streamed = _stream(http, {"model": model, "input": "close the agent", "tools": tools})

    search, found, call = streamed["final"]["output"]
    assert (search["type"], search["execution"], search["status"]) == (
        "tool_search_call",
        "server",
        "completed",
    )
    assert search["arguments"] == {"query": "close agent"}
    assert found == {
        "id": found["id"],
        "type": "tool_search_output",
        "call_id": search["call_id"],
        "execution": "server",
        "status": "completed",
        "tools": [{**NAMESPACE, "tools": NAMESPACE["tools"]}],
    }
    assert (call["name"], call["namespace"]) == ("close_agent", "multi_agent_v1")
    if wire == "chat":
        first, second = upstream.model_requests()[-2:]
        assert _offered(first.json) == ["tool_search"]
        assert _offered(second.json) == ["tool_search", "multi_agent_v1__close_agent"]

    upstream.push(_call(wire, "tool_search", {"query": "close agent"}, None))
    upstream.push(Turn(text="nothing to do"))
    with client.responses.stream(model=model, input="close", tools=tools) as stream:
        final = stream.get_final_response()
    assert [i.type for i in final.output] == ["tool_search_call", "tool_search_output", "message"]


# --------------------------------------------------------------------------- hosted backends


@pytest.fixture(scope="module")
def backed(stack: Stack) -> Iterator[RunningServer]:
    """A gateway whose operator gave ``web_search`` a backend: a loopback MCP search server."""
    with start_mcp_server("search") as search:
        config = parse_config(
            {
                "providers": [
                    wire_provider(wire, model, stack.upstream_server.url)
                    for wire, model in MODELS.items()
                ],
                "mcp_servers": [{"server_label": "search", "url": search.url}],
                "tool_backends": [
                    {"type": "web_search", "server_label": "search", "tool": "search"}
                ],
            },
            {},
        )
        app = create_app(config, DynamoStore(stack.dynamo.client, TABLE), mcp_policy=McpPolicy())
        with run_in_thread(app) as server:
            yield server


@pytest.mark.parametrize("wire", LOWERED)
def test_backed_web_search_runs_on_the_gateway_as_a_web_search_call(
    backed: RunningServer, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    upstream.push(_call(wire, "web_search", {"query": "paris weather"}, None))
    upstream.push(Turn(text="Sunny."))
    body = {"model": model, "input": "weather?", "tools": [{"type": "web_search_preview"}]}

    with httpx.Client(base_url=f"{backed.url}/v1", timeout=30) as http:
        answer, streamed = _stream(http, body)

    assert "x-gateway-omitted-tools" not in answer.headers
    search, message = streamed["final"]["output"]
    assert search == {
        "id": search["id"],
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "paris weather"},
    }
    assert message["content"][0]["text"] == "Sunny."
    assert streamed["types"][2:8] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
    ]
    if wire == "chat":
        first, second = upstream.model_requests()[-2:]
        assert _offered(first.json) == ["web_search"]
        assert second.json["messages"][-1]["content"] == (
            "1. paris weather: https://example.com/paris-weather"
        )

    upstream.push(_call(wire, "web_search", {"query": "x"}, None))
    upstream.push(Turn(text="Done."))
    tools: Any = [{"type": "web_search"}]
    with (
        openai.OpenAI(base_url=f"{backed.url}/v1", api_key="k", max_retries=0) as client,
        client.responses.stream(model=model, input="x", tools=tools) as s,
    ):
        final = s.get_final_response()
    assert [i.type for i in final.output] == ["web_search_call", "message"]


LATER_TURNS = {
    "family-a-namespace-call-output.json": ("multi_agent_v1__close_agent", '{"target": "nobody"}'),
    "family-b-apply-patch-output.json": ("apply_patch", None),
    "family-b-tool-search-output.json": ("tool_search", '{"query": "agent", "limit": 3}'),
}


@pytest.mark.parametrize("name", sorted(LATER_TURNS))
def test_codex_later_turns_replay_under_the_exposed_names_over_chat(
    http: httpx.Client, upstream: ScriptedUpstream, name: str, codex: Any
) -> None:
    body = {**codex(name)["body"], "model": "scripted-chat"}
    upstream.push(Turn(text="ok"))

    _, streamed = _stream(http, body)

    assert streamed["final"]["status"] == "completed"
    payload = _model_payload(upstream)
    calls = [c for m in payload["messages"] for c in m.get("tool_calls") or []]
    exposed, arguments = LATER_TURNS[name]
    assert [c["function"]["name"] for c in calls] == [exposed]  # never doubled, never bare
    if arguments is not None:
        assert calls[0]["function"]["arguments"] == arguments
    else:
        assert json.loads(calls[0]["function"]["arguments"])["input"].startswith("*** Begin Patch")
    answer = payload["messages"][-1]
    assert answer["role"] == "tool" and answer["tool_call_id"] == calls[0]["id"]
    if name == "family-b-tool-search-output.json":  # the loaded namespace is callable now
        assert {"multi_agent_v1__spawn_agent", "multi_agent_v1__close_agent"} <= set(
            _offered(payload)
        )
