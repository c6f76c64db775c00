"""The repository interface for server-side state, and its records.

Owns what the rest of the gateway may ask of storage: stored responses (one record per response:
the rendered Response object, its own input items, its links) and conversations (metadata plus an
ordered list of items). Implementations (``store.dynamo``) own keys, item layout, chunking of large
payloads, TTL and consistency; callers never see DynamoDB shapes.

Every call is scoped to a ``tenant`` (the API key's identity; ``"local"`` when serving locally):
a record created by one tenant is invisible to another. Expired records are reported as missing
even before DynamoDB's TTL sweeper deletes them. Records never hold secrets: callers pass the
echoed request (MCP ``headers``/``authorization`` already dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from responses_gateway.usage.records import (
    BudgetLimits,
    RequestPage,
    RequestQuery,
    TenantSpend,
    UsageBucket,
    UsageCounts,
    UsageEntry,
)

__all__ = [
    "RECORD_VERSION",
    "BackgroundStore",
    "BudgetLimits",
    "Checkpoint",
    "CheckpointConflict",
    "Conversation",
    "ConversationPage",
    "ConversationStore",
    "DeploymentHealth",
    "EventRead",
    "HealthStore",
    "ItemPage",
    "LedgerStore",
    "PromptStore",
    "PromptVersionExists",
    "RequestPage",
    "RunLeases",
    "RequestQuery",
    "ResponseStore",
    "Store",
    "StoredPrompt",
    "StoredResponse",
    "Terminal",
    "TenantSpend",
    "TracePage",
    "TraceStore",
    "UsageBucket",
    "UsageCounts",
    "UsageEntry",
]

RECORD_VERSION = 1
"""Schema version written on every record."""


@dataclass(slots=True)
class StoredResponse:
    """One stored response."""

    tenant: str
    id: str
    response: dict[str, Any]
    """The rendered Response object (status, output, usage, echoed request fields)."""
    input_items: list[dict[str, Any]]
    """This response's own input items (not the history), each with an ``id``, in order."""
    chain: list[str] = field(default_factory=list)
    """Ids of the responses this one continues, oldest first (``previous_response_id`` is last)."""
    conversation_id: str | None = None
    expires_at: int = 0
    """Unix seconds after which the record is gone (DynamoDB TTL attribute)."""

    @property
    def status(self) -> str:
        return str(self.response.get("status"))

    @property
    def output(self) -> list[dict[str, Any]]:
        return list(self.response.get("output") or [])


@dataclass(slots=True)
class Conversation:
    """A conversation's metadata (its items are read separately)."""

    tenant: str
    id: str
    created_at: int
    metadata: dict[str, str] = field(default_factory=dict)
    expires_at: int = 0

    def to_object(self) -> dict[str, Any]:
        """The API's ``Conversation`` object."""
        return {
            "id": self.id,
            "object": "conversation",
            "created_at": self.created_at,
            "metadata": dict(self.metadata),
        }


@dataclass(slots=True)
class ConversationPage:
    """One page of a tenant's conversations, newest first."""

    conversations: list[Conversation]
    next_cursor: str | None = None
    """Pass as ``before`` to read the next (older) page; None on the last page."""


@dataclass(slots=True)
class ItemPage:
    """One page of a conversation's items."""

    data: list[dict[str, Any]]
    has_more: bool


