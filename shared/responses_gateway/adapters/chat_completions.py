"""The Chat Completions adapter: a Responses model call over ``POST /chat/completions``.

Owns both directions of the chat wire format. :func:`to_chat_request` turns a :class:`ModelCall`
into the exact upstream payload (pure, no I/O); :class:`ChatCompletionsAdapter` sends it, always
streaming (``stream: true`` with usage), and turns the chunks into output items through the
:class:`~responses_gateway.loop.output.OutputWriter`. It must not touch ``state.output`` or the
sink directly, and it never decides what the loop does next.

Translation rules (the lossy ones on purpose):

* ``developer`` messages become ``system`` messages (most chat servers reject ``developer``).
  Text parts of one message are joined with ``"\\n"`` into a plain string; a message with an image
  or file part is sent as a list of chat parts instead.
* ``reasoning`` items are not sent upstream by default: most chat servers reject or ignore prior
  reasoning. With the provider option ``send_reasoning_content``, the reasoning text of the
  reasoning items before an assistant message (restored from the gateway's sealed
  ``encrypted_content`` when the client replayed only that) is sent as that message's
  ``reasoning_content``. Item types other than messages, function calls and their outputs are
  ignored.
* Messages are rebuilt field by field, so extra keys clients put on items (``id``, ``status``,
  ``annotations``, ``logprobs``, Codex's ``internal_chat_message_metadata_passthrough``) never
  reach the upstream.
* An assistant message and the ``function_call`` items right after it form ONE assistant message
  with ``tool_calls`` and ``content`` ``""`` (never null or absent: llama-cpp-python's
  chatml-function-calling and several Jinja templates need a string). Every
  ``function_call_output`` is placed after its call (reordered when the client sent it earlier);
  an output with no call is a 400, since chat cannot represent it.
* A ``function_call_output`` whose ``output`` is an array of parts (Codex's ``view_image``) becomes
  a ``tool`` message with the text parts joined (a placeholder when there is none), and its image
  and file parts travel in ONE ``user`` message placed after the tool messages of that turn:
  ``tool`` messages with image parts are rejected by most chat servers and templates, and a
  ``user`` message between a call and its ``tool`` message breaks the pairing they all check.
* ``prompt_cache_key``, ``safety_identifier`` and ``include`` are not sent (most chat servers
  reject unknown fields); ``text.verbosity`` is sent as ``verbosity`` only with the provider option
  ``send_verbosity``.
* Tools of every other type, their call items and ``tool_choice`` arrive already lowered to
  functions by the loop (:func:`responses_gateway.tool_kinds.tool_view`): this adapter only ever
  sees ``function`` tools and ``function_call`` / ``function_call_output`` items.

Streaming rules: text, refusal and reasoning stream as they arrive, one open item at a time
(refusal text goes to a ``refusal`` part of the message; text after it opens a new message). Tool
calls are accumulated per ``index`` and flushed exactly once, in index order, at the first of
``finish_reason``, ``[DONE]`` or end of stream; empty arguments become ``"{}"``. A delta with no
``index`` continues the latest call unless it starts another one (see
:meth:`_ChatStream._starts_new_call`). The stream is read to its end so a trailing usage chunk is
captured. When the model stopped for ``length`` or ``content_filter``, the last item (the open
text item, or the tool calls) is left open for the driver to close as ``incomplete``.

A 2xx answer that is not an event stream (a JSON or HTML body, or a body with no data event: none
at all, or only chunks without output, finish_reason or usage, such as the assistant ``role`` chunk
then ``[DONE]`` of a server with no free slot) is an :class:`UpstreamProtocolError`, asked once
more unstreamed in ``auto``. Upstream JSON strings are cleaned of lone UTF-16
surrogates (U+FFFD instead), so nothing we emit fails to encode.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.wire import (
    EndpointAdapter,
    is_data_chunk,
    loads_json,
    read_model_answer,
)
from responses_gateway.errors import (
    InvalidRequestError,
    UpstreamProtocolError,
    UpstreamStatusError,
)
from responses_gateway.loop.output import MessageWriter, OutputWriter, ReasoningWriter
from responses_gateway.loop.state import StopReason, TurnResult

__all__ = [
    "ChatCompletionsAdapter",
    "ChatOptions",
    "chat_status_error",
    "chat_stream_error",
    "chat_usage",
    "parse_chunk",
    "to_chat_request",
]

_ROLES = {"developer": "system"}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})
_PASSED_PARAMS = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "user",
    "parallel_tool_calls",
    "service_tier",
)
_IMAGE_ONLY_OUTPUT = "(The result is the attached content in the next message.)"


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """What a chat server accepts beyond the common fields (provider options)."""

    send_reasoning_content: bool = False
    """Replay reasoning as ``reasoning_content`` on assistant messages."""
    send_verbosity: bool = False
    """Send ``text.verbosity`` as ``verbosity``."""


# --- request: Responses items -> chat payload ------------------------------------------------


def _text_of(part: dict[str, Any]) -> str:
    value = part.get("refusal") if part.get("type") == "refusal" else part.get("text")
    return value if isinstance(value, str) else ""


def _join_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    texts = [_text_of(p) for p in parts if isinstance(p, dict) and p.get("type") in _TEXT_PARTS]
    return "\n".join(texts)


def _chat_part(part: dict[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        return {"type": "text", "text": _text_of(part)}
    if kind == "input_image":
        if not part.get("image_url"):
            raise InvalidRequestError(
                "Chat Completions upstreams need input_image.image_url (a URL or data URL).",
                param="input",
            )
        image: dict[str, Any] = {"url": part["image_url"]}
        if part.get("detail"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        file = {k: part[k] for k in ("file_data", "file_id", "filename") if part.get(k)}
        if "file_data" not in file and "file_id" not in file:
            raise InvalidRequestError(
                "Chat Completions upstreams need input_file.file_data or file_id.", param="input"
            )
        return {"type": "file", "file": file}
    return None


def _chat_message(item: dict[str, Any]) -> dict[str, Any]:
    role = str(item.get("role") or "user")
    content = item.get("content")
    if role == "assistant":
        return {"role": "assistant", "content": _join_text(content)}
    role = _ROLES.get(role, role)
    if not isinstance(content, list):
        return {"role": role, "content": _join_text(content)}
    parts = [p for p in (_chat_part(x) for x in content if isinstance(x, dict)) if p is not None]
    if all(p["type"] == "text" for p in parts):
        return {"role": role, "content": "\n".join(p["text"] for p in parts)}
    return {"role": role, "content": parts}


def _tool_output(output: Any) -> tuple[str, list[dict[str, Any]]]:
    """A tool result as the ``tool`` message's text and the non-text chat parts it carried."""
    if output is None:
        return "", []
    if isinstance(output, str):
        return output, []
    if not isinstance(output, list):
        return json.dumps(output), []
    parts = [p for p in (_chat_part(x) for x in output if isinstance(x, dict)) if p is not None]
    attached = [p for p in parts if p["type"] != "text"]
    text = "\n".join(p["text"] for p in parts if p["type"] == "text")
    return (text or (_IMAGE_ONLY_OUTPUT if attached else "")), attached


