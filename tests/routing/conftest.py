"""Routing fixtures: the store fixtures of ``tests/store`` (each test runs on DynamoDB and on
SQLite, with an injected clock)."""

from tests.store.conftest import (  # noqa: F401 - fixtures and the store_kind parametrisation
    FakeClock,
    clock,
    local_dynamo,
    make_store,
    pytest_generate_tests,
    store,
)
