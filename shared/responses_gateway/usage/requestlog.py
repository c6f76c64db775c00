"""The request log's live parts: time to first token, and records of refused creates.

Owns :class:`FirstOutputSink` (notes in a run's log dict when the loop emitted its first token,
for ``ttft_ms``), :class:`RefusalGate` (how many refused-request records a process may write:
a token bucket per tenant and one for the process, so a flood of bad requests costs a bounded
number of writes) and :func:`log_refused` (the one write of a refused create, through
:meth:`~responses_gateway.store.base.LedgerStore.log_request`: the ledger's write path) and
:func:`logged_content` (the bounded copy of a response's input and output items kept for the
tenants the operator names in ``request_log.content_tenants``). It decides nothing about
responses, and keeps no content for other tenants, nor ever headers or authorization.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from responses_gateway.loop.events import ArgumentsDelta, LoopEvent, Sink, TextDelta
from responses_gateway.usage.ledger import refused_entry

__all__ = [
    "CONTENT_BYTES",
    "UNAUTHENTICATED",
    "FirstOutputSink",
    "RefusalGate",
    "log_refused",
    "logged_content",
]

_log = logging.getLogger(__name__)

UNAUTHENTICATED = "(unauthenticated)"
"""The request-log tenant of creates refused for their API key (no tenant name can be this)."""
CONTENT_BYTES = 64_000
"""Most bytes a request-log record's content takes, compressed (one DynamoDB item is 400 KB)."""
_SECRET_KEYS = frozenset({"headers", "authorization"})
"""Keys dropped from logged items wherever they appear (tools' credentials)."""
_CLIPS = (None, 8192, 1024, 128)
"""Longest string kept, tried in turn until the content fits."""
_TOKEN_EVENTS = (TextDelta, ArgumentsDelta)
"""Loop events that carry model output (text, reasoning or tool arguments)."""


class FirstOutputSink:
    """Passes events on to ``sink``; the first one carrying model output sets
    ``log["first_token_ms"]`` (Unix milliseconds)."""

    __slots__ = ("_log", "sink")

    def __init__(self, sink: Sink, log: dict[str, Any]) -> None:
        self.sink = sink
        self._log: dict[str, Any] | None = log

    def emit(self, event: LoopEvent) -> None:
        if self._log is not None and isinstance(event, _TOKEN_EVENTS):
            self._log.setdefault("first_token_ms", int(time.time() * 1000))
            self._log = None
        self.sink.emit(event)


class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens
        self.at = at


class RefusalGate:
    """Token buckets bounding refused-request records: ``per_tenant`` per second (burst
    ``tenant_burst``) for each tenant and ``per_process`` per second (burst ``process_burst``)
    in all. A refusal over either is counted, not written; the next record written carries the
    count (``refusals_dropped``). A plain class: it is built at import of every cold start."""

    def __init__(
        self,
        *,
        per_tenant: float = 1.0,
        tenant_burst: float = 10.0,
        per_process: float = 10.0,
        process_burst: float = 50.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_tenant = per_tenant
        self.tenant_burst = tenant_burst
        self.per_process = per_process
        self.process_burst = process_burst
        self.clock = clock
        self.dropped = 0
        self._tenants: dict[str, _Bucket] = {}
        self._process: _Bucket | None = None

    def _take(self, bucket: _Bucket, rate: float, burst: float, now: float) -> bool:
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        return bucket.tokens >= 1.0

    def admit(self, tenant: str) -> int | None:
        """None when ``tenant``'s refusal must not be written; else how many were dropped
        since the last one written (and that count restarts)."""
        now = self.clock()
        if self._process is None:
            self._process = _Bucket(self.process_burst, now)
        if len(self._tenants) > 4096:  # many tenants at once: start their buckets afresh
            self._tenants.clear()
        bucket = self._tenants.setdefault(tenant, _Bucket(self.tenant_burst, now))
        own = self._take(bucket, self.per_tenant, self.tenant_burst, now)
        shared = self._take(self._process, self.per_process, self.process_burst, now)
        if not (own and shared):
            self.dropped += 1
            return None
        bucket.tokens -= 1.0
        self._process.tokens -= 1.0
        dropped, self.dropped = self.dropped, 0
        return dropped


async def log_refused(
    store: Any,
    gate: RefusalGate,
    *,
    tenant: str,
    request_id: str,
    api_key_id: str,
    model: str,
    status_code: int,
    error: dict[str, Any],
    started_ms: int,
    log: dict[str, Any] | None = None,
) -> bool:
    """Write the request-log record of a refused create (one write), unless the gate says no.
    True when written; a failed write is logged (ids and status only) and never raised."""
    dropped = gate.admit(tenant)
    if dropped is None:
        return False
    extra = dict(log or {})
    if dropped:
        extra["refusals_dropped"] = dropped
    entry = refused_entry(
        tenant=tenant,
        request_id=request_id,
        api_key_id=api_key_id,
        model=model,
        status_code=status_code,
        error=error,
        started_ms=started_ms,
        ended_ms=int(time.time() * 1000),
        log=extra,
    )
    try:
        await store.log_request(entry)
    except Exception:
        _log.exception("could not log the refused request %s (tenant %s)", request_id, tenant)
        return False
    return True


def _clipped(value: Any, most: int | None, cut: list[bool]) -> Any:
    if isinstance(value, dict):
        return {
            k: _clipped(v, most, cut) for k, v in value.items() if k.lower() not in _SECRET_KEYS
        }
    if isinstance(value, list):
        return [_clipped(v, most, cut) for v in value]
    if isinstance(value, str) and most is not None and len(value) > most:
        cut[0] = True
        return value[:most]
    return value


def logged_content(
    input_items: list[Any],
    output_items: list[Any],
    *,
    request: dict[str, Any] | None = None,
    limit: int = CONTENT_BYTES,
) -> dict[str, Any]:
    """``{"input", "output", "request", "truncated"}``: the items and the request's echoed
    parameters (instructions, tools, sampling settings...), without any ``headers`` or
    ``authorization`` key, whose compressed JSON fits in ``limit`` bytes: long strings are cut
    (to 8192, 1024, then 128 characters), then the parameters are left out, then the first
    output items that fit are kept, then the newest input items that fit; ``truncated`` says
    whether anything was cut."""
    from responses_gateway.store._codec import encode_json  # zlib and json only

    def fits(content: dict[str, Any]) -> bool:
        return len(encode_json(content)[0]) <= limit

    cut = [False]
    content: dict[str, Any] = {}
    for most in _CLIPS:
        content = {
            "input": _clipped(list(input_items), most, cut),
            "output": _clipped(list(output_items), most, cut),
            "request": _clipped(dict(request or {}), most, cut),
            "truncated": cut[0],
        }
        if fits(content):
            return content
    content["request"] = {}
    content["truncated"] = True
    whole = {"input": content["input"], "output": content["output"]}
    content["input"] = content["output"] = []
    for side in ("output", "input"):  # the response's own items first: the input is history
        items = whole[side]
        low, high = 0, len(items)  # the most items kept that fit: a binary search
        while low < high:
            mid = (low + high + 1) // 2
            content[side] = items[len(items) - mid :] if side == "input" else items[:mid]
            if fits(content):
                low = mid
            else:
                high = mid - 1
        content[side] = items[len(items) - low :] if side == "input" else items[:low]
    return content
