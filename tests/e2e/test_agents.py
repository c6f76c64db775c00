"""openai-agents runs against the local gateway (the demo model) unchanged.

Two-turn agents: one chained with ``previous_response_id``, one remembered through an
``OpenAIConversationsSession`` (the Conversations items endpoints). A function tool makes the
first turn a real tool loop run by the agents SDK.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agents import (
    Agent,
    OpenAIConversationsSession,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)
from openai import AsyncOpenAI

from responses_gateway.testing.script import ScriptedUpstream

from .conftest import Stack


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.fixture
def demo(upstream: ScriptedUpstream) -> Iterator[ScriptedUpstream]:
    upstream.demo = True
    try:
        yield upstream
    finally:
        upstream.demo = False


def _agent(stack: Stack, model: str) -> Agent:
    client = AsyncOpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    return Agent(
        name="weather",
        instructions="Answer briefly.",
        model=OpenAIResponsesModel(model=model, openai_client=client),
        tools=[get_weather],
    )


RUN = RunConfig(tracing_disabled=True)


def _sent(upstream: ScriptedUpstream) -> str:
    """What the last model call was shown, as text (a harmony prompt is text already)."""
    request = upstream.model_requests()[-1]
    if request.prompt is not None:
        return request.prompt
    return str(request.json.get("messages") or request.json.get("input"))


async def test_agent_two_turns_with_previous_response_id(
    stack: Stack, demo: ScriptedUpstream, model: str
) -> None:
    agent = _agent(stack, model)
    first = await Runner.run(agent, "What is the weather in Paris?", run_config=RUN)
    assert first.final_output == "The tool returned: sunny in Paris"
    assert first.last_response_id is not None

    second = await Runner.run(
        agent,
        "Thanks, and hello",
        previous_response_id=first.last_response_id,
        run_config=RUN,
    )
    assert second.final_output == "Hello! You said: Thanks, and hello"
    assert "sunny in Paris" in _sent(demo)  # the history came from the stored chain


async def test_agent_two_turns_with_conversations_session(
    stack: Stack, demo: ScriptedUpstream, model: str
) -> None:
    client = AsyncOpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    session = OpenAIConversationsSession(openai_client=client)
    agent = _agent(stack, model)
    first = await Runner.run(agent, "Weather in Rome?", session=session, run_config=RUN)
    assert first.final_output == "The tool returned: sunny in Rome"
    second = await Runner.run(agent, "Hello again", session=session, run_config=RUN)
    assert second.final_output == "Hello! You said: Hello again"

    items = await session.get_items()
    roles = [item.get("role") or item.get("type") for item in items]  # type: ignore[union-attr]
    assert roles[0] == "user" and "function_call" in roles and roles[-1] == "assistant"
    assert "sunny in Rome" in _sent(demo)
