"""The table definition, creating it on an endpoint, and the embedded moto endpoint."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from responses_gateway.store.local import LocalDynamo
from responses_gateway.store.table import (
    TABLE_DEFINITION,
    create_table,
    ensure_local_table,
    main,
)


def fresh_name() -> str:
    return f"table-{uuid.uuid4().hex[:12]}"


def test_create_table_twice_second_call_reports_existing(local_dynamo: LocalDynamo) -> None:
    name = fresh_name()

    assert create_table(local_dynamo.client, name) is True
    assert create_table(local_dynamo.client, name) is False

    table = local_dynamo.client.describe_table(TableName=name)["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert {(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]} == {
        ("PK", "HASH"),
        ("SK", "RANGE"),
    }
    assert not table.get("GlobalSecondaryIndexes")


def test_create_table_enables_ttl_on_ttl_attribute(local_dynamo: LocalDynamo) -> None:
    name = fresh_name()

    create_table(local_dynamo.client, name)

    ttl = local_dynamo.client.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "ttl")


def test_create_table_ttl_on_other_attribute_raises_value_error(
    local_dynamo: LocalDynamo,
) -> None:
    name = fresh_name()
    local_dynamo.client.create_table(TableName=name, **TABLE_DEFINITION)
    local_dynamo.client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"}
    )

    with pytest.raises(ValueError, match="expires"):
        create_table(local_dynamo.client, name)


def test_table_definition_encrypted_on_demand_without_indexes() -> None:
    assert TABLE_DEFINITION["BillingMode"] == "PAY_PER_REQUEST"
    assert TABLE_DEFINITION["SSESpecification"] == {"Enabled": True}
    assert "GlobalSecondaryIndexes" not in TABLE_DEFINITION


def test_ensure_local_table_returns_client_with_table(local_dynamo: LocalDynamo) -> None:
    name = fresh_name()

    client = ensure_local_table(local_dynamo.endpoint_url, name)

    assert name in client.list_tables()["TableNames"]


def test_main_creates_table_and_prints_json(
    local_dynamo: LocalDynamo, capsys: pytest.CaptureFixture[str]
) -> None:
    name = fresh_name()

    code = main(["--table", name, "--endpoint-url", local_dynamo.endpoint_url])

    assert code == 0
    assert json.loads(capsys.readouterr().out) == {
        "table": name,
        "created": True,
        "ttl_attribute": "ttl",
    }


def test_main_unreachable_endpoint_exits_1_without_endpoint_in_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--table", "t", "--endpoint-url", "http://127.0.0.1:9"])

    assert code == 1
    assert "127.0.0.1" not in capsys.readouterr().err


def test_start_local_dynamodb_serves_table_and_reports_start_time(
    local_dynamo: LocalDynamo,
) -> None:
    assert local_dynamo.endpoint_url.startswith("http://127.0.0.1:")
    assert local_dynamo.started_in > 0
    table = local_dynamo.client.describe_table(TableName=local_dynamo.table_name)["Table"]
    assert table["TableStatus"] == "ACTIVE"


def test_a_cancelled_transaction_leaves_every_item_as_it_was(local_dynamo: LocalDynamo) -> None:
    """moto's rollback is kept per item (store/local.py): a cancelled transaction neither adds
    the new item nor keeps the update of an existing one, and a later one commits."""
    name = fresh_name()
    create_table(local_dynamo.client, name)
    client = local_dynamo.client

    def key(pk: str) -> dict[str, Any]:
        return {"PK": {"S": pk}, "SK": {"S": "R"}}

    client.put_item(TableName=name, Item={**key("old"), "n": {"N": "1"}})
    update = {
        "Update": {
            "TableName": name,
            "Key": key("old"),
            "UpdateExpression": "SET n = :two",
            "ExpressionAttributeValues": {":two": {"N": "2"}},
        }
    }
    put = {"Put": {"TableName": name, "Item": {**key("new"), "n": {"N": "9"}}}}
    refused = {
        "ConditionCheck": {
            "TableName": name,
            "Key": key("missing"),
            "ConditionExpression": "attribute_exists(PK)",
        }
    }
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=[update, put, refused])

    items = {i["PK"]["S"]: i["n"]["N"] for i in client.scan(TableName=name)["Items"]}
    assert items == {"old": "1"}
    client.transact_write_items(TransactItems=[update, put])
    items = {i["PK"]["S"]: i["n"]["N"] for i in client.scan(TableName=name)["Items"]}
    assert items == {"old": "2", "new": "9"}
