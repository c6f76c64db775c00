"""The Responses passthrough adapter: an upstream that itself speaks the OpenAI Responses API.

Owns two translations. :func:`to_responses_request` turns a :class:`ModelCall` into a stateless
``POST /responses`` body (``store: false``, ``stream: true``, the transcript replayed as input
items, never ``previous_response_id``/``conversation``: the gateway owns state).
:class:`ResponsesAdapter` sends it and parses the upstream's SSE stream, event by event, into
:class:`~responses_gateway.loop.output.OutputWriter` calls. Upstream events are parsed, never
forwarded: output indexes, message and function-call item ids and lifecycle events are the
writer's, so the stream the client sees is well formed whatever the upstream sends.

It must not touch ``state.output`` or the sink directly, and decides nothing about what the loop
does next. Every other item type (``web_search_call``, ``image_generation_call`` with its partial
images, ``custom_tool_call``, ``tool_search_call``...) is relayed as the upstream sent it, with
all its own events re-addressed to our output index (:class:`~responses_gateway.loop.output.
RelayWriter`); a namespaced ``function_call`` keeps its ``namespace``. A message keeps its
``refusal`` part and its text's annotations (``response.output_text.annotation.added`` is
relayed).

Request rules: each input item and function tool is rebuilt from its known fields only (clients
may attach extras, which OpenAI rejects with a 400); see :data:`_ITEM_FIELDS`,
:data:`_PART_FIELDS` and :data:`_TOOL_FIELDS`. Item types not listed there pass unchanged but
for ``status``; part and tool types not listed pass unchanged. The client's ``include``
(``params["include"]``) is forwarded, merged with ``reasoning.encrypted_content`` when reasoning
is requested.

Response rules: upstream JSON strings are cleaned of lone UTF-16 surrogates (U+FFFD instead), so
nothing we emit fails to encode. Items found only in ``response.completed``'s ``output`` are
opened and finished there, in output order, their text or arguments as one delta.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.wire import EndpointAdapter, loads_json, read_model_answer
from responses_gateway.errors import (
    UpstreamProtocolError,
    UpstreamStatusError,
)
from responses_gateway.loop.output import (
    FunctionCallWriter,
    MessageWriter,
    OutputWriter,
    ReasoningWriter,
    RelayWriter,
)
from responses_gateway.loop.render import normalize_usage
from responses_gateway.loop.state import StopReason, TurnResult
from responses_gateway.protocol.contract import RESPONSES_ONLY_FIELDS

__all__ = ["PASSED_PARAMS", "ResponsesAdapter", "response_events", "to_responses_request"]

PASSED_PARAMS = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "max_output_tokens",
    "max_tool_calls",
    "parallel_tool_calls",
    "reasoning",
    "text",
    "top_logprobs",
    "user",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
    *RESPONSES_ONLY_FIELDS,
)
"""``ModelCall.params`` keys sent upstream, under the same (Responses) names."""

_SERVER_SIDE_CODES = frozenset({"server_error", "vector_store_timeout"})

_ITEM_FIELDS: dict[str, tuple[str, ...]] = {
    "message": ("type", "role", "content", "phase"),
    "function_call": ("type", "call_id", "name", "namespace", "arguments"),
    "function_call_output": ("type", "call_id", "caller", "output"),
}
"""The fields sent of each input item type. Their ``id`` is ours (or a stored upstream id), which
a stateless upstream cannot resolve, so it is dropped; so is ``status``. ``phase`` labels assistant
messages for newer models, and OpenAI asks clients to keep it."""

_STATUS_KEPT = frozenset(
    {
        "apply_patch_call",
        "apply_patch_call_output",
        "code_interpreter_call",
        "computer_call",
        "computer_call_output",
        "file_search_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "mcp_call",
        "program_output",
        "shell_call",
        "shell_call_output",
        "tool_search_call",
        "tool_search_output",
        "web_search_call",
    }
)
"""Input item types (besides the rebuilt ones of ``_ITEM_FIELDS`` and reasoning) whose input
param declares ``status`` (OpenAI requires it of some): relayed with the status the client sent
(Codex sends it on ``tool_search_call`` / ``tool_search_output``). The types whose param has no
``status`` (``custom_tool_call``, the MCP listings...) are sent without one, which OpenAI would
refuse as unknown. tests/adapters/test_responses_api.py derives this set from the SDK."""

_PART_FIELDS: dict[str, tuple[str, ...]] = {
    "input_text": ("type", "text"),
    "input_image": ("type", "image_url", "file_id", "detail"),
    "input_file": ("type", "file_id", "file_data", "file_url", "filename"),
    "output_text": ("type", "text", "annotations", "logprobs"),
    "refusal": ("type", "refusal"),
}
"""The fields sent of each content part type. ``output_text`` keeps ``annotations`` (required by
OpenAI) and ``logprobs`` (accepted on input, and what replayed output carries)."""

_TOOL_FIELDS = ("type", "name", "description", "parameters", "strict")
"""The fields sent of a ``function`` tool; other tool types pass unchanged."""

_ENCRYPTED_REASONING = "reasoning.encrypted_content"


def _pick(source: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {key: source[key] for key in fields if key in source}


def _part(part: Any) -> Any:
    fields = _PART_FIELDS.get(str(part.get("type"))) if isinstance(part, dict) else None
    return part if fields is None else _pick(part, fields)


def _parts(content: Any) -> Any:
    return [_part(p) for p in content] if isinstance(content, list) else content


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    if tool.get("type", "function") != "function":
        return tool
    return {**_pick(tool, _TOOL_FIELDS), "type": "function"}


def _include(params: dict[str, Any], reasoning: bool) -> list[str]:
    requested = params.get("include")
    names = [n for n in requested if isinstance(n, str)] if isinstance(requested, list) else []
    if reasoning:
        names.append(_ENCRYPTED_REASONING)
    return list(dict.fromkeys(names))


def _input_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """One transcript item as a stateless upstream accepts it; None to leave it out.

    Reasoning is replayable only with its ``encrypted_content``: under ``store: false`` the
    upstream keeps nothing, so an item carrying only an id (or only a summary, or reasoning text
    from another model) cannot be resolved and would be rejected. Such items are dropped.
    """
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind == "reasoning":
        if not item.get("encrypted_content"):
            return None
        replay: dict[str, Any] = {"type": "reasoning"}
        if item.get("id"):
            replay["id"] = item["id"]
        replay["summary"] = [
            {"type": "summary_text", "text": str(part.get("text") or "")}
            for part in item.get("summary") or []
        ]
        replay["encrypted_content"] = item["encrypted_content"]
        return replay
    fields = _ITEM_FIELDS.get(kind or "")
    if fields is None:
        keep_status = kind in _STATUS_KEPT
        return {key: value for key, value in item.items() if key != "status" or keep_status}
    sent = {**_pick(item, fields), "type": kind}
    for key in ("content", "output"):
        if key in sent:
            sent[key] = _parts(sent[key])
    return sent


def to_responses_request(call: ModelCall) -> dict[str, Any]:
    """The upstream ``POST /responses`` body for ``call``: stateless and streamed."""
    items = (_input_item(item) for item in call.input)
    payload: dict[str, Any] = {
        "model": call.model,
        "input": [item for item in items if item is not None],
    }
    if call.instructions is not None:
        payload["instructions"] = call.instructions
    if call.tools:
        payload["tools"] = [_tool(tool) for tool in call.tools]
    if call.tool_choice is not None:
        payload["tool_choice"] = call.tool_choice
    for key in PASSED_PARAMS:
        if call.params.get(key) is not None:
            payload[key] = call.params[key]
    include = _include(call.params, "reasoning" in payload)
    if include:
        payload["include"] = include
    payload["stream"] = True
    payload["store"] = False
    return payload


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _status_error(status: int, raw: str) -> UpstreamStatusError:
    """An HTTP error answer as an error, with the upstream's OpenAI error fields if it has any."""
    try:
        body = loads_json(raw)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, str):
        error = {"message": error}
    elif not isinstance(error, dict) and isinstance(body, dict):
        detail = body.get("message") or body.get("detail")
        error = {"message": detail} if isinstance(detail, str) else None
    error = error or {}
    return UpstreamStatusError(
        status,
        _str(error.get("message")) or f"The upstream model returned HTTP {status}.",
        code=_str(error.get("code")),
        param=_str(error.get("param")),
        error_type=_str(error.get("type")),
        body=raw,
    )


