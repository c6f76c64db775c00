"""When a create must let go: the invocation's deadline (Mangum's context object, or the Lambda
Web Adapter's context header when trusted) and the gateway's foreground budget."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import Request

from responses_gateway.api.deps import LAMBDA_CONTEXT_HEADER, invocation_deadline, timing_of


def _request(
    headers: dict[str, str] | None = None, budget: float | None = None, **scope: Any
) -> Request:
    app = SimpleNamespace(state=SimpleNamespace(gateway=SimpleNamespace(foreground_budget=budget)))
    raw = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "headers": raw, "app": app, **scope})


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def test_mangum_context_gives_the_deadline() -> None:
    before = time.time()
    deadline = invocation_deadline(_request(**{"aws.context": _Context()}))
    assert deadline is not None and before + 60 <= deadline <= time.time() + 60


def test_the_adapter_header_counts_only_when_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    header = {LAMBDA_CONTEXT_HEADER: json.dumps({"deadline": 1_900_000_000_000})}
    monkeypatch.delenv("GATEWAY_TRUST_LAMBDA_CONTEXT", raising=False)
    assert invocation_deadline(_request(header)) is None
    monkeypatch.setenv("GATEWAY_TRUST_LAMBDA_CONTEXT", "1")
    assert invocation_deadline(_request(header)) == 1_900_000_000.0
    assert invocation_deadline(_request({LAMBDA_CONTEXT_HEADER: "not json"})) is None
    assert invocation_deadline(_request()) is None


def test_timing_takes_the_earlier_of_the_margins_and_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HANDOVER_MARGIN_SECONDS", "20")
    before = time.time()
    timing = timing_of(_request(**{"aws.context": _Context()}))
    after = time.time()
    assert timing.hand_over_at is not None and timing.stream_until is not None
    assert before + 40 <= timing.hand_over_at <= after + 40  # 60 s left, 20 s margin
    assert before + 55 <= timing.stream_until <= after + 55  # 5 s before the end
    budgeted = timing_of(_request(budget=0.0, **{"aws.context": _Context()}))
    assert budgeted.hand_over_at is not None and budgeted.hand_over_at <= time.time()
    assert timing_of(_request()).hand_over_at is None
