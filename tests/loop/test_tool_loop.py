"""The loop with gateway tools, on an in-test registry and adapter: presentation, execution,
approvals, max_tool_calls, and what the stream of events looks like."""

from __future__ import annotations

import asyncio
from typing import Any

from responses_gateway.adapters.base import ModelCall
from responses_gateway.loop import LoopContext, LoopState, run_loop
from responses_gateway.loop.driver import build_model_call, decide_start
from responses_gateway.loop.events import (
    ArgumentsFinished,
    ItemEvent,
    ItemFinished,
    ItemStarted,
    LoopEvent,
    ResponseFinished,
)
from responses_gateway.loop.execution import NOT_EXECUTED
from responses_gateway.loop.limits import LoopLimits
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import TurnResult
from responses_gateway.loop.tools import GatewayTool, ToolOutcome


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)

    def final(self) -> dict[str, Any]:
        event = self.events[-1]
        assert isinstance(event, ResponseFinished)
        return event.response


class Tools:
    """`calc__add` runs freely; `calc__drop` needs approval; `calc__div` fails."""

    def __init__(self) -> None:
        self.executed: list[dict[str, Any]] = []
        self.prepared = 0

    def model_tools(self) -> list[dict[str, Any]]:
        return [{"type": "function", "name": n, "parameters": {}} for n in ("calc__add",)]

    def lookup(self, name: str) -> GatewayTool | None:
        if not name.startswith("calc__"):
            return None
        tool = name.removeprefix("calc__")
        return GatewayTool("calc", tool, needs_approval=tool == "drop")

    async def prepare(self, state: LoopState, out: OutputWriter) -> None:
        self.prepared += 1

    async def execute(self, call: dict[str, Any]) -> ToolOutcome:
        self.executed.append(call)
        if call["name"] == "div":
            return ToolOutcome(error={"type": "mcp_protocol_error", "code": -1, "message": "boom"})
        return ToolOutcome(output="3")


class Model:
    """Turns: each a list of (name, arguments) calls, or a text answer."""

    def __init__(self, *turns: list[tuple[str, str]] | str) -> None:
        self.turns = list(turns)
        self.calls: list[ModelCall] = []

    wire = "test"

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        self.calls.append(call)
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            message = out.message()
            message.text(turn)
            message.finish()
        else:
            for name, arguments in turn:
                out.complete_function_call(name=name, arguments=arguments, call_id=f"c_{name}")
        return TurnResult()


def _state(**request: Any) -> LoopState:
    return LoopState(
        response_id="resp_1",
        created_at=1,
        model="m",
        request=request,
        upstream_input=[{"type": "message", "role": "user", "content": "hi"}],
    )


async def test_gateway_call_runs_and_loops_back_to_the_model() -> None:
    tools, model, sink = Tools(), Model([("calc__add", '{"a":1}')], "It is 3."), Recorder()
    state = await run_loop(_state(), LoopContext(model, "m", tools=tools), sink)
    assert [i["type"] for i in state.output] == ["mcp_call", "message"]
    call = state.output[0]
    assert {
        k: call[k]
        for k in (
            "server_label",
            "name",
            "arguments",
            "output",
            "error",
            "approval_request_id",
            "status",
        )
    } == {
        "server_label": "calc",
        "name": "add",
        "arguments": '{"a":1}',
        "output": "3",
        "error": None,
        "approval_request_id": None,
        "status": "completed",
    }
    assert tools.prepared == 1
    kinds = [type(e).__name__ for e in sink.events]
    assert kinds == [
        "ResponseStarted",
        "ItemStarted",
        "ArgumentsDelta",
        "ArgumentsFinished",
        "ItemFinished",  # the mcp_call
        "ItemStarted",
        "PartStarted",
        "TextDelta",
        "PartFinished",
        "ItemFinished",  # the answer
        "ResponseFinished",
    ]
    second = model.calls[1].input
    assert second[-2:] == [
        {
            "type": "function_call",
            "call_id": call["id"],
            "name": "calc__add",
            "arguments": '{"a":1}',
        },
        {"type": "function_call_output", "call_id": call["id"], "output": "3"},
    ]
    assert sink.final()["status"] == "completed"


async def test_no_function_call_item_ever_reaches_the_client_for_gateway_tools() -> None:
    sink = Recorder()
    await run_loop(
        _state(), LoopContext(Model([("calc__add", "{}")], "ok"), "m", tools=Tools()), sink
    )
    started = [e.item["type"] for e in sink.events if isinstance(e, ItemStarted)]
    assert "function_call" not in started


async def test_parallel_calls_run_together_and_finish_in_index_order() -> None:
    tools, sink = Tools(), Recorder()
    model = Model([("calc__add", "{}"), ("calc__div", "{}")], "done")
    state = await run_loop(_state(), LoopContext(model, "m", tools=tools), sink)
    assert [c["name"] for c in tools.executed] == ["add", "div"]
    assert [(i["status"], i["error"]) for i in state.output[:2]] == [
        ("completed", None),
        ("failed", {"type": "mcp_protocol_error", "code": -1, "message": "boom"}),
    ]
    finished = [e.output_index for e in sink.events if isinstance(e, ItemFinished)]
    assert finished == [0, 1, 2]


