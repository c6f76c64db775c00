"""Asynchronous, metered, error-mapped DynamoDB calls on one table.

Owns how a call is made: awaited on an :class:`AsyncDynamoClient` (the store's HTTP client,
``_http.DynamoHttpClient``, on the event loop; or a synchronous boto3-shaped client run on the
store's thread pool by :class:`ThreadedClient`), always with ``ReturnConsumedCapacity="TOTAL"``,
with batch requests split to DynamoDB's limits, sent in parallel and retried while items come
back unprocessed, and every call counted into the
:class:`~responses_gateway.store.meter.UnitMeter`. Client failures become :class:`StoreError`
whose message names the operation and the error code only: never an endpoint, a key or a
credential. It knows nothing about records: callers pass items and keys.
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar

from responses_gateway.errors import InternalError
from responses_gateway.store._codec import Item, Key, item_size, read_units, write_units
from responses_gateway.store.meter import UnitMeter

__all__ = [
    "WRITE_TOKEN",
    "AsyncDynamoClient",
    "ConditionFailed",
    "DynamoClient",
    "StoreError",
    "TableClient",
    "ThreadedClient",
]

T = TypeVar("T")

BATCH_GET_KEYS = 100
BATCH_WRITE_ITEMS = 25
_MAX_ATTEMPTS = 8
WRITE_TOKEN = "wt"
"""Attribute holding the token of the conditional write that wrote an item."""


class StoreError(InternalError):
    """DynamoDB failed, or returned a record we cannot read (500)."""


class ConditionFailed(Exception):
    """A conditional write's condition did not hold (internal: callers turn it into a result)."""


class DynamoClient(Protocol):
    """The part of a boto3 ``dynamodb`` low-level client the store uses (boto3 is untyped)."""

    def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def put_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def update_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def delete_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def query(self, **kwargs: Any) -> dict[str, Any]: ...
    def batch_get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def batch_write_item(self, **kwargs: Any) -> dict[str, Any]: ...
    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...


class AsyncDynamoClient(Protocol):
    """The same operations as coroutines (what :class:`TableClient` awaits)."""

    async def get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    async def put_item(self, **kwargs: Any) -> dict[str, Any]: ...
    async def update_item(self, **kwargs: Any) -> dict[str, Any]: ...
    async def delete_item(self, **kwargs: Any) -> dict[str, Any]: ...
    async def query(self, **kwargs: Any) -> dict[str, Any]: ...
    async def batch_get_item(self, **kwargs: Any) -> dict[str, Any]: ...
    async def batch_write_item(self, **kwargs: Any) -> dict[str, Any]: ...
    async def transact_write_items(self, **kwargs: Any) -> dict[str, Any]: ...


class ThreadedClient:
    """A synchronous client's calls run on a thread pool (never on the event loop): boto3 when
    asked for (``DYNAMODB_CLIENT=boto3``), and test doubles that wrap one."""

    def __init__(self, client: DynamoClient, executor: Executor) -> None:
        self.client = client
        self._executor = executor

    async def _run(self, method: Callable[..., dict[str, Any]], params: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(method, **params))

    async def get_item(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.get_item, kwargs)

    async def put_item(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.put_item, kwargs)

    async def update_item(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.update_item, kwargs)

    async def delete_item(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.delete_item, kwargs)

    async def query(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.query, kwargs)

    async def batch_get_item(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.batch_get_item, kwargs)

    async def batch_write_item(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.batch_write_item, kwargs)

    async def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        return await self._run(self.client.transact_write_items, kwargs)


def _error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def _condition_failed(exc: BaseException) -> bool:
    return _error_code(exc) == "ConditionalCheckFailedException"


def _cancelled_by_condition(exc: BaseException) -> bool:
    """A TransactWriteItems cancelled only because a condition check failed."""
    if _error_code(exc) != "TransactionCanceledException":
        return False
    response = getattr(exc, "response", None)
    reasons = response.get("CancellationReasons") if isinstance(response, dict) else None
    if not reasons:  # some endpoints only say so in the message
        return "ConditionalCheckFailed" in str(exc)
    codes = {str(r.get("Code")) for r in reasons if isinstance(r, dict)}
    return "ConditionalCheckFailed" in codes and codes <= {"ConditionalCheckFailed", "None"}


def _reported(response: dict[str, Any]) -> float:
    consumed = response.get("ConsumedCapacity")
    entries = consumed if isinstance(consumed, list) else [consumed] if consumed else []
    return float(sum(entry.get("CapacityUnits", 0.0) for entry in entries))


def _chunks(values: list[Any], size: int) -> list[list[Any]]:
    return [values[i : i + size] for i in range(0, len(values), size)]


def _key_of(item: Item) -> tuple[str, str]:
    return item["PK"]["S"], item["SK"]["S"]


