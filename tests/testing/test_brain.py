"""The transcript-reading brain: call blocks in order, tool lookup, answers after results."""

from __future__ import annotations

import json
from typing import Any

from responses_gateway.testing.brain import REASON, brain_turn, call_block

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = {k: v for k, v in tool.items() if k != "type"}
    return {"type": "function", "function": fn}


def test_brain_turn_first_block_calls_the_named_tool() -> None:
    prompt = call_block("get_weather", {"city": "Paris"})
    turn = brain_turn({"input": prompt, "tools": [WEATHER]}, "responses")
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("get_weather", '{"city": "Paris"}')
    ]


def test_brain_turn_runs_blocks_in_order_then_answers_with_the_last_result() -> None:
    prompt = call_block("a", {}) + " then " + call_block("b", {})
    tools = [_chat_tool({**WEATHER, "name": n}) for n in ("a", "b")]
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    assert brain_turn({"messages": messages, "tools": tools}, "chat").tool_calls[0].name == "a"
    messages += [{"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "one"}]
    assert brain_turn({"messages": messages, "tools": tools}, "chat").tool_calls[0].name == "b"
    messages += [{"role": "tool", "content": "two"}]
    turn = brain_turn({"messages": messages, "tools": tools}, "chat")
    assert turn.text == "The tool returned: two" and not turn.tool_calls


def test_brain_turn_finds_flattened_and_namespaced_tools() -> None:
    flat = _chat_tool({**WEATHER, "name": "multi_agent_v1__close_agent"})
    body = {"messages": [{"role": "user", "content": call_block("close_agent", {})}]}
    turn = brain_turn({**body, "tools": [flat]}, "chat")
    assert turn.tool_calls[0].name == "multi_agent_v1__close_agent"
    namespace = {"type": "namespace", "name": "ns", "tools": [{**WEATHER, "name": "close_agent"}]}
    turn = brain_turn({"input": call_block("close_agent", {}), "tools": [namespace]}, "responses")
    assert (turn.tool_calls[0].name, turn.tool_calls[0].namespace) == ("close_agent", "ns")


def test_brain_turn_freeform_payload_goes_verbatim_or_wrapped() -> None:
    patch = "*** Begin Patch\n*** End Patch"
    custom = {"type": "custom", "name": "apply_patch"}
    turn = brain_turn({"input": call_block("apply_patch", patch), "tools": [custom]}, "responses")
    (item,) = turn.relayed_items
    assert item.done["type"] == "custom_tool_call" and item.done["input"] == patch
    assert item.done["name"] == "apply_patch" and not turn.tool_calls
    lowered = _chat_tool(
        {**WEATHER, "name": "apply_patch", "parameters": {"properties": {"patch": {}}}}
    )
    body = {"messages": [{"role": "user", "content": call_block("apply_patch", patch)}]}
    turn = brain_turn({**body, "tools": [lowered]}, "chat")
    assert json.loads(turn.tool_calls[0].arguments) == {"patch": patch}


def test_brain_turn_unknown_tool_says_what_was_offered() -> None:
    turn = brain_turn({"input": call_block("nope", {}), "tools": [WEATHER]}, "responses")
    assert turn.text == "No tool named nope was offered (offered: get_weather)."


def test_brain_turn_text_counts_user_turns_after_the_context_block() -> None:
    items = [
        {"type": "message", "role": "user", "content": "<environment_context>...</>"},
        {"type": "message", "role": "user", "content": "first"},
        {"type": "message", "role": "assistant", "content": "ok"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]},
    ]
    assert brain_turn({"input": items}, "responses").text == "You said: again (user turns: 2)"


def test_brain_turn_built_in_tools_get_their_own_items_on_the_responses_wire() -> None:
    tools = [{"type": "shell"}, {"type": "apply_patch"}]
    shell = brain_turn(
        {"input": call_block("shell", {"commands": ["ls"]}), "tools": tools}, "responses"
    )
    assert shell.relayed_items[0].done["action"]["commands"] == ["ls"]
    operation = {"type": "create_file", "path": "a.txt", "diff": "+hi\n"}
    body = {"input": call_block("apply_patch", operation), "tools": tools}
    (item,) = brain_turn(body, "responses").relayed_items
    assert item.done["type"] == "apply_patch_call" and item.done["operation"] == operation


def test_brain_turn_web_search_on_the_responses_wire_is_run_upstream() -> None:
    body = {"input": call_block("web_search", {"query": "q"}), "tools": [{"type": "web_search"}]}
    turn = brain_turn(body, "responses")
    assert turn.relayed_items[0].done["action"] == {"type": "search", "query": "q"}
    assert turn.text == "Searched the web for: q"


def test_brain_turn_reason_marker_adds_reasoning_to_every_step() -> None:
    prompt = REASON + call_block("get_weather", {"city": "Oslo"})
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    first = brain_turn({"messages": messages, "tools": [_chat_tool(WEATHER)]}, "chat")
    assert first.reasoning == "Reasoning before step 1." and first.tool_calls
    messages += [{"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "sunny"}]
    second = brain_turn({"messages": messages, "tools": [_chat_tool(WEATHER)]}, "chat")
    assert second.reasoning == "Reasoning before step 2."
    assert second.text == "The tool returned: sunny"


def test_brain_turn_reasons_like_openai_on_the_responses_wire() -> None:
    body = {"input": REASON + "hi", "reasoning": {"summary": "auto"}}
    turn = brain_turn({**body, "include": ["reasoning.encrypted_content"]}, "responses")
    assert turn.reasoning is None and turn.reasoning_summary == ["Reasoning before step 1."]
    assert turn.encrypted_content == "upstream-sealed-step-1"
    plain = brain_turn({"input": REASON + "hi"}, "responses")
    assert plain.reasoning_summary is None and plain.encrypted_content is None
