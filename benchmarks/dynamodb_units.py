"""DynamoDB request units and round trips per gateway operation, counted from the actual calls.

Runs :class:`responses_gateway.store.DynamoStore` against an embedded moto DynamoDB server (no
AWS account, no app) and, for each operation, resets the store's
:class:`~responses_gateway.store.UnitMeter`, performs exactly the store calls the gateway makes
for it, and reports the read and write request units (computed from the sizes of the items read
and written, by DynamoDB's on-demand rules: see ``store/DESIGN.md``) and the number of DynamoDB
requests (round trips).

Operations:

- ``create stored``: ``POST /v1/responses`` with ``store: true`` and no previous response
  (one ``put_response`` of a typical response);
- ``chained create @N``: a create whose ``previous_response_id`` has N-1 ancestors (the new record's
  chain has N ids): ``get_response(previous)`` + ``get_responses(previous.chain)`` + its
  ``put_response``;
- ``GET response``: ``GET /v1/responses/{id}`` (one ``get_response``), for a root and for a record
  at depth 100;
- ``input_items page``: ``GET /v1/responses/{id}/input_items`` (one ``get_response``; paging is
  done in memory);
- ``item_reference lookup``: the one ``get_items`` read a create with 3 (or 100) ``item_reference``
  items outside its context makes; ``delete response``: a delete, its item index included;
- extras: a 5 MB-input create and its read, a conversation append and a conversation read;
- background mode: a checkpoint write of a typical loop state (``put_checkpoint``), one batch of
  8 SSE frames logged (``append_events``), a replay of 40 logged events plus the terminal
  (``read_events``) and the terminal claim (``claim_terminal``);
- usage ledger: one ended response recorded (``record_usage``: the request-log entry and three
  counter ADDs in one transaction), a repeated record of it (a retried worker), a budget check
  (``get_spend``: day and month totals and the tenant's limits) and an operator's usage read of
  one day (``read_usage``) over 50 tenants x 2 models.

Usage::

    python benchmarks/dynamodb_units.py [--json PATH]

The exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import json
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

from responses_gateway.ids import new_id
from responses_gateway.store import Conversation, DynamoStore, StoredResponse
from responses_gateway.store.base import Checkpoint, Terminal, UsageCounts, UsageEntry
from responses_gateway.store.local import start_local_dynamodb

TENANT = "bench"
CREATED = int(time.time())


_VOCABULARY = (
    "the a weather city forecast rain wind sun cloud temperature degrees tomorrow today "
    "morning evening light heavy chance mild warm cold north south river bridge museum "
    "train ticket price hotel room breakfast open closed street map walk minutes hours "
)
_WORDS = _VOCABULARY.split()


def prose(words: int, seed: str) -> str:
    """Non-repeating English-like text (compresses about as well as real prose)."""
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def typical_record(response_id: str, chain: list[str], extra_input: str = "") -> StoredResponse:
    """A response of about 6 KB of JSON: a user message, reasoning, a tool call and an answer."""
    text = prose(300, response_id)
    output = [
        {
            "type": "reasoning",
            "id": f"rs_{response_id}",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": prose(150, "r" + response_id)}],
        },
        {
            "type": "function_call",
            "id": f"fc_{response_id}",
            "call_id": f"call_{response_id}",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "status": "completed",
        },
        {
            "type": "message",
            "id": f"msg_{response_id}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        },
    ]
    content: list[dict[str, Any]] = [{"type": "input_text", "text": prose(60, "q" + response_id)}]
    if extra_input:
        content.append({"type": "input_image", "image_url": extra_input})
    response = {
        "id": response_id,
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": "demo",
        "output": output,
        "previous_response_id": chain[-1] if chain else None,
        "usage": {"input_tokens": 420, "output_tokens": 180, "total_tokens": 600},
        "instructions": prose(80, "instructions"),
        "tools": [],
        "metadata": {},
    }
    items = [{"type": "message", "id": f"in_{response_id}", "role": "user", "content": content}]
    return StoredResponse(TENANT, response_id, response, items, chain=list(chain))


async def measure(store: DynamoStore, action: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
    store.meter.reset()
    await action()
    total = store.meter.total()
    return {
        "read_units": total.read_units,
        "write_units": total.write_units,
        "round_trips": total.round_trips,
        "moto_reported_units": round(total.reported_units, 1),
        "by_store_call": {op: units.to_dict() for op, units in store.meter.snapshot().items()},
    }


async def chain_of(store: DynamoStore, length: int) -> list[str]:
    """``length`` stored responses, each continuing the previous one."""
    ids = [new_id("resp") for _ in range(length)]
    await asyncio.gather(
        *(store.put_response(typical_record(rid, ids[:n])) for n, rid in enumerate(ids))
    )
    return ids


async def chained_create(store: DynamoStore, previous_id: str, new_id: str) -> None:
    """The store calls of a create with ``previous_response_id`` (as the service makes them)."""
    previous = await store.get_response(TENANT, previous_id)
    assert previous is not None
    ancestors = await store.get_responses(TENANT, previous.chain)
    assert len(ancestors) == len(previous.chain)
    await store.put_response(typical_record(new_id, [*previous.chain, previous.id]))


async def run(store: DynamoStore) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    rows["create stored"] = await measure(
        store, lambda: store.put_response(typical_record("resp_root", []))
    )
    for depth in (1, 10, 100):
        ids = await chain_of(store, depth)
        create = functools.partial(chained_create, store, ids[-1], f"resp_new_{depth}")
        rows[f"chained create @{depth}"] = await measure(store, create)
    rows["GET response (root)"] = await measure(
        store, lambda: store.get_response(TENANT, "resp_root")
    )
    rows["GET response (depth 100)"] = await measure(
        store, lambda: store.get_response(TENANT, "resp_new_100")
    )
    rows["input_items page"] = await measure(store, lambda: store.get_response(TENANT, "resp_root"))
    references = ["rs_resp_root", "fc_resp_root", "msg_resp_root"]
    rows["item_reference lookup (3 items)"] = await measure(
        store, lambda: store.get_items(TENANT, references)
    )
    many = [f"{kind}_{rid}" for rid in ids for kind in ("rs", "fc", "msg")][:100]
    rows["item_reference lookup (100 items)"] = await measure(
        store, lambda: store.get_items(TENANT, many)
    )
    await store.put_response(typical_record("resp_doomed", []))
    rows["delete response (4 indexed items)"] = await measure(
        store, lambda: store.delete_response(TENANT, "resp_doomed")
    )
    image = "data:image/png;base64," + base64.b64encode(os.urandom(3_750_000)).decode()
    rows["create stored, 5 MB input"] = await measure(
        store, lambda: store.put_response(typical_record("resp_big", [], extra_input=image))
    )
    rows["GET response, 5 MB input"] = await measure(
        store, lambda: store.get_response(TENANT, "resp_big")
    )
    conversation = Conversation(TENANT, "conv_bench", CREATED)
    await store.create_conversation(conversation, [])
    record = typical_record("resp_conv", [])
    turn = [*record.input_items, *record.output]
    for _ in range(24):
        await store.append_items(TENANT, "conv_bench", turn)
    rows["conversation append (4 items)"] = await measure(
        store, lambda: store.append_items(TENANT, "conv_bench", turn)
    )
    rows["conversation all_items (100 items)"] = await measure(
        store, lambda: store.all_items(TENANT, "conv_bench")
    )
    rows["conversation list_items (20)"] = await measure(
        store, lambda: store.list_items(TENANT, "conv_bench", limit=20)
    )
    rows.update(await background(store))
    return rows


def sse_frame(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def background(store: DynamoStore) -> dict[str, dict[str, Any]]:
    """A background response after a tool turn: its checkpoint, a batch of text deltas, a replay
    and the terminal claim."""
    rows: dict[str, dict[str, Any]] = {}
    record = typical_record("resp_bg", [])
    state = {
        "next_action": {"type": "call_llm"},
        "transcript": [*record.input_items, *record.output],
        "iterations": 2,
        "usage": record.response["usage"],
    }
    run_info = {"input_items": record.input_items, "chain": [], "store": True, "generation": 0}
    await store.put_checkpoint(
        Checkpoint(TENANT, "resp_bg", 0, 4, state, run_info), expected_version=None
    )
    rows["background checkpoint put"] = await measure(
        store,
        lambda: store.put_checkpoint(
            Checkpoint(TENANT, "resp_bg", 1, 12, state, run_info), expected_version=0
        ),
    )
    words = prose(40, "deltas").split()
    deltas = [
        sse_frame(
            "response.output_text.delta",
            {
                "type": "response.output_text.delta",
                "item_id": "msg_1",
                "output_index": 2,
                "content_index": 0,
                "delta": f" {word}",
                "sequence_number": seq,
            },
        )
        for seq, word in enumerate(words)
    ]
    for first in range(0, 32, 8):
        await store.append_events(TENANT, "resp_bg", first, deltas[first : first + 8])
    rows["background event batch append (8)"] = await measure(
        store, lambda: store.append_events(TENANT, "resp_bg", 32, deltas[32:40])
    )
    final = {**record.response, "id": "resp_bg", "background": True}
    terminal = Terminal(
        40, sse_frame("response.completed", {"response": final, "sequence_number": 40}), final
    )
    rows["background claim_terminal"] = await measure(
        store, lambda: store.claim_terminal(TENANT, "resp_bg", terminal)
    )
    rows["background read_events (40 + end)"] = await measure(
        store, lambda: store.read_events(TENANT, "resp_bg", -1)
    )
    return rows


def _entry(tenant: str, response_id: str, model: str = "gpt-4o-mini") -> UsageEntry:
    counts = UsageCounts(
        input_tokens=1834,
        cached_tokens=1024,
        output_tokens=412,
        reasoning_tokens=128,
        model_calls=3,
        tool_calls=2,
        responses=1,
        cost_usd=Decimal("0.000397"),
    )
    return UsageEntry(
        tenant=tenant,
        response_id=response_id,
        model=model,
        ended_at=CREATED,
        status="completed",
        counts=counts,
        api_key_id="k7x2abcd9e",
        extra={},
    )


async def ledger(store: DynamoStore) -> dict[str, dict[str, Any]]:
    """The usage ledger: one response recorded, recorded again, a budget check, a day's read."""
    rows: dict[str, dict[str, Any]] = {}
    rows["ledger record_usage (1 response)"] = await measure(
        store, lambda: store.record_usage(_entry(TENANT, "resp_ledger"))
    )
    rows["ledger record_usage again (retry)"] = await measure(
        store, lambda: store.record_usage(_entry(TENANT, "resp_ledger"))
    )
    rows["ledger get_spend (budget check)"] = await measure(
        store, lambda: store.get_spend(TENANT, CREATED)
    )
    await asyncio.gather(
        *(
            store.record_usage(_entry(f"tenant{i}", f"resp_{i}_{m}", model=m))
            for i in range(50)
            for m in ("gpt-4o-mini", "gpt-4.1")
        )
    )
    day = CREATED - CREATED % 86_400
    rows["ledger read_usage (1 day, 100 rows)"] = await measure(
        store, lambda: store.read_usage(day, day + 86_400)
    )
    return rows


def print_table(rows: dict[str, dict[str, Any]], started_in: float) -> None:
    print(f"embedded moto DynamoDB ready in {started_in:.2f} s (moto import included)")
    header = f"{'operation':<38} {'RRU':>6} {'WRU':>6} {'round trips':>12}"
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        print(f"{name:<38} {row['read_units']:>6} {row['write_units']:>6} {row['round_trips']:>12}")
    print("RRU/WRU: read/write request units computed from item sizes (DynamoDB on-demand rules).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    local = start_local_dynamodb(table_name="bench")
    store = DynamoStore(local.client, local.table_name)
    try:
        rows = asyncio.run(run(store))
        rows.update(asyncio.run(ledger(store)))
    finally:
        store.close()
        local.stop()
    print_table(rows, local.started_in)
    if args.json:
        args.json.write_text(
            json.dumps({"local_start_seconds": local.started_in, "operations": rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
