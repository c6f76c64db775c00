"""Turning a create request into a ready-to-run loop, with its stored context.

Owns the steps between a parsed JSON body and the agent loop: validation (through
:mod:`responses_gateway.protocol`), the checks for what this gateway version serves, model routing,
adapter selection, the context a request continues (a ``previous_response_id`` chain or a
conversation, read from the store), the tenant's budget (checked before the request starts, and
by the loop before each model call) and how the finished response is persisted (the loop's
``persist`` hook: the record, the conversation append and the usage ledger entry). It knows
nothing about HTTP or SSE framing (that is :mod:`responses_gateway.app`) and runs no loop itself:
callers run the returned :class:`PreparedRun` through :func:`responses_gateway.loop.run_loop`.
The :class:`Gateway` also holds what lives as long as its process: one adapter per provider, the
router, the MCP client and, once its serving loop is named (:meth:`Gateway.keep_shared_mcp`),
the sessions (processes) of the operator's stdio MCP servers marked ``shared``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from responses_gateway.adapters.base import Adapter
from responses_gateway.adapters.latch import PROCESS_LATCH, UpgradeLatch
from responses_gateway.background.launcher import Launcher
from responses_gateway.background.log import LogNotifier
from responses_gateway.background.records import UNFINISHED, current_response
from responses_gateway.config import GatewayConfig, Provider
from responses_gateway.context.meter import ContextMeter
from responses_gateway.context.tokens import TokenCounter
from responses_gateway.context.windows import WindowDirectory
from responses_gateway.errors import (
    GatewayError,
    InvalidRequestError,
    NotFoundError,
    QuotaExceededError,
)
from responses_gateway.ids import new_id
from responses_gateway.loop.compaction import expand_compactions, from_last_compaction
from responses_gateway.loop.events import Sink
from responses_gateway.loop.prepared import (
    CONTROL_ITEM_TYPES,
    check_call_outputs,
    plan_approvals,
    prepare_input,
    reference_ids,
    to_model_items,
)
from responses_gateway.loop.reasoning import open_client_reasoning, restore_reasoning
from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import Finish, LoopState
from responses_gateway.loop.tools import NO_GATEWAY_TOOLS, HostedBackend, ToolRegistry
from responses_gateway.prompts import (
    PromptTemplate,
    ResolvedPrompt,
    resolve_prompt,
    stored_template,
)
from responses_gateway.protocol.contract import (
    ALL_CHECKED_FIELDS,
    RESPONSES_ONLY_FIELDS,
    wire_refusals,
)
from responses_gateway.protocol.resources import NOT_STORED, stored_item
from responses_gateway.store.base import Store, StoredResponse
from responses_gateway.tool_kinds import LOWERED_WIRES, hosted_tools_without_backend, kind_of
from responses_gateway.usage.budget import BudgetGuard
from responses_gateway.usage.ledger import client_ids as client_ids_of, usage_entry
from responses_gateway.usage.requestlog import (
    FirstOutputSink,
    RefusalGate,
    log_refused,
    logged_content,
)

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from responses_gateway.loop.driver import LoopContext
    from responses_gateway.mcp.client import SharedMcpSessions
    from responses_gateway.protocol.request import CreateResponseRequest
    from responses_gateway.sockets.memory import ConnectionMemory
    from responses_gateway.usage.records import UsageEntry

# The create path's heavier modules (the request models, the loop's driver, the adapters) are
# imported where a create first needs them: the buffered function, which serves no create,
# never imports them (the streaming function imports them at init: ``coldstart``).

__all__ = ["Context", "Gateway", "PreparedRun", "previous_not_found"]

_APPENDED_STATUSES = frozenset({"completed", "incomplete"})

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class PreparedRun:
    """A validated request with its initial loop state and live context."""

    state: LoopState
    ctx: LoopContext
    stream: bool
    include_obfuscation: bool
    tenant: str = "local"
    run: dict[str, Any] = field(default_factory=dict)
    """What a worker needs besides the state to continue this loop (a checkpoint's ``run``):
    input items, chain, conversation, MCP tool specs without secrets, stream flags."""
    background: bool = False
    movable: bool = False
    """Whether the loop may continue elsewhere (stored, and no request secrets to carry)."""
    omitted_tools: list[str] = field(default_factory=list)
    """Hosted tool types the model does not see (no backend on its wire; the provider's
    ``hosted_tools`` policy is ``omit``): the ``x-gateway-omitted-tools`` response header."""

    def observe(self, sink: Sink) -> Sink:
        """``sink`` as the loop should get it: the first model output it sees is noted in the
        run's request log (``ttft_ms``)."""
        log = self.run.get("log")
        return FirstOutputSink(sink, log) if isinstance(log, dict) else sink


@dataclass(slots=True)
class Context:
    """What a request continues: earlier items (oldest first) and where they came from."""

    history: list[dict[str, Any]] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)
    conversation_id: str | None = None
    inline_history: bool = False
    """The history is not in the table (a WebSocket connection's unstored response): a stored
    continuation keeps it with its own input items, so it stands on its own."""

    @property
    def item_ids(self) -> frozenset[str]:
        return frozenset(str(item["id"]) for item in self.history if item.get("id"))


