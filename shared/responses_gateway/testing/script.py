"""What a scripted upstream model says: turns, tool calls, usage, fault knobs, and the script.

Owns the plain data that drives the fake upstream servers (:class:`Turn`, :class:`ToolCall`,
:class:`Usage`), the recording of received requests (:class:`RecordedRequest`) and the
thread-safe FIFO of turns (:class:`ScriptedUpstream`). It knows nothing about HTTP or wire
formats: :mod:`responses_gateway.testing.fake_upstream` renders a turn as Chat Completions,
Responses or a harmony completion, and :mod:`responses_gateway.testing.demo` computes the turn
used when the script is empty. Nothing here may import the gateway's loop, adapters or app.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "ChatEnd",
    "FinishReason",
    "RecordedRequest",
    "RelayedItem",
    "ScriptedUpstream",
    "ToolCall",
    "Turn",
    "TurnFactory",
    "Usage",
    "Wire",
    "StreamLimit",
    "error_envelope",
    "streams_nothing_with_auto_tools",
]

Wire: TypeAlias = Literal["chat", "responses", "harmony"]
"""The upstream wire format a request arrived in."""

FinishReason: TypeAlias = Literal["stop", "length", "content_filter"]
"""Why a scripted turn ends (``tool_calls`` is derived on the chat wire)."""

ChatEnd: TypeAlias = Literal["done", "no_done", "eof"]
"""How a Chat Completions stream ends: finish_reason + ``[DONE]``; finish_reason only; plain EOF."""

TurnFactory: TypeAlias = Callable[[dict[str, Any], Wire], "Turn"]
"""A turn computed from the request body and wire at the moment the request arrives."""

StreamLimit: TypeAlias = Callable[[dict[str, Any], Wire], bool]
"""Whether a server cannot stream this request (see :attr:`ScriptedUpstream.cannot_stream`)."""


def streams_nothing_with_auto_tools(body: dict[str, Any], wire: Wire) -> bool:
    """llama-cpp-python's server: a streamed chat request with ``tools`` and ``tool_choice``
    ``"auto"`` (or none) raises inside its stream ("Automatic streaming tool choice is not
    supported"), which is answered 200 and then dropped mid-body before any data event."""
    return wire == "chat" and bool(body.get("tools")) and body.get("tool_choice", "auto") == "auto"


@dataclass(slots=True)
class ToolCall:
    """One function call the scripted model makes."""

    name: str
    """The function name."""
    arguments: str
    """The arguments, a JSON string sent verbatim (it may be invalid JSON on purpose)."""
    call_id: str | None = None
    """The call id (``call_...``); None = a fresh deterministic id from the upstream."""
    namespace: str | None = None
    """Responses wire: the call's ``namespace`` field (chat and harmony carry only ``name``)."""


@dataclass(slots=True)
class RelayedItem:
    """Responses wire only: an output item with its own recorded events (a hosted tool's
    ``web_search_call``, an ``image_generation_call`` with partial images...), emitted as OpenAI
    does: ``output_item.added`` with ``added``, then ``events`` (each gets the item's
    ``output_index`` and ``item_id`` unless it has them), then ``output_item.done`` with
    ``done``. See :mod:`responses_gateway.testing.hosted` for recorded shapes."""

    added: dict[str, Any]
    events: list[dict[str, Any]]
    done: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage reported by the scripted model."""

    input_tokens: int
    output_tokens: int
    """Includes ``reasoning_tokens``, as OpenAI counts them."""
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    """Bedrock wire only: input tokens written to the prompt cache (``cacheWriteInputTokens``;
    counted in ``input_tokens``, as cached ones are)."""

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens


def error_envelope(
    message: str,
    *,
    type: str = "server_error",
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """An OpenAI error envelope: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


@dataclass(slots=True)
class Turn:
    """One scripted model answer, with knobs for the awkward corners of both wire formats.

    Content is emitted in this order: reasoning, text, tool calls. Knobs that do not apply to the
    wire a request arrived in are ignored. Chat streams always open with a
    ``{"role": "assistant", "content": ""}`` delta (as OpenAI and vLLM do), even before tool
    calls, and carry one tool-call entry per chunk.
    """

    text: str | None = None
    """Assistant text, or None for no message."""
    reasoning: str | None = None
    """Raw reasoning text. Chat: the ``reasoning_content`` (or ``reasoning``) delta field.
    Responses: a ``reasoning`` item with ``content: [{"type": "reasoning_text"}]``."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Function calls, in output order."""
    finish: FinishReason = "stop"
    """``stop`` becomes ``tool_calls`` on the chat wire when there are calls. On the Responses
    wire ``length``/``content_filter`` end with ``response.incomplete``."""
    usage: Usage | None = None
    """None = computed deterministically: one token per whitespace-separated word."""

    # -- faults -----------------------------------------------------------------------------
    status: int = 200
    """HTTP status; anything but 200 answers ``error_body`` as JSON before any SSE byte."""
    error_body: dict[str, Any] | None = None
    """The error JSON for a non-200 ``status`` (default: an OpenAI envelope for the status). Its
    ``error`` object is also what ``error_event_after`` sends in-stream."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers (e.g. ``retry-after``, ``x-should-retry``)."""
    drop_after: int | None = None
    """Stream: abort the connection after this many SSE events (the client sees a transport
    error, never a clean end). Non-stream: send the headers and half the body, then abort."""
    error_event_after: int | None = None
    """Stream only: after this many events send an in-stream error and end. Chat: a
    ``data: {"error": {...}}`` chunk (no ``[DONE]``); Responses: ``response.failed`` (or an
    ``error`` event, see ``responses_error``)."""

    cut_mid_event: bool = False
    """Stream only, with ``drop_after``: send the first half of the next event's bytes before
    aborting (a chunked body cut inside an event)."""
    garbage_after: int | None = None
    """Stream only: after this many events send one event whose data is no JSON, then end the
    stream cleanly (an undecodable event)."""
    role_only: bool = False
    """Stream only, chat and harmony: send just an opening chunk that carries nothing (chat: a
    ``{"role": "assistant"}`` delta; harmony: an empty text), then ``[DONE]``: no content, no
    finish_reason, no usage, as llama-cpp-python's one-slot server answers a request that arrives
    while another generates."""
    error_as_200: bool = False
    """Answer ``200`` with ``{"error": ...}`` (``error_object()``) as a JSON body, streamed or
    not, as some servers report a failure."""

    hold_after: int | None = None
    """Stream only: after this many SSE events send nothing more and keep the connection open
    until the client goes away. (Any stream its client abandons before the end is counted:
    :meth:`ScriptedUpstream.wait_for_disconnects`.)"""

    chunk_size: int | None = None
    """Both wires: split text, reasoning and arguments deltas into pieces of this many
    characters. None = text and reasoning word by word, arguments in about 3 fragments."""

    # -- chat-only shape knobs ----------------------------------------------------------------
    tool_call_index: Literal["normal", "omit"] = "normal"
    """``omit`` leaves ``index`` out of every tool-call delta."""
    tool_call_ids: Literal["first", "every"] = "first"
    """``first``: id, type and name only on a call's first chunk; ``every``: on each chunk."""
    arguments_mode: Literal["fragmented", "single", "final_chunk"] = "fragmented"
    """``fragmented``: a header chunk (arguments "") then fragments; ``single``: one chunk with
    id, name and all arguments; ``final_chunk``: header chunks, then every call's arguments in
    the same chunk as ``finish_reason``."""
    interleave: bool = False
    """Interleave parallel calls' chunks round-robin by index, index 1 first."""
    end: ChatEnd = "done"
    """How the chat stream ends (see :data:`ChatEnd`); ``eof`` sends no usage chunk either."""
    reasoning_field: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    """The delta/message field that carries reasoning on the chat wire."""
    usage_chunk: bool = True
    """Send a final ``choices: []`` usage chunk when the request set
    ``stream_options.include_usage``."""

    # -- responses-only knobs -----------------------------------------------------------------
    relayed_items: list[RelayedItem] = field(default_factory=list)
    """Items emitted before every other output item, each with its own events."""
    reasoning_summary: list[str] | None = None
    """Summary parts of the reasoning item (``reasoning_summary_*`` events)."""
    encrypted_content: str | None = None
    """``encrypted_content`` of the reasoning item."""
    arguments_only_in_done: bool = False
    """Send no ``function_call_arguments.delta``; the arguments appear only in ``.done``."""
    responses_error: Literal["response.failed", "error"] = "response.failed"
    """Which in-stream error ``error_event_after`` sends on the Responses wire."""

    # -- harmony-only knobs -------------------------------------------------------------------
    stop_in_text: bool = False
    """End the completion text with its stop token (``<|return|>`` or ``<|call|>``), as a server
    that returns matched stop sequences does (by default the stop token is not sent)."""

    @classmethod
    def http_error(
        cls,
        status: int,
        message: str = "Scripted upstream error.",
        *,
        type: str | None = None,
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Turn:
        """A turn that answers ``status`` with an OpenAI error envelope."""
        return cls(
            status=status,
            error_body=error_envelope(
                message,
                type=type or _default_error_type(status),
                code=code or ("rate_limit_exceeded" if status == 429 else None),
                param=param,
            ),
            headers=dict(headers or {}),
        )

    def error_object(self) -> dict[str, Any]:
        """The inner error object for HTTP errors and in-stream errors."""
        inner = self.error_body.get("error") if self.error_body is not None else None
        if isinstance(inner, dict):
            return dict(inner)
        if self.status != 200:
            message = f"Scripted upstream error (HTTP {self.status})."
            return {
                "message": message,
                "type": _default_error_type(self.status),
                "param": None,
                "code": "rate_limit_exceeded" if self.status == 429 else None,
            }
        return {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
            "param": None,
            "code": "server_error",
        }


def _default_error_type(status: int) -> str:
    if status == 429:
        return "requests"
    if status in (401, 403):
        return "authentication_error" if status == 401 else "permission_error"
    if 400 <= status < 500:
        return "invalid_request_error"
    return "server_error"


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the fake upstream received, as received."""

    path: str
    """The URL path, e.g. ``/v1/chat/completions``."""
    headers: dict[str, str]
    """Request headers, names lower-cased (repeated headers joined with ``", "``)."""
    json: dict[str, Any]
    """The parsed JSON body (``{}`` for a GET or an unparsable body)."""
    method: str = "POST"
    received_at: float = 0.0
    """``time.monotonic()`` when the request arrived."""
    peer: str = ""
    """The client's ``host:port``: requests with the same peer came over one connection."""
    prompt: str | None = None
    """``/v1/completions`` only: the prompt as text (token ids decoded, special tokens kept)."""


class ScriptedUpstream:
    """A FIFO of scripted turns plus a recording of every request; shared by every wire.

    Each model request (chat, responses or harmony completions) pops the next turn. When the
    script is empty the request is answered by the ``brain`` factory if one is set, else by the
    demo model
    (:func:`responses_gateway.testing.demo.demo_turn`), or, with ``demo=False``, with HTTP 500
    ``script_exhausted``. Every method is thread-safe: the
    server usually runs in another thread than the test.
    """

    def __init__(
        self,
        *turns: Turn | TurnFactory,
        demo: bool = True,
        models: Iterable[str] = (),
        responses_only_models: Iterable[str] = (),
        context_windows: Mapping[str, int] | None = None,
        brain: TurnFactory | None = None,
        cannot_stream: StreamLimit | None = None,
    ) -> None:
        """Create a script.

        Args:
            *turns: Initial turns (or factories computing a turn from ``(body, wire)``).
            demo: Answer with the demo model once the script is empty (else HTTP 500).
            models: Extra model names listed by ``GET /v1/models`` (``demo`` always is).
            responses_only_models: Models the chat endpoint refuses with OpenAI's 400
                ``unsupported_api_for_model`` (pointing at ``/v1/responses``).
            context_windows: ``max_model_len`` reported by ``GET /v1/models`` per model (the
                model is listed too).
            brain: A factory answering every request once the script is empty (before the
                demo model): a model that reads the transcript, such as
                :func:`responses_gateway.testing.brain.brain_turn`.
            cannot_stream: A server limitation: streamed requests it matches are answered 200
                with an event stream that breaks before its first data event (as
                llama-cpp-python's server raises inside it and drops the connection mid-body),
                and use no turn (the same request unstreamed gets it), as
                :func:`streams_nothing_with_auto_tools`.
        """
        self._cond = threading.Condition()
        self._turns: deque[Turn | TurnFactory] = deque(turns)
        self._requests: list[RecordedRequest] = []
        self._counters: dict[str, int] = {}
        self._disconnects = 0
        self.demo = demo
        """Answer with the demo model when the script is empty (settable at any time)."""
        self.brain = brain
        """Answers every request once the script is empty, before the demo (settable)."""
        self.models: list[str] = list(models)
        """Extra names for ``GET /v1/models``."""
        self.responses_only_models: set[str] = set(responses_only_models)
        """Models the chat endpoint refuses with 400 ``unsupported_api_for_model``."""
        self.context_windows: dict[str, int] = dict(context_windows or {})
        """``max_model_len`` per model in ``GET /v1/models`` (as vLLM reports it)."""
        self.compactions = 0
        """How many ``POST /v1/responses/compact`` calls were answered."""
        self.cannot_stream = cannot_stream
        """Streamed requests this server answers with a broken event stream (settable)."""

    def push(self, *turns: Turn | TurnFactory) -> None:
        """Append turns to the script."""
        with self._cond:
            self._turns.extend(turns)

    @property
    def pending(self) -> int:
        """How many scripted turns are left."""
        with self._cond:
            return len(self._turns)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._cond:
            return list(self._requests)

    def model_requests(self) -> list[RecordedRequest]:
        """Received ``POST`` requests only (what the model endpoints were asked)."""
        return [r for r in self.requests if r.method == "POST"]

    def record(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: dict[str, Any],
        *,
        peer: str = "",
        prompt: str | None = None,
    ) -> RecordedRequest:
        """Record a received request and wake :meth:`wait_for_requests` callers."""
        rec = RecordedRequest(
            path=path,
            headers=dict(headers),
            json=body,
            method=method,
            received_at=time.monotonic(),
            peer=peer,
            prompt=prompt,
        )
        with self._cond:
            self._requests.append(rec)
            self._cond.notify_all()
        return rec

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``count`` requests were recorded; return them.

        Raises:
            TimeoutError: fewer than ``count`` arrived within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= count, timeout):
                raise TimeoutError(f"expected {count} upstream requests, got {len(self._requests)}")
            return list(self._requests)

    def record_disconnect(self) -> None:
        """Note that a client went away before its stream ended."""
        with self._cond:
            self._disconnects += 1
            self._cond.notify_all()

    @property
    def disconnects(self) -> int:
        """How many streams ended because their client went away."""
        with self._cond:
            return self._disconnects

    def wait_for_disconnects(self, count: int, timeout: float = 5.0) -> int:
        """Block until at least ``count`` streams saw their client go away.

        Raises:
            TimeoutError: fewer than ``count`` disconnects within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._disconnects >= count, timeout):
                raise TimeoutError(f"expected {count} disconnects, saw {self._disconnects}")
            return self._disconnects

    def next_turn(
        self, body: dict[str, Any], wire: Wire, *, demo_view: dict[str, Any] | None = None
    ) -> Turn | None:
        """Pop the next turn for a request (brain or demo turn when empty); None = exhausted.

        ``demo_view`` is the request as a Chat Completions body, for a wire the demo model cannot
        read (a harmony prompt); the demo answers it as a chat request.
        """
        with self._cond:
            entry = self._turns.popleft() if self._turns else None
        if entry is None and self.brain is not None:
            if demo_view is not None:
                return self.brain(demo_view, "chat")
            return self.brain(body, wire)
        if entry is None:
            if not self.demo:
                return None
            from responses_gateway.testing.demo import demo_turn

            if demo_view is not None:
                return demo_turn(demo_view, "chat")
            return demo_turn(body, wire)
        if isinstance(entry, Turn):
            return entry
        return entry(body, wire)

    def new_id(self, prefix: str, sep: str = "_") -> str:
        """A deterministic upstream id such as ``resp_up000001`` (one counter per prefix).

        The ``up`` marker makes upstream ids easy to spot if a gateway ever leaks them.
        """
        with self._cond:
            n = self._counters.get(prefix, 0) + 1
            self._counters[prefix] = n
        return f"{prefix}{sep}up{n:06d}"

    def reset(self) -> None:
        """Forget every turn, recorded request, id counter and tally (settings are kept)."""
        with self._cond:
            self._turns.clear()
            self._requests.clear()
            self._counters.clear()
            self._disconnects = 0
            self.compactions = 0
