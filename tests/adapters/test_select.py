"""Endpoint selection: host matrix, the sticky upgrade, pinned modes."""

from __future__ import annotations

import pytest

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.select import (
    AutoAdapter,
    UpgradeLatch,
    asks_for_responses_api,
    auto_wire,
)
from responses_gateway.errors import UpstreamStatusError
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import LoopState, TurnResult


@pytest.mark.parametrize(
    ("base_url", "wire"),
    [
        ("https://api.openai.com/v1", "responses"),
        ("https://API.OpenAI.com./v1", "responses"),
        ("https://eu.api.openai.com/v1", "responses"),
        ("https://openai.com/v1", "responses"),
        ("https://api.openai.com.evil.example/v1", "chat"),
        ("https://evilopenai.com/v1", "chat"),
        ("https://openai.com.example/v1", "chat"),
        ("https://example.com/api.openai.com/v1", "chat"),
        ("https://api.openai.com@evil.example/v1", "chat"),
        ("http://127.0.0.1:8000/v1", "chat"),
        ("https://openrouter.ai/api/v1", "chat"),
        ("not a url", "chat"),
    ],
)
def test_auto_wire_host_matrix(base_url: str, wire: str) -> None:
    assert auto_wire(base_url) == wire


OPENAI_ONLY_RESPONSES = (
    '{"error":{"message":"This model is only supported in v1/responses and not in '
    'v1/chat/completions.","type":"invalid_request_error","param":"model",'
    '"code":"unsupported_api_for_model"}}'
)


@pytest.mark.parametrize(
    ("status", "message", "body", "expected"),
    [
        (400, "This model is only supported in v1/responses", OPENAI_ONLY_RESPONSES, True),
        (404, "Use the Responses API for this model", "", True),
        (400, "Invalid value for 'temperature'", '{"error":{}}', False),
        (429, "v1/responses quota", "", False),
        (500, "see /v1/responses", "", False),
    ],
)
def test_asks_for_responses_api(status: int, message: str, body: str, expected: bool) -> None:
    error = UpstreamStatusError(status, message, body=body)
    assert asks_for_responses_api(error) is expected


class Fake:
    def __init__(self, wire: str, error: UpstreamStatusError | None = None) -> None:
        self.wire = wire
        self.error = error
        self.calls = 0

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return TurnResult()


def _out() -> OutputWriter:
    state = LoopState(response_id="r", created_at=1, model="m", request={}, upstream_input=[])

    class Null:
        def emit(self, event: object) -> None:
            pass

    return OutputWriter(state, Null())


CALL = ModelCall(model="m", input=[])


async def test_auto_adapter_upgrade_is_sticky_across_requests() -> None:
    latch = UpgradeLatch()
    chat = Fake("chat", UpstreamStatusError(400, "only supported in v1/responses"))
    responses = Fake("responses")
    first = AutoAdapter(chat, responses, "http://h/v1", latch)
    assert first.wire == "chat"
    await first.call_llm(CALL, _out())
    assert (chat.calls, responses.calls) == (1, 1)
    second = AutoAdapter(chat, responses, "http://h/v1", latch)
    assert second.wire == "responses"
    await second.call_llm(CALL, _out())
    assert (chat.calls, responses.calls) == (1, 2)
    other = AutoAdapter(chat, responses, "http://other/v1", latch)
    assert other.wire == "chat"


async def test_auto_adapter_other_errors_do_not_upgrade() -> None:
    latch = UpgradeLatch()
    error = UpstreamStatusError(400, "Invalid value for 'temperature'")
    chat, responses = Fake("chat", error), Fake("responses")
    with pytest.raises(UpstreamStatusError):
        await AutoAdapter(chat, responses, "http://h/v1", latch).call_llm(CALL, _out())
    assert responses.calls == 0
    assert not latch.is_upgraded("http://h/v1")
