"""Prompt templates kept in the store: an operator puts versions through the admin endpoint,
requests and openai-agents name them like configured ones (issue #19), on both stores."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner
from openai import AsyncOpenAI

from responses_gateway.testing.script import ScriptedUpstream, Turn

from .conftest import MODELS, Stack

pytestmark = pytest.mark.stores("dynamodb", "sqlite")

V1 = {"instructions": "You sell {{product}}."}
V2 = {
    "instructions": "You sell {{product}} to {{customer}}.",
    "input": [{"role": "user", "content": "I am {{customer}}."}],
}
VARIABLES = {"product": "tea", "customer": "Bo"}


def _put(http: httpx.Client, prompt_id: str, **body: Any) -> httpx.Response:
    return http.post(f"/organization/prompts/{prompt_id}/versions", json=body)


def _seen(upstream: ScriptedUpstream) -> str:
    request = upstream.model_requests()[-1]
    return request.prompt if request.prompt is not None else str(request.json)


def test_an_operator_adds_versions_and_requests_resolve_them(
    http: httpx.Client, client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    prompt_id, model = "pmpt_store", MODELS["harmony"]
    first = _put(http, prompt_id, **V1)
    second = _put(http, prompt_id, **V2)
    pinned = _put(http, prompt_id, version="draft", instructions="Draft {{product}}", default=False)

    assert first.status_code == 200, first.text
    assert first.json() == {"id": prompt_id, "object": "prompt.version", "version": "1",
                            **V1, "default": True}  # fmt: skip
    assert (second.json()["version"], second.json()["default"]) == ("2", True)
    assert (pinned.json()["version"], pinned.json()["default"]) == ("draft", False)
    listed = http.get(f"/organization/prompts/{prompt_id}").json()
    assert (listed["source"], listed["default_version"]) == ("store", "2")
    assert listed["versions"] == {"1": V1, "2": V2, "draft": {"instructions": "Draft {{product}}"}}

    upstream.push(Turn(text="ok"), Turn(text="ok"))
    latest = client.responses.create(
        model=model, input="hi", prompt={"id": prompt_id, "variables": VARIABLES}
    )
    assert "You sell tea to Bo." in _seen(upstream)
    assert _seen(upstream).index("I am Bo.") < _seen(upstream).index("hi")
    assert latest.prompt is not None and latest.prompt.version == "2"
    old: Any = {"id": prompt_id, "version": "1", "variables": {"product": "tea"}}
    client.responses.create(model=model, input="hi", prompt=old)
    assert "You sell tea." in _seen(upstream)
    assert "I am" not in _seen(upstream)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"version": "1", **V1}, "already has a version '1'"),
        ({"instructions": 3}, "Invalid type for 'instructions': expected a string"),
        ({}, "needs instructions or input"),
    ],
)
def test_a_bad_version_is_refused_and_nothing_changes(
    http: httpx.Client, body: Any, message: str
) -> None:
    _put(http, "pmpt_store_bad", version="1", **V1)

    answer = _put(http, "pmpt_store_bad", **body)

    assert answer.status_code == 400
    assert message in answer.json()["error"]["message"]
    assert http.get("/organization/prompts/pmpt_store_bad").json()["versions"] == {"1": V1}


def test_configured_prompts_win_and_unknown_ones_are_refused_before_any_model_call(
    http: httpx.Client, client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    _put(http, "pmpt_store_known", **V1)

    configured = _put(http, "pmpt_support", **V1)
    assert configured.status_code == 400
    assert "defined in the gateway configuration" in configured.json()["error"]["message"]
    assert http.get("/organization/prompts/pmpt_support").json()["source"] == "configuration"
    assert http.get("/organization/prompts/pmpt_store_nope").status_code == 404
    bad: list[tuple[Any, int, str]] = [
        ({"id": "pmpt_store_nope"}, 404, "prompt.id"),
        ({"id": "pmpt_store_known", "version": "7", "variables": {"product": "x"}}, 400,
         "prompt.version"),
    ]  # fmt: skip
    for prompt, status, param in bad:
        with pytest.raises(openai.APIStatusError) as caught:
            client.responses.create(model="scripted-chat", input="hi", prompt=prompt)
        assert (caught.value.status_code, caught.value.body["param"]) == (status, param)  # type: ignore[index]
    assert upstream.model_requests() == []


async def test_a_stored_prompt_with_versions_and_variables_drives_openai_agents(
    stack: Stack, http: httpx.Client, upstream: ScriptedUpstream
) -> None:
    prompt_id, model = "pmpt_agents", MODELS["chat"]
    _put(http, prompt_id, **V1)
    _put(http, prompt_id, **V2)
    upstream.push(Turn(text="Hello Bo"), Turn(text="Tea it is"))
    client = AsyncOpenAI(base_url=stack.base_url, api_key="sk-client", max_retries=0)
    run_config = RunConfig(tracing_disabled=True)

    for version, variables, answer, shown in [
        ("2", VARIABLES, "Hello Bo", "You sell tea to Bo."),
        ("1", {"product": "tea"}, "Tea it is", "You sell tea."),
    ]:
        agent = Agent(
            name="seller",
            prompt={"id": prompt_id, "version": version, "variables": variables},
            model=OpenAIResponsesModel(model=model, openai_client=client),
        )
        result = await Runner.run(agent, "hi", run_config=run_config)
        assert result.final_output == answer
        assert shown in _seen(upstream)
