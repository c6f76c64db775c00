"""The fake upstream model server: a Starlette app speaking the real OpenAI wire formats.

Owns the rendering of a scripted :class:`~responses_gateway.testing.script.Turn` as a real Chat
Completions answer (``POST /v1/chat/completions``, JSON or ``chat.completion.chunk`` SSE), a real
Responses answer (``POST /v1/responses``, a ``Response`` object or the typed event stream) or a
gpt-oss raw completion in harmony (``POST /v1/completions``, a ``text_completion`` object or its
chunks, the text from :mod:`responses_gateway.testing.harmony`, imported on that route only), plus
``GET /v1/models`` (with vLLM's ``max_model_len`` where a window is scripted), a tokenizer (one
token per whitespace-separated word, the same count the default usage reports): vLLM's ``POST
/tokenize`` (``messages`` or ``prompt``: ``count``), llama.cpp's ``POST /tokenize`` (``content``:
``tokens``) and ``POST /apply-template``, the Responses ``POST /v1/responses/input_tokens``, and
``POST /v1/responses/compact`` (the user messages and one opaque ``compaction`` item, as a Responses
upstream with native compaction answers), and Amazon Bedrock's ``POST /model/{modelId}/converse``
and ``/converse-stream`` (:mod:`responses_gateway.testing.bedrock`, judged by botocore). Like
OpenAI, the Responses route refuses a tool output
whose ``call_id`` answers no call of the input (a 400 ``invalid_request_error`` before any event).
Every request is recorded on the :class:`~responses_gateway.testing.script.ScriptedUpstream` before
it is answered. The shapes follow the ``openai`` SDK's types, including the awkward corners real
servers produce (see the knobs on ``Turn``). It decides nothing about what to answer (the script and
the demo model do) and never imports the gateway.

Simulated connection drops raise :class:`SimulatedDisconnect` inside the app: under uvicorn the
connection is cut mid-body (the client sees ``httpx.RemoteProtocolError``), and in-process under
``httpx.ASGITransport`` the same exception, an ``httpx.RemoteProtocolError``, reaches the caller.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any, Literal

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from responses_gateway.testing.bedrock import bedrock_route
from responses_gateway.testing.demo import DEMO_MODEL
from responses_gateway.testing.script import (
    ScriptedUpstream,
    Turn,
    Usage,
    Wire,
    error_envelope,
)

__all__ = ["PIECE_LOGPROB", "SimulatedDisconnect", "create_fake_upstream_app", "default_usage"]

_DONE = "[DONE]"
_SKIP_KEYS = frozenset({"role", "type", "id", "call_id", "tool_call_id", "name", "model", "status"})


class SimulatedDisconnect(httpx.RemoteProtocolError):
    """Raised inside the fake app to cut the connection (``Turn.drop_after``)."""

    def __init__(self, message: str = "fake upstream dropped the connection") -> None:
        super().__init__(message)


class _HideSimulatedDisconnects(logging.Filter):
    """Keeps uvicorn from logging a traceback for every deliberate drop."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        return not isinstance(exc, SimulatedDisconnect)


def _install_log_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _HideSimulatedDisconnects) for f in logger.filters):
        logger.addFilter(_HideSimulatedDisconnects())


