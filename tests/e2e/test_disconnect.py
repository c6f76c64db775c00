"""A client that disconnects mid-stream stops the upstream call."""

from __future__ import annotations

import httpx

from responses_gateway.testing.script import ScriptedUpstream, Turn

from .conftest import Stack


def test_client_disconnect_mid_stream_closes_the_upstream_stream(
    stack: Stack, upstream: ScriptedUpstream, model: str
) -> None:
    upstream.push(Turn(text="one two three four five six", hold_after=5))
    body = {"model": model, "input": "Hi", "stream": True}
    with (
        httpx.Client(base_url=stack.base_url, timeout=30) as client,
        client.stream("POST", "/responses", json=body) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line == "event: response.output_text.delta":
                break
    # Leaving the block closed the connection while the upstream was still streaming.
    assert upstream.wait_for_disconnects(1, timeout=10) == 1


def test_held_upstream_without_disconnect_records_nothing(upstream: ScriptedUpstream) -> None:
    assert upstream.disconnects == 0
