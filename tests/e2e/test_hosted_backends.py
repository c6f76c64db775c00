"""Hosted tools run by the gateway through operator backends, end to end with the official SDK.

Every backed kind (``web_search``, ``file_search``, ``code_interpreter``, ``image_generation``)
over the chat and harmony wires: the model calls the lowered function, the gateway calls the
loopback MCP backend with the table's argument, and the client sees OpenAI's item and events
(result fields only when ``include`` asks). Later turns replay the call and its result from the
stored item, through ``previous_response_id``, a conversation or the history sent back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.testing.bedrock import as_chat
from responses_gateway.testing.harmony import read_prompt
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import MODELS, TABLE, Stack, wire_provider

LOWERED = ["chat", "harmony", "bedrock"]


@dataclass(frozen=True)
class Hosted:
    """One backed kind: the tool sent, the model's call, the backend call, what comes back."""

    tool: dict[str, Any]
    exposed: str
    arguments: dict[str, Any]
    backend: tuple[str, dict[str, Any]]
    include: str | None
    item: dict[str, Any]
    """The finished item with every result field (``id`` excepted)."""
    hidden: dict[str, Any]
    """The fields that differ when ``include`` does not ask for the results."""
    seen_now: str
    """What the model reads in the response that ran the call (the backend's whole answer)."""
    seen_later: str
    """What later turns read (rebuilt from the item's fields)."""
    steps: list[str]
    replayed: dict[str, Any] | None = None
    """The call's arguments on later turns, when the item keeps them otherwise (None: as sent)."""


SEARCH_URL = "https://example.com/paris-weather"
HOSTED: dict[str, Hosted] = {
    "web_search": Hosted(
        tool={"type": "web_search_preview"},
        exposed="web_search",
        arguments={"query": "paris weather"},
        backend=("search", {"query": "paris weather"}),
        include="web_search_call.action.sources",
        item={
            "type": "web_search_call",
            "status": "completed",
            "action": {
                "type": "search",
                "query": "paris weather",
                "sources": [{"type": "url", "url": SEARCH_URL}],
            },
        },
        hidden={"action": {"type": "search", "query": "paris weather"}},
        seen_now=f"1. paris weather: {SEARCH_URL}",
        seen_later=f"Sources:\n{SEARCH_URL}",
        steps=[
            "response.web_search_call.in_progress",
            "response.web_search_call.searching",
            "response.web_search_call.completed",
        ],
    ),
    "file_search": Hosted(
        tool={"type": "file_search", "vector_store_ids": ["vs_1"]},
        exposed="file_search",
        arguments={"query": "notes"},
        backend=("find_files", {"query": "notes"}),
        include="file_search_call.results",
        item={
            "type": "file_search_call",
            "status": "completed",
            "queries": ["notes"],
            "results": [
                {
                    "attributes": None,
                    "file_id": "file_1",
                    "filename": "notes.md",
                    "score": 0.5,
                    "text": "notes",
                }
            ],
        },
        hidden={"results": None},
        seen_now=json.dumps(
            [{"file_id": "file_1", "filename": "notes.md", "score": 0.5, "text": "notes"}]
        ),
        seen_later="[notes.md] notes",
        steps=[
            "response.file_search_call.in_progress",
            "response.file_search_call.searching",
            "response.file_search_call.completed",
        ],
    ),
    "code_interpreter": Hosted(
        tool={"type": "code_interpreter", "container": {"type": "auto"}},
        exposed="code_interpreter",
        arguments={"code": "print(1)"},
        backend=("run_python", {"code": "print(1)"}),
        include="code_interpreter_call.outputs",
        item={
            "type": "code_interpreter_call",
            "status": "completed",
            "code": "print(1)",
            "container_id": "cntr_gateway",
            "outputs": [{"type": "logs", "logs": "ran 8 chars\n"}],
        },
        hidden={"outputs": None},
        seen_now=json.dumps({"logs": "ran 8 chars\n"}),
        seen_later="ran 8 chars\n",
        steps=[
            "response.code_interpreter_call.in_progress",
            "response.code_interpreter_call_code.delta",
            "response.code_interpreter_call_code.done",
            "response.code_interpreter_call.interpreting",
            "response.code_interpreter_call.completed",
        ],
    ),
    "image_generation": Hosted(
        tool={"type": "image_generation"},
        exposed="image_generation",
        arguments={"prompt": "a cat"},
        backend=("draw", {"prompt": "a cat"}),
        include=None,
        item={
            "type": "image_generation_call",
            "status": "completed",
            "result": "iVBORw0KGgo=",
            "revised_prompt": "a cat, watercolor",
        },
        hidden={},
        seen_now=json.dumps(
            {
                "result": "iVBORw0KGgo=",
                "revised_prompt": "a cat, watercolor",
                "partial_images": ["iVBO"],
            }
        ),
        seen_later="Image generated (prompt: a cat, watercolor).",
        steps=[
            "response.image_generation_call.in_progress",
            "response.image_generation_call.generating",
            "response.image_generation_call.partial_image",
            "response.image_generation_call.completed",
        ],
        replayed={"prompt": "a cat, watercolor"},  # the item keeps the revised prompt only
    ),
}