def create_fake_upstream_app(upstream: ScriptedUpstream | None = None) -> Starlette:
    """The fake upstream ASGI app answering from ``upstream`` (a fresh demo-only script if None).

    The script is reachable as ``app.state.upstream``.
    """
    script = upstream if upstream is not None else ScriptedUpstream()
    _install_log_filter()

    async def chat_completions(request: Request) -> Response:
        body, bad = await _read(request, script)
        if bad is not None:
            return bad
        model = body.get("model")
        if isinstance(model, str) and model in script.responses_only_models:
            return JSONResponse(
                error_envelope(
                    "This model is only supported in v1/responses and not in v1/chat/completions.",
                    type="invalid_request_error",
                    param="model",
                    code="unsupported_api_for_model",
                ),
                status_code=400,
            )
        if _cannot_stream(script, body, "chat"):
            return _no_events(script)
        turn = script.next_turn(body, "chat")
        if turn is None:
            return _exhausted()
        if turn.status != 200:
            return _http_error(turn, script)
        if turn.error_as_200:
            return _error_as_200(turn, script)
        chat = _ChatRenderer(script, turn, body)
        if body.get("stream") is True:
            return _sse(script, turn, chat.frames())
        return _json(script, turn, chat.completion())

    async def responses(request: Request) -> Response:
        body, bad = await _read(request, script)
        if bad is not None:
            return bad
        orphan = _orphan_call_id(body.get("input"))
        if orphan is not None:  # as OpenAI answers it: the client's mistake, before any event
            message = f"No tool call found for function call output with call_id {orphan}."
            envelope = error_envelope(message, type="invalid_request_error", param="input")
            return JSONResponse(envelope, status_code=400)
        if _cannot_stream(script, body, "responses"):
            return _no_events(script)
        turn = script.next_turn(body, "responses")
        if turn is None:
            return _exhausted()
        if turn.status != 200:
            return _http_error(turn, script)
        if turn.error_as_200:
            return _error_as_200(turn, script)
        rend = _ResponsesRenderer(script, turn, body)
        if body.get("stream") is True:
            return _sse(script, turn, rend.frames())
        return _json(script, turn, rend.final_response())

    async def completions(request: Request) -> Response:
        from responses_gateway.testing.harmony import read_prompt

        body, ok, peer = await _parse(request)
        prompt = read_prompt(body) if ok else None
        text = prompt.text if prompt is not None else None
        script.record(
            request.method, request.url.path, _headers(request), body, peer=peer, prompt=text
        )
        if not ok:
            return _bad_json()
        if prompt is None:
            return JSONResponse(
                error_envelope(
                    "'prompt' must be a string or a list of token ids.",
                    type="invalid_request_error",
                    param="prompt",
                ),
                status_code=400,
            )
        if _cannot_stream(script, body, "harmony"):
            return _no_events(script)
        turn = script.next_turn(body, "harmony", demo_view=prompt.chat_view)
        if turn is None:
            return _exhausted()
        if turn.status != 200:
            return _http_error(turn, script)
        if turn.error_as_200:
            return _error_as_200(turn, script)
        rend = _CompletionRenderer(script, turn, body, len(prompt.tokens))
        if body.get("stream") is True:
            return _sse(script, turn, rend.frames())
        return _json(script, turn, rend.completion())

    async def models(request: Request) -> Response:
        script.record(request.method, request.url.path, _headers(request), {})
        listed = [
            DEMO_MODEL,
            *script.models,
            *sorted(script.responses_only_models),
            *script.context_windows,
        ]
        data = [
            {"id": n, "object": "model", "created": 0, "owned_by": "fake-upstream"}
            | ({"max_model_len": script.context_windows[n]} if n in script.context_windows else {})
            for n in dict.fromkeys(listed)
        ]
        return JSONResponse({"object": "list", "data": data})

    async def tokenize(request: Request) -> Response:
        body, bad = await _read(request, script)
        if bad is not None:
            return bad
        if isinstance(body.get("content"), str):  # llama.cpp
            return JSONResponse({"tokens": list(range(_words(body["content"])))})
        count = _words(body.get("messages")) if "messages" in body else _words(body.get("prompt"))
        window = script.context_windows.get(str(body.get("model")))
        return JSONResponse({"count": count, "max_model_len": window, "tokens": list(range(count))})

    async def apply_template(request: Request) -> Response:
        body, bad = await _read(request, script)
        if bad is not None:
            return bad
        texts = _texts(body.get("messages"))
        return JSONResponse({"prompt": " ".join(texts)})

    async def input_tokens(request: Request) -> Response:
        body, bad = await _read(request, script)
        if bad is not None:
            return bad
        count = _words(body.get("input")) + _words(body.get("instructions"))
        return JSONResponse({"object": "response.input_tokens", "input_tokens": count})

    async def compact(request: Request) -> Response:
        body, bad = await _read(request, script)
        if bad is not None:
            return bad
        raw = body.get("input")
        items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw or []
        users = [
            {
                "id": script.new_id("msg"),
                "type": "message",
                "role": "user",
                "status": "completed",
                "content": item["content"]
                if isinstance(item.get("content"), list)
                else [{"type": "input_text", "text": str(item.get("content"))}],
            }
            for item in items
            if isinstance(item, dict) and item.get("role") == "user"
        ]
        with_compact = {"id": script.new_id("cmp"), "type": "compaction"}
        with_compact["encrypted_content"] = f"upstream-opaque-{with_compact['id']}"
        script.compactions += 1
        prompt = _words(raw) + _words(body.get("instructions"))
        usage = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + 7,
        }
        return JSONResponse(
            {
                "id": script.new_id("resp"),
                "object": "response.compaction",
                "created_at": int(time.time()),
                "output": [*users, with_compact],
                "usage": usage,
            }
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = f"Unknown request URL: {request.method} {request.url.path}."
        return JSONResponse(
            error_envelope(message, type="invalid_request_error", code="unknown_url"),
            status_code=status,
        )

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/tokenize", tokenize, methods=["POST"]),
            Route("/apply-template", apply_template, methods=["POST"]),
            Route("/v1/responses/input_tokens", input_tokens, methods=["POST"]),
            Route("/v1/responses/compact", compact, methods=["POST"]),
            Route("/model/{rest:path}", bedrock_route(script), methods=["POST"]),
        ],
        exception_handlers={404: not_found, 405: not_found},
    )
    app.state.upstream = script
    return app