async def _backoff(attempt: int) -> None:
    if attempt > 0:
        await asyncio.sleep(min(1.0, 0.025 * 2**attempt))


class TableClient:
    """One table's calls. Every public method is a coroutine that never blocks the loop."""

    def __init__(
        self, client: AsyncDynamoClient, table: str, meter: UnitMeter, executor: Executor
    ) -> None:
        self.table = table
        self._client = client
        self._meter = meter
        self._executor = executor

    async def _call(self, op: str, api: str, **params: Any) -> dict[str, Any]:
        params["ReturnConsumedCapacity"] = "TOTAL"
        method: Callable[..., Awaitable[dict[str, Any]]] = getattr(self._client, api)
        try:
            response = await method(**params)
        except Exception as exc:
            self._meter.record(op, round_trips=1)
            if _condition_failed(exc) or _cancelled_by_condition(exc):
                raise ConditionFailed(api) from exc
            reason = _error_code(exc) or type(exc).__name__
            raise StoreError(f"DynamoDB {api} failed during {op}: {reason}") from exc
        self._meter.record(op, round_trips=1, reported_units=_reported(response))
        return response

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run CPU-heavy work (JSON + zlib of large payloads) on the store's threads."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def get_item(self, op: str, key: Key) -> Item | None:
        response = await self._call(
            op, "get_item", TableName=self.table, Key=key, ConsistentRead=True
        )
        item: Item | None = response.get("Item")
        self._meter.record(op, read_units=read_units(item_size(item) if item else 0))
        return item

    async def put_item(
        self,
        op: str,
        item: Item,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
        return_old: bool = False,
    ) -> Item | None:
        """Write ``item``; returns the item it replaced when ``return_old``.

        A conditional write carries a write token (``wt``): the client retries an attempt whose
        answer was lost (a timeout, a reset connection) after DynamoDB applied it, and that
        retry then fails its own condition. On a failed condition the item is read back, and
        when it holds this call's token the write is ours and succeeded (``return_old`` then
        answers None: the replaced item is not known any more).
        """
        token = None
        if condition:
            token = secrets.token_hex(8)
            item = {**item, WRITE_TOKEN: {"S": token}}
        params: dict[str, Any] = {"TableName": self.table, "Item": item}
        params.update(_condition(condition, names, values))
        if return_old:
            params["ReturnValues"] = "ALL_OLD"
        try:
            response = await self._call(op, "put_item", **params)
        except ConditionFailed:
            self._meter.record(op, write_units=write_units(item_size(item)))
            current = await self.get_item(op, {"PK": item["PK"], "SK": item["SK"]})
            if token is None or current is None or current.get(WRITE_TOKEN) != {"S": token}:
                raise
            return None
        old: Item | None = response.get("Attributes")
        size = max(item_size(item), item_size(old) if old else 0)
        self._meter.record(op, write_units=write_units(size))
        return old

    async def update_item(
        self,
        op: str,
        key: Key,
        update: str,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> Item:
        """Apply ``update`` and return the whole item as it is afterwards."""
        params: dict[str, Any] = {
            "TableName": self.table,
            "Key": key,
            "UpdateExpression": update,
            "ReturnValues": "ALL_NEW",
        }
        params.update(_condition(condition, names, values))
        try:
            response = await self._call(op, "update_item", **params)
        except ConditionFailed:
            self._meter.record(op, write_units=1)
            raise
        item: Item = response.get("Attributes") or {}
        self._meter.record(op, write_units=write_units(item_size(item)))
        return item

    async def delete_item(
        self,
        op: str,
        key: Key,
        *,
        condition: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> Item | None:
        """Delete one item; returns what was deleted (None when there was nothing)."""
        params: dict[str, Any] = {"TableName": self.table, "Key": key, "ReturnValues": "ALL_OLD"}
        params.update(_condition(condition, names, values))
        try:
            response = await self._call(op, "delete_item", **params)
        except ConditionFailed:
            self._meter.record(op, write_units=1)
            raise
        old: Item | None = response.get("Attributes")
        self._meter.record(op, write_units=write_units(item_size(old) if old else 0))
        return old

    async def query_page(
        self,
        op: str,
        pk: str,
        sk_between: tuple[str, str],
        *,
        forward: bool = True,
        limit: int | None = None,
        start: Key | None = None,
        keys_only: bool = False,
        consistent: bool = True,
    ) -> tuple[list[Item], Key | None]:
        """One Query page of ``pk``'s items with ``lo <= SK <= hi``; returns (items, next start).
        ``consistent=False`` reads eventually consistent (half the read units)."""
        params: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "PK = :pk AND SK BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": {"S": pk},
                ":lo": {"S": sk_between[0]},
                ":hi": {"S": sk_between[1]},
            },
            "ConsistentRead": consistent,
            "ScanIndexForward": forward,
        }
        if limit is not None:
            params["Limit"] = limit
        if start is not None:
            params["ExclusiveStartKey"] = start
        if keys_only:
            params["ProjectionExpression"] = "PK, SK"
        response = await self._call(op, "query", **params)
        items: list[Item] = response.get("Items", [])
        units = read_units(sum(item_size(i) for i in items))
        self._meter.record(op, read_units=units if consistent else -(-units // 2))
        return items, response.get("LastEvaluatedKey")

    async def query_all(
        self,
        op: str,
        pk: str,
        sk_between: tuple[str, str],
        *,
        keys_only: bool = False,
        consistent: bool = True,
    ) -> list[Item]:
        """Every item of ``pk`` in the SK range, ascending (pages followed sequentially)."""
        items: list[Item] = []
        start: Key | None = None
        while True:
            page, start = await self.query_page(
                op, pk, sk_between, start=start, keys_only=keys_only, consistent=consistent
            )
            items += page
            if start is None:
                return items

    async def transact_write(self, op: str, actions: list[dict[str, Any]], units: int) -> None:
        """One TransactWriteItems of ``actions`` (``{"Put": ...}``/``{"Update": ...}`` without
        ``TableName``), all or nothing. ``units`` is the write units the items would cost
        outside a transaction; a transaction is billed twice that.

        Raises:
            ConditionFailed: a condition check failed (nothing was written).
        """
        wired = [
            {kind: {"TableName": self.table, **body} for kind, body in action.items()}
            for action in actions
        ]
        try:
            await self._call(op, "transact_write_items", TransactItems=wired)
        finally:
            self._meter.record(op, write_units=2 * units)

    async def batch_get(
        self, op: str, keys: Iterable[Key], *, group: int = BATCH_GET_KEYS
    ) -> dict[tuple[str, str], Item]:
        """Strongly consistent reads of ``keys``, ``group`` keys per request, requests in
        parallel; returns the items found by (PK, SK)."""
        unique = list({_key_of(k): k for k in keys}.values())
        if not unique:
            return {}
        found: dict[tuple[str, str], Item] = {}
        groups = _chunks(unique, min(group, BATCH_GET_KEYS))
        for part in await asyncio.gather(*(self._batch_get_group(op, g) for g in groups)):
            found.update(part)
        units = sum(read_units(item_size(item)) for item in found.values())
        self._meter.record(op, read_units=units + (len(unique) - len(found)))
        return found

    async def _batch_get_group(self, op: str, keys: list[Key]) -> dict[tuple[str, str], Item]:
        found: dict[tuple[str, str], Item] = {}
        pending = keys
        for attempt in range(_MAX_ATTEMPTS):
            await _backoff(attempt)
            request = {self.table: {"Keys": pending, "ConsistentRead": True}}
            response = await self._call(op, "batch_get_item", RequestItems=request)
            for item in response.get("Responses", {}).get(self.table, []):
                found[_key_of(item)] = item
            pending = response.get("UnprocessedKeys", {}).get(self.table, {}).get("Keys", [])
            if not pending:
                return found
        raise StoreError(f"DynamoDB batch_get_item left keys unprocessed during {op}")

    async def batch_write(
        self, op: str, *, puts: Iterable[Item] = (), deletes: Iterable[Key] = ()
    ) -> None:
        """Unconditional puts and deletes, 25 per request, requests in parallel. Deletes are
        counted as 1 write unit each (DynamoDB does not say how large the deleted item was)."""
        requests: list[dict[str, Any]] = [{"PutRequest": {"Item": item}} for item in puts]
        requests += [{"DeleteRequest": {"Key": k}} for k in deletes]
        if not requests:
            return
        groups = _chunks(requests, BATCH_WRITE_ITEMS)
        await asyncio.gather(*(self._batch_write_group(op, g) for g in groups))
        units = sum(
            write_units(item_size(r["PutRequest"]["Item"])) if "PutRequest" in r else 1
            for r in requests
        )
        self._meter.record(op, write_units=units)

    async def _batch_write_group(self, op: str, requests: list[dict[str, Any]]) -> None:
        pending = requests
        for attempt in range(_MAX_ATTEMPTS):
            await _backoff(attempt)
            response = await self._call(op, "batch_write_item", RequestItems={self.table: pending})
            pending = response.get("UnprocessedItems", {}).get(self.table, [])
            if not pending:
                return
        raise StoreError(f"DynamoDB batch_write_item left items unprocessed during {op}")


def _condition(
    condition: str | None, names: dict[str, str] | None, values: dict[str, Any] | None
) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if condition:
        params["ConditionExpression"] = condition
    if names:
        params["ExpressionAttributeNames"] = names
    if values:
        params["ExpressionAttributeValues"] = values
    return params
