"""Minimal instances of every input item type of the openai SDK, checked against its types.

Owns :data:`INPUT_INSTANCES`: for each ``ResponseInputItemParam`` ``type``, the smallest input
list that carries one (a call output comes after its call, so the pair is sent together), and
:func:`validated`, which checks each item against the installed SDK's TypedDicts with pydantic.
The coverage test sends them through the gateway over every wire. It decides nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["INPUT_INSTANCES", "validated"]

CALL = "call_contract_1"

_SHOT = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="}
_COMPUTER: list[dict[str, Any]] = [
    {"type": "computer_call", "id": "cu_1", "call_id": CALL, "action": {"type": "screenshot"},
     "pending_safety_checks": [], "status": "completed"},
    {"type": "computer_call_output", "call_id": CALL, "output": _SHOT},
]  # fmt: skip
_FUNCTION: list[dict[str, Any]] = [
    {"type": "function_call", "call_id": CALL, "name": "lookup", "arguments": "{}"},
    {"type": "function_call_output", "call_id": CALL, "output": "42"},
]
_TOOL_SEARCH: list[dict[str, Any]] = [
    {"type": "tool_search_call", "id": "tsc_1", "call_id": CALL, "arguments": {"query": "x"},
     "execution": "client", "status": "completed"},
    {"type": "tool_search_output", "call_id": CALL, "execution": "client",
     "status": "completed", "tools": []},
]  # fmt: skip
_LOCAL_SHELL: list[dict[str, Any]] = [
    {"type": "local_shell_call", "id": "lsh_1", "call_id": CALL, "status": "completed",
     "action": {"type": "exec", "command": ["ls"], "env": {}}},
    {"type": "local_shell_call_output", "id": CALL, "output": "a.txt"},
]  # fmt: skip
_SHELL: list[dict[str, Any]] = [
    {"type": "shell_call", "call_id": CALL, "action": {"commands": ["ls"]}, "status": "completed"},
    {"type": "shell_call_output", "call_id": CALL,
     "output": [{"stdout": "a.txt", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]},
]  # fmt: skip
_PATCH: list[dict[str, Any]] = [
    {"type": "apply_patch_call", "call_id": CALL, "status": "completed",
     "operation": {"type": "create_file", "path": "a.txt", "diff": "+hi\n"}},
    {"type": "apply_patch_call_output", "call_id": CALL, "status": "completed", "output": "ok"},
]  # fmt: skip
_CUSTOM: list[dict[str, Any]] = [
    {"type": "custom_tool_call", "call_id": CALL, "name": "grep", "input": "x"},
    {"type": "custom_tool_call_output", "call_id": CALL, "output": "found"},
]
_MCP_LIST = {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "docs",
             "tools": [{"name": "find", "input_schema": {"type": "object"}}]}  # fmt: skip
_PROGRAM: list[dict[str, Any]] = [
    {"type": "program", "id": "prg_1", "call_id": CALL, "code": "print(1)", "fingerprint": "f"},
    {"type": "program_output", "id": "prgo_1", "call_id": CALL, "result": "1",
     "status": "completed"},
]  # fmt: skip

INPUT_INSTANCES: dict[str, list[dict[str, Any]]] = {
    "message": [{"type": "message", "role": "user", "content": "hello"}],
    "file_search_call": [
        {"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed"}
    ],
    "computer_call": _COMPUTER,
    "computer_call_output": _COMPUTER,
    "web_search_call": [
        {
            "type": "web_search_call",
            "id": "ws_1",
            "status": "completed",
            "action": {"type": "search", "query": "weather"},
        }
    ],  # fmt: skip
    "function_call": _FUNCTION,
    "function_call_output": [{"type": "function_call_output", "output": "42"}],
    "tool_search_call": _TOOL_SEARCH,
    "tool_search_output": _TOOL_SEARCH,
    "additional_tools": [{"type": "additional_tools", "role": "developer", "tools": []}],
    "configuration_update": [
        {"type": "configuration_update", "reasoning": {"effort": "low"}},
    ],
    "reasoning": [{"type": "reasoning", "id": "rs_1", "summary": []}],
    "compaction": [{"type": "compaction", "encrypted_content": "not-sealed"}],
    "image_generation_call": [
        {"type": "image_generation_call", "id": "ig_1", "result": "AA==", "status": "completed"}
    ],
    "code_interpreter_call": [
        {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "code": "1+1",
            "container_id": "c",
            "outputs": [{"type": "logs", "logs": "2"}],
            "status": "completed",
        }
    ],  # fmt: skip
    "local_shell_call": _LOCAL_SHELL,
    "local_shell_call_output": _LOCAL_SHELL,
    "shell_call": _SHELL,
    "shell_call_output": _SHELL,
    "apply_patch_call": _PATCH,
    "apply_patch_call_output": _PATCH,
    "mcp_list_tools": [_MCP_LIST],
    "mcp_approval_request": [
        _MCP_LIST,
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "docs",
            "name": "find",
            "arguments": "{}",
        },
    ],  # fmt: skip
    "mcp_approval_response": [
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_missing", "approve": True}
    ],
    "mcp_call": [
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "docs",
            "name": "find",
            "arguments": "{}",
            "output": "x",
            "status": "completed",
        }
    ],  # fmt: skip
    "custom_tool_call_output": _CUSTOM,
    "custom_tool_call": _CUSTOM,
    "compaction_trigger": [{"type": "compaction_trigger"}],
    "item_reference": [{"type": "item_reference", "id": "msg_not_stored"}],
    "program": _PROGRAM,
    "program_output": _PROGRAM,
}
"""Input item type -> a minimal input list holding it (after a user message)."""


def validated() -> dict[str, list[str]]:
    """Item type -> the SDK validation errors of its instance's items (empty when valid)."""
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter, ValidationError

    adapter: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)
    problems: dict[str, list[str]] = {}
    for name, items in INPUT_INSTANCES.items():
        errors: list[str] = []
        for item in items:
            try:
                adapter.validate_python(item, strict=False)
            except ValidationError as exc:
                errors.append(str(exc)[:300])
        problems[name] = errors
    return problems
