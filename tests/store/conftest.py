"""Store fixtures: one embedded moto DynamoDB server per session, a fresh tenant per test.

Tests share the session's table and isolate themselves by tenant (every key starts with the
tenant), which is cheaper than resetting moto between tests. Time is an injected clock, so expiry
is tested without waiting.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb

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


@pytest.fixture
def store(local_dynamo: LocalDynamo, clock: FakeClock) -> Iterator[DynamoStore]:
    store = DynamoStore(local_dynamo.client, local_dynamo.table_name, clock=clock)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def tenant() -> str:
    return f"tenant-{uuid.uuid4().hex}"
