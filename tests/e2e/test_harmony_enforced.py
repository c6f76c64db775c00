"""What harmony cannot enforce in decoding, the gateway instructs and checks (issue #19).

Over the scripted harmony upstream, with the official SDK: structured outputs (``text.format``,
``client.responses.parse``) come back schema-valid or fail visibly; ``tool_choice`` restricts
and instructs, and an answer that skips a forced call fails; ``parallel_tool_calls: false``
surfaces one call; ``top_logprobs`` with ``include`` returns the server's logprobs.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from pydantic import BaseModel, ValidationError

from responses_gateway.testing.fake_upstream import PIECE_LOGPROB
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn

from .conftest import MODELS

HARMONY = MODELS["harmony"]
WEATHER: Any = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
PING: Any = {"type": "function", "name": "ping", "parameters": {"type": "object"}}


class Place(BaseModel):
    city: str
    rank: int


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "rank": {"type": "integer"}},
    "required": ["city", "rank"],
    "additionalProperties": False,
}


def test_structured_output_parses_into_the_model_and_the_schema_reached_the_prompt(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text='{"city":"Oslo","rank":1}'))

    parsed = client.responses.parse(model=HARMONY, input="Best city?", text_format=Place)

    assert parsed.output_parsed == Place(city="Oslo", rank=1)
    prompt = upstream.model_requests()[-1].prompt or ""
    developer = prompt[prompt.index("<|start|>developer") :]
    assert "# Response Formats\n\n## Place\n\n" in developer
    assert '"required":["city","rank"]' in developer


def test_a_schema_invalid_answer_fails_and_never_passes_as_structured_output(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text='{"city":"Oslo"}'))
    message = (
        "The response breaks the request: the model's answer does not match the text.format "
        "'Place': the top level lacks the required property 'rank'."
    )

    with pytest.raises(openai.InternalServerError) as info:
        client.responses.parse(model=HARMONY, input="Best city?", text_format=Place)
    assert info.value.status_code == 502
    assert info.value.body == {
        "message": message,
        "type": "server_error",
        "param": None,
        "code": "invalid_model_output",
    }

    upstream.push(Turn(text='{"city":"Oslo"}'), Turn(text='{"city":"Oslo"}'))
    with (
        pytest.raises(ValidationError),  # the SDK's helper parses the text when it is done
        client.responses.stream(model=HARMONY, input="?", text_format=Place) as stream,
    ):
        list(stream)
    fmt: Any = {"format": {"type": "json_schema", "name": "Place", "schema": SCHEMA}}
    events = list(client.responses.create(model=HARMONY, input="?", text=fmt, stream=True))
    assert events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.error is not None
    assert (failed.error.code, failed.error.message) == ("server_error", message)
    assert [item.type for item in failed.output] == ["message"]


@pytest.mark.parametrize(
    ("choice", "tools", "shown"),
    [
        ("required", [WEATHER, PING], ["get_weather", "ping"]),
        ({"type": "function", "name": "ping"}, [WEATHER, PING], ["ping"]),
        (
            {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function",
                                                                    "name": "ping"}]},
            [WEATHER, PING],
            ["ping"],
        ),
    ],
)  # fmt: skip
def test_a_forced_tool_choice_restricts_instructs_and_returns_the_call(
    client: openai.OpenAI, upstream: ScriptedUpstream, choice: Any, tools: Any, shown: list[str]
) -> None:
    upstream.push(Turn(tool_calls=[ToolCall("ping", "{}")]))

    response = client.responses.create(
        model=HARMONY, input="Ping it", tools=tools, tool_choice=choice
    )

    assert [(item.type, getattr(item, "name", None)) for item in response.output] == [
        ("function_call", "ping")
    ]
    prompt = upstream.model_requests()[-1].prompt or ""
    assert [n for n in ("get_weather", "ping") if f"type {n} = " in prompt] == shown
    assert "before anything else; do not answer directly." in prompt


def test_an_answer_skipping_a_required_call_fails(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Pong."))

    with pytest.raises(openai.InternalServerError) as info:
        client.responses.create(model=HARMONY, input="Hi", tools=[PING], tool_choice="required")

    assert info.value.body["code"] == "invalid_model_output"  # type: ignore[index]


def test_tool_choice_none_shows_no_tools_and_auto_shows_all(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="a"), Turn(text="b"))

    client.responses.create(model=HARMONY, input="Hi", tools=[PING], tool_choice="none")
    client.responses.create(model=HARMONY, input="Hi", tools=[PING], tool_choice="auto")

    first, second = (r.prompt or "" for r in upstream.model_requests())
    assert "type ping" not in first
    assert "type ping = " in second
    assert "do not answer directly" not in second


def test_parallel_tool_calls_false_surfaces_one_call(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    calls = [ToolCall("get_weather", '{"city":"Oslo"}'), ToolCall("get_weather", '{"city":"Rome"}')]
    upstream.push(Turn(tool_calls=calls), Turn(tool_calls=calls))

    serial = client.responses.create(
        model=HARMONY, input="Two cities", tools=[WEATHER], parallel_tool_calls=False
    )
    parallel = client.responses.create(model=HARMONY, input="Two cities", tools=[WEATHER])

    assert [json.loads(getattr(i, "arguments", "{}")) for i in serial.output] == [{"city": "Oslo"}]
    assert len(parallel.output) == 2


def test_top_logprobs_with_include_returns_the_servers_logprobs(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    upstream.push(Turn(text="Hello there"))

    response = client.responses.create(
        model=HARMONY,
        input="Hi",
        top_logprobs=1,
        include=["message.output_text.logprobs"],
    )

    assert upstream.model_requests()[-1].json["logprobs"] == 1
    part = response.output[0].content[0]  # type: ignore[union-attr]
    assert part.type == "output_text"
    assert "".join(entry.token for entry in part.logprobs or []) == "Hello there"
    assert {entry.logprob for entry in part.logprobs or []} == {PIECE_LOGPROB}