# -- plumbing shared by both endpoints ----------------------------------------------------------


def _headers(request: Request) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in request.headers.items():
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


async def _parse(request: Request) -> tuple[dict[str, Any], bool, str]:
    """The JSON body (``{}`` when unparsable), whether it parsed as an object, and the peer."""
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    peer = f"{request.client.host}:{request.client.port}" if request.client else ""
    return (body, True, peer) if isinstance(body, dict) else ({}, False, peer)


def _bad_json() -> Response:
    return JSONResponse(
        error_envelope(
            "We could not parse the JSON body of your request.",
            type="invalid_request_error",
        ),
        status_code=400,
    )


async def _read(
    request: Request, script: ScriptedUpstream
) -> tuple[dict[str, Any], Response | None]:
    body, ok, peer = await _parse(request)
    script.record(request.method, request.url.path, _headers(request), body, peer=peer)
    return body, None if ok else _bad_json()


def _orphan_call_id(items: Any) -> str | None:
    """The ``call_id`` of the first tool output in ``items`` answering no call among them (an
    ``*_output`` item), as OpenAI refuses it; None when every output has its call."""
    if not isinstance(items, list):
        return None
    calls: set[str] = set()
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("call_id"), str):
            continue
        if str(item.get("type", "")).endswith("_output"):
            if item["call_id"] not in calls:
                return str(item["call_id"])
        else:
            calls.add(item["call_id"])
    return None


def _http_error(turn: Turn, script: ScriptedUpstream) -> Response:
    body = turn.error_body if turn.error_body is not None else {"error": turn.error_object()}
    headers = {"x-request-id": script.new_id("req"), **turn.headers}
    return JSONResponse(body, status_code=turn.status, headers=headers)


def _cannot_stream(script: ScriptedUpstream, body: dict[str, Any], wire: Wire) -> bool:
    limit = script.cannot_stream
    return body.get("stream") is True and limit is not None and limit(body, wire)


def _no_events(script: ScriptedUpstream) -> Response:
    """A 200 event stream that breaks before its first event: the server raised inside it and
    dropped the connection mid-body, as llama-cpp-python's server does (the client sees
    ``httpx.RemoteProtocolError``)."""
    headers = {"x-request-id": script.new_id("req"), "cache-control": "no-cache"}

    async def body() -> AsyncIterator[bytes]:
        raise SimulatedDisconnect()
        yield b""  # pragma: no cover - makes this an async generator

    return StreamingResponse(body(), media_type="text/event-stream; charset=utf-8", headers=headers)


def _error_as_200(turn: Turn, script: ScriptedUpstream) -> Response:
    """A 200 whose body is an error object (``Turn.error_as_200``)."""
    headers = {"x-request-id": script.new_id("req"), **turn.headers}
    return JSONResponse({"error": turn.error_object()}, headers=headers)


