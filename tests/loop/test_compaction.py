"""Compaction helpers: sealing, expansion, history cut, the transcript after compacting."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.adapters.base import ModelCall
from responses_gateway.loop.compaction import (
    SUMMARY_INSTRUCTIONS,
    SUMMARY_PREFIX,
    compacted_transcript,
    compaction_item,
    expand_compactions,
    from_last_compaction,
    summary_call,
    user_messages,
)
from responses_gateway.loop.state import Compact, LoopState, Truncate
from responses_gateway.sealing import SealedBlobError


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def test_compaction_item_expands_to_its_summary_for_its_tenant_only() -> None:
    item = compaction_item("the summary", tenant="t1")
    assert set(item) == {"id", "type", "encrypted_content"} and item["type"] == "compaction"
    assert "summary" not in item["encrypted_content"]
    expanded = expand_compactions([item, _user("next")], tenant="t1", wire="chat")
    assert expanded[0]["content"][0]["text"] == SUMMARY_PREFIX + "the summary"
    with pytest.raises(SealedBlobError) as raised:
        expand_compactions([item], tenant="t2", wire="chat")
    assert raised.value.code == "invalid_encrypted_content"


def test_foreign_compaction_passes_through_only_over_responses() -> None:
    foreign = {"type": "compaction", "id": "cmp_x", "encrypted_content": "gAAAAopaque"}
    assert expand_compactions([foreign], tenant="t", wire="responses") == [foreign]
    with pytest.raises(SealedBlobError):
        expand_compactions([foreign], tenant="t", wire="harmony")


def test_from_last_compaction_starts_at_the_last_one() -> None:
    first = {"type": "compaction", "id": "c1"}
    last = {"type": "compaction", "id": "c2"}
    history = [_user("a"), first, _user("b"), last, _user("c")]
    assert from_last_compaction(history) == [last, _user("c")]
    assert from_last_compaction([_user("a")]) == [_user("a")]


def test_compacted_transcript_keeps_instructions_summary_and_pending_input() -> None:
    developer = {"type": "message", "role": "developer", "content": "rules"}
    assistant = {"type": "message", "role": "assistant", "content": "answer"}
    transcript = [developer, _user("old"), assistant, _user("new 1"), _user("new 2")]
    after = compacted_transcript(transcript, "S")
    assert after[0] == developer
    assert after[1]["content"][0]["text"] == SUMMARY_PREFIX + "S"
    assert after[2:] == [_user("new 1"), _user("new 2")]
    assert user_messages(after) == [_user("new 1"), _user("new 2")]


def test_summary_call_offers_no_tools_and_keeps_the_transcript() -> None:
    call = ModelCall(
        model="m",
        input=[_user("x")],
        instructions="Be a pirate.",
        tools=[{"type": "function", "name": "f"}],
        tool_choice="required",
        params={"temperature": 0.2, "max_output_tokens": 5, "text": {"format": {}}},
    )
    summary = summary_call(call)
    assert summary.input == call.input and summary.tools == [] and summary.tool_choice is None
    assert summary.params == {"temperature": 0.2}
    assert summary.instructions is not None
    assert summary.instructions.startswith(SUMMARY_INSTRUCTIONS)
    assert "Be a pirate." in summary.instructions


@pytest.mark.parametrize("action", [Compact("client"), Compact("threshold"), Truncate(3)])
def test_context_actions_round_trip_through_state_json(action: Compact | Truncate) -> None:
    state = LoopState(response_id="r", created_at=1, model="m", request={}, upstream_input=[])
    state.set_next_action(action)
    assert LoopState.from_json(state.to_json()).next_action == action
