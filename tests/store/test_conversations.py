"""Conversations, against every store (``store``: DynamoDB on an embedded moto endpoint, then
SQLite), plus the DynamoDB layout (``dynamodb_only``)."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import pytest
from botocore.exceptions import ClientError

from responses_gateway.store import RECORD_VERSION, Conversation, DynamoStore, Store, StoreError
from responses_gateway.store.local import LocalDynamo

from .conftest import stored_rows

DAY = 86_400
CREATED = 1_700_000_000


def item(item_id: str, text: str = "") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "user",
        "content": [{"type": "input_text", "text": text or f"text of {item_id}"}],
    }


def rows_of(local: LocalDynamo, tenant: str, cid: str = "conv_1") -> list[dict[str, Any]]:
    response = local.client.query(
        TableName=local.table_name,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": f"T#{tenant}#C#{cid}"}},
    )
    return list(response["Items"])


def ids_of(items: list[dict[str, Any]]) -> list[str]:
    return [i["id"] for i in items]


async def new_conversation(
    store: Store, tenant: str, items: list[dict[str, Any]] | None = None, cid: str = "conv_1"
) -> Conversation:
    conversation = Conversation(tenant=tenant, id=cid, created_at=CREATED, metadata={"topic": "x"})
    await store.create_conversation(conversation, items or [])
    return conversation


async def test_create_conversation_then_get_returns_metadata(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item("a"), item("b")])

    got = await store.get_conversation(tenant, "conv_1")

    assert got is not None
    assert got.to_object() == {
        "id": "conv_1",
        "object": "conversation",
        "created_at": CREATED,
        "metadata": {"topic": "x"},
    }
    assert got.expires_at == CREATED + 30 * DAY
    assert ids_of(await store.all_items(tenant, "conv_1")) == ["a", "b"]


async def test_create_conversation_existing_id_raises_store_error(
    store: Store, tenant: str
) -> None:
    await new_conversation(store, tenant, [item("a")])

    with pytest.raises(StoreError):
        await new_conversation(store, tenant, [item("b")])

    assert ids_of(await store.all_items(tenant, "conv_1")) == ["a"]


async def test_create_conversation_many_items_keeps_order(store: Store, tenant: str) -> None:
    items = [item(f"i{n:03d}") for n in range(120)]

    await new_conversation(store, tenant, items)

    assert ids_of(await store.all_items(tenant, "conv_1")) == ids_of(items)


async def test_get_conversation_other_tenant_returns_none(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item("a")])
    other = f"{tenant}-other"

    assert await store.get_conversation(other, "conv_1") is None
    assert await store.get_item(other, "conv_1", "a") is None
    assert await store.update_conversation(other, "conv_1", {}) is None
    assert await store.delete_conversation(other, "conv_1") is False
    with pytest.raises(LookupError):
        await store.append_items(other, "conv_1", [item("b")])
    with pytest.raises(LookupError):
        await store.all_items(other, "conv_1")


async def test_update_conversation_replaces_metadata(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant)

    updated = await store.update_conversation(tenant, "conv_1", {"k": "v"})

    assert updated is not None and updated.metadata == {"k": "v"}
    got = await store.get_conversation(tenant, "conv_1")
    assert got is not None and got.metadata == {"k": "v"}
    assert await store.update_conversation(tenant, "missing", {"k": "v"}) is None


async def test_delete_conversation_hides_and_purges_items(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await new_conversation(store, tenant, [item("a"), item("b")])

    assert await store.delete_conversation(tenant, "conv_1") is True

    assert await store.get_conversation(tenant, "conv_1") is None
    assert await store.get_item(tenant, "conv_1", "a") is None
    assert await store.delete_conversation(tenant, "conv_1") is False
    with pytest.raises(LookupError):
        await store.append_items(tenant, "conv_1", [item("c")])
    with pytest.raises(LookupError):
        await store.list_items(tenant, "conv_1")
    assert stored_rows(store, tenant) == 0


async def test_get_conversation_expired_returns_none(store: Store, tenant: str, clock: Any) -> None:
    await new_conversation(store, tenant, [item("a")])
    clock.now = CREATED + 30 * DAY

    assert await store.get_conversation(tenant, "conv_1") is None
    assert await store.get_item(tenant, "conv_1", "a") is None
    assert await store.update_conversation(tenant, "conv_1", {}) is None
    with pytest.raises(LookupError):
        await store.append_items(tenant, "conv_1", [item("b")])


async def test_append_items_20_concurrent_appends_all_land_contiguous(
    store: Store, tenant: str
) -> None:
    await new_conversation(store, tenant, [item("first")])
    batches = [[item(f"a{k:02d}_{j}") for j in range(3)] for k in range(20)]

    await asyncio.gather(*(store.append_items(tenant, "conv_1", b) for b in batches))

    got = ids_of(await store.all_items(tenant, "conv_1"))
    assert len(got) == 61 and got[0] == "first"
    for batch in batches:
        start = got.index(batch[0]["id"])
        assert got[start : start + 3] == ids_of(batch)


async def test_append_items_missing_conversation_raises_lookup_error(
    store: Store, tenant: str
) -> None:
    with pytest.raises(LookupError):
        await store.append_items(tenant, "nope", [item("a")])
    with pytest.raises(LookupError):
        await store.append_items(tenant, "nope", [])


async def test_append_items_once_key_appends_a_turn_once(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item("first")])
    turn = [item("q1"), item("a1")]

    await store.append_items(tenant, "conv_1", turn, once_key="resp_1")
    await store.append_items(tenant, "conv_1", turn, once_key="resp_1")  # a retry
    await store.append_items(tenant, "conv_1", [item("q2")], once_key="resp_2")
    await store.append_items(tenant, "conv_1", [item("q3")])  # unkeyed appends always land
    await store.append_items(tenant, "conv_1", turn, once_key="resp_1")

    assert ids_of(await store.all_items(tenant, "conv_1")) == ["first", "q1", "a1", "q2", "q3"]
    page = await store.list_items(tenant, "conv_1", order="desc", limit=2)
    assert (ids_of(page.data), page.has_more) == (["q3", "q2"], True)


async def test_append_items_once_key_concurrent_same_key_lands_once(
    store: Store, tenant: str
) -> None:
    await new_conversation(store, tenant)
    turn = [item("q"), item("a")]

    await asyncio.gather(
        *(store.append_items(tenant, "conv_1", turn, once_key="resp_1") for _ in range(10))
    )

    assert ids_of(await store.all_items(tenant, "conv_1")) == ["q", "a"]


async def test_append_items_once_key_is_per_conversation_and_tenant(
    store: Store, tenant: str
) -> None:
    await new_conversation(store, tenant, cid="conv_1")
    await new_conversation(store, tenant, cid="conv_2")
    await new_conversation(store, f"{tenant}-b", cid="conv_1")

    for t, cid in ((tenant, "conv_1"), (tenant, "conv_2"), (f"{tenant}-b", "conv_1")):
        await store.append_items(t, cid, [item(f"x_{cid}")], once_key="resp_1")

    assert ids_of(await store.all_items(tenant, "conv_1")) == ["x_conv_1"]
    assert ids_of(await store.all_items(tenant, "conv_2")) == ["x_conv_2"]
    assert ids_of(await store.all_items(f"{tenant}-b", "conv_1")) == ["x_conv_1"]


async def test_append_items_once_key_missing_conversation_raises_lookup_error(
    store: Store, tenant: str
) -> None:
    with pytest.raises(LookupError):
        await store.append_items(tenant, "nope", [item("a")], once_key="resp_1")


async def test_list_items_asc_pages_with_after_and_has_more(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item(f"i{n}") for n in range(4)])
    await store.append_items(tenant, "conv_1", [item(f"i{n}") for n in range(4, 7)])

    first = await store.list_items(tenant, "conv_1", limit=3, order="asc")
    second = await store.list_items(tenant, "conv_1", after="i2", limit=3, order="asc")
    last = await store.list_items(tenant, "conv_1", after="i5", limit=3, order="asc")

    assert (ids_of(first.data), first.has_more) == (["i0", "i1", "i2"], True)
    assert (ids_of(second.data), second.has_more) == (["i3", "i4", "i5"], True)
    assert (ids_of(last.data), last.has_more) == (["i6"], False)


async def test_list_items_desc_pages_with_after_and_has_more(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item(f"i{n}") for n in range(3)])
    await store.append_items(tenant, "conv_1", [item("i3"), item("i4")])
    await store.append_items(tenant, "conv_1", [item("i5"), item("i6")])

    first = await store.list_items(tenant, "conv_1", limit=3)
    second = await store.list_items(tenant, "conv_1", after="i4", limit=3)
    last = await store.list_items(tenant, "conv_1", after="i1", limit=3)
    empty = await store.list_items(tenant, "conv_1", after="i0", limit=3)

    assert (ids_of(first.data), first.has_more) == (["i6", "i5", "i4"], True)
    assert (ids_of(second.data), second.has_more) == (["i3", "i2", "i1"], True)
    assert (ids_of(last.data), last.has_more) == (["i0"], False)
    assert (empty.data, empty.has_more) == ([], False)


async def test_list_items_exact_page_has_more_false(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item(f"i{n}") for n in range(3)])

    page = await store.list_items(tenant, "conv_1", limit=3, order="asc")

    assert (ids_of(page.data), page.has_more) == (["i0", "i1", "i2"], False)


async def test_list_items_unknown_after_raises_lookup_error(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item("a")])

    with pytest.raises(LookupError):
        await store.list_items(tenant, "conv_1", after="missing")


async def test_get_item_and_delete_item_by_id(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item("a", "hello"), item("b"), item("c")])

    got = await store.get_item(tenant, "conv_1", "b")
    deleted = await store.delete_item(tenant, "conv_1", "b")

    assert got == item("b")
    assert deleted is True
    assert await store.get_item(tenant, "conv_1", "b") is None
    assert await store.delete_item(tenant, "conv_1", "b") is False
    assert ids_of(await store.all_items(tenant, "conv_1")) == ["a", "c"]
    assert await store.get_item(tenant, "conv_1", "a") == item("a", "hello")


async def test_append_items_5mb_item_round_trips_intact(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await new_conversation(store, tenant, [item("a")])
    image = base64.b64encode(os.urandom(3_750_000)).decode()
    large = {
        "type": "message",
        "id": "big",
        "role": "user",
        "content": [{"type": "input_image", "image_url": f"data:image/png;base64,{image}"}],
    }

    await store.append_items(tenant, "conv_1", [large, item("after")])

    assert await store.get_item(tenant, "conv_1", "big") == large
    page = await store.list_items(tenant, "conv_1", limit=2)
    assert page.data == [item("after"), large] and page.has_more is True
    assert (await store.all_items(tenant, "conv_1"))[1] == large
    assert await store.delete_item(tenant, "conv_1", "big") is True
    assert ids_of(await store.all_items(tenant, "conv_1")) == ["a", "after"]
    if isinstance(store, DynamoStore):
        assert not [r for r in rows_of(local_dynamo, tenant) if r["SK"]["S"].startswith("P#")]


@pytest.mark.dynamodb_only
async def test_conversation_rows_carry_schema_version_and_ttl(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await new_conversation(store, tenant, [item("a")])
    await store.append_items(tenant, "conv_1", [item("b", "x" * 200_000)])

    rows = rows_of(local_dynamo, tenant)

    assert {r["SK"]["S"][0] for r in rows} == {"I", "M", "X"}
    assert all(r["schema_version"] == {"N": str(RECORD_VERSION)} for r in rows)
    assert all(int(r["ttl"]["N"]) == CREATED + 30 * DAY for r in rows)


async def test_delete_item_concurrent_in_one_append_both_removed(store: Store, tenant: str) -> None:
    await new_conversation(store, tenant, [item("a"), item("b"), item("c"), item("d")])

    results = await asyncio.gather(
        store.delete_item(tenant, "conv_1", "b"), store.delete_item(tenant, "conv_1", "c")
    )

    assert results == [True, True]
    assert ids_of(await store.all_items(tenant, "conv_1")) == ["a", "d"]


async def test_delete_item_last_of_append_removes_row(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await new_conversation(store, tenant, [item("a")])
    await store.append_items(tenant, "conv_1", [item("b")])

    assert await store.delete_item(tenant, "conv_1", "b") is True

    if isinstance(store, DynamoStore):
        assert sorted(r["SK"]["S"] for r in rows_of(local_dynamo, tenant)) == [
            "I#000000000000",
            "M",
            "X#a",
        ]
    page = await store.list_items(tenant, "conv_1", after="a", order="asc")
    assert (page.data, page.has_more) == ([], False)


class FailingPut:
    """A client whose PutItem fails: chunks and index rows get written, the row never does."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def put_item(self, **kwargs: Any) -> dict[str, Any]:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "x"}}, "PutItem")