def _exhausted() -> Response:
    return JSONResponse(
        error_envelope(
            "The fake upstream's script is exhausted: push() more turns or enable demo=True.",
            code="script_exhausted",
        ),
        status_code=500,
    )


def _json(script: ScriptedUpstream, turn: Turn, payload: dict[str, Any]) -> Response:
    headers = {"x-request-id": script.new_id("req"), **turn.headers}
    if turn.drop_after is None:
        return JSONResponse(payload, headers=headers)
    return _TruncatedJSON(payload, headers)


def _sse(script: ScriptedUpstream, turn: Turn, frames: Iterable[str]) -> Response:
    """Streams ``frames`` as they are produced (a long script's first byte does not wait for
    its last frame to be built, as a model's does not)."""
    headers = {"x-request-id": script.new_id("req"), "cache-control": "no-cache", **turn.headers}

    async def body() -> AsyncIterator[bytes]:
        ended = False  # by us: the whole stream was sent, or we dropped it on purpose
        try:
            for i, frame in enumerate(frames):
                if turn.garbage_after is not None and i >= turn.garbage_after:
                    yield b'data: {"choices": [{"delta": {"content": "cut\n\n'
                    ended = True
                    return
                if turn.drop_after is not None and i >= turn.drop_after:
                    ended = True
                    if turn.cut_mid_event:
                        yield frame.encode()[: len(frame) // 2]
                    raise SimulatedDisconnect()
                if turn.hold_after is not None and i >= turn.hold_after:
                    await asyncio.Event().wait()  # until the client goes away (cancellation)
                yield frame.encode()
            ended = True
        finally:
            if not ended:
                script.record_disconnect()
        if turn.drop_after is not None:
            raise SimulatedDisconnect()

    return StreamingResponse(body(), media_type="text/event-stream; charset=utf-8", headers=headers)


class _TruncatedJSON(Response):
    """Sends the headers and half the JSON body, then drops the connection."""

    def __init__(self, payload: dict[str, Any], headers: dict[str, str]) -> None:
        super().__init__(_dumps(payload), media_type="application/json", headers=headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        half = self.body[: len(self.body) // 2]
        await send({"type": "http.response.body", "body": half, "more_body": True})
        raise SimulatedDisconnect()


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _split_words(text: str) -> list[str]:
    pieces: list[str] = re.findall(r"\s*\S+", text)
    rest = text[len("".join(pieces)) :]
    if rest:
        pieces.append(rest)
    return pieces


def _split_size(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _text_pieces(text: str, chunk_size: int | None) -> list[str]:
    return _split_words(text) if chunk_size is None else _split_size(text, chunk_size)


def _argument_pieces(arguments: str, chunk_size: int | None) -> list[str]:
    if chunk_size is not None:
        return _split_size(arguments, chunk_size)
    return _split_size(arguments, math.ceil(len(arguments) / 3)) if arguments else []


def _words(value: Any, key: str | None = None) -> int:
    if key in _SKIP_KEYS:
        return 0
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    if isinstance(value, dict):
        return sum(_words(v, k) for k, v in value.items())
    return 0


def _texts(value: Any, key: str | None = None) -> list[str]:
    if key in _SKIP_KEYS:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _texts(v, k)]
    return []


def default_usage(body: dict[str, Any], wire: Wire, turn: Turn) -> Usage:
    """The usage reported when a turn sets none: one token per whitespace-separated word.

    Input counts the words of every string in ``messages`` (chat) or ``input`` and
    ``instructions`` (Responses), skipping ids, names, roles and types; output counts the text,
    the reasoning (also reported as ``reasoning_tokens``) and, per tool call, 1 plus the words of
    its arguments.
    """
    if wire == "chat":
        prompt = _words(body.get("messages"))
    else:
        prompt = _words(body.get("input")) + _words(body.get("instructions"))
    reasoning = _words(turn.reasoning) + _words(turn.reasoning_summary)
    output = _words(turn.text) + reasoning
    output += sum(1 + _words(c.arguments) for c in turn.tool_calls)
    return Usage(input_tokens=prompt, output_tokens=output, reasoning_tokens=reasoning)


# -- Chat Completions -------------------------------------------------------------------------


class _ChatRenderer:
    """Renders one turn as a ``chat.completion`` or a list of ``chat.completion.chunk`` frames."""

    def __init__(self, script: ScriptedUpstream, turn: Turn, body: dict[str, Any]) -> None:
        self.turn = turn
        self.body = body
        self.id = script.new_id("chatcmpl", "-")
        self.created = int(time.time())
        model = body.get("model")
        self.model = model if isinstance(model, str) else DEMO_MODEL
        self.call_ids = [c.call_id or script.new_id("call") for c in turn.tool_calls]
        self.usage = turn.usage or default_usage(body, "chat", turn)
        options = body.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True

    @property
    def finish_reason(self) -> str:
        if self.turn.tool_calls and self.turn.finish == "stop":
            return "tool_calls"
        return self.turn.finish

    def usage_json(self) -> dict[str, Any]:
        u = self.usage
        return {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.total_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": u.reasoning_tokens,
                "audio_tokens": 0,
            },
        }

    def completion(self) -> dict[str, Any]:
        turn = self.turn
        message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None}
        if turn.reasoning is not None:
            message[turn.reasoning_field] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call, call_id in zip(turn.tool_calls, self.call_ids, strict=True)
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage_json(),
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def _call_entry(self, index: int, *, header: bool, arguments: str | None) -> dict[str, Any]:
        turn = self.turn
        entry: dict[str, Any] = {}
        if turn.tool_call_index == "normal":
            entry["index"] = index
        function: dict[str, Any] = {}
        if header or turn.tool_call_ids == "every":
            entry["id"] = self.call_ids[index]
            entry["type"] = "function"
            function["name"] = turn.tool_calls[index].name
        if arguments is not None:
            function["arguments"] = arguments
        entry["function"] = function
        return entry

    def _tool_call_lanes(self) -> list[list[dict[str, Any]]]:
        """Per call, the ordered tool-call delta entries (one chunk each)."""
        turn = self.turn
        lanes: list[list[dict[str, Any]]] = []
        for index, call in enumerate(turn.tool_calls):
            if turn.arguments_mode == "single":
                lanes.append([self._call_entry(index, header=True, arguments=call.arguments)])
                continue
            lane = [self._call_entry(index, header=True, arguments="")]
            if turn.arguments_mode == "fragmented":
                lane += [
                    self._call_entry(index, header=False, arguments=piece)
                    for piece in _argument_pieces(call.arguments, turn.chunk_size)
                ]
            lanes.append(lane)
        return lanes

    def payloads(self) -> list[dict[str, Any] | str]:
        """Every chunk in order (``"[DONE]"`` as a string), before fault injection."""
        return list(self._payloads())

    def _payloads(self) -> Iterator[dict[str, Any] | str]:
        """:meth:`payloads`, each chunk built when it is reached."""
        turn = self.turn
        if turn.role_only:
            yield self._chunk({"role": "assistant"})
            yield _DONE
            return
        yield self._chunk({"role": "assistant", "content": ""})
        if turn.reasoning:
            field = turn.reasoning_field
            for piece in _text_pieces(turn.reasoning, turn.chunk_size):
                yield self._chunk({field: piece})
        if turn.text:
            for piece in _text_pieces(turn.text, turn.chunk_size):
                yield self._chunk({"content": piece})
        lanes = self._tool_call_lanes()
        if turn.interleave and len(lanes) > 1:
            order = [1, 0, *range(2, len(lanes))]
            for step in range(max(len(lane) for lane in lanes)):
                for index in order:
                    if step < len(lanes[index]):
                        yield self._chunk({"tool_calls": [lanes[index][step]]})
        else:
            for lane in lanes:
                for entry in lane:
                    yield self._chunk({"tool_calls": [entry]})
        last: dict[str, Any] = {}
        if turn.arguments_mode == "final_chunk" and turn.tool_calls:
            last["tool_calls"] = [
                self._call_entry(i, header=False, arguments=c.arguments)
                for i, c in enumerate(turn.tool_calls)
            ]
        if turn.end != "eof":
            yield self._chunk(last, self.finish_reason)
            if self.include_usage and turn.usage_chunk:
                usage_chunk = self._chunk({})
                usage_chunk["choices"] = []
                usage_chunk["usage"] = self.usage_json()
                yield usage_chunk
            if turn.end == "done":
                yield _DONE
        elif last:
            yield self._chunk(last)

    def frames(self) -> Iterator[str]:
        """The SSE frames to send, with ``error_event_after`` applied; built as they are sent
        unless an error event must be placed (that needs the whole list)."""
        payloads: Iterable[dict[str, Any] | str] = self._payloads()
        after = self.turn.error_event_after
        if after is not None:
            every = list(payloads)
            latest = len(every) - 1 if every[-1] == _DONE else len(every)
            payloads = [*every[: min(after, latest)], {"error": self.turn.error_object()}]
        for p in payloads:
            yield f"data: {p}\n\n" if isinstance(p, str) else f"data: {_dumps(p).decode()}\n\n"


# -- Responses --------------------------------------------------------------------------------


class _ResponsesRenderer:
    """Renders one turn as a ``Response`` object or its typed SSE event stream."""

    def __init__(self, script: ScriptedUpstream, turn: Turn, body: dict[str, Any]) -> None:
        self.turn = turn
        self.body = body
        self.id = script.new_id("resp")
        self.created = int(time.time())
        model = body.get("model")
        self.model = model if isinstance(model, str) else DEMO_MODEL
        self.usage = turn.usage or default_usage(body, "responses", turn)
        self.incomplete = turn.finish != "stop"
        self.items = self._final_items(script)

    def _final_items(self, script: ScriptedUpstream) -> list[dict[str, Any]]:
        turn = self.turn
        items: list[dict[str, Any]] = []
        self.relayed = dict(enumerate(turn.relayed_items))
        items += [relayed.done for relayed in turn.relayed_items]
        if turn.reasoning is not None or turn.reasoning_summary or turn.encrypted_content:
            summary = [{"type": "summary_text", "text": s} for s in turn.reasoning_summary or []]
            item: dict[str, Any] = {"id": script.new_id("rs"), "type": "reasoning"}
            item["summary"] = summary
            if turn.reasoning is not None:
                item["content"] = [{"type": "reasoning_text", "text": turn.reasoning}]
            if turn.encrypted_content is not None:
                item["encrypted_content"] = turn.encrypted_content
            items.append(item)
        if turn.text is not None:
            items.append(
                {
                    "id": script.new_id("msg"),
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [_output_text(turn.text)],
                }
            )
        for call in turn.tool_calls:
            items.append(
                {
                    "id": script.new_id("fc"),
                    "type": "function_call",
                    "call_id": call.call_id or script.new_id("call"),
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                    **({"namespace": call.namespace} if call.namespace else {}),
                }
            )
        if self.incomplete and items:
            items[-1]["status"] = "incomplete"
        return items

    def usage_json(self) -> dict[str, Any]:
        u = self.usage
        return {
            "input_tokens": u.input_tokens,
            "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
            "output_tokens": u.output_tokens,
            "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
            "total_tokens": u.total_tokens,
        }

    def response(
        self,
        status: Literal["in_progress", "completed", "incomplete", "failed"],
        output: list[dict[str, Any]],
        *,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        b = self.body
        reason = "max_output_tokens" if self.turn.finish == "length" else "content_filter"
        asked = b.get("reasoning")
        reasoning: dict[str, Any] = asked if isinstance(asked, dict) else {}
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "background": b.get("background") is True,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": error,
            "incomplete_details": {"reason": reason} if status == "incomplete" else None,
            "instructions": b.get("instructions"),
            "max_output_tokens": b.get("max_output_tokens"),
            "max_tool_calls": b.get("max_tool_calls"),
            "model": self.model,
            "output": output,
            "parallel_tool_calls": b.get("parallel_tool_calls", True),
            "previous_response_id": b.get("previous_response_id"),
            "reasoning": {
                "effort": reasoning.get("effort"),
                "summary": reasoning.get("summary"),
            },
            "service_tier": "default",
            "store": b.get("store", True),
            "temperature": b.get("temperature", 1.0),
            "text": b.get("text") or {"format": {"type": "text"}},
            "tool_choice": b.get("tool_choice", "auto"),
            "tools": b.get("tools") or [],
            "top_p": b.get("top_p", 1.0),
            "truncation": b.get("truncation", "disabled"),
            "usage": self.usage_json() if status in ("completed", "incomplete") else None,
            "user": b.get("user"),
            "metadata": b.get("metadata") or {},
        }

    def final_response(self) -> dict[str, Any]:
        return self.response("incomplete" if self.incomplete else "completed", self.items)

    def events(self) -> list[dict[str, Any]]:
        """Every event in order, without ``sequence_number``, before fault injection."""
        out: list[dict[str, Any]] = [
            {"type": "response.created", "response": self.response("in_progress", [])},
            {"type": "response.in_progress", "response": self.response("in_progress", [])},
        ]
        for index, item in enumerate(self.items):
            out += self._item_events(index, item)
        final = self.final_response()
        out.append(
            {"type": "response.incomplete" if self.incomplete else "response.completed",
             "response": final}
        )  # fmt: skip
        return out

    def _item_events(self, index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
        where = {"item_id": item["id"], "output_index": index}
        added: dict[str, Any]
        body: list[dict[str, Any]] = []
        chunk = self.turn.chunk_size
        relayed = self.relayed.get(index)
        if relayed is not None:
            added = relayed.added
            # shell_call_command events carry no item_id
            body = [
                {**({"output_index": index} if "command_index" in event else where), **event}
                for event in relayed.events
            ]
        elif item["type"] == "message":
            added = {**item, "status": "in_progress", "content": []}
            text = item["content"][0]["text"]
            part = {**where, "content_index": 0}
            body.append({"type": "response.content_part.added", **part, "part": _output_text("")})
            body += [
                {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
                for piece in _text_pieces(text, chunk)
            ]
            body.append({"type": "response.output_text.done", **part, "text": text, "logprobs": []})
            body.append({"type": "response.content_part.done", **part, "part": _output_text(text)})
        elif item["type"] == "reasoning":
            added = {k: v for k, v in item.items() if k not in ("content", "status")}
            added["summary"] = []
            for ci, content in enumerate(item.get("content", [])):
                part = {**where, "content_index": ci}
                text = content["text"]
                body.append(
                    {"type": "response.content_part.added", **part,
                     "part": {"type": "reasoning_text", "text": ""}}
                )  # fmt: skip
                body += [
                    {"type": "response.reasoning_text.delta", **part, "delta": piece}
                    for piece in _text_pieces(text, chunk)
                ]
                body.append({"type": "response.reasoning_text.done", **part, "text": text})
                body.append(
                    {"type": "response.content_part.done", **part,
                     "part": {"type": "reasoning_text", "text": text}}
                )  # fmt: skip
            for si, summary in enumerate(item["summary"]):
                part = {**where, "summary_index": si}
                text = summary["text"]
                body.append(
                    {"type": "response.reasoning_summary_part.added", **part,
                     "part": {"type": "summary_text", "text": ""}}
                )  # fmt: skip
                body += [
                    {"type": "response.reasoning_summary_text.delta", **part, "delta": piece}
                    for piece in _text_pieces(text, chunk)
                ]
                body.append({"type": "response.reasoning_summary_text.done", **part, "text": text})
                body.append(
                    {"type": "response.reasoning_summary_part.done", **part,
                     "part": {"type": "summary_text", "text": text}}
                )  # fmt: skip
        else:
            added = {**item, "arguments": "", "status": "in_progress"}
            if not self.turn.arguments_only_in_done:
                body += [
                    {"type": "response.function_call_arguments.delta", **where, "delta": piece}
                    for piece in _argument_pieces(item["arguments"], chunk)
                ]
            body.append(
                {"type": "response.function_call_arguments.done", **where,
                 "name": item["name"], "arguments": item["arguments"]}
            )  # fmt: skip
        return [
            {"type": "response.output_item.added", "output_index": index, "item": added},
            *body,
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]

    def _failure(self, prefix: list[dict[str, Any]]) -> dict[str, Any]:
        err = self.turn.error_object()
        if self.turn.responses_error == "error":
            return {
                "type": "error",
                "code": err.get("code"),
                "message": err.get("message") or "",
                "param": err.get("param"),
                "error": err,
            }
        done = [e["item"] for e in prefix if e["type"] == "response.output_item.done"]
        error = {"code": err.get("code") or "server_error", "message": err.get("message") or ""}
        return {"type": "response.failed", "response": self.response("failed", done, error=error)}

    def frames(self) -> list[str]:
        """The SSE frames to send, with ``error_event_after`` applied and sequence numbers."""
        events = self.events()
        after = self.turn.error_event_after
        if after is not None:
            prefix = events[: min(after, len(events) - 1)]
            events = [*prefix, self._failure(prefix)]
        frames = []
        for seq, event in enumerate(events):
            data = {"type": event["type"], "sequence_number": seq, **event}
            frames.append(f"event: {event['type']}\ndata: {_dumps(data).decode()}\n\n")
        return frames


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


# -- raw completions (harmony) ----------------------------------------------------------------

PIECE_LOGPROB = -0.25
"""The logprob of every token of a scripted harmony completion, when the request asks."""


class _CompletionRenderer:
    """Renders one turn as a ``text_completion`` or its chunks, the text in harmony."""

    def __init__(
        self, script: ScriptedUpstream, turn: Turn, body: dict[str, Any], prompt_tokens: int
    ) -> None:
        from responses_gateway.testing.harmony import HarmonyTurn

        self.turn = turn
        self.harmony = HarmonyTurn(turn, prompt_tokens)
        self.id = script.new_id("cmpl", "-")
        self.created = int(time.time())
        model = body.get("model")
        self.model = model if isinstance(model, str) else DEMO_MODEL
        options = body.get("stream_options")
        self.include_usage = isinstance(options, dict) and options.get("include_usage") is True
        logprobs = body.get("logprobs")
        self.logprobs = logprobs if isinstance(logprobs, int) and logprobs is not True else None
        """The request's ``logprobs`` (alternatives per token): each streamed piece then carries
        its token's logprob (:data:`PIECE_LOGPROB`), with itself as the only alternative."""

    def _piece(self, text: str) -> dict[str, Any]:
        chunk = self._chunk(text)
        if self.logprobs is not None:
            chunk["choices"][0]["logprobs"] = {
                "tokens": [text],
                "token_logprobs": [PIECE_LOGPROB],
                "top_logprobs": [{text: PIECE_LOGPROB}] if self.logprobs else [None],
                "text_offset": [0],
            }
        return chunk

    def _chunk(self, text: str, finish: str | None = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
        }
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def completion(self) -> dict[str, Any]:
        payload = self._chunk(self.harmony.text, self.turn.finish)
        payload["usage"] = self.harmony.usage_json()
        return payload

    def payloads(self) -> list[dict[str, Any] | str]:
        """Every chunk in order (``"[DONE]"`` as a string), before fault injection."""
        turn = self.turn
        if turn.role_only:
            return [self._chunk(""), _DONE]
        out: list[dict[str, Any] | str] = [self._piece(p) for p in self.harmony.pieces()]
        if turn.end != "eof":
            out.append(self._chunk("", turn.finish))
            if self.include_usage and turn.usage_chunk:
                usage_chunk = self._chunk("")
                usage_chunk["choices"] = []
                usage_chunk["usage"] = self.harmony.usage_json()
                out.append(usage_chunk)
            if turn.end == "done":
                out.append(_DONE)
        return out

    def frames(self) -> list[str]:
        """The SSE frames to send, with ``error_event_after`` applied."""
        payloads = self.payloads()
        after = self.turn.error_event_after
        if after is not None:
            latest = len(payloads) - 1 if payloads and payloads[-1] == _DONE else len(payloads)
            payloads = [*payloads[: min(after, latest)], {"error": self.turn.error_object()}]
        return [
            f"data: {p}\n\n" if isinstance(p, str) else f"data: {_dumps(p).decode()}\n\n"
            for p in payloads
        ]