_CLIENT_SIDE_TYPES = frozenset({"invalid_request_error", "invalid_request"})
"""In-stream error types that blame the request (OpenAI's, and Open Responses' name for it)."""


def _stream_error(error: dict[str, Any], raw: str) -> UpstreamStatusError:
    """An in-stream failure (``response.failed`` or ``error``), given a status from its code, or
    from its type when it has no code (an orphan ``call_id`` is an ``invalid_request_error``
    without one: the client's fault, a 400, not a server error)."""
    code = _str(error.get("code"))
    if code == "rate_limit_exceeded" or error.get("type") in (
        "rate_limit_error",
        "too_many_requests",
    ):
        status = 429
    elif code is None and error.get("type") in _CLIENT_SIDE_TYPES:
        status = 400
    elif code is None or code in _SERVER_SIDE_CODES:
        status = 500
    else:
        status = 400  # the remaining documented codes all blame the input (prompt, images, ...)
    return UpstreamStatusError(
        status,
        _str(error.get("message")) or "The upstream model failed.",
        code=code,
        param=_str(error.get("param")),
        error_type=_str(error.get("type")),
        body=raw,
    )


def _remainder(streamed: str, final: Any) -> str:
    """What ``final`` adds to what was streamed; nothing when they disagree (deltas win)."""
    if isinstance(final, str) and final.startswith(streamed):
        return final[len(streamed) :]
    return ""


