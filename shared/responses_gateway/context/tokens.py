"""Token counts of a model call: the upstream's own tokenizer where it has one.

Owns :class:`TokenCounter` and :class:`TokenCount` (a count and the source it came from):

- ``harmony``: the exact prompt the harmony adapter would send, rendered locally with the
  shipped o200k_harmony vocabulary (:mod:`responses_gateway._vocab`);
- ``upstream``: the upstream's ``POST /tokenize`` over the exact Chat Completions messages the chat
  adapter would send (vLLM: ``{"model","messages"}`` answers ``count``; llama.cpp:
  ``POST /apply-template`` then ``POST /tokenize {"content"}`` answers ``tokens``);
- ``upstream`` also over the Responses wire: the upstream's ``POST /responses/input_tokens`` with
  the exact body the Responses adapter would send;
- ``o200k``: OpenAI models whose upstream cannot count, counted locally with the o200k vocabulary
  (the text of every item, plus OpenAI's few tokens of framing per item);
- ``estimate``: about four characters per token, when none of the above is available.

An upstream without a working ``/tokenize`` is remembered (per process) and not asked again.
Also owns :func:`upper_bound`, a count no tokenizer exceeds (one token per UTF-8 byte of the
serialized call, plus framing), which lets the loop skip counting when a call is surely small.

Must not: decide what to do with a count (the loop's deciders do).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx

from responses_gateway.adapters.base import ModelCall
from responses_gateway.config import Provider
from responses_gateway.context.windows import root_url

__all__ = [
    "TokenCount",
    "TokenCounter",
    "TokenSource",
    "estimate",
    "is_openai_model",
    "upper_bound",
]

TokenSource = Literal["upstream", "harmony", "o200k", "estimate"]

_PER_ITEM = 4
"""Framing tokens per item (role and separators) in the o200k count and the upper bound."""
_TIMEOUT = httpx.Timeout(10.0, connect=3.0)
_OPENAI_MODEL = re.compile(r"^(ft:)?(gpt-|chatgpt-|o\d|codex-)")


@dataclass(frozen=True, slots=True)
class TokenCount:
    """How many tokens, and how they were counted."""

    tokens: int
    source: TokenSource


def _serialized(call: ModelCall) -> str:
    counted = [call.input, call.instructions or "", call.tools]
    return json.dumps(counted, separators=(",", ":"), ensure_ascii=False)


def estimate(call: ModelCall) -> int:
    """About four characters per token over the transcript, instructions and tools."""
    return math.ceil(len(_serialized(call)) / 4)


def upper_bound(call: ModelCall) -> int:
    """A count no byte-level tokenizer exceeds for ``call``: every token is at least one byte."""
    return len(_serialized(call).encode("utf-8")) + _PER_ITEM * (len(call.input) + 2) + 16


def _texts(value: Any, key: str | None = None) -> list[str]:
    if key in ("type", "id", "status", "call_id", "role"):
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _texts(v, k)]
    return []


def is_openai_model(model: str) -> bool:
    """Whether ``model`` names an OpenAI model (their tokenizer is o200k)."""
    return bool(_OPENAI_MODEL.match(model.rsplit("/", 1)[-1]))


class TokenCounter:
    """Counts a :class:`ModelCall`'s input tokens for the wire it is sent in."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client
        self._dialects: dict[str, str] = {}
        """``base_url`` -> ``vllm`` | ``llamacpp`` | ``none`` (what its ``/tokenize`` speaks);
        ``base_url#responses`` -> ``none`` when it has no ``/responses/input_tokens``."""

    async def count(self, provider: Provider, wire: str, call: ModelCall) -> TokenCount:
        """The input tokens of ``call`` sent over ``wire`` to ``provider``."""
        if wire == "harmony":
            return TokenCount(await asyncio.to_thread(_harmony_tokens, call), "harmony")
        if wire == "chat":
            tokens = await self._tokenize(provider, call)
            if tokens is not None:
                return TokenCount(tokens, "upstream")
        if wire == "responses":
            tokens = await self._input_tokens(provider, call)
            if tokens is not None:
                return TokenCount(tokens, "upstream")
        if is_openai_model(call.model) or wire == "responses":
            counted = await asyncio.to_thread(_o200k_tokens, call)
            if counted is not None:
                return TokenCount(counted, "o200k")
        return TokenCount(estimate(call), "estimate")

    async def _post(
        self, provider: Provider, path: str, body: dict[str, Any], *, root: bool = True
    ) -> Any:
        headers = dict(provider.headers)
        if provider.api_key:
            headers["Authorization"] = f"Bearer {provider.api_key}"
        url = (root_url(provider.base_url) if root else provider.base_url.rstrip("/")) + path
        try:
            answer = await self._client.post(url, json=body, headers=headers, timeout=_TIMEOUT)
            return answer.json() if answer.is_success else None
        except (httpx.HTTPError, ValueError):
            return None

    async def _input_tokens(self, provider: Provider, call: ModelCall) -> int | None:
        from responses_gateway.adapters.responses_api import to_responses_request

        if self._dialects.get(provider.base_url + "#responses") == "none":
            return None
        body = to_responses_request(call)
        for key in ("stream", "store", "include"):
            body.pop(key, None)
        url_path = "/responses/input_tokens"
        answer = await self._post(provider, url_path, body, root=False)
        tokens = answer.get("input_tokens") if isinstance(answer, dict) else None
        if isinstance(tokens, int):
            return tokens
        self._dialects[provider.base_url + "#responses"] = "none"
        return None

    async def _tokenize(self, provider: Provider, call: ModelCall) -> int | None:
        from responses_gateway.adapters.chat_completions import to_chat_request

        dialect = self._dialects.get(provider.base_url)
        if dialect == "none":
            return None
        payload = to_chat_request(call)
        body: dict[str, Any] = {"model": payload["model"], "messages": payload["messages"]}
        if payload.get("tools"):
            body["tools"] = payload["tools"]
        if dialect in (None, "vllm"):
            answer = await self._post(
                provider, "/tokenize", {**body, "add_generation_prompt": True}
            )
            count = answer.get("count") if isinstance(answer, dict) else None
            if isinstance(count, int):
                self._dialects[provider.base_url] = "vllm"
                return count
        templated = await self._post(provider, "/apply-template", body)
        prompt = templated.get("prompt") if isinstance(templated, dict) else None
        if isinstance(prompt, str):
            answer = await self._post(provider, "/tokenize", {"content": prompt})
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if isinstance(tokens, list):
                self._dialects[provider.base_url] = "llamacpp"
                return len(tokens)
        self._dialects[provider.base_url] = "none"
        return None


def _harmony_tokens(call: ModelCall) -> int:
    from responses_gateway.adapters.harmony import render_prompt

    return len(render_prompt(call, datetime.now(UTC).date()))


def _o200k_tokens(call: ModelCall) -> int | None:
    try:
        from responses_gateway._vocab import harmony_encoding

        encoding = harmony_encoding()
    except Exception:  # the harmony extra is not installed, or its vocabulary is unusable
        return None
    texts = _texts(call.input) + [call.instructions or ""]
    texts += [json.dumps(tool, separators=(",", ":")) for tool in call.tools]
    tokens = sum(len(encoding.encode(text, disallowed_special=())) for text in texts if text)
    return tokens + _PER_ITEM * (len(call.input) + 1) + 3
