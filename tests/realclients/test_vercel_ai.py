"""The Vercel AI SDK (``ai`` + ``@ai-sdk/openai``, pinned) against the gateway, over both wires.

``openai.responses(model)`` with ``generateText`` and ``streamText``, each a two-step tool loop
run by the SDK (``stopWhen: stepCountIs(3)``), and a follow-up turn that sends the first turn's
messages back. With its default ``store: true`` the SDK sends earlier assistant output as
``item_reference`` items, without ``previous_response_id``: the gateway resolves them from its
store. With ``store: false`` it sends the items themselves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import CLIENT_KEY, JS_DIR, Stack, run_node


@pytest.mark.parametrize("store", ["true", "false"])
def test_generate_and_stream_text_with_a_multi_step_tool(
    node_modules: Path, stack: Stack, upstream: object, wire: str, model: str, store: str
) -> None:
    done = run_node(
        JS_DIR / "vercel_ai.mjs",
        {"GATEWAY_URL": stack.base_url, "GATEWAY_KEY": CLIENT_KEY, "MODEL": model, "STORE": store},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    assert out["calls"] == ["Paris", "Rome"]
    assert out["generated"] == {
        "text": "The tool returned: sunny in Paris",
        "steps": 2,
        "finishReasons": ["tool-calls", "stop"],
        "toolCalls": [["get_weather", {"city": "Paris"}]],
    }
    assert out["followUp"] == {
        "text": "You said: thanks (user turns: 2)",
        "steps": 1,
        "finishReasons": ["stop"],
        "toolCalls": [],
    }
    streamed = out["streamed"]
    assert streamed["text"] == "The tool returned: sunny in Rome"
    assert "".join(streamed["deltas"]) == streamed["text"] and len(streamed["deltas"]) > 1
    assert streamed["steps"] == 2
    assert streamed["finishReasons"] == ["tool-calls", "stop"]
    assert streamed["toolCalls"] == [["get_weather", {"city": "Rome"}]]

    sent = stack.model_requests(wire)
    assert len(sent) == 5
    second_step = json.dumps(sent[1].json)
    assert "sunny in Paris" in second_step and "get_weather" in second_step
    follow_up = json.dumps(sent[2].json)  # the referenced answer reached the model as text
    assert "The tool returned: sunny in Paris" in follow_up and "item_reference" not in follow_up
