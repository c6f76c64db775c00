"""Stored responses in DynamoDB: one META item per record, plus chunk items when it is large.

Owns the item layout of a :class:`~responses_gateway.store.base.StoredResponse` (see DESIGN.md):

- ``PK = T#<tenant>#R#<response id>`` (components escaped), ``SK = "R"``: the META item, the
  commit point. It holds the body (response + input items, JSON, zlib when smaller) inline when it
  fits, the write nonce ``wv``, the chain's depth, last id and digest, and the TTL.
- ``SK = C#<nonce>#<i>``: body chunks when the body is over 350 KB; ``SK = L#<nonce>#<i>``: the
  chain's ids except the last, for chains of depth 2 or more (kept out of META so reading N
  ancestors never reads N chains: O(N) bytes, not O(N^2)).

Side items are written first, META last, so a reader sees the old record or the new one, never
half of one; chunks named by another nonce are ignored.

The **item index** lets ``item_reference`` reach any stored item by id alone: one item per input
or output item, ``PK = T#<tenant>#I#<item id>``, ``SK = "I"``, holding the response id ``rid``, the
item itself (``body``/``enc``, inline; ``big`` instead when it is over 350 KB, and the item is then
read from its response) and the record's TTL. It is written with the side items (in the same
BatchWrite round; in parallel with META when there are no side items). An item id replayed in
several responses (clients resend their history with ids) points at the latest of them; deleting
a response deletes the index items that still point at it (conditional deletes, before META).

The same partition holds the response's background-mode items (checkpoint, event log, terminal,
tool-call journal), owned by ``_background.py``: their sort keys stay outside ``L#``..``R``, the
range :meth:`ResponseTable.get` reads. It must not know about HTTP or the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
from collections.abc import Callable, Mapping
from typing import Any

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
from responses_gateway.store.base import RECORD_VERSION, StoredResponse

__all__ = ["ResponseTable", "chain_digest", "item_index_pk", "response_pk"]

_log = logging.getLogger(__name__)

META_SK = "R"
_READ_ATTEMPTS = 3
_DECODE_ON_LOOP_BYTES = 64 * 1024
"""Bodies up to this size are decoded on the event loop (microseconds); larger ones off it."""
_CHUNK_KEYS_PER_GET = 40
"""40 chunks of <= 350 KB stay under BatchGetItem's 16 MB response limit."""


def response_pk(tenant: str, response_id: str) -> str:
    """The partition of a response: its META and chunks, and its background items
    (``_background.py``)."""
    return f"T#{escape(tenant)}#R#{escape(response_id)}"


INDEX_SK = "I"


def item_index_pk(tenant: str, item_id: str) -> str:
    """The partition of one item's index entry (``item_reference`` lookups)."""
    return f"T#{escape(tenant)}#I#{escape(item_id)}"


def _item_ids(items: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(i["id"]) for i in items if isinstance(i.get("id"), str)))


def _index_items(record: StoredResponse, common: Item) -> list[Item]:
    """One index item per distinct item id of the record (the last occurrence wins)."""
    by_id = {
        str(i["id"]): i
        for i in [*record.input_items, *record.output]
        if isinstance(i.get("id"), str) and i.get("id")
    }
    rows: list[Item] = []
    for item_id, item in by_id.items():
        row: Item = {
            **key(item_index_pk(record.tenant, item_id), INDEX_SK),
            **common,
            "rid": {"S": record.id},
        }
        blob, enc = encode_json(item)
        if len(blob) <= CHUNK_BYTES:
            row["body"], row["enc"] = {"B": blob}, {"S": enc}
        else:
            row["big"] = {"BOOL": True}
        rows.append(row)
    return rows


def _body_keys(meta: Item) -> list[Key]:
    return blob_chunk_keys(meta, "C", meta["wv"]["S"])


def _chain_keys(meta: Item) -> list[Key]:
    return blob_chunk_keys(meta, "L", meta["wv"]["S"], "nl")


def _extend_digest(digest: str, response_id: str) -> str:
    return hashlib.blake2b(f"{digest}\x00{response_id}".encode(), digest_size=16).hexdigest()


def chain_digest(chain: list[str]) -> str:
    """A rolling digest of a chain: ``digest(c + [p]) == _extend_digest(digest(c), p)``."""
    digest = ""
    for response_id in chain:
        digest = _extend_digest(digest, response_id)
    return digest


