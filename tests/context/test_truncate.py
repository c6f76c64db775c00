"""plan_truncation: oldest first, pairs kept together, system/developer messages kept."""

from __future__ import annotations

from typing import Any

from responses_gateway.context.truncate import plan_truncation


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": text}


def _pair(call_id: str, size: int) -> list[dict[str, Any]]:
    return [
        {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": call_id, "output": "o " * size},
    ]


def test_plan_truncation_nothing_in_excess_drops_nothing() -> None:
    assert plan_truncation([_user("a"), _user("b")], 10, 0) == 0


def test_plan_truncation_drops_oldest_until_excess_is_shed() -> None:
    items = [_user("a " * 100), _user("b " * 100), _user("c " * 100), _user("last")]
    assert plan_truncation(items, 300, 50) == 1
    assert plan_truncation(items, 300, 150) == 2


def test_plan_truncation_never_cuts_between_a_call_and_its_output() -> None:
    items = [*_pair("call_1", 300), _user("b " * 10), _user("last")]
    assert plan_truncation(items, 320, 5) == 2  # the call alone would be enough by size


def test_plan_truncation_reasoning_goes_with_its_call() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    items = [_user("a " * 100), reasoning, *_pair("call_1", 10), _user("last")]
    assert plan_truncation(items, 200, 120) == 4


def test_plan_truncation_keeps_the_last_item_and_counts_no_kept_item() -> None:
    system = {"type": "message", "role": "system", "content": "s " * 500}
    assert plan_truncation([system, _user("last " * 10)], 600, 500) == 0
    assert plan_truncation([_user("only")], 600, 500) == 0
