"""The Bedrock adapter: a Responses model call over Amazon Bedrock's Converse API.

Owns both directions of the Converse wire (``POST /model/{modelId}/converse-stream``, the AWS
event-stream framing, or ``/converse`` unstreamed when the provider's ``streaming`` is ``off``,
and once in ``auto`` when the stream broke before its first event, by the rule every wire
follows: :func:`~responses_gateway.adapters.wire.break_point` and
:func:`~responses_gateway.adapters.wire.decide_after_break`).
:func:`to_converse_request` turns a :class:`ModelCall` into the exact request body (pure, no I/O);
:class:`BedrockAdapter` signs it (:class:`~responses_gateway.adapters.aws_auth.SigV4` with the
runtime's own credentials, or a Bedrock API key as a bearer token), sends it, decodes the frames
(:mod:`responses_gateway.adapters.eventstream`) and reports the output through the
:class:`~responses_gateway.loop.output.OutputWriter`. It never decides what the loop does next.
The request body is :func:`~responses_gateway.adapters.converse_request.to_converse_request`'s;
``docs/bedrock.md`` has the mapping tables; the rules in short:

* ``instructions`` and ``system``/``developer`` messages become ``system`` blocks (in order);
  every other item joins the ``user`` or ``assistant`` message it belongs to, consecutive items of
  one role merged into one message (Converse wants the roles to alternate). Blank text is not
  sent (Converse refuses blank text blocks).
* Images and files travel as bytes: ``input_image`` with a data URL (png, jpeg, gif, webp) and
  ``input_file`` with ``file_data`` (pdf, csv, doc, docx, xls, xlsx, html, txt, md). A URL or a
  ``file_id`` cannot be fetched by Bedrock and is a 400 naming it.
* ``function_call`` is a ``toolUse`` block (its arguments parsed as JSON: Converse takes a JSON
  document; arguments that are not JSON travel as ``{"arguments": "<text>"}``);
  ``function_call_output`` a ``toolResult`` block (text, and image or file parts).
* A transcript that starts with the model's turn (truncated, or so sent) opens with a short user
  turn saying the conversation continues: Converse wants the user first.
* In a user message, ``toolResult`` blocks come first (a user message sent between the calls and
  their outputs follows them), as the models that check tool pairing want.
* A ``reasoning`` item whose ``encrypted_content`` is Bedrock's own (the gateway keeps the
  model's signature, or the redacted reasoning, there, sealed for the client) is a
  ``reasoningContent`` block again; reasoning from other wires has no signature the model would
  accept and is not sent.
* ``tool_choice``: ``auto``, ``required`` (``any``) and a named function (``tool``); ``none``
  leaves the tools out unless the transcript has tool blocks (Converse then requires them: the
  model is not forced). ``parallel_tool_calls: false`` is applied here: tool calls after the
  first are not reported. ``max_output_tokens``, ``temperature``, ``top_p`` go to
  ``inferenceConfig``; a ``json_schema`` ``text.format`` to ``outputConfig`` (``json_object`` as
  the schema of any object); ``reasoning.effort`` to the model family's own field in
  ``additionalModelRequestFields`` (Anthropic: a thinking budget, with ``maxTokens`` above it;
  Amazon Nova: ``reasoningConfig``; others: ``reasoning_effort``), under the provider's own
  ``additional_model_request_fields``, which win; ``user`` to ``requestMetadata``;
  ``service_tier`` default, flex and priority to ``serviceTier``. With the provider's
  ``cache_points``, cache points mark the system blocks, the tools and the transcript.

Answers: text, tool calls (arguments streamed), reasoning (signature or redacted content sealed
into ``encrypted_content``). ``max_tokens`` and ``model_context_window_exceeded`` stop as
``length``, ``guardrail_intervened`` and ``content_filtered`` as ``content_filter``; a malformed
answer is a :class:`~responses_gateway.errors.ModelOutputError`. Usage counts cache reads and
writes into ``input_tokens`` (OpenAI counts cached tokens as input), cache reads as
``cached_tokens``, cache writes as ``cache_write_tokens`` (priced apart). Errors map by AWS
error type (:data:`ERROR_STATUS`); a context-window error is
``context_length_exceeded`` (Bedrock's wordings are in
:data:`~responses_gateway.context.errors.CONTEXT_LENGTH_WORDINGS`); throttling is a 429 the SDK
retries and the router cools down on.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from responses_gateway.adapters.aws_auth import SigV4
from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.converse_request import (
    REDACTED_PREFIX,
    SIGNATURE_PREFIX,
    BedrockOptions,
    to_converse_request,
)
from responses_gateway.adapters.eventstream import EventMessage, EventStreamDecoder
from responses_gateway.adapters.wire import (
    NOT_A_STREAM,
    CallProgress,
    NotAnAnswer,
    Streaming,
    break_point,
    call_failed,
    clean_surrogates,
    decide_after_break,
    finish_reading,
    json_answer,
    passed_headers,
)
from responses_gateway.errors import (
    ModelOutputError,
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTransportError,
)
from responses_gateway.loop.output import (
    FunctionCallWriter,
    MessageWriter,
    OutputWriter,
    ReasoningWriter,
)
from responses_gateway.loop.state import StopReason, TurnResult

__all__ = [
    "ERROR_STATUS",
    "REDACTED_PREFIX",
    "SIGNATURE_PREFIX",
    "BedrockAdapter",
    "BedrockOptions",
    "bedrock_status_error",
    "converse_events",
    "converse_usage",
    "to_converse_request",
]

logger = logging.getLogger(__name__)


# --- errors ----------------------------------------------------------------------------------

ERROR_STATUS: dict[str, int] = {
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "UnrecognizedClientException": 403,
    "ResourceNotFoundException": 404,
    "ModelTimeoutException": 408,
    "ThrottlingException": 429,
    "ServiceQuotaExceededException": 429,
    "InternalServerException": 500,
    "ModelErrorException": 502,
    "ModelStreamErrorException": 502,
    "ModelNotReadyException": 503,
    "ServiceUnavailableException": 503,
}
"""The status of each AWS error type, for an error that came without one (an exception in the
stream); an HTTP error keeps its own status, except those in :data:`_MODEL_FAULTS`."""
_MODEL_FAULTS = frozenset({"ModelErrorException", "ModelStreamErrorException"})
"""A model's own failure, which AWS answers 424: a 502 here, which the router may retry elsewhere
(a 4xx would be the client's fault)."""

_CODES = {429: "rate_limit_exceeded", 404: "model_not_found"}


def _error_type(raw: str) -> str:
    """``ThrottlingException`` from ``ThrottlingException:http://internal.amazon.com/...``."""
    return raw.split(":", 1)[0].strip()


def _exception_name(name: str) -> str:
    """``ThrottlingException`` from the event-stream name ``throttlingException``."""
    return name[:1].upper() + name[1:]


def _aws_error(kind: str, message: str, raw: str, status: int | None = None) -> UpstreamStatusError:
    status = ERROR_STATUS.get(kind) or status or 502
    code = _CODES.get(status)
    error = UpstreamStatusError(
        status, message or f"Bedrock answered {kind or status}.", code=code, body=raw
    )
    if status == 429:
        error.headers["x-should-retry"] = "true"
    return error


def bedrock_status_error(status: int, raw: str, headers: Mapping[str, str]) -> UpstreamStatusError:
    """A non-2xx Bedrock answer (``{"message": ...}`` and ``x-amzn-ErrorType``) as our error."""
    kind = _error_type(headers.get("x-amzn-errortype", ""))
    message = ""
    with contextlib.suppress(ValueError):
        body = json.loads(raw)
        if isinstance(body, dict):
            found = body.get("message") or body.get("Message")
            message = found if isinstance(found, str) else ""
            kind = kind or _error_type(str(body.get("__type") or "").rpartition("#")[2])
    return _aws_error(kind, message or raw.strip()[:500], raw, status)


# --- answer: Converse events -> Responses items ----------------------------------------------

_STOPS: dict[str, StopReason] = {
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
_MALFORMED = frozenset({"malformed_model_output", "malformed_tool_use"})


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def converse_usage(raw: dict[str, Any]) -> dict[str, Any]:
    """Converse ``usage`` as Responses usage (cache reads and writes counted as input)."""
    read, write = _int(raw.get("cacheReadInputTokens")), _int(raw.get("cacheWriteInputTokens"))
    input_tokens = _int(raw.get("inputTokens")) + read + write
    output_tokens = _int(raw.get("outputTokens"))
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


@dataclass(slots=True)
class _Reasoning:
    writer: ReasoningWriter
    signature: list[str] = field(default_factory=list)


class _ConverseStream:
    """The state of one Converse answer, fed one event (its name and payload) at a time."""

    def __init__(self, out: OutputWriter, *, parallel: bool = True) -> None:
        self._out = out
        self._parallel = parallel
        self._message: MessageWriter | None = None
        self._reasoning: dict[int, _Reasoning] = {}
        self._calls: dict[int, FunctionCallWriter | None] = {}
        self._call_count = 0
        self._stop: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.decoded = False
        """Whether any event was taken (one that raised is not): see ``wire.break_point``."""

    def feed(self, name: str, event: dict[str, Any]) -> None:
        handler = getattr(self, f"_on_{name}", None)
        if handler is not None:
            handler(event)
        self.decoded = True

    def _on_contentBlockStart(self, event: dict[str, Any]) -> None:  # noqa: N802
        start = event.get("start") or {}
        use = start.get("toolUse")
        if isinstance(use, dict):
            self._open_call(_int(event.get("contentBlockIndex")), use)

    def _open_call(self, index: int, use: dict[str, Any]) -> None:
        self._close_message()
        self._close_reasoning()
        self._call_count += 1
        if self._call_count > 1 and not self._parallel:
            self._calls[index] = None  # parallel_tool_calls: false: not reported
            return
        name, call_id = str(use.get("name") or ""), use.get("toolUseId")
        if not name:
            raise UpstreamProtocolError("Bedrock sent a tool call without a name.")
        self._calls[index] = self._out.function_call(
            name=name, call_id=call_id if isinstance(call_id, str) else None
        )

    def _on_contentBlockDelta(self, event: dict[str, Any]) -> None:  # noqa: N802
        index = _int(event.get("contentBlockIndex"))
        delta = event.get("delta") or {}
        if isinstance(delta.get("text"), str):
            self._close_reasoning()
            if self._message is None:
                self._message = self._out.message()
            self._message.text(delta["text"])
        elif isinstance(delta.get("toolUse"), dict):
            if index not in self._calls:
                raise UpstreamProtocolError("Bedrock sent tool input for a block it never opened.")
            call = self._calls[index]
            if call is not None:
                call.arguments(str(delta["toolUse"].get("input") or ""))
        elif isinstance(delta.get("reasoningContent"), dict):
            self._reasoning_delta(index, delta["reasoningContent"])

    def _reasoning_delta(self, index: int, delta: dict[str, Any]) -> None:
        self._close_message()
        if isinstance(delta.get("redactedContent"), str):
            writer = self._out.reasoning()
            writer.set_encrypted_content(REDACTED_PREFIX + delta["redactedContent"])
            writer.finish()
            return
        slot = self._reasoning.get(index)
        if slot is None:
            self._close_reasoning()
            slot = self._reasoning[index] = _Reasoning(self._out.reasoning())
        if isinstance(delta.get("text"), str):
            slot.writer.text(delta["text"])
        if isinstance(delta.get("signature"), str):
            slot.signature.append(delta["signature"])

    def _on_contentBlockStop(self, event: dict[str, Any]) -> None:  # noqa: N802
        index = _int(event.get("contentBlockIndex"))
        call = self._calls.get(index)
        if call is not None:
            if not "".join(call.item.get("arguments") or "").strip():
                call.arguments("{}")
            call.finish()
        elif index in self._reasoning:
            self._finish_reasoning(index)

    def _finish_reasoning(self, index: int) -> None:
        slot = self._reasoning.pop(index)
        if slot.signature:
            slot.writer.set_encrypted_content(SIGNATURE_PREFIX + "".join(slot.signature))
        slot.writer.finish()

    def _close_reasoning(self) -> None:
        for index in list(self._reasoning):
            self._finish_reasoning(index)

    def _close_message(self) -> None:
        if self._message is not None:
            self._message.finish()
            self._message = None

    def _on_messageStop(self, event: dict[str, Any]) -> None:  # noqa: N802
        reason = event.get("stopReason")
        self._stop = reason if isinstance(reason, str) else "end_turn"
        if self._stop in _MALFORMED:
            raise ModelOutputError(f"The model's answer was malformed (Bedrock: {self._stop}).")
        if self.result().stop == "stop":
            self._close_message()
            self._close_reasoning()

    def _on_metadata(self, event: dict[str, Any]) -> None:
        if isinstance(event.get("usage"), dict):
            self.usage = converse_usage(event["usage"])
        self.done = True

    @property
    def stopped(self) -> bool:
        """Whether the model's ``messageStop`` arrived."""
        return self._stop is not None

    def result(self) -> TurnResult:
        return TurnResult(stop=_STOPS.get(self._stop or "", "stop"), usage=self.usage)


def _payload(message: EventMessage) -> dict[str, Any]:
    try:
        value = json.loads(message.payload or b"{}")
    except ValueError as exc:
        raise UpstreamProtocolError("Bedrock sent an event that is not JSON.") from exc
    if not isinstance(value, dict):
        raise UpstreamProtocolError("Bedrock sent an event that is no object.")
    cleaned: dict[str, Any] = clean_surrogates(value)
    return cleaned


def _event(message: EventMessage) -> tuple[str, dict[str, Any]]:
    """A frame as (event name, payload); an exception or error frame raises its error."""
    if message.message_type == "exception":
        body = _payload(message)
        found = body.get("message")
        text = found if isinstance(found, str) else ""
        raw = message.payload.decode("utf-8", "replace")
        raise _aws_error(_exception_name(message.event_type), text, raw)
    if message.message_type == "error":
        code = str(message.headers.get(":error-code") or "")
        text = str(message.headers.get(":error-message") or "")
        raise _aws_error(code, text, text)
    return message.event_type, _payload(message)


def converse_events(answer: Any) -> list[tuple[str, dict[str, Any]]]:
    """An unstreamed Converse answer as the events its stream would have held.

    Raises:
        UpstreamProtocolError: the answer is no Converse answer (no ``output`` object: an error
            body such as ``{"message": ...}`` sent with a 2xx status, which names it).
    """
    if not isinstance(answer, dict):
        raise UpstreamProtocolError("Bedrock's answer is no object.")
    if not isinstance(answer.get("output"), dict):
        found = answer.get("message") or answer.get("Message") or answer.get("error")
        if isinstance(found, dict):
            found = found.get("message")
        said = f": {found}" if isinstance(found, str) and found else ""
        raise UpstreamProtocolError(f"Bedrock answered 200 without an answer{said}")
    message = (answer.get("output") or {}).get("message") or {}
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
    for index, block in enumerate(message.get("content") or []):
        if not isinstance(block, dict):
            continue
        if isinstance(block.get("text"), str):
            delta: dict[str, Any] = {"text": block["text"]}
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            start = {"toolUseId": use.get("toolUseId"), "name": use.get("name")}
            opened = {"start": {"toolUse": start}, "contentBlockIndex": index}
            events.append(("contentBlockStart", opened))
            delta = {"toolUse": {"input": json.dumps(use.get("input", {}))}}
        elif isinstance(block.get("reasoningContent"), dict):
            reasoning = block["reasoningContent"]
            text = reasoning.get("reasoningText") or {}
            if "redactedContent" in reasoning:
                delta = {"reasoningContent": {"redactedContent": reasoning["redactedContent"]}}
            else:
                delta = {"reasoningContent": {"text": text.get("text") or ""}}
                if text.get("signature"):
                    text_delta = {"delta": delta, "contentBlockIndex": index}
                    events.append(("contentBlockDelta", text_delta))
                    delta = {"reasoningContent": {"signature": text["signature"]}}
        else:
            continue
        events.append(("contentBlockDelta", {"delta": delta, "contentBlockIndex": index}))
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
    events.append(("messageStop", {"stopReason": answer.get("stopReason") or "end_turn"}))
    events.append(("metadata", {"usage": answer.get("usage") or {}}))
    return events


class BedrockAdapter:
    """Calls Bedrock's Converse API for one provider (a region's runtime endpoint).

    Args:
        client: the shared upstream HTTP client.
        base_url: the runtime endpoint (``https://bedrock-runtime.<region>.amazonaws.com``).
        region: the signing region.
        api_key: a Bedrock API key, sent as a bearer token instead of a signature (optional).
        headers: extra headers for every call.
        timeout: seconds to wait for upstream bytes (connecting: 10 s).
        options: the provider's Bedrock settings.
        streaming: ``off`` calls ``Converse``; ``on`` ``ConverseStream``; ``auto`` (the default)
            ``ConverseStream``, then ``Converse`` once when it broke before its first event.
        auth: how requests are signed (default: :class:`SigV4` for ``region``).
    """

    wire = "bedrock"

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        region: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        options: BedrockOptions | None = None,
        streaming: Streaming = "auto",
        auth: httpx.Auth | None = None,
    ) -> None:
        self._client = client
        self._base_url = base_url.rstrip("/")
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._auth: httpx.Auth | None = None
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        else:
            self._auth = auth if auth is not None else SigV4(region)
        self._timeout = None if timeout is None else httpx.Timeout(timeout, connect=10.0)
        self.options = options if options is not None else BedrockOptions()
        self.streaming: Streaming = streaming

    def url(self, model: str, stream: bool) -> str:
        """The operation's URL for ``model`` (a model id, inference profile id or ARN)."""
        operation = "converse-stream" if stream else "converse"
        return f"{self._base_url}/model/{quote(model, safe='-_.~')}/{operation}"

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        """Call the model once (see the module docstring for the rules).

        ``streaming`` as on every wire (:func:`~responses_gateway.adapters.wire.read_model_answer`):
        ``auto`` calls ConverseStream and, when its answer breaks before its first event
        (:func:`~responses_gateway.adapters.wire.break_point`, decided by
        :func:`~responses_gateway.adapters.wire.decide_after_break`), calls Converse once;
        ``on`` only streams; ``off`` only calls Converse.

        Raises:
            InvalidRequestError: the request holds something Converse cannot carry.
            UpstreamStatusError: Bedrock answered with an error (before or during the stream).
            UpstreamTransportError: Bedrock could not be reached, timed out or dropped.
            UpstreamProtocolError: the answer could not be decoded.
        """
        body = json.dumps(to_converse_request(call, self.options)).encode()
        parallel = call.params.get("parallel_tool_calls") is not False
        broken: UpstreamError | None = None
        if self.streaming != "off":
            stream = _ConverseStream(out, parallel=parallel)
            progress = CallProgress()
            try:
                await self._call(call.model, body, stream, out, progress)
                return stream.result()
            except UpstreamError as error:
                point = break_point(error, answered=progress.answered, decoded=stream.decoded)
                if not decide_after_break(self.streaming, point, error):
                    raise
                logger.warning(
                    "Bedrock's stream broke before its first event (%s): calling Converse",
                    error.message,
                )
                broken = error
        answer = _ConverseStream(out, parallel=parallel)
        try:
            await self._call(call.model, body, answer, out, None)
        except NotAnAnswer:
            if broken is None:
                raise
            raise broken from None  # no readable answer either: the stream's failure says more
        return answer.result()

    async def _call(
        self,
        model: str,
        body: bytes,
        stream: _ConverseStream,
        out: OutputWriter,
        progress: CallProgress | None,
    ) -> None:
        """One call: ConverseStream when ``progress`` is given (it records the 2xx head), else
        Converse; its answer fed to ``stream``."""
        streamed = progress is not None
        timeout = httpx.USE_CLIENT_DEFAULT if self._timeout is None else self._timeout
        request = self._client.build_request(
            "POST", self.url(model, streamed), content=body, headers=self._headers, timeout=timeout
        )
        try:
            response = await self._client.send(request, auth=self._auth, stream=True)
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise call_failed(exc) from exc
        try:
            await self._read(response, stream, progress, out)
        except (httpx.TransportError, httpx.DecodingError) as exc:
            what = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
            raise UpstreamTransportError(
                f"The upstream model connection {what} mid-stream: {type(exc).__name__}"
            ) from exc
        finally:
            await response.aclose()

    async def _read(
        self,
        response: httpx.Response,
        stream: _ConverseStream,
        progress: CallProgress | None,
        out: OutputWriter,
    ) -> None:
        if not response.is_success:
            raw = (await response.aread()).decode("utf-8", errors="replace")
            error = bedrock_status_error(response.status_code, raw, response.headers)
            error.headers.update(passed_headers(response))
            raise error
        if progress is not None:
            progress.answered = True
        content_type = response.headers.get("content-type", "")
        if progress is None or content_type.startswith(NOT_A_STREAM):
            await self._read_answer(response, stream, progress is None, out)
            return
        out.upstream_responding()
        decoder = EventStreamDecoder()
        chunks = response.aiter_bytes()
        async for chunk in chunks:
            for message in decoder.feed(chunk):
                name, event = _event(message)
                stream.feed(name, event)
            if stream.done:
                await finish_reading(chunks)  # so the connection is reused
                break
        if not stream.stopped:
            raise UpstreamTransportError("Bedrock ended the stream before the model stopped.")

    async def _read_answer(
        self, response: httpx.Response, stream: _ConverseStream, asked: bool, out: OutputWriter
    ) -> None:
        """A JSON answer: Converse's (``asked``), or one sent to a ConverseStream call, which is
        read as Converse's only in ``auto`` (as the other wires read JSON sent for a stream)."""
        text = (await response.aread()).decode("utf-8", errors="replace")
        json_type = response.headers.get("content-type", "").startswith("application/json")
        if not asked and not (json_type and self.streaming == "auto"):
            kind = "JSON" if json_type else "HTML"
            raise NotAnAnswer(
                f"Bedrock answered with {kind} instead of an event stream: {text[:200]}"
            )
        events = converse_events(json_answer(text))
        out.upstream_responding()
        for name, event in events:
            stream.feed(name, event)