def _reasoning_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    parts = content if isinstance(content, list) else []
    return "".join(
        str(p.get("text") or "")
        for p in parts
        if isinstance(p, dict) and p.get("type") == "reasoning_text"
    )


class _Transcript:
    """Builds chat messages, merging tool calls and keeping each output after its call."""

    def __init__(self, items: list[dict[str, Any]], options: ChatOptions = ChatOptions()) -> None:
        self.messages: list[dict[str, Any]] = []
        self._options = options
        self._reasoning: list[str] = []
        """Reasoning text waiting for the next assistant message (``send_reasoning_content``)."""
        self._attached: list[dict[str, Any]] = []
        """Image/file parts of tool results, sent in a user message once the turn's tool
        messages are all placed."""
        self._calls_ahead = {i.get("call_id") for i in items if i.get("type") == "function_call"}
        self._seen: set[Any] = set()
        self._deferred: dict[Any, list[dict[str, Any]]] = {}
        self._open: dict[str, Any] | None = None
        """The assistant message later function calls merge into."""
        self._group: list[Any] = []
        """Call ids of ``_open``'s tool calls, whose deferred outputs follow it."""

    def add(self, item: dict[str, Any]) -> None:
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "function_call":
            self._call(item)
        elif kind == "function_call_output":
            self._close_group()
            self._output(item)
        elif kind == "message":
            self._close_group()
            self._flush_attached()
            message = _chat_message(item)
            if message["role"] == "assistant":
                self._take_reasoning(message)
            self.messages.append(message)
            self._open = message if message["role"] == "assistant" else None
        elif kind == "reasoning" and self._options.send_reasoning_content:
            text = _reasoning_text(item)
            if text:
                self._reasoning.append(text)

    def _take_reasoning(self, message: dict[str, Any]) -> None:
        if self._reasoning:
            message["reasoning_content"] = "\n".join(self._reasoning)
            self._reasoning = []

    def _flush_attached(self) -> None:
        if self._attached:
            self.messages.append({"role": "user", "content": self._attached})
            self._attached = []

    def _call(self, item: dict[str, Any]) -> None:
        if self._open is None:
            self._flush_attached()
            self._open = {"role": "assistant", "content": ""}
            self._take_reasoning(self._open)
            self.messages.append(self._open)
        call_id = item.get("call_id")
        self._open.setdefault("tool_calls", []).append(
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": item.get("name", ""),
                    "arguments": item.get("arguments") or "{}",
                },
            }
        )
        self._seen.add(call_id)
        self._group.append(call_id)

    def _output(self, item: dict[str, Any]) -> None:
        call_id = item.get("call_id")
        content, attached = _tool_output(item.get("output"))
        self._attached += attached
        message = {"role": "tool", "tool_call_id": call_id, "content": content}
        if call_id in self._seen:
            self.messages.append(message)
        elif call_id in self._calls_ahead:
            self._deferred.setdefault(call_id, []).append(message)
        else:
            raise InvalidRequestError(
                f"No function call found for function_call_output with call_id '{call_id}'.",
                param="input",
            )

    def _close_group(self) -> None:
        for call_id in self._group:
            self.messages.extend(self._deferred.pop(call_id, []))
        self._group = []
        self._open = None

    def finish(self) -> list[dict[str, Any]]:
        self._close_group()
        self._flush_attached()
        return self.messages


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = {"name": tool.get("name", "")}
    function.update(
        {k: tool[k] for k in ("description", "parameters", "strict") if tool.get(k) is not None}
    )
    return {"type": "function", "function": function}


