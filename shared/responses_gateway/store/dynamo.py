"""The DynamoDB implementation of :class:`~responses_gateway.store.base.Store`.

Owns wiring: one DynamoDB client per store (the asynchronous HTTP client of ``_http.py``, whose
calls are awaited on the event loop; no botocore on the request path), one thread pool for
CPU-heavy encoding, retention, the clock, the :class:`UnitMeter`, and building a store from the
environment. The item layouts live in ``_responses.py`` and ``_conversations.py``; the call
mechanics (batching, retries, metering, error mapping) in ``_calls.py``; the key design is written
up in ``DESIGN.md``. It must not know about HTTP, the API's error envelopes or the agent loop.

Environment (:meth:`DynamoStore.from_env`):

- ``DYNAMODB_TABLE``: the table (``store.select`` decides which store a local run uses);
- ``DYNAMODB_ENDPOINT_URL``: optional endpoint (DynamoDB Local, moto, ...); otherwise
  ``AWS_ENDPOINT_URL_DYNAMODB`` / ``AWS_ENDPOINT_URL`` as botocore reads them, otherwise
  ``https://dynamodb.<region>.amazonaws.com`` (the partition's suffix outside ``aws``);
- ``AWS_REGION`` / ``AWS_DEFAULT_REGION``: region (``us-east-1`` when neither is set);
- ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``: credentials (what
  Lambda sets); without them, botocore's chain, read off the loop (``_credentials.py``);
- ``RETENTION_DAYS``: days before stored responses and conversations expire (default 30);
- ``DYNAMODB_MAX_ATTEMPTS``: attempts per call, retries included (default 4);
- ``DYNAMODB_READ_TIMEOUT``: seconds an attempt waits for DynamoDB's answer (default 10);
- ``DYNAMODB_CLIENT``: ``http`` (default) or ``boto3``: the boto3 client, its calls on the
  store's threads, as before the HTTP client (also used when ``AWS_USE_FIPS_ENDPOINT`` or
  ``AWS_USE_DUALSTACK_ENDPOINT`` asks botocore for another endpoint and no endpoint is set).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from responses_gateway.config import ConfigError
from responses_gateway.store._background import BackgroundTable
from responses_gateway.store._calls import (
    AsyncDynamoClient,
    DynamoClient,
    StoreError,
    TableClient,
    ThreadedClient,
)
from responses_gateway.store._conversations import ConversationTable
from responses_gateway.store._credentials import credential_source, is_loopback
from responses_gateway.store._health import HealthTable
from responses_gateway.store._http import (
    DynamoHttpClient,
    default_endpoint,
    mirror_botocore_client,
)
from responses_gateway.store._ledger import LedgerTable
from responses_gateway.store._prompts import PromptTable
from responses_gateway.store._responses import ResponseTable
from responses_gateway.store.base import (
    BudgetLimits,
    Checkpoint,
    Conversation,
    ConversationPage,
    DeploymentHealth,
    EventRead,
    ItemPage,
    RequestPage,
    RequestQuery,
    StoredPrompt,
    StoredResponse,
    TenantSpend,
    Terminal,
    TracePage,
    UsageBucket,
    UsageEntry,
)
from responses_gateway.store.meter import UnitMeter
from responses_gateway.store.table import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_READ_TIMEOUT,
)

if TYPE_CHECKING:
    from responses_gateway.store._traces import TraceTable

__all__ = [
    "DEFAULT_RETENTION_DAYS",
    "DynamoStore",
    "StoreError",
    "region_from_env",
    "retention_days_from_env",
]

DEFAULT_RETENTION_DAYS = 30
_DAY = 86_400


_CLIENTS = ("http", "boto3")


def _is_botocore_client(client: object) -> bool:
    botocore_client = sys.modules.get("botocore.client")  # no botocore client without botocore
    return botocore_client is not None and isinstance(client, botocore_client.BaseClient)


class DynamoStore:
    """Stored responses, conversations and background-mode state in one DynamoDB table (see
    DESIGN.md)."""

    def __init__(
        self,
        client: AsyncDynamoClient | DynamoClient,
        table_name: str,
        *,
        retention_days: int = DEFAULT_RETENTION_DAYS,
        clock: Callable[[], float] = time.time,
        max_workers: int = 16,
        threaded: bool = False,
    ) -> None:
        """``client`` is one of:

        - an asynchronous client (:class:`~._http.DynamoHttpClient`), awaited on the loop;
        - a boto3 DynamoDB client: its endpoint, region, credentials, attempts and timeouts are
          mirrored by a ``DynamoHttpClient`` of this store's own (``threaded=True``: its calls
          run as they are, on the store's threads);
        - any other synchronous client of the same shape (a test double): run on the threads.
        """
        if retention_days < 1:
            raise ValueError("retention_days must be at least 1")
        self.table_name = table_name
        self.retention_days = retention_days
        self.meter = UnitMeter()
        """Units and round trips spent so far, by operation (``snapshot()``, ``reset()``)."""
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="dynamo")
        calls: AsyncDynamoClient
        if inspect.iscoroutinefunction(getattr(client, "get_item", None)):
            calls = client  # type: ignore[assignment]
        elif _is_botocore_client(client) and not threaded:
            calls = mirror_botocore_client(client)
        else:
            calls = ThreadedClient(client, self._executor)  # type: ignore[arg-type]
        self.client = calls
        """The client the store's calls are awaited on."""
        db = TableClient(calls, table_name, self.meter, self._executor)
        retention = retention_days * _DAY
        self._responses = ResponseTable(db, retention_seconds=retention, clock=clock)
        self._conversations = ConversationTable(db, retention_seconds=retention, clock=clock)
        self._background = BackgroundTable(db, retention_seconds=retention, clock=clock)
        self._ledger = LedgerTable(db, retention_seconds=retention, clock=clock)
        self._prompts = PromptTable(db)
        self._health = HealthTable(db)
        self._clock = clock
        self._traces_table: Any = None  # the trace layout loads with the first trace call
        self._table_args = (db, retention, clock)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> DynamoStore:
        """A store on ``DYNAMODB_TABLE`` (required) at ``DYNAMODB_ENDPOINT_URL`` (optional)."""
        env = os.environ if env is None else env
        table = env.get("DYNAMODB_TABLE")
        if not table:
            raise ConfigError("DYNAMODB_TABLE is not set")
        kind = (env.get("DYNAMODB_CLIENT") or "http").strip().lower()
        if kind not in _CLIENTS:
            raise ConfigError(f"DYNAMODB_CLIENT must be one of {', '.join(_CLIENTS)}, got {kind!r}")
        region = region_from_env(env)
        max_attempts = _positive(env, "DYNAMODB_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)
        read_timeout = float(_positive(env, "DYNAMODB_READ_TIMEOUT", DEFAULT_READ_TIMEOUT))
        retention_days = retention_days_from_env(env)
        endpoint = env.get("DYNAMODB_ENDPOINT_URL") or None
        if kind == "boto3" or (endpoint is None and _botocore_endpoint_variant(env)):
            from responses_gateway.store.table import make_client

            boto3_client = make_client(
                endpoint_url=endpoint,
                region=region,
                max_attempts=max_attempts,
                read_timeout=read_timeout,
            )
            return cls(boto3_client, table, retention_days=retention_days, threaded=True)
        url = endpoint or _configured_endpoint(env) or default_endpoint(region)
        client = DynamoHttpClient(
            url,
            region,
            credential_source(env, loopback=is_loopback(urlsplit(url).hostname or "")),
            max_attempts=max_attempts,
            connect_timeout=DEFAULT_CONNECT_TIMEOUT,
            read_timeout=read_timeout,
            ca_bundle=env.get("AWS_CA_BUNDLE") or None,
        )
        return cls(client, table, retention_days=retention_days)

    def close(self) -> None:
        """Release the thread pool and the client's connections (after the last call)."""
        self._executor.shutdown(wait=False)
        close = getattr(self.client, "close", None)
        if callable(close):
            close()

    # Stored responses

    async def put_response(self, record: StoredResponse) -> None:
        await self._responses.put(record)

    async def get_response(self, tenant: str, response_id: str) -> StoredResponse | None:
        return await self._responses.get(tenant, response_id)

    async def get_responses(self, tenant: str, response_ids: list[str]) -> list[StoredResponse]:
        return await self._responses.get_many(tenant, response_ids)

    async def get_items(self, tenant: str, item_ids: list[str]) -> dict[str, dict[str, Any]]:
        return await self._responses.get_items(tenant, item_ids)

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        """Delete META (the commit point) and its chunks, then purge the response's background
        items, best effort (what is left is unreachable and expires)."""
        deleted = await self._responses.delete(tenant, response_id)
        await self._background.purge(tenant, response_id)
        await self._forget_content(tenant, [response_id])
        return deleted

    async def _forget_content(self, tenant: str, response_ids: list[str]) -> None:
        """Remove what was logged of these responses' items: their request-log entries'
        content (entries and counters stay) and the content of the trace spans naming them."""
        await asyncio.gather(
            self._ledger.forget_content(tenant, response_ids),
            self._traces.forget(tenant, response_ids),
        )

    # Conversations

    async def create_conversation(
        self, conversation: Conversation, items: list[dict[str, Any]]
    ) -> None:
        await self._conversations.create(conversation, items)

    async def get_conversation(self, tenant: str, conversation_id: str) -> Conversation | None:
        return await self._conversations.get(tenant, conversation_id)

    async def update_conversation(
        self, tenant: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        return await self._conversations.update(tenant, conversation_id, metadata)

    async def delete_conversation(self, tenant: str, conversation_id: str) -> bool:
        turns = await self._conversations.turns(tenant, conversation_id)
        deleted = await self._conversations.delete(tenant, conversation_id)
        if turns:
            await self._forget_content(tenant, turns)
        return deleted

    async def list_conversations(
        self, tenant: str, *, before: str | None = None, limit: int = 50
    ) -> ConversationPage:
        """One descending Query of the tenant's conversation list."""
        return await self._conversations.page(tenant, before=before, limit=limit)

    async def append_items(
        self,
        tenant: str,
        conversation_id: str,
        items: list[dict[str, Any]],
        *,
        once_key: str | None = None,
    ) -> None:
        await self._conversations.append(tenant, conversation_id, items, once_key=once_key)

    async def list_items(
        self,
        tenant: str,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: Literal["asc", "desc"] = "desc",
    ) -> ItemPage:
        """A page of items; raises ``LookupError`` when the conversation or ``after`` is unknown."""
        return await self._conversations.list_items(
            tenant, conversation_id, after=after, limit=limit, order=order
        )

    async def all_items(self, tenant: str, conversation_id: str) -> list[dict[str, Any]]:
        """Every item, oldest first; raises ``LookupError`` when the conversation is unknown."""
        return await self._conversations.all_items(tenant, conversation_id)

    async def get_item(
        self, tenant: str, conversation_id: str, item_id: str
    ) -> dict[str, Any] | None:
        return await self._conversations.get_item(tenant, conversation_id, item_id)

    async def delete_item(self, tenant: str, conversation_id: str, item_id: str) -> bool:
        return await self._conversations.delete_item(tenant, conversation_id, item_id)

    # Background responses

    async def put_checkpoint(self, checkpoint: Checkpoint, *, expected_version: int | None) -> None:
        """Raises ``CheckpointConflict`` when fenced out, ``ValueError`` when
        ``checkpoint.version`` is not ``expected_version + 1`` (0 for the first write)."""
        await self._background.put_checkpoint(checkpoint, expected_version=expected_version)

    async def get_checkpoint(self, tenant: str, response_id: str) -> Checkpoint | None:
        return await self._background.get_checkpoint(tenant, response_id)

    async def request_cancel(self, tenant: str, response_id: str) -> bool:
        return await self._background.request_cancel(tenant, response_id)

    async def cancel_requested(self, tenant: str, response_id: str) -> bool:
        return await self._background.cancel_requested(tenant, response_id)

    async def append_events(
        self, tenant: str, response_id: str, first_seq: int, frames: list[str]
    ) -> None:
        await self._background.append_events(tenant, response_id, first_seq, frames)

    async def read_events(self, tenant: str, response_id: str, after: int) -> EventRead:
        return await self._background.read_events(tenant, response_id, after)

    async def last_event_seq(self, tenant: str, response_id: str) -> int:
        return await self._background.last_event_seq(tenant, response_id)

    async def truncate_events(self, tenant: str, response_id: str, from_seq: int) -> None:
        await self._background.truncate_events(tenant, response_id, from_seq)

    async def claim_terminal(
        self, tenant: str, response_id: str, terminal: Terminal
    ) -> Terminal | None:
        return await self._background.claim_terminal(tenant, response_id, terminal)

    async def get_terminal(self, tenant: str, response_id: str) -> Terminal | None:
        return await self._background.get_terminal(tenant, response_id)

    async def journal_start(
        self, tenant: str, response_id: str, call_id: str
    ) -> dict[str, Any] | None:
        return await self._background.journal_start(tenant, response_id, call_id)

    async def journal_finish(
        self, tenant: str, response_id: str, call_id: str, outcome: dict[str, Any]
    ) -> None:
        await self._background.journal_finish(tenant, response_id, call_id, outcome)

    # Usage ledger and budgets

    async def record_usage(self, entry: UsageEntry) -> bool:
        """One TransactWriteItems (marker, log item + 4 ADDs); False when already counted."""
        return await self._ledger.record(entry)

    async def read_usage(self, start: int, end: int) -> list[UsageBucket]:
        """One Query per UTC day of the range, in parallel; raises ``ValueError`` past
        ``MAX_USAGE_DAYS`` days."""
        return await self._ledger.read(start, end)

    async def read_metrics(self, start: int, end: int, *, width: int) -> list[UsageBucket]:
        """One eventually consistent Query per UTC day of the range, in parallel."""
        return await self._ledger.read_rows(start, end, width, consistent=False)

    async def get_usage_entry(self, tenant: str, response_id: str) -> UsageEntry | None:
        return await self._ledger.get_entry(tenant, response_id)

    async def get_usage_entries(self, tenant: str, response_ids: list[str]) -> list[UsageEntry]:
        """One BatchGetItem of the entries (100 keys per request, in parallel)."""
        return await self._ledger.get_entries(tenant, response_ids)

    async def list_requests(
        self,
        tenant: str,
        *,
        before: str | None = None,
        limit: int = 50,
        after: str | None = None,
        query: RequestQuery | None = None,
    ) -> RequestPage:
        """Descending Queries of the tenant's log partition: one of ``limit`` + 2 items
        unfiltered; with filters, pages until ``limit`` matches or ``REQUEST_SCAN`` examined."""
        return await self._ledger.list_requests(
            tenant, before=before, limit=limit, after=after, query=query
        )

    async def log_request(self, entry: UsageEntry) -> None:
        """One BatchWriteItem (the entry and its log item, 2 write units under 1 KB) and the
        ADDs of its hour and five-minute rows (1 write unit each), in parallel."""
        await self._ledger.log_only(entry)

    async def get_spend(self, tenant: str, now: int) -> TenantSpend:
        return await self._ledger.spend(tenant, now)

    async def put_budget(self, tenant: str, limits: BudgetLimits | None) -> None:
        await self._ledger.put_limits(tenant, limits)

    async def get_budget(self, tenant: str) -> BudgetLimits | None:
        return await self._ledger.get_limits(tenant)

    # Prompt templates

    async def put_prompt_version(
        self, prompt_id: str, version: str, body: dict[str, Any], *, make_default: bool
    ) -> None:
        await self._prompts.put_version(prompt_id, version, body, make_default=make_default)

    async def get_prompt(self, prompt_id: str) -> StoredPrompt | None:
        return await self._prompts.get(prompt_id)

    # Deployment health (routing)

    async def read_health(self, deployment_ids: list[str]) -> dict[str, DeploymentHealth]:
        return await self._health.read(deployment_ids, self._clock())

    async def record_failure(
        self,
        deployment_id: str,
        *,
        now: float,
        allowed_fails: int,
        window: float,
        cooldown: float,
    ) -> DeploymentHealth:
        return await self._health.record_failure(
            deployment_id, now=now, allowed_fails=allowed_fails, window=window, cooldown=cooldown
        )

    async def claim_probe(self, deployment_id: str, *, now: float, lease: float) -> bool:
        return await self._health.claim_probe(deployment_id, now=now, lease=lease)

    async def clear_health(self, deployment_id: str) -> None:
        await self._health.clear(deployment_id)

    async def count_call(
        self,
        deployment_id: str,
        *,
        minute: int,
        requests: int,
        tokens: int,
        rpm: int | None = None,
        tpm: int | None = None,
    ) -> bool:
        return await self._health.count_call(
            deployment_id, minute=minute, requests=requests, tokens=tokens, rpm=rpm, tpm=tpm
        )

    # Agent traces

    @property
    def _traces(self) -> TraceTable:
        if self._traces_table is None:
            from responses_gateway.store._traces import TraceTable

            db, retention, clock = self._table_args
            self._traces_table = TraceTable(db, retention_seconds=retention, clock=clock)
        table: TraceTable = self._traces_table
        return table

    async def put_traces(
        self, tenant: str, traces: list[dict[str, Any]], spans: list[dict[str, Any]]
    ) -> None:
        """BatchWriteItem: two items per trace (record, index), one per span."""
        await self._traces.put(tenant, traces, spans)

    async def list_traces(
        self, tenant: str, *, before: str | None = None, limit: int = 50
    ) -> TracePage:
        """One descending Query of the tenant's trace index."""
        return await self._traces.page(tenant, before=before, limit=limit)

    async def get_trace(
        self, tenant: str, trace_id: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """One Query of the trace's partition (pages followed)."""
        return await self._traces.get(tenant, trace_id)

    async def trace_of_response(self, tenant: str, response_id: str) -> str | None:
        """One GetItem of the response's link item."""
        return await self._traces.trace_of(tenant, response_id)


def _true(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() == "true"


def _botocore_endpoint_variant(env: Mapping[str, str]) -> bool:
    """Whether the environment asks botocore for a FIPS or dual-stack endpoint."""
    return _true(env, "AWS_USE_FIPS_ENDPOINT") or _true(env, "AWS_USE_DUALSTACK_ENDPOINT")


def _configured_endpoint(env: Mapping[str, str]) -> str | None:
    """botocore's endpoint variables: ``AWS_ENDPOINT_URL_DYNAMODB``, then ``AWS_ENDPOINT_URL``
    (unless ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS``)."""
    if _true(env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        return None
    return env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL") or None


def region_from_env(env: Mapping[str, str]) -> str:
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"


def _positive(env: Mapping[str, str], name: str, default: float) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return int(default)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"{name} must be a positive whole number, got {raw!r}")
    return value


def retention_days_from_env(env: Mapping[str, str]) -> int:
    raw = env.get("RETENTION_DAYS", "").strip()
    if not raw:
        return DEFAULT_RETENTION_DAYS
    try:
        days = int(raw)
    except ValueError:
        days = 0
    if days < 1:
        raise ConfigError(f"RETENTION_DAYS must be a whole number of days >= 1, got {raw!r}")
    return days
