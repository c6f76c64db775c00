"""The harmony adapter: a Responses model call to a gpt-oss model over raw ``POST /completions``.

Owns both directions of the harmony wire format, for servers that expose gpt-oss only as raw
completions (llama.cpp server, vLLM). :func:`harmony_conversation` turns a :class:`ModelCall` into
harmony messages and :func:`to_harmony_request` into the exact upstream payload (the prompt
rendered to token ids by ``openai-harmony``); :class:`HarmonyAdapter` sends it, always streaming,
and parses the completion text incrementally with harmony's ``StreamableParser``, reporting items
through the :class:`~responses_gateway.loop.output.OutputWriter` like every other adapter. It
must not touch ``state.output`` or the sink directly, and it never decides what the loop does
next. ``openai_harmony`` is imported only inside functions, on this adapter's path.

Rendering rules:

* A system message with the reasoning effort (``reasoning.effort``: ``low`` (and ``minimal``),
  ``medium`` (the default), ``high``) and the conversation start date (today, UTC); a developer
  message with ``instructions`` and the function tools (gateway MCP tools included), only when
  there is either. ``tool_choice``: ``none`` renders no tools; ``required`` adds an instruction
  to call one; a named function (also what a forced tool of another kind is lowered to) keeps
  only that tool and instructs the model to call it (``allowed_tools`` reaches here already
  restricted to its tools, with its mode). ``text.format`` (``json_schema``, ``json_object``)
  becomes a ``# Response Formats`` section of the developer message, as gpt-oss reads it.
* User messages as ``user``; ``system``/``developer`` input messages as ``developer`` messages in
  place; assistant messages on the ``final`` channel, or on ``commentary`` (a preamble) when a
  function call follows them. Reasoning items (their ``reasoning_text``, else their summary) on
  the ``analysis`` channel, except those before the last ``final`` message: gpt-oss expects the
  reasoning of finished turns dropped and that of the turn in progress (its tool calls) kept.
  Function calls as ``commentary`` messages to ``functions.NAME`` with
  ``<|constrain|>json``, their outputs as messages from ``functions.NAME`` (an output whose call
  is not in the input is a 400). Only text reaches the model: an image or file part becomes a note
  in its place saying the model cannot see it.
* The payload asks for the special tokens to be kept (``skip_special_tokens: false``, with no
  spaces added around them) and stops at ``<|return|>`` and ``<|call|>``. ``max_tokens`` is
  always sent: ``max_output_tokens``, else null (the server's own limit), since the completions
  API's default of 16 tokens would cut every answer. ``top_logprobs`` is sent as the completions
  API's ``logprobs`` (that many alternatives per token).

Parsing rules: the streamed text is tokenized again (a special token split across two chunks is
held back until it is whole) and fed to the parser. ``analysis`` becomes a reasoning item,
a message addressed to a recipient (``functions.NAME``) a tool call named ``NAME`` (the writer
decides whether it is the gateway's or the client's; harmony has no call ids, so the gateway
makes them), ``final`` and preamble ``commentary`` a message. Each item closes with its harmony
message. When the model stopped for ``length`` or ``content_filter``, the open item is left for
the driver to close as ``incomplete``. Usage is the upstream's, else counted here (the prompt's
tokens and the completion's); ``reasoning_tokens`` counts the ``analysis`` tokens. With
``parallel_tool_calls: false`` the completion is read up to the end of its first tool call and the
rest is discarded (a real server stops there anyway). With ``include:
["message.output_text.logprobs"]`` the server's per-chunk ``logprobs`` (tokens, their logprobs
and alternatives) are kept on the message whose text the chunk carried, special tokens left out.

Checks: harmony cannot constrain decoding, so a turn the model ended on its own is checked
against what the request demanded (:func:`turn_problem`): a forced ``tool_choice`` needs the
call, and a ``text.format`` answer (a turn without calls) must be JSON matching the schema
(``json_object``: a JSON object), whatever ``strict`` says. A broken answer fails the response
with a :class:`~responses_gateway.errors.ModelOutputError` (502 ``invalid_model_output``; on a
stream ``response.failed``): it never passes as a valid structured answer.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any, NamedTuple

import httpx

from responses_gateway._vocab import harmony_encoding
from responses_gateway.adapters.base import ModelCall
from responses_gateway.adapters.chat_completions import (
    LOGPROBS,
    chat_status_error,
    chat_usage,
    completion_events,
    parse_chunk,
)
from responses_gateway.adapters.wire import (
    EndpointAdapter,
    Streaming,
    is_data_chunk,
    read_model_answer,
)
from responses_gateway.errors import (
    InvalidRequestError,
    ModelOutputError,
    UpstreamProtocolError,
)
from responses_gateway.loop.output import (
    FunctionCallWriter,
    MessageWriter,
    OutputWriter,
    ReasoningWriter,
)
from responses_gateway.loop.state import StopReason, TurnResult
from responses_gateway.protocol.schema_check import instance_problem

__all__ = [
    "STOP_SEQUENCES",
    "HarmonyAdapter",
    "harmony_conversation",
    "render_prompt",
    "to_harmony_request",
    "turn_problem",
]

logger = logging.getLogger(__name__)

STOP_SEQUENCES = ("<|return|>", "<|call|>")
"""Where a gpt-oss turn ends: the final answer, or a tool call."""
_SPECIALS = frozenset(
    {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", *STOP_SEQUENCES}
)
"""The harmony special tokens recognised in completion text (the rest is ordinary text)."""
_EFFORTS = {"minimal": "LOW", "low": "LOW", "medium": "MEDIUM", "high": "HIGH", "xhigh": "HIGH"}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})
_PASSED_PARAMS = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "user")
_FUNCTIONS = "functions."
_ASSISTANT_START = (200006, 173781)
"""``<|start|>assistant``: where the model's turn begins (ids of the ``o200k_harmony`` vocab)."""


