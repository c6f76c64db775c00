"""Conversations in DynamoDB: a META item, one row per append, an index row per item id.

Owns the layout under ``PK = T#<tenant>#C#<conversation id>`` (see DESIGN.md):

- ``SK = "M"``: metadata, ``created_at``, ``next_seq`` (the item sequence counter), TTL;
- ``SK = I#<first seq, 12 digits>``: one *append*: its items with their sequence numbers
  (``[[seq, item], ...]``, JSON, zlib when smaller) inline up to 350 KB, otherwise chunks at
  ``P#<first seq>#<nonce>#<i>`` written before the row that names them;
- ``SK = X#<item id>``: the row and sequence number of that item, so ``get_item`` and
  ``delete_item`` are key reads, not scans;
- ``SK = K#<once key>``: the first sequence number of a keyed append (a response's turn), so
  repeating that append (a retry, a worker settling another's ending) writes nothing new;

and, under ``PK = T#<tenant>#CL``, ``SK = <created_at, 10 digits>#<conversation id>``: the
tenant's **conversation list** (id, creation time, metadata as last updated, TTL), written with
META by create and update and deleted with it, so the console's page is one descending Query.

An append reserves its sequence range with one atomic ``ADD next_seq`` conditioned on the
conversation existing, writes chunks and index rows, then the append row: a single-item write,
so the whole append becomes visible at once whatever its size, concurrent appends never collide,
and each append's items are contiguous and in order. Deleting an item rewrites its append row
without it (conditioned on the row's nonce). Every read checks META: a deleted or expired
conversation hides all its rows. It must not know about HTTP or the API's list envelope.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any, Literal

from responses_gateway.store._calls import ConditionFailed, StoreError, TableClient
from responses_gateway.store._codec import (
    CHUNK_BYTES,
    SCHEMA_ATTR,
    TTL_ATTR,
    Item,
    Key,
    blob_attrs,
    blob_chunk_keys,
    blob_of,
    check_version,
    decode_json,
    encode_json,
    escape,
    key,
)
from responses_gateway.store.base import (
    RECORD_VERSION,
    Conversation,
    ConversationPage,
    ItemPage,
)

__all__ = ["ConversationTable"]

_log = logging.getLogger(__name__)

META_SK = "M"
ROWS = ("I#", "I$")
"""SK range of the append rows ("$" sorts right after "#")."""
EVERYTHING = ("!", "~")
_EXISTS = "attribute_exists(PK) AND #ttl > :now"
_ATTEMPTS = 3
_RESERVE_ATTEMPTS = 8
_CHUNK_KEYS_PER_GET = 40
_DECODE_ON_LOOP_BYTES = 64 * 1024
"""Blobs up to this size are decoded on the event loop (microseconds); larger ones off it."""

Entry = tuple[int, dict[str, Any]]
"""An item and its sequence number."""


class _Changed(Exception):
    """A row's chunks vanished between two reads (it was rewritten): read again."""


def _pk(tenant: str, conversation_id: str) -> str:
    return f"T#{escape(tenant)}#C#{escape(conversation_id)}"


def _row_sk(seq: int) -> str:
    return f"I#{seq:012d}"


def _once_sk(once_key: str) -> str:
    return f"K#{escape(once_key)}"


def _index_sk(item_id: str) -> str:
    return f"X#{escape(item_id)}"


def _chunk_prefix(row: Item) -> str:
    return f"P#{row['SK']['S'][2:]}"


def _list_pk(tenant: str) -> str:
    return f"T#{escape(tenant)}#CL"


def _list_key(tenant: str, created_at: int, conversation_id: str) -> Key:
    return key(_list_pk(tenant), f"{created_at:010d}#{conversation_id}")


def _list_item(conversation: Conversation, expires: int) -> Item:
    return {
        **_list_key(conversation.tenant, conversation.created_at, conversation.id),
        **_common(expires),
        "id": {"S": conversation.id},
        "created_at": {"N": str(conversation.created_at)},
        "metadata": {"M": {k: {"S": v} for k, v in conversation.metadata.items()}},
    }


def _conversation(tenant: str, conversation_id: str, meta: Item) -> Conversation:
    return Conversation(
        tenant=tenant,
        id=conversation_id,
        created_at=int(meta["created_at"]["N"]),
        metadata={k: v["S"] for k, v in meta.get("metadata", {}).get("M", {}).items()},
        expires_at=int(meta[TTL_ATTR]["N"]),
    )


def _common(expires: int) -> Item:
    return {SCHEMA_ATTR: {"N": str(RECORD_VERSION)}, TTL_ATTR: {"N": str(expires)}}


