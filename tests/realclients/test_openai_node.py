"""The ``openai`` Node SDK (pinned in package.json) against the gateway, over both wires.

``client.responses.create`` for a text turn, then ``client.responses.stream`` (the SDK's
snapshotting stream helper, which rejects malformed event sequences) for a function call, and
its output sent back in a stateless second turn.
"""

from __future__ import annotations

import json
from pathlib import Path

from responses_gateway.testing.stream_check import check_stream

from .conftest import CLIENT_KEY, JS_DIR, Stack, run_node


def test_create_and_stream_with_a_tool_round_trip(
    node_modules: Path, stack: Stack, upstream: object, wire: str, model: str
) -> None:
    done = run_node(
        JS_DIR / "openai_node.mjs",
        {"GATEWAY_URL": stack.base_url, "GATEWAY_KEY": CLIENT_KEY, "MODEL": model},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    assert out["created"]["status"] == "completed"
    assert out["created"]["id"].startswith("resp_")
    assert out["created"]["text"] == "You said: hello from node (user turns: 1)"

    streamed = out["streamed"]
    assert streamed["status"] == "completed"
    assert streamed["call"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    final = check_stream(streamed["events"])  # the contract, on what the Node SDK received
    assert [item["type"] for item in final["output"]] == ["function_call"]
    types = [event["type"] for event in streamed["events"]]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert "response.function_call_arguments.done" in types
    assert types[-1] == "response.completed"

    assert out["second"] == {"status": "completed", "text": "The tool returned: sunny in Paris"}
    sent = stack.model_requests(wire)
    assert len(sent) == 3