@pytest.fixture(scope="module")
def backends() -> Iterator[RunningMcpServer]:
    with start_mcp_server("search") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(stack: Stack, backends: RunningMcpServer) -> Iterator[RunningServer]:
    """A gateway whose operator gave every hosted kind a backend on the loopback MCP server."""
    tools = {"web_search": "search", "file_search": "find_files"}
    tools |= {"code_interpreter": "run_python", "image_generation": "draw"}
    config = parse_config(
        {
            "providers": [
                wire_provider(wire, model, stack.upstream_server.url)
                for wire, model in MODELS.items()
            ],
            "mcp_servers": [{"server_label": "hosted", "url": backends.url}],
            "tool_backends": [
                {"type": kind, "server_label": "hosted", "tool": tool}
                for kind, tool in tools.items()
            ],
        },
        {},
    )
    app = create_app(config, DynamoStore(stack.dynamo.client, TABLE), mcp_policy=McpPolicy())
    with run_in_thread(app) as server:
        yield server


@pytest.fixture
def api(gateway: RunningServer, upstream: ScriptedUpstream) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{gateway.url}/v1", timeout=30) as http:
        yield http


@pytest.fixture
def sdk(gateway: RunningServer, upstream: ScriptedUpstream) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0) as client:
        yield client


def _call(hosted: Hosted) -> Turn:
    return Turn(tool_calls=[ToolCall(hosted.exposed, json.dumps(hosted.arguments), "call_1")])


