"""Providers and model routing.

Owns the gateway's configuration: which upstream providers exist, how to reach them and which
model names go to which provider. Two sources, read once at startup:

- one provider from environment variables (``UPSTREAM_BASE_URL``, ``UPSTREAM_API_KEY``,
  ``UPSTREAM_API``), which takes every model name, and a Bedrock provider for the model ids in
  ``BEDROCK_MODELS`` (signed with the runtime's own AWS credentials, in ``AWS_REGION``);
- several providers from a TOML or JSON file named by ``GATEWAY_CONFIG``, each with exact
  ``models`` and/or ``prefixes`` (``strip_prefix`` removes the matched prefix before the name is
  sent upstream) and at most one ``default`` catch-all.

An upstream key is held only in :class:`Provider` (excluded from its ``repr``) and read from the
file or from the environment variable the file names (``api_key_env``). Nothing here logs.

``routes`` give a model name several deployments (providers and upstream names, weights,
limits), fallbacks and retry bounds (:mod:`responses_gateway.routing.deployments`); a routed name
wins over the providers' ``models``.

The same file may also list **operator MCP servers** (``mcp_servers``): servers the gateway
trusts, which a request selects by ``server_label`` alone (see ``docs/mcp.md``). Each has exactly
one of ``url`` (a remote server over streamable HTTP or SSE) or ``command`` (a stdio server the
gateway spawns). Their secrets (``headers``, ``headers_env``, ``env``, ``env_from``) are resolved
here, at startup, and kept out of every ``repr``; every mistake is a :class:`ConfigError`.

``tool_backends`` give a hosted tool type (``web_search``, ``file_search``, ``code_interpreter``,
``image_generation``) a backend on Chat Completions and
harmony providers: a tool of an operator MCP server the gateway calls (see ``docs/tools.md``).
It also holds the accounting settings (see ``docs/deploy.md``): ``prices`` (US dollars per
million tokens per model, for the usage ledger's cost estimate), ``budgets`` (token and cost
limits per tenant per day and month; ``GATEWAY_ENFORCE_BUDGETS=1`` enforces the limits set per
tenant in the store without the table), ``operators`` (tenants whose keys may read the usage
API) and ``request_log.content_tenants`` (tenants whose request log keeps the requests' input
and output items; none by default). Errors name the field (``prices.gpt-4o.output must be a
number``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from responses_gateway.config_keys import unknown_key_message
from responses_gateway.errors import NotFoundError
from responses_gateway.loop.limits import DEFAULT_LIMITS, LIMIT_KEYS, LoopLimits, parse_loop_limits
from responses_gateway.prompts import PromptConfigError, PromptTemplate, parse_prompts
from responses_gateway.routing.deployments import ModelRoute, RouteError, parse_routes
from responses_gateway.tool_kinds import BACKED_KINDS
from responses_gateway.usage.budget import BudgetError, BudgetPolicy, parse_budgets
from responses_gateway.usage.pricing import PriceError, PriceTable, parse_prices

__all__ = [
    "BEDROCK_MODELS_ENV",
    "bedrock_endpoint",
    "ApiMode",
    "ConfigError",
    "ENFORCE_BUDGETS_ENV",
    "PROVIDER_FIELDS",
    "PROVIDER_KEYS",
    "TOP_LEVEL_KEYS",
    "GatewayConfig",
    "LOG_CONTENT_ENV",
    "OPERATORS_ENV",
    "McpServerTransport",
    "OperatorMcpServer",
    "Provider",
    "ToolBackend",
    "load_config",
    "parse_config",
    "config_document",
    "parse_config_data",
    "parse_config_text",
]

ApiMode = Literal["auto", "chat", "responses", "harmony", "bedrock"]
_API_MODES: tuple[str, ...] = ("auto", "chat", "responses", "harmony", "bedrock")


class ConfigError(ValueError):
    """The configuration is invalid; raised at startup, never per request."""


@dataclass(frozen=True, slots=True)
class Provider:
    """One upstream model provider."""

    name: str
    base_url: str
    """Base URL including the API version path, e.g. ``https://api.openai.com/v1``."""
    api_key: str | None = field(default=None, repr=False)
    api: ApiMode = "auto"
    models: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    strip_prefix: bool = False
    default: bool = False
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = 600.0
    """Seconds to wait for upstream bytes (read timeout)."""
    hosted_tools: Literal["omit", "reject"] = "omit"
    """What a Chat Completions or harmony provider does with a hosted tool (``web_search``,
    ``file_search``...) it cannot run: drop it from what the model sees (named in the
    ``x-gateway-omitted-tools`` response header), or answer 400 naming the tool."""
    context_window: int | None = None
    """The context window (tokens) of every model of this provider, when the operator knows it."""
    context_windows: Mapping[str, int] = field(default_factory=dict)
    """Context windows of single models (upstream names); they win over ``context_window``.
    Models with neither are looked up in the upstream's ``/models`` (see
    :mod:`responses_gateway.context.windows`)."""
    send_reasoning_content: bool = False
    """Chat wire: replay reasoning as ``reasoning_content`` on assistant messages (servers whose
    templates render it: vLLM, SGLang, llama.cpp with reasoning parsers)."""
    send_verbosity: bool = False
    """Chat wire: send ``text.verbosity`` as ``verbosity`` (servers that accept it)."""
    streaming: Literal["auto", "on", "off"] = "auto"
    """Chat and harmony wires: how model calls are asked for. ``auto`` streams, and serves an
    upstream that cannot stream a request (a 2xx answer without a single event, or JSON) from
    the same request sent unstreamed; ``off`` always calls unstreamed; ``on`` never falls back
    (see :mod:`responses_gateway.adapters.wire`)."""
    limits: LoopLimits = DEFAULT_LIMITS
    """The caps of each response's loop on this provider: model calls, gateway tool calls,
    wall time (``max_model_calls``, ``max_tool_calls``, ``max_loop_seconds``)."""
    key_reference: str | None = None
    """Where a deployed function reads this provider's key (``api_key_parameter /name`` or
    ``api_key_secret name``), when the document names one and nothing resolved it: ``serve``
    then calls the provider without a key, and says so."""
    # -- Amazon Bedrock (docs/bedrock.md) ------------------------------------------------------
    aws_region: str | None = None
    """The AWS region requests are signed for (``api = "bedrock"``, ``aws_sigv4``); default: the
    region in ``base_url``'s host, else ``AWS_REGION``."""
    aws_sigv4: bool = False
    """Sign every call with SigV4 and the runtime's own credentials (always on for ``bedrock``
    unless an ``api_key`` is set; on the chat and responses wires for Bedrock's OpenAI-compatible
    endpoints)."""
    aws_service: str = "bedrock"
    """The SigV4 signing name (``bedrock`` for Bedrock's runtime endpoint and its
    OpenAI-compatible ``/openai/v1``; another endpoint may sign under its own)."""
    additional_model_request_fields: Mapping[str, Any] = field(default_factory=dict)
    """Bedrock wire: sent as ``additionalModelRequestFields`` (model-specific fields such as a
    thinking budget)."""
    cache_points: bool = False
    """Bedrock wire: mark the prompt for Bedrock's prompt cache (system, tools, transcript)."""

    @property
    def catch_all(self) -> bool:
        return self.default or (not self.models and not self.prefixes)


