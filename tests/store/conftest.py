"""Store fixtures: every test of the store interface runs against both implementations.

``store`` is a :class:`DynamoStore` on one embedded moto DynamoDB server per session, then a
:class:`SqliteStore` on a fresh file in the test's temporary directory: a test that asks for
``store`` is a contract test and runs once per kind (``store_kind``), so the two cannot drift.
Tests of one implementation's layout or costs are marked ``dynamodb_only`` (or live in
``test_sqlite.py``). DynamoDB tests share the session's table and isolate themselves by tenant
(every key starts with the tenant), which is cheaper than resetting moto between tests. Time is an
injected clock, so expiry is tested without waiting.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.store.base import Store
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.store.sqlite import SqliteStore, connect_for_inspection
from responses_gateway.store.table import make_client

STORE_KINDS = ("dynamodb", "sqlite")

START = 1_700_000_000.0
"""The injected clock's starting time (Unix seconds)."""


class FakeClock:
    """A settable clock: ``clock()`` returns ``clock.now``."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def local_dynamo() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name="store-tests")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``store_kind`` (through ``store`` or ``make_store``) once per
    kind, unless it is marked ``dynamodb_only``."""
    if "store_kind" not in metafunc.fixturenames:
        return
    only = metafunc.definition.get_closest_marker("dynamodb_only")
    metafunc.parametrize("store_kind", ["dynamodb"] if only else list(STORE_KINDS))


StoreFactory = Callable[..., Any]


@pytest.fixture
def make_store(
    request: pytest.FixtureRequest, store_kind: str, clock: FakeClock, tmp_path: Path
) -> Iterator[StoreFactory]:
    """Builds stores of this test's kind (keyword arguments go to the constructor); all share
    one table or one database file, and are closed after the test."""
    built: list[Any] = []

    def build(**options: Any) -> Any:
        options.setdefault("clock", clock)
        if store_kind == "dynamodb":
            local: LocalDynamo = request.getfixturevalue("local_dynamo")
            made: Any = DynamoStore(local.client, local.table_name, **options)
        else:
            made = SqliteStore(tmp_path / "store.db", **options)
        built.append(made)
        return made

    try:
        yield build
    finally:
        for made in built:
            made.close()


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    built: Store = make_store()
    return built


@pytest.fixture
def dynamo_store(local_dynamo: LocalDynamo, clock: FakeClock) -> Iterator[DynamoStore]:
    store = DynamoStore(local_dynamo.client, local_dynamo.table_name, clock=clock)
    try:
        yield store
    finally:
        store.close()


def stored_rows(store: Any, tenant: str) -> int:
    """How many items (DynamoDB) or rows (SQLite) the store holds for ``tenant``: whatever the
    layout, a purge must leave none."""
    if isinstance(store, SqliteStore):
        conn = connect_for_inspection(store.path)
        try:
            tables = [
                row[0]
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            return sum(
                conn.execute(f"SELECT COUNT(*) FROM {t} WHERE tenant = ?", (tenant,)).fetchone()[0]
                for t in tables
            )
        finally:
            conn.close()
    # The store's calls go over its HTTP client: count with a boto3 client on the same endpoint.
    client = make_client(endpoint_url=store.client.endpoint_url, credentials=("local", "local"))
    count = 0
    for page in client.get_paginator("scan").paginate(
        TableName=store.table_name,
        FilterExpression="begins_with(PK, :prefix)",
        ExpressionAttributeValues={":prefix": {"S": f"T#{tenant}#"}},
        Select="COUNT",
    ):
        count += page["Count"]
    return count


@pytest.fixture
def tenant() -> str:
    return f"tenant-{uuid.uuid4().hex}"