async def test_client_calls_in_the_same_turn_return_after_gateway_calls_ran() -> None:
    tools = Tools()
    model = Model([("calc__add", "{}"), ("get_weather", '{"city":"Oslo"}')])
    state = await run_loop(_state(), LoopContext(model, "m", tools=tools), Recorder())
    assert [i["type"] for i in state.output] == ["mcp_call", "function_call"]
    assert state.output[0]["status"] == "completed" and len(model.calls) == 1
    assert state.status == "completed"


async def test_call_needing_approval_ends_the_response_with_a_request() -> None:
    tools, sink = Tools(), Recorder()
    state = await run_loop(
        _state(), LoopContext(Model([("calc__drop", '{"t":1}')]), "m", tools=tools), sink
    )
    assert state.output == [
        {
            "id": state.output[0]["id"],
            "type": "mcp_approval_request",
            "server_label": "calc",
            "name": "drop",
            "arguments": '{"t":1}',
        }
    ]
    assert state.output[0]["id"].startswith("mcpr_")
    assert tools.executed == [] and state.status == "completed"
    assert [type(e).__name__ for e in sink.events].count("ItemFinished") == 1


async def test_approved_call_runs_without_asking_the_model_again() -> None:
    tools, model = Tools(), Model("It ran.")
    request = {
        "type": "mcp_approval_request",
        "id": "mcpr_1",
        "server_label": "calc",
        "name": "drop",
        "arguments": '{"t":1}',
    }
    state = _state()
    state.control_items = [request]
    state.set_next_action(decide_start(("mcpr_1",)))
    await run_loop(state, LoopContext(model, "m", tools=tools), Recorder())
    assert [c["approval_request_id"] for c in tools.executed] == ["mcpr_1"]
    assert state.output[0]["approval_request_id"] == "mcpr_1"
    assert len(model.calls) == 1
    assert model.calls[0].input[-1]["type"] == "function_call_output"


async def test_max_tool_calls_cuts_off_and_makes_one_last_call_without_tools() -> None:
    tools = Tools()
    model = Model([("calc__add", "{}"), ("calc__add", "{}")], "final answer")
    state = await run_loop(
        _state(max_tool_calls=1), LoopContext(model, "m", tools=tools), Recorder()
    )
    assert len(tools.executed) == 1
    assert [i["status"] for i in state.output] == ["completed", "incomplete", "completed"]
    assert state.output[1]["error"]["type"] == "mcp_tool_execution_error"
    assert model.calls[1].tools == [] and model.calls[1].tool_choice is None
    assert state.status == "completed" and state.incomplete_reason is None


def test_build_model_call_with_budget_left_offers_gateway_tools() -> None:
    call = build_model_call(_state(max_tool_calls=2), LoopContext(Model(), "m", tools=Tools()))
    assert [t["name"] for t in call.tools] == ["calc__add"]


async def test_gateway_call_cut_off_by_length_is_never_announced() -> None:
    class Cut(Model):
        async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
            writer = out.function_call(name="calc__add", call_id="c1")
            writer.arguments('{"a":')
            return TurnResult(stop="length")

    tools, sink = Tools(), Recorder()
    state = await run_loop(_state(), LoopContext(Cut(), "m", tools=tools), sink)
    assert state.output == [] and tools.executed == []
    assert state.status == "incomplete"
    assert not any(isinstance(e, ArgumentsFinished) for e in sink.events)


class ChatModel(Model):
    wire = "chat"

    def __init__(self, *turns: list[tuple[str, str]] | str, stop: Any = "stop") -> None:
        super().__init__(*turns)
        self.stop = stop

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        await super().call_llm(call, out)
        return TurnResult(stop=self.stop)


class Backend:
    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.items: list[dict[str, Any]] = []

    async def run(self, item: dict[str, Any]) -> ToolOutcome:
        self.items.append(dict(item))
        return ToolOutcome(output=self.answer)


async def test_backed_image_generation_fills_its_item_streams_partials_and_loops_back() -> None:
    answer = '{"result": "QUJD", "revised_prompt": "a red cat", "partial_images": ["QQ=="]}'
    backend, sink = Backend(answer), Recorder()
    model = ChatModel([("image_generation", '{"prompt": "a cat"}')], "Here.")
    ctx = LoopContext(model, "m", backends={"image_generation": backend})

    state = await run_loop(_state(tools=[{"type": "image_generation"}]), ctx, sink)

    image = state.output[0]
    assert image == {
        "id": image["id"],
        "type": "image_generation_call",
        "result": "QUJD",
        "revised_prompt": "a red cat",
        "status": "completed",
    }
    assert backend.items[0]["revised_prompt"] == "a cat"
    names = [e.name for e in sink.events if isinstance(e, ItemEvent)]
    assert names == [
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.partial_image",
        "response.image_generation_call.completed",
    ]
    assert model.calls[1].input[-1] == {
        "type": "function_call_output",
        "call_id": image["id"],
        "output": answer,
    }