# --- request: Responses items -> harmony messages -> prompt tokens ---------------------------


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            value = part.get("refusal") if kind == "refusal" else part.get("text")
            texts.append(value if isinstance(value, str) else "")
        elif kind in _UNSEEN_PARTS:
            texts.append(_UNSEEN_PARTS[kind](part))
    return "\n".join(texts)


def _unseen_file(part: dict[str, Any]) -> str:
    name = part.get("filename")
    named = f" ({name})" if isinstance(name, str) and name else ""
    return f"[A file{named} was attached here; this model reads text only and cannot read it.]"


_UNSEEN_PARTS: dict[str, Any] = {
    "input_image": lambda part: (
        "[An image was attached here; this model reads text only and cannot see it.]"
    ),
    "input_file": _unseen_file,
}
"""Content parts gpt-oss cannot take, lowered to a note in their place: the model is told what it
was given and cannot see (and can say so), instead of the request failing or the part vanishing."""


def _output_text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str | list):
        return _text_of(output)
    return json.dumps(output)


def _reasoning_text(item: dict[str, Any]) -> str:
    content = [p for p in item.get("content") or [] if isinstance(p, dict)]
    texts = [str(p.get("text") or "") for p in content if p.get("type") == "reasoning_text"]
    if not any(texts):
        summary = [p for p in item.get("summary") or [] if isinstance(p, dict)]
        return "\n\n".join(str(p.get("text") or "") for p in summary if p.get("text"))
    return "\n".join(texts)


def _kind(item: dict[str, Any]) -> Any:
    return item.get("type") or ("message" if "role" in item else None)


def _effort(params: dict[str, Any]) -> str:
    effort = (params.get("reasoning") or {}).get("effort")
    return _EFFORTS.get(str(effort).lower(), "MEDIUM") if effort else "MEDIUM"


class _Spec(NamedTuple):
    """One transcript message, as plain data: a cache key for its rendering."""

    role: str
    text: str
    channel: str | None = None
    recipient: str | None = None
    content_type: str | None = None
    author: str | None = None
    """A tool message's author name (``functions.NAME``)."""


