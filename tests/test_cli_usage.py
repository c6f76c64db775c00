"""``responses-gateway usage`` and ``budget`` against a moto DynamoDB table."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from responses_gateway.cli import main
from responses_gateway.store.base import BudgetLimits, UsageCounts, UsageEntry
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb


@pytest.fixture(scope="module")
def dynamo() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name="cli-usage")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def env(dynamo: LocalDynamo, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoStore]:
    monkeypatch.setenv("DYNAMODB_TABLE", dynamo.table_name)
    monkeypatch.setenv("DYNAMODB_ENDPOINT_URL", dynamo.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    store = DynamoStore(dynamo.client, dynamo.table_name)
    yield store
    store.close()


def _record(store: DynamoStore, tenant: str, rid: str, tokens: int, cost: str) -> None:
    entry = UsageEntry(
        tenant=tenant,
        response_id=rid,
        model="gpt-x",
        ended_at=int(time.time()),
        status="completed",
        counts=UsageCounts(
            input_tokens=tokens, output_tokens=1, model_calls=1, responses=1, cost_usd=Decimal(cost)
        ),
        api_key_id="key_1",
    )
    assert asyncio.run(store.record_usage(entry))


def test_usage_prints_totals_and_cost(env: DynamoStore, capsys: pytest.CaptureFixture[str]) -> None:
    _record(env, "acme", "r1", 100, "0.25")
    _record(env, "acme", "r2", 50, "0.5")
    assert main(["usage"]) == 0
    out = capsys.readouterr().out.splitlines()
    (row,) = [line for line in out if line.startswith("acme ")]
    assert row.split() == ["acme", "gpt-x", "key_1", "150", "0", "2", "2", "0", "0.750000"]
    assert out[-1].endswith("estimated cost 0.750000 USD")

    assert main(["usage", "--json", "--group-by", "project_id"]) == 0
    page = json.loads(capsys.readouterr().out)
    (bucket,) = page["data"]
    (result,) = [r for r in bucket["results"] if r["project_id"] == "acme"]
    assert (result["input_tokens"], result["num_model_requests"]) == (150, 2)


def test_budget_set_show_clear(env: DynamoStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "budget",
                "set",
                "--tenant",
                "t1",
                "--daily-tokens",
                "500",
                "--monthly-cost-usd",
                "2.5",
            ]
        )
        == 0
    )
    assert asyncio.run(env.get_budget("t1")) == BudgetLimits(
        daily_tokens=500, monthly_cost_usd=Decimal("2.5")
    )
    assert "spent today 0 tokens" in capsys.readouterr().out
    assert main(["budget", "set", "--tenant", "t1", "--daily-tokens", "1.5"]) == 2
    assert "whole number" in capsys.readouterr().err
    assert main(["budget", "clear", "--tenant", "t1"]) == 0
    assert asyncio.run(env.get_budget("t1")) is None
