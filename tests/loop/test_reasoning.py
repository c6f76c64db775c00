"""Reasoning for stateless clients: the policy, sealing on output, restoring on replay, and the
raw-text-as-summary mirror of the output writer."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from responses_gateway import sealing
from responses_gateway.loop.events import LoopEvent, PartFinished, PartStarted, TextDelta
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.reasoning import (
    ReasoningPolicy,
    open_client_reasoning,
    restore_reasoning,
    sealed_content,
)
from responses_gateway.loop.state import LoopState
from responses_gateway.sealing import SealedBlobError, seal, unseal

KEY = base64.b64encode(b"\x07" * 32).decode()


@pytest.fixture(autouse=True)
def _keys() -> Iterator[None]:
    sealing.configure(sealing.parse_keys(f"t1:{KEY}"))
    yield
    sealing._keyring = None


class Recorder:
    def __init__(self) -> None:
        self.events: list[LoopEvent] = []

    def emit(self, event: LoopEvent) -> None:
        self.events.append(event)


def _writer(policy: ReasoningPolicy) -> tuple[LoopState, Recorder, OutputWriter]:
    state = LoopState(response_id="resp_1", created_at=1, model="m", request={}, upstream_input=[])
    sink = Recorder()
    return state, sink, OutputWriter(state, sink, reasoning=policy)


@pytest.mark.parametrize(
    ("summary", "include", "wire", "seal_", "mirror"),
    [
        ("auto", ["reasoning.encrypted_content"], "chat", True, True),
        ("concise", [], "harmony", False, True),
        ("detailed", [], "responses", False, False),
        (None, ["reasoning.encrypted_content"], "chat", True, False),
        ("none", [], "chat", False, False),
    ],
)
def test_policy_of_request(
    summary: str | None, include: list[str], wire: str, seal_: bool, mirror: bool
) -> None:
    request = {"reasoning": {"summary": summary}}
    policy = ReasoningPolicy.of(request, include, "acme", wire)
    assert (policy.tenant, policy.seal, policy.mirror_summary, policy.wrap_upstream) == (
        "acme",
        seal_,
        mirror,
        True,
    )


def test_raw_text_is_mirrored_as_a_summary_part_while_it_streams() -> None:
    state, sink, out = _writer(ReasoningPolicy(mirror_summary=True))
    reasoning = out.reasoning(item_id="rs_1")
    reasoning.text("Think")
    reasoning.text("ing.")
    reasoning.finish()
    assert state.output == [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Thinking."}],
            "content": [{"type": "reasoning_text", "text": "Thinking."}],
        }
    ]
    parts = [
        (type(e).__name__, getattr(e, "part", {}).get("type") or getattr(e, "part_type", None))
        for e in sink.events
        if isinstance(e, PartStarted | PartFinished | TextDelta)
    ]
    assert parts == [
        ("PartStarted", "reasoning_text"),
        ("PartStarted", "summary_text"),
        ("TextDelta", "reasoning_text"),
        ("TextDelta", "summary_text"),
        ("TextDelta", "reasoning_text"),
        ("TextDelta", "summary_text"),
        ("PartFinished", "reasoning_text"),
        ("PartFinished", "summary_text"),
    ]


def test_sealed_on_finish_with_text_and_no_upstream_blob() -> None:
    state, _, out = _writer(ReasoningPolicy(tenant="acme", seal=True))
    reasoning = out.reasoning(item_id="rs_1")
    reasoning.text("secret plan")
    reasoning.finish()
    blob = state.output[0]["encrypted_content"]
    assert "secret" not in blob
    assert unseal("reasoning", blob, tenant="acme") == {
        "v": 1,
        "text": "secret plan",
        "upstream": None,
    }


def test_upstream_blob_is_wrapped_even_without_include() -> None:
    state, _, out = _writer(ReasoningPolicy(tenant="acme", wrap_upstream=True))
    reasoning = out.reasoning(item_id="rs_1")
    reasoning.summary("S")
    reasoning.set_encrypted_content("gAAAA-upstream")
    reasoning.finish()
    blob = state.output[0]["encrypted_content"]
    assert unseal("reasoning", blob, tenant="acme")["upstream"] == "gAAAA-upstream"


def test_no_policy_leaves_items_alone() -> None:
    state, _, out = _writer(ReasoningPolicy())
    reasoning = out.reasoning(item_id="rs_1")
    reasoning.text("t")
    reasoning.set_encrypted_content("up")
    reasoning.finish()
    assert state.output[0]["encrypted_content"] == "up"


def _item(blob: str | None, **extra: Any) -> dict[str, Any]:
    return {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": blob, **extra}


def test_open_client_reasoning_names_the_bad_item() -> None:
    good = sealed_content({"content": [{"type": "reasoning_text", "text": "x"}]}, "acme")
    raw = [{"type": "message", "role": "user", "content": "hi"}, _item(good), _item("forged")]
    with pytest.raises(SealedBlobError) as caught:
        open_client_reasoning(raw, "acme")
    assert caught.value.param == "input[2].encrypted_content"
    assert caught.value.status_code == 400


def test_open_client_reasoning_refuses_another_tenants_blob() -> None:
    blob = sealed_content({"content": [{"type": "reasoning_text", "text": "x"}]}, "other")
    with pytest.raises(SealedBlobError) as caught:
        open_client_reasoning([_item(blob)], "acme")
    assert caught.value.param == "input[0].encrypted_content"


def test_open_client_reasoning_accepts_null_content_and_blob() -> None:
    assert open_client_reasoning([_item(None, content=None)], "acme") == {}
    assert open_client_reasoning("just text", "acme") == {}


def test_restore_gives_text_and_upstream_blob_back() -> None:
    blob = seal("reasoning", {"v": 1, "text": "plan", "upstream": "gAAAA"}, tenant="acme")
    items = [_item(blob, content=None), {"type": "message", "role": "user", "content": "x"}]
    restored = restore_reasoning(items, "acme", open_client_reasoning(items, "acme"))
    assert restored[0] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "plan"}],
        "encrypted_content": "gAAAA",
    }
    assert restored[1] is items[1]
    assert items[0]["encrypted_content"] == blob  # the client's item is not changed


def test_restore_without_upstream_blob_drops_encrypted_content_and_keeps_existing_text() -> None:
    blob = seal("reasoning", {"v": 1, "text": "sealed", "upstream": None}, tenant="acme")
    item = _item(blob, content=[{"type": "reasoning_text", "text": "shown"}])
    (restored,) = restore_reasoning([item], "acme", {})
    assert "encrypted_content" not in restored
    assert restored["content"] == [{"type": "reasoning_text", "text": "shown"}]


def test_restore_history_with_unopenable_or_foreign_blob_does_not_fail() -> None:
    retired = "rgw1.gone.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    legacy = "gAAAA-legacy-upstream-blob"
    out = restore_reasoning([_item(retired), _item(legacy)], "acme", {})
    assert "encrypted_content" not in out[0]
    assert out[1]["encrypted_content"] == legacy
