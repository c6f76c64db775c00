"""Which store ``serve`` opens (``store.select``): SQLite by default, DynamoDB with a table, moto
on request."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from responses_gateway.config import ConfigError
from responses_gateway.store import DynamoStore, StoredResponse, default_db_path, open_store
from responses_gateway.store.local import LocalDynamo
from responses_gateway.store.sqlite import SqliteStore


def record(tenant: str) -> StoredResponse:
    response = {"id": "r", "object": "response", "created_at": int(time.time()), "output": []}
    return StoredResponse(tenant=tenant, id="r", response=response, input_items=[])


def test_default_db_path_under_xdg_data_home_or_local_share() -> None:
    assert default_db_path({"XDG_DATA_HOME": "/data"}) == Path("/data/responses-gateway/gateway.db")
    assert default_db_path({}) == Path.home() / ".local/share/responses-gateway/gateway.db"


async def test_open_store_without_settings_opens_sqlite_in_the_user_data_dir(
    tmp_path: Path, tenant: str
) -> None:
    opened = open_store({"XDG_DATA_HOME": str(tmp_path)})
    try:
        expected = tmp_path / "responses-gateway" / "gateway.db"
        assert isinstance(opened.store, SqliteStore) and opened.kind == "sqlite"
        assert opened.description == f"in the SQLite database {expected}"
        await opened.store.put_response(record(tenant))
        assert await opened.store.get_response(tenant, "r") is not None
    finally:
        opened.close()


def test_open_store_db_path_argument_overrides_the_environment(tmp_path: Path) -> None:
    env = {"GATEWAY_DB_PATH": str(tmp_path / "env.db"), "RETENTION_DAYS": "3"}
    opened = open_store(env, db_path=str(tmp_path / "flag.db"))
    try:
        assert isinstance(opened.store, SqliteStore)
        assert opened.store.path == str(tmp_path / "flag.db")
        assert opened.store.retention_days == 3
    finally:
        opened.close()


def test_open_store_memory_path_says_state_is_lost_on_exit() -> None:
    opened = open_store({"GATEWAY_DB_PATH": ":memory:"})
    try:
        assert opened.description == "in memory (lost on exit)"
    finally:
        opened.close()


async def test_open_store_with_table_opens_dynamodb(local_dynamo: LocalDynamo, tenant: str) -> None:
    env = {
        "DYNAMODB_TABLE": local_dynamo.table_name,
        "DYNAMODB_ENDPOINT_URL": local_dynamo.endpoint_url,
        "AWS_REGION": local_dynamo.region,
    }
    opened = open_store(env)
    try:
        assert isinstance(opened.store, DynamoStore) and opened.kind == "dynamodb"
        assert opened.description == (
            f"in the DynamoDB table {local_dynamo.table_name} at DYNAMODB_ENDPOINT_URL"
        )
        await opened.store.put_response(record(tenant))
        assert await opened.store.get_response(tenant, "r") is not None
    finally:
        opened.close()


async def test_open_store_moto_starts_an_embedded_endpoint(tenant: str) -> None:
    opened = open_store({"GATEWAY_STORE": "moto"})
    try:
        assert isinstance(opened.store, DynamoStore) and opened.kind == "moto"
        assert "moto" in opened.description and "lost on exit" in opened.description
        await opened.store.put_response(record(tenant))
        got = await opened.store.get_response(tenant, "r")
        assert got is not None and got.id == "r"
    finally:
        opened.close()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GATEWAY_STORE": "postgres"}, "GATEWAY_STORE must be one of sqlite, dynamodb, moto"),
        ({"GATEWAY_STORE": "dynamodb"}, "DYNAMODB_TABLE is not set"),
    ],
)
def test_open_store_bad_choice_raises_config_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        open_store(env)
