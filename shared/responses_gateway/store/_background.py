"""Background responses in DynamoDB: the checkpoint, the event log, the terminal claim and the
tool-call journal.

Owns the item layout of :class:`~responses_gateway.store.base.BackgroundStore` (see DESIGN.md,
"Background mode items"). Every item lives in the response's own partition
``PK = T#<tenant>#R#<response id>``, beside its META (``SK = "R"``):

- ``SK = "S"``: the checkpoint: ``ver`` (fencing version), ``seq``, ``cancel`` (set only by
  :meth:`BackgroundTable.request_cancel`) and ``{"state", "run"}`` as a JSON blob, inline up to
  350 KB, otherwise chunks ``SC#<nonce>#<i>`` written before the row that names them;
- ``SK = E#<last seq, 10 digits>``: one batch of logged SSE frames (``first``, ``n``, the frames as
  a JSON list), chunks ``EC#<nonce>#<i>``. Keyed by the batch's *last* sequence number, so the
  batches holding events after N are one Query from ``E#<N+1>``;
- ``SK = E#~``: the terminal (``seq`` and ``{"frame", "response"}``), claimed once with a
  conditional put; ``~`` sorts after every digit, so the same Query returns it;
- ``SK = K#<call id>``: a journal entry (``state`` started or finished, the outcome as a JSON
  blob), chunks ``KC#<nonce>#<i>``.

None of these sort keys fall in ``L#``..``R``, the range a stored response's read covers. Every
item carries ``ttl`` (now + retention) and ``schema_version``; expired items read as missing.
It must not know about the agent loop, HTTP or SSE syntax, and it never logs frames, state or
outcomes (they are user data).
"""

from __future__ import annotations

import asyncio
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
from responses_gateway.store._responses import response_pk
from responses_gateway.store.base import (
    RECORD_VERSION,
    Checkpoint,
    CheckpointConflict,
    EventRead,
    Terminal,
)

__all__ = ["MAX_SEQUENCE", "BackgroundTable"]

_log = logging.getLogger(__name__)

CHECKPOINT_SK = "S"
CANCEL_SK = "X"
"""A tiny marker written by ``request_cancel`` beside the flag on the checkpoint, so a worker
can ask "was a cancel requested?" for 1 RRU instead of reading a checkpoint of any size."""
TERMINAL_SK = "E#~"
MAX_SEQUENCE = 9_999_999_999
"""The largest sequence number a batch key can spell (10 digits)."""
_BATCHES = ("E#0000000000", f"E#{MAX_SEQUENCE}")
"""SK range of every event batch (the terminal ``E#~`` sorts after it)."""
_PURGE_RANGES = (("E", "K~"), ("S", "S~"))
"""SK ranges holding every background item (batches, terminal, journal, chunks, checkpoint) and
nothing of the response record itself (``C#``, ``L#``, ``R``)."""
_CHECKPOINT_CHUNKS = "SC"
_EVENT_CHUNKS = "EC"
_JOURNAL_CHUNKS = "KC"
_ATTEMPTS = 3
_CHUNK_KEYS_PER_GET = 40
"""40 chunks of <= 350 KB stay under BatchGetItem's 16 MB response limit."""
_DECODE_ON_LOOP_BYTES = 64 * 1024
"""Blobs up to this size are encoded and decoded on the event loop; larger ones off it."""
_NAMES = {"#ttl": TTL_ATTR, "#ver": "ver", "#cancel": "cancel"}
_NEW_OR_EXPIRED = "attribute_not_exists(PK) OR #ttl <= :now"
"""A write that creates an item: none exists, or the one there has expired (reads as missing)."""
_NEXT_VERSION = "#ver = :expected AND attribute_not_exists(#cancel) AND #ttl > :now"
"""A checkpoint write that follows the one its writer read, not cancelled, not expired."""


class _Changed(Exception):
    """A chunk named by a row vanished between two reads (the row was replaced): read again."""


def _batch_sk(last_seq: int) -> str:
    return f"E#{last_seq:010d}"


def _journal_sk(call_id: str) -> str:
    return f"K#{escape(call_id)}"