@pytest.mark.dynamodb_only
async def test_append_items_failed_commit_leaves_no_partial_append(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str, clock: Any
) -> None:
    await new_conversation(store, tenant, [item("a")])
    broken = DynamoStore(FailingPut(local_dynamo.client), local_dynamo.table_name, clock=clock)
    big = item("big", base64.b64encode(os.urandom(600_000)).decode())
    try:
        with pytest.raises(StoreError):
            await broken.append_items(tenant, "conv_1", [item("b"), big, item("c")])
    finally:
        broken.close()

    assert ids_of(await store.all_items(tenant, "conv_1")) == ["a"]
    assert await store.get_item(tenant, "conv_1", "b") is None
    assert await store.get_item(tenant, "conv_1", "big") is None
    await store.append_items(tenant, "conv_1", [item("d")])
    page = await store.list_items(tenant, "conv_1", order="asc")
    assert ids_of(page.data) == ["a", "d"]


@pytest.mark.dynamodb_only
async def test_append_items_duplicate_reservation_re_reserves_instead_of_overwriting(
    store: DynamoStore, tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DynamoDB's ADD is atomic; an emulator under load may hand out one range twice. Force
    # that: the second reservation repeats the first one's answer.
    await new_conversation(store, tenant, [item("first")])
    db = store._conversations._db
    real_update = db.update_item
    answers: list[Any] = []

    async def stale_once(*args: Any, **kwargs: Any) -> Any:
        answer = await real_update(*args, **kwargs)
        answers.append(answer)
        return answers[0] if len(answers) == 2 else answer

    monkeypatch.setattr(db, "update_item", stale_once)
    await store.append_items(tenant, "conv_1", [item("a")])
    await store.append_items(tenant, "conv_1", [item("b")])

    assert ids_of(await store.all_items(tenant, "conv_1")) == ["first", "a", "b"]
    assert len(answers) == 3  # the collision was detected and a fresh range reserved


async def test_list_conversations_pages_newest_first_with_current_metadata(
    store: Store, tenant: str
) -> None:
    for i in range(5):
        made = Conversation(tenant, f"conv_l{i}", CREATED + i, {"n": str(i)})
        await store.create_conversation(made, [item(f"i{i}")] if i % 2 else [])
    await store.create_conversation(Conversation(f"{tenant}-b", "conv_x", CREATED + 9), [])
    await store.update_conversation(tenant, "conv_l3", {"n": "three"})
    assert await store.delete_conversation(tenant, "conv_l1") is True

    first = await store.list_conversations(tenant, limit=2)
    assert [(c.id, c.metadata) for c in first.conversations] == [
        ("conv_l4", {"n": "4"}),
        ("conv_l3", {"n": "three"}),
    ]
    assert first.conversations[0].created_at == CREATED + 4
    rest = await store.list_conversations(tenant, before=first.next_cursor, limit=2)
    assert [c.id for c in rest.conversations] == ["conv_l2", "conv_l0"]
    if rest.next_cursor is not None:  # DynamoDB may not know the page was the last
        assert (await store.list_conversations(tenant, before=rest.next_cursor)).conversations == []
    assert (await store.list_conversations(f"{tenant}-nobody")).conversations == []


async def test_list_conversations_leaves_out_expired_ones(
    store: Store, tenant: str, clock: Any
) -> None:
    await store.create_conversation(
        Conversation(tenant, "conv_short", CREATED, expires_at=int(clock()) + 10), []
    )
    await store.create_conversation(Conversation(tenant, "conv_long", CREATED + 1), [])
    clock.advance(11)
    assert [c.id for c in (await store.list_conversations(tenant)).conversations] == ["conv_long"]