def _tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict):
        if choice.get("type") == "function" and choice.get("name"):
            return {"type": "function", "function": {"name": choice["name"]}}
        if choice.get("type") == "allowed_tools" and choice.get("mode") in ("auto", "required"):
            return choice["mode"]
    return None


def _params(params: dict[str, Any], options: ChatOptions) -> dict[str, Any]:
    out = {k: params[k] for k in _PASSED_PARAMS if params.get(k) is not None}
    verbosity = (params.get("text") or {}).get("verbosity")
    if options.send_verbosity and isinstance(verbosity, str):
        out["verbosity"] = verbosity
    if params.get("max_output_tokens") is not None:
        out["max_tokens"] = params["max_output_tokens"]
    if params.get("top_logprobs") is not None:
        out["logprobs"] = True
        out["top_logprobs"] = params["top_logprobs"]
    effort = (params.get("reasoning") or {}).get("effort")
    if effort:
        out["reasoning_effort"] = effort
    fmt = (params.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "description", "schema", "strict") if k in fmt}
        out["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    return out


def to_chat_request(call: ModelCall, options: ChatOptions = ChatOptions()) -> dict[str, Any]:
    """The exact ``/chat/completions`` payload for ``call`` (always a streaming request).

    Raises:
        InvalidRequestError: the input cannot be represented in chat messages.
    """
    transcript = _Transcript(call.input, options)
    if call.instructions:
        transcript.messages.append({"role": "system", "content": call.instructions})
    for item in call.input:
        transcript.add(item)
    payload: dict[str, Any] = {"model": call.model, "messages": transcript.finish()}
    tools = [_chat_tool(t) for t in call.tools if t.get("type", "function") == "function"]
    if tools:
        payload["tools"] = tools
        choice = _tool_choice(call.tool_choice)
        if choice is not None:
            payload["tool_choice"] = choice
    payload.update(_params(call.params, options))
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}
    return payload