def _parts_of(item: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    parts = item.get("content")
    return [p for p in parts or [] if p.get("type") == kind]  # a non-object part: malformed


def _message_text(item: dict[str, Any], kind: str = "output_text") -> str:
    key = "refusal" if kind == "refusal" else "text"
    return "".join(str(p.get(key) or "") for p in _parts_of(item, kind))


def _annotations(item: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(a) for p in _parts_of(item, "output_text") for a in p.get("annotations") or []]


@dataclass(slots=True)
class _Slot:
    """One upstream output item we represent, and which reasoning part it wrote last."""

    writer: MessageWriter | ReasoningWriter | FunctionCallWriter
    last_part: str | None = None
    """``summary`` or ``text``: the reasoning part currently open in the writer."""
    last_summary: int = -1


class _StreamReader:
    """Parses one upstream event stream into writer calls."""

    def __init__(self, out: OutputWriter) -> None:
        self._out = out
        self._slots: dict[int, _Slot] = {}
        self._skipped: set[int] = set()
        self._relayed: dict[int, RelayWriter] = {}
        self.result: TurnResult | None = None
        """The terminal event's result, once it arrived."""
        self._handlers: dict[str, Callable[[dict[str, Any], str], TurnResult | None]] = {
            "response.output_item.added": self._on_added,
            "response.output_item.done": self._on_done,
            "response.output_text.delta": self._on_text,
            "response.refusal.delta": self._on_refusal,
            "response.output_text.annotation.added": self._on_annotation,
            "response.reasoning_summary_text.delta": self._on_summary,
            "response.reasoning_text.delta": self._on_reasoning_text,
            "response.function_call_arguments.delta": self._on_arguments,
            "response.completed": self._on_completed,
            "response.incomplete": self._on_incomplete,
            "response.failed": self._on_failed,
            "error": self._on_error,
        }

    @property
    def decoded(self) -> bool:
        """Whether a data event was taken: an output item, or the terminal event (events that
        carry no output, ``response.created`` and the like, leave nothing to redo)."""
        return self.result is not None or bool(self._slots or self._skipped or self._relayed)

    def feed(self, text: str, event: str = "message") -> bool:
        """Take one event's data; True at the terminal event (``result`` is then set)."""
        if text[:1] != "{" and text.strip() in ("", "[DONE]"):
            return False
        try:
            data = loads_json(text)
        except ValueError as exc:
            raise UpstreamProtocolError(
                f"upstream sent an event that is not JSON: {text[:200]!r}"
            ) from exc
        if not isinstance(data, dict):
            raise UpstreamProtocolError("upstream sent an event that is not a JSON object")
        kind = str(data.get("type") or event)
        if self._relayed and self._relay_event(kind, data):
            return False
        handler = self._handlers.get(kind)
        try:
            result = handler(data, text) if handler else None
        except (AttributeError, TypeError, KeyError) as exc:  # a field of the wrong shape
            raise UpstreamProtocolError(f"upstream sent a malformed {kind} event") from exc
        if result is None:
            return False
        self.result = result
        return True

    def outcome(self) -> TurnResult:
        """The call's result; a stream that ended without a terminal event is an error."""
        if self.result is None:
            raise UpstreamProtocolError("upstream stream ended without a terminal event")
        return self.result

    # -- items -------------------------------------------------------------------------------

    def _relay_event(self, kind: str, data: dict[str, Any]) -> bool:
        """Relay an event of a relayed item; True when it was one (or its ``done``)."""
        index = data.get("output_index")
        relay = self._relayed.get(index) if isinstance(index, int) else None
        if relay is None or kind == "response.output_item.added":
            return False
        if kind == "response.output_item.done":
            relay.finish(_dict(data.get("item")))
        else:
            relay.event(kind, data)
        return True

    def _open(self, index: int, item: dict[str, Any]) -> _Slot | None:
        kind = item.get("type")
        writer: MessageWriter | ReasoningWriter | FunctionCallWriter
        if kind == "message":
            writer = self._out.message(phase=_str(item.get("phase")))
        elif kind == "reasoning":
            writer = self._out.reasoning(item_id=_str(item.get("id")))
            if item.get("encrypted_content"):
                writer.set_encrypted_content(str(item["encrypted_content"]))
        elif kind == "function_call":
            name, call_id = str(item.get("name") or ""), _str(item.get("call_id"))
            namespace = _str(item.get("namespace"))
            writer = self._out.function_call(name=name, call_id=call_id, namespace=namespace)
        elif isinstance(kind, str) and kind:
            self._relayed[index] = self._out.relay(item)
            return None
        else:
            self._skipped.add(index)
            return None
        slot = self._slots[index] = _Slot(writer)
        return slot

    def _live(self, data: dict[str, Any], kind: str) -> _Slot | None:
        """The open slot an event addresses; a message/reasoning item is opened if unannounced."""
        index = data.get("output_index")
        if not isinstance(index, int) or index in self._skipped:
            return None
        slot = self._slots.get(index)
        if slot is None and kind != "function_call":
            slot = self._open(index, {"type": kind, "id": data.get("item_id")})
        return None if slot is None or slot.writer.closed else slot

    def _finish(self, slot: _Slot, final: dict[str, Any]) -> None:
        """Close an item, first streaming whatever its final form has beyond the deltas."""
        writer = slot.writer
        if writer.closed:
            return
        if isinstance(writer, MessageWriter):
            writer.text(_remainder(_message_text(writer.item), _message_text(final)))
            for annotation in _annotations(final)[len(writer.annotations()) :]:
                writer.annotation(annotation)
            writer.logprobs([dict(e) for p in _parts_of(final, "output_text")
                             for e in p.get("logprobs") or []])  # fmt: skip
            refusal = _message_text(writer.item, "refusal")
            writer.refusal(_remainder(refusal, _message_text(final, "refusal")))
        elif isinstance(writer, FunctionCallWriter):
            writer.arguments(_remainder(writer.item["arguments"], final.get("arguments")))
        else:
            self._finish_reasoning(slot, writer, final)
        writer.finish("incomplete" if final.get("status") == "incomplete" else "completed")

    def _finish_reasoning(
        self, slot: _Slot, writer: ReasoningWriter, final: dict[str, Any]
    ) -> None:
        # A closed part cannot reopen, so only the open part and parts never started get the
        # missing remainder: summaries after the last streamed one, the text if never opened.
        summaries = [str(s.get("text") or "") for s in final.get("summary") or []]
        content = final.get("content") or []
        text = "".join(
            str(c.get("text") or "")
            for c in content
            if c.get("type", "reasoning_text") == "reasoning_text"
        )
        opened = writer.item.get("content") or [{"text": ""}]
        if slot.last_part == "text":
            self._reasoning_text(slot, writer, _remainder(opened[0]["text"], text))
        first = max(slot.last_summary, 0) if slot.last_part != "text" else slot.last_summary + 1
        for index in range(first, len(summaries)):
            done = writer.item["summary"]
            streamed = done[index]["text"] if index < len(done) else ""
            self._summary(slot, writer, _remainder(streamed, summaries[index]), index)
        if "content" not in writer.item:
            self._reasoning_text(slot, writer, text)
        if final.get("encrypted_content"):
            writer.set_encrypted_content(str(final["encrypted_content"]))

    def _summary(self, slot: _Slot, writer: ReasoningWriter, delta: str, index: int) -> None:
        if delta:
            writer.summary(delta, index)
            slot.last_part, slot.last_summary = "summary", index

    def _reasoning_text(self, slot: _Slot, writer: ReasoningWriter, delta: str) -> None:
        if delta:
            writer.text(delta)
            slot.last_part = "text"

    # -- events ------------------------------------------------------------------------------

    def _on_added(self, data: dict[str, Any], raw: str) -> None:
        index, item = data.get("output_index"), data.get("item")
        if not isinstance(index, int) or not isinstance(item, dict):
            return
        if index not in self._slots and index not in self._skipped:
            self._open(index, item)

    def _on_done(self, data: dict[str, Any], raw: str) -> None:
        index, item = data.get("output_index"), data.get("item")
        if not isinstance(index, int) or not isinstance(item, dict) or index in self._skipped:
            return
        slot = self._slots.get(index) or self._open(index, item)
        if slot is not None:
            self._finish(slot, item)

    def _on_text(self, data: dict[str, Any], raw: str) -> None:
        slot = self._live(data, "message")
        if slot is not None and isinstance(slot.writer, MessageWriter):
            slot.writer.text(str(data.get("delta") or ""))

    def _on_refusal(self, data: dict[str, Any], raw: str) -> None:
        slot = self._live(data, "message")
        if slot is not None and isinstance(slot.writer, MessageWriter):
            slot.writer.refusal(str(data.get("delta") or ""))

    def _on_annotation(self, data: dict[str, Any], raw: str) -> None:
        slot = self._live(data, "message")
        annotation = data.get("annotation")
        if slot is not None and isinstance(slot.writer, MessageWriter) and annotation:
            slot.writer.annotation(dict(annotation))

    def _on_summary(self, data: dict[str, Any], raw: str) -> None:
        slot = self._live(data, "reasoning")
        index = data.get("summary_index")
        if slot is not None and isinstance(slot.writer, ReasoningWriter):
            index = index if isinstance(index, int) else 0
            self._summary(slot, slot.writer, str(data.get("delta") or ""), index)

    def _on_reasoning_text(self, data: dict[str, Any], raw: str) -> None:
        slot = self._live(data, "reasoning")
        if slot is not None and isinstance(slot.writer, ReasoningWriter):
            self._reasoning_text(slot, slot.writer, str(data.get("delta") or ""))

    def _on_arguments(self, data: dict[str, Any], raw: str) -> None:
        slot = self._live(data, "function_call")
        if slot is not None and isinstance(slot.writer, FunctionCallWriter):
            slot.writer.arguments(str(data.get("delta") or ""))

    def _on_completed(self, data: dict[str, Any], raw: str) -> TurnResult:
        response = _dict(data.get("response"))
        output = response.get("output")
        output = output if isinstance(output, list) else []
        # Items the upstream never sent ``output_item.done`` for are settled from the final output;
        # items it never announced at all are opened and finished from it, after them, in order.
        for index, slot in sorted(self._slots.items()):
            final = _dict(output[index]) if index < len(output) else {}
            if final and final.get("type") == slot.writer.item["type"]:
                self._finish(slot, final)
        for index, relay in sorted(self._relayed.items()):
            final = _dict(output[index]) if index < len(output) else {}
            relay.finish(final if final.get("type") == relay.item.get("type") else None)
        for index, entry in enumerate(output):
            final = _dict(entry)
            known = index in self._slots or index in self._skipped or index in self._relayed
            if final and not known:
                unannounced = self._open(index, final)
                if unannounced is not None:
                    self._finish(unannounced, final)
                elif index in self._relayed:
                    self._relayed[index].finish(final)
        return TurnResult(stop="stop", usage=normalize_usage(response.get("usage")))

    def _on_incomplete(self, data: dict[str, Any], raw: str) -> TurnResult:
        response = _dict(data.get("response"))
        reason = _dict(response.get("incomplete_details")).get("reason")
        # Any other reason still means "cut short"; ``length`` is the incomplete we can express.
        stop: StopReason = "content_filter" if reason == "content_filter" else "length"
        return TurnResult(stop=stop, usage=normalize_usage(response.get("usage")))

    def _on_failed(self, data: dict[str, Any], raw: str) -> None:
        error = _dict(data.get("response")).get("error")
        if not isinstance(error, dict):
            raise UpstreamProtocolError("upstream response failed without an error object")
        raise _stream_error(error, raw)

    def _on_error(self, data: dict[str, Any], raw: str) -> None:
        nested = data.get("error")
        if not isinstance(nested, dict):  # the flat form: its ``type`` is the event's ("error")
            nested = {key: data.get(key) for key in ("code", "message", "param")}
        raise _stream_error(nested, raw)


class ResponsesAdapter(EndpointAdapter):
    """Calls an upstream ``POST {base_url}/responses``, statelessly and streamed."""

    wire = "responses"
    path = "/responses"

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        """Send ``call`` upstream and report its output through ``out``.

        Raises:
            UpstreamStatusError: an HTTP error answer (nothing emitted), ``response.failed`` or an
                ``error`` event.
            UpstreamTransportError: the upstream could not be reached, timed out or dropped.
            UpstreamProtocolError: an unparsable event or a stream with no terminal event.
        """
        payload = to_responses_request(call)
        reader = _StreamReader(out)
        await read_model_answer(
            self._endpoint,
            payload,
            _status_error,
            out,
            reader,
            as_events=response_events,
            streaming=self.streaming,
        )
        return reader.outcome()


def response_events(answer: Any) -> list[str]:
    """An unstreamed Responses answer as the events its stream would have ended with: a
    ``Response`` object as its terminal event (``response.completed``, ``.incomplete`` or
    ``.failed`` by its ``status``: the reader opens and finishes its output items from it), an
    error body (a ``200`` with an error object) as the ``error`` event a stream would carry.
    :func:`responses_gateway.adapters.wire.read_model_answer` feeds them to the reader."""
    if not isinstance(answer, dict):
        raise UpstreamProtocolError("The upstream model's unstreamed answer is no object.")
    if answer.get("error") is not None and answer.get("object") != "response":
        error = answer["error"]
        error = error if isinstance(error, dict) else {"message": str(error)}
        return [json.dumps({"type": "error", "error": error})]
    status = answer.get("status")
    kind = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(
        status if isinstance(status, str) else "", "response.completed"
    )
    return [json.dumps({"type": kind, "response": answer})]