class ResponseStore(Protocol):
    """Stored responses."""

    async def put_response(self, record: StoredResponse) -> None:
        """Write (or overwrite) a response record, all of it or nothing."""
        ...

    async def get_response(self, tenant: str, response_id: str) -> StoredResponse | None:
        """A strongly consistent read; None when missing, deleted or expired."""
        ...

    async def get_responses(self, tenant: str, response_ids: list[str]) -> list[StoredResponse]:
        """Several records in a bounded number of round trips (strongly consistent), in the
        order asked; missing, deleted or expired ones are left out."""
        ...

    async def delete_response(self, tenant: str, response_id: str) -> bool:
        """Delete a record; False when there was none (or it had expired). Its items stop
        resolving through :meth:`get_items` before the record itself disappears."""
        ...

    async def get_items(self, tenant: str, item_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Stored items by id, for ``item_reference``: any input or output item of any live
        stored response of ``tenant``, whatever chain or conversation it belongs to.

        One bounded, strongly consistent read however many ids (DynamoDB: one BatchGetItem of
        index items, 100 keys per request, requests in parallel; a second read only for items
        over 350 KB). Returns ``{id: item}`` for the ids found, each item exactly as stored;
        ids unknown, of another tenant, of a deleted response or expired are left out. When an
        id occurs in several responses (clients resend history with ids), the item of the
        latest stored of them is returned. Duplicate ids are looked up once.
        """
        ...


class ConversationStore(Protocol):
    """Conversations and their ordered items."""

    async def create_conversation(
        self, conversation: Conversation, items: list[dict[str, Any]]
    ) -> None:
        """Create a conversation with initial items (each with an ``id``)."""
        ...

    async def get_conversation(self, tenant: str, conversation_id: str) -> Conversation | None: ...

    async def update_conversation(
        self, tenant: str, conversation_id: str, metadata: dict[str, str]
    ) -> Conversation | None:
        """Replace the metadata; None when the conversation does not exist."""
        ...

    async def delete_conversation(self, tenant: str, conversation_id: str) -> bool: ...

    async def list_conversations(
        self, tenant: str, *, before: str | None = None, limit: int = 50
    ) -> ConversationPage:
        """One page of ``tenant``'s live conversations, newest first (by ``created_at``, then
        id; one bounded read). ``before`` is an earlier page's ``next_cursor``; metadata is as
        last updated; deleted and expired conversations are left out."""
        ...

    async def append_items(
        self,
        tenant: str,
        conversation_id: str,
        items: list[dict[str, Any]],
        *,
        once_key: str | None = None,
    ) -> None:
        """Append items (each with an ``id``) atomically and in order: concurrent appends never
        lose or interleave items. Raises ``LookupError`` when the conversation does not exist.

        With ``once_key`` (the id of the response whose turn the items are), the append happens
        at most once per key and conversation: calling again with the same key and items (a
        retry, a worker settling an ending another one began) adds nothing and returns normally,
        also after a crash half-way through the first call. The persister appends a turn this
        way *before* it writes the response's final record, so a finished record always implies
        its turn is in the conversation (see DESIGN.md, "Durable conversation appends")."""
        ...

    async def list_items(
        self,
        tenant: str,
        conversation_id: str,
        *,
        after: str | None = None,
        limit: int = 20,
        order: Literal["asc", "desc"] = "desc",
    ) -> ItemPage:
        """A page of items after the item with id ``after`` (exclusive), in ``order``."""
        ...

    async def all_items(self, tenant: str, conversation_id: str) -> list[dict[str, Any]]:
        """Every item, oldest first (the context of a response in this conversation)."""
        ...

    async def get_item(
        self, tenant: str, conversation_id: str, item_id: str
    ) -> dict[str, Any] | None: ...

    async def delete_item(self, tenant: str, conversation_id: str, item_id: str) -> bool: ...


class CheckpointConflict(Exception):
    """A checkpoint write lost: another writer advanced the checkpoint, or a cancel was
    requested. The writer must stop (it no longer owns the response's loop)."""


@dataclass(slots=True)
class Checkpoint:
    """The saved loop of a response run by the background worker (one per response).

    Written after every loop action; only ids travel through the state machine, so this is all a
    worker invocation needs to continue. ``state`` and ``run`` never hold secrets.
    """

    tenant: str
    response_id: str
    version: int
    """0 for the first write; each write stores ``expected_version + 1`` (fencing)."""
    seq: int
    """The ``sequence_number`` of the next event to log (events below it are all logged)."""
    state: dict[str, Any]
    """``LoopState.to_json()``."""
    run: dict[str, Any] = field(default_factory=dict)
    """What rebuilds the live context: input items, chain, conversation id, store/stream flags,
    the execution generation (JSON, no secrets)."""
    cancel_requested: bool = False
    """Set by :meth:`BackgroundStore.request_cancel` (read-only for writers)."""
    expires_at: int = 0


@dataclass(slots=True)
class Terminal:
    """The ending of a background response: its terminal SSE event and final Response object.

    Claimed once (the first writer wins: the worker finishing, a cancel, the watchdog); the
    claim is the commit point of the response's outcome."""

    sequence_number: int
    frame: str
    """The terminal SSE frame text (``event: ...\ndata: ...\n\n``)."""
    response: dict[str, Any]


@dataclass(slots=True)
class EventRead:
    """Logged events after a cursor: numbered frames in order, and the terminal if claimed.
    Numbered events at or after the terminal's sequence number are left out."""

    events: list[tuple[int, str]]
    terminal: Terminal | None = None


class BackgroundStore(Protocol):
    """Checkpoints, the event log, terminal claims and the tool-call journal of background
    responses. All calls are strongly consistent and tenant scoped; items expire with the
    retention."""

    async def put_checkpoint(self, checkpoint: Checkpoint, *, expected_version: int | None) -> None:
        """Write ``checkpoint`` iff the stored one has ``expected_version`` (None: none exists yet)
        and no cancel was requested; otherwise raise :class:`CheckpointConflict`."""
        ...

    async def get_checkpoint(self, tenant: str, response_id: str) -> Checkpoint | None: ...

    async def request_cancel(self, tenant: str, response_id: str) -> bool:
        """Flag the checkpoint cancelled (later checkpoint writes conflict); False if none."""
        ...

    async def cancel_requested(self, tenant: str, response_id: str) -> bool:
        """Whether :meth:`request_cancel` flagged the response (a read of a tiny item)."""
        ...

    async def append_events(
        self, tenant: str, response_id: str, first_seq: int, frames: list[str]
    ) -> None:
        """Log one batch of frames; ``frames[i]`` has sequence number ``first_seq + i``."""
        ...

    async def read_events(self, tenant: str, response_id: str, after: int) -> EventRead:
        """Events with sequence number > ``after`` (-1: all), and the terminal if claimed."""
        ...

    async def last_event_seq(self, tenant: str, response_id: str) -> int:
        """The highest numbered sequence number logged (-1 when none)."""
        ...

    async def truncate_events(self, tenant: str, response_id: str, from_seq: int) -> None:
        """Delete logged batches holding events >= ``from_seq`` (batches never straddle it)."""
        ...

    async def claim_terminal(
        self, tenant: str, response_id: str, terminal: Terminal
    ) -> Terminal | None:
        """Store ``terminal`` if no terminal exists: None when this call won, else the winner."""
        ...

    async def get_terminal(self, tenant: str, response_id: str) -> Terminal | None: ...

    async def journal_start(
        self, tenant: str, response_id: str, call_id: str
    ) -> dict[str, Any] | None:
        """Record that tool call ``call_id`` is about to run. None when this call recorded it;
        otherwise the existing entry (``{"state": "started"}`` or ``{"state": "finished",
        "outcome": {...}}``) and the caller must not run the call again."""
        ...

    async def journal_finish(
        self, tenant: str, response_id: str, call_id: str, outcome: dict[str, Any]
    ) -> None:
        """Record the result of tool call ``call_id`` (``outcome`` is JSON)."""
        ...


@runtime_checkable
class RunLeases(Protocol):
    """Which process drives each unfinished background run, for the in-process runner when
    several processes share one store (``serve`` on one SQLite file). A run is leased to one
    owner until a time; the owner renews it while it drives the run and releases it when the run
    is done; once a lease lapses (its owner died) another process takes the run over. A run is
    created leased to nobody for a short grace, so only its creator starts it at once. Deployed,
    the state machine drives runs and nothing uses this."""

    async def claim_run(self, tenant: str, response_id: str, owner: str, seconds: float) -> bool:
        """Lease the run to ``owner`` for ``seconds`` iff it is leased to nobody, to ``owner``
        already, or its lease lapsed; whether ``owner`` holds it now."""
        ...

    async def renew_runs(self, owner: str, seconds: float) -> int:
        """Extend every lease ``owner`` holds to ``seconds`` from now; how many there were."""
        ...

    async def release_run(self, tenant: str, response_id: str, owner: str) -> None:
        """Forget the lease of a run that is done, if ``owner`` holds it."""
        ...

    async def orphaned_runs(self, limit: int) -> list[tuple[str, str]]:
        """Up to ``limit`` runs (tenant, response id) whose lease lapsed, oldest lapse first."""
        ...


class LedgerStore(Protocol):
    """The usage ledger (per-tenant counters) and budgets set per tenant. Counters are by UTC
    hour, tenant, model and API key id, plus one day and one month total per tenant."""

    async def record_usage(self, entry: UsageEntry) -> bool:
        """Add ``entry.counts`` to its hour row (tenant, model, API key), its tenant's day total
        and its tenant's month total, and store ``entry`` as the response's request-log entry,
        all atomically. Idempotent per ``(tenant, response_id)``: True when this call counted
        it, False when it had been counted already (nothing changes then).

        The same write adds ``entry`` to the tenant's request log for :meth:`list_requests`,
        ordered by end time (``entry.extra["ended_ms"]`` when it is an int, else
        ``entry.ended_at * 1000``) then ``response_id``; the log entry expires with the
        response retention."""
        ...

    async def list_requests(
        self,
        tenant: str,
        *,
        before: str | None = None,
        limit: int = 50,
        after: str | None = None,
        query: RequestQuery | None = None,
    ) -> RequestPage:
        """One page of ``tenant``'s request log, newest first: at most ``limit`` entries
        recorded by :meth:`record_usage` or :meth:`log_request` (strongly consistent, bounded
        reads). ``before`` is a ``next_cursor`` of an earlier page (tenant-specific); None
        starts from the newest. ``after`` (an entry's
        :func:`~responses_gateway.usage.records.log_cursor`) keeps only entries newer than it:
        a live tail's read. ``query`` keeps the entries it matches, over its time range: the
        read examines at most :data:`~responses_gateway.usage.records.REQUEST_SCAN` entries,
        and a page that stopped there has a ``next_cursor`` even when it holds fewer than
        ``limit``. ``next_cursor`` is None when no older entry is left to examine (an
        unfiltered page: exactly when none exists). Entries of other tenants are never
        returned; expired ones may be left out."""
        ...

    async def log_request(self, entry: UsageEntry) -> None:
        """Add ``entry`` to the tenant's request log (:meth:`list_requests`,
        :meth:`get_usage_entry`) without counting it anywhere: a request refused before its loop
        ran (``entry.response_id`` is a fresh request id). One write."""
        ...

    async def read_usage(self, start: int, end: int) -> list[UsageBucket]:
        """Every counter row of every tenant whose hour starts in ``[start, end)`` (Unix
        seconds), in no particular order. Strongly consistent."""
        ...

    async def get_usage_entry(self, tenant: str, response_id: str) -> UsageEntry | None:
        """The request-log entry recorded for a response, or None."""
        ...

    async def get_usage_entries(self, tenant: str, response_ids: list[str]) -> list[UsageEntry]:
        """The request-log entries of several responses (those that exist, in the order asked,
        without their content), in one bounded read."""
        ...

    async def read_metrics(self, start: int, end: int, *, width: int) -> list[UsageBucket]:
        """Every counter row of every tenant of ``width`` seconds
        (:data:`~responses_gateway.usage.records.HOUR_WIDTH`, the ledger's hour rows, or
        :data:`~responses_gateway.usage.records.FINE_WIDTH`, five-minute rows kept three days)
        whose bucket starts in ``[start, end)``, with their health counters
        (:mod:`responses_gateway.usage.metrics`), in no particular order. Eventually
        consistent (DynamoDB: half the units of :meth:`read_usage`); one bounded read per UTC
        day. Refused requests count in the health counters of these rows only.

        Raises:
            ValueError: more days than the rows of ``width`` allow (62 for hours, 3 for five
                minutes).
        """
        ...

    async def get_spend(self, tenant: str, now: int) -> TenantSpend:
        """The tenant's totals for the UTC day and month holding ``now`` (zeros when none) and
        its own limits, strongly consistent, in one round trip."""
        ...

    async def put_budget(self, tenant: str, limits: BudgetLimits | None) -> None:
        """Set the tenant's own limits (they replace the configured ones); None removes them."""
        ...

    async def get_budget(self, tenant: str) -> BudgetLimits | None:
        """The limits set with :meth:`put_budget`, or None."""
        ...


@dataclass(slots=True)
class StoredPrompt:
    """A prompt template kept in the store: its versions (the bodies as the operator put them:
    ``instructions`` and/or ``input``) and the version used when a request names none."""

    id: str
    versions: dict[str, dict[str, Any]]
    default_version: str | None = None
    """None: the highest version (numbers compare as numbers)."""


class PromptVersionExists(Exception):
    """A prompt version is put a second time (versions never change once written)."""


class PromptStore(Protocol):
    """Operator prompt templates (global: every tenant's requests may name them)."""

    async def put_prompt_version(
        self, prompt_id: str, version: str, body: dict[str, Any], *, make_default: bool
    ) -> None:
        """Add ``version`` to the prompt (creating the prompt), and make it the default when
        ``make_default``.

        Raises:
            PromptVersionExists: the prompt has this version already (nothing changes).
        """
        ...

    async def get_prompt(self, prompt_id: str) -> StoredPrompt | None:
        """Every version of the prompt (strongly consistent), or None when it has none."""
        ...


@dataclass(frozen=True, slots=True)
class DeploymentHealth:
    """The shared health of one model deployment (:mod:`responses_gateway.routing`)."""

    fails: int = 0
    """Failures counted since ``window_start`` (reset when the window passes or a cooldown
    starts)."""
    window_start: float = 0.0
    cooldown_until: float = 0.0
    """Unix seconds until which no instance sends it calls; once passed, one probe call
    decides (half-open)."""
    probe_until: float = 0.0
    """Unix seconds until which an instance's probe call is in flight."""


class HealthStore(Protocol):
    """Deployment health and per-minute counters shared by every gateway instance. Entries
    carry an expiry (DynamoDB TTL) and are ignored once past it, swept or not."""

    async def read_health(self, deployment_ids: list[str]) -> dict[str, DeploymentHealth]:
        """The health entries of these deployments (absent: healthy), in one round trip."""
        ...

    async def record_failure(
        self,
        deployment_id: str,
        *,
        now: float,
        allowed_fails: int,
        window: float,
        cooldown: float,
    ) -> DeploymentHealth:
        """Count one failure; the ``allowed_fails``-th within ``window`` seconds starts a
        cooldown of ``cooldown`` seconds. Returns the entry as it is afterwards."""
        ...

    async def claim_probe(self, deployment_id: str, *, now: float, lease: float) -> bool:
        """Take the half-open probe of a deployment whose cooldown ended: True for exactly one
        caller until ``lease`` seconds pass or the entry is cleared."""
        ...

    async def clear_health(self, deployment_id: str) -> None:
        """Forget the deployment's failures and cooldown (it answered)."""
        ...

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
        """Add to the deployment's counters of ``minute`` (Unix minute). With ``rpm``/``tpm``,
        only while both counts are below them: False (nothing added) once either is reached."""
        ...


@dataclass(slots=True)
class TracePage:
    """One page of a tenant's traces, most recently received first."""

    traces: list[dict[str, Any]]
    """Summaries: ``{"id", "workflow_name", "group_id", "received_ms"}`` and the trace's
    figures: ``spans``, ``errors`` (spans with an ``error``, triggered guardrails), ``tokens``
    (input + output of the spans reporting usage), ``started_at``, ``ended_at`` (ISO 8601, None
    before any span arrived) and ``duration_ms``. The figures add up every span written (a batch
    the exporter sends again counts again)."""
    next_cursor: str | None = None
    """Pass as ``before`` to read the next (older) page; None on the last page."""


class TraceStore(Protocol):
    """Agent traces and spans as the agents SDK's exporter sends them (``{"object": "trace"}``
    and ``{"object": "trace.span"}`` dicts), tenant scoped, kept for the response retention."""

    async def put_traces(
        self, tenant: str, traces: list[dict[str, Any]], spans: list[dict[str, Any]]
    ) -> None:
        """Store exported objects (each trace has an ``id``; each span an ``id`` and a
        ``trace_id``). Writing an object again replaces it. Spans may come before their trace.
        A trace enters the tenant's trace list when its trace object is written (written again:
        listed at the newer time; DynamoDB may keep the older listing too). Spans larger than
        the backend can hold keep their ids, times and ``span_data.type``/``name``/
        ``response_id`` and gain ``span_data.truncated: true``."""
        ...

    async def list_traces(
        self, tenant: str, *, before: str | None = None, limit: int = 50
    ) -> TracePage:
        """One page of the tenant's traces, most recently received first (one bounded read);
        ``before`` is an earlier page's ``next_cursor``."""
        ...

    async def get_trace(
        self, tenant: str, trace_id: str
    ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The trace object (None if only spans arrived, or none) and its spans ordered by
        ``started_at`` then ``id``; ``(None, [])`` when nothing is stored."""
        ...

    async def trace_of_response(self, tenant: str, response_id: str) -> str | None:
        """The id of the trace whose ``response`` span names this response (the latest
        written), or None."""
        ...


class Store(
    ResponseStore,
    ConversationStore,
    BackgroundStore,
    LedgerStore,
    PromptStore,
    HealthStore,
    TraceStore,
    Protocol,
):
    """Everything the gateway persists."""
