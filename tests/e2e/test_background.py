"""Background mode end to end: the official SDK against the gateway, with the in-process runner
driving the real worker, the moto DynamoDB endpoint holding checkpoints and the event log, real
MCP servers on loopback and the scripted upstream over every wire format."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.app import create_app
from responses_gateway.background.local import LocalLauncher
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import RunningServer, run_in_thread
from responses_gateway.testing.stream_check import check_stream, parse_sse

from .conftest import Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")

POLICY = McpPolicy(allow_http=True, allow_loopback=True)


class Gateway:
    """A second gateway on the session's store and upstream, with its own runner."""

    def __init__(self, stack: Stack, **options: Any) -> None:
        assert stack.config is not None and stack.store is not None
        self.app = create_app(
            stack.config, stack.store, latch=stack.latch, mcp_policy=POLICY, **options
        )
        self.server: RunningServer = run_in_thread(self.app)
        self.launcher = self.app.state.gateway.launcher

    @property
    def base_url(self) -> str:
        return f"{self.server.url}/v1"

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until the runner has no run in flight (observable state, bounded)."""
        assert isinstance(self.launcher, LocalLauncher)
        pause = threading.Event()
        for _ in range(int(timeout / 0.01)):
            if not self.launcher.active:
                return
            pause.wait(0.01)
        raise AssertionError("background runs still in flight")


@pytest.fixture(scope="module")
def handover(stack: Stack) -> Iterator[Gateway]:
    """A gateway whose foreground loops hand over after their first action."""
    gateway = Gateway(stack, foreground_budget=0.0)
    yield gateway
    gateway.server.stop()


@pytest.fixture(scope="module")
def calc() -> Iterator[RunningMcpServer]:
    with start_mcp_server("calc") as server:
        yield server


@pytest.fixture
def hanging() -> Iterator[RunningMcpServer]:
    """A server whose ``hang`` holds until released, once: each test gets its own (a released
    one returns at once and stays ``started``)."""
    with start_mcp_server("hanging") as server:
        yield server


def _calc(server: RunningMcpServer, approval: str = "never") -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "calc",
        "server_url": server.url,
        "require_approval": approval,
    }


def _events(stream: Any) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json", exclude_unset=True) for event in stream]


def _plain(event: Any) -> dict[str, Any]:
    """A ``responses.stream()`` helper event as the wire sent it (without the helper's own
    ``snapshot`` and ``parsed`` additions)."""
    data = event.model_dump(mode="json", exclude_unset=True, warnings=False)
    return {key: value for key, value in data.items() if key not in ("snapshot", "parsed")}


def _shape(output: list[Any]) -> list[tuple[Any, ...]]:
    """Output items without their ids: what a run produced, comparable across runs."""
    shaped = []
    for item in output:
        data = item if isinstance(item, dict) else item.model_dump(mode="json")
        text = [part.get("text") for part in data.get("content") or []]
        shaped.append(
            (data["type"], data.get("name"), data.get("arguments"), data.get("output"), text)
        )
    return shaped


def _multi_step(upstream: ScriptedUpstream) -> None:
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":2,"b":3}', "call_1")]),
        Turn(tool_calls=[ToolCall("calc__divide", '{"a":10,"b":4}', "call_2")]),
        Turn(text="5 and 2.5."),
    )


MULTI_STEP_SHAPE = [
    ("mcp_list_tools", None, None, None, []),
    ("mcp_call", "add", '{"a":2,"b":3}', "5.0", []),
    ("mcp_call", "divide", '{"a":10,"b":4}', "2.5", []),
    ("message", None, None, None, ["5 and 2.5."]),
]


def test_background_create_returns_queued_then_completes(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, stack: Stack, model: str
) -> None:
    upstream.push(Turn(text="Done in the background.", reasoning="Thinking."))
    queued = client.responses.create(model=model, input="Go", background=True)

    assert (queued.status, queued.background, queued.output) == ("queued", True, [])
    done = stack.wait_for_status(queued.id, "completed")
    assert done["background"] is True
    assert [item["type"] for item in done["output"]] == ["reasoning", "message"]
    assert done["output"][1]["content"][0]["text"] == "Done in the background."
    assert done["usage"]["output_tokens"] > 0
    assert http.get(f"/responses/{queued.id}").json() == done


def test_background_stream_replays_from_any_cursor(
    client: openai.OpenAI, upstream: ScriptedUpstream, stack: Stack, model: str
) -> None:
    upstream.push(Turn(text="One two three four.", reasoning="Hmm."))
    with client.responses.create(model=model, input="Go", background=True, stream=True) as s:
        events = _events(s)

    types = [event["type"] for event in events]
    assert types[:3] == ["response.created", "response.queued", "response.in_progress"]
    assert events[0]["response"]["status"] == "queued"
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    final = check_stream(events)
    assert final["status"] == "completed"
    response_id = final["id"]

    for after in (0, 1, 4, len(events) - 2, len(events) - 1):
        with client.responses.retrieve(response_id, stream=True, starting_after=after) as again:
            assert _events(again) == events[after + 1 :], after
    with client.responses.retrieve(response_id, stream=True) as replay:
        assert _events(replay) == events
    with client.responses.stream(response_id=response_id, starting_after=4) as helper:
        assert [event.sequence_number for event in helper] == list(range(5, len(events)))
    with client.responses.stream(response_id=response_id) as helper:
        helped = helper.get_final_response()
    assert (helped.id, helped.status) == (response_id, "completed")
    assert _shape(helped.output) == _shape(final["output"])
    stored = client.responses.retrieve(response_id)
    assert stored.model_dump(mode="json", exclude_unset=True) == final


def test_background_stream_follows_a_running_response(
    client: openai.OpenAI, upstream: ScriptedUpstream, stack: Stack, calc: RunningMcpServer
) -> None:
    _multi_step(upstream)
    created = client.responses.create(
        model="scripted-chat",
        input="Compute",
        tools=[_calc(calc)],  # type: ignore[list-item]
        background=True,
        stream=True,
    )
    first = next(iter(created))
    assert first.type == "response.created"
    response_id = first.response.id
    created.close()  # the client going away does not touch the background run
    with client.responses.stream(response_id=response_id) as helper:
        final = helper.get_final_response()
    assert final.status == "completed"
    assert _shape(final.output) == MULTI_STEP_SHAPE


def test_streaming_a_response_not_streamed_in_the_background_is_400(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, stack: Stack
) -> None:
    upstream.push(Turn(text="a"), Turn(text="b"))
    background = client.responses.create(model="scripted-chat", input="x", background=True)
    foreground = client.responses.create(model="scripted-chat", input="x")
    stack.wait_for_status(background.id, "completed")

    for response_id, reason in (
        (background.id, "it was not created with stream=true."),
        (foreground.id, "it was not created with background=true."),
    ):
        answer = http.get(f"/responses/{response_id}", params={"stream": "true"})
        assert answer.status_code == 400
        assert answer.json() == {
            "error": {
                "message": f"This response cannot be streamed because {reason}",
                "type": "invalid_request_error",
                "param": "stream",
                "code": "invalid_value",
            }
        }


def test_background_refuses_unstored_responses_and_request_secrets(
    http: httpx.Client, upstream: ScriptedUpstream, calc: RunningMcpServer
) -> None:
    unstored = http.post(
        "/responses",
        json={"model": "scripted-chat", "input": "x", "background": True, "store": False},
    )
    assert unstored.status_code == 400
    assert unstored.json()["error"]["param"] == "store"
    secret_tool = {**_calc(calc), "headers": {"X-Key": "sk-mcp-never-stored"}}
    secret = http.post(
        "/responses",
        json={"model": "scripted-chat", "input": "x", "background": True, "tools": [secret_tool]},
    )
    assert secret.status_code == 400
    assert secret.json()["error"]["param"] == "background"
    assert "sk-mcp-never-stored" not in secret.text
    assert upstream.model_requests() == []


def test_cancel_rules(
    client: openai.OpenAI, http: httpx.Client, upstream: ScriptedUpstream, stack: Stack
) -> None:
    upstream.push(Turn(text="fore"), Turn(text="back"))
    foreground = client.responses.create(model="scripted-chat", input="x")
    answer = http.post(f"/responses/{foreground.id}/cancel")
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "message": "Only responses created with background=true can be cancelled.",
        "type": "invalid_request_error",
        "param": "response_id",
        "code": "invalid_value",
    }
    missing = http.post("/responses/resp_missing/cancel")
    assert missing.status_code == 404

    background = client.responses.create(model="scripted-chat", input="x", background=True)
    done = stack.wait_for_status(background.id, "completed")
    again = http.post(f"/responses/{background.id}/cancel")  # finished: returned unchanged
    assert (again.status_code, again.json()) == (200, done)
    assert client.responses.cancel(background.id).status == "completed"


def test_cancel_while_a_tool_call_runs(
    client: openai.OpenAI,
    upstream: ScriptedUpstream,
    stack: Stack,
    hanging: RunningMcpServer,
    handover: Gateway,
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("slow__hang", "{}", "call_1")]), Turn(text="never"))
    tool = {
        "type": "mcp",
        "server_label": "slow",
        "server_url": hanging.url,
        "require_approval": "never",
    }
    with openai.OpenAI(base_url=handover.base_url, api_key="k", max_retries=0) as c:
        queued = c.responses.create(
            model="scripted-chat",
            input="hang",
            tools=[tool],  # type: ignore[list-item]
            background=True,
            stream=True,
        )
        response_id = next(iter(queued)).response.id  # type: ignore[union-attr]
        assert hanging.hang.started.wait(10)
        cancelled = c.responses.cancel(response_id)
        assert cancelled.status == "cancelled"
        assert [item.type for item in cancelled.output] == ["mcp_list_tools", "mcp_call"]
        assert cancelled.output[1].status == "incomplete"  # type: ignore[union-attr]
        rest = _events(queued)
        assert rest[-1]["type"] == "response.failed"
        assert rest[-1]["response"]["status"] == "cancelled"
        hanging.hang.release()
        handover.wait_idle()
        assert c.responses.retrieve(response_id).status == "cancelled"
        assert c.responses.cancel(response_id).model_dump(mode="json") == (
            cancelled.model_dump(mode="json")
        )
    assert len(upstream.model_requests()) == 1  # the worker started nothing after the cancel
    assert upstream.pending == 1


def test_background_mcp_loop_with_an_approval_and_its_continuation(
    client: openai.OpenAI, upstream: ScriptedUpstream, stack: Stack, calc: RunningMcpServer
) -> None:
    upstream.push(
        Turn(tool_calls=[ToolCall("calc__add", '{"a":1,"b":2}', "call_1")]), Turn(text="3.")
    )
    tools = [_calc(calc, approval="always")]
    first = client.responses.create(
        model="scripted-chat",
        input="1+2?",
        tools=tools,  # type: ignore[arg-type]
        background=True,
    )
    asked = stack.wait_for_status(first.id, "completed")
    assert [item["type"] for item in asked["output"]] == ["mcp_list_tools", "mcp_approval_request"]
    request_id = asked["output"][1]["id"]
    second = client.responses.create(
        model="scripted-chat",
        previous_response_id=first.id,
        input=[
            {"type": "mcp_approval_response", "approval_request_id": request_id, "approve": True}
        ],  # type: ignore[list-item]
        tools=tools,  # type: ignore[arg-type]
        background=True,
    )
    done = stack.wait_for_status(second.id, "completed")
    assert _shape(done["output"]) == [
        ("mcp_call", "add", '{"a":1,"b":2}', "3.0", []),
        ("message", None, None, None, ["3."]),
    ]
    assert done["output"][0]["approval_request_id"] == request_id
    assert calc.log.calls[-1] == ("add", {"a": 1.0, "b": 2.0})


def test_foreground_stream_hands_over_and_the_client_sees_every_event_once(
    upstream: ScriptedUpstream, stack: Stack, calc: RunningMcpServer, handover: Gateway
) -> None:
    _multi_step(upstream)
    calc.log.clear()
    tools = [_calc(calc)]
    with openai.OpenAI(base_url=handover.base_url, api_key="k", max_retries=0) as c:
        with c.responses.create(
            model="scripted-chat",
            input="Compute",
            tools=tools,  # type: ignore[arg-type]
            stream=True,
        ) as stream:
            events = _events(stream)
        assert [event["sequence_number"] for event in events] == list(range(len(events)))
        final = check_stream(events)
        assert (final["status"], final["background"]) == ("completed", False)
        assert _shape(final["output"]) == MULTI_STEP_SHAPE
        assert c.responses.retrieve(final["id"]).model_dump(mode="json", exclude_unset=True) == (
            final
        )
        with c.responses.retrieve(final["id"], stream=True, starting_after=5) as replay:
            assert _events(replay) == events[6:]
        assert [name for name, _ in calc.log.calls] == ["add", "divide"]

        _multi_step(upstream)  # the SDK's strict helper across a hand-over
        with c.responses.stream(
            model="scripted-chat",
            input="Compute",
            tools=tools,  # type: ignore[arg-type]
        ) as helper:
            helped = helper.get_final_response()
        assert _shape(helped.output) == MULTI_STEP_SHAPE


def test_foreground_buffered_hands_over_and_is_polled(
    upstream: ScriptedUpstream, stack: Stack, calc: RunningMcpServer, handover: Gateway
) -> None:
    _multi_step(upstream)
    with httpx.Client(base_url=handover.base_url, timeout=30) as h:
        answer = h.post(
            "/responses",
            json={"model": "scripted-chat", "input": "Compute", "tools": [_calc(calc)]},
        )
        assert answer.status_code == 200
        body = answer.json()
        assert (body["status"], body["background"]) == ("in_progress", False)
        assert [item["type"] for item in body["output"]] == ["mcp_list_tools", "mcp_call"]
    done = stack.wait_for_status(body["id"], "completed")
    assert _shape(done["output"]) == MULTI_STEP_SHAPE


def test_sse_body_of_a_background_create_is_well_formed(
    http: httpx.Client, upstream: ScriptedUpstream, stack: Stack
) -> None:
    upstream.push(Turn(text="hi"))
    answer = http.post(
        "/responses",
        json={"model": "scripted-chat", "input": "x", "background": True, "stream": True},
    )
    assert answer.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(answer.content)
    assert check_stream(events)["output"][0]["content"][0]["text"] == "hi"


def test_a_client_leaving_a_handed_over_stream_cancels_the_response(
    upstream: ScriptedUpstream, stack: Stack, handover: Gateway
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("slow__hang", "{}", "call_1")]), Turn(text="never"))
    with start_mcp_server("hanging") as hanging:
        tool = {
            "type": "mcp",
            "server_label": "slow",
            "server_url": hanging.url,
            "require_approval": "never",
        }
        body = {"model": "scripted-chat", "input": "hang", "tools": [tool], "stream": True}
        with (
            httpx.Client(base_url=handover.base_url, timeout=30) as h,
            h.stream("POST", "/responses", json=body) as answer,
        ):
            lines = answer.iter_lines()  # kept open: the client is still there
            first = next(line for line in lines if line.startswith("data:"))
            response_id = parse_sse(f"event: response.created\n{first}\n\n")[0]["response"]["id"]
            assert hanging.hang.started.wait(10)  # handed over; the worker runs the tool
        cancelled = stack.wait_for_status(response_id, "cancelled")  # the client left
        assert [item["type"] for item in cancelled["output"]] == ["mcp_list_tools", "mcp_call"]
        hanging.hang.release()
        handover.wait_idle()
    assert stack.wait_for_status(response_id, "cancelled") == cancelled
    assert len(upstream.model_requests()) == 1


class _Idle:
    """A launcher that never runs anything: responses stay queued."""

    def __init__(self) -> None:
        self.stopped: list[str] = []

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        return None

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        self.stopped.append(response_id)


def test_cancel_while_queued_with_the_sdk(upstream: ScriptedUpstream, stack: Stack) -> None:
    idle = _Idle()
    gateway = Gateway(stack, launcher=idle)
    try:
        with openai.OpenAI(base_url=gateway.base_url, api_key="k", max_retries=0) as c:
            created = c.responses.create(
                model="scripted-chat", input="x", background=True, stream=True
            )
            response_id = next(iter(created)).response.id  # type: ignore[union-attr]
            created.close()
            assert c.responses.retrieve(response_id).status == "queued"

            cancelled = c.responses.cancel(response_id)
            assert (cancelled.status, cancelled.output) == ("cancelled", [])
            assert c.responses.retrieve(response_id).status == "cancelled"
            assert idle.stopped == [response_id]
            with c.responses.retrieve(response_id, stream=True) as replay:
                events = _events(replay)
            assert [e["type"] for e in events] == [
                "response.created",
                "response.queued",
                "response.failed",
            ]
            assert events[-1]["response"]["status"] == "cancelled"
            with c.responses.stream(response_id=response_id, starting_after=1) as helper:
                seen = [event.type for event in helper]
            assert seen == ["response.failed"]
    finally:
        gateway.server.stop()
    assert upstream.model_requests() == []