def _chunk_prefix(sk: str) -> str:
    """The chunk prefix of the row at ``sk``."""
    if sk == CHECKPOINT_SK:
        return _CHECKPOINT_CHUNKS
    return _JOURNAL_CHUNKS if sk.startswith("K#") else _EVENT_CHUNKS


def _common(expires: int) -> Item:
    return {SCHEMA_ATTR: {"N": str(RECORD_VERSION)}, TTL_ATTR: {"N": str(expires)}}


def _chunk_keys(row: Item, prefix: str) -> list[Key]:
    return blob_chunk_keys(row, prefix, row["wv"]["S"]) if "wv" in row else []


def _blob_row(pk: str, sk: str, prefix: str, value: Any, expires: int) -> tuple[Item, list[Item]]:
    """A row holding ``value`` (JSON, zlib when smaller) and the chunks to write before it."""
    nonce = secrets.token_hex(8)
    blob, enc = encode_json(value)
    attrs, chunks = blob_attrs(pk, prefix, nonce, blob, _common(expires))
    row = {**key(pk, sk), **_common(expires), **attrs, "wv": {"S": nonce}, "enc": {"S": enc}}
    return row, chunks


def _decode(row: Item, prefix: str, fetched: Mapping[tuple[str, str], Item]) -> Any:
    """The JSON value a row holds (raises :class:`_Changed` when one of its chunks is gone)."""
    blob = blob_of(row, prefix, row["wv"]["S"], fetched)
    if blob is None:
        raise _Changed
    try:
        check_version(row, RECORD_VERSION)
        return decode_json(blob, row["enc"]["S"])
    except ValueError as exc:
        raise StoreError(f"a stored background item is unreadable: {exc}") from exc


def _large(rows: list[Item], fetched: Mapping[tuple[str, str], Item]) -> bool:
    inline = sum(len(r["body"]["B"]) for r in rows if "body" in r)
    return inline + len(fetched) * CHUNK_BYTES > _DECODE_ON_LOOP_BYTES


def _terminal(row: Item, fetched: Mapping[tuple[str, str], Item]) -> Terminal:
    data = _decode(row, _EVENT_CHUNKS, fetched)
    return Terminal(int(row["seq"]["N"]), data["frame"], data["response"])


def _event_read(rows: list[Item], fetched: Mapping[tuple[str, str], Item], after: int) -> EventRead:
    """The events after ``after`` in ``rows`` (batches and terminal, in key order)."""
    terminal: Terminal | None = None
    frames: dict[int, str] = {}
    for row in rows:
        if row["SK"]["S"] == TERMINAL_SK:
            terminal = _terminal(row, fetched)
            continue
        first = int(row["first"]["N"])
        for offset, frame in enumerate(_decode(row, _EVENT_CHUNKS, fetched)):
            frames[first + offset] = frame
    end = terminal.sequence_number if terminal is not None else MAX_SEQUENCE + 1
    events = [(seq, frames[seq]) for seq in sorted(frames) if after < seq < end]
    return EventRead(events=events, terminal=terminal)


def _fencing_version(checkpoint: Checkpoint, expected_version: int | None) -> None:
    wanted = 0 if expected_version is None else expected_version + 1
    if checkpoint.version != wanted:
        raise ValueError(
            f"checkpoint version {checkpoint.version} does not follow expected version "
            f"{expected_version} (it must be {wanted})"
        )