McpServerTransport = Literal["stdio", "streamable_http", "sse", "auto"]
"""How the gateway reaches an operator MCP server: ``stdio`` for ``command`` servers; for ``url``
servers ``auto`` (SSE when the path ends in ``/sse``, else streamable HTTP) or a pinned one."""


@dataclass(frozen=True, slots=True)
class OperatorMcpServer:
    """An MCP server the operator configured; a request selects it by ``server_label``.

    Exactly one of ``url`` and ``command`` is set. ``headers`` (``headers_env`` already resolved)
    and ``env`` (``env_from`` already resolved) may hold secrets; ``args`` may too. None of them
    appears in the ``repr``, and the URL appears there without path, query or userinfo.
    """

    server_label: str
    transport: McpServerTransport
    url: str | None = field(default=None, repr=False)
    """A remote server's endpoint (``http``/``https``); ``None`` for a stdio server."""
    command: str | None = None
    """A stdio server's executable; ``None`` for a remote server."""
    args: tuple[str, ...] = field(default=(), repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra environment variables of a stdio server's process (the rest is minimal)."""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    """HTTP headers sent to a remote server (its credentials, typically)."""
    shared: bool = False
    """A stdio server the operator declared shareable: one process per gateway process, kept
    while the process lives and used by every run of every tenant, instead of one per run."""

    def __repr__(self) -> str:
        where = (
            f"command={self.command!r}"
            if self.command is not None
            else f"url={_origin(self.url)!r}"
        )
        return (
            f"OperatorMcpServer(server_label={self.server_label!r}, "
            f"transport={self.transport!r}, {where}{', shared=True' if self.shared else ''})"
        )


BACKED_TOOL_TYPES = tuple(BACKED_KINDS)
"""Hosted tool kinds an operator may give a backend (``web_search``, ``file_search``,
``code_interpreter``, ``image_generation``: the tool-kind table says how each is called)."""


@dataclass(frozen=True, slots=True)
class ToolBackend:
    """A hosted tool kind run by the gateway through a tool of an operator MCP server."""

    type: str
    """The hosted tool kind (``web_search`` serves every ``web_search*`` tool type)."""
    server_label: str
    """An operator MCP server (``mcp_servers``)."""
    tool: str
    """The tool's name on that server."""
    argument: str | None = None
    """The tool argument receiving the call's query, code or prompt (None: the kind's default:
    ``query`` for the searches, ``code``, ``prompt``)."""


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The providers, and how a request's ``model`` picks one; the operator's MCP servers."""

    providers: tuple[Provider, ...]
    mcp_servers: tuple[OperatorMcpServer, ...] = ()
    """MCP servers requests may select by ``server_label`` (with no ``server_url``)."""
    tool_backends: tuple[ToolBackend, ...] = ()
    """Hosted tool kinds the gateway runs itself on chat and harmony providers."""

    def tool_backend(self, kind: str) -> ToolBackend | None:
        """The backend of a hosted tool kind, or ``None``."""
        for backend in self.tool_backends:
            if backend.type == kind:
                return backend
        return None

    prices: PriceTable = field(default_factory=PriceTable)
    """Per-model prices: the usage ledger's cost estimate (unpriced models cost 0)."""
    budgets: BudgetPolicy | None = None
    """Per-tenant limits; None: no budget checks (not even of limits set in the store)."""
    operators: frozenset[str] = frozenset()
    """Tenants whose API keys may use the operator endpoints (the usage API)."""
    log_content: frozenset[str] = frozenset()
    """Tenants whose request-log records keep the request's input and the response's output
    items (``request_log.content_tenants``; bounded, expiring with the record)."""
    prompts: Mapping[str, PromptTemplate] = field(default_factory=dict)
    """Prompt templates requests name in ``prompt`` (:mod:`responses_gateway.prompts`)."""
    routes: Mapping[str, ModelRoute] = field(default_factory=dict)
    """Model names served by several deployments, with retries and fallbacks
    (:mod:`responses_gateway.routing`); they win over the providers' own ``models``."""

    def mcp_server(self, server_label: str) -> OperatorMcpServer | None:
        """The operator MCP server labelled ``server_label``, or ``None``."""
        for server in self.mcp_servers:
            if server.server_label == server_label:
                return server
        return None

    def limits_for(self, model: str) -> LoopLimits:
        """The loop caps of a response to ``model``: its route's, else its provider's.

        Raises:
            NotFoundError: no provider serves ``model``.
        """
        routed = self.routes.get(model)
        if routed is not None and routed.limits is not None:
            return routed.limits
        return self.route(model)[0].limits

    def route(self, model: str) -> tuple[Provider, str]:
        """The provider for ``model`` and the model name to send it.

        Routes win (their first deployment), then exact names, then the longest matching
        prefix, then the catch-all provider.

        Raises:
            NotFoundError: no provider serves ``model`` (404 ``model_not_found``).
        """
        routed = self.routes.get(model)
        if routed is not None:
            first = routed.deployments[0]
            return first.provider, first.upstream_model
        for provider in self.providers:
            if model in provider.models:
                return provider, model
        best: tuple[int, Provider, str] | None = None
        for provider in self.providers:
            for prefix in provider.prefixes:
                if model.startswith(prefix) and (best is None or len(prefix) > best[0]):
                    upstream = model[len(prefix) :] if provider.strip_prefix else model
                    best = (len(prefix), provider, upstream)
        if best is not None:
            return best[1], best[2]
        for provider in self.providers:
            if provider.catch_all:
                return provider, model
        raise NotFoundError(
            f"The model `{model}` does not exist or you do not have access to it.",
            param="model",
            code="model_not_found",
        )


# ------------------------------------------------------------------------------------ providers
#
# One table, PROVIDER_FIELDS: a provider key, and how its value becomes the Provider field of the
# same name. A new provider key is one line here (and the Provider field it fills). Keys that do
# not map to one field of their own are in _PROVIDER_OTHER_KEYS.

_FieldParser = Callable[[Any, str], Any]
"""``(value, where) -> the Provider field's value``; raises :class:`ConfigError`."""


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(value)


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false")
    return value


def _choice(*choices: str) -> _FieldParser:
    def parse(value: Any, where: str) -> Any:
        if value not in choices:
            quoted = [repr(c) for c in choices]
            listed = f"{', '.join(quoted[:-1])} or {quoted[-1]}"
            raise ConfigError(f"{where} must be {listed}, got {value!r}")
        return value

    return parse


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{where} must be a positive number of seconds, got {value!r}")
    return float(value)


def _window(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where} must be a positive integer (tokens), got {value!r}")
    return value


def _windows(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a table of models and token counts")
    return {str(model): _window(size, f"{where}.{model}") for model, size in value.items()}


def _headers(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{where} must be a table of strings")
    return {str(k): v for k, v in value.items()}


def _base_url(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise ConfigError(f"{where} must be an http(s) URL")
    return value.rstrip("/")


def _api(value: Any, where: str) -> ApiMode:
    mode = _choice(*_API_MODES)(value, where)
    if mode == "harmony" and importlib.util.find_spec("openai_harmony") is None:
        raise ConfigError(
            f"{where} 'harmony' needs the openai-harmony package: "
            "pip install 'responses-gateway[harmony]' (on Lambda: HARMONY=1 sam build)"
        )
    return cast(ApiMode, mode)


PROVIDER_FIELDS: dict[str, _FieldParser] = {
    "base_url": _base_url,
    "api": _api,
    "models": _strings,
    "prefixes": _strings,
    "strip_prefix": _bool,
    "default": _bool,
    "headers": _headers,
    "timeout": _seconds,
    "hosted_tools": _choice("omit", "reject"),
    "context_window": _window,
    "context_windows": _windows,
    "send_reasoning_content": _bool,
    "send_verbosity": _bool,
    "streaming": _choice("auto", "on", "off"),
}
"""Provider keys that set the :class:`Provider` field of the same name, and their parsers."""

_DEPLOYED_KEY_SOURCES = ("api_key_parameter", "api_key_secret")
"""Provider keys the deployed functions resolve into ``api_key`` before parsing (SSM, Secrets
Manager). Elsewhere (``serve`` does not call AWS for a key) they are checked and kept as the
provider's :attr:`Provider.key_reference`."""

_AWS_KEYS = (
    "aws_region",
    "aws_sigv4",
    "aws_service",
    "additional_model_request_fields",
    "cache_points",
)
"""The provider keys of Amazon Bedrock and SigV4 signing (``docs/bedrock.md``), checked together
by :func:`_aws` (a bedrock provider's region and signing depend on each other)."""

_PROVIDER_OTHER_KEYS = frozenset({"name", "api_key", "api_key_env", *LIMIT_KEYS, *_AWS_KEYS})
"""Provider keys handled outside :data:`PROVIDER_FIELDS`: the name, the key, the loop caps and
the AWS keys."""

PROVIDER_KEYS = frozenset({*PROVIDER_FIELDS, *_PROVIDER_OTHER_KEYS, *_DEPLOYED_KEY_SOURCES})
"""Every key a ``[[providers]]`` entry may have."""


def _provider_key(raw: Mapping[str, Any], env: Mapping[str, str], where: str) -> str | None:
    key, key_env = raw.get("api_key"), raw.get("api_key_env")
    named = [k for k in ("api_key", "api_key_env", *_DEPLOYED_KEY_SOURCES) if k in raw]
    if len(named) > 1:
        raise ConfigError(f"{where}: give one of {', '.join(named)}, not several")
    if key_env is not None:
        if not isinstance(key_env, str) or not key_env:
            raise ConfigError(f"{where}.api_key_env must be the name of an environment variable")
        key = env.get(key_env)
        if not key:
            raise ConfigError(
                f"{where}.api_key_env names the environment variable {key_env!r}, which is not set"
            )
    if key is not None and not isinstance(key, str):
        raise ConfigError(f"{where}.api_key must be a string")
    return key or None


def _key_reference(raw: Mapping[str, Any], where: str) -> str | None:
    for name in _DEPLOYED_KEY_SOURCES:
        if name in raw:
            value = raw[name]
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}.{name} must be a non-empty string")
            return f"{name} {value}"
    return None


def _provider(raw: Any, env: Mapping[str, str], index: int) -> Provider:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"providers[{index}] must be a table")
    name = raw.get("name", f"provider{index}")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"providers[{index}].name must be a non-empty string")
    where = f"provider {name!r}"
    message = unknown_key_message(where, raw, PROVIDER_KEYS)
    if message is not None:
        raise ConfigError(message)
    fields = {
        key: parse(raw[key], f"{where}.{key}")
        for key, parse in PROVIDER_FIELDS.items()
        if key in raw
    }
    aws = _aws(raw, env, where, fields.get("api", "auto"))
    if "base_url" not in fields:
        if fields.get("api") != "bedrock":
            raise ConfigError(f"{where}: base_url is required (an http(s) URL)")
        fields["base_url"] = bedrock_endpoint(aws["aws_region"])
    return Provider(
        name=name,
        api_key=_provider_key(raw, env, where),
        key_reference=_key_reference(raw, where),
        limits=_limits(raw, where, DEFAULT_LIMITS),
        **fields,
        **aws,
    )


_REGION_HOST = re.compile(r"^bedrock[a-z-]*\.([a-z]{2}(?:-[a-z]+)+-\d+)\.")


def bedrock_endpoint(region: str) -> str:
    """Bedrock's runtime endpoint in ``region`` (a ``bedrock`` provider's default base URL)."""
    return f"https://bedrock-runtime.{region}.amazonaws.com"


def _region_of(base_url: str) -> str | None:
    """The region in a Bedrock endpoint's host (``bedrock-runtime.us-east-1.amazonaws.com``)."""
    match = _REGION_HOST.match(urlsplit(base_url).hostname or "")
    return match.group(1) if match else None


def _aws(raw: Mapping[str, Any], env: Mapping[str, str], where: str, api: Any) -> dict[str, Any]:
    """The Bedrock keys of a provider (region, signing, extra model fields), checked."""
    region = raw.get("aws_region")
    if region is not None and (not isinstance(region, str) or not region):
        raise ConfigError(f"{where}.aws_region must be a region name")
    sigv4 = _bool(raw.get("aws_sigv4", False), f"{where}.aws_sigv4")
    base_url = raw.get("base_url")
    if api == "bedrock":
        sigv4 = not (raw.get("api_key") or raw.get("api_key_env"))
        region = region or (_region_of(base_url) if isinstance(base_url, str) else None)
        region = region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not region:
            raise ConfigError(f"{where}: api 'bedrock' needs aws_region (or AWS_REGION)")
    elif sigv4:
        region = region or (_region_of(base_url) if isinstance(base_url, str) else None)
        region = region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if not region:
            raise ConfigError(f"{where}: aws_sigv4 needs aws_region (or AWS_REGION)")
    service = raw.get("aws_service", "bedrock")
    if not isinstance(service, str) or not re.fullmatch(r"[a-z0-9-]{1,64}", service):
        raise ConfigError(f"{where}.aws_service must be a signing name (bedrock)")
    fields = raw.get("additional_model_request_fields")
    if fields is not None and (api != "bedrock" or not isinstance(fields, dict)):
        raise ConfigError(
            f"{where}.additional_model_request_fields must be a table, on a bedrock provider"
        )
    cache_points = _bool(raw.get("cache_points", False), f"{where}.cache_points")
    if cache_points and api != "bedrock":
        raise ConfigError(f"{where}.cache_points is a bedrock provider's setting")
    return {
        "aws_region": region,
        "aws_sigv4": sigv4,
        "aws_service": service,
        "cache_points": cache_points,
        "additional_model_request_fields": dict(fields or {}),
    }


def _limits(raw: Mapping[str, Any], where: str, base: LoopLimits) -> LoopLimits:
    try:
        return parse_loop_limits(raw, where, base)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


TOP_LEVEL_KEYS = frozenset(
    {
        "providers",
        "routes",
        "mcp_servers",
        "tool_backends",
        "prices",
        "budgets",
        "operators",
        "request_log",
        "prompts",
    }
)
"""The tables and lists a configuration file may have."""


def parse_config(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> GatewayConfig:
    """Build a config from a parsed file: ``{"providers": [{...}, ...], "mcp_servers": [...]}``.

    ``mcp_servers`` is optional; see :class:`OperatorMcpServer`.

    Raises:
        ConfigError: the file breaks a rule (the message names the entry, never a secret).
    """
    env = os.environ if env is None else env
    message = unknown_key_message("top level", data, TOP_LEVEL_KEYS)
    if message is not None:
        raise ConfigError(message)
    raw_providers = data.get("providers")
    if not isinstance(raw_providers, list) or not raw_providers:
        raise ConfigError("the config needs a non-empty 'providers' list")
    providers = tuple(_provider(p, env, i) for i, p in enumerate(raw_providers))
    names = [p.name for p in providers]
    if len(set(names)) != len(names):
        raise ConfigError("provider names must be unique")
    if sum(1 for p in providers if p.default) > 1:
        raise ConfigError("at most one provider may be the default")
    servers = _mcp_servers(data.get("mcp_servers"), env)
    try:
        prices = parse_prices(data.get("prices"))
        budgets = parse_budgets(data.get("budgets"))
        if budgets is None and _enforce_budgets(env):
            budgets = BudgetPolicy()  # no default limits: each tenant's own, set in the store
        prompts = parse_prompts(data.get("prompts"))
    except (PriceError, BudgetError, PromptConfigError) as exc:
        raise ConfigError(str(exc)) from None
    try:
        routes = parse_routes(data.get("routes"), {p.name: p for p in providers}, env)
    except RouteError as exc:
        raise ConfigError(str(exc)) from None
    config = GatewayConfig(
        providers,
        servers,
        _tool_backends(data.get("tool_backends"), servers),
        prices=prices,
        budgets=budgets,
        operators=_operators(data.get("operators"), env),
        log_content=_log_content(data.get("request_log"), env),
        prompts=prompts,
        routes=routes,
    )
    for route in routes.values():
        for other in (*route.fallbacks, route.context_window_fallback):
            if other is None:
                continue
            try:
                config.route(other)
            except NotFoundError:
                raise ConfigError(
                    f"route {route.model!r}: fallback model {other!r} is served by no provider"
                ) from None
    return config


def _tool_backends(raw: Any, servers: tuple[OperatorMcpServer, ...]) -> tuple[ToolBackend, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(entry, dict) for entry in raw):
        raise ConfigError("tool_backends must be a list of tables")
    backends: list[ToolBackend] = []
    labels = {server.server_label for server in servers}
    for index, entry in enumerate(raw):
        name = f"tool_backends[{index}]"
        message = unknown_key_message(name, entry, ("type", "server_label", "tool", "argument"))
        if message is not None:
            raise ConfigError(message)
        kind = entry.get("type")
        if kind not in BACKED_TOOL_TYPES:
            raise ConfigError(f"{name}: type must be one of {', '.join(BACKED_TOOL_TYPES)}")
        if entry.get("server_label") not in labels:
            raise ConfigError(f"{name}: server_label must name one of the mcp_servers")
        for key in ("tool", "argument"):
            if not isinstance(entry.get(key, "-"), str) or not entry.get(key, "-"):
                raise ConfigError(f"{name}: {key} must be a non-empty string")
        if any(b.type == kind for b in backends):
            raise ConfigError(f"{name}: a backend for {kind!r} is already configured")
        backends.append(
            ToolBackend(
                str(kind),
                str(entry["server_label"]),
                str(entry["tool"]),
                entry.get("argument"),
            )
        )
    return tuple(backends)


OPERATORS_ENV = "GATEWAY_OPERATOR_TENANTS"
"""Tenants (comma separated) whose keys may use the operator endpoints, besides ``operators``."""


def _operators(raw: Any, env: Mapping[str, str]) -> frozenset[str]:
    if raw is None:
        raw = []
    if not isinstance(raw, list) or not all(isinstance(t, str) and t for t in raw):
        raise ConfigError("operators must be a list of tenant names")
    extra = [t.strip() for t in env.get(OPERATORS_ENV, "").split(",") if t.strip()]
    return frozenset([*raw, *extra])


ENFORCE_BUDGETS_ENV = "GATEWAY_ENFORCE_BUDGETS"
"""``1``/``true``: enforce budgets (the limits operators set per tenant, in the console or with
``responses-gateway budget``) even when the configuration has no ``budgets`` table."""


def _enforce_budgets(env: Mapping[str, str]) -> bool:
    return env.get(ENFORCE_BUDGETS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


LOG_CONTENT_ENV = "GATEWAY_LOG_CONTENT_TENANTS"
"""Tenants (comma separated) whose request content is logged, besides
``request_log.content_tenants``."""


def _log_content(raw: Any, env: Mapping[str, str]) -> frozenset[str]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("request_log must be a table")
    message = unknown_key_message("request_log", raw, ("content_tenants",))
    if message is not None:
        raise ConfigError(message)
    tenants = raw.get("content_tenants", [])
    if not isinstance(tenants, list) or not all(isinstance(t, str) and t for t in tenants):
        raise ConfigError("request_log.content_tenants must be a list of tenant names")
    extra = [t.strip() for t in env.get(LOG_CONTENT_ENV, "").split(",") if t.strip()]
    return frozenset([*tenants, *extra])


def config_document(text: str, source: str) -> dict[str, Any]:
    """A config document (JSON when it starts with ``{``, else TOML) as a table.

    Raises:
        ConfigError: unparseable (the message names ``source``).
    """
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot parse {source}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the config must be a table")
    return data


def parse_config_text(
    text: str, source: str, env: Mapping[str, str] | None = None
) -> GatewayConfig:
    """Parse a config document from ``source`` (a path or an SSM parameter name, for messages).

    Raises:
        ConfigError: unparseable, or a rule broken (the message names the source and field).
    """
    return parse_config_data(config_document(text, source), source, env)


def parse_config_data(
    data: Mapping[str, Any], source: str, env: Mapping[str, str] | None = None
) -> GatewayConfig:
    """:func:`parse_config` with errors prefixed by ``source``."""
    try:
        return parse_config(data, env)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


BEDROCK_MODELS_ENV = "BEDROCK_MODELS"
"""Bedrock model and inference profile ids (comma separated) served without a configuration
file by a ``bedrock`` provider in ``AWS_REGION`` (the template's ``BedrockModels``)."""


def load_config(env: Mapping[str, str] | None = None) -> GatewayConfig | None:
    """The configuration from ``GATEWAY_CONFIG``, or from ``UPSTREAM_*`` and ``BEDROCK_MODELS``;
    None when none is set."""
    env = os.environ if env is None else env
    path = env.get("GATEWAY_CONFIG")
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read GATEWAY_CONFIG {path}: {exc.strerror}") from None
        return parse_config_text(text, path, env)
    base_url = env.get("UPSTREAM_BASE_URL")
    providers: list[dict[str, Any]] = []
    if base_url:
        providers.append(
            {
                "name": "upstream",
                "base_url": base_url,
                "api_key": env.get("UPSTREAM_API_KEY") or None,
                "api": env.get("UPSTREAM_API", "auto") or "auto",
                "hosted_tools": env.get("UPSTREAM_HOSTED_TOOLS", "omit") or "omit",
                "streaming": env.get("UPSTREAM_STREAMING", "auto") or "auto",
                "default": True,
            }
        )
    bedrock = [m.strip() for m in env.get(BEDROCK_MODELS_ENV, "").split(",") if m.strip()]
    if bedrock:  # the template's BedrockModels: served in this region, signed by the role
        providers.append({"name": "bedrock", "api": "bedrock", "models": bedrock})
    if not providers:
        return None
    try:
        return _upstream_config(providers, env)
    except ConfigError as exc:
        message = str(exc)
        for key, variable in _UPSTREAM_VARIABLES.items():
            message = message.replace(f"provider 'upstream'.{key}", variable)
        message = message.replace("provider 'bedrock'", BEDROCK_MODELS_ENV)
        raise ConfigError(message) from None


_UPSTREAM_VARIABLES = {
    "base_url": "UPSTREAM_BASE_URL",
    "api": "UPSTREAM_API",
    "hosted_tools": "UPSTREAM_HOSTED_TOOLS",
    "streaming": "UPSTREAM_STREAMING",
}
"""The single-provider variables, by the provider key each sets (for error messages)."""


def _upstream_config(providers: list[dict[str, Any]], env: Mapping[str, str]) -> GatewayConfig:
    return parse_config({"providers": providers}, env)


# --------------------------------------------------------------------------- operator MCP servers

_MCP_KEYS = frozenset(
    {
        "server_label",
        "url",
        "command",
        "args",
        "env",
        "env_from",
        "headers",
        "headers_env",
        "transport",
        "shared",
    }
)
_MCP_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_URL_TRANSPORTS: tuple[str, ...] = ("auto", "streamable_http", "sse")


def _origin(url: str | None) -> str:
    """``scheme://host[:port]`` of ``url``: what a ``repr`` may show."""
    try:
        parts = urlsplit(url or "")
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<malformed url>"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _str_table(value: Any, what: str, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"{name}: {what} must be a table of strings")
    return dict(value)


def _from_env(
    table: Mapping[str, str], env: Mapping[str, str], what: str, name: str
) -> dict[str, str]:
    """``{key: env[variable]}`` for ``{key: variable}``; every variable must be set."""
    resolved: dict[str, str] = {}
    for key, variable in table.items():
        value = env.get(variable)
        if value is None or value == "":
            raise ConfigError(
                f"{name}: {what} names the environment variable {variable!r}, which is not set"
            )
        resolved[key] = value
    return resolved


def _check_url(url: Any, name: str) -> str:
    if not isinstance(url, str):
        raise ConfigError(f"{name}: url must be a string")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        raise ConfigError(f"{name}: url is malformed") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name}: url must be an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"{name}: url must not contain credentials; use headers or headers_env")
    return url


def _remote_headers(raw: Mapping[str, Any], env: Mapping[str, str], name: str) -> dict[str, str]:
    headers = _str_table(raw.get("headers"), "headers", name)
    from_env = _str_table(raw.get("headers_env"), "headers_env", name)
    both = {k.lower() for k in headers} & {k.lower() for k in from_env}
    if both:
        raise ConfigError(f"{name}: header {sorted(both)[0]!r} is in both headers and headers_env")
    headers.update(_from_env(from_env, env, "headers_env", name))
    # The header rules of the MCP client (size, names, no transport-owned headers), checked now
    # rather than on the first request. Imported here: the MCP package is not needed otherwise.
    from responses_gateway.errors import InvalidRequestError
    from responses_gateway.mcp.client import McpServer

    try:
        McpServer(label="check", url="https://check.invalid", headers=headers)
    except InvalidRequestError as exc:
        raise ConfigError(f"{name}: {exc.message}") from None
    return headers


def _stdio_env(raw: Mapping[str, Any], env: Mapping[str, str], name: str) -> dict[str, str]:
    child = _str_table(raw.get("env"), "env", name)
    from_env = _str_table(raw.get("env_from"), "env_from", name)
    both = set(child) & set(from_env)
    if both:
        raise ConfigError(f"{name}: variable {sorted(both)[0]!r} is in both env and env_from")
    child.update(_from_env(from_env, env, "env_from", name))
    for key, value in child.items():
        if not _ENV_NAME.match(key):
            raise ConfigError(f"{name}: {key!r} is not a valid environment variable name")
        if "\x00" in value:
            raise ConfigError(f"{name}: the value of {key!r} contains a NUL character")
    return child


def _mcp_server(raw: Any, env: Mapping[str, str], index: int) -> OperatorMcpServer:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"mcp_servers[{index}] must be a table")
    label = raw.get("server_label")
    if not isinstance(label, str) or not _MCP_LABEL.match(label):
        raise ConfigError(
            f"mcp_servers[{index}]: server_label must be 1-64 letters, digits, '_' or '-'"
        )
    name = f"mcp server {label!r}"
    message = unknown_key_message(name, raw, _MCP_KEYS)
    if message is not None:
        raise ConfigError(message)
    url, command = raw.get("url"), raw.get("command")
    if (url is None) == (command is None):
        raise ConfigError(f"{name}: give exactly one of url (remote) or command (stdio)")
    transport = raw.get("transport")
    if url is not None:
        if transport is None:
            transport = "auto"
        if transport not in _URL_TRANSPORTS:
            raise ConfigError(
                f"{name}: transport of a url server must be one of {', '.join(_URL_TRANSPORTS)}"
            )
        for key in ("args", "env", "env_from", "shared"):
            if raw.get(key) is not None:
                raise ConfigError(f"{name}: {key} only applies to command (stdio) servers")
        return OperatorMcpServer(
            server_label=label,
            transport=cast(McpServerTransport, transport),
            url=_check_url(url, name),
            headers=_remote_headers(raw, env, name),
        )
    if not isinstance(command, str) or not command.strip() or "\x00" in command:
        raise ConfigError(f"{name}: command must be a non-empty string")
    if transport not in (None, "stdio"):
        raise ConfigError(f"{name}: transport of a command server must be 'stdio'")
    for key in ("headers", "headers_env"):
        if raw.get(key) is not None:
            raise ConfigError(f"{name}: {key} only applies to url servers")
    args = raw.get("args")
    if args is None:
        args = []
    if not isinstance(args, list) or not all(isinstance(a, str) and "\x00" not in a for a in args):
        raise ConfigError(f"{name}: args must be a list of strings")
    shared = raw.get("shared", False)
    if not isinstance(shared, bool):
        raise ConfigError(f"{name}: shared must be true or false")
    return OperatorMcpServer(
        server_label=label,
        transport="stdio",
        command=command,
        args=tuple(args),
        env=_stdio_env(raw, env, name),
        shared=shared,
    )


def _mcp_servers(raw: Any, env: Mapping[str, str]) -> tuple[OperatorMcpServer, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("mcp_servers must be a list of tables")
    servers = tuple(_mcp_server(entry, env, i) for i, entry in enumerate(raw))
    labels = [s.server_label for s in servers]
    for label in labels:
        if labels.count(label) > 1:
            raise ConfigError(f"mcp server labels must be unique: {label!r} appears twice")
    return servers