class RunMcpSessions:
    """The MCP sessions of one loop run, created on first use (a request without MCP imports
    nothing of it) and closed by the loop when its run ends (:meth:`attach`); ``shared`` gives
    the process's pool of shared stdio servers' sessions (:meth:`Gateway.shared_mcp`), asked for
    on first use too."""

    __slots__ = ("sessions", "shared")

    def __init__(self, shared: Callable[[], SharedMcpSessions | None] | None = None) -> None:
        self.sessions: Any = None
        self.shared = shared

    def get(self) -> Any:
        """The run's :class:`~responses_gateway.mcp.client.McpSessions`."""
        if self.sessions is None:
            from responses_gateway.mcp.client import McpSessions

            self.sessions = McpSessions(self.shared() if self.shared is not None else None)
        return self.sessions

    def attach(self, ctx: LoopContext) -> None:
        """Have ``ctx``'s run close the sessions when it ends (if any were wanted)."""
        if self.sessions is not None:
            ctx.on_close.append(self.sessions.aclose)


def previous_not_found(response_id: str) -> InvalidRequestError:
    """The 400 for a ``previous_response_id`` that is unknown, deleted, expired or unstored."""
    return InvalidRequestError(
        f"Previous response with id '{response_id}' not found.",
        param="previous_response_id",
        code="previous_response_not_found",
    )


def conversation_not_found(conversation_id: str) -> NotFoundError:
    return NotFoundError(
        f"Conversation with id '{conversation_id}' not found.",
        param="conversation",
        code="conversation_not_found",
    )


def _conversation_id(value: Any) -> str | None:
    if isinstance(value, dict):
        return str(value.get("id")) if value.get("id") else None
    if value is not None and not isinstance(value, str):
        value = getattr(value, "id", None)
    return str(value) if value else None


def _carries_secrets(request: CreateResponseRequest) -> bool:
    from responses_gateway.protocol.request import McpTool

    return any(
        isinstance(tool, McpTool) and (tool.headers or tool.authorization)
        for tool in request.tools or []
    )


