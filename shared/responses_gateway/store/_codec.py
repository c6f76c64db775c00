"""Byte-level layout shared by stored responses and conversations.

Owns key escaping (so no tenant or id can spell another record's key), JSON + zlib blobs,
splitting a blob into chunks that fit a DynamoDB item, and measuring items the way DynamoDB bills
them. Pure functions: no I/O and no boto3 here.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CHUNK_BYTES",
    "blob_attrs",
    "blob_chunk_keys",
    "blob_of",
    "check_version",
    "SCHEMA_ATTR",
    "TTL_ATTR",
    "Item",
    "Key",
    "decode_json",
    "encode_json",
    "escape",
    "item_size",
    "key",
    "read_units",
    "split",
    "write_units",
]

Item = dict[str, Any]
"""A DynamoDB item in the low-level wire shape: ``{"PK": {"S": "..."}, "n": {"N": "3"}}``."""
Key = dict[str, Any]
"""A primary key: ``{"PK": {"S": ...}, "SK": {"S": ...}}``."""

SCHEMA_ATTR = "schema_version"
"""Written on every item (the record's ``RECORD_VERSION``)."""
TTL_ATTR = "ttl"
"""The table's TTL attribute: Unix seconds (Number)."""
CHUNK_BYTES = 350_000
"""Largest blob slice in one item: leaves room under DynamoDB's 400 KB item limit."""

_ENCODINGS = ("z", "j")


def escape(part: str) -> str:
    """A key component with ``%`` and ``#`` escaped, so ``#`` only ever separates components."""
    return part.replace("%", "%25").replace("#", "%23")


def key(pk: str, sk: str) -> Key:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def encode_json(value: Any) -> tuple[bytes, str]:
    """``value`` as compact JSON, zlib-compressed when that is smaller; returns (blob, encoding).

    Encoding ``"z"`` is zlib over UTF-8 JSON, ``"j"`` plain UTF-8 JSON (random data such as base64
    images does not compress, so it is stored as is).
    """
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )
    packed = zlib.compress(raw, 6)
    if len(packed) < len(raw):
        return packed, "z"
    return raw, "j"


def decode_json(blob: bytes, encoding: str) -> Any:
    """The inverse of :func:`encode_json`."""
    if encoding not in _ENCODINGS:
        raise ValueError(f"unknown blob encoding {encoding!r}")
    raw = zlib.decompress(blob) if encoding == "z" else blob
    return json.loads(raw.decode("utf-8", "surrogatepass"))


def split(blob: bytes, size: int = CHUNK_BYTES) -> list[bytes]:
    """``blob`` cut into slices of at most ``size`` bytes (at least one slice)."""
    return [blob[i : i + size] for i in range(0, len(blob), size)] or [b""]


def check_version(item: Item, current: int) -> None:
    """Refuse an item written by a newer schema than this code reads (ValueError)."""
    version = int(item.get(SCHEMA_ATTR, {"N": "0"})["N"])
    if version > current:
        raise ValueError(f"item has schema version {version}, this code reads <= {current}")


def _chunk_sk(prefix: str, nonce: str, index: int) -> str:
    return f"{prefix}#{nonce}#{index:04d}"


def blob_attrs(
    pk: str, prefix: str, nonce: str, blob: bytes, common: Item, *, inline: int = CHUNK_BYTES
) -> tuple[Item, list[Item]]:
    """Store ``blob`` for a row: (attributes for the row, chunk items to write *before* it).

    Up to ``inline`` bytes the blob is the row's ``body``; beyond, the row says ``nb`` (chunk
    count) and the chunks are items ``<prefix>#<nonce>#<i>`` carrying ``common`` (schema version,
    TTL). The nonce ties chunks to one version of the row: chunks of other versions are ignored.
    """
    if len(blob) <= inline:
        return {"body": {"B": blob}}, []
    parts = split(blob)
    chunks = [
        {**key(pk, _chunk_sk(prefix, nonce, i)), **common, "d": {"B": part}}
        for i, part in enumerate(parts)
    ]
    return {"nb": {"N": str(len(parts))}}, chunks


def blob_chunk_keys(row: Item, prefix: str, nonce: str, count_attr: str = "nb") -> list[Key]:
    """Keys of the chunks a row written by :func:`blob_attrs` names (none when inline)."""
    count = int(row[count_attr]["N"]) if count_attr in row else 0
    return [key(row["PK"]["S"], _chunk_sk(prefix, nonce, i)) for i in range(count)]


def blob_of(
    row: Item,
    prefix: str,
    nonce: str,
    fetched: Mapping[tuple[str, str], Item],
    count_attr: str = "nb",
) -> bytes | None:
    """The row's blob: inline, or joined from ``fetched`` chunks; None if a chunk is missing
    (the row was replaced or deleted meanwhile)."""
    if count_attr == "nb" and "body" in row:
        return bytes(row["body"]["B"])
    parts: list[bytes] = []
    for chunk_key in blob_chunk_keys(row, prefix, nonce, count_attr):
        chunk = fetched.get((chunk_key["PK"]["S"], chunk_key["SK"]["S"]))
        if chunk is None:
            return None
        parts.append(bytes(chunk["d"]["B"]))
    return b"".join(parts)


def item_size(item: Mapping[str, Any]) -> int:
    """An item's size in bytes as DynamoDB counts it: attribute names plus values."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode("utf-8", "surrogatepass"))
    if kind == "N":
        return _number_size(str(raw))
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in raw)
    if kind == "SS":
        return sum(len(s.encode()) for s in raw)
    if kind == "NS":
        return sum(_number_size(n) for n in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def _number_size(text: str) -> int:
    digits = text.lstrip("+-").split("e")[0].split("E")[0].replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1


def read_units(size: int) -> int:
    """Read request units of one strongly consistent read of ``size`` bytes (min 1)."""
    return max(1, math.ceil(size / 4096))


def write_units(size: int) -> int:
    """Write request units of one standard write of an item of ``size`` bytes (min 1)."""
    return max(1, math.ceil(size / 1024))
