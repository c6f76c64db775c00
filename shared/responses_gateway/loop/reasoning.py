"""Reasoning for stateless clients: what the gateway puts in a reasoning item's
``encrypted_content``, how a replayed one is restored, and when raw reasoning is also shown as a
summary.

Owns three rules:

- **Sealing.** When the request's ``include`` asks for ``reasoning.encrypted_content`` (Codex does,
  every turn, with ``store: false``), every reasoning item the gateway outputs, from any upstream,
  carries an ``encrypted_content`` sealed (and so does any reasoning item that came with an
  upstream blob, which a client never sees bare) by :mod:`responses_gateway.sealing` (purpose
  ``"reasoning"``, bound to the tenant). Its payload is ``{"v": 1, "text", "upstream"}``: the raw
  reasoning text (``None`` when there was none) and the upstream's own ``encrypted_content``
  (a Responses upstream's blob, ``None`` otherwise).
- **Restoring.** A replayed reasoning item whose ``encrypted_content`` is one of ours gets, for the
  upstream, its reasoning text back as ``content`` (when it carries none) and the upstream's
  original blob back as ``encrypted_content`` (removed when there was none), so each adapter finds
  what it can use: harmony renders the text, chat sends it as ``reasoning_content`` when the
  provider accepts that, a Responses upstream gets its own blob, unchanged. A client's blob that
  does not open is a 400 :class:`~responses_gateway.sealing.SealedBlobError` naming
  ``input[i].encrypted_content``. Items with ``encrypted_content: null`` pass as they are.
- **Summaries.** When the request asks for ``reasoning.summary`` (``auto``, ``concise``,
  ``detailed``) and the upstream speaks a wire without summaries (chat, harmony), raw reasoning
  text is also presented as summary parts, with the summary events, so clients that show only
  summaries (Codex, the AI SDK, the agents SDK) show it.

It decides nothing about the loop and makes no upstream payload (adapters do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from responses_gateway.sealing import SealedBlobError, looks_sealed, seal, unseal

__all__ = [
    "INCLUDE_ENCRYPTED",
    "PURPOSE",
    "SUMMARY_MODES",
    "ReasoningPolicy",
    "open_client_reasoning",
    "restore_reasoning",
    "sealed_content",
]

PURPOSE = "reasoning"
"""The sealing purpose of reasoning ``encrypted_content``."""
INCLUDE_ENCRYPTED = "reasoning.encrypted_content"
SUMMARY_MODES = frozenset({"auto", "concise", "detailed"})
_SUMMARYLESS_WIRES = frozenset({"chat", "harmony", "bedrock"})
_PAYLOAD_VERSION = 1


@dataclass(frozen=True, slots=True)
class ReasoningPolicy:
    """How the output writer presents one response's reasoning items."""

    tenant: str = "local"
    seal: bool = False
    """Give every reasoning item a sealed ``encrypted_content``."""
    mirror_summary: bool = False
    """Also present raw reasoning text as summary parts."""
    wrap_upstream: bool = False
    """Seal a reasoning item that came with the upstream's own ``encrypted_content`` even when
    ``seal`` is off (a client never sees an upstream blob bare). Off only for writers used
    outside a loop (adapter tests)."""

    @classmethod
    def of(
        cls, request: dict[str, Any], include: list[str], tenant: str, wire: str
    ) -> ReasoningPolicy:
        """The policy for a request (its echoed fields and ``include``) over ``wire``."""
        summary = (request.get("reasoning") or {}).get("summary")
        return cls(
            tenant=tenant,
            seal=INCLUDE_ENCRYPTED in include,
            mirror_summary=summary in SUMMARY_MODES and wire in _SUMMARYLESS_WIRES,
            wrap_upstream=True,
        )


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    parts = content if isinstance(content, list) else []
    return "".join(
        str(p.get("text") or "")
        for p in parts
        if isinstance(p, dict) and p.get("type") == "reasoning_text"
    )


def sealed_content(item: dict[str, Any], tenant: str) -> str:
    """The sealed ``encrypted_content`` for an output reasoning item as it is now (its text, and
    the upstream's blob if the item carries one)."""
    upstream = item.get("encrypted_content")
    payload = {
        "v": _PAYLOAD_VERSION,
        "text": _text_of(item) or None,
        "upstream": upstream if isinstance(upstream, str) and upstream else None,
    }
    return seal(PURPOSE, payload, tenant=tenant)


def open_client_reasoning(raw_input: Any, tenant: str) -> dict[str, dict[str, Any]]:
    """The payloads of the sealed reasoning a client sent in ``input``, by blob.

    Raises:
        SealedBlobError: a reasoning item's ``encrypted_content`` is not a blob of ours for this
            tenant (``param`` is ``input[i].encrypted_content``).
    """
    opened: dict[str, dict[str, Any]] = {}
    if not isinstance(raw_input, list):
        return opened
    for index, item in enumerate(raw_input):
        if not isinstance(item, dict) or item.get("type") != "reasoning":
            continue
        blob = item.get("encrypted_content")
        if not isinstance(blob, str) or blob in opened:
            continue
        try:
            opened[blob] = unseal(PURPOSE, blob, tenant=tenant)
        except SealedBlobError as error:
            error.param = f"input[{index}].encrypted_content"
            raise
    return opened


def _restored(item: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    out = dict(item)
    text = payload.get("text")
    if isinstance(text, str) and text and not _text_of(item):
        out["content"] = [{"type": "reasoning_text", "text": text}]
    upstream = payload.get("upstream")
    if isinstance(upstream, str) and upstream:
        out["encrypted_content"] = upstream
    else:
        out.pop("encrypted_content", None)
    return out


def restore_reasoning(
    items: list[dict[str, Any]], tenant: str, opened: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """``items`` with every sealed reasoning item restored for the upstream (see the module
    docstring). Blobs not in ``opened`` (stored history) are opened here; one that no longer opens
    (its key was retired) loses its ``encrypted_content`` instead of failing the request, and an
    unsealed upstream blob (history written before sealing existed) is kept as it is."""
    out: list[dict[str, Any]] = []
    for item in items:
        blob = item.get("encrypted_content") if item.get("type") == "reasoning" else None
        if not isinstance(blob, str) or (blob not in opened and not looks_sealed(blob)):
            out.append(item)
            continue
        payload = opened.get(blob)
        if payload is None:
            try:
                payload = unseal(PURPOSE, blob, tenant=tenant)
            except SealedBlobError:
                payload = {}
        out.append(_restored(item, payload))
    return out
