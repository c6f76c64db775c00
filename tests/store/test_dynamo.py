"""Stored responses, against every store (``store``: DynamoDB on an embedded moto endpoint, then
SQLite), plus the DynamoDB layout and costs (``dynamodb_only``)."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from responses_gateway.config import ConfigError
from responses_gateway.store import RECORD_VERSION, DynamoStore, Store, StoredResponse, StoreError
from responses_gateway.store._calls import ThreadedClient
from responses_gateway.store._http import DynamoHttpClient
from responses_gateway.store.local import LocalDynamo
from responses_gateway.store.table import make_client

DAY = 86_400
CREATED = 1_700_000_000


def make_record(
    tenant: str, response_id: str, chain: list[str] | None = None, **extra: Any
) -> StoredResponse:
    output = [
        {
            "type": "message",
            "id": f"msg_{response_id}",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": f"answer {response_id} é ☃", "annotations": []}
            ],
        },
        {
            "type": "function_call",
            "id": f"fc_{response_id}",
            "call_id": "c1",
            "name": "f",
            "arguments": "{}",
        },
    ]
    response = {
        "id": response_id,
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "output": output,
        "usage": {"input_tokens": 3, "output_tokens": 1.5},
        **extra,
    }
    items = [
        {
            "type": "message",
            "id": f"in_{response_id}",
            "role": "user",
            "content": [{"type": "input_text", "text": f"question {response_id}"}],
        }
    ]
    return StoredResponse(
        tenant=tenant, id=response_id, response=response, input_items=items, chain=list(chain or [])
    )


async def build_chain(store: Store, tenant: str, depth: int) -> list[str]:
    """depth + 1 records, each continuing the previous one the way the service chains them."""
    ids = [f"resp_{n:03d}" for n in range(depth + 1)]
    records = [make_record(tenant, rid, chain=ids[:n]) for n, rid in enumerate(ids)]
    await asyncio.gather(*(store.put_response(r) for r in records))
    return ids


def table_items(local: LocalDynamo, tenant: str) -> list[dict[str, Any]]:
    paginator = local.client.get_paginator("scan")
    items: list[dict[str, Any]] = []
    pages = paginator.paginate(
        TableName=local.table_name,
        FilterExpression="begins_with(PK, :prefix)",
        ExpressionAttributeValues={":prefix": {"S": f"T#{tenant}#"}},
    )
    for page in pages:
        items += page["Items"]
    return items


def random_base64(size: int) -> str:
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()[:size]


async def test_put_response_then_get_returns_exact_record(store: Store, tenant: str) -> None:
    record = make_record(tenant, "resp_a", conversation="conv_1")
    record.conversation_id = "conv_1"
    await store.put_response(record)

    got = await store.get_response(tenant, "resp_a")

    assert got is not None
    assert got.response == record.response
    assert got.input_items == record.input_items
    assert got.chain == [] and got.conversation_id == "conv_1"
    assert got.expires_at == CREATED + 30 * DAY


async def test_get_response_other_tenant_returns_none(store: Store, tenant: str) -> None:
    await store.put_response(make_record(tenant, "resp_secret"))

    assert await store.get_response(f"{tenant}-other", "resp_secret") is None
    assert await store.get_responses(f"{tenant}-other", ["resp_secret"]) == []
    assert await store.delete_response(f"{tenant}-other", "resp_secret") is False
    assert await store.get_response(tenant, "resp_secret") is not None


async def test_get_response_hash_in_tenant_cannot_forge_other_key(
    store: Store, tenant: str
) -> None:
    await store.put_response(make_record(f"{tenant}#R#x", "y"))

    assert await store.get_response(tenant, "x#R#y") is None


async def test_get_responses_order_and_missing_ids_returns_found_in_asked_order(
    store: Store, tenant: str
) -> None:
    for rid in ("r1", "r2", "r3"):
        await store.put_response(make_record(tenant, rid))

    got = await store.get_responses(tenant, ["r3", "missing", "r1", "r2"])

    assert [r.id for r in got] == ["r3", "r1", "r2"]
    assert await store.get_responses(tenant, []) == []


async def test_get_responses_depth_100_chain_every_ancestor_in_two_round_trips(
    store: Store, tenant: str
) -> None:
    ids = await build_chain(store, tenant, 100)
    if isinstance(store, DynamoStore):
        store.meter.reset()

    previous = await store.get_response(tenant, ids[-1])
    assert previous is not None
    ancestors = await store.get_responses(tenant, previous.chain)

    assert previous.chain == ids[:-1]
    assert [r.id for r in ancestors] == ids[:-1]
    assert all(r.chain == ids[:n] for n, r in enumerate(ancestors))
    assert [r.input_items[0]["id"] for r in ancestors] == [f"in_{i}" for i in ids[:-1]]
    if isinstance(store, DynamoStore):
        total = store.meter.total()
        assert total.round_trips == 2
        assert total.read_units <= 110  # one unit per record, not one per ancestor of each record


async def test_get_responses_partial_chain_reads_stored_chain(store: Store, tenant: str) -> None:
    ids = await build_chain(store, tenant, 12)

    got = await store.get_responses(tenant, [ids[7], ids[9], ids[8]])

    assert [r.id for r in got] == [ids[7], ids[9], ids[8]]
    assert [r.chain for r in got] == [ids[:7], ids[:9], ids[:8]]


@pytest.mark.dynamodb_only
async def test_put_response_deep_chain_meta_size_stays_constant(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await build_chain(store, tenant, 30)

    metas = {i["PK"]["S"]: i for i in table_items(local_dynamo, tenant) if i["SK"]["S"] == "R"}
    sizes = [len(str(metas[f"T#{tenant}#R#resp_{n:03d}"])) for n in (1, 30)]

    assert sizes[1] - sizes[0] < 100


async def test_get_response_expired_returns_none(store: Store, tenant: str, clock: Any) -> None:
    ids = await build_chain(store, tenant, 2)
    clock.now = CREATED + 30 * DAY - 1
    assert len(await store.get_responses(tenant, ids)) == 3

    clock.now = CREATED + 30 * DAY

    assert await store.get_response(tenant, ids[0]) is None
    assert await store.get_responses(tenant, ids) == []
    assert await store.delete_response(tenant, ids[0]) is False


async def test_put_response_retention_days_sets_ttl(
    make_store: Any, tenant: str, clock: Any
) -> None:
    store = make_store(retention_days=1)

    await store.put_response(make_record(tenant, "r"))

    got = await store.get_response(tenant, "r")
    assert got is not None and got.expires_at == CREATED + DAY
    clock.now = CREATED + DAY
    assert await store.get_response(tenant, "r") is None


async def test_delete_response_then_get_returns_none(store: Store, tenant: str) -> None:
    await store.put_response(make_record(tenant, "r"))

    assert await store.delete_response(tenant, "r") is True

    assert await store.get_response(tenant, "r") is None
    assert await store.delete_response(tenant, "r") is False


async def test_put_response_5mb_input_2mb_output_round_trips_intact(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    image = f"data:image/png;base64,{random_base64(5_000_000)}"
    record = make_record(tenant, "big", chain=["p1", "p2", "p3"])
    record.input_items[0]["content"].append({"type": "input_image", "image_url": image})
    record.response["output"][0]["content"][0]["text"] = random_base64(2_000_000)
    await store.put_response(record)

    got = await store.get_response(tenant, "big")
    [again] = await store.get_responses(tenant, ["big"])

    assert got is not None
    assert got.input_items == record.input_items and got.response == record.response
    assert got.chain == ["p1", "p2", "p3"] and again.chain == ["p1", "p2", "p3"]
    assert again.input_items == record.input_items and again.response == record.response
    if isinstance(store, DynamoStore):
        chunks = [i for i in table_items(local_dynamo, tenant) if i["SK"]["S"].startswith("C#")]
        assert len(chunks) >= 15
        assert all(len(i["d"]["B"]) <= 350_000 for i in chunks)


async def test_put_response_overwrite_large_removes_replaced_chunks(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    first = make_record(tenant, "r", note=random_base64(1_000_000))
    second = make_record(tenant, "r", note=random_base64(800_000), status="cancelled")
    await store.put_response(first)

    await store.put_response(second)

    got = await store.get_response(tenant, "r")
    assert got is not None and got.response == second.response
    if isinstance(store, DynamoStore):
        nonces = {
            i["SK"]["S"].split("#")[1]
            for i in table_items(local_dynamo, tenant)
            if i["SK"]["S"].startswith("C#")
        }
        assert len(nonces) == 1


class FailingPut:
    """A client whose PutItem fails: chunks get written, the META commit never happens."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "boom"}}, "PutItem")


