"""pydantic-ai's ``OpenAIResponsesModel`` (pydantic-ai-slim[openai], pinned) over both wires.

An agent run with a tool: pydantic-ai sends the tool definition, runs the model's call and
sends its result back; the run's final output is the model's answer to that result.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

from responses_gateway.testing.brain import call_block

from .conftest import CLIENT_KEY, Stack


async def test_agent_run_with_a_tool(stack: Stack, upstream: object, wire: str, model: str) -> None:
    provider = OpenAIProvider(base_url=stack.base_url, api_key=CLIENT_KEY)
    agent = Agent(OpenAIResponsesModel(model, provider=provider), instructions="Be brief.")
    seen: list[str] = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        seen.append(city)
        return f"sunny in {city}"

    result = await agent.run(call_block("get_weather", {"city": "Lima"}))
    assert seen == ["Lima"]
    assert result.output == "The tool returned: sunny in Lima"
    kinds = [part.part_kind for message in result.all_messages() for part in message.parts]
    assert kinds.count("tool-call") == 1 and kinds.count("tool-return") == 1

    streamed: list[str] = []
    async with agent.run_stream("hello pydantic") as run:
        async for text in run.stream_text(delta=True):
            streamed.append(text)
    assert "".join(streamed) == "You said: hello pydantic (user turns: 1)"
    assert len(stack.model_requests(wire)) == 3
