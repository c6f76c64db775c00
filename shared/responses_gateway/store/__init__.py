"""Server-side state: the repository interface and its implementations (DynamoDB, SQLite).

Callers depend on :class:`Store` (``store.base``). Deployed functions build a
:class:`DynamoStore` (``DynamoStore.from_env(env)``); ``responses-gateway serve`` asks
``open_store(env)`` (``store.select``), which by default opens the embedded SQLite store
(``store.sqlite``). Nothing here imports boto3, moto or sqlite3 at import time: boto3 is imported
when a client is built, moto only by ``store.local``, sqlite3 only by ``store.sqlite``.
"""

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
from responses_gateway.store.table import TABLE_DEFINITION, create_table, enable_ttl, make_client

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
