"""Background-mode state (checkpoint, event log, terminal, tool-call journal), against every store
(``store``: DynamoDB on an embedded moto endpoint, then SQLite), plus the DynamoDB layout and
costs (``dynamodb_only``)."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import pytest

from responses_gateway.store import RECORD_VERSION, DynamoStore, Store, StoredResponse, StoreError
from responses_gateway.store.base import Checkpoint, CheckpointConflict, EventRead, Terminal
from responses_gateway.store.local import LocalDynamo
from responses_gateway.store.sqlite import SqliteStore

from .conftest import stored_rows

DAY = 86_400
NOW = 1_700_000_000
RESPONSE = "resp_bg"


def random_base64(size: int) -> str:
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()[:size]


def frame(seq: int, text: str = "") -> str:
    return (
        f'event: response.output_text.delta\ndata: {{"sequence_number":{seq},"delta":"{text}"}}\n\n'
    )


def frames(first: int, count: int) -> list[str]:
    return [frame(seq, f"é☃{seq}") for seq in range(first, first + count)]


def numbered(first: int, count: int) -> list[tuple[int, str]]:
    return list(enumerate(frames(first, count), first))


def checkpoint(tenant: str, version: int = 0, seq: int = 3, **state: Any) -> Checkpoint:
    return Checkpoint(
        tenant=tenant,
        response_id=RESPONSE,
        version=version,
        seq=seq,
        state={"next_action": {"type": "call_llm"}, "transcript": [{"type": "message"}], **state},
        run={"input_items": [{"type": "message", "id": "in_1"}], "chain": [], "generation": 0},
    )


def terminal(seq: int, status: str = "completed", **extra: Any) -> Terminal:
    response = {"id": RESPONSE, "object": "response", "status": status, **extra}
    return Terminal(
        sequence_number=seq,
        frame=f'event: response.{status}\ndata: {{"sequence_number":{seq}}}\n\n',
        response=response,
    )


def partition_items(local: LocalDynamo, tenant: str) -> list[dict[str, Any]]:
    """Every item of the response's partition: its sort key, schema version and TTL."""
    paginator = local.client.get_paginator("query")
    pages = paginator.paginate(
        TableName=local.table_name,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": f"T#{tenant}#R#{RESPONSE}"}},
        ProjectionExpression="SK, schema_version, #ttl",
        ExpressionAttributeNames={"#ttl": "ttl"},
    )
    return [item for page in pages for item in page["Items"]]


def partition(local: LocalDynamo, tenant: str) -> list[str]:
    """The sort keys of every item in the response's partition."""
    return [item["SK"]["S"] for item in partition_items(local, tenant)]


def record(tenant: str) -> StoredResponse:
    response = {
        "id": RESPONSE,
        "object": "response",
        "created_at": NOW,
        "status": "in_progress",
        "background": True,
        "output": [],
    }
    items = [{"type": "message", "id": "in_1", "role": "user", "content": "hi"}]
    return StoredResponse(tenant=tenant, id=RESPONSE, response=response, input_items=items)


async def write_everything(store: Store, tenant: str) -> None:
    """One item of every background kind, each large enough to be chunked (random base64
    compresses to 3/4: 600 KB make two chunks)."""
    await store.put_checkpoint(
        checkpoint(tenant, blob=random_base64(600_000)), expected_version=None
    )
    await store.append_events(tenant, RESPONSE, 0, frames(0, 3))
    await store.append_events(tenant, RESPONSE, 3, [frame(3, random_base64(600_000))])
    await store.claim_terminal(tenant, RESPONSE, terminal(4, output=random_base64(600_000)))
    assert await store.journal_start(tenant, RESPONSE, "call#1") is None
    await store.journal_finish(tenant, RESPONSE, "call#1", {"output": random_base64(600_000)})


# Checkpoint


