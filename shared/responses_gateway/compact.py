"""``POST /v1/responses/compact`` and ``POST /v1/responses/input_tokens``: the context of a
would-be create, compacted or counted.

Owns the steps of both endpoints between a body their door validated
(:mod:`responses_gateway.protocol.bodies`: the create's item and field models) and their
answer: the transcript a create with this body would send (stored history from its last
compaction on, then the input, with the gateway's compaction items expanded), and then:

- compact: over a Responses upstream, the upstream's own ``/responses/compact`` (passed through,
  upstream errors mapped like a model call's); when that upstream has none (404/405), or over
  Chat Completions and harmony, the shared loop runs one
  :class:`~responses_gateway.loop.state.Compact` action (a model call asking for a summary) and
  the answer is the user messages plus the one sealed ``compaction`` item it emitted;
- count: the input tokens by the upstream's tokenizer where it has one
  (:mod:`responses_gateway.context.tokens`), with the source in :data:`SOURCE_HEADER`.

Knows nothing about HTTP routing (``api/responses.py``) and stores nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.select import make_adapter
from responses_gateway.adapters.wire import loads_json, passed_headers
from responses_gateway.config import Provider
from responses_gateway.context.errors import as_context_length
from responses_gateway.context.tokens import TokenCount, estimate
from responses_gateway.errors import (
    GatewayError,
    InvalidRequestError,
    UpstreamProtocolError,
    UpstreamTransportError,
)
from responses_gateway.ids import new_id
from responses_gateway.loop.compaction import (
    expand_compactions,
    from_last_compaction,
    user_messages,
)
from responses_gateway.loop.driver import LoopContext, run_loop
from responses_gateway.loop.events import NullSink
from responses_gateway.loop.prepared import prepare_input, to_model_items
from responses_gateway.loop.render import normalize_usage
from responses_gateway.loop.state import Compact, LoopState
from responses_gateway.protocol.bodies import CompactRequest, InputTokensRequest
from responses_gateway.protocol.request import input_items
from responses_gateway.protocol.resources import stored_item
from responses_gateway.service import Gateway

__all__ = ["SOURCE_HEADER", "Transcript", "compact", "count_input_tokens", "load_transcript"]

SOURCE_HEADER = "x-token-count-source"
"""Response header of ``/responses/input_tokens``: ``upstream`` (its ``/tokenize`` or
``/responses/input_tokens``), ``harmony`` (the exact harmony prompt, o200k_harmony), ``o200k``
(OpenAI models, counted locally) or ``estimate`` (about four characters per token)."""

_NO_NATIVE_COMPACT = frozenset({404, 405, 501})


@dataclass(slots=True)
class Transcript:
    """What a create with the same body would send, and where."""

    provider: Provider | None
    upstream_model: str
    wire: str
    items: list[dict[str, Any]]
    """The transcript (compaction items expanded, unless the upstream's own)."""
    instructions: str | None
    tools: list[dict[str, Any]]

    def call(self) -> ModelCall:
        return ModelCall(
            model=self.upstream_model,
            input=[i for i in self.items if i.get("type") != "compaction_trigger"],
            instructions=self.instructions,
            tools=self.tools,
        )


def _input(body: InputTokensRequest) -> str | list[dict[str, Any]] | None:
    if body.input is None or isinstance(body.input, str):
        return body.input
    return input_items(body.input)


async def load_transcript(gateway: Gateway, body: InputTokensRequest, tenant: str) -> Transcript:
    """The transcript of a create with ``body`` (validated by its door; ``model`` optional:
    no model, no wire)."""
    context = await gateway.load_context(tenant, body.previous_response_id, body.conversation)
    prepared = prepare_input(_input(body), context_ids=context.item_ids)
    provider: Provider | None = None
    upstream_model, wire = body.model or "", "none"
    if body.model:
        provider, upstream_model = gateway.config.route(body.model)
        wire = make_adapter(provider, gateway.client, gateway.latch).wire
    items = to_model_items(from_last_compaction(context.history) + prepared.items)
    tools = [
        tool.model_dump(mode="json", by_alias=True, exclude_unset=True) for tool in body.tools or ()
    ]
    return Transcript(
        provider=provider,
        upstream_model=upstream_model,
        wire=wire,
        items=expand_compactions(items, tenant=tenant, wire=wire),
        instructions=body.instructions,
        tools=tools,
    )


async def count_input_tokens(gateway: Gateway, body: InputTokensRequest, tenant: str) -> TokenCount:
    """The input tokens a create with ``body`` would send, and how they were counted."""
    transcript = await load_transcript(gateway, body, tenant)
    call = transcript.call()
    if transcript.provider is None:
        return TokenCount(estimate(call), "estimate")
    return await gateway.tokens.count(transcript.provider, transcript.wire, call)


async def _native(gateway: Gateway, transcript: Transcript, body: CompactRequest) -> Any:
    """The upstream's own ``/responses/compact`` answer; None when it has no such endpoint."""
    provider = transcript.provider
    assert provider is not None
    payload: dict[str, Any] = {"model": transcript.upstream_model, "input": transcript.items}
    if transcript.instructions is not None:
        payload["instructions"] = transcript.instructions
    for key in ("prompt_cache_key", "service_tier"):
        value = getattr(body, key)
        if value is not None:
            payload[key] = value
    headers = dict(provider.headers)
    if provider.api_key:
        headers["Authorization"] = f"Bearer {provider.api_key}"
    url = provider.base_url.rstrip("/") + "/responses/compact"
    try:
        answer = await gateway.client.post(
            url,
            json=payload,
            headers=headers,
            timeout=httpx.Timeout(provider.timeout, connect=10.0),
        )
    except httpx.HTTPError as exc:
        raise UpstreamTransportError(
            f"The upstream model could not be reached: {type(exc).__name__}"
        ) from exc
    if answer.status_code in _NO_NATIVE_COMPACT:
        return None
    if not answer.is_success:
        from responses_gateway.adapters.chat_completions import chat_status_error

        error = chat_status_error(answer.status_code, answer.text)
        error.headers.update(passed_headers(answer))
        raise as_context_length(error)
    return loads_json(answer.text)


def _complete_usage(compacted: dict[str, Any]) -> dict[str, Any]:
    """An upstream's compaction object with every usage count both specs require (zeros for
    those it left out; what it sent is kept as sent)."""
    usage = compacted.get("usage")
    if not isinstance(usage, dict):
        return compacted
    filled = normalize_usage(usage) or {}
    for key, value in usage.items():
        known = filled.get(key)
        if isinstance(known, dict) and isinstance(value, dict):
            filled[key] = {**known, **value}
        else:
            filled[key] = value
    return {**compacted, "usage": filled}


async def compact(gateway: Gateway, body: CompactRequest, tenant: str) -> dict[str, Any]:
    """The ``response.compaction`` object for ``body`` (validated by its door: ``model`` set).

    Raises:
        GatewayError: no input, unknown model or context, a foreign compaction blob, or the
            upstream's failure (a context-length error mapped to ``context_length_exceeded``).
    """
    transcript = await load_transcript(gateway, body, tenant)
    if not transcript.call().input:
        raise InvalidRequestError(
            "Missing required parameter: 'input'.", param="input", code="missing_required_parameter"
        )
    provider = transcript.provider
    assert provider is not None
    if transcript.wire == "responses":
        native = await _native(gateway, transcript, body)
        if native is not None and not isinstance(native, dict):
            raise UpstreamProtocolError("The upstream's compaction answer is no JSON object.")
        if native is not None:
            return _complete_usage(dict(native))
    state = LoopState(
        response_id=new_id("resp"),
        created_at=int(time.time()),
        model=body.model,
        request={"instructions": transcript.instructions},
        upstream_input=transcript.items,
        next_action=Compact("client"),
    )
    ctx = LoopContext(
        adapter=make_adapter(provider, gateway.client, gateway.latch),
        upstream_model=transcript.upstream_model,
        tenant=tenant,
    )
    await run_loop(state, ctx, NullSink())
    if ctx.failure is not None:
        raise ctx.failure
    if state.status != "completed":  # pragma: no cover - every failure sets ctx.failure
        raise GatewayError("The conversation could not be compacted.")
    users = [  # kept as the API shows items back (an image's detail completed, as when stored)
        stored_item(
            {
                "id": item.get("id") or new_id("msg"),
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": item.get("content"),
            }
        )
        for item in user_messages(transcript.items)
    ]
    return {
        "id": state.response_id,
        "object": "response.compaction",
        "created_at": state.created_at,
        "output": [*users, *state.output],
        "usage": normalize_usage(state.usage or {}),
    }
