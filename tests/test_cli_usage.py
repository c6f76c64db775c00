"""``responses-gateway usage`` and ``budget`` on both stores, with the flags the docs show.

The SQLite store is reached as ``serve`` reaches it (``--db`` / ``GATEWAY_DB_PATH``, else the
default file), DynamoDB through ``DYNAMODB_TABLE`` (here a moto endpoint).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from responses_gateway.cli import main
from responses_gateway.store.base import BudgetLimits, Store, UsageCounts, UsageEntry
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.store.sqlite import SqliteStore

STORE_VARIABLES = ("DYNAMODB_TABLE", "DYNAMODB_ENDPOINT_URL", "GATEWAY_STORE", "GATEWAY_DB_PATH")


@pytest.fixture(scope="module")
def dynamo() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name="cli-usage")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(
    request: pytest.FixtureRequest,
    dynamo: LocalDynamo,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Store]:
    """The store the commands reach, through the environment a user sets (nothing for SQLite
    but the data directory: the commands find the file ``serve`` uses by default)."""
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    opened: Store
    if request.param == "sqlite":
        path = tmp_path / "responses-gateway" / "gateway.db"
        path.parent.mkdir()
        opened = SqliteStore(str(path), purge_interval=None)
    else:
        monkeypatch.setenv("DYNAMODB_TABLE", dynamo.table_name)
        monkeypatch.setenv("DYNAMODB_ENDPOINT_URL", dynamo.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
        opened = DynamoStore(dynamo.client, dynamo.table_name)
    yield opened
    opened.close()


_ids = iter(range(1_000_000))


def _record(store: Store, tenant: str, tokens: int, cost: str, model: str = "gpt-x") -> None:
    entry = UsageEntry(
        tenant=tenant,
        response_id=f"resp_{time.time_ns()}_{next(_ids)}",
        model=model,
        ended_at=int(time.time()),
        status="completed",
        counts=UsageCounts(
            input_tokens=tokens, output_tokens=1, model_calls=1, responses=1, cost_usd=Decimal(cost)
        ),
        api_key_id="key_1",
    )
    assert asyncio.run(store.record_usage(entry))


def _rows(out: str, first: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.split()[:1] == [first]]


def test_usage_prints_totals_and_cost(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    tenant = f"acme{next(_ids)}"
    _record(store, tenant, 100, "0.25")
    _record(store, tenant, 50, "0.5")
    assert main(["usage"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "tenant", "model", "api", "key", "input", "cached", "output", "calls", "tools", "cost", "$",
    ]  # fmt: skip
    assert _rows(out, tenant) == [[tenant, "gpt-x", "key_1", "150", "0", "2", "2", "0", "0.750000"]]

    # --group-by is honoured in the table too
    _record(store, tenant, 10, "0", model="gpt-y")
    assert main(["usage", "--group-by", "project_id"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["tenant", "input"]
    assert _rows(out, tenant) == [[tenant, "160", "0", "3", "3", "0", "0.750000"]]

    assert main(["usage", "--json", "--group-by", "project_id"]) == 0
    page = json.loads(capsys.readouterr().out)
    (bucket,) = page["data"]
    (result,) = [r for r in bucket["results"] if r["project_id"] == tenant]
    assert (result["input_tokens"], result["num_model_requests"]) == (160, 3)


def test_usage_refuses_a_bad_group_or_day_in_one_line(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["usage", "--group-by", "tenant"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "responses-gateway: --group-by 'tenant': choose among project_id, api_key_id, model\n"
    )
    assert main(["usage", "--start", "yesterday"]) == 2
    assert capsys.readouterr().err == ("responses-gateway: 'yesterday' is not a day (YYYY-MM-DD)\n")


def test_budget_set_show_clear(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    tenant = f"t{next(_ids)}"
    set_ = ["budget", "set", "--tenant", tenant]
    assert main([*set_, "--daily-tokens", "500", "--monthly-cost-usd", "2.5"]) == 0
    assert asyncio.run(store.get_budget(tenant)) == BudgetLimits(
        daily_tokens=500, monthly_cost_usd=Decimal("2.5")
    )
    assert capsys.readouterr().out == (
        f"tenant {tenant}\n"
        "  own limits:  daily 500 tokens, monthly 2.5 USD\n"
        "  spent today: 0 tokens, 0.000000 USD\n"
        "  this month:  0 tokens, 0.000000 USD\n"
    )
    # a limit not named keeps its value; --replace drops the others
    assert main([*set_, "--daily-tokens", "700"]) == 0
    capsys.readouterr()
    assert asyncio.run(store.get_budget(tenant)) == BudgetLimits(
        daily_tokens=700, monthly_cost_usd=Decimal("2.5")
    )
    assert main([*set_, "--monthly-tokens", "9000", "--replace", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["limits"] == {"monthly_tokens": 9000}
    assert shown["spent"] == {
        "day_tokens": 0, "day_cost_usd": 0, "month_tokens": 0, "month_cost_usd": 0,
    }  # fmt: skip
    assert main([*set_, "--daily-tokens", "1.5"]) == 2
    assert "whole number" in capsys.readouterr().err
    assert main(["budget", "show", "--tenant", tenant]) == 0
    assert "own limits:  monthly 9000 tokens\n" in capsys.readouterr().out
    assert main(["budget", "clear", "--tenant", tenant]) == 0
    assert asyncio.run(store.get_budget(tenant)) is None
    assert "own limits:  none set (the configured limits apply)" in capsys.readouterr().out


def test_budget_set_without_a_limit_changes_nothing(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    tenant = f"t{next(_ids)}"
    assert main(["budget", "set", "--tenant", tenant, "--daily-tokens", "10"]) == 0
    capsys.readouterr()
    assert main(["budget", "set", "--tenant", tenant]) == 2
    assert capsys.readouterr().err.startswith(
        "responses-gateway: budget set needs at least one limit (--daily-tokens, "
    )
    assert asyncio.run(store.get_budget(tenant)) == BudgetLimits(daily_tokens=10)
    assert main(["budget", "show", "--tenant", tenant, "--daily-tokens", "5"]) == 2
    assert asyncio.run(store.get_budget(tenant)) == BudgetLimits(daily_tokens=10)


def test_db_flag_names_the_sqlite_file_as_for_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "team.db"
    store = SqliteStore(str(path), purge_interval=None)
    try:
        _record(store, "team", 7, "0.125")
    finally:
        store.close()
    assert main(["usage", "--db", str(path)]) == 0
    assert _rows(capsys.readouterr().out, "team")[0][3] == "7"
    monkeypatch.setenv("GATEWAY_DB_PATH", str(path))
    assert main(["budget", "set", "--tenant", "team", "--daily-cost-usd", "3"]) == 0
    assert "own limits:  daily 3 USD" in capsys.readouterr().out


def test_db_under_a_missing_directory_is_an_error_not_a_new_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    for command in (["usage"], ["budget", "show", "--tenant", "t"]):
        assert main([*command, "--db", str(missing / "gateway.db")]) == 2
        assert capsys.readouterr().err == (
            f"responses-gateway: cannot open the store: --db {missing}/gateway.db: the directory "
            f"{missing} does not exist (create it first; only the default location's directory "
            "is created)\n"
        )
    assert not missing.exists()
