"""Operator prompt templates (``prompt``) over every wire, with the SDK and openai-agents."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner
from openai import AsyncOpenAI

from responses_gateway.testing.script import ScriptedUpstream, Turn

from .conftest import Stack

VARIABLES = {"product": "Acme", "customer": "Ann"}


def _seen(upstream: ScriptedUpstream) -> str:
    """Everything the last model call was shown, as text."""
    request = upstream.model_requests()[-1]
    return request.prompt if request.prompt is not None else str(request.json)


def test_a_prompt_resolves_into_instructions_and_input_and_is_echoed(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="ok"))

    response = client.responses.create(
        model=model, input="hi", prompt={"id": "pmpt_support", "variables": VARIABLES}
    )

    seen = _seen(upstream)
    assert "You help with Acme, for Ann." in seen
    assert seen.index("My name is Ann.") < seen.index("hi")
    assert response.prompt is not None
    assert response.prompt.model_dump() == {
        "id": "pmpt_support",
        "version": "2",
        "variables": VARIABLES,
    }
    assert response.instructions == "You help with Acme, for Ann."


def test_a_prompt_version_is_honoured(
    client: openai.OpenAI, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="ok"))
    prompt: Any = {"id": "pmpt_support", "version": "1", "variables": {"product": "Acme"}}

    client.responses.create(model=model, input="hi", prompt=prompt)

    assert "You help with Acme." in _seen(upstream)
    assert "My name is" not in _seen(upstream)


@pytest.mark.parametrize(
    ("prompt", "status", "param"),
    [
        ({"id": "pmpt_nope"}, 404, "prompt.id"),
        ({"id": "pmpt_support", "version": "9", "variables": VARIABLES}, 400, "prompt.version"),
        ({"id": "pmpt_support", "variables": {"product": "Acme"}}, 400, "prompt.variables"),
        ({"id": "pmpt_support", "variables": {**VARIABLES, "x": "y"}}, 400, "prompt.variables"),
    ],
)
def test_a_bad_prompt_is_refused_before_any_model_call(
    client: openai.OpenAI, upstream: ScriptedUpstream, prompt: Any, status: int, param: str
) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="scripted-chat", input="hi", prompt=prompt)

    assert caught.value.status_code == status
    assert caught.value.body["param"] == param  # type: ignore[index]
    assert upstream.model_requests() == []


async def test_openai_agents_agent_with_a_stored_prompt(
    stack: Stack, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="Hello Ann"))
    client = AsyncOpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    agent = Agent(
        name="support",
        prompt={"id": "pmpt_support", "version": "2", "variables": VARIABLES},
        model=OpenAIResponsesModel(model=model, openai_client=client),
    )

    result = await Runner.run(agent, "hi", run_config=RunConfig(tracing_disabled=True))

    assert result.final_output == "Hello Ann"
    assert "You help with Acme, for Ann." in _seen(upstream)