class ResponseTable:
    """Reads and writes response records through a :class:`TableClient`."""

    def __init__(self, db: TableClient, *, retention_seconds: int, clock: Callable[[], float]):
        self._db = db
        self._retention = retention_seconds
        self._clock = clock

    def _live(self, meta: Item) -> bool:
        return int(meta[TTL_ATTR]["N"]) > self._clock()

    async def put(self, record: StoredResponse) -> None:
        created = record.response.get("created_at")
        created = int(created) if isinstance(created, int | float) else int(self._clock())
        expires = record.expires_at or created + self._retention
        pk, nonce = response_pk(record.tenant, record.id), secrets.token_hex(8)
        common = {SCHEMA_ATTR: {"N": str(RECORD_VERSION)}, TTL_ATTR: {"N": str(expires)}}
        payload = {"response": record.response, "input_items": record.input_items}
        body, enc = await self._db.offload(encode_json, payload)
        body_attrs, side = blob_attrs(pk, "C", nonce, body, common)
        meta: Item = {
            **key(pk, META_SK),
            **common,
            **body_attrs,
            "created_at": {"N": str(created)},
            "wv": {"S": nonce},
            "enc": {"S": enc},
            "depth": {"N": str(len(record.chain))},
            "ch": {"S": chain_digest(record.chain)},
        }
        if record.chain:
            meta["prev"] = {"S": record.chain[-1]}
        if record.conversation_id:
            meta["conv"] = {"S": record.conversation_id}
        if len(record.chain) > 1:
            chain_blob, chain_enc = encode_json(record.chain[:-1])
            chain_attrs, chain_items = blob_attrs(pk, "L", nonce, chain_blob, common, inline=0)
            meta["nl"], meta["lenc"] = chain_attrs["nb"], {"S": chain_enc}
            side += chain_items
        index = await self._db.offload(_index_items, record, common)
        if side:
            await self._db.batch_write("put_response", puts=side + index)
            old = await self._db.put_item("put_response", meta, return_old=True)
        else:  # nothing META depends on: index and META in one round
            _, old = await asyncio.gather(
                self._db.batch_write("put_response", puts=index),
                self._db.put_item("put_response", meta, return_old=True),
            )
        stale = _body_keys(old) + _chain_keys(old) if old and old["wv"]["S"] != nonce else []
        if stale:
            # Best effort: a reader still holding the old META retries; TTL is the backstop.
            try:
                await self._db.batch_write("put_response", deletes=stale)
            except StoreError:
                _log.warning("could not delete %d replaced chunk items; TTL will", len(stale))

    async def get(self, tenant: str, response_id: str) -> StoredResponse | None:
        pk = response_pk(tenant, response_id)
        for _ in range(_READ_ATTEMPTS):
            # One Query: "L#" chain items and META ("C#" body chunks sort before "L#").
            items = await self._db.query_all("get_response", pk, ("L#", META_SK))
            meta = next((i for i in items if i["SK"]["S"] == META_SK), None)
            if meta is None or not self._live(meta):
                return None
            fetched = {(pk, i["SK"]["S"]): i for i in items}
            fetched.update(
                await self._db.batch_get(
                    "get_response", _body_keys(meta), group=_CHUNK_KEYS_PER_GET
                )
            )
            record = await self._assemble_off_loop(tenant, response_id, meta, fetched, None)
            if record is not None:
                return record
        raise StoreError(f"stored response {response_id} kept changing while being read")

    async def get_many(self, tenant: str, ids: list[str]) -> list[StoredResponse]:
        wanted = list(dict.fromkeys(ids))
        metas = await self._db.batch_get(
            "get_responses", [key(response_pk(tenant, i), META_SK) for i in wanted]
        )
        live: dict[str, Item] = {}
        for response_id in wanted:
            meta = metas.get((response_pk(tenant, response_id), META_SK))
            if meta is not None and self._live(meta):
                live[response_id] = meta
        chains = _derive_chains(live)
        side: list[Key] = []
        for response_id, meta in live.items():
            side += _body_keys(meta) + ([] if response_id in chains else _chain_keys(meta))
        fetched = await self._db.batch_get("get_responses", side, group=_CHUNK_KEYS_PER_GET)
        records: dict[str, StoredResponse] = {}
        retry: list[str] = []
        for response_id, meta in live.items():
            chain = chains.get(response_id)
            record = await self._assemble_off_loop(tenant, response_id, meta, fetched, chain)
            if record is None:
                retry.append(response_id)
            else:
                records[response_id] = record
        # A record replaced between our two reads: read it again on its own.
        again = await asyncio.gather(*(self.get(tenant, i) for i in retry))
        records.update({r.id: r for r in again if r is not None})
        return [records[i] for i in ids if i in records]

    async def _assemble_off_loop(
        self,
        tenant: str,
        response_id: str,
        meta: Item,
        fetched: Mapping[tuple[str, str], Item],
        chain: list[str] | None,
    ) -> StoredResponse | None:
        """:meth:`_assemble`, on the store's threads when the body is large."""
        if "nb" in meta or len(meta["body"]["B"]) > _DECODE_ON_LOOP_BYTES:
            args = (tenant, response_id, meta, fetched, chain)
            return await self._db.offload(self._assemble, *args)
        return self._assemble(tenant, response_id, meta, fetched, chain)

    def _assemble(
        self,
        tenant: str,
        response_id: str,
        meta: Item,
        fetched: Mapping[tuple[str, str], Item],
        chain: list[str] | None,
    ) -> StoredResponse | None:
        """The record, or None when a side item of this version is missing (replaced)."""
        try:
            check_version(meta, RECORD_VERSION)
        except ValueError as exc:
            raise StoreError(f"stored response {response_id} is unreadable: {exc}") from exc
        nonce = meta["wv"]["S"]
        if chain is None:
            depth = int(meta["depth"]["N"])
            chain = [meta["prev"]["S"]] if depth else []
            if depth > 1:
                chain_blob = blob_of(meta, "L", nonce, fetched, "nl")
                if chain_blob is None:
                    return None
                chain = [*decode_json(chain_blob, meta["lenc"]["S"]), *chain]
        body = blob_of(meta, "C", nonce, fetched)
        if body is None:
            return None
        try:
            data: dict[str, Any] = decode_json(body, meta["enc"]["S"])
        except ValueError as exc:
            raise StoreError(f"stored response {response_id} is unreadable") from exc
        return StoredResponse(
            tenant=tenant,
            id=response_id,
            response=data["response"],
            input_items=data["input_items"],
            chain=chain,
            conversation_id=meta["conv"]["S"] if "conv" in meta else None,
            expires_at=int(meta[TTL_ATTR]["N"]),
        )

    async def get_items(self, tenant: str, item_ids: list[str]) -> dict[str, dict[str, Any]]:
        wanted = list(dict.fromkeys(item_ids))
        rows = await self._db.batch_get(
            "get_items", [key(item_index_pk(tenant, i), INDEX_SK) for i in wanted]
        )
        found: dict[str, dict[str, Any]] = {}
        big: dict[str, str] = {}
        for item_id in wanted:
            row = rows.get((item_index_pk(tenant, item_id), INDEX_SK))
            if row is None or not self._live(row):
                continue
            try:
                check_version(row, RECORD_VERSION)
                if "body" in row:
                    found[item_id] = decode_json(bytes(row["body"]["B"]), row["enc"]["S"])
                else:
                    big[item_id] = row["rid"]["S"]
            except ValueError as exc:
                raise StoreError(f"the index entry of item {item_id} is unreadable") from exc
        if big:  # items over 350 KB: read from their responses (a second, rare round)
            records = await self.get_many(tenant, list(dict.fromkeys(big.values())))
            for record in records:
                for item in [*record.input_items, *record.output]:
                    if big.get(str(item.get("id"))) == record.id:
                        found[str(item["id"])] = item
        return found

    async def _unindex(self, record: StoredResponse) -> None:
        """Delete the index items that still point at ``record`` (conditional, in parallel)."""

        async def drop(item_id: str) -> None:
            # ConditionFailed: a later response re-used this id, and its entry stays.
            with contextlib.suppress(ConditionFailed):
                await self._db.delete_item(
                    "delete_response",
                    key(item_index_pk(record.tenant, item_id), INDEX_SK),
                    condition="rid = :r",
                    values={":r": {"S": record.id}},
                )

        ids = _item_ids([*record.input_items, *record.output])
        await asyncio.gather(*(drop(i) for i in ids))

    async def delete(self, tenant: str, response_id: str) -> bool:
        record = await self.get(tenant, response_id)
        if record is not None:  # index first: an item never outlives its deleted response
            await self._unindex(record)
        meta_key = key(response_pk(tenant, response_id), META_SK)
        old = await self._db.delete_item("delete_response", meta_key)
        if old is None:
            return False
        side = _body_keys(old) + _chain_keys(old)
        if side:
            await self._db.batch_write("delete_response", deletes=side)
        return self._live(old)


def _derive_chains(metas: dict[str, Item]) -> dict[str, list[str]]:
    """Chains known without reading chain items: depth 0 and 1 from META alone, and a record
    whose previous response is in the same batch with a known chain, checked by the digests
    (so a chain is only derived when it is exactly the one stored)."""
    chains: dict[str, list[str]] = {}
    for response_id, meta in sorted(metas.items(), key=lambda kv: int(kv[1]["depth"]["N"])):
        depth = int(meta["depth"]["N"])
        if depth == 0:
            chains[response_id] = []
            continue
        prev = meta["prev"]["S"]
        prefix: list[str]
        if depth == 1:
            prefix, base = [], ""
        elif prev in chains:
            prefix, base = chains[prev], metas[prev]["ch"]["S"]
        else:
            continue
        if _extend_digest(base, prev) == meta["ch"]["S"]:
            chains[response_id] = [*prefix, prev]
    return chains