async def test_hosted_call_left_unrun_is_closed_with_its_kinds_cut_off_status() -> None:
    model = ChatModel([("image_generation", '{"prompt": "a cat"}')], stop="length")
    ctx = LoopContext(model, "m", backends={"image_generation": Backend("")})

    state = await run_loop(_state(tools=[{"type": "image_generation"}]), ctx, Recorder())

    assert state.status == "incomplete"
    assert state.output[0]["status"] == "failed"  # the SDK's image status has no incomplete


# -- bounds: a model that never stops calling tools -----------------------------------------


class Forever(Model):
    """Calls ``calc__add`` on every turn, with arguments of its own choosing."""

    def __init__(self, arguments: Any = lambda n: "{}") -> None:
        super().__init__()
        self.arguments = arguments

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        self.calls.append(call)
        n = len(self.calls)
        out.complete_function_call(name="calc__add", arguments=self.arguments(n), call_id=f"c{n}")
        return TurnResult()


async def test_a_model_calling_a_tool_forever_ends_at_the_model_call_cap() -> None:
    tools, model = Tools(), Forever(lambda n: f'{{"a": {n}}}')  # new arguments: progress
    ctx = LoopContext(model, "m", tools=tools, limits=LoopLimits(max_model_calls=5))

    state = await run_loop(_state(), ctx, Recorder())

    assert (
        len(model.calls) == 5 and len(tools.executed) == 4
    )  # the fifth call's would run for nobody
    assert state.status == "incomplete" and state.incomplete_reason == "max_model_calls"
    assert [i["status"] for i in state.output] == ["completed"] * 4 + ["incomplete"]


async def test_the_same_call_with_the_same_result_twice_in_a_row_ends_no_progress() -> None:
    tools, model = Tools(), Forever()

    state = await run_loop(_state(), LoopContext(model, "m", tools=tools), Recorder())

    assert len(model.calls) == 2 and len(tools.executed) == 2
    assert state.status == "incomplete" and state.incomplete_reason == "no_progress"


async def test_a_forced_choice_is_sent_until_the_forced_tool_ran_then_auto() -> None:
    tools = Tools()
    model = Model([("calc__add", '{"a": 1}')], "It is 3.")
    forced = {"type": "mcp", "server_label": "calc", "name": "add"}

    state = await run_loop(
        _state(tool_choice=forced), LoopContext(model, "m", tools=tools), Recorder()
    )

    assert [c.tool_choice for c in model.calls] == [
        {
            "type": "function",
            "name": "calc__add",
        },  # the gateway's MCP tool, as the upstream sees it
        "auto",
    ]
    assert state.status == "completed" and len(tools.executed) == 1


async def test_hosted_backend_calls_count_against_max_tool_calls_with_mcp_calls() -> None:
    backend = Backend("found")
    model = ChatModel([("web_search", '{"query": "a"}'), ("web_search", '{"query": "b"}')], "done")
    ctx = LoopContext(model, "m", backends={"web_search": backend})

    state = await run_loop(
        _state(tools=[{"type": "web_search"}], max_tool_calls=1), ctx, Recorder()
    )

    assert [i["action"]["query"] for i in backend.items] == ["a"]
    assert [i["status"] for i in state.output] == ["completed", "failed", "completed"]
    assert model.calls[1].tools == []  # the budget is spent: the model answers
    assert model.calls[1].input[-1]["output"] == NOT_EXECUTED  # and knows b did not run
    assert state.status == "completed"


async def test_an_action_cut_by_the_wall_time_keeps_its_output_and_ends_incomplete() -> None:
    class Hanging(Model):
        async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
            self.calls.append(call)
            message = out.message()
            message.text("partial")
            await asyncio.Event().wait()  # an upstream that never ends its stream
            raise AssertionError("unreachable")

    sink = Recorder()
    ctx = LoopContext(Hanging(), "m", limits=LoopLimits(max_loop_seconds=0.05))

    state = await run_loop(_state(), ctx, sink)

    assert state.status == "incomplete" and state.incomplete_reason == "max_loop_seconds"
    assert state.output[0]["status"] == "incomplete"
    assert state.output[0]["content"][0]["text"] == "partial"
    assert sink.final()["status"] == "incomplete"


async def test_a_relayed_call_is_never_executed_whatever_its_status() -> None:
    class Relaying(Model):
        async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
            self.calls.append(call)
            for status in ("in_progress", "calling"):
                item = {"type": "mcp_call", "server_label": "calc", "name": "add", "status": status}
                out.relay(item).finish()
            message = out.message()
            message.text("done")
            message.finish()
            return TurnResult()

    tools, model = Tools(), Relaying()
    state = await run_loop(_state(), LoopContext(model, "m", tools=tools), Recorder())

    assert len(model.calls) == 1 and tools.executed == []
    assert [i.get("status") for i in state.output] == ["in_progress", "calling", "completed"]
    assert state.status == "completed"