def _conversation(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The model's transcript as chat messages (harmony prompts decoded to the same view)."""
    if "messages" in payload:
        return [{k: v for k, v in m.items() if k != "id"} for m in payload["messages"]]
    prompt = read_prompt(payload)
    assert prompt is not None
    return list(prompt.chat_view["messages"])


def _tool_results(payload: dict[str, Any]) -> list[str]:
    return [m["content"] for m in _conversation(payload) if m["role"] == "tool"]


def _offered(payload: dict[str, Any]) -> list[str]:
    if "messages" in payload:
        return [t["function"]["name"] for t in payload.get("tools") or []]
    prompt = read_prompt(payload)
    assert prompt is not None
    return [t["function"]["name"] for t in prompt.chat_view["tools"]]


@pytest.mark.parametrize("wire", LOWERED)
@pytest.mark.parametrize("name", sorted(HOSTED))
def test_backed_hosted_tool_streams_openai_item_and_events(
    api: httpx.Client,
    sdk: openai.OpenAI,
    upstream: ScriptedUpstream,
    backends: RunningMcpServer,
    name: str,
    wire: str,
) -> None:
    hosted = HOSTED[name]
    model = MODELS[wire]
    include = [hosted.include] if hosted.include else []
    body = {"model": model, "input": "go", "tools": [hosted.tool], "include": include}
    upstream.push(_call(hosted), Turn(text="Found."))
    backends.log.clear()

    answer = api.post("/responses", json={**body, "stream": True})

    assert answer.status_code == 200, answer.text
    assert "x-gateway-omitted-tools" not in answer.headers
    events = parse_sse(answer.content)
    final = check_stream(events)
    call, message = final["output"]
    assert call == {"id": call["id"], **hosted.item}
    assert call["id"].startswith(hosted.item["type"][:1])
    assert message["content"][0]["text"] == "Found."
    types = [e["type"] for e in events]
    start = types.index("response.output_item.added")
    assert types[start : start + len(hosted.steps) + 2] == [
        "response.output_item.added",
        *hosted.steps,
        "response.output_item.done",
    ]
    added = events[start]["item"]
    assert added["status"] == "in_progress"
    if name == "code_interpreter":
        delta, done = events[start + 2], events[start + 3]
        assert (delta["delta"], done["code"]) == ("print(1)", "print(1)")
    if name == "image_generation":
        partial = events[start + 3]
        assert (partial["partial_image_index"], partial["partial_image_b64"]) == (0, "iVBO")
    assert backends.log.calls == [hosted.backend]
    first, second = (as_chat(r) for r in upstream.model_requests()[-2:])
    assert _offered(first) == [hosted.exposed]
    assert _tool_results(second) == [hosted.seen_now]

    # Without include, the result fields are left out, in the events and the response alike.
    upstream.push(_call(hosted), Turn(text="Found."))
    plain = api.post("/responses", json={**body, "include": []}).json()
    assert plain["output"][0] == {"id": plain["output"][0]["id"], **hosted.item, **hosted.hidden}
    read = api.get(f"/responses/{plain['id']}").json()
    assert read["output"] == plain["output"]
    if hosted.include:
        full = api.get(f"/responses/{plain['id']}", params={"include[]": hosted.include}).json()
        assert full["output"][0] == {"id": plain["output"][0]["id"], **hosted.item}

    # The SDK's create parses the item as its own type.
    upstream.push(_call(hosted), Turn(text="Found."))
    tools_: Any = [hosted.tool]
    created = sdk.responses.create(model=model, input="go", tools=tools_, include=include)
    assert created.output[0].type == hosted.item["type"]
    assert created.output[0].model_dump(exclude_none=True, exclude={"id"}) == _without_nones(
        hosted.item
    )

    # The SDK's strict stream helper accepts the events and items.
    upstream.push(_call(hosted), Turn(text="Found."))
    tools: Any = [hosted.tool]
    with sdk.responses.stream(model=model, input="go", tools=tools, include=include) as s:
        final_sdk = s.get_final_response()
    assert [i.type for i in final_sdk.output] == [hosted.item["type"], "message"]
    dumped = final_sdk.output[0].model_dump(exclude_none=True, exclude={"id"})
    assert dumped == _without_nones(hosted.item)


def _without_nones(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nones(v) for v in value]
    return value


@pytest.mark.parametrize("wire", LOWERED)
def test_a_failing_backend_makes_a_failed_item_and_tells_the_model(
    api: httpx.Client, upstream: ScriptedUpstream, wire: str
) -> None:
    hosted = HOSTED["code_interpreter"]
    upstream.push(
        Turn(tool_calls=[ToolCall("code_interpreter", '{"code": "raise"}', "call_1")]),
        Turn(text="It failed."),
    )
    body = {"model": MODELS[wire], "input": "go", "tools": [hosted.tool], "stream": True}

    answer = api.post("/responses", json=body)

    events = parse_sse(answer.content)
    final = check_stream(events)
    call = final["output"][0]
    assert (call["status"], call["outputs"]) == ("failed", None)
    assert "response.code_interpreter_call.completed" not in [e["type"] for e in events]
    seen = _tool_results(as_chat(upstream.model_requests()[-1]))
    assert seen == ["The tool failed: Error executing tool run_python: Traceback: boom"]


FORMS = ["previous_response_id", "conversation", "history"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("wire", LOWERED)
@pytest.mark.parametrize("name", sorted(HOSTED))
def test_backed_results_replay_on_later_turns(
    api: httpx.Client, upstream: ScriptedUpstream, name: str, wire: str, form: str
) -> None:
    hosted = HOSTED[name]
    model = MODELS[wire]
    include = [hosted.include] if hosted.include else []
    body: dict[str, Any] = {"model": model, "tools": [hosted.tool], "include": include}
    conversation = api.post("/conversations", json={}).json()["id"]
    first_body = {**body, "input": "go"}
    if form == "conversation":
        first_body["conversation"] = conversation
    upstream.push(_call(hosted), Turn(text="Found."))
    first = api.post("/responses", json=first_body).json()
    assert first["status"] == "completed", first
    call = first["output"][0]

    follow: dict[str, Any] = {**body, "tools": [], "include": []}
    if form == "previous_response_id":
        follow |= {"previous_response_id": first["id"], "input": "more"}
    elif form == "conversation":
        follow |= {"conversation": conversation, "input": "more"}
    else:
        user = {"type": "message", "role": "user", "content": "go"}
        more = {"type": "message", "role": "user", "content": "more"}
        follow["input"] = [user, *first["output"], more]
    upstream.push(Turn(text="Again."))
    second = api.post("/responses", json=follow).json()

    assert second["status"] == "completed", second
    transcript = _conversation(as_chat(upstream.model_requests()[-1]))
    assert [m["role"] for m in transcript] == ["user", "assistant", "tool", "assistant", "user"]
    assert transcript[2]["content"] == hosted.seen_later
    if wire == "chat":
        arguments = hosted.replayed or hosted.arguments
        assert transcript[1]["tool_calls"] == [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": hosted.exposed, "arguments": json.dumps(arguments)},
            }
        ]
        assert transcript[2]["tool_call_id"] == call["id"]
    if form == "conversation":  # conversation reads show result fields as include asks
        listed = api.get(f"/conversations/{conversation}/items", params={"order": "asc"}).json()
        assert listed["data"][1] == {"id": call["id"], **hosted.item, **hosted.hidden}
        read = api.get(
            f"/conversations/{conversation}/items/{call['id']}", params={"include": include}
        ).json()
        assert read == {"id": call["id"], **hosted.item}
    stored = api.get(f"/responses/{second['id']}/input_items", params={"order": "asc"}).json()
    if form == "history":
        assert [i["type"] for i in stored["data"]] == ["message", hosted.item["type"], "message",
                                                       "message"]  # fmt: skip
        assert stored["data"][1] == call
    else:
        assert [i["type"] for i in stored["data"]] == ["message"]
