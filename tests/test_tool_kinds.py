"""The tool-kind table: every kind on every wire, call items both ways, replay, policies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from responses_gateway.errors import InvalidRequestError
from responses_gateway.tool_kinds import (
    BACKED_KINDS,
    CLIENT_CALL_ITEM_TYPES,
    ITEM_KINDS,
    KINDS,
    Exposed,
    hosted_tools_without_backend,
    kind_of,
    lower_items,
    lowered_owner,
    mcp_choice_as_functions,
    search_tools,
    shown,
    tool_view,
)

FUNCTION = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
NAMESPACE = {
    "type": "namespace",
    "name": "functions",
    "description": "Codex tools.",
    "tools": [
        {"type": "custom", "name": "exec", "format": {"type": "text"}},
        {"type": "function", "name": "wait", "parameters": {"type": "object"}},
    ],
}
CUSTOM = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Patch files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
}

# kind -> (its tool definition, exposed name, model arguments, the item fields they become)
CLIENT_KINDS: dict[str, tuple[dict[str, Any], str, dict[str, Any], dict[str, Any]]] = {
    "function": (FUNCTION, "get_weather", {"city": "Paris"}, {"name": "get_weather"}),
    "custom": (CUSTOM, "apply_patch", {"input": "*** Begin"}, {"input": "*** Begin"}),
    "shell": (
        {"type": "shell"},
        "shell",
        {"commands": ["ls"], "timeout_ms": 5},
        {"action": {"commands": ["ls"], "timeout_ms": 5, "max_output_length": None}},
    ),
    "local_shell": (
        {"type": "local_shell"},
        "local_shell",
        {"command": ["ls"], "env": {"A": "1"}},
        {
            "action": {
                "type": "exec",
                "command": ["ls"],
                "env": {"A": "1"},
                "timeout_ms": None,
                "user": None,
                "working_directory": None,
            }
        },
    ),
    "apply_patch": (
        {"type": "apply_patch"},
        "apply_patch",
        {"type": "delete_file", "path": "a.txt"},
        {"operation": {"type": "delete_file", "path": "a.txt"}},
    ),
    "computer": (
        {"type": "computer"},
        "computer",
        {"action": {"type": "screenshot"}},
        {"action": {"type": "screenshot"}, "pending_safety_checks": []},
    ),
    "tool_search": (
        {"type": "tool_search", "execution": "client"},
        "tool_search",
        {"query": "agents"},
        {"arguments": {"query": "agents"}, "execution": "client"},
    ),
}
HOSTED = ["web_search", "file_search", "code_interpreter", "image_generation"]
BACKED = frozenset({"web_search"})


def test_table_covers_every_kind_once() -> None:
    assert sorted(k.name for k in KINDS) == sorted([*CLIENT_KINDS, *HOSTED])
    types = [t for k in KINDS for t in k.tool_types]
    assert len(types) == len(set(types))
    assert (
        kind_of("web_search_preview") is kind_of("web_search_2025_08_26") is kind_of("web_search")
    )
    assert kind_of("computer_use_preview") is kind_of("computer")
    assert kind_of("mcp") is None and kind_of("namespace") is None


@pytest.mark.parametrize("kind_name", sorted(CLIENT_KINDS))
def test_client_kind_lowers_to_a_function_and_its_call_round_trips(kind_name: str) -> None:
    tool, exposed_name, arguments, fields = CLIENT_KINDS[kind_name]
    view = tool_view([tool], [], "auto", "chat")

    (offered,) = view.tools
    assert offered["type"] == "function" and offered["name"] == exposed_name
    assert offered["parameters"]["type"] == "object"
    binding = view.calls[exposed_name]
    item = binding.item(json.dumps(arguments))
    kind = binding.kind
    assert item["type"] == kind.item_type
    assert {k: item[k] for k in fields} == fields
    assert kind.item_type in CLIENT_CALL_ITEM_TYPES
    # replay: the item lowers back to a call of the same name whose arguments rebuild the item
    (call,) = lower_items([{**item, "id": "x_1", "call_id": "call_1", "namespace": None}])
    assert call["name"] == exposed_name
    assert binding.item(call["arguments"]) == item


@pytest.mark.parametrize("kind_name", HOSTED)
@pytest.mark.parametrize("wire", ["chat", "harmony"])
def test_hosted_kind_is_omitted_on_function_wires(kind_name: str, wire: str) -> None:
    view = tool_view([{"type": kind_name}, FUNCTION], [], "auto", wire)

    assert [t["name"] for t in view.tools] == ["get_weather"]
    assert view.omitted == [kind_name]
    assert hosted_tools_without_backend([{"type": kind_name}], wire, "omit") == [kind_name]
    with pytest.raises(InvalidRequestError) as error:
        hosted_tools_without_backend([FUNCTION, {"type": kind_name}], wire, "reject")
    assert error.value.param == "tools[1].type"
    assert kind_name in error.value.message


def test_responses_wire_relays_tools_transcript_and_choice_unchanged() -> None:
    tools = [FUNCTION, NAMESPACE, CUSTOM, {"type": "web_search"}, {"type": "mcp"}]
    transcript = [{"type": "additional_tools", "id": "at_1", "tools": [NAMESPACE]}]
    choice = {"type": "custom", "name": "apply_patch"}

    view = tool_view(tools, transcript, choice, "responses")

    assert view.tools == tools[:4]
    assert view.input == transcript
    assert view.tool_choice == choice
    assert view.calls == {} and view.omitted == []
    assert hosted_tools_without_backend(tools, "responses", "reject") == []


def test_namespace_tools_are_flattened_with_their_namespace_kept_on_the_call() -> None:
    view = tool_view([NAMESPACE], [], None, "chat")

    assert [t["name"] for t in view.tools] == ["functions__exec", "functions__wait"]
    assert view.calls["functions__exec"].item('{"input": "ls"}') == {
        "type": "custom_tool_call",
        "input": "ls",
        "name": "exec",
        "namespace": "functions",
    }
    assert view.calls["functions__wait"].item("{}") == {
        "type": "function_call",
        "arguments": "{}",
        "name": "wait",
        "namespace": "functions",
    }


def test_namespaced_history_replays_under_the_exposed_name_never_doubled() -> None:
    items = [
        {"type": "function_call", "call_id": "c1", "name": "wait", "namespace": "functions"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "exec", "namespace": "functions"},
    ]

    lowered = lower_items(items)

    assert [i.get("name") for i in lowered] == ["functions__wait", None, "functions__exec"]
    assert lower_items(lowered) == lowered  # lowering twice changes nothing


def test_additional_tools_item_is_offered_and_never_sent_upstream_on_function_wires() -> None:
    item = {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": [NAMESPACE]}
    user = {"type": "message", "role": "user", "content": "hi"}

    view = tool_view([], [item, user], "auto", "harmony")

    assert view.input == [user]
    assert list(view.calls) == ["functions__exec", "functions__wait"]


def test_deferred_tools_stay_hidden_until_a_tool_search_output_loads_them() -> None:
    deferred = {**NAMESPACE, "tools": [{**t, "defer_loading": True} for t in NAMESPACE["tools"]]}
    search = {"type": "tool_search", "execution": "client"}

    before = tool_view([search, deferred], [], "auto", "chat")
    loaded = {"type": "tool_search_output", "call_id": "c1", "tools": [NAMESPACE]}
    after = tool_view([search, deferred], [loaded], "auto", "chat")

    assert list(before.calls) == ["tool_search"]
    assert list(after.calls) == ["tool_search", "functions__exec", "functions__wait"]
    assert after.input == [
        {"type": "function_call_output", "call_id": "c1", "output": "Loaded tools: functions"}
    ]


@pytest.mark.parametrize(
    ("choice", "lowered"),
    [
        ("required", "required"),
        ({"type": "function", "name": "get_weather"}, {"type": "function", "name": "get_weather"}),
        (
            {"type": "function", "name": "wait", "namespace": "functions"},
            {"type": "function", "name": "functions__wait"},
        ),
        ({"type": "custom", "name": "apply_patch"}, {"type": "function", "name": "apply_patch"}),
        ({"type": "shell"}, {"type": "function", "name": "shell"}),
        ({"type": "apply_patch"}, {"type": "function", "name": "apply_patch"}),
        (
            {"type": "mcp", "server_label": "docs", "name": "search"},
            {"type": "function", "name": "docs__search"},
        ),
        ({"type": "mcp", "server_label": "docs"}, "required"),
        ({"type": "web_search_preview"}, "auto"),
        ({"type": "allowed_tools", "mode": "required", "tools": []}, "required"),
    ],
)
def test_tool_choice_maps_to_the_exposed_function(choice: Any, lowered: Any) -> None:
    assert tool_view([FUNCTION], [], choice, "chat").tool_choice == lowered


def test_custom_call_with_raw_text_arguments_takes_the_text_as_input() -> None:
    binding = Exposed("apply_patch", ITEM_KINDS["custom_tool_call"], CUSTOM)

    assert binding.item("*** Begin Patch")["input"] == "*** Begin Patch"


@pytest.mark.parametrize(
    ("item", "text"),
    [
        ({"type": "custom_tool_call_output", "call_id": "c", "output": "done"}, "done"),
        (
            {
                "type": "custom_tool_call_output",
                "call_id": "c",
                "output": [{"type": "input_text", "text": "a"}],
            },
            "a",
        ),
        ({"type": "local_shell_call_output", "call_id": "c", "output": "out"}, "out"),
        (
            {"type": "apply_patch_call_output", "call_id": "c", "status": "failed", "output": "x"},
            "failed: x",
        ),
        (
            {
                "type": "shell_call_output",
                "call_id": "c",
                "output": [{"stdout": "a", "stderr": "", "outcome": {"type": "exit"}}],
            },
            '[{"stdout": "a", "stderr": "", "outcome": {"type": "exit"}}]',
        ),
        (
            {
                "type": "computer_call_output",
                "call_id": "c",
                "output": {"type": "computer_screenshot", "image_url": "data:,"},
            },
            '{"type": "computer_screenshot", "image_url": "data:,"}',
        ),
    ],
)
def test_every_output_item_replays_as_a_function_call_output(item: Any, text: str) -> None:
    assert lower_items([item]) == [{"type": "function_call_output", "call_id": "c", "output": text}]


def test_hosted_items_are_left_out_of_a_function_transcript() -> None:
    items = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "image_generation_call", "id": "ig_1", "status": "completed"},
        {"type": "message", "role": "user", "content": "hi"},
    ]

    assert lower_items(items) == items[2:]


def test_unknown_tool_type_on_a_function_wire_is_a_400_naming_it() -> None:
    with pytest.raises(InvalidRequestError) as error:
        hosted_tools_without_backend([{"type": "quantum_oracle"}], "chat", "omit")

    assert error.value.param == "tools[0].type"


def test_lowered_server_tool_search_call_is_the_gateways_and_a_client_one_the_clients() -> None:
    server = tool_view([{"type": "tool_search"}], [], "auto", "chat").calls["tool_search"]
    client = tool_view([{"type": "tool_search", "execution": "client"}], [], "auto", "chat")

    assert lowered_owner(server.item('{"query": "x"}')) == "search"
    assert lowered_owner(client.calls["tool_search"].item('{"query": "x"}')) == "client"
    assert lowered_owner({"type": "tool_search_output", "execution": "server"}) == "client"


def test_search_tools_ranks_deferred_tools_by_shared_words_and_keeps_namespaces() -> None:
    deferred = {
        "type": "namespace",
        "name": "agents",
        "description": "Agents.",
        "tools": [
            {"type": "function", "name": "spawn_agent", "defer_loading": True},
            {
                "type": "function",
                "name": "close_agent",
                "description": "Close.",
                "defer_loading": True,
            },
            {"type": "function", "name": "visible"},
        ],
    }
    loose = {"type": "function", "name": "close_file", "defer_loading": True}
    extra = {"type": "additional_tools", "tools": [loose]}

    found = search_tools([deferred], [extra], {"query": "close agent"})
    best = search_tools([deferred], [extra], {"query": "close agent", "limit": 1})

    close = {"type": "function", "name": "close_agent", "description": "Close."}
    assert found == [
        {
            "type": "namespace",
            "name": "agents",
            "description": "Agents.",
            "tools": [close, {"type": "function", "name": "spawn_agent"}],
        },
        {"type": "function", "name": "close_file"},
    ]
    assert best == [{**found[0], "tools": [close]}]
    assert search_tools([deferred], [], {"query": "nothing matches"}) == []


def test_backed_hosted_kind_is_lowered_and_its_run_replays_with_its_result() -> None:
    view = tool_view([{"type": "web_search"}], [], {"type": "web_search"}, "chat", backed=BACKED)
    call = {**view.calls["web_search"].item('{"query": "q"}'), "id": "ws_1"}

    assert [t["name"] for t in view.tools] == ["web_search"] and view.omitted == []
    assert view.tool_choice == {"type": "function", "name": "web_search"}
    assert call == {
        "type": "web_search_call",
        "id": "ws_1",
        "action": {"type": "search", "query": "q"},
    }
    assert lowered_owner({**call, "status": "completed"}) == "backend"  # whatever its status
    assert lower_items([call], {"ws_1": "results"}) == [
        {
            "type": "function_call",
            "call_id": "ws_1",
            "name": "web_search",
            "arguments": '{"query": "q"}',
        },
        {"type": "function_call_output", "call_id": "ws_1", "output": "results"},
    ]
    assert lower_items([call]) == []  # an item carrying no result (no sources) is left out
    assert hosted_tools_without_backend([{"type": "web_search"}], "chat", "reject", BACKED) == []


# (tool, model arguments, backend value, backend text, result fields, seen, include value)
HOSTED_RUNS: list[tuple[dict[str, Any], str, str, str, dict[str, Any], str, str | None]] = [
    (
        {"type": "web_search"},
        '{"query": "q"}',
        "q",
        "1. a https://a.example/x (and https://b.example) https://a.example/x",
        {"action": {"type": "search", "query": "q", "sources": [
            {"type": "url", "url": "https://a.example/x"},
            {"type": "url", "url": "https://b.example"}]}},
        "Sources:\nhttps://a.example/x\nhttps://b.example",
        "web_search_call.action.sources",
    ),
    (
        {"type": "file_search", "vector_store_ids": ["vs"]},
        '{"query": "q"}',
        "q",
        "plain passage",
        {"queries": ["q"], "results": [{"attributes": None, "file_id": None, "filename": None,
                                        "score": None, "text": "plain passage"}]},
        "[1] plain passage",
        "file_search_call.results",
    ),
    (
        {"type": "code_interpreter", "container": "cntr_1"},
        '{"code": "1+1"}',
        "1+1",
        '{"logs": "2", "images": ["https://img.example/p.png"]}',
        {"code": "1+1", "container_id": "cntr_1", "outputs": [
            {"type": "logs", "logs": "2"}, {"type": "image", "url": "https://img.example/p.png"}]},
        "2\n[image: https://img.example/p.png]",
        "code_interpreter_call.outputs",
    ),
    (
        {"type": "image_generation"},
        '{"prompt": "a cat"}',
        "a cat",
        "iVBOR",
        {"result": "iVBOR", "revised_prompt": "a cat"},
        "Image generated (prompt: a cat).",
        None,
    ),
]  # fmt: skip


@pytest.mark.parametrize("run", HOSTED_RUNS, ids=lambda r: str(r[0]["type"]))
def test_backed_kind_maps_its_call_and_result_into_its_item_and_replays_it(run: Any) -> None:
    tool, arguments, value, text, fields, seen, include = run
    kind = kind_of(tool["type"])
    assert kind is not None and kind.backend is BACKED_KINDS[kind.name]
    view = tool_view([tool], [], "auto", "chat", backed=frozenset({kind.name}))
    call = {**view.calls[kind.name].item(arguments), "id": "h_1", "status": "completed"}

    assert kind.backend.value(call) == value
    call.update(kind.backend.result(call, text))
    assert {k: v for k, v in call.items() if k in fields} == fields

    assert lower_items([call]) == [
        {"type": "function_call", "call_id": "h_1", "name": kind.name,
         "arguments": kind.arguments(call) if kind.arguments else ""},
        {"type": "function_call_output", "call_id": "h_1", "output": seen},
    ]  # fmt: skip
    assert lower_items([{**call, "status": "failed"}])[1]["output"] == (
        f"The {kind.name} call failed."
    )
    assert shown(call, [include] if include else []) is call
    if include is not None:
        hidden = shown(call, [])
        assert hidden is not call and hidden != call
        assert lower_items([hidden]) == []  # what the client holds without include
        assert call == {**call}  # the stored item is untouched


def test_shown_leaves_other_items_alone() -> None:
    message = {"type": "message", "role": "assistant", "content": []}
    assert shown(message, []) is message
    relayed = {"type": "web_search_call", "id": "ws", "action": {"type": "search", "query": "q"}}
    assert shown(relayed, []) is relayed


def test_mcp_choice_as_functions_names_the_gateways_functions_for_a_responses_upstream() -> None:
    offered = ["calc__add", "calc__mul", "other__x", "get_weather"]
    allowed = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [
            {"type": "mcp", "server_label": "calc"},
            {"type": "mcp", "server_label": "other", "name": "x"},
            {"type": "function", "name": "get_weather"},
        ],
    }

    assert mcp_choice_as_functions(
        {"type": "mcp", "server_label": "calc", "name": "add"}, offered
    ) == {"type": "function", "name": "calc__add"}
    assert mcp_choice_as_functions({"type": "mcp", "server_label": "calc"}, offered) == ("required")
    assert mcp_choice_as_functions(allowed, offered) == {
        **allowed,
        "tools": [
            {"type": "function", "name": "calc__add"},
            {"type": "function", "name": "calc__mul"},
            {"type": "function", "name": "other__x"},
            {"type": "function", "name": "get_weather"},
        ],
    }
    for unchanged in ("auto", {"type": "function", "name": "f"}, {"type": "web_search"}):
        assert mcp_choice_as_functions(unchanged, offered) == unchanged
