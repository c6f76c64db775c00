"""Server-side state: the repository interface and its DynamoDB implementation.

Callers depend on :class:`Store` (``store.base``) and build a :class:`DynamoStore` at startup
(``open_store(env)`` or ``DynamoStore.from_env(env)``). Nothing here imports boto3 or moto at
import time: boto3 is imported when a client is built, moto only by ``store.local``.
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
from responses_gateway.store.dynamo import DEFAULT_RETENTION_DAYS, DynamoStore, open_store
from responses_gateway.store.meter import OperationUnits, UnitMeter
from responses_gateway.store.table import TABLE_DEFINITION, create_table, enable_ttl, make_client

__all__ = [
    "DEFAULT_RETENTION_DAYS",
    "RECORD_VERSION",
    "TABLE_DEFINITION",
    "Conversation",
    "ConversationStore",
    "DynamoStore",
    "ItemPage",
    "OperationUnits",
    "ResponseStore",
    "Store",
    "StoreError",
    "StoredResponse",
    "UnitMeter",
    "create_table",
    "enable_ttl",
    "make_client",
    "open_store",
]