class _Preamble(NamedTuple):
    """What the system and developer messages are made of: a cache key for their rendering."""

    effort: str
    day: str
    instructions: str | None
    tools: str
    """The function tools as canonical JSON (``[]`` for none)."""


def _forced_tool(choice: Any) -> str | None:
    """The function a ``tool_choice`` names (``{"type": "function", "name": ...}``), or None."""
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return str(choice["name"])
    return None


def _choice_instruction(choice: Any, tools: list[dict[str, Any]]) -> str | None:
    """What the model is told to do when ``tool_choice`` forces a call (harmony has no field
    for it)."""
    if not tools:
        return None
    forced = _forced_tool(choice)
    if forced is not None:
        return f"Call the function `{forced}` now, before anything else; do not answer directly."
    if choice == "required":
        return "Call one of the functions now, before anything else; do not answer directly."
    return None


def _preamble(call: ModelCall, today: date) -> _Preamble:
    forced = _forced_tool(call.tool_choice)
    tools = [
        {
            "name": str(tool.get("name", "")),
            "description": str(tool.get("description") or ""),
            "parameters": tool.get("parameters"),
        }
        for tool in call.tools
        if tool.get("type", "function") == "function"
        and call.tool_choice != "none"
        and (forced is None or tool.get("name") == forced)
    ]
    tools_json = json.dumps(tools, sort_keys=True, separators=(",", ":"))
    sections = [
        call.instructions or None,
        _choice_instruction(call.tool_choice, tools),
        _response_format(call.params),
    ]
    instructions = "\n\n".join(section for section in sections if section) or None
    return _Preamble(_effort(call.params), today.isoformat(), instructions, tools_json)