async def test_put_checkpoint_then_get_returns_exact_checkpoint(store: Store, tenant: str) -> None:
    saved = checkpoint(tenant)
    await store.put_checkpoint(saved, expected_version=None)

    got = await store.get_checkpoint(tenant, RESPONSE)

    assert got == Checkpoint(
        tenant=tenant,
        response_id=RESPONSE,
        version=0,
        seq=3,
        state=saved.state,
        run=saved.run,
        cancel_requested=False,
        expires_at=NOW + 30 * DAY,
    )


async def test_put_checkpoint_large_state_is_chunked_and_replaced_chunks_removed(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    first = checkpoint(tenant, blob=random_base64(900_000))
    second = checkpoint(tenant, version=1, seq=9, blob=random_base64(500_000))
    await store.put_checkpoint(first, expected_version=None)
    assert (await store.get_checkpoint(tenant, RESPONSE)) is not None

    await store.put_checkpoint(second, expected_version=0)

    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None
    assert (got.version, got.seq, got.state, got.run) == (1, 9, second.state, second.run)
    if isinstance(store, DynamoStore):
        chunks = [sk for sk in partition(local_dynamo, tenant) if sk.startswith("SC#")]
        assert len(chunks) == 2  # 500 KB of random base64: two 350 KB chunks, one nonce
        assert len({sk.split("#")[1] for sk in chunks}) == 1


async def test_put_checkpoint_stale_expected_version_raises_conflict(
    store: Store, tenant: str
) -> None:
    await store.put_checkpoint(checkpoint(tenant), expected_version=None)
    await store.put_checkpoint(checkpoint(tenant, version=1, seq=5), expected_version=0)

    with pytest.raises(CheckpointConflict):
        await store.put_checkpoint(checkpoint(tenant, version=1, seq=7), expected_version=0)

    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None and (got.version, got.seq) == (1, 5)


async def test_put_checkpoint_first_write_twice_raises_conflict(store: Store, tenant: str) -> None:
    await store.put_checkpoint(checkpoint(tenant, seq=1), expected_version=None)

    with pytest.raises(CheckpointConflict):
        await store.put_checkpoint(checkpoint(tenant, seq=2), expected_version=None)

    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None and (got.version, got.seq) == (0, 1)


async def test_put_checkpoint_expected_on_missing_raises_conflict(
    store: Store, tenant: str
) -> None:
    with pytest.raises(CheckpointConflict):
        await store.put_checkpoint(checkpoint(tenant, version=1), expected_version=0)

    assert await store.get_checkpoint(tenant, RESPONSE) is None


async def test_put_checkpoint_conflict_with_large_state_leaves_no_chunks(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await store.put_checkpoint(checkpoint(tenant), expected_version=None)

    with pytest.raises(CheckpointConflict):
        await store.put_checkpoint(
            checkpoint(tenant, blob=random_base64(800_000)), expected_version=None
        )

    # the checkpoint (and, in SQLite, its run lease: see test_run_leases.py)
    assert stored_rows(store, tenant) == (2 if isinstance(store, SqliteStore) else 1)


@pytest.mark.parametrize(("version", "expected"), [(1, None), (0, 0), (3, 1)])
async def test_put_checkpoint_version_not_following_expected_raises_value_error(
    store: Store, tenant: str, version: int, expected: int | None
) -> None:
    with pytest.raises(ValueError, match="must be"):
        await store.put_checkpoint(checkpoint(tenant, version=version), expected_version=expected)

    assert await store.get_checkpoint(tenant, RESPONSE) is None


async def test_request_cancel_blocks_later_writes_and_is_visible(store: Store, tenant: str) -> None:
    await store.put_checkpoint(checkpoint(tenant, seq=4), expected_version=None)

    assert await store.cancel_requested(tenant, RESPONSE) is False
    assert await store.request_cancel(tenant, RESPONSE) is True
    assert await store.cancel_requested(tenant, RESPONSE) is True
    assert await store.cancel_requested(f"{tenant}-other", RESPONSE) is False

    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None and (got.version, got.seq, got.cancel_requested) == (0, 4, True)
    with pytest.raises(CheckpointConflict):
        await store.put_checkpoint(checkpoint(tenant, version=1, seq=6), expected_version=0)
    assert await store.request_cancel(tenant, RESPONSE) is True
    again = await store.get_checkpoint(tenant, RESPONSE)
    assert again == got


async def test_request_cancel_without_checkpoint_returns_false(store: Store, tenant: str) -> None:
    assert await store.request_cancel(tenant, RESPONSE) is False

    assert await store.get_checkpoint(tenant, RESPONSE) is None
    assert await store.cancel_requested(tenant, RESPONSE) is False


@pytest.mark.dynamodb_only
async def test_get_checkpoint_newer_schema_version_raises_store_error(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await store.put_checkpoint(checkpoint(tenant), expected_version=None)
    local_dynamo.client.update_item(
        TableName=local_dynamo.table_name,
        Key={"PK": {"S": f"T#{tenant}#R#{RESPONSE}"}, "SK": {"S": "S"}},
        UpdateExpression="SET schema_version = :v",
        ExpressionAttributeValues={":v": {"N": str(RECORD_VERSION + 1)}},
    )

    with pytest.raises(StoreError, match="schema version"):
        await store.get_checkpoint(tenant, RESPONSE)


# Event log


async def test_read_events_after_cursor_returns_exact_events(store: Store, tenant: str) -> None:
    await store.append_events(tenant, RESPONSE, 0, frames(0, 3))
    await store.append_events(tenant, RESPONSE, 3, frames(3, 2))
    await store.append_events(tenant, RESPONSE, 5, frames(5, 1))

    assert await store.read_events(tenant, RESPONSE, -1) == EventRead(numbered(0, 6), None)
    assert await store.read_events(tenant, RESPONSE, 1) == EventRead(numbered(2, 4), None)
    assert await store.read_events(tenant, RESPONSE, 2) == EventRead(numbered(3, 3), None)
    assert await store.read_events(tenant, RESPONSE, 4) == EventRead(numbered(5, 1), None)
    assert await store.read_events(tenant, RESPONSE, 5) == EventRead([], None)
    assert await store.read_events(tenant, RESPONSE, 99) == EventRead([], None)


async def test_read_events_without_log_returns_nothing(store: Store, tenant: str) -> None:
    assert await store.read_events(tenant, RESPONSE, -1) == EventRead([], None)


async def test_read_events_many_batches_returns_all_in_order(store: Store, tenant: str) -> None:
    sizes = [1, 4, 2, 7, 1, 3] * 10
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    # Appended concurrently and out of order: the order comes from the sequence numbers.
    await asyncio.gather(
        *(
            store.append_events(tenant, RESPONSE, start, frames(start, size))
            for start, size in reversed(list(zip(starts, sizes, strict=True)))
        )
    )
    total = sum(sizes)

    got = await store.read_events(tenant, RESPONSE, -1)
    middle = await store.read_events(tenant, RESPONSE, 100)

    assert got == EventRead(numbered(0, total), None)
    assert middle == EventRead(numbered(101, total - 101), None)


async def test_append_events_large_batch_round_trips_through_chunks(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    big = [frame(2, random_base64(300_000)), frame(3, random_base64(300_000))]
    await store.append_events(tenant, RESPONSE, 0, frames(0, 2))
    await store.append_events(tenant, RESPONSE, 2, big)
    await store.append_events(tenant, RESPONSE, 4, frames(4, 1))

    got = await store.read_events(tenant, RESPONSE, 1)

    assert got == EventRead([(2, big[0]), (3, big[1]), *numbered(4, 1)], None)
    if isinstance(store, DynamoStore):
        keys = partition(local_dynamo, tenant)
        assert [sk for sk in keys if sk.startswith("E#")] == [
            "E#0000000001",
            "E#0000000003",
            "E#0000000004",
        ]
        assert len([sk for sk in keys if sk.startswith("EC#")]) == 2


async def test_append_events_same_batch_again_replaces_it(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await store.append_events(tenant, RESPONSE, 0, [frame(0, random_base64(500_000))])
    again = [frame(0, random_base64(600_000))]

    await store.append_events(tenant, RESPONSE, 0, again)

    assert await store.read_events(tenant, RESPONSE, -1) == EventRead([(0, again[0])], None)
    if isinstance(store, DynamoStore):
        chunks = [sk for sk in partition(local_dynamo, tenant) if sk.startswith("EC#")]
        assert len(chunks) == 2 and len({sk.split("#")[1] for sk in chunks}) == 1


async def test_append_events_sequence_out_of_range_raises_value_error(
    store: Store, tenant: str
) -> None:
    with pytest.raises(ValueError):
        await store.append_events(tenant, RESPONSE, -1, frames(0, 1))
    with pytest.raises(ValueError):
        await store.append_events(tenant, RESPONSE, 9_999_999_999, frames(0, 2))

    await store.append_events(tenant, RESPONSE, 0, [])
    assert await store.last_event_seq(tenant, RESPONSE) == -1


async def test_claim_terminal_concurrent_claims_exactly_one_wins(store: Store, tenant: str) -> None:
    done, cancelled = terminal(7, "completed"), terminal(7, "cancelled")

    results = await asyncio.gather(
        store.claim_terminal(tenant, RESPONSE, done),
        store.claim_terminal(tenant, RESPONSE, cancelled),
    )

    assert results.count(None) == 1
    winner = cancelled if results[0] is not None else done
    assert [r for r in results if r is not None] == [winner]
    assert await store.get_terminal(tenant, RESPONSE) == winner
    assert await store.claim_terminal(tenant, RESPONSE, terminal(9, "failed")) == winner


async def test_claim_terminal_large_response_round_trips(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    big = terminal(3, output=[{"type": "message", "text": random_base64(900_000)}])

    assert await store.claim_terminal(tenant, RESPONSE, big) is None

    assert await store.get_terminal(tenant, RESPONSE) == big
    assert await store.read_events(tenant, RESPONSE, -1) == EventRead([], big)
    assert await store.claim_terminal(tenant, RESPONSE, terminal(3, "failed")) == big
    if isinstance(store, DynamoStore):
        chunks = [sk for sk in partition(local_dynamo, tenant) if sk.startswith("EC#")]
        assert len(chunks) == 2  # 675 KB compressed; the loser's chunks were removed


async def test_read_events_with_terminal_hides_events_at_or_after_it(
    store: Store, tenant: str
) -> None:
    end = terminal(4, "cancelled")
    await store.append_events(tenant, RESPONSE, 0, frames(0, 3))
    await store.claim_terminal(tenant, RESPONSE, end)
    await store.append_events(tenant, RESPONSE, 3, frames(3, 3))  # a worker that kept going

    assert await store.read_events(tenant, RESPONSE, -1) == EventRead(numbered(0, 4), end)
    assert await store.read_events(tenant, RESPONSE, 2) == EventRead(numbered(3, 1), end)
    assert await store.read_events(tenant, RESPONSE, 3) == EventRead([], end)
    assert await store.read_events(tenant, RESPONSE, 4) == EventRead([], end)
    assert await store.read_events(tenant, RESPONSE, 9_999_999_999) == EventRead([], end)


async def test_last_event_seq_returns_highest_numbered_event(store: Store, tenant: str) -> None:
    assert await store.last_event_seq(tenant, RESPONSE) == -1
    await store.append_events(tenant, RESPONSE, 0, frames(0, 3))
    await store.append_events(tenant, RESPONSE, 3, frames(3, 9))
    await store.append_events(tenant, RESPONSE, 12, frames(12, 1))
    await store.claim_terminal(tenant, RESPONSE, terminal(13))
    if isinstance(store, DynamoStore):
        store.meter.reset()

    assert await store.last_event_seq(tenant, RESPONSE) == 12

    if isinstance(store, DynamoStore):
        units = store.meter.snapshot()["last_event_seq"]
        assert (units.round_trips, units.read_units) == (1, 1)


async def test_truncate_events_removes_batches_from_seq_and_keeps_earlier(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    big = [frame(5, random_base64(500_000))]
    await store.append_events(tenant, RESPONSE, 0, frames(0, 3))
    await store.append_events(tenant, RESPONSE, 3, frames(3, 2))
    await store.append_events(tenant, RESPONSE, 5, big)
    await store.append_events(tenant, RESPONSE, 6, frames(6, 4))
    await store.claim_terminal(tenant, RESPONSE, terminal(20))

    await store.truncate_events(tenant, RESPONSE, 3)

    assert await store.read_events(tenant, RESPONSE, -1) == EventRead(numbered(0, 3), terminal(20))
    assert await store.last_event_seq(tenant, RESPONSE) == 2
    assert stored_rows(store, tenant) == 2  # the first batch and the terminal
    if isinstance(store, DynamoStore):
        assert sorted(partition(local_dynamo, tenant)) == ["E#0000000002", "E#~"]
    await store.append_events(tenant, RESPONSE, 3, frames(3, 1))
    assert await store.last_event_seq(tenant, RESPONSE) == 3


async def test_truncate_events_past_the_end_keeps_everything(store: Store, tenant: str) -> None:
    await store.append_events(tenant, RESPONSE, 0, frames(0, 3))

    await store.truncate_events(tenant, RESPONSE, 3)
    await store.truncate_events(tenant, RESPONSE, 10_000_000_000)

    assert await store.read_events(tenant, RESPONSE, -1) == EventRead(numbered(0, 3), None)


# Tool-call journal


async def test_journal_start_finish_start_again_returns_finished_outcome(
    store: Store, tenant: str
) -> None:
    outcome = {"output": "14:02 in Paris", "is_error": False, "items": [{"type": "mcp_call"}]}

    assert await store.journal_start(tenant, RESPONSE, "call_1") is None
    assert await store.journal_start(tenant, RESPONSE, "call_1") == {"state": "started"}
    await store.journal_finish(tenant, RESPONSE, "call_1", outcome)

    assert await store.journal_start(tenant, RESPONSE, "call_1") == {
        "state": "finished",
        "outcome": outcome,
    }
    assert await store.journal_start(tenant, RESPONSE, "call_2") is None


async def test_journal_finish_large_outcome_round_trips(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    outcome = {"output": random_base64(600_000)}
    await store.journal_start(tenant, RESPONSE, "c#1")

    await store.journal_finish(tenant, RESPONSE, "c#1", outcome)

    assert await store.journal_start(tenant, RESPONSE, "c#1") == {
        "state": "finished",
        "outcome": outcome,
    }
    if isinstance(store, DynamoStore):
        keys = partition(local_dynamo, tenant)
        assert [sk for sk in keys if sk.startswith("K#")] == ["K#c%231"]
        assert len([sk for sk in keys if sk.startswith("KC#")]) == 2


# Tenancy, expiry, and living beside the response record


async def test_background_items_other_tenant_sees_nothing(store: Store, tenant: str) -> None:
    await write_everything(store, tenant)
    other = f"{tenant}-other"

    assert await store.get_checkpoint(other, RESPONSE) is None
    assert await store.request_cancel(other, RESPONSE) is False
    assert await store.read_events(other, RESPONSE, -1) == EventRead([], None)
    assert await store.last_event_seq(other, RESPONSE) == -1
    assert await store.get_terminal(other, RESPONSE) is None
    assert await store.claim_terminal(other, RESPONSE, terminal(0)) is None
    assert await store.journal_start(other, RESPONSE, "call#1") is None
    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None and got.cancel_requested is False
    read = await store.read_events(tenant, RESPONSE, -1)
    assert [seq for seq, _ in read.events] == [0, 1, 2, 3]
    assert read.terminal is not None and read.terminal.sequence_number == 4


async def test_background_items_expired_read_as_missing(
    store: Store, tenant: str, clock: Any
) -> None:
    await store.put_checkpoint(checkpoint(tenant), expected_version=None)
    await store.append_events(tenant, RESPONSE, 0, frames(0, 2))
    await store.claim_terminal(tenant, RESPONSE, terminal(2))
    await store.journal_start(tenant, RESPONSE, "call_1")
    clock.now = NOW + 30 * DAY - 1
    assert await store.get_checkpoint(tenant, RESPONSE) is not None
    assert await store.read_events(tenant, RESPONSE, -1) == EventRead(numbered(0, 2), terminal(2))

    clock.now = NOW + 30 * DAY

    assert await store.get_checkpoint(tenant, RESPONSE) is None
    assert await store.request_cancel(tenant, RESPONSE) is False
    assert await store.read_events(tenant, RESPONSE, -1) == EventRead([], None)
    assert await store.last_event_seq(tenant, RESPONSE) == -1
    assert await store.get_terminal(tenant, RESPONSE) is None
    with pytest.raises(CheckpointConflict):
        await store.put_checkpoint(checkpoint(tenant, version=1), expected_version=0)
    # Expired items are missing to writers too: new ones take their place.
    assert await store.journal_start(tenant, RESPONSE, "call_1") is None
    assert await store.claim_terminal(tenant, RESPONSE, terminal(5, "failed")) is None
    await store.put_checkpoint(checkpoint(tenant, seq=8), expected_version=None)
    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None and (got.seq, got.expires_at) == (8, NOW + 60 * DAY)


async def test_get_response_unaffected_by_background_items(store: Store, tenant: str) -> None:
    await store.put_response(record(tenant))
    expected = await store.get_response(tenant, RESPONSE)
    if isinstance(store, DynamoStore):
        store.meter.reset()

    await write_everything(store, tenant)
    got = await store.get_response(tenant, RESPONSE)
    [again] = await store.get_responses(tenant, [RESPONSE])

    assert got == expected and again == expected
    if isinstance(store, DynamoStore):
        assert store.meter.snapshot()["get_response"].round_trips == 1


async def test_delete_response_purges_background_items(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await store.put_response(record(tenant))
    await write_everything(store, tenant)
    await store.journal_start(tenant, RESPONSE, "call_2")
    assert stored_rows(store, tenant) >= 7

    assert await store.delete_response(tenant, RESPONSE) is True

    assert stored_rows(store, tenant) == 0
    assert await store.get_checkpoint(tenant, RESPONSE) is None
    assert await store.read_events(tenant, RESPONSE, -1) == EventRead([], None)
    assert await store.delete_response(tenant, RESPONSE) is False


async def test_delete_response_other_tenant_keeps_background_items(
    store: Store, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await store.put_response(record(tenant))
    await store.append_events(tenant, RESPONSE, 0, frames(0, 2))

    assert await store.delete_response(f"{tenant}-other", RESPONSE) is False

    assert stored_rows(store, tenant) == 3  # the record, its input item's index entry, the batch
    assert await store.read_events(tenant, RESPONSE, -1) == EventRead(numbered(0, 2), None)


@pytest.mark.dynamodb_only
async def test_background_items_have_schema_version_and_ttl(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str
) -> None:
    await write_everything(store, tenant)

    items = partition_items(local_dynamo, tenant)

    assert {i["SK"]["S"].split("#")[0] for i in items} == {"S", "SC", "E", "EC", "K", "KC"}
    assert all(i["schema_version"] == {"N": str(RECORD_VERSION)} for i in items)
    assert all(int(i["ttl"]["N"]) == NOW + 30 * DAY for i in items)


@pytest.mark.dynamodb_only
async def test_background_small_operations_cost_one_round_trip(
    store: DynamoStore, tenant: str
) -> None:
    await store.put_checkpoint(checkpoint(tenant), expected_version=None)
    await store.append_events(tenant, RESPONSE, 0, frames(0, 3))
    await store.read_events(tenant, RESPONSE, -1)
    await store.claim_terminal(tenant, RESPONSE, terminal(3))
    await store.journal_start(tenant, RESPONSE, "call_1")

    units = store.meter.snapshot()

    assert {op: (u.round_trips, u.write_units, u.read_units) for op, u in units.items()} == {
        "put_checkpoint": (1, 1, 0),
        "append_events": (1, 1, 0),
        "read_events": (1, 0, 1),
        "claim_terminal": (1, 1, 0),
        "journal_start": (1, 1, 0),
    }


class ReplaceOnFirstBatchGet:
    """A client that, on its first BatchGetItem, first lets ``replace`` rewrite the data (as a
    concurrent writer would between a reader's Query and its chunk reads)."""

    def __init__(self, client: Any, replace: Any) -> None:
        self._client = client
        self._replace = replace
        self.batch_gets = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.batch_gets += 1
        if self.batch_gets == 1:
            asyncio.run(self._replace())
        return dict(self._client.batch_get_item(**kwargs))


@pytest.mark.dynamodb_only
async def test_read_events_chunked_batch_replaced_while_read_reads_again(
    store: DynamoStore, local_dynamo: LocalDynamo, tenant: str, clock: Any
) -> None:
    await store.append_events(tenant, RESPONSE, 0, [frame(0, random_base64(600_000))])
    replacement = [frame(0, random_base64(600_000)), frame(1)]

    async def replace() -> None:
        await store.truncate_events(tenant, RESPONSE, 0)
        await store.append_events(tenant, RESPONSE, 0, replacement)

    client = ReplaceOnFirstBatchGet(local_dynamo.client, replace)
    reader = DynamoStore(client, local_dynamo.table_name, clock=clock)
    try:
        got = await reader.read_events(tenant, RESPONSE, -1)
    finally:
        reader.close()

    assert got == EventRead([(0, replacement[0]), (1, replacement[1])], None)
    assert client.batch_gets == 2


# Writers racing on one record


async def test_put_checkpoint_racing_writers_on_one_version_exactly_one_wins(
    store: Store, tenant: str
) -> None:
    await store.put_checkpoint(checkpoint(tenant), expected_version=None)
    rivals = [checkpoint(tenant, version=1, seq=10 + n) for n in range(6)]

    results = await asyncio.gather(
        *(store.put_checkpoint(c, expected_version=0) for c in rivals), return_exceptions=True
    )

    assert sum(r is None for r in results) == 1
    assert all(isinstance(r, CheckpointConflict) for r in results if r is not None)
    winner = rivals[results.index(None)]
    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None and (got.version, got.seq) == (1, winner.seq)


async def test_journal_start_racing_writers_exactly_one_runs_the_call(
    store: Store, tenant: str
) -> None:
    results = await asyncio.gather(
        *(store.journal_start(tenant, RESPONSE, "call_1") for _ in range(6))
    )

    assert results.count(None) == 1
    assert [r for r in results if r is not None] == [{"state": "started"}] * 5


async def test_request_cancel_racing_a_checkpoint_write_fences_it_or_follows_it(
    store: Store, tenant: str
) -> None:
    await store.put_checkpoint(checkpoint(tenant), expected_version=None)

    written, cancelled = await asyncio.gather(
        store.put_checkpoint(checkpoint(tenant, version=1, seq=5), expected_version=0),
        store.request_cancel(tenant, RESPONSE),
        return_exceptions=True,
    )

    assert cancelled is True
    got = await store.get_checkpoint(tenant, RESPONSE)
    assert got is not None and got.cancel_requested is True
    assert got.version == (0 if isinstance(written, CheckpointConflict) else 1)
    with pytest.raises(CheckpointConflict):
        await store.put_checkpoint(
            checkpoint(tenant, version=got.version + 1), expected_version=got.version
        )
