"""Every create field has the fate its row declares, on every wire, end to end (issue #29).

For each row of ``CREATE_FIELDS`` and each wire, a create setting the field (to a sample value)
is compared with the same create without it:

* forwarded (``relayed`` / ``lowered``): the upstream payload's key the row names (``sent_as``)
  changes: the value reached the upstream, under that wire's name;
* ``refused`` (or a value outside what the row ``accepts``): a 400 naming the field, and no
  upstream call;
* applied by the ``gateway``: a 200, and the field's own key is the same in both payloads (the
  client's value does not travel upstream under it; what the gateway does is tested where it
  does it).

No field is accepted and ignored: tests/protocol/test_contract.py holds every row to one of these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from responses_gateway.protocol.contract import CREATE_FIELDS
from responses_gateway.testing.bedrock import converse_params
from responses_gateway.testing.script import ScriptedUpstream, Turn

FUNCTION = {"type": "function", "name": "ping", "parameters": {"type": "object"}}
ANSWER = '{"ok": true}'
"""The scripted answer: JSON, so a json_object text format on harmony checks out."""

Case = tuple[dict[str, Any], Any]
"""(fields both creates carry, the value of the field under test)."""


def _conversation(http: httpx.Client) -> str:
    answer = http.post("/conversations", json={})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def _stored(http: httpx.Client, model: str) -> str:
    answer = http.post("/responses", json={"model": model, "input": "first"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


CASES: dict[str, Case | Callable[[httpx.Client, str], Case]] = {
    "model": ({}, None),  # every create carries it: its key must be in the payload
    "input": ({}, "something else"),
    "instructions": ({}, "Answer briefly."),
    "tools": ({}, [FUNCTION]),
    "tool_choice": ({"tools": [FUNCTION]}, "none"),
    "parallel_tool_calls": ({"tools": [FUNCTION]}, False),
    "max_output_tokens": ({}, 64),
    "temperature": ({}, 0.3),
    "top_p": ({}, 0.5),
    "presence_penalty": ({}, 0.5),
    "frequency_penalty": ({}, -0.5),
    "top_logprobs": ({}, 2),
    "user": ({}, "end-user-1"),
    "reasoning": ({}, {"effort": "high"}),
    "text": ({}, {"format": {"type": "json_object"}}),
    "service_tier": ({}, "default"),
    "max_tool_calls": ({}, 3),
    "include": ({}, ["message.output_text.logprobs"]),
    "stream": ({}, True),
    "stream_options": ({}, {"include_obfuscation": True}),
    "store": ({}, True),
    "metadata": ({}, {"team": "blue"}),
    "background_options": ({}, {"completion_window": "soonest"}),
    "conversation": lambda http, model: ({}, _conversation(http)),
    "previous_response_id": lambda http, model: ({}, _stored(http, model)),
    "truncation": ({}, "auto"),
    "context_management": ({}, [{"type": "compaction", "compact_threshold": 1_000_000}]),
    "prompt": ({}, {"id": "pmpt_support", "variables": {"product": "tea", "customer": "Ada"}}),
    "safety_identifier": ({}, "user-hash-1"),
    "prompt_cache_key": ({}, "cache-key-1"),
    "moderation": ({}, {"model": "omni-moderation-latest"}),
    "prompt_cache_options": ({}, {"mode": "explicit"}),
    "prompt_cache_retention": ({}, "24h"),
    "image": ({}, {"context_compression": "disabled"}),
    "access_programs": ({}, {"cyber": "standard"}),
}
"""A sample value for every create field (the background field is tested by
tests/e2e/test_background.py: its answer is not the model's)."""

SKIPPED = {"background": "its answer is queued, not the model's: tests/e2e/test_background.py"}

REFUSED_VALUES: list[tuple[str, Any]] = [
    ("image", {"context_compression": "enabled"}),
    ("background_options", {"completion_window": "2h"}),
    ("background_options", {"continuation_id": "c1"}),
    ("service_tier", "flex"),
]
"""Values outside what a row ``accepts`` on some wire."""


def test_every_create_field_has_a_case() -> None:
    assert set(CASES) | set(SKIPPED) == set(CREATE_FIELDS)


def _post(http: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return http.post("/responses", json=body)


def _payload(upstream: ScriptedUpstream) -> dict[str, Any]:
    sent = upstream.model_requests()
    assert sent, "no model call"
    payload: dict[str, Any] = converse_params(sent[-1])  # Bedrock's: with the path's modelId
    return payload


@pytest.mark.parametrize("name", sorted(CASES))
def test_create_field_fate_matches_its_row(
    http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str, name: str
) -> None:
    upstream.push(*[Turn(text=ANSWER) for _ in range(3)])
    case = CASES[name]
    context, value = case(http, model) if callable(case) else case
    handling = CREATE_FIELDS[name].on(wire)
    base = {"model": model, "input": "go", "store": False, **context}

    without = _post(http, base)
    assert without.status_code == 200, without.text
    before = _payload(upstream)
    calls = len(upstream.model_requests())
    answer = _post(http, base if name == "model" else {**base, name: value})

    if handling.fate == "refused":
        assert answer.status_code == 400, (name, wire, answer.text)
        assert answer.json()["error"]["param"] == name
        assert len(upstream.model_requests()) == calls, "a refused field reached the upstream"
        return
    assert answer.status_code == 200, (name, wire, answer.text)
    after = _payload(upstream)
    if (name, wire, value) == ("tool_choice", "bedrock", "none"):  # Converse has no "none"
        assert "toolConfig" in before and "toolConfig" not in after  # so no tools are sent
        return
    if handling.fate in ("relayed", "lowered"):
        key = handling.sent_as
        assert key in after, f"{name} on {wire}: no {key!r} in the upstream payload"
        if name != "model":
            assert after[key] != before.get(key), f"{name} on {wire}: {key!r} did not change"
        return
    assert handling.fate == "gateway", (name, wire, handling)
    forwarded_keys = {row.on(wire).sent_as for row in CREATE_FIELDS.values()}
    if name not in forwarded_keys:  # harmony's payload has a "prompt" of its own
        assert after.get(name) == before.get(name), f"{name} on {wire} reached the upstream"


@pytest.mark.parametrize(("name", "value"), REFUSED_VALUES)
def test_a_value_a_row_does_not_accept_is_a_400_naming_the_field(
    http: httpx.Client, upstream: ScriptedUpstream, wire: str, model: str, name: str, value: Any
) -> None:
    handling = CREATE_FIELDS[name].on(wire)
    upstream.push(Turn(text=ANSWER))

    answer = _post(http, {"model": model, "input": "go", name: value})

    if handling.accepts is None or handling.accepts(value):
        assert answer.status_code == 200, (name, wire, answer.text)
        return
    assert answer.status_code == 400, (name, wire, answer.text)
    assert answer.json()["error"]["param"] == name
    assert answer.json()["error"]["code"] == "unsupported_parameter"
    assert upstream.model_requests() == []