def _append_row(
    pk: str, row_seq: int, entries: list[Entry], expires: int
) -> tuple[Item, list[Item]]:
    """An append row holding ``entries`` and the chunk items to write before it."""
    nonce = secrets.token_hex(8)
    blob, enc = encode_json([[seq, item] for seq, item in entries])
    attrs, chunks = blob_attrs(pk, f"P#{row_seq:012d}", nonce, blob, _common(expires))
    row = {
        **key(pk, _row_sk(row_seq)),
        **_common(expires),
        **attrs,
        "wv": {"S": nonce},
        "enc": {"S": enc},
        "n": {"N": str(len(entries))},
    }
    return row, chunks


def _append_items(
    pk: str, start: int, items: list[dict[str, Any]], expires: int
) -> tuple[Item, list[Item]]:
    """The append row for ``items`` from sequence ``start``, plus the items (chunks and index
    rows) that must be written before it."""
    row, before = _append_row(pk, start, list(enumerate(items, start)), expires)
    index: dict[str, Item] = {}  # a repeated id keeps its last position
    for seq, item in enumerate(items, start):
        if item.get("id"):
            index[str(item["id"])] = {
                **key(pk, _index_sk(str(item["id"]))),
                **_common(expires),
                "row": {"N": str(start)},
                "seq": {"N": str(seq)},
            }
    return row, before + list(index.values())


def _chunk_keys(row: Item) -> list[Key]:
    return blob_chunk_keys(row, _chunk_prefix(row), row["wv"]["S"])