# --- response: chat chunks -> output items ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class _ErrorFields:
    """The fields of an OpenAI-style error object (or a bare string)."""

    message: str = ""
    code: str | None = None
    param: str | None = None
    type: str | None = None

    @classmethod
    def of(cls, error: Any) -> _ErrorFields:
        if isinstance(error, str):
            return cls(error)
        if not isinstance(error, dict):
            return cls()
        message = error.get("message")
        code, param, kind = (error.get(k) for k in ("code", "param", "type"))
        return cls(
            message if isinstance(message, str) else "",
            code if isinstance(code, str) else None,
            param if isinstance(param, str) else None,
            kind if isinstance(kind, str) and kind else None,
        )

    def status_error(self, status: int, raw: str, fallback: str) -> UpstreamStatusError:
        """The error as an :class:`UpstreamStatusError`; ``fallback`` when it has no message."""
        return UpstreamStatusError(
            status,
            self.message or fallback,
            code=self.code,
            param=self.param,
            error_type=self.type,
            body=raw,
        )


def chat_status_error(status: int, raw: str) -> UpstreamStatusError:
    try:
        body: Any = loads_json(raw)
    except ValueError:
        body = raw.strip()[:500]
    if isinstance(body, dict):
        body = body.get("error") or body.get("message") or body.get("detail") or body
    fallback = f"The upstream model returned HTTP {status}."
    return _ErrorFields.of(body).status_error(status, raw, fallback)


def chat_stream_error(error: Any, raw: str) -> UpstreamStatusError | UpstreamProtocolError:
    fields = _ErrorFields.of(error)
    fallback = "The upstream model reported an error mid-stream."
    if isinstance(error, dict):
        for key in ("status", "code"):
            status = error.get(key)
            if isinstance(status, int) and 400 <= status < 600:
                return fields.status_error(status, raw, fallback)
    return UpstreamProtocolError(fields.message or fallback, code=fields.code)


def parse_chunk(data: str) -> dict[str, Any] | None:
    """One ``data:`` payload of an OpenAI-style completions stream as its chunk object; None at
    ``[DONE]``.

    Raises:
        UpstreamProtocolError: invalid JSON, or a chunk that is no object.
        UpstreamStatusError: the chunk reports an error (with an HTTP status).
    """
    if data.strip() == "[DONE]":
        return None
    try:
        chunk = loads_json(data)
    except ValueError as exc:
        raise UpstreamProtocolError(
            f"The upstream model sent invalid JSON in its stream: {data[:200]!r}"
        ) from exc
    if not isinstance(chunk, dict):
        raise UpstreamProtocolError("The upstream model sent a stream chunk that is no object.")
    if chunk.get("error") is not None:
        raise chat_stream_error(chunk["error"], data)
    return chunk


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def chat_usage(raw: dict[str, Any]) -> dict[str, Any]:
    input_tokens, output_tokens = _int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens"))
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": _int(cached)},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": _int(reasoning)},
        "total_tokens": _int(raw.get("total_tokens")) or input_tokens + output_tokens,
    }


def _stop_reason(finish_reason: str | None) -> StopReason:
    if finish_reason == "length":
        return "length"
    return "content_filter" if finish_reason == "content_filter" else "stop"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@dataclass(slots=True)
class _PendingCall:
    call_id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


LOGPROBS = "message.output_text.logprobs"
"""The ``include`` value that asks for the text's token logprobs."""


def _logprob(entry: dict[str, Any]) -> dict[str, Any]:
    """A chat ``logprobs.content`` entry as a Responses ``output_text.logprobs`` entry."""
    top = [
        {"token": t.get("token"), "logprob": t.get("logprob"), "bytes": t.get("bytes") or []}
        for t in entry.get("top_logprobs") or []
        if isinstance(t, dict)
    ]
    return {
        "token": entry.get("token"),
        "logprob": entry.get("logprob"),
        "bytes": entry.get("bytes") or [],
        "top_logprobs": top,
    }