def _response_format(params: dict[str, Any]) -> str | None:
    """``text.format`` as gpt-oss reads structured outputs: a ``# Response Formats`` section of
    the developer message (``## <name>``, the description as a ``//`` comment, the schema)."""
    fmt = (params.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_object":
        return "# Response Formats\n\n## json_object\n\n// Answer with one JSON object.\n{}"
    if fmt.get("type") != "json_schema":
        return None
    lines = ["# Response Formats", "", f"## {fmt.get('name') or 'response'}", ""]
    if fmt.get("description"):
        lines.append(f"// {fmt['description']}")
    lines.append(json.dumps(fmt.get("schema") or {}, separators=(",", ":")))
    return "\n".join(lines)


def _specs(items: list[dict[str, Any]]) -> list[_Spec]:
    names = {
        item.get("call_id"): str(item.get("name") or "")
        for item in items
        if _kind(item) == "function_call"
    }
    specs: list[_Spec] = []
    for index, item in enumerate(items):
        kind = _kind(item)
        if kind == "message":
            role = str(item.get("role") or "user")
            text = _text_of(item.get("content"))
            if role == "assistant":
                following = items[index + 1] if index + 1 < len(items) else {}
                channel = "commentary" if _kind(following) == "function_call" else "final"
                specs.append(_Spec("assistant", text, channel))
            else:
                specs.append(
                    _Spec("developer" if role in ("system", "developer") else "user", text)
                )
        elif kind == "reasoning":
            text = _reasoning_text(item)
            if text:
                specs.append(_Spec("assistant", text, "analysis"))
        elif kind == "function_call":
            recipient = _FUNCTIONS + str(item.get("name") or "")
            arguments = item.get("arguments") or "{}"
            specs.append(
                _Spec("assistant", arguments, "commentary", recipient, "<|constrain|>json")
            )
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in names:
                raise InvalidRequestError(
                    f"No function call found for function_call_output with call_id '{call_id}'.",
                    param="input",
                )
            text = _output_text(item.get("output"))
            author = _FUNCTIONS + names[call_id]
            specs.append(_Spec("tool", text, "commentary", "assistant", author=author))
    finals = [i for i, spec in enumerate(specs) if spec.channel == "final"]
    if finals:
        specs = [s for i, s in enumerate(specs) if s.channel != "analysis" or i > finals[-1]]
    return specs


def _preamble_messages(preamble: _Preamble) -> list[Any]:
    from openai_harmony import (  # type: ignore[import-untyped]
        DeveloperContent,
        Message,
        ReasoningEffort,
        Role,
        SystemContent,
        ToolDescription,
    )

    system = (
        SystemContent.new()
        .with_reasoning_effort(ReasoningEffort[preamble.effort])
        .with_conversation_start_date(preamble.day)
    )
    messages = [Message.from_role_and_content(Role.SYSTEM, system)]
    tools = [
        ToolDescription.new(t["name"], t["description"], t["parameters"])
        for t in json.loads(preamble.tools)
    ]
    if preamble.instructions or tools:
        developer = DeveloperContent.new()
        if preamble.instructions:
            developer = developer.with_instructions(preamble.instructions)
        if tools:
            developer = developer.with_function_tools(tools)
        messages.append(Message.from_role_and_content(Role.DEVELOPER, developer))
    return messages


def _message(spec: _Spec) -> Any:
    from openai_harmony import Author, Message, Role

    author = Author(role=Role(spec.role), name=spec.author)
    message = Message.from_author_and_content(author, spec.text)
    if spec.channel is not None:
        message = message.with_channel(spec.channel)
    if spec.recipient is not None:
        message = message.with_recipient(spec.recipient)
    if spec.content_type is not None:
        message = message.with_content_type(spec.content_type)
    return message


def harmony_conversation(call: ModelCall, today: date) -> list[Any]:
    """The harmony messages (``openai_harmony.Message``) that render ``call``; see the module
    docstring for the rules.

    Raises:
        InvalidRequestError: the input cannot be represented in harmony (a non-text part, or a
            function call output with no call).
    """
    specs = _specs(call.input)
    return [*_preamble_messages(_preamble(call, today)), *(_message(s) for s in specs)]


@functools.lru_cache(maxsize=64)
def _render_preamble(preamble: _Preamble) -> tuple[int, ...]:
    from openai_harmony import Conversation, RenderConversationConfig

    conversation = Conversation.from_messages(_preamble_messages(preamble))
    config = RenderConversationConfig(auto_drop_analysis=False)
    return tuple(harmony_encoding().render_conversation(conversation, config))


def _render_message(spec: _Spec, has_tools: bool) -> tuple[int, ...]:
    from openai_harmony import RenderOptions

    options = RenderOptions(conversation_has_function_tools=has_tools)
    return tuple(harmony_encoding().render(_message(spec), options))


_render_cached = functools.lru_cache(maxsize=1024)(_render_message)
_CACHED_TEXT = 8192
"""Messages longer than this (characters) are rendered every time instead of being cached."""


def render_prompt(call: ModelCall, today: date) -> list[int]:
    """The prompt for ``call`` as token ids, ending where the assistant's next message starts.

    Equal to ``render_conversation_for_completion`` of :func:`harmony_conversation`, built from
    per-message renderings that are cached: the library takes a fraction of a millisecond per
    message, and an agent loop renders the same transcript again on every model call.

    Raises:
        InvalidRequestError: the input cannot be represented in harmony.
    """
    specs = _specs(call.input)
    preamble = _preamble(call, today)
    has_tools = preamble.tools != "[]"
    tokens = list(_render_preamble(preamble))
    for spec in specs:
        render = _render_cached if len(spec.text) <= _CACHED_TEXT else _render_message
        tokens += render(spec, has_tools)
    tokens += _ASSISTANT_START
    return tokens


def to_harmony_request(call: ModelCall, today: date) -> dict[str, Any]:
    """The exact ``/completions`` payload for ``call`` (always a streaming request).

    Raises:
        InvalidRequestError: the input cannot be represented in harmony.
    """
    payload: dict[str, Any] = {"model": call.model, "prompt": render_prompt(call, today)}
    payload["max_tokens"] = call.params.get("max_output_tokens")
    payload.update({k: call.params[k] for k in _PASSED_PARAMS if call.params.get(k) is not None})
    if call.params.get("top_logprobs") is not None:
        payload["logprobs"] = call.params["top_logprobs"]
    payload["stop"] = list(STOP_SEQUENCES)
    payload["skip_special_tokens"] = False
    payload["spaces_between_special_tokens"] = False
    payload["stream"] = True
    payload["stream_options"] = {"include_usage": True}
    return payload


# --- response: completion text -> harmony messages -> output items ---------------------------


_LONGEST_SPECIAL = max(len(s) for s in _SPECIALS)


def _split_special(text: str) -> tuple[str, str]:
    """``text`` cut before a special token it may end in the middle of: (ready, held back)."""
    start = text.rfind("<|")
    if start >= 0 and "|>" not in text[start:] and len(text) - start < _LONGEST_SPECIAL:
        return text[:start], text[start:]
    if text.endswith("<"):
        return text[:-1], "<"
    return text, ""


def _stop_reason(finish_reason: str | None) -> StopReason:
    if finish_reason == "length":
        return "length"
    return "content_filter" if finish_reason == "content_filter" else "stop"


class _HarmonyStream:
    """The state of one streamed harmony completion, fed one ``data:`` payload at a time."""

    def __init__(
        self,
        out: OutputWriter,
        encoding: Any,
        prompt_tokens: int,
        *,
        single_call: bool = False,
        logprobs: bool = False,
    ) -> None:
        from openai_harmony import HarmonyError, Role, StreamableParser

        self._error: type[Exception] = HarmonyError
        self._out = out
        self._encoding = encoding
        self._parser = StreamableParser(encoding, Role.ASSISTANT, strict=False)
        self._held = ""
        self._writer: MessageWriter | ReasoningWriter | FunctionCallWriter | None = None
        self._channel: str | None = None
        """The channel of the harmony message being read (None between messages)."""
        self._arguments = False
        """Whether the open tool call received any arguments."""
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._prompt_tokens = prompt_tokens
        self._tokens = 0
        self._reasoning_tokens = 0
        self._ended = False
        self.decoded = False
        """Whether a data event arrived (:func:`~responses_gateway.adapters.wire.is_data_chunk`:
        a body with none, empty text chunks and ``[DONE]`` included, is no event stream)."""
        self._single_call = single_call
        """``parallel_tool_calls: false``: stop reading after the first tool call."""
        self._logprobs = logprobs
        self._target: MessageWriter | None = None
        """The message whose text the chunk being read carried (its logprobs go there)."""
        self.calls: list[str] = []
        """The names of the tools the model called, in order."""
        self.answer: str | None = None
        """The text of the last message (``final``, or a ``commentary`` without recipient): the
        answer of a turn without calls. None when there is none."""
        self._answer: list[str] | None = None
        self.discarded = False
        """Whether text after the first call was discarded (``parallel_tool_calls: false``)."""

    def feed(self, data: str, event: str = "message") -> bool:
        """Handle one event's data; return True at ``[DONE]`` (nothing more to read). An
        undecodable or error chunk raises before the stream counts as ``decoded``."""
        if not data.strip():
            return False
        chunk = parse_chunk(data)
        if chunk is None:
            return True
        self.decoded = self.decoded or is_data_chunk(chunk)
        if isinstance(chunk.get("usage"), dict):
            self._usage = chat_usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or (choice.get("index") or 0) != 0 or self._ended:
                continue
            if isinstance(choice.get("text"), str):
                self._target = None
                self._text(choice["text"])
                if self._logprobs and self._target is not None:
                    self._target.logprobs(_completion_logprobs(choice.get("logprobs")))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
                self._ended = True
        return False

    def _text(self, text: str) -> None:
        if self._stopped:
            self.discarded = self.discarded or bool(text.strip())
            return
        ready, self._held = _split_special(self._held + text)
        if ready:
            for token in self._encoding.encode(
                ready, allowed_special=_SPECIALS, disallowed_special=()
            ):
                self._token(token)

    @property
    def _stopped(self) -> bool:
        return self._single_call and bool(self.calls) and self._channel is None

    def _token(self, token: int) -> None:
        if self._stopped:
            self.discarded = True
            return
        try:
            self._parser.process(token)
        except self._error as exc:
            raise UpstreamProtocolError(
                f"The upstream model's completion is not valid harmony: {exc}"
            ) from exc
        self._tokens += 1
        self._after_token()

    def _after_token(self) -> None:
        parser = self._parser
        channel = parser.current_channel
        if channel is None:
            self._close()
            return
        if self._channel is None:
            self._open(channel, parser.current_recipient)
        delta = parser.last_content_delta
        if delta is not None and channel == "analysis":
            self._reasoning_tokens += 1
        if delta:
            self._delta(delta)

    def _open(self, channel: str, recipient: str | None) -> None:
        self._channel = channel
        self._answer = [] if channel != "analysis" and not recipient else None
        if recipient:
            name = recipient[len(_FUNCTIONS) :] if recipient.startswith(_FUNCTIONS) else recipient
            self._writer = self._out.function_call(name=name)
            self._arguments = False
            self.calls.append(name)

    def _delta(self, delta: str) -> None:
        writer = self._writer
        if writer is None:
            writer = self._writer = (
                self._out.reasoning() if self._channel == "analysis" else self._out.message()
            )
        if isinstance(writer, FunctionCallWriter):
            self._arguments = True
            writer.arguments(delta)
        else:
            writer.text(delta)
            if isinstance(writer, MessageWriter):
                self._target = writer
            if self._answer is not None:
                self._answer.append(delta)

    def _close(self) -> None:
        """The harmony message being read is complete: complete its item."""
        writer = self._writer
        self._writer = None
        self._channel = None
        if self._answer is not None:
            self.answer, self._answer = "".join(self._answer), None
        if isinstance(writer, FunctionCallWriter) and not self._arguments:
            writer.arguments("{}")
        if writer is not None:
            writer.finish()

    def finish(self) -> None:
        """End of the completion: parse what was held back; close the last message when the
        model stopped on its own (a cut-off item stays open for the driver)."""
        held, self._held = self._held, ""
        if self._stopped:
            return
        if held:
            for token in self._encoding.encode(held, disallowed_special=()):
                self._token(token)
        if _stop_reason(self._finish_reason) != "stop":
            return
        try:
            self._parser.process_eos()
        except self._error as exc:
            raise UpstreamProtocolError(
                "The upstream model's completion ended inside a harmony header (a server must "
                f"keep the special tokens in its completion text): {exc}"
            ) from exc
        self._after_token()
        self._close()

    def result(self) -> TurnResult:
        usage = self._usage
        if usage is None:
            usage = chat_usage(
                {"prompt_tokens": self._prompt_tokens, "completion_tokens": self._tokens}
            )
        details = usage["output_tokens_details"]
        if not details.get("reasoning_tokens"):
            details["reasoning_tokens"] = min(self._reasoning_tokens, usage["output_tokens"])
        return TurnResult(stop=_stop_reason(self._finish_reason), usage=usage)


def _completion_logprobs(logprobs: Any) -> list[dict[str, Any]]:
    """A completions chunk's ``logprobs`` (``tokens``, ``token_logprobs``, ``top_logprobs``) as
    Responses ``output_text.logprobs`` entries; harmony's special tokens are left out."""
    if not isinstance(logprobs, dict):
        return []
    tokens = logprobs.get("tokens") or []
    values = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    entries: list[dict[str, Any]] = []
    for index, token in enumerate(tokens):
        if not isinstance(token, str) or token in _SPECIALS:
            continue
        top = tops[index] if index < len(tops) and isinstance(tops[index], dict) else {}
        entries.append(
            {
                "token": token,
                "logprob": values[index] if index < len(values) else None,
                "bytes": list(token.encode()),
                "top_logprobs": [
                    {"token": t, "logprob": lp, "bytes": list(str(t).encode())}
                    for t, lp in top.items()
                ],
            }
        )
    return entries


def _format_problem(fmt: dict[str, Any], text: str) -> str | None:
    """How ``text`` breaks the ``text.format`` ``fmt``, or None."""
    try:
        value = json.loads(text)
    except ValueError:
        return "it is not JSON"
    if fmt.get("type") == "json_object":
        return None if isinstance(value, dict) else "it is not a JSON object"
    schema = fmt.get("schema")
    return instance_problem(value, schema) if isinstance(schema, dict) else None


def turn_problem(
    call: ModelCall, calls: list[str], answer: str | None, stop: StopReason
) -> str | None:
    """What makes a finished harmony turn break its request, in words, or None.

    Args:
        call: the model call.
        calls: the names of the tools the model called.
        answer: the text of its last message, None when there is none.
        stop: why it stopped (a cut-off turn is not checked: it ends ``incomplete``).
    """
    if stop != "stop":
        return None
    forced = _forced_tool(call.tool_choice) if call.tools else None
    if forced is not None and forced not in calls:
        return f"the model did not call '{forced}', which tool_choice requires"
    if call.tool_choice == "required" and call.tools and not calls:
        return "the model called no function, but tool_choice is 'required'"
    fmt = (call.params.get("text") or {}).get("format") or {}
    if fmt.get("type") not in ("json_schema", "json_object") or calls or answer is None:
        return None
    problem = _format_problem(fmt, answer)
    if problem is None:
        return None
    name = fmt.get("name") or fmt["type"]
    return f"the model's answer does not match the text.format '{name}': {problem}"


def _today() -> date:
    return datetime.now(UTC).date()


class HarmonyAdapter(EndpointAdapter):
    """Calls a raw ``/completions`` endpoint serving a gpt-oss model (``base_url`` ends in
    ``/v1``), speaking harmony.

    Args:
        client: the shared upstream HTTP client.
        base_url: the provider's base URL, including ``/v1``.
        api_key: sent as ``Authorization: Bearer`` when set.
        headers: extra headers for every call.
        timeout: seconds to wait for upstream bytes; None keeps the client's own timeouts.
        today: the conversation start date put in the system message (default: today, UTC).
    """

    wire = "harmony"
    path = "/completions"

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        today: Callable[[], date] = _today,
        streaming: Streaming = "auto",
    ) -> None:
        super().__init__(client, base_url, api_key, headers, timeout, streaming)
        self._today = today
        self._encoding: Any = None

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        """Stream one harmony completion into ``out``; see the module docstring for the rules.

        Raises:
            InvalidRequestError: the input cannot be represented in harmony.
            UpstreamStatusError: the upstream answered with an HTTP error (before any output), or
                reported one with an HTTP status mid-stream.
            UpstreamTransportError: the upstream could not be reached, timed out or dropped the
                stream.
            UpstreamProtocolError: the upstream's answer was no event stream, or no harmony.
            ModelOutputError: the answer breaks ``tool_choice`` or ``text.format``.
        """
        if self._encoding is None:  # the first load reads 3.6 MB: not on the event loop
            self._encoding = await asyncio.to_thread(harmony_encoding)
        payload = to_harmony_request(call, self._today())
        stream = _HarmonyStream(
            out,
            self._encoding,
            len(payload["prompt"]),
            single_call=call.params.get("parallel_tool_calls") is False,
            logprobs=LOGPROBS in (call.params.get("include") or ()),
        )
        await read_model_answer(
            self._endpoint,
            payload,
            chat_status_error,
            out,
            stream,
            as_events=completion_events,
            streaming=self.streaming,
        )
        stream.finish()
        if stream.discarded:
            logger.info(
                "parallel_tool_calls is false: discarded the completion after its first call"
            )
        result = stream.result()
        problem = turn_problem(call, stream.calls, stream.answer, result.stop)
        if problem is not None:
            raise ModelOutputError(f"The response breaks the request: {problem}.")
        return result
