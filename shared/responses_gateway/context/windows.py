"""Context windows: how many tokens each model may see.

Owns :class:`WindowDirectory`, which answers a model's window from, in order: the provider's
configuration (``context_windows`` per model, then ``context_window``), what the upstream's
``GET /models`` reports (vLLM ``max_model_len``; OpenRouter ``context_length`` or
``top_provider.context_length``; llama.cpp ``meta.n_ctx_train``, refined by ``GET /props``
``default_generation_settings.n_ctx``, the size the server actually runs with), else unknown
(None). A listing is fetched at most once per provider per process (its failure too): a model
list does not change while a server runs, and the cold path must stay short.

Must not: decide what to do with a window (the loop's deciders do), or log the provider's key.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from responses_gateway.config import Provider

__all__ = ["WindowDirectory", "root_url", "windows_of_listing"]

_TIMEOUT = httpx.Timeout(5.0, connect=3.0)


def root_url(base_url: str) -> str:
    """The server root of a provider URL (``/v1`` removed): where vLLM and llama.cpp serve
    ``/tokenize`` and ``/props``."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _positive(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _entry_window(entry: dict[str, Any]) -> int | None:
    top = _dict(entry.get("top_provider"))
    meta = _dict(entry.get("meta"))
    for value in (
        entry.get("max_model_len"),  # vLLM
        entry.get("context_length"),  # OpenRouter
        top.get("context_length"),  # OpenRouter, per provider
        entry.get("context_window"),
        meta.get("n_ctx_train"),  # llama.cpp (the training size; /props has the running one)
    ):
        window = _positive(value)
        if window is not None:
            return window
    return None


def windows_of_listing(listing: Any) -> dict[str, int]:
    """``{model id: window}`` for the entries of a ``/models`` answer that report one."""
    data = listing.get("data") if isinstance(listing, dict) else None
    out: dict[str, int] = {}
    for entry in data if isinstance(data, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            window = _entry_window(entry)
            if window is not None:
                out[entry["id"]] = window
    return out


class WindowDirectory:
    """Context windows per model, from configuration or the upstream (cached per process)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client
        self._listings: dict[str, dict[str, int]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def window(self, provider: Provider, model: str) -> int | None:
        """The window of ``model`` (the upstream's name for it) at ``provider``, or None."""
        configured = provider.context_windows.get(model) or provider.context_window
        if configured:
            return configured
        return (await self._listing(provider)).get(model)

    async def _listing(self, provider: Provider) -> dict[str, int]:
        key = provider.base_url
        if key in self._listings:
            return self._listings[key]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._listings:
                self._listings[key] = await self._discover(provider)
        return self._listings[key]

    async def _get(self, provider: Provider, url: str) -> Any:
        headers = dict(provider.headers)
        if provider.api_key:
            headers["Authorization"] = f"Bearer {provider.api_key}"
        try:
            answer = await self._client.get(url, headers=headers, timeout=_TIMEOUT)
            return answer.json() if answer.is_success else None
        except (httpx.HTTPError, ValueError):
            return None

    async def _discover(self, provider: Provider) -> dict[str, int]:
        if provider.api == "bedrock":  # the runtime lists no models (configure the windows)
            return {}
        listing = await self._get(provider, provider.base_url.rstrip("/") + "/models")
        windows = windows_of_listing(listing)
        data = listing.get("data") if isinstance(listing, dict) else None
        if isinstance(data, list) and any(isinstance(e, dict) and "meta" in e for e in data):
            props = await self._get(provider, root_url(provider.base_url) + "/props")
            settings = props.get("default_generation_settings") if isinstance(props, dict) else {}
            n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
            if n_ctx is not None:
                windows = dict.fromkeys(windows, n_ctx) or windows
        return windows