class BackgroundTable:
    """Reads and writes background-mode items through a :class:`TableClient`."""

    def __init__(self, db: TableClient, *, retention_seconds: int, clock: Callable[[], float]):
        self._db = db
        self._retention = retention_seconds
        self._clock = clock

    def _live(self, row: Item) -> bool:
        return int(row[TTL_ATTR]["N"]) > self._clock()

    def _now(self) -> dict[str, Any]:
        return {":now": {"N": str(int(self._clock()))}}

    def _expires(self) -> int:
        return int(self._clock()) + self._retention

    async def _encode_row(
        self, pk: str, sk: str, prefix: str, value: Any, expires: int, size_hint: int
    ) -> tuple[Item, list[Item]]:
        if size_hint > _DECODE_ON_LOOP_BYTES:
            return await self._db.offload(_blob_row, pk, sk, prefix, value, expires)
        return _blob_row(pk, sk, prefix, value, expires)

    async def _forget(self, op: str, keys: list[Key]) -> None:
        """Delete chunks nothing names any more, best effort (TTL is the backstop)."""
        if not keys:
            return
        try:
            await self._db.batch_write(op, deletes=keys)
        except StoreError:
            _log.warning("could not delete %d unreferenced chunk items; TTL will", len(keys))

    async def _put_replacing(self, op: str, row: Item, chunks: list[Item], prefix: str) -> None:
        """Unconditional write of ``row`` (chunks first), then drop the replaced row's chunks."""
        if chunks:
            await self._db.batch_write(op, puts=chunks)
        old = await self._db.put_item(op, row, return_old=True)
        if old is not None and old.get("wv") != row["wv"]:
            await self._forget(op, _chunk_keys(old, prefix))

    async def _fetch_chunks(self, op: str, rows: list[Item]) -> dict[tuple[str, str], Item]:
        keys = [k for row in rows for k in _chunk_keys(row, _chunk_prefix(row["SK"]["S"]))]
        return await self._db.batch_get(op, keys, group=_CHUNK_KEYS_PER_GET)

    # Checkpoint

    async def put_checkpoint(self, checkpoint: Checkpoint, *, expected_version: int | None) -> None:
        op = "put_checkpoint"
        _fencing_version(checkpoint, expected_version)
        pk = response_pk(checkpoint.tenant, checkpoint.response_id)
        expires = checkpoint.expires_at or self._expires()
        payload = {"state": checkpoint.state, "run": checkpoint.run}
        row, chunks = await self._db.offload(
            _blob_row, pk, CHECKPOINT_SK, _CHECKPOINT_CHUNKS, payload, expires
        )
        row["ver"] = {"N": str(checkpoint.version)}
        row["seq"] = {"N": str(checkpoint.seq)}
        values = self._now()
        if expected_version is None:
            condition, names = _NEW_OR_EXPIRED, {"#ttl": TTL_ATTR}
        else:
            condition, names = _NEXT_VERSION, _NAMES
            values[":expected"] = {"N": str(expected_version)}
        if chunks:
            await self._db.batch_write(op, puts=chunks)
        try:
            old = await self._db.put_item(
                op, row, condition=condition, names=names, values=values, return_old=True
            )
        except ConditionFailed:
            await self._forget(op, _chunk_keys(row, _CHECKPOINT_CHUNKS))
            raise CheckpointConflict(
                f"checkpoint of {checkpoint.response_id} was advanced or cancelled"
            ) from None
        if old is not None:
            await self._forget(op, _chunk_keys(old, _CHECKPOINT_CHUNKS))

    async def get_checkpoint(self, tenant: str, response_id: str) -> Checkpoint | None:
        op, pk = "get_checkpoint", response_pk(tenant, response_id)
        for _ in range(_ATTEMPTS):
            row = await self._db.get_item(op, key(pk, CHECKPOINT_SK))
            if row is None or not self._live(row):
                return None
            fetched = await self._fetch_chunks(op, [row])
            try:
                if _large([row], fetched):
                    data = await self._db.offload(_decode, row, _CHECKPOINT_CHUNKS, fetched)
                else:
                    data = _decode(row, _CHECKPOINT_CHUNKS, fetched)
            except _Changed:
                continue
            return Checkpoint(
                tenant=tenant,
                response_id=response_id,
                version=int(row["ver"]["N"]),
                seq=int(row["seq"]["N"]),
                state=data["state"],
                run=data["run"],
                cancel_requested=bool(row.get("cancel", {}).get("BOOL", False)),
                expires_at=int(row[TTL_ATTR]["N"]),
            )
        raise StoreError(f"checkpoint of {response_id} kept changing while being read")

    async def request_cancel(self, tenant: str, response_id: str) -> bool:
        try:
            await self._db.update_item(
                "request_cancel",
                key(response_pk(tenant, response_id), CHECKPOINT_SK),
                "SET #cancel = :yes",
                condition="attribute_exists(PK) AND #ttl > :now",
                names={"#cancel": "cancel", "#ttl": TTL_ATTR},
                values={":yes": {"BOOL": True}, **self._now()},
            )
        except ConditionFailed:
            return False
        marker = {
            **key(response_pk(tenant, response_id), CANCEL_SK),
            SCHEMA_ATTR: {"N": str(RECORD_VERSION)},
            TTL_ATTR: {"N": str(int(self._clock()) + self._retention)},
        }
        await self._db.put_item("request_cancel", marker)
        return True

    async def cancel_requested(self, tenant: str, response_id: str) -> bool:
        marker = await self._db.get_item(
            "cancel_requested", key(response_pk(tenant, response_id), CANCEL_SK)
        )
        return marker is not None

    # Event log

    async def append_events(
        self, tenant: str, response_id: str, first_seq: int, frames: list[str]
    ) -> None:
        if not frames:
            return
        last = first_seq + len(frames) - 1
        if first_seq < 0 or last > MAX_SEQUENCE:
            raise ValueError(f"sequence numbers must be within 0..{MAX_SEQUENCE}")
        pk = response_pk(tenant, response_id)
        size = sum(len(frame) for frame in frames)
        row, chunks = await self._encode_row(
            pk, _batch_sk(last), _EVENT_CHUNKS, frames, self._expires(), size
        )
        row["first"] = {"N": str(first_seq)}
        row["n"] = {"N": str(len(frames))}
        # Unconditional: a worker resuming after a crash may log the same batch again.
        await self._put_replacing("append_events", row, chunks, _EVENT_CHUNKS)

    async def read_events(self, tenant: str, response_id: str, after: int) -> EventRead:
        op, pk = "read_events", response_pk(tenant, response_id)
        after = max(after, -1)
        low = _batch_sk(after + 1) if after < MAX_SEQUENCE else TERMINAL_SK
        for _ in range(_ATTEMPTS):
            rows = [
                r for r in await self._db.query_all(op, pk, (low, TERMINAL_SK)) if self._live(r)
            ]
            fetched = await self._fetch_chunks(op, rows)
            try:
                if _large(rows, fetched):
                    return await self._db.offload(_event_read, rows, fetched, after)
                return _event_read(rows, fetched, after)
            except _Changed:
                continue
        raise StoreError(f"event log of {response_id} kept changing while being read")

    async def last_event_seq(self, tenant: str, response_id: str) -> int:
        rows, _ = await self._db.query_page(
            "last_event_seq",
            response_pk(tenant, response_id),
            _BATCHES,
            forward=False,
            limit=1,
        )
        # Batches are written in sequence order, so the highest one is also the newest: when it
        # has expired, so has every batch below it.
        if not rows or not self._live(rows[0]):
            return -1
        return int(rows[0]["SK"]["S"][2:])

    async def truncate_events(self, tenant: str, response_id: str, from_seq: int) -> None:
        op, pk = "truncate_events", response_pk(tenant, response_id)
        from_seq = max(from_seq, 0)
        if from_seq > MAX_SEQUENCE:
            return
        rows = await self._db.query_all(op, pk, (_batch_sk(from_seq), _BATCHES[1]))
        # Rows first: a reader that still holds one finds its chunks gone and reads again.
        await self._db.batch_write(op, deletes=[key(pk, r["SK"]["S"]) for r in rows])
        chunks = [k for r in rows for k in _chunk_keys(r, _EVENT_CHUNKS)]
        if chunks:
            await self._db.batch_write(op, deletes=chunks)

    # Terminal

    async def claim_terminal(
        self, tenant: str, response_id: str, terminal: Terminal
    ) -> Terminal | None:
        op, pk = "claim_terminal", response_pk(tenant, response_id)
        payload = {"frame": terminal.frame, "response": terminal.response}
        # The terminal frame carries the final Response object: its length sizes the payload.
        row, chunks = await self._encode_row(
            pk, TERMINAL_SK, _EVENT_CHUNKS, payload, self._expires(), 2 * len(terminal.frame)
        )
        row["seq"] = {"N": str(terminal.sequence_number)}
        for _ in range(_ATTEMPTS):
            if chunks:
                await self._db.batch_write(op, puts=chunks)
            try:
                # An expired terminal reads as missing, so it may be claimed over.
                old = await self._db.put_item(
                    op,
                    row,
                    condition=_NEW_OR_EXPIRED,
                    names={"#ttl": TTL_ATTR},
                    values=self._now(),
                    return_old=True,
                )
            except ConditionFailed:
                await self._forget(op, _chunk_keys(row, _EVENT_CHUNKS))
                winner = await self._get_terminal(op, pk, response_id)
                if winner is not None:
                    return winner
                continue  # the winner was deleted or expired meanwhile: claim again
            if old is not None:
                await self._forget(op, _chunk_keys(old, _EVENT_CHUNKS))
            return None
        raise StoreError(f"terminal of {response_id} kept changing while being claimed")

    async def get_terminal(self, tenant: str, response_id: str) -> Terminal | None:
        pk = response_pk(tenant, response_id)
        return await self._get_terminal("get_terminal", pk, response_id)

    async def _get_terminal(self, op: str, pk: str, response_id: str) -> Terminal | None:
        for _ in range(_ATTEMPTS):
            row = await self._db.get_item(op, key(pk, TERMINAL_SK))
            if row is None or not self._live(row):
                return None
            fetched = await self._fetch_chunks(op, [row])
            try:
                if _large([row], fetched):
                    return await self._db.offload(_terminal, row, fetched)
                return _terminal(row, fetched)
            except _Changed:
                continue
        raise StoreError(f"terminal of {response_id} kept changing while being read")

    # Tool-call journal

    async def journal_start(
        self, tenant: str, response_id: str, call_id: str
    ) -> dict[str, Any] | None:
        op, pk, sk = "journal_start", response_pk(tenant, response_id), _journal_sk(call_id)
        row = {**key(pk, sk), **_common(self._expires()), "state": {"S": "started"}}
        for _ in range(_ATTEMPTS):
            try:
                await self._db.put_item(
                    op, row, condition=_NEW_OR_EXPIRED, names={"#ttl": TTL_ATTR}, values=self._now()
                )
            except ConditionFailed:
                entry = await self._journal_entry(op, pk, sk)
                if entry is not None:
                    return entry
                continue  # deleted or expired meanwhile: record it again
            return None
        raise StoreError(f"journal entry of a call in {response_id} kept changing")

    async def journal_finish(
        self, tenant: str, response_id: str, call_id: str, outcome: dict[str, Any]
    ) -> None:
        pk = response_pk(tenant, response_id)
        row, chunks = await self._db.offload(
            _blob_row, pk, _journal_sk(call_id), _JOURNAL_CHUNKS, outcome, self._expires()
        )
        row["state"] = {"S": "finished"}
        await self._put_replacing("journal_finish", row, chunks, _JOURNAL_CHUNKS)

    async def _journal_entry(self, op: str, pk: str, sk: str) -> dict[str, Any] | None:
        for _ in range(_ATTEMPTS):
            row = await self._db.get_item(op, key(pk, sk))
            if row is None or not self._live(row):
                return None
            if row["state"]["S"] != "finished":
                return {"state": row["state"]["S"]}
            fetched = await self._fetch_chunks(op, [row])
            try:
                return {"state": "finished", "outcome": _decode(row, _JOURNAL_CHUNKS, fetched)}
            except _Changed:
                continue
        raise StoreError("a journal entry kept changing while being read")

    # Deleting a response

    async def purge(self, tenant: str, response_id: str) -> None:
        """Delete every background item of a response, best effort (after its META, the commit
        point of the delete, is gone): items left behind are unreachable and expire."""
        op, pk = "delete_response", response_pk(tenant, response_id)
        try:
            found = await asyncio.gather(
                *(
                    self._db.query_all(op, pk, sk_range, keys_only=True)
                    for sk_range in _PURGE_RANGES
                )
            )
            await self._db.batch_write(
                op, deletes=[key(pk, i["SK"]["S"]) for f in found for i in f]
            )
        except StoreError:
            _log.warning("could not purge a deleted response's background items; TTL will")
