"""Providers and model routing.

Owns the gateway's configuration: which upstream providers exist, how to reach them and which
model names go to which provider. Two sources, read once at startup:

- one provider from environment variables (``UPSTREAM_BASE_URL``, ``UPSTREAM_API_KEY``,
  ``UPSTREAM_API``), which takes every model name;
- several providers from a TOML or JSON file named by ``GATEWAY_CONFIG``, each with exact
  ``models`` and/or ``prefixes`` (``strip_prefix`` removes the matched prefix before the name is
  sent upstream) and at most one ``default`` catch-all.

An upstream key is held only in :class:`Provider` (excluded from its ``repr``) and read from the
file or from the environment variable the file names (``api_key_env``). Nothing here logs.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from responses_gateway.errors import NotFoundError

__all__ = [
    "ApiMode",
    "ConfigError",
    "GatewayConfig",
    "Provider",
    "load_config",
    "parse_config",
]

ApiMode = Literal["auto", "chat", "responses", "harmony"]
_API_MODES: tuple[str, ...] = ("auto", "chat", "responses", "harmony")


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

    @property
    def catch_all(self) -> bool:
        return self.default or (not self.models and not self.prefixes)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """The providers, and how a request's ``model`` picks one."""

    providers: tuple[Provider, ...]

    def route(self, model: str) -> tuple[Provider, str]:
        """The provider for ``model`` and the model name to send it.

        Exact names win, then the longest matching prefix, then the catch-all provider.

        Raises:
            NotFoundError: no provider serves ``model`` (404 ``model_not_found``).
        """
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


def _str_tuple(value: Any, key: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"provider {name!r}: {key} must be a list of strings")
    return tuple(value)


def _provider(raw: Mapping[str, Any], env: Mapping[str, str], index: int) -> Provider:
    name = str(raw.get("name") or f"provider{index}")
    base_url = raw.get("base_url")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"provider {name!r}: base_url must be an http(s) URL")
    api = raw.get("api", "auto")
    if api not in _API_MODES:
        raise ConfigError(f"provider {name!r}: api must be one of {', '.join(_API_MODES)}")
    key = raw.get("api_key")
    key_env = raw.get("api_key_env")
    if key is None and isinstance(key_env, str):
        key = env.get(key_env)
    headers = raw.get("headers") or {}
    if not isinstance(headers, dict):
        raise ConfigError(f"provider {name!r}: headers must be a table of strings")
    return Provider(
        name=name,
        base_url=base_url.rstrip("/"),
        api_key=key if isinstance(key, str) and key else None,
        api=cast(ApiMode, api),
        models=_str_tuple(raw.get("models"), "models", name),
        prefixes=_str_tuple(raw.get("prefixes"), "prefixes", name),
        strip_prefix=bool(raw.get("strip_prefix", False)),
        default=bool(raw.get("default", False)),
        headers={str(k): str(v) for k, v in headers.items()},
        timeout=float(raw.get("timeout", 600.0)),
    )


def parse_config(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> GatewayConfig:
    """Build a config from a parsed file: ``{"providers": [{...}, ...]}``."""
    env = os.environ if env is None else env
    raw_providers = data.get("providers")
    if not isinstance(raw_providers, list) or not raw_providers:
        raise ConfigError("the config needs a non-empty 'providers' list")
    providers = tuple(_provider(p, env, i) for i, p in enumerate(raw_providers))
    names = [p.name for p in providers]
    if len(set(names)) != len(names):
        raise ConfigError("provider names must be unique")
    if sum(1 for p in providers if p.default) > 1:
        raise ConfigError("at most one provider may be the default")
    return GatewayConfig(providers)


def load_config(env: Mapping[str, str] | None = None) -> GatewayConfig | None:
    """The configuration from ``GATEWAY_CONFIG`` or ``UPSTREAM_*``; None when neither is set."""
    env = os.environ if env is None else env
    path = env.get("GATEWAY_CONFIG")
    if path:
        text = Path(path).read_text(encoding="utf-8")
        try:
            data = json.loads(text) if path.endswith(".json") else tomllib.loads(text)
        except (ValueError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot parse {path}: {exc}") from exc
        return parse_config(data, env)
    base_url = env.get("UPSTREAM_BASE_URL")
    if not base_url:
        return None
    return parse_config(
        {
            "providers": [
                {
                    "name": "upstream",
                    "base_url": base_url,
                    "api_key": env.get("UPSTREAM_API_KEY") or None,
                    "api": env.get("UPSTREAM_API", "auto") or "auto",
                    "default": True,
                }
            ]
        },
        env,
    )
