"""Endpoint selection: which wire format a provider is spoken to in.

Owns the ``api`` setting of a provider: ``chat``, ``responses``, ``harmony`` and ``bedrock``
(Amazon Bedrock's Converse API) are pinned and never change; a provider with ``aws_sigv4`` has
its calls signed with the runtime's own AWS credentials (Bedrock's OpenAI-compatible
endpoints); ``auto`` picks Responses for OpenAI's own hosts (``openai.com`` and its subdomains,
matched as a suffix on the parsed host, so ``api.openai.com.evil.example`` is not one) and Chat
Completions elsewhere. Under ``auto``, an upstream error that says the model needs the Responses
API latches a sticky, process-wide upgrade of that provider to Responses and re-issues the same
call once (safe: a status error arrives before any output was reported).

It decides nothing about the loop; the adapters it builds only call the model.
"""

from __future__ import annotations

from typing import Literal

import httpx

from responses_gateway.adapters.base import Adapter, ModelCall
from responses_gateway.adapters.chat_completions import ChatCompletionsAdapter, ChatOptions
from responses_gateway.adapters.harmony import HarmonyAdapter
from responses_gateway.adapters.latch import PROCESS_LATCH, UpgradeLatch
from responses_gateway.adapters.responses_api import ResponsesAdapter
from responses_gateway.config import Provider
from responses_gateway.errors import UpstreamError, UpstreamStatusError
from responses_gateway.loop.output import OutputWriter
from responses_gateway.loop.state import TurnResult

__all__ = [
    "PROCESS_LATCH",
    "AutoAdapter",
    "RedactingAdapter",
    "UpgradeLatch",
    "asks_for_responses_api",
    "auto_wire",
    "is_openai_host",
    "make_adapter",
]

Wire = Literal["chat", "responses"]


def is_openai_host(base_url: str) -> bool:
    """Whether ``base_url``'s host is ``openai.com`` or one of its subdomains."""
    try:
        host = httpx.URL(base_url).host.lower().rstrip(".")
    except (httpx.InvalidURL, TypeError):
        return False
    return host == "openai.com" or host.endswith(".openai.com")


def auto_wire(base_url: str) -> Wire:
    """The wire format ``auto`` starts with for a provider at ``base_url``."""
    return "responses" if is_openai_host(base_url) else "chat"


_MARKERS = ("/v1/responses", "v1/responses", "responses api", "unsupported_api_for_model")


def asks_for_responses_api(error: UpstreamStatusError) -> bool:
    """Whether an upstream error says to use the Responses API instead of Chat Completions."""
    if not 400 <= error.upstream_status < 500 or error.upstream_status == 429:
        return False
    text = f"{error.message} {error.code or ''} {error.body}".lower()
    return any(marker in text for marker in _MARKERS)


class AutoAdapter:
    """Chat Completions first, Responses once the upstream says so (then for good)."""

    def __init__(self, chat: Adapter, responses: Adapter, base_url: str, latch: UpgradeLatch):
        self._chat = chat
        self._responses = responses
        self._base_url = base_url
        self._latch = latch

    @property
    def wire(self) -> str:
        return "responses" if self._latch.is_upgraded(self._base_url) else "chat"

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        if self._latch.is_upgraded(self._base_url):
            return await self._responses.call_llm(call, out)
        try:
            return await self._chat.call_llm(call, out)
        except UpstreamStatusError as error:
            if not asks_for_responses_api(error):
                raise
        self._latch.upgrade(self._base_url)
        return await self._responses.call_llm(call, out)


class RedactingAdapter:
    """Scrubs the provider's secrets from upstream errors (providers echo keys in 401s)."""

    def __init__(self, inner: Adapter, secrets: list[str]) -> None:
        self._inner = inner
        self._secrets = [s for s in secrets if len(s) >= 4]

    @property
    def wire(self) -> str:
        return self._inner.wire

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        try:
            return await self._inner.call_llm(call, out)
        except UpstreamError as error:
            error.message = self._scrub(error.message)
            error.args = (error.message,)
            error.param = self._scrub(error.param) if error.param else error.param
            error.code = self._scrub(error.code) if error.code else error.code
            if isinstance(error, UpstreamStatusError):
                error.body = self._scrub(error.body)
            raise


def make_adapter(
    provider: Provider, client: httpx.AsyncClient, latch: UpgradeLatch = PROCESS_LATCH
) -> Adapter:
    """The adapter that speaks to ``provider`` in its configured (or detected) wire format."""
    secrets = [provider.api_key or "", *provider.headers.values()]
    return RedactingAdapter(_wire_adapter(provider, client, latch), secrets)


def _signing(provider: Provider) -> httpx.Auth | None:
    """SigV4 with the runtime's credentials, for a provider that asks for it (Bedrock)."""
    if not provider.aws_sigv4 or provider.aws_region is None:
        return None
    from responses_gateway.adapters.aws_auth import SigV4

    return SigV4(provider.aws_region, provider.aws_service)


def _wire_adapter(provider: Provider, client: httpx.AsyncClient, latch: UpgradeLatch) -> Adapter:
    if provider.api == "bedrock":
        from responses_gateway.adapters.bedrock import BedrockAdapter, BedrockOptions

        return BedrockAdapter(
            client,
            provider.base_url,
            provider.aws_region or "",
            provider.api_key,
            dict(provider.headers),
            timeout=provider.timeout,
            options=BedrockOptions(
                provider.additional_model_request_fields, cache_points=provider.cache_points
            ),
            streaming=provider.streaming,
            auth=_signing(provider),
        )
    args = (client, provider.base_url, provider.api_key, dict(provider.headers))
    timeout = provider.timeout
    auth = _signing(provider)
    options = ChatOptions(
        send_reasoning_content=provider.send_reasoning_content,
        send_verbosity=provider.send_verbosity,
    )
    streaming = provider.streaming
    if provider.api == "chat":
        return ChatCompletionsAdapter(
            *args, timeout=timeout, options=options, streaming=streaming, auth=auth
        )
    if provider.api == "responses":
        return ResponsesAdapter(*args, timeout=timeout, streaming=streaming, auth=auth)
    if provider.api == "harmony":
        return HarmonyAdapter(*args, timeout=timeout, streaming=streaming)
    if auto_wire(provider.base_url) == "responses":
        return ResponsesAdapter(*args, timeout=timeout, streaming=streaming)
    return AutoAdapter(
        ChatCompletionsAdapter(*args, timeout=timeout, options=options, streaming=streaming),
        ResponsesAdapter(*args, timeout=timeout, streaming=streaming),
        provider.base_url,
        latch,
    )
