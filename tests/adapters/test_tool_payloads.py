"""What a chat or harmony upstream receives for every tool type and every replayed item type.

The loop builds the model call through the tool-kind table (``build_model_call``); these tests
pin the exact upstream payload the adapters then send.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.chat_completions import to_chat_request
from responses_gateway.adapters.harmony import harmony_encoding, render_prompt
from responses_gateway.loop import LoopContext, LoopState
from responses_gateway.loop.driver import build_model_call
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import TurnResult

USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Sub-agents.",
    "tools": [
        {
            "type": "function",
            "name": "close_agent",
            "description": "Close an agent.",
            "parameters": {"type": "object", "properties": {"target": {"type": "string"}}},
            "strict": False,
        }
    ],
}
CUSTOM = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Apply a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
}


class WireAdapter:
    def __init__(self, wire: str) -> None:
        self.wire = wire

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        raise AssertionError("not called")


def model_call(
    wire: str, tools: list[dict[str, Any]], items: list[dict[str, Any]], choice: Any = "auto"
) -> ModelCall:
    state = LoopState(
        response_id="resp_1",
        created_at=1,
        model="m",
        request={"tools": tools, "tool_choice": choice},
        upstream_input=items,
    )
    return build_model_call(state, LoopContext(WireAdapter(wire), "m"))


def chat(tools: list[dict[str, Any]], items: list[dict[str, Any]], choice: Any = "auto") -> Any:
    return to_chat_request(model_call("chat", tools, items, choice))


def harmony(tools: list[dict[str, Any]], items: list[dict[str, Any]]) -> str:
    call = model_call("harmony", tools, items)
    return str(harmony_encoding().decode(render_prompt(call, date(2025, 8, 5))))


def fn(name: str, description: str, parameters: dict[str, Any], **extra: Any) -> dict[str, Any]:
    function = {"name": name, "description": description, "parameters": parameters, **extra}
    return {"type": "function", "function": function}


def test_chat_payload_offers_every_client_kind_as_a_function() -> None:
    tools = [
        NAMESPACE,
        CUSTOM,
        {"type": "shell"},
        {"type": "local_shell"},
        {"type": "apply_patch", "description": "Edit files."},
        {"type": "computer_use_preview", "environment": "browser"},
        {"type": "tool_search", "execution": "client"},
        {"type": "web_search"},
    ]

    payload = chat(tools, [USER])

    names = [t["function"]["name"] for t in payload["tools"]]
    assert names == [
        "multi_agent_v1__close_agent",
        "apply_patch",
        "shell",
        "local_shell",
        "computer",
        "tool_search",
    ]  # the built-in apply_patch collides with the custom one: the first declared wins
    assert payload["tools"][0] == fn(
        "multi_agent_v1__close_agent",
        "Close an agent.",
        {"type": "object", "properties": {"target": {"type": "string"}}},
        strict=False,
    )
    assert payload["tools"][1] == fn(
        "apply_patch",
        "Apply a patch.\n\nThe input must match this lark grammar:\n```\nstart: x\n```",
        {
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The raw input text."}},
            "required": ["input"],
            "additionalProperties": False,
        },
    )
    assert payload["tools"][2]["function"]["parameters"]["required"] == ["commands"]
    assert payload["tools"][3]["function"]["parameters"]["required"] == ["command"]
    assert payload["tools"][5]["function"]["parameters"]["required"] == ["query"]
    assert payload["tool_choice"] == "auto"


REPLAYS: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
    (
        "namespaced function_call",
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "close_agent",
            "namespace": "multi_agent_v1",
            "arguments": '{"target": "a"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "closed"},
        "multi_agent_v1__close_agent",
        '{"target": "a"}',
    ),
    (
        "custom_tool_call",
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "P"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "closed"},
        "apply_patch",
        '{"input": "P"}',
    ),
    (
        "shell_call",
        {
            "type": "shell_call",
            "call_id": "c1",
            "action": {"commands": ["ls"], "timeout_ms": None, "max_output_length": 10},
        },
        {"type": "shell_call_output", "call_id": "c1", "output": "closed"},
        "shell",
        '{"commands": ["ls"], "max_output_length": 10}',
    ),
    (
        "local_shell_call",
        {
            "type": "local_shell_call",
            "call_id": "c1",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
        },
        {"type": "local_shell_call_output", "call_id": "c1", "output": "closed"},
        "local_shell",
        '{"command": ["ls"], "env": {}}',
    ),
    (
        "apply_patch_call",
        {
            "type": "apply_patch_call",
            "call_id": "c1",
            "operation": {"type": "update_file", "path": "a", "diff": "-x"},
        },
        {"type": "apply_patch_call_output", "call_id": "c1", "status": "completed"},
        "apply_patch",
        '{"type": "update_file", "path": "a", "diff": "-x"}',
    ),
    (
        "computer_call",
        {"type": "computer_call", "call_id": "c1", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "c1", "output": "closed"},
        "computer",
        '{"action": {"type": "screenshot"}}',
    ),
    (
        "tool_search_call",
        {"type": "tool_search_call", "call_id": "c1", "arguments": {"query": "x"}},
        {"type": "tool_search_output", "call_id": "c1", "tools": []},
        "tool_search",
        '{"query": "x"}',
    ),
]


@pytest.mark.parametrize(("label", "call", "output", "name", "arguments"), REPLAYS)
def test_chat_payload_replays_every_call_item_under_its_exposed_name(
    label: str, call: dict[str, Any], output: dict[str, Any], name: str, arguments: str
) -> None:
    payload = chat([], [USER, call, output])

    text = "completed" if label == "apply_patch_call" else "No tools matched."
    assistant, tool = payload["messages"][1:]
    assert assistant["role"] == "assistant"  # its content key belongs to the message rules
    assert assistant["tool_calls"] == [
        {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    ]
    assert tool == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": text if label in ("apply_patch_call", "tool_search_call") else "closed",
    }


def test_chat_payload_never_carries_additional_tools_and_shows_hosted_items_as_context() -> None:
    additional = {"type": "additional_tools", "id": "at", "role": "developer", "tools": [CUSTOM]}
    search = {"type": "web_search_call", "id": "ws", "status": "completed", "action": {}}

    payload = chat([], [additional, USER, search])

    assert payload["messages"] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": '[web_search_call completed] {"action": {}}'},
    ]
    assert [t["function"]["name"] for t in payload["tools"]] == ["apply_patch"]


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ({"type": "mcp", "server_label": "docs", "name": "find"}, "docs__find"),
        ({"type": "custom", "name": "apply_patch"}, "apply_patch"),
        ({"type": "function", "name": "close_agent", "namespace": "multi_agent_v1"}, None),
    ],
)
def test_chat_payload_forced_choice_names_the_exposed_function(choice: Any, sent: Any) -> None:
    payload = chat([NAMESPACE, CUSTOM], [USER], choice)

    expected = sent or "multi_agent_v1__close_agent"
    assert payload["tool_choice"] == {"type": "function", "function": {"name": expected}}


def test_harmony_prompt_declares_lowered_tools_and_replays_calls_under_their_names() -> None:
    call = {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "namespace": "functions"}
    call["input"] = "ls"
    output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "a.txt"}
    namespace = {"type": "namespace", "name": "functions", "tools": [{**CUSTOM, "name": "exec"}]}

    prompt = harmony([namespace], [USER, call, output])

    assert "type functions__exec = (_: {\n// The raw input text.\ninput: string,\n})" in prompt
    assert (
        "<|start|>assistant to=functions.functions__exec<|channel|>commentary <|constrain|>json"
        '<|message|>{"input": "ls"}<|call|>'
    ) in prompt
    assert "<|start|>functions.functions__exec to=assistant<|channel|>commentary" in prompt
    assert json.dumps({"input": "ls"}) in prompt