def _tool_dict(tool: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = tool.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dumped


def _last_compacted(records: list[StoredResponse]) -> int:
    """The index of the last record holding a ``compaction`` item (0 when none does)."""
    for index in range(len(records) - 1, 0, -1):
        record = records[index]
        if any(i.get("type") == "compaction" for i in [*record.input_items, *record.output]):
            return index
    return 0


def _reject_unsupported(request: CreateResponseRequest) -> None:
    if request.background and request.store is False:
        raise InvalidRequestError(
            "Background mode requires the response to be stored: 'store' cannot be false when "
            "'background' is true.",
            param="store",
            code="invalid_value",
        )
    if request.background and _carries_secrets(request):
        raise InvalidRequestError(
            "MCP tools with 'headers' or 'authorization' cannot run in background mode: the "
            "gateway never stores credentials, and a background response runs after this request "
            "ends. Configure the server on the gateway (mcp_servers) and select it by "
            "server_label instead.",
            param="background",
            code="invalid_value",
        )


class Gateway:
    """The per-process service: configuration, store, upstream HTTP client, upgrade latch."""

    def __init__(
        self,
        config: GatewayConfig,
        client: httpx.AsyncClient,
        store: Store,
        latch: UpgradeLatch = PROCESS_LATCH,
        *,
        mcp_policy: Any = None,
        launcher: Launcher | None = None,
        foreground_budget: float | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.store = store
        self.latch = latch
        self.launcher = launcher
        """Starts background runs (Step Functions, or the in-process runner); None: no
        background mode (create with ``background: true`` is then 400)."""
        self.foreground_budget = foreground_budget
        """Seconds a foreground loop may run before it hands over to the background worker
        (None: the invocation's own deadline, when the platform tells one)."""
        self.notifier = LogNotifier()
        self.tokens = TokenCounter(client)
        """Counts model calls' tokens (the upstream's tokenizer where it has one)."""
        self.windows = WindowDirectory(client)
        """Context windows per model (configuration, else the upstream's ``/models``)."""
        self.usage_observers: list[Any] = []
        """Called with each :class:`UsageEntry` the ledger counted (metrics); never raise."""
        self.refusals = RefusalGate()
        """Bounds the request-log records of refused creates this process writes."""
        self._mcp_policy = mcp_policy
        self._mcp_client: Any = None
        self._shared_mcp: SharedMcpSessions | None = None
        self._shared_mcp_loop: asyncio.AbstractEventLoop | None = None
        self._router: Any = None
        self._adapters: dict[int, tuple[Provider, Adapter]] = {}
        """Each provider's adapter, built on its first request (adapters hold only the
        provider's endpoint: nothing of a request or a tenant), by ``id`` of the provider."""

    def keep_shared_mcp(self, loop: asyncio.AbstractEventLoop) -> None:
        """Keep the sessions of operator stdio servers marked ``shared`` open across the runs
        on ``loop``, the loop that serves this gateway for the life of its process (the app's
        lifespan, a Lambda container's loop); :meth:`close_shared_mcp` ends them."""
        self._shared_mcp_loop = loop

    def shared_mcp(self) -> SharedMcpSessions | None:
        """The process's :class:`~responses_gateway.mcp.client.SharedMcpSessions` (built on
        first use), or None when no server is shared or no serving loop was given."""
        if self._shared_mcp_loop is None or not any(s.shared for s in self.config.mcp_servers):
            return None
        if self._shared_mcp is None:
            from responses_gateway.mcp.client import SharedMcpSessions

            self._shared_mcp = SharedMcpSessions(self._shared_mcp_loop)
        return self._shared_mcp

    async def close_shared_mcp(self) -> None:
        """Stop the shared servers' processes; later runs open sessions of their own."""
        pool, self._shared_mcp, self._shared_mcp_loop = self._shared_mcp, None, None
        if pool is not None:
            await pool.aclose()

    def adapter_for(self, provider: Provider) -> Adapter:
        """The adapter speaking to ``provider`` (one per provider per process, as the router
        keeps one per deployment)."""
        entry = self._adapters.get(id(provider))
        if entry is None or entry[0] is not provider:
            from responses_gateway.adapters.select import make_adapter

            entry = self._adapters[id(provider)] = (
                provider,
                make_adapter(provider, self.client, self.latch),
            )
        return entry[1]

    def router_for(self, model: str) -> Any:
        """The process's :class:`~responses_gateway.routing.router.Router` when ``model`` has a
        route (built on first use), else None: a plain model costs nothing more."""
        if model not in self.config.routes:
            return None
        if self._router is None:
            from responses_gateway.routing.router import Router

            self._router = Router(self.config, self.client, self.store, self.latch)
        return self._router

    def _backends(
        self, tools: list[dict[str, Any]], wire: str, sessions: RunMcpSessions
    ) -> dict[str, HostedBackend]:
        """The configured backends of the hosted tools a request over ``wire`` names (only
        function wires need them; the MCP machinery is imported only when one is used)."""
        if wire not in LOWERED_WIRES:
            return {}
        backends: dict[str, HostedBackend] = {}
        for tool in tools:
            kind = kind_of(str(tool.get("type")))
            backend = self.config.tool_backend(kind.name) if kind is not None else None
            server = self.config.mcp_server(backend.server_label) if backend else None
            if kind is None or backend is None or server is None or kind.name in backends:
                continue
            from responses_gateway.gateway_tools import McpBackend
            from responses_gateway.mcp.client import McpClient

            if self._mcp_client is None:
                self._mcp_client = McpClient(self._mcp_policy)
            backends[kind.name] = McpBackend(backend, server, self._mcp_client, sessions.get())
        return backends

    def _gateway_tools(
        self, tools: list[Any], context: list[dict[str, Any]], sessions: RunMcpSessions
    ) -> ToolRegistry:
        """The request's gateway tools; the MCP machinery is imported only when it has some."""
        from responses_gateway.protocol.request import McpTool

        if not any(isinstance(t, McpTool) for t in tools):
            return NO_GATEWAY_TOOLS
        from responses_gateway.gateway_tools import McpToolRegistry
        from responses_gateway.mcp.client import McpClient

        if self._mcp_client is None:
            self._mcp_client = McpClient(self._mcp_policy)
        return McpToolRegistry(
            tools, self._mcp_client, context, self.config.mcp_servers, sessions.get()
        )

    def meter(
        self, provider: Provider, request: dict[str, Any], compaction: dict[str, Any] | None
    ) -> ContextMeter:
        """The context meter of one response to ``provider``."""
        return ContextMeter(
            provider, self.tokens, self.windows, compaction=compaction, request=request
        )

    def live_context(
        self, tenant: str, state: LoopState, run: dict[str, Any], *, persist: Any = None
    ) -> LoopContext:
        """The live context of a loop continued from a checkpoint (``state`` and its ``run``):
        the adapter for its model, its MCP tools (listings already in its output or context are
        reused) and, unless given, the persister of its record."""
        from responses_gateway.loop.driver import LoopContext
        from responses_gateway.protocol.request import parse_create_request

        provider, upstream_model = self.config.route(state.model)
        tools: list[Any] = []
        if run.get("mcp_tools"):
            parsed = parse_create_request({"model": state.model, "tools": run["mcp_tools"]})
            tools = list(parsed.tools or [])
        adapter = self.adapter_for(provider)
        sessions = RunMcpSessions(self.shared_mcp)
        ctx = LoopContext(
            adapter=adapter,
            upstream_model=upstream_model,
            backends=self._backends(list(state.request.get("tools") or []), adapter.wire, sessions),
            tools=self._gateway_tools(tools, [*state.control_items, *state.output], sessions),
            limits=self.config.limits_for(state.model),
            persist=persist if persist is not None else self.persister_for(tenant, run),
            meter=self.meter(provider, state.request, run.get("compaction")),
            tenant=tenant,
            budget=self.budget_guard(tenant),
            router=self.router_for(state.model),
            refused_wires=frozenset(run.get("refused_wires") or ()),
        )
        sessions.attach(ctx)
        log = run.get("log")
        if isinstance(log, dict):  # this invocation's model calls join the earlier ones' in the log
            earlier = log.get("deployment")
            ctx.deployments.extend(
                earlier.split(",") if isinstance(earlier, str) and earlier else earlier or []
            )
            ctx.failed_attempts.extend(log.get("attempts_failed") or [])
            log["deployment"] = ctx.deployments
            log["attempts_failed"] = ctx.failed_attempts
        return ctx

    async def prompt_templates(self, prompt_id: str) -> Mapping[str, PromptTemplate]:
        """The templates a ``prompt`` naming ``prompt_id`` resolves against: the
        configuration's, else (an id it does not define) the one kept in the store."""
        if prompt_id in self.config.prompts:
            return self.config.prompts
        stored = await self.store.get_prompt(prompt_id)
        if stored is None:
            return {}
        return {prompt_id: stored_template(prompt_id, stored.versions, stored.default_version)}

    def budget_guard(self, tenant: str) -> BudgetGuard | None:
        """The tenant's budget guard, or None when the configuration sets no budgets."""
        if self.config.budgets is None:
            return None
        return BudgetGuard(self.store, tenant, self.config.budgets, self.config.prices)

    def _name_answerer(self, entry: UsageEntry) -> None:
        """Make ``entry`` name who answered: a routed response's provider and wire are those of
        the deployment that answered its last model call (the log's first guess is the route's
        first deployment, which may have failed); a plain provider's model calls are named as
        the router names an unrouted model's one deployment (``<provider>/<upstream model>``),
        so the deployment filter and breakdowns see plain providers as they see routes."""
        extra = entry.extra
        raw = extra.get("deployment")
        names = [n for n in (raw.split(",") if isinstance(raw, str) else raw or []) if n]
        if names:
            found = self._deployment(names[-1])
            if found is not None:
                deployment, wire = found
                extra["provider"] = deployment.provider.name
                extra["wire"] = wire
            return
        if entry.counts.model_calls <= 0 or entry.model in self.config.routes:
            return
        try:
            provider, upstream = self.config.route(entry.model)
        except GatewayError:
            return
        extra["deployment"] = ",".join([f"{provider.name}/{upstream}"] * entry.counts.model_calls)

    def _deployment(self, deployment_id: str) -> tuple[Any, str] | None:
        """A routed deployment by id with the wire its adapter speaks, or None."""
        for model, route in self.config.routes.items():
            for deployment in route.deployments:
                if deployment.id == deployment_id:
                    return deployment, self.router_for(model).adapter_of(deployment).wire
        return None

    async def record_usage(
        self, tenant: str, run: dict[str, Any], state: LoopState, *, background: bool
    ) -> None:
        """Add the ended response ``state`` to the usage ledger (idempotent per response id:
        a retried worker or a second ending counts nothing more)."""
        now = time.time()
        entry = usage_entry(
            state,
            tenant=tenant,
            api_key_id=str(run.get("api_key_id") or ""),
            prices=self.config.prices,
            ended_at=int(now),
            background=background,
            log=run.get("log"),
            ended_ms=int(now * 1000),
            http_status=_client_status(run, state, background),
        )
        self._name_answerer(entry)
        if tenant in self.config.log_content:
            entry.content = logged_content(
                list(run.get("input_items") or []), state.output, request=state.request
            )
        try:
            counted = await self.store.record_usage(entry)
        except Exception:  # accounting never fails a response; the log line says what was lost
            _log.exception(
                "could not record the usage of %s (tenant %s, model %s, %d tokens)",
                state.response_id,
                tenant,
                state.model,
                entry.counts.total_tokens,
            )
            return
        if not counted:
            _log.info("usage of %s was already recorded", state.response_id)
            return
        for observe in self.usage_observers:
            try:
                observe(entry)
            except Exception:
                _log.exception("a usage observer failed")

    async def log_refused(
        self,
        *,
        tenant: str,
        request_id: str,
        api_key_id: str,
        body: Any,
        error: GatewayError,
        started_ms: int,
        client_headers: Mapping[str, str] | None = None,
        transport: str = "http",
    ) -> bool:
        """Write the request-log record of a create refused before its loop ran (bounded by
        :attr:`refusals`; see :mod:`responses_gateway.usage.requestlog`). ``body`` is the
        create body as far as it was read (its model and client ids are kept), or None."""
        hint = body if isinstance(body, dict) else {}
        model = hint.get("model")
        client = client_ids_of(
            [
                hint.get("client_metadata"),
                hint.get("metadata"),
                {"safety_identifier": hint.get("safety_identifier")},
            ],
            client_headers or {},
        )
        return await log_refused(
            self.store,
            self.refusals,
            tenant=tenant,
            request_id=request_id,
            api_key_id=api_key_id,
            model=model[:200] if isinstance(model, str) else "",
            status_code=error.status_code,
            error=error.to_error(),
            started_ms=started_ms,
            log={"transport": transport, "client": client},
        )

    def persister_for(self, tenant: str, run: dict[str, Any]) -> Any:
        """The record writer of a run described by a checkpoint's ``run`` (its usage is
        recorded by :func:`~responses_gateway.background.runs.commit_ending`, not here)."""
        context = Context(
            chain=list(run.get("chain") or []), conversation_id=run.get("conversation")
        )
        return self._persister(tenant, list(run.get("input_items") or []), context, True, None)

    async def load_context(
        self,
        tenant: str,
        previous_response_id: str | None,
        conversation: Any,
        memory: ConnectionMemory | None = None,
    ) -> Context:
        """The items a request continues, read with strongly consistent reads.

        A chain is read in a bounded number of round trips: the previous response names all its
        ancestors, which are fetched together. A chain holding a ``compaction`` item starts from
        the response that holds it (the chain stored with the new response too, so a long
        compacted chain is not read again from its start on every turn). Ancestors that expired
        or were deleted drop out of the front of the history; the previous response itself must
        exist. On a WebSocket
        connection (``memory``), the latest response of each of its streams continues from the
        connection's memory, stored or not, without reading the table.
        """
        if previous_response_id and memory is not None:
            latest = await memory.find(previous_response_id)
            if latest is not None:
                if latest.stored:
                    chain = [*latest.chain, latest.response_id]
                    return Context(history=list(latest.history), chain=chain)
                return Context(history=list(latest.history), inline_history=True)
        if previous_response_id:
            previous = await self.store.get_response(tenant, previous_response_id)
            if previous is None:
                raise previous_not_found(previous_response_id)
            if previous.status in UNFINISHED:
                previous.response = await current_response(self.store, previous)
                if previous.status in UNFINISHED:
                    raise InvalidRequestError(
                        f"Previous response with id '{previous_response_id}' is still "
                        f"{previous.status}; wait for it to finish before continuing it.",
                        param="previous_response_id",
                        code="previous_response_in_progress",
                    )
            ancestors = await self.store.get_responses(tenant, previous.chain)
            records = [*ancestors, previous]
            chain = [*previous.chain, previous.id]
            start = _last_compacted(records)
            if start:  # what came before the compaction is summarized: later turns skip it
                records = records[start:]
                chain = [record.id for record in records]
            history: list[dict[str, Any]] = []
            for record in records:
                history += record.input_items
                history += record.output
            return Context(history=history, chain=chain)
        conversation_id = _conversation_id(conversation)
        if conversation_id:
            if await self.store.get_conversation(tenant, conversation_id) is None:
                raise conversation_not_found(conversation_id)
            items = await self.store.all_items(tenant, conversation_id)
            return Context(history=items, conversation_id=conversation_id)
        return Context()

    async def prepare(
        self,
        body: Any,
        tenant: str,
        *,
        api_key_id: str = "",
        client_headers: Mapping[str, str] | None = None,
        memory: ConnectionMemory | None = None,
        stream_id: str = "",
        generate: bool = True,
    ) -> PreparedRun:
        """Validate a create body (raw JSON bytes, parsed, or already validated), load its
        context, check the tenant's budget, build its loop (``generate=False``: a WebSocket
        warm-up, no model call).

        Args:
            body: the create request.
            tenant: who it acts for.
            client_headers: the request's headers, read for the client's ids (request log).
            memory: a WebSocket connection's memory: previous responses are looked up there
                first, and the finished response becomes ``stream_id``'s latest.
            stream_id: the connection's stream the create runs on.
            generate: False prepares the response and ends it at once, ``completed`` with no
                output and no model call (WebSocket mode's warm-up).

        Raises:
            GatewayError: bad input, unknown model, or a context that does not exist.
            QuotaExceededError: the tenant's budget is spent (nothing was sent upstream).
        """
        from responses_gateway.loop.driver import LoopContext, decide_start
        from responses_gateway.protocol.request import (
            CreateResponseRequest,
            McpTool,
            echo_fields,
            parse_create_request,
            request_input,
        )

        started_ms = int(time.time() * 1000)
        request = body if isinstance(body, CreateResponseRequest) else parse_create_request(body)
        _reject_unsupported(request)
        if request.background and self.launcher is None:
            raise InvalidRequestError(
                "Background mode is not configured on this gateway.",
                param="background",
                code="unsupported_parameter",
            )
        provider, upstream_model = self.config.route(request.model)
        raw_input = request_input(request)
        if request.prompt is not None:  # before any model call: unknown ids are a 404 here
            ref = request.prompt.model_dump(mode="json")
            resolved_prompt = resolve_prompt(await self.prompt_templates(str(ref["id"])), ref)
            request = _with_prompt(request, resolved_prompt)
            raw_input = _prompt_input(resolved_prompt, raw_input)
        opened = open_client_reasoning(raw_input, tenant)
        guard = self.budget_guard(tenant)
        reading = self.load_context(
            tenant, request.previous_response_id, request.conversation, memory
        )
        if guard is None:  # one read at most: no tasks to run it beside another
            admitted, context = None, await reading
        else:
            admitted, context = await asyncio.gather(guard.admit(), reading)
        if admitted is not None and admitted.exceeded is not None:
            raise QuotaExceededError(admitted.message())
        context_ids = context.item_ids
        wanted = [i for i in reference_ids(raw_input) if i not in context_ids]
        resolved = await self.store.get_items(tenant, wanted) if wanted else {}
        prepared = prepare_input(raw_input, context_ids=context_ids, resolved=resolved)
        approved = plan_approvals(context.history, prepared.items)
        stored_items = [  # as reads show them
            stored_item(item) for item in prepared.items if item.get("type") not in NOT_STORED
        ]
        adapter = self.adapter_for(provider)
        transcript = expand_compactions(
            to_model_items(
                restore_reasoning(
                    from_last_compaction(context.history) + prepared.items, tenant, opened
                )
            ),
            tenant=tenant,
            wire=adapter.wire,
        )
        check_call_outputs(transcript)  # on every wire, before the upstream sees it
        compaction = next(
            (
                entry.model_dump(mode="json", exclude_none=True)
                for entry in request.context_management or []
                if entry.type == "compaction"
            ),
            None,
        )
        if generate and not context.history and not prepared.upstream_input:
            raise InvalidRequestError(
                "Missing required parameter: 'input'.",
                param="input",
                code="missing_required_parameter",
            )
        state = LoopState(
            response_id=new_id("resp"),
            created_at=int(time.time()),
            model=request.model,
            request=echo_fields(request),
            include=list(request.include or []),
            passthrough=request.model_dump(
                mode="json", include=set(RESPONSES_ONLY_FIELDS), exclude_none=True
            ),
            upstream_input=transcript,
            control_items=[i for i in context.history if i.get("type") in CONTROL_ITEM_TYPES]
            + prepared.control_items,
            next_action=decide_start(approved, transcript) if generate else Finish("completed"),
        )
        log = {
            "provider": provider.name,
            "wire": adapter.wire,
            "stored": request.store is not False,
            "stream": bool(request.stream),
            "client": client_ids_of(
                [
                    (request.model_extra or {}).get("client_metadata"),
                    request.metadata,
                    {"safety_identifier": request.safety_identifier},  # the contract's row
                ],
                client_headers or {},
            ),
            "transport": "http" if memory is None else "websocket",
            "deployment": "",  # the deployments that answered: the loop's list, set below
            "started_ms": started_ms,
        }
        ledger: dict[str, Any] = {
            "api_key_id": api_key_id,
            "log": log,
            "input_items": stored_items,
        }
        tool_dicts = [_tool_dict(tool) for tool in request.tools or []]
        sessions = RunMcpSessions(self.shared_mcp)
        backends = self._backends(tool_dicts, adapter.wire, sessions)
        omitted = hosted_tools_without_backend(
            tool_dicts, adapter.wire, provider.hosted_tools, frozenset(backends)
        )
        refusals = wire_refusals(
            request.model_dump(mode="json", exclude_unset=True, include=set(ALL_CHECKED_FIELDS))
        )
        if adapter.wire in refusals:  # a field the wire refuses (or a value of it): a 400
            raise refusals[adapter.wire]
        if omitted:
            logger.info(
                "omitting hosted tools %s for model %s (provider %s has no backend for them)",
                ",".join(omitted),
                request.model,
                provider.name,
            )
        ctx = LoopContext(
            adapter=adapter,
            upstream_model=upstream_model,
            backends=backends,
            tools=self._gateway_tools(
                list(request.tools or []), [*context.history, *prepared.items], sessions
            ),
            limits=self.config.limits_for(request.model),
            persist=self._persister(
                tenant,
                stored_items,
                context,
                request.store is not False,
                ledger,
                remember=_rememberer(memory, stream_id, context, prepared.items, request),
            ),
            budget=guard,
            tenant=tenant,
            router=self.router_for(request.model),
            refused_wires=frozenset(refusals),
        )
        sessions.attach(ctx)
        ctx.meter = self.meter(provider, state.request, compaction)
        log["deployment"] = ctx.deployments  # filled as routed model calls are answered
        log["attempts_failed"] = ctx.failed_attempts  # and as attempts fail
        ledger["ctx"] = ctx  # the failure's HTTP status, for the request log
        options = request.stream_options
        include_obfuscation = bool(options and options.include_obfuscation)
        run = {
            "api_key_id": api_key_id,
            "input_items": stored_items,
            "chain": context.chain,
            "conversation": context.conversation_id,
            "mcp_tools": [
                tool.model_dump(
                    mode="json",
                    by_alias=True,
                    exclude_unset=True,
                    exclude={"headers", "authorization"},
                )
                for tool in request.tools or []
                if isinstance(tool, McpTool)
            ],
            "stream": bool(request.stream),
            "include_obfuscation": include_obfuscation,
            "generation": 0,
            "compaction": compaction,
            "log": log,
            "refused_wires": sorted(refusals),  # a continued run's router skips them too
        }
        return PreparedRun(
            state=state,
            ctx=ctx,
            stream=bool(request.stream),
            include_obfuscation=include_obfuscation,
            tenant=tenant,
            run=run,
            background=bool(request.background),
            movable=request.store is not False
            and not _carries_secrets(request)
            and self.launcher is not None,
            omitted_tools=omitted,
        )

    async def record_started(self, run: PreparedRun) -> None:
        """Write a stored foreground response's record as ``in_progress`` before its loop
        runs, so ``GET`` (and a ``previous_response_id`` continuation, refused while it runs)
        sees it at once; its ending overwrites it. One extra write per such create."""
        if run.state.request.get("store") is False:
            return
        await self.store.put_response(
            StoredResponse(
                tenant=run.tenant,
                id=run.state.response_id,
                response=render_response(run.state),
                input_items=list(run.run.get("input_items") or []),
                chain=list(run.run.get("chain") or []),
                conversation_id=run.run.get("conversation"),
            )
        )

    def _persister(
        self,
        tenant: str,
        input_items: list[dict[str, Any]],
        context: Context,
        store: bool,
        run: dict[str, Any] | None,
        remember: Any = None,
    ) -> Any:
        """The ending writer: the record, the conversation append and (``run`` not None: a
        foreground loop, ``{"api_key_id", "log", "input_items"}``) the usage ledger and
        request-log entry, written in parallel with the record; on a
        WebSocket connection (``remember``), the response becomes its stream's latest."""
        stored_input = [*context.history, *input_items] if context.inline_history else input_items

        async def persist(state: LoopState, response: dict[str, Any]) -> None:
            # The turn goes into the conversation first, keyed by the response: a finished
            # record then always implies its append, and whoever completes an ending that
            # died in between repeats the append harmlessly (store/DESIGN.md).
            if context.conversation_id and state.status in _APPENDED_STATUSES:
                await self.store.append_items(
                    tenant,
                    context.conversation_id,
                    [*input_items, *state.output],
                    once_key=state.response_id,
                )
            if run is None:
                await write(state, response)
                return
            if not store and remember is None:  # nothing to write beside the ledger entry
                await self.record_usage(tenant, run, state, background=False)
                return
            await asyncio.gather(
                write(state, response),
                self.record_usage(tenant, run, state, background=False),
            )

        async def write(state: LoopState, response: dict[str, Any]) -> None:
            if store:
                await self.store.put_response(
                    StoredResponse(
                        tenant=tenant,
                        id=state.response_id,
                        response=response,
                        input_items=stored_input,
                        chain=context.chain,
                        conversation_id=context.conversation_id,
                    )
                )
            if remember is not None:
                await remember(state)

        return persist


def _client_status(run: dict[str, Any], state: LoopState, background: bool) -> int | None:
    """The HTTP status the client of a failed foreground response got: the failure's (a
    buffered answer, or a stream that had sent no output item yet), else 200 (the stream
    carried ``response.failed``); None for other endings and background runs."""
    failure = getattr(run.get("ctx"), "failure", None)
    if background or failure is None or state.status != "failed":
        return None
    streamed = bool((run.get("log") or {}).get("stream")) and bool(state.output)
    return 200 if streamed else int(failure.status_code)


def _rememberer(
    memory: ConnectionMemory | None,
    stream_id: str,
    context: Context,
    input_items: list[dict[str, Any]],
    request: CreateResponseRequest,
) -> Any:
    """What makes a finished response its stream's latest on a WebSocket connection (before
    its terminal event is sent, so the client can continue it at once); None over HTTP."""
    if memory is None:
        return None
    from responses_gateway.sockets.memory import Latest

    stored = request.store is not False

    async def remember(state: LoopState) -> None:
        await memory.remember(
            stream_id,
            Latest(
                response_id=state.response_id,
                history=[*context.history, *input_items, *state.output],
                chain=context.chain if stored else [],
                stored=stored,
            ),
        )

    return remember


def _with_prompt(request: CreateResponseRequest, resolved: ResolvedPrompt) -> CreateResponseRequest:
    """The request with the template's instructions (the request's own win) and the resolved
    ``prompt`` echo (id, the version used, the variables)."""
    from responses_gateway.protocol.request import PromptRef

    update: dict[str, Any] = {"prompt": PromptRef.model_validate(resolved.echo)}
    if request.instructions is None and resolved.instructions is not None:
        update["instructions"] = resolved.instructions
    return request.model_copy(update=update)


def _prompt_input(
    resolved: ResolvedPrompt, raw_input: str | list[dict[str, Any]] | None
) -> str | list[dict[str, Any]] | None:
    """The template's messages, then the request's own input."""
    if not resolved.input:
        return raw_input
    if raw_input is None:
        return list(resolved.input)
    if isinstance(raw_input, str):
        raw_input = [{"type": "message", "role": "user", "content": raw_input}]
    return [*resolved.input, *raw_input]
