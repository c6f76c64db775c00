"""openai-agents (pinned) with its client-run built-in tools, over both wires.

``ShellTool`` (a local executor running the commands in a temporary directory),
``ApplyPatchTool`` (an editor applying V4A diffs there) and a freeform ``CustomTool``: on the
Responses wire the scripted model answers with their own items (``shell_call``,
``apply_patch_call``, ``custom_tool_call``); on the chat wire the gateway lowers them to
functions and turns the model's function calls back into those items. Either way the agents SDK
runs the call and sends its output item back; the model then answers with the result.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    ApplyPatchTool,
    CustomTool,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    ShellTool,
    Tool,
)
from agents.apply_diff import apply_diff
from agents.editor import ApplyPatchOperation, ApplyPatchResult
from agents.tool import ShellCallOutcome, ShellCommandOutput, ShellCommandRequest, ShellResult
from openai import AsyncOpenAI

from responses_gateway.testing.brain import call_block

from .conftest import CLIENT_KEY, Stack

RUN = RunConfig(tracing_disabled=True)


def _agent(stack: Stack, model: str, tools: list[Tool]) -> Agent:
    client = AsyncOpenAI(base_url=stack.base_url, api_key=CLIENT_KEY, max_retries=0)
    return Agent(
        name="builder",
        instructions="Use your tools.",
        model=OpenAIResponsesModel(model=model, openai_client=client),
        tools=tools,
    )


class _Workspace:
    """A directory the shell executor and the patch editor work in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[str] = []
        self.operations: list[tuple[str, str]] = []

    def shell(self, request: ShellCommandRequest) -> ShellResult:
        outputs = []
        for command in request.data.action.commands:
            self.commands.append(command)
            done = subprocess.run(
                command, shell=True, cwd=self.root, capture_output=True, text=True, timeout=10
            )
            outcome = ShellCallOutcome(type="exit", exit_code=done.returncode)
            outputs.append(
                ShellCommandOutput(stdout=done.stdout, stderr=done.stderr, outcome=outcome)
            )
        return ShellResult(output=outputs)

    def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append(("create_file", operation.path))
        target = self.root / operation.path
        target.write_text(apply_diff("", operation.diff or "", mode="create"))
        return ApplyPatchResult(status="completed", output=f"created {operation.path}")

    def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append(("update_file", operation.path))
        target = self.root / operation.path
        target.write_text(apply_diff(target.read_text(), operation.diff or ""))
        return ApplyPatchResult(status="completed", output=f"updated {operation.path}")

    def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        self.operations.append(("delete_file", operation.path))
        (self.root / operation.path).unlink()
        return ApplyPatchResult(status="completed", output=f"deleted {operation.path}")


async def test_shell_tool_runs_commands(
    stack: Stack, upstream: object, wire: str, model: str, tmp_path: Path
) -> None:
    work = _Workspace(tmp_path)
    agent = _agent(stack, model, [ShellTool(executor=work.shell)])
    command = "echo from-agents > shell.txt && cat shell.txt"
    result = await Runner.run(agent, call_block("shell", {"commands": [command]}), run_config=RUN)
    assert work.commands == [command]
    assert (tmp_path / "shell.txt").read_text() == "from-agents\n"
    assert "from-agents" in result.final_output
    assert result.final_output.startswith("The tool returned: ")
    calls = [i.raw_item for i in result.new_items if i.type == "tool_call_item"]
    assert [_type(c) for c in calls] == ["shell_call"]


async def test_apply_patch_tool_edits_files(
    stack: Stack, upstream: object, wire: str, model: str, tmp_path: Path
) -> None:
    work = _Workspace(tmp_path)
    agent = _agent(stack, model, [ApplyPatchTool(editor=work)])
    operation = {"type": "create_file", "path": "notes.txt", "diff": "+first line\n+second line\n"}
    result = await Runner.run(agent, call_block("apply_patch", operation), run_config=RUN)
    assert work.operations == [("create_file", "notes.txt")]
    assert (tmp_path / "notes.txt").read_text() == "first line\nsecond line"
    assert result.final_output.startswith("The tool returned: ")
    assert "created notes.txt" in result.final_output
    calls = [i.raw_item for i in result.new_items if i.type == "tool_call_item"]
    assert [_type(c) for c in calls] == ["apply_patch_call"]


async def test_custom_tool_gets_freeform_input(
    stack: Stack, upstream: object, wire: str, model: str
) -> None:
    received: list[str] = []

    def shout(context: Any, text: str) -> str:
        received.append(text)
        return text.upper()

    tool = CustomTool(name="shout", description="Repeat the input loudly.", on_invoke_tool=shout)
    agent = _agent(stack, model, [tool])
    freeform = "line one\n{not: json}"
    result = await Runner.run(agent, call_block("shout", freeform), run_config=RUN)
    assert received == [freeform]
    assert result.final_output == "The tool returned: LINE ONE\n{NOT: JSON}"
    calls = [i.raw_item for i in result.new_items if i.type == "tool_call_item"]
    assert [_type(c) for c in calls] == ["custom_tool_call"]


def _type(item: Any) -> str:
    return str(item.get("type") if isinstance(item, dict) else item.type)