class ConversationTable:
    """Reads and writes conversations through a :class:`TableClient`."""

    def __init__(self, db: TableClient, *, retention_seconds: int, clock: Callable[[], float]):
        self._db = db
        self._retention = retention_seconds
        self._clock = clock

    def _now(self) -> dict[str, Any]:
        return {":now": {"N": str(int(self._clock()))}}

    async def _meta(self, op: str, pk: str) -> Item | None:
        meta = await self._db.get_item(op, key(pk, META_SK))
        if meta is None or int(meta[TTL_ATTR]["N"]) <= self._clock():
            return None
        return meta

    async def create(self, conversation: Conversation, items: list[dict[str, Any]]) -> None:
        op = "create_conversation"
        pk = _pk(conversation.tenant, conversation.id)
        expires = conversation.expires_at or conversation.created_at + self._retention
        meta: Item = {
            **key(pk, META_SK),
            **_common(expires),
            "created_at": {"N": str(conversation.created_at)},
            "metadata": {"M": {k: {"S": v} for k, v in conversation.metadata.items()}},
            "next_seq": {"N": str(len(items))},
        }
        row, before = (
            await self._db.offload(_append_items, pk, 0, items, expires) if items else (None, [])
        )
        results = await asyncio.gather(
            # Never over an existing META, even an expired one: its rows may still be there.
            self._db.put_item(op, meta, condition="attribute_not_exists(PK)"),
            self._db.batch_write(op, puts=before),
            self._db.put_item(op, _list_item(conversation, expires)),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, ConditionFailed):
                raise StoreError(f"conversation {conversation.id} already exists") from result
            if isinstance(result, BaseException):
                raise result
        if row is not None:
            await self._db.put_item(op, row)

    async def get(self, tenant: str, conversation_id: str) -> Conversation | None:
        meta = await self._meta("get_conversation", _pk(tenant, conversation_id))
        return None if meta is None else _conversation(tenant, conversation_id, meta)

    async def update(
        self, tenant: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        try:
            meta = await self._db.update_item(
                "update_conversation",
                key(_pk(tenant, conversation_id), META_SK),
                "SET metadata = :m",
                condition=_EXISTS,
                names={"#ttl": TTL_ATTR},
                values={":m": {"M": {k: {"S": v} for k, v in metadata.items()}}, **self._now()},
            )
        except ConditionFailed:
            return None
        updated = _conversation(tenant, conversation_id, meta)
        await self._db.put_item("update_conversation", _list_item(updated, updated.expires_at))
        return updated

    async def delete(self, tenant: str, conversation_id: str) -> bool:
        """Delete META (the commit point), then purge the rows in batches, best effort: rows
        left behind are unreachable and expire with the conversation's TTL."""
        pk = _pk(tenant, conversation_id)
        old = await self._db.delete_item("delete_conversation", key(pk, META_SK))
        if old is None:
            return False
        try:
            listed = _list_key(tenant, int(old["created_at"]["N"]), conversation_id)
            rows = await self._db.query_all("delete_conversation", pk, EVERYTHING, keys_only=True)
            await self._db.batch_write("delete_conversation", deletes=[listed, *rows])
        except StoreError:
            _log.warning("could not purge a deleted conversation's rows; TTL will")
        return int(old[TTL_ATTR]["N"]) > self._clock()

    async def turns(self, tenant: str, conversation_id: str) -> list[str]:
        """The once keys of the conversation's keyed appends (the ids of the responses whose
        turns it holds): one Query of its ``K#`` rows, keys only."""
        rows = await self._db.query_all(
            "conversation_turns", _pk(tenant, conversation_id), ("K#", "K#~"), keys_only=True
        )
        return [row["SK"]["S"][2:].replace("%23", "#").replace("%25", "%") for row in rows]

    async def page(self, tenant: str, *, before: str | None, limit: int) -> ConversationPage:
        pk = _list_pk(tenant)
        items, last = await self._db.query_page(
            "list_conversations",
            pk,
            ("0", before or "9999999999#~"),
            forward=False,
            limit=max(1, limit),
            start=key(pk, before) if before is not None else None,
        )
        now = self._clock()
        found = [
            _conversation(tenant, item["id"]["S"], item)
            for item in items
            if int(item[TTL_ATTR]["N"]) > now
        ]
        cursor = items[-1]["SK"]["S"] if items and last is not None else None
        return ConversationPage(conversations=found, next_cursor=cursor)

    async def append(
        self,
        tenant: str,
        conversation_id: str,
        items: list[dict[str, Any]],
        *,
        once_key: str | None = None,
    ) -> None:
        op = "append_items"
        pk = _pk(tenant, conversation_id)
        if not items:
            if await self._meta(op, pk) is None:
                raise LookupError(f"conversation {conversation_id} not found")
            return
        if once_key is not None:
            marker = await self._db.get_item(op, key(pk, _once_sk(once_key)))
            if marker is not None:  # appended (or being appended) at a known position
                await self._write_row(op, pk, int(marker["start"]["N"]), items, marker)
                return
        for _ in range(_RESERVE_ATTEMPTS):
            try:
                meta = await self._db.update_item(
                    op,
                    key(pk, META_SK),
                    "ADD next_seq :n",
                    condition=_EXISTS,
                    names={"#ttl": TTL_ATTR},
                    values={":n": {"N": str(len(items))}, **self._now()},
                )
            except ConditionFailed:
                raise LookupError(f"conversation {conversation_id} not found") from None
            start = int(meta["next_seq"]["N"]) - len(items)
            expires = int(meta[TTL_ATTR]["N"])
            if once_key is not None:
                marker = {
                    **key(pk, _once_sk(once_key)),
                    **_common(expires),
                    "start": {"N": str(start)},
                }
                try:
                    await self._db.put_item(op, marker, condition="attribute_not_exists(SK)")
                except ConditionFailed:  # another writer of this key got there first
                    marker = await self._db.get_item(op, key(pk, _once_sk(once_key))) or marker
                    await self._write_row(op, pk, int(marker["start"]["N"]), items, marker)
                    return
            if await self._write_row(op, pk, start, items, meta) or once_key is not None:
                return
            # The row must be new: if its sequence was ever handed out twice (DynamoDB's
            # ADD is atomic; emulators are not always), reserve again rather than overwrite.
        raise StoreError(f"conversation {conversation_id}: could not reserve item positions")

    async def _write_row(
        self, op: str, pk: str, start: int, items: list[dict[str, Any]], source: Item
    ) -> bool:
        """Write the append row of ``items`` at ``start`` (chunks and index rows first), never
        over an existing row; False when a row was already there."""
        expires = int(source[TTL_ATTR]["N"])
        row, before = await self._db.offload(_append_items, pk, start, items, expires)
        await self._db.batch_write(op, puts=before)
        try:
            await self._db.put_item(op, row, condition="attribute_not_exists(SK)")
        except ConditionFailed:
            return False
        return True

    async def _entries(self, op: str, rows: list[Item]) -> list[Entry]:
        """The entries of ``rows`` in row order (raises :class:`_Changed` on a vanished chunk)."""
        keys = [k for row in rows for k in _chunk_keys(row)]
        fetched = await self._db.batch_get(op, keys, group=_CHUNK_KEYS_PER_GET)
        size = sum(len(r["body"]["B"]) for r in rows if "body" in r) + len(fetched) * CHUNK_BYTES
        if size > _DECODE_ON_LOOP_BYTES:
            return await self._db.offload(_decode_rows, rows, fetched)
        return _decode_rows(rows, fetched)

    async def list_items(
        self,
        tenant: str,
        conversation_id: str,
        *,
        after: str | None,
        limit: int,
        order: Literal["asc", "desc"],
    ) -> ItemPage:
        for _ in range(_ATTEMPTS):
            try:
                return await self._list_once(tenant, conversation_id, after, max(1, limit), order)
            except _Changed:
                continue
        raise StoreError(f"conversation {conversation_id} kept changing while being read")

    async def _list_once(
        self,
        tenant: str,
        conversation_id: str,
        after: str | None,
        limit: int,
        order: Literal["asc", "desc"],
    ) -> ItemPage:
        op, pk, forward = "list_items", _pk(tenant, conversation_id), order == "asc"
        meta, index = await asyncio.gather(
            self._meta(op, pk),
            self._db.get_item(op, key(pk, _index_sk(after))) if after else _none(),
        )
        if meta is None:
            raise LookupError(f"conversation {conversation_id} not found")
        lo, hi = ROWS
        after_seq = None
        if after is not None:
            if index is None:
                raise LookupError(f"item {after} not found in conversation {conversation_id}")
            after_seq = int(index["seq"]["N"])
            lo, hi = (
                (_row_sk(int(index["row"]["N"])), hi)
                if forward
                else (lo, _row_sk(int(index["row"]["N"])))
            )
        found: list[dict[str, Any]] = []
        start: Key | None = None
        while len(found) <= limit:
            rows, start = await self._db.query_page(
                op, pk, (lo, hi), forward=forward, limit=limit + 1, start=start
            )
            entries = await self._entries(op, rows)
            for seq, item in sorted(entries, key=lambda e: e[0], reverse=not forward):
                if after_seq is None or (seq > after_seq if forward else seq < after_seq):
                    found.append(item)
            if start is None:
                break
        return ItemPage(data=found[:limit], has_more=len(found) > limit)

    async def all_items(self, tenant: str, conversation_id: str) -> list[dict[str, Any]]:
        pk = _pk(tenant, conversation_id)
        for _ in range(_ATTEMPTS):
            meta, rows = await asyncio.gather(
                self._meta("all_items", pk), self._db.query_all("all_items", pk, ROWS)
            )
            if meta is None:
                raise LookupError(f"conversation {conversation_id} not found")
            try:
                return [item for _, item in await self._entries("all_items", rows)]
            except _Changed:
                continue
        raise StoreError(f"conversation {conversation_id} kept changing while being read")

    async def _locate(self, op: str, pk: str, item_id: str) -> tuple[Item, list[Entry], int] | None:
        """The append row holding ``item_id``, its entries and the item's sequence number."""
        for _ in range(_ATTEMPTS):
            meta, index = await asyncio.gather(
                self._meta(op, pk), self._db.get_item(op, key(pk, _index_sk(item_id)))
            )
            if meta is None or index is None:
                return None
            row = await self._db.get_item(op, key(pk, _row_sk(int(index["row"]["N"]))))
            if row is None:
                return None
            try:
                return row, await self._entries(op, [row]), int(index["seq"]["N"])
            except _Changed:
                continue
        raise StoreError("a conversation item kept changing while being read")

    async def get_item(
        self, tenant: str, conversation_id: str, item_id: str
    ) -> dict[str, Any] | None:
        found = await self._locate("get_item", _pk(tenant, conversation_id), item_id)
        if found is None:
            return None
        _, entries, seq = found
        return next((item for s, item in entries if s == seq), None)

    async def delete_item(self, tenant: str, conversation_id: str, item_id: str) -> bool:
        op, pk = "delete_item", _pk(tenant, conversation_id)
        for _ in range(_ATTEMPTS):
            found = await self._locate(op, pk, item_id)
            if found is None:
                return False
            row, entries, seq = found
            remaining = [(s, item) for s, item in entries if s != seq]
            if len(remaining) == len(entries):
                return False
            same_version, version = "wv = :wv", {":wv": row["wv"]}
            try:
                if remaining:
                    expires = int(row[TTL_ATTR]["N"])
                    row_seq = int(row["SK"]["S"][2:])
                    new_row, chunks = await self._db.offload(
                        _append_row, pk, row_seq, remaining, expires
                    )
                    await self._db.batch_write(op, puts=chunks)
                    await self._db.put_item(op, new_row, condition=same_version, values=version)
                else:
                    row_key = key(pk, row["SK"]["S"])
                    await self._db.delete_item(op, row_key, condition=same_version, values=version)
            except ConditionFailed:
                continue  # another delete rewrote the row first: start over
            stale = [key(pk, _index_sk(item_id)), *_chunk_keys(row)]
            await self._db.batch_write(op, deletes=stale)
            return True
        raise StoreError(f"conversation item {item_id} kept changing while being deleted")


def _decode_rows(rows: list[Item], fetched: Mapping[tuple[str, str], Item]) -> list[Entry]:
    entries: list[Entry] = []
    for row in rows:
        blob = blob_of(row, _chunk_prefix(row), row["wv"]["S"], fetched)
        if blob is None:
            raise _Changed
        try:
            check_version(row, RECORD_VERSION)
            entries += [(int(seq), item) for seq, item in decode_json(blob, row["enc"]["S"])]
        except ValueError as exc:
            raise StoreError(f"a stored conversation item is unreadable: {exc}") from exc
    return entries


async def _none() -> None:
    return None
