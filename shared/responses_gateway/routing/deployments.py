"""Routes: a model name served by one or more deployments, with its retry and fallback policy.

Owns the ``routes`` section of the gateway configuration and its parsing. A deployment names a
configured provider (its URL, key and wire ``api``), the model name sent to it, a weight and
optional requests- and tokens-per-minute limits; a deployment may name its own key variable
(``api_key_env``: two accounts of one provider). A route chooses its selection strategy, its
fallback models (in order), the larger-window model a ``context_length_exceeded`` moves to, and
the bounds of its retries. It decides nothing at request time and never logs (keys stay in
:class:`~responses_gateway.config.Provider`, out of every ``repr``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from responses_gateway.config_keys import unknown_key_message
from responses_gateway.loop.limits import DEFAULT_LIMITS, LIMIT_KEYS, LoopLimits, parse_loop_limits

__all__ = [
    "STRATEGIES",
    "Deployment",
    "ModelRoute",
    "RouteError",
    "Strategy",
    "parse_routes",
]

Strategy = Literal["weighted", "least_loaded", "lowest_latency"]
STRATEGIES: tuple[str, ...] = ("weighted", "least_loaded", "lowest_latency")

_ROUTE_KEYS = frozenset(
    {
        "model",
        "strategy",
        "deployments",
        "fallbacks",
        "context_window_fallback",
        "max_attempts",
        "max_wait_seconds",
        "allowed_fails",
        "cooldown_seconds",
        *LIMIT_KEYS,
    }
)
_DEPLOYMENT_KEYS = frozenset({"id", "provider", "model", "weight", "rpm", "tpm", "api_key_env"})


class RouteError(ValueError):
    """A ``routes`` entry breaks a rule (turned into a ``ConfigError`` by the config)."""


@dataclass(frozen=True, slots=True)
class Deployment:
    """One place a model name can be served: a provider and the model name it is sent."""

    id: str
    """Unique across the configuration; the key of its shared health (``x-gateway-deployment``)."""
    provider: Any
    """The :class:`~responses_gateway.config.Provider` (with this deployment's own key)."""
    upstream_model: str
    weight: float = 1.0
    rpm: int | None = None
    """Requests per minute this deployment takes, counted across instances (None: no limit)."""
    tpm: int | None = None
    """Tokens per minute, counted across instances (None: no limit)."""

    @property
    def limited(self) -> bool:
        return self.rpm is not None or self.tpm is not None


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """How one model name is served and what happens when a call to it fails."""

    model: str
    deployments: tuple[Deployment, ...]
    strategy: Strategy = "weighted"
    fallbacks: tuple[str, ...] = ()
    """Models tried, in order, once every deployment of this one failed the call."""
    context_window_fallback: str | None = None
    """The larger-window model a ``context_length_exceeded`` moves the call to."""
    max_attempts: int = 6
    """Upstream attempts per model call, across deployments and fallbacks."""
    max_wait_seconds: float = 30.0
    """Longest time one model call spends waiting (``retry-after``, cooldowns) in all."""
    allowed_fails: int = 2
    """Failures within ``cooldown_seconds`` that put a deployment in cooldown (a 429 does at
    once)."""
    cooldown_seconds: float = 30.0
    limits: LoopLimits | None = None
    """The caps of each response's loop on this model (``max_model_calls``, ``max_tool_calls``,
    ``max_loop_seconds``); None: those of its first deployment's provider."""


def _number(value: Any, what: str, *, integer: bool = False, positive: bool = True) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RouteError(f"{what} must be a number")
    if integer and not isinstance(value, int):
        raise RouteError(f"{what} must be an integer")
    if positive and value <= 0:
        raise RouteError(f"{what} must be positive")
    return value


def _deployment(
    raw: Any, providers: Mapping[str, Any], env: Mapping[str, str], where: str
) -> Deployment:
    if not isinstance(raw, Mapping):
        raise RouteError(f"{where} must be a table")
    message = unknown_key_message(where, raw, _DEPLOYMENT_KEYS)
    if message is not None:
        raise RouteError(message)
    provider = providers.get(str(raw.get("provider")))
    if provider is None:
        raise RouteError(f"{where}: provider must name one of the providers")
    upstream = raw.get("model")
    if not isinstance(upstream, str) or not upstream:
        raise RouteError(f"{where}: model must be a non-empty string")
    key_env = raw.get("api_key_env")
    if key_env is not None:
        if not isinstance(key_env, str) or not env.get(key_env):
            raise RouteError(f"{where}: api_key_env names a variable that is not set")
        provider = dataclasses.replace(provider, api_key=env[key_env])
    ident = raw.get("id", f"{provider.name}/{upstream}")
    if not isinstance(ident, str) or not ident or "#" in ident:
        raise RouteError(f"{where}: id must be a non-empty string without '#'")
    rpm = raw.get("rpm")
    tpm = raw.get("tpm")
    return Deployment(
        id=ident,
        provider=provider,
        upstream_model=upstream,
        weight=float(_number(raw.get("weight", 1), f"{where}.weight")),
        rpm=None if rpm is None else _number(rpm, f"{where}.rpm", integer=True),
        tpm=None if tpm is None else _number(tpm, f"{where}.tpm", integer=True),
    )


def _route(
    raw: Any, providers: Mapping[str, Any], env: Mapping[str, str], index: int
) -> ModelRoute:
    where = f"routes[{index}]"
    if not isinstance(raw, Mapping):
        raise RouteError(f"{where} must be a table")
    message = unknown_key_message(where, raw, _ROUTE_KEYS)
    if message is not None:
        raise RouteError(message)
    model = raw.get("model")
    if not isinstance(model, str) or not model:
        raise RouteError(f"{where}: model must be a non-empty string")
    where = f"route {model!r}"
    strategy = raw.get("strategy", "weighted")
    if strategy not in STRATEGIES:
        raise RouteError(f"{where}: strategy must be one of {', '.join(STRATEGIES)}")
    raw_deployments = raw.get("deployments")
    if not isinstance(raw_deployments, list) or not raw_deployments:
        raise RouteError(f"{where}: deployments must be a non-empty list")
    deployments = tuple(
        _deployment(d, providers, env, f"{where}.deployments[{i}]")
        for i, d in enumerate(raw_deployments)
    )
    fallbacks = raw.get("fallbacks", [])
    if not isinstance(fallbacks, list) or not all(isinstance(f, str) and f for f in fallbacks):
        raise RouteError(f"{where}: fallbacks must be a list of model names")
    if model in fallbacks:
        raise RouteError(f"{where}: a model cannot fall back to itself")
    larger = raw.get("context_window_fallback")
    if larger is not None and (not isinstance(larger, str) or not larger or larger == model):
        raise RouteError(f"{where}: context_window_fallback must name another model")
    return ModelRoute(
        model=model,
        deployments=deployments,
        strategy=cast(Strategy, strategy),
        fallbacks=tuple(fallbacks),
        context_window_fallback=larger,
        max_attempts=_number(raw.get("max_attempts", 6), f"{where}.max_attempts", integer=True),
        max_wait_seconds=float(
            _number(raw.get("max_wait_seconds", 30.0), f"{where}.max_wait_seconds", positive=False)
        ),
        allowed_fails=_number(raw.get("allowed_fails", 2), f"{where}.allowed_fails", integer=True),
        cooldown_seconds=float(
            _number(raw.get("cooldown_seconds", 30.0), f"{where}.cooldown_seconds")
        ),
        limits=_limits(raw, where, deployments[0].provider),
    )


def _limits(raw: Mapping[str, Any], where: str, provider: Any) -> LoopLimits | None:
    if not any(key in raw for key in LIMIT_KEYS):
        return None
    try:
        return parse_loop_limits(raw, where, getattr(provider, "limits", DEFAULT_LIMITS))
    except ValueError as exc:
        raise RouteError(str(exc)) from None


def parse_routes(
    raw: Any, providers: Mapping[str, Any], env: Mapping[str, str]
) -> dict[str, ModelRoute]:
    """The ``routes`` list as ``{model: route}``; ``providers`` by name.

    Raises:
        RouteError: an entry breaks a rule (the message names it, never a key).
    """
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise RouteError("routes must be a list of tables")
    routes: dict[str, ModelRoute] = {}
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        route = _route(entry, providers, env, index)
        if route.model in routes:
            raise RouteError(f"route {route.model!r} is configured twice")
        for deployment in route.deployments:
            if deployment.id in seen:
                raise RouteError(f"deployment id {deployment.id!r} is used twice")
            seen.add(deployment.id)
        routes[route.model] = route
    return routes