class _ChatStream:
    """The state of one streamed chat completion, fed one ``data:`` payload at a time."""

    def __init__(self, out: OutputWriter, *, logprobs: bool = False) -> None:
        self._out = out
        self._logprobs = logprobs
        """Keep the choice's ``logprobs.content`` as the text's ``logprobs`` (``include``)."""
        self._message: MessageWriter | None = None
        self._refused = False
        """Whether ``_message`` has a refusal part (its text part is then closed)."""
        self._reasoning: ReasoningWriter | None = None
        self._calls: dict[int, _PendingCall] = {}
        self._last_index: int | None = None
        self._finish_reason: str | None = None
        self._flushed = False
        self._usage: dict[str, Any] | None = None
        self.decoded = False
        """Whether a data event arrived (:func:`~responses_gateway.adapters.wire.is_data_chunk`:
        a body with none, the opening role chunk and ``[DONE]`` included, is no event stream)."""

    def feed(self, data: str, event: str = "message") -> bool:
        """Handle one event's data; return True at ``[DONE]`` (nothing more to read). An
        undecodable or error chunk raises before the stream counts as ``decoded``."""
        if not data.strip():
            return False
        chunk = parse_chunk(data)
        if chunk is None:
            if self.decoded:  # else the unstreamed retry still reads into this stream
                self.flush()
            return True
        self.decoded = self.decoded or is_data_chunk(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chat_usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or (choice.get("index") or 0) != 0 or self._flushed:
                continue
            self._delta(choice.get("delta") or {})
            logprobs = choice.get("logprobs")
            if self._logprobs and isinstance(logprobs, dict) and self._message is not None:
                self._message.logprobs(
                    [_logprob(e) for e in logprobs.get("content") or [] if isinstance(e, dict)]
                )
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
                self.flush()
        return False

    def _delta(self, delta: dict[str, Any]) -> None:
        for key in ("reasoning_content", "reasoning"):
            if isinstance(delta.get(key), str) and delta[key]:
                self._close_message()
                if self._reasoning is None:
                    self._reasoning = self._out.reasoning()
                self._reasoning.text(delta[key])
                break
        if isinstance(delta.get("content"), str) and delta["content"]:
            if self._refused:
                self._close_message()  # text after a refusal: a message has one text part
            self._open_message().text(delta["content"])
        if isinstance(delta.get("refusal"), str) and delta["refusal"]:
            self._open_message().refusal(delta["refusal"])
            self._refused = True
        for tool_call in delta.get("tool_calls") or []:
            if isinstance(tool_call, dict):
                self._tool_call(tool_call)

    def _open_message(self) -> MessageWriter:
        self._close_reasoning()
        if self._message is None:
            self._message = self._out.message()
        return self._message

    def _index(self, delta: dict[str, Any]) -> int:
        index = delta.get("index")
        if isinstance(index, int):
            return index
        if self._last_index is None:
            return 0
        if self._starts_new_call(delta, self._calls[self._last_index]):
            return max(self._calls) + 1
        return self._last_index

    @staticmethod
    def _starts_new_call(delta: dict[str, Any], last: _PendingCall) -> bool:
        """Whether a delta without ``index`` starts a call after ``last`` instead of continuing it.

        It does when it names another call id, or (with no id, or no id to compare) when it
        carries a name while ``last`` already has a name and arguments: servers that send
        parallel calls with neither index nor id start each call that way. A repeated name
        continues ``last`` while its arguments are not yet complete JSON, for servers that
        repeat the name on every fragment.
        """
        call_id = delta.get("id")
        if isinstance(call_id, str) and call_id and last.call_id:
            return call_id != last.call_id
        function = delta.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        arguments = "".join(last.arguments)
        if not (isinstance(name, str) and name and last.name and arguments.strip()):
            return False
        return name != last.name or _is_json(arguments)

    def _tool_call(self, delta: dict[str, Any]) -> None:
        index = self._last_index = self._index(delta)
        call_id = delta.get("id")
        call = self._calls.setdefault(index, _PendingCall())
        function = delta.get("function")
        function = function if isinstance(function, dict) else {}
        if call.call_id is None and isinstance(call_id, str) and call_id:
            call.call_id = call_id
        name = function.get("name")
        if call.name is None and isinstance(name, str) and name:
            call.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        if isinstance(arguments, str):
            call.arguments.append(arguments)

    def _close_message(self) -> None:
        if self._message is not None:
            self._message.finish()
            self._message = None
            self._refused = False

    def _close_reasoning(self) -> None:
        if self._reasoning is not None:
            self._reasoning.finish()
            self._reasoning = None

    def flush(self) -> None:
        """End of the model's output: finish text items and emit the tool calls, once."""
        if self._flushed:
            return
        self._flushed = True
        stopped = _stop_reason(self._finish_reason) == "stop"
        ready: list[tuple[str, str, str | None]] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise UpstreamProtocolError(f"The upstream model sent tool call {index} unnamed.")
            arguments = "".join(call.arguments)
            ready.append((call.name, arguments if arguments.strip() else "{}", call.call_id))
        if ready or stopped:
            self._close_message()
            self._close_reasoning()
        for name, arguments, call_id in ready:
            if stopped:
                self._out.complete_function_call(name=name, arguments=arguments, call_id=call_id)
            else:
                self._out.function_call(name=name, call_id=call_id).arguments(arguments)

    def result(self) -> TurnResult:
        return TurnResult(stop=_stop_reason(self._finish_reason), usage=self._usage)


class ChatCompletionsAdapter(EndpointAdapter):
    """Calls an OpenAI-compatible ``/chat/completions`` endpoint (``base_url`` ends in ``/v1``)."""

    wire = "chat"
    path = "/chat/completions"

    def __init__(self, *args: Any, options: ChatOptions = ChatOptions(), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.options = options

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        """Stream one chat completion into ``out``; see the module docstring for the rules.

        Raises:
            InvalidRequestError: the input cannot be represented in chat messages.
            UpstreamStatusError: the upstream answered with an HTTP error (before any output), or
                reported one with an HTTP status mid-stream.
            UpstreamTransportError: the upstream could not be reached, timed out or dropped the
                stream.
            UpstreamProtocolError: the upstream's answer was no event stream, or could not be
                parsed.
        """
        payload = to_chat_request(call, self.options)
        stream = _ChatStream(out, logprobs=LOGPROBS in (call.params.get("include") or ()))
        await read_model_answer(
            self._endpoint,
            payload,
            chat_status_error,
            out,
            stream,
            as_events=completion_events,
            streaming=self.streaming,
        )
        stream.flush()
        return stream.result()


_MESSAGE_KEYS = ("role", "content", "refusal", "reasoning_content", "reasoning")
_CHOICE_KEYS = ("index", "text", "logprobs")


def completion_events(answer: Any) -> list[str]:
    """An unstreamed chat completion (or text completion) as the one stream chunk holding all of
    it: each choice's ``message`` as its ``delta`` (tool calls indexed in order), its
    ``finish_reason``, ``logprobs`` and the ``usage``; an error answer as the error chunk a
    stream would carry. :func:`responses_gateway.adapters.wire.read_model_answer` feeds it to the
    stream parser."""
    if not isinstance(answer, dict):
        raise UpstreamProtocolError("The upstream model's unstreamed answer is no object.")
    if answer.get("error") is not None:
        return [json.dumps({"error": answer["error"]})]
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices:
        raise UpstreamProtocolError("The upstream model's unstreamed answer has no choices.")
    chunk: dict[str, Any] = {"choices": [_choice_chunk(c) for c in choices if isinstance(c, dict)]}
    if answer.get("usage") is not None:
        chunk["usage"] = answer["usage"]
    return [json.dumps(chunk)]


def _choice_chunk(choice: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {key: choice[key] for key in _CHOICE_KEYS if key in choice}
    message = choice.get("message")
    if isinstance(message, dict):
        delta = {key: message[key] for key in _MESSAGE_KEYS if message.get(key) is not None}
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {**call, "index": index}
                for index, call in enumerate(c for c in calls if isinstance(c, dict))
            ]
        out["delta"] = delta
    out["finish_reason"] = choice.get("finish_reason") or "stop"
    return out
