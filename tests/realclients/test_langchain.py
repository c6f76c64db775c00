"""LangChain's ``ChatOpenAI(use_responses_api=True)`` (langchain-openai, pinned) over both wires.

``invoke`` and ``stream`` for text, and a tool call round trip: the model's call comes back as
``AIMessage.tool_calls``, the tool's result goes back as a ``ToolMessage`` with the history.
"""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from responses_gateway.testing.brain import call_block

from .conftest import CLIENT_KEY, Stack


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _chat(stack: Stack, model: str) -> ChatOpenAI:
    return ChatOpenAI(
        model=model,
        base_url=stack.base_url,
        api_key=CLIENT_KEY,  # type: ignore[arg-type]
        use_responses_api=True,
        max_retries=0,
    )


def test_invoke_and_stream_text(stack: Stack, upstream: object, model: str) -> None:
    chat = _chat(stack, model)
    answer = chat.invoke("hello langchain")
    assert isinstance(answer, AIMessage)
    assert answer.text == "You said: hello langchain (user turns: 1)"
    assert answer.response_metadata["status"] == "completed"
    assert answer.usage_metadata is not None and answer.usage_metadata["output_tokens"] > 0

    chunks = list(chat.stream("hello stream"))
    assert len(chunks) > 2
    assert "".join(c.text for c in chunks) == "You said: hello stream (user turns: 1)"


def test_tool_call_round_trip(stack: Stack, upstream: object, wire: str, model: str) -> None:
    chat = _chat(stack, model).bind_tools([get_weather])
    question = HumanMessage(call_block("get_weather", {"city": "Oslo"}))
    first = chat.invoke([question])
    assert isinstance(first, AIMessage)
    (call,) = first.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Oslo"})

    result = get_weather.invoke(call)
    assert isinstance(result, ToolMessage)
    second = chat.invoke([question, first, result])
    assert second.text == "The tool returned: sunny in Oslo"
    assert not second.tool_calls
    assert "sunny in Oslo" in json.dumps(stack.model_requests(wire)[-1].json)