@pytest.mark.dynamodb_only
async def test_put_response_failed_before_meta_get_returns_previous_version(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str, clock: Any
) -> None:
    previous = make_record(tenant, "r", note=random_base64(900_000))
    await store.put_response(previous)
    broken = DynamoStore(FailingPut(local_dynamo.client), local_dynamo.table_name, clock=clock)
    try:
        with pytest.raises(StoreError):
            await broken.put_response(make_record(tenant, "r", note=random_base64(900_000)))
        with pytest.raises(StoreError):
            await broken.put_response(make_record(tenant, "new", note=random_base64(900_000)))
    finally:
        broken.close()

    got = await store.get_response(tenant, "r")
    assert got is not None and got.response == previous.response
    assert await store.get_response(tenant, "new") is None
    assert [r.response for r in await store.get_responses(tenant, ["new", "r"])] == [
        previous.response
    ]


@pytest.mark.dynamodb_only
async def test_put_response_every_item_has_schema_version_and_ttl(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await build_chain(store, tenant, 3)
    await store.put_response(make_record(tenant, "big", note=random_base64(500_000)))

    items = table_items(local_dynamo, tenant)

    assert {i["SK"]["S"][0] for i in items} == {"R", "L", "C", "I"}
    assert all(i["schema_version"] == {"N": str(RECORD_VERSION)} for i in items)
    assert all(int(i["ttl"]["N"]) == CREATED + 30 * DAY for i in items)


@pytest.mark.dynamodb_only
async def test_put_response_small_record_costs_one_write_round(
    store: DynamoStore, tenant: str
) -> None:
    await store.put_response(make_record(tenant, "r"))
    await store.get_response(tenant, "r")

    units = store.meter.snapshot()

    # META (1 WRU) and its 3 index items (1 WRU each): two requests sent in parallel.
    assert (units["put_response"].round_trips, units["put_response"].write_units) == (2, 4)
    assert (units["get_response"].round_trips, units["get_response"].read_units) == (1, 1)
    store.meter.reset()
    assert store.meter.snapshot() == {}


class ThreadRecorder:
    def __init__(self, client: Any) -> None:
        self._client = client
        self.threads: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(**kwargs: Any) -> Any:
            self.threads.add(threading.get_ident())
            return method(**kwargs)

        return call


async def test_store_calls_run_off_the_event_loop_thread(
    local_dynamo: LocalDynamo, tenant: str, clock: Any
) -> None:
    recorder = ThreadRecorder(local_dynamo.client)
    store = DynamoStore(recorder, local_dynamo.table_name, clock=clock)
    try:
        await asyncio.gather(*(store.put_response(make_record(tenant, f"r{n}")) for n in range(4)))
        await store.get_responses(tenant, ["r0", "r1"])
    finally:
        store.close()

    assert recorder.threads and threading.get_ident() not in recorder.threads


async def test_store_unreachable_endpoint_raises_store_error_without_details(tenant: str) -> None:
    client = make_client(endpoint_url="http://127.0.0.1:9", credentials=("AKIDSECRET", "s3cr3t"))
    store = DynamoStore(client, "table")
    try:
        with pytest.raises(StoreError) as caught:
            await store.get_response(tenant, "r")
    finally:
        store.close()

    message = str(caught.value)
    assert "get_response" in message and caught.value.status_code == 500
    assert "127.0.0.1" not in message and "AKIDSECRET" not in message and "s3cr3t" not in message


def test_from_env_without_table_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        DynamoStore.from_env({})


def test_from_env_bad_retention_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        DynamoStore.from_env({"DYNAMODB_TABLE": "t", "RETENTION_DAYS": "zero"})


async def test_from_env_with_endpoint_reads_and_writes(
    local_dynamo: LocalDynamo, tenant: str
) -> None:
    env = {
        "DYNAMODB_TABLE": local_dynamo.table_name,
        "DYNAMODB_ENDPOINT_URL": local_dynamo.endpoint_url,
        "AWS_REGION": local_dynamo.region,
        "RETENTION_DAYS": "7",
    }
    store = DynamoStore.from_env(env)
    try:
        assert store.retention_days == 7
        await store.put_response(make_record(tenant, "r", created_at=int(time.time())))
        assert await store.get_response(tenant, "r") is not None
    finally:
        store.close()


async def test_get_responses_over_16mb_retries_unprocessed_keys(store: Store, tenant: str) -> None:
    ids = [f"r{n:02d}" for n in range(50)]
    await asyncio.gather(
        *(store.put_response(make_record(tenant, i, note=random_base64(462_000))) for i in ids)
    )
    if isinstance(store, DynamoStore):
        store.meter.reset()

    got = await store.get_responses(tenant, ids)

    assert [r.id for r in got] == ids
    if isinstance(store, DynamoStore):
        assert store.meter.snapshot()["get_responses"].round_trips >= 2


@pytest.mark.dynamodb_only
async def test_get_response_newer_schema_version_raises_store_error(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await store.put_response(make_record(tenant, "r"))
    local_dynamo.client.update_item(
        TableName=local_dynamo.table_name,
        Key={"PK": {"S": f"T#{tenant}#R#r"}, "SK": {"S": "R"}},
        UpdateExpression="SET schema_version = :v",
        ExpressionAttributeValues={":v": {"N": str(RECORD_VERSION + 1)}},
    )

    with pytest.raises(StoreError, match="schema version"):
        await store.get_response(tenant, "r")


# -- the item index (item_reference) ---------------------------------------------------------


async def test_get_items_finds_input_and_output_items_of_any_response_in_one_read(
    store: Store, tenant: str
) -> None:
    await build_chain(store, tenant, 3)
    record = make_record(tenant, "other")
    await store.put_response(record)
    if isinstance(store, DynamoStore):
        store.meter.reset()

    ids = ["msg_resp_000", "fc_resp_002", "msg_other", "fc_other", "nope", "msg_resp_000"]
    found = await store.get_items(tenant, ids)

    assert set(found) == {"msg_resp_000", "fc_resp_002", "msg_other", "fc_other"}
    assert found["fc_other"] == record.output[1]
    assert found["msg_other"] == record.output[0]
    assert found["msg_resp_000"] == make_record(tenant, "resp_000").output[0]
    if isinstance(store, DynamoStore):
        units = store.meter.snapshot()["get_items"]
        assert (units.round_trips, units.read_units) == (1, 5)  # 4 found + 1 missing key


async def test_get_items_is_tenant_scoped(store: Store, tenant: str) -> None:
    await store.put_response(make_record(tenant, "r"))
    assert await store.get_items("someone-else", ["msg_r"]) == {}
    assert set(await store.get_items(tenant, ["msg_r"])) == {"msg_r"}


async def test_get_items_many_ids_chunked_reads_find_every_item(store: Store, tenant: str) -> None:
    await store.put_response(make_record(tenant, "r"))
    if isinstance(store, DynamoStore):
        store.meter.reset()
    ids = [f"missing_{i}" for i in range(1200)] + ["fc_r", "in_r"]
    found = await store.get_items(tenant, ids)
    assert list(found) == ["fc_r", "in_r"]
    assert await store.get_items(tenant, []) == {}
    if isinstance(store, DynamoStore):  # 13 BatchGets of 100 keys, in parallel
        assert store.meter.snapshot()["get_items"].round_trips == 13


async def test_deleted_response_items_stop_resolving(store: Store, tenant: str) -> None:
    await store.put_response(make_record(tenant, "a"))
    await store.put_response(make_record(tenant, "b"))
    assert await store.delete_response(tenant, "a")
    assert await store.get_items(tenant, ["msg_a", "fc_a", "msg_b"]) == {
        "msg_b": make_record(tenant, "b").output[0]
    }


async def test_deleting_an_older_response_keeps_an_id_a_later_one_reused(
    store: Store, tenant: str
) -> None:
    shared = {"type": "message", "id": "msg_shared", "role": "user", "content": "hi"}
    first = make_record(tenant, "first")
    first.input_items = [shared]
    later = make_record(tenant, "later")
    later.input_items = [shared]
    await store.put_response(first)
    await store.put_response(later)
    await store.delete_response(tenant, "first")
    assert await store.get_items(tenant, ["msg_shared"]) == {"msg_shared": shared}
    await store.delete_response(tenant, "later")
    assert await store.get_items(tenant, ["msg_shared"]) == {}


async def test_expired_items_do_not_resolve(store: Store, tenant: str, clock: Any) -> None:
    await store.put_response(make_record(tenant, "r"))
    clock.now = CREATED + 30 * DAY
    assert await store.get_items(tenant, ["msg_r"]) == {}


async def test_items_over_350_kb_are_read_from_their_response(store: Store, tenant: str) -> None:
    huge = {"type": "message", "id": "msg_huge", "role": "user", "content": random_base64(600_000)}
    record = make_record(tenant, "r")
    record.input_items = [huge]
    await store.put_response(record)
    assert await store.get_items(tenant, ["msg_huge", "fc_r"]) == {
        "msg_huge": huge,
        "fc_r": record.output[1],
    }


async def test_put_response_racing_overwrites_read_back_one_whole_version(
    store: Store, tenant: str
) -> None:
    versions = [
        make_record(tenant, "r", note=f"v{n}", filler=random_base64(20_000)) for n in range(8)
    ]

    await asyncio.gather(*(store.put_response(v) for v in versions))

    got = await store.get_response(tenant, "r")
    assert got is not None
    assert got.response in [v.response for v in versions]


# Which client a store's calls go through


def _env(local: LocalDynamo, **extra: str) -> dict[str, str]:
    return {
        "DYNAMODB_TABLE": local.table_name,
        "DYNAMODB_ENDPOINT_URL": local.endpoint_url,
        "AWS_REGION": local.region,
        **extra,
    }


async def test_from_env_calls_go_over_the_http_client_with_env_settings(
    local_dynamo: LocalDynamo, tenant: str
) -> None:
    env = _env(local_dynamo, DYNAMODB_MAX_ATTEMPTS="2", DYNAMODB_READ_TIMEOUT="7")
    store = DynamoStore.from_env(env)
    try:
        await store.put_response(make_record(tenant, "r", created_at=int(time.time())))
        assert await store.get_response(tenant, "r") is not None
        client = store.client
        assert isinstance(client, DynamoHttpClient)
        assert (client.endpoint_url, client.region) == (local_dynamo.endpoint_url, "us-east-1")
        assert client.max_attempts == 2
        assert client._timeout == {"connect": 3.0, "read": 7.0, "write": 7.0, "pool": None}
        assert len(client._transports) == 1
    finally:
        store.close()
    assert client._transports == {}


@pytest.mark.parametrize(
    ("extra", "endpoint"),
    [
        ({"AWS_REGION": "eu-west-3"}, "https://dynamodb.eu-west-3.amazonaws.com"),
        ({"AWS_DEFAULT_REGION": "cn-north-1"}, "https://dynamodb.cn-north-1.amazonaws.com.cn"),
        ({}, "https://dynamodb.us-east-1.amazonaws.com"),
        ({"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000"}, "http://127.0.0.1:8000"),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:8001"}, "http://127.0.0.1:8001"),
        (
            {"AWS_ENDPOINT_URL": "http://x:1", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
            "https://dynamodb.us-east-1.amazonaws.com",
        ),
    ],
)
def test_from_env_endpoint_without_dynamodb_endpoint_url(
    extra: dict[str, str], endpoint: str
) -> None:
    store = DynamoStore.from_env({"DYNAMODB_TABLE": "t", **extra})
    try:
        assert isinstance(store.client, DynamoHttpClient)
        assert store.client.endpoint_url == endpoint
    finally:
        store.close()


async def test_from_env_boto3_client_runs_boto3_calls_off_the_loop(
    local_dynamo: LocalDynamo, tenant: str
) -> None:
    store = DynamoStore.from_env(_env(local_dynamo, DYNAMODB_CLIENT="boto3"))
    try:
        client = store.client
        assert isinstance(client, ThreadedClient)
        recorder = ThreadRecorder(client.client)
        client.client = recorder
        await store.put_response(make_record(tenant, "r", created_at=int(time.time())))
        assert await store.get_response(tenant, "r") is not None
    finally:
        store.close()

    assert recorder.threads and threading.get_ident() not in recorder.threads


def test_from_env_fips_endpoint_is_left_to_botocore(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "DYNAMODB_TABLE": "t",
        "AWS_REGION": "us-east-2",
        "AWS_USE_FIPS_ENDPOINT": "true",
    }.items():
        monkeypatch.setenv(name, value)  # botocore reads the process environment
    monkeypatch.delenv("DYNAMODB_ENDPOINT_URL", raising=False)
    store = DynamoStore.from_env()
    try:
        assert isinstance(store.client, ThreadedClient)
        endpoint = store.client.client.meta.endpoint_url  # type: ignore[attr-defined]
        assert endpoint == "https://dynamodb-fips.us-east-2.amazonaws.com"
    finally:
        store.close()


def test_from_env_unknown_client_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="DYNAMODB_CLIENT"):
        DynamoStore.from_env({"DYNAMODB_TABLE": "t", "DYNAMODB_CLIENT": "aiobotocore"})


def test_a_boto3_client_given_to_the_store_is_mirrored_by_the_http_client(
    local_dynamo: LocalDynamo,
) -> None:
    mirrored = DynamoStore(local_dynamo.client, local_dynamo.table_name)
    threaded = DynamoStore(local_dynamo.client, local_dynamo.table_name, threaded=True)
    try:
        assert isinstance(mirrored.client, DynamoHttpClient)
        assert mirrored.client.endpoint_url == local_dynamo.endpoint_url
        assert isinstance(threaded.client, ThreadedClient)
        assert threaded.client.client is local_dynamo.client
    finally:
        mirrored.close()
        threaded.close()
