"""Server-side state: the repository interface and its implementations (DynamoDB, SQLite).

Callers depend on :class:`Store` (``store.base``). Deployed functions build a
:class:`DynamoStore` (``DynamoStore.from_env(env)``); ``responses-gateway serve`` asks
``open_store(env)`` (``store.select``), which by default opens the embedded SQLite store
(``store.sqlite``). Nothing here imports boto3, moto or sqlite3 at import time: the DynamoDB store
calls DynamoDB over its own HTTP client (``store._http``), boto3 is imported only when a boto3
client is built (table setup, ``DYNAMODB_CLIENT=boto3``), moto only by ``store.local``, sqlite3
only by ``store.sqlite``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from responses_gateway._lazy import lazy_attributes

if TYPE_CHECKING:
    from responses_gateway.store._calls import StoreError
    from responses_gateway.store.base import (
        RECORD_VERSION,
        Conversation,
        ConversationStore,
        ItemPage,
        ResponseStore,
        Store,
        StoredResponse,
    )
    from responses_gateway.store.dynamo import DEFAULT_RETENTION_DAYS, DynamoStore
    from responses_gateway.store.meter import OperationUnits, UnitMeter
    from responses_gateway.store.select import OpenedStore, default_db_path, open_store
    from responses_gateway.store.table import (
        TABLE_DEFINITION,
        create_table,
        enable_ttl,
        make_client,
    )

# Where each public name lives. The names resolve on first access (PEP 562), so importing
# ``responses_gateway.store.base`` (as the request path does) does not also import the DynamoDB
# store, its mixins, the table helpers and ``store.select`` at cold start.
_HOMES = {
    "StoreError": "_calls",
    "RECORD_VERSION": "base",
    "Conversation": "base",
    "ConversationStore": "base",
    "ItemPage": "base",
    "ResponseStore": "base",
    "Store": "base",
    "StoredResponse": "base",
    "DEFAULT_RETENTION_DAYS": "dynamo",
    "DynamoStore": "dynamo",
    "OperationUnits": "meter",
    "UnitMeter": "meter",
    "OpenedStore": "select",
    "default_db_path": "select",
    "open_store": "select",
    "TABLE_DEFINITION": "table",
    "create_table": "table",
    "enable_ttl": "table",
    "make_client": "table",
}


__getattr__ = lazy_attributes(__name__, _HOMES, globals())


__all__ = [
    "DEFAULT_RETENTION_DAYS",
    "RECORD_VERSION",
    "TABLE_DEFINITION",
    "Conversation",
    "ConversationStore",
    "DynamoStore",
    "ItemPage",
    "OpenedStore",
    "OperationUnits",
    "ResponseStore",
    "Store",
    "StoreError",
    "StoredResponse",
    "UnitMeter",
    "create_table",
    "default_db_path",
    "enable_ttl",
    "make_client",
    "open_store",
]
