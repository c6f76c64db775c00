"""The scripted Bedrock upstream: a scripted :class:`Turn` spoken over the Converse API.

Owns the ``POST /model/{modelId}/converse`` and ``/converse-stream`` routes of the fake upstream
(:func:`bedrock_route`): every request is recorded, then judged by AWS's own code
(:mod:`responses_gateway.testing.aws_oracle`: botocore's signer must agree with its SigV4
signature, botocore's validator and serializer with its path and body; the conversation's shape
as Bedrock checks it: the user first, roles alternating, tool results answering the turn before),
and answered as Bedrock
does: errors as ``{"message"}`` with ``x-amzn-ErrorType``; ``Converse`` as one JSON answer;
``ConverseStream`` in the binary AWS event-stream framing (reasoning with a signature, text,
tool calls with streamed input, ``messageStop``, ``metadata`` with usage). The scripted breaks
happen as they would on Bedrock's HTTP: ``drop_after`` aborts the body (``cut_mid_event`` inside
a frame), ``error_event_after`` sends ConverseStream's exception event, ``garbage_after`` a
well-framed event whose payload is no JSON, ``error_as_200`` a 200 with ``{"message"}``,
``cannot_stream`` a 200 ConverseStream dropped before its first frame. A replayed reasoning
block whose signature is not the one this upstream gave its text is refused, as Anthropic's
models refuse it. The turn is chosen from the request seen as a Chat Completions body
(:func:`chat_view`), so the demo model, the brain and turn factories read it as they read chat.
It never imports the gateway (the event-stream encoder aside, which is plain framing).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from responses_gateway.adapters.eventstream import encode_message
from responses_gateway.testing.aws_oracle import (
    converse_problems,
    operation_of,
    signature_problem,
)
from responses_gateway.testing.script import RecordedRequest, ScriptedUpstream, Turn

__all__ = [
    "TEST_CREDENTIALS",
    "as_chat",
    "asked_to_stream",
    "converse_params",
    "bedrock_route",
    "chat_view",
    "event_frames",
    "signature_of",
]

TEST_CREDENTIALS: dict[str, tuple[str, str | None]] = {"local": ("local", None)}
"""Credentials the scripted upstream accepts besides the environment's (access key -> secret,
session token): the dummy ones the gateway signs with on loopback when it has none."""

_ERROR_TYPES = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_STOP = {"length": "max_tokens", "content_filter": "content_filtered"}


def signature_of(text: str) -> str:
    """The signature this upstream gives a reasoning text (and checks on replay)."""
    return "sig-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _credentials() -> dict[str, tuple[str, str | None]]:
    known = dict(TEST_CREDENTIALS)
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        known[key] = (secret, os.environ.get("AWS_SESSION_TOKEN") or None)
    return known


# --- the request as chat, for the script -----------------------------------------------------


def _chat_parts(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if "text" in block:
            parts.append({"type": "text", "text": block["text"]})
        elif "image" in block:
            image = block["image"]
            url = f"data:image/{image['format']};base64,{image['source']['bytes']}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        elif "document" in block:
            parts.append({"type": "text", "text": f"[document {block['document']['name']}]"})
    return parts


def _content(parts: list[dict[str, Any]]) -> Any:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def chat_view(body: dict[str, Any], model: str) -> dict[str, Any]:
    """A Converse request as the Chat Completions request it amounts to."""
    messages: list[dict[str, Any]] = []
    system = "\n".join(b["text"] for b in body.get("system") or [] if "text" in b)
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        blocks = message.get("content") or []
        if message.get("role") == "assistant":
            calls = [
                {
                    "id": b["toolUse"]["toolUseId"],
                    "type": "function",
                    "function": {
                        "name": b["toolUse"]["name"],
                        "arguments": json.dumps(b["toolUse"]["input"], separators=(",", ":")),
                    },
                }
                for b in blocks
                if "toolUse" in b
            ]
            chat: dict[str, Any] = {"role": "assistant", "content": _content(_chat_parts(blocks))}
            if calls:
                chat["tool_calls"] = calls
            messages.append(chat)
            continue
        for block in blocks:
            if "toolResult" in block:
                result = block["toolResult"]
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": result["toolUseId"],
                        "content": _content(_chat_parts(result.get("content") or [])),
                    }
                )
        parts = _chat_parts([b for b in blocks if "toolResult" not in b])
        if parts:
            messages.append({"role": "user", "content": _content(parts)})
    view: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    tools = [t for t in (body.get("toolConfig") or {}).get("tools") or [] if "toolSpec" in t]
    if tools:
        view["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["toolSpec"]["name"],
                    "description": t["toolSpec"].get("description", ""),
                    "parameters": t["toolSpec"]["inputSchema"]["json"],
                },
            }
            for t in tools
        ]
        choice = body["toolConfig"].get("toolChoice") or {}
        if "any" in choice:
            view["tool_choice"] = "required"
        elif "tool" in choice:
            view["tool_choice"] = {"type": "function", "function": choice["tool"]}
    if "maxTokens" in (body.get("inferenceConfig") or {}):
        view["max_tokens"] = body["inferenceConfig"]["maxTokens"]
    return view


def converse_params(request: RecordedRequest) -> dict[str, Any]:
    """A recorded request's payload; a Converse one as its operation's parameters (``modelId``
    from the path, then the body), as botocore's ``converse(**params)`` takes them."""
    found = operation_of(request.path)
    return request.json if found is None else {"modelId": found[1], **request.json}


def asked_to_stream(request: RecordedRequest) -> bool | None:
    """Whether a recorded model request asked for a stream: a Converse one by its operation
    (ConverseStream), any other by its body's ``stream``."""
    found = operation_of(request.path)
    if found is None:
        stream = request.json.get("stream")
        return stream if isinstance(stream, bool) else None
    return found[0] == "ConverseStream"


def as_chat(request: RecordedRequest) -> dict[str, Any]:
    """A recorded request's body; a Converse one as the chat request it amounts to (tests that
    check a transcript on several wires compare Bedrock's with chat's expectation)."""
    found = operation_of(request.path)
    return request.json if found is None else chat_view(request.json, found[1])


def _bad_turns(body: dict[str, Any]) -> str | None:
    """What Bedrock refuses in a conversation's shape (botocore's validator does not check it):
    the user first, the roles alternating, each tool result answering a call of the turn
    before, each call answered in the turn after."""
    messages = body.get("messages") or []
    if messages and messages[0].get("role") != "user":
        return "A conversation must start with a user message."
    calls: set[str] = set()
    for index, message in enumerate(messages):
        if index and message.get("role") == messages[index - 1].get("role"):
            return "A conversation must alternate between user and assistant roles."
        blocks = message.get("content") or []
        ids = {b["toolResult"]["toolUseId"] for b in blocks if "toolResult" in b}
        if ids != calls and (ids or message.get("role") == "user"):
            return "messages: the toolResult blocks must answer the previous turn's toolUse blocks."
        calls = {b["toolUse"]["toolUseId"] for b in blocks if "toolUse" in b}
    return None


def _bad_signatures(body: dict[str, Any]) -> str | None:
    for message in body.get("messages") or []:
        for block in message.get("content") or []:
            text = (block.get("reasoningContent") or {}).get("reasoningText")
            if text is not None and text.get("signature") != signature_of(text.get("text", "")):
                return "messages: a reasoningContent block's signature does not match its text."
    return None


# --- answers ---------------------------------------------------------------------------------


def _aws_error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    kind = _ERROR_TYPES.get(status, "InternalServerException")
    answer = {**(headers or {}), "x-amzn-ErrorType": f"{kind}:http://internal.amazon.com/"}
    return JSONResponse({"message": message}, status_code=status, headers=answer)


def _message_of(turn: Turn) -> str:
    """The message of a scripted error, whichever server's body shape it was scripted in."""
    body = turn.error_body or {}
    inner = body.get("error")
    for found in (inner.get("message") if isinstance(inner, dict) else inner, body.get("message")):
        if isinstance(found, str) and found:
            return found
    return str(turn.error_object().get("message") or "Scripted upstream error.")


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    if isinstance(value, dict):
        return sum(_words(v) for k, v in value.items() if k not in ("toolUseId", "signature"))
    return 0


def _usage(body: dict[str, Any], turn: Turn) -> dict[str, int]:
    if turn.usage is not None:
        cached, written = turn.usage.cached_tokens, turn.usage.cache_write_tokens
        fresh = turn.usage.input_tokens - cached - written
        output = turn.usage.output_tokens
        usage = {"inputTokens": fresh, "outputTokens": output, "totalTokens": fresh + output}
        for key, count in (("cacheReadInputTokens", cached), ("cacheWriteInputTokens", written)):
            if count:
                usage[key] = count
                usage["totalTokens"] += count
        return usage
    prompt = _words(body.get("messages")) + _words(body.get("system"))
    output = _words(turn.text) + _words(turn.reasoning)
    output += sum(1 + len(c.arguments.split()) for c in turn.tool_calls)
    return {"inputTokens": prompt, "outputTokens": output, "totalTokens": prompt + output}


def _pieces(text: str, size: int | None) -> list[str]:
    if size is None:
        words = text.split(" ")
        return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words) if w or i == 0]
    return [text[i : i + size] for i in range(0, len(text), max(1, size))] or [""]


def _stop_reason(turn: Turn) -> str:
    if turn.finish in _STOP:
        return _STOP[turn.finish]
    return "tool_use" if turn.tool_calls else "end_turn"


def _call_id(script: ScriptedUpstream, call_id: str | None) -> str:
    return call_id or script.new_id("tooluse", "_")


def event_frames(
    script: ScriptedUpstream, turn: Turn, body: dict[str, Any]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The events of a turn's ``ConverseStream`` answer, in order."""
    yield "messageStart", {"role": "assistant"}
    index = 0
    if turn.reasoning:
        for piece in _pieces(turn.reasoning, turn.chunk_size):
            delta = {"reasoningContent": {"text": piece}}
            yield "contentBlockDelta", {"delta": delta, "contentBlockIndex": index}
        signature = {"reasoningContent": {"signature": signature_of(turn.reasoning)}}
        yield "contentBlockDelta", {"delta": signature, "contentBlockIndex": index}
        yield "contentBlockStop", {"contentBlockIndex": index}
        index += 1
    if turn.encrypted_content:
        redacted = base64.b64encode(turn.encrypted_content.encode()).decode()
        delta = {"reasoningContent": {"redactedContent": redacted}}
        yield "contentBlockDelta", {"delta": delta, "contentBlockIndex": index}
        yield "contentBlockStop", {"contentBlockIndex": index}
        index += 1
    if turn.text:
        for piece in _pieces(turn.text, turn.chunk_size):
            yield "contentBlockDelta", {"delta": {"text": piece}, "contentBlockIndex": index}
        yield "contentBlockStop", {"contentBlockIndex": index}
        index += 1
    for call in turn.tool_calls:
        start = {"toolUse": {"toolUseId": _call_id(script, call.call_id), "name": call.name}}
        yield "contentBlockStart", {"start": start, "contentBlockIndex": index}
        size = turn.chunk_size or max(1, -(-len(call.arguments) // 3))
        for at in range(0, len(call.arguments), size):
            delta = {"toolUse": {"input": call.arguments[at : at + size]}}
            yield "contentBlockDelta", {"delta": delta, "contentBlockIndex": index}
        yield "contentBlockStop", {"contentBlockIndex": index}
        index += 1
    yield "messageStop", {"stopReason": _stop_reason(turn)}
    yield "metadata", {"usage": _usage(body, turn), "metrics": {"latencyMs": 1}}


def _frame(name: str, event: dict[str, Any]) -> bytes:
    headers = {":event-type": name, ":content-type": "application/json", ":message-type": "event"}
    return encode_message(headers, json.dumps(event).encode())


_EXCEPTIONS = {"rate_limit_exceeded": "throttlingException"}
"""ConverseStream's exception event for a scripted error's ``code`` (any other error is the
model's stream failing: ``modelStreamErrorException``)."""


def _exception_frame(turn: Turn) -> bytes:
    """The error of ``error_event_after`` as ConverseStream's exception event."""
    error = turn.error_object()
    message = str(error.get("message") or "The model stream failed.")
    kind = _EXCEPTIONS.get(str(error.get("code")), "modelStreamErrorException")
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_message(headers, json.dumps({"message": message}).encode())


def _garbage_frame() -> bytes:
    """A well-framed event whose payload is no JSON (``garbage_after``): botocore decodes the
    frame, and its JSON parser refuses the payload."""
    headers = {
        ":event-type": "contentBlockDelta",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return encode_message(headers, b'{"delta": {"text": "cut')


def _stream(script: ScriptedUpstream, turn: Turn, body: dict[str, Any]) -> Response:
    from responses_gateway.testing.fake_upstream import SimulatedDisconnect

    async def frames() -> AsyncIterator[bytes]:
        ended = False
        try:
            for i, (name, event) in enumerate(event_frames(script, turn, body)):
                if turn.error_event_after is not None and i >= turn.error_event_after:
                    ended = True
                    yield _exception_frame(turn)
                    return
                if turn.garbage_after is not None and i >= turn.garbage_after:
                    ended = True
                    yield _garbage_frame()
                    return
                if turn.drop_after is not None and i >= turn.drop_after:
                    ended = True
                    if turn.cut_mid_event:  # the body cut inside this frame
                        frame = _frame(name, event)
                        yield frame[: len(frame) // 2]
                    raise SimulatedDisconnect()
                if turn.hold_after is not None and i >= turn.hold_after:
                    await asyncio.Event().wait()
                yield _frame(name, event)
            ended = True
        finally:
            if not ended:
                script.record_disconnect()

    headers = {"x-amzn-requestid": script.new_id("req"), **turn.headers}
    return StreamingResponse(
        frames(), media_type="application/vnd.amazon.eventstream", headers=headers
    )


def _answer(script: ScriptedUpstream, turn: Turn, body: dict[str, Any]) -> Response:
    blocks: dict[int, dict[str, Any]] = {}
    stop, usage = "end_turn", {}
    for name, event in event_frames(script, turn, body):
        if name == "messageStop":
            stop = event["stopReason"]
        elif name == "metadata":
            usage = event["usage"]
        elif name == "contentBlockStart":
            use = event["start"]["toolUse"]
            blocks[event["contentBlockIndex"]] = {"toolUse": {**use, "input": ""}}
        elif name == "contentBlockDelta":
            _add_delta(blocks, event["contentBlockIndex"], event["delta"])
    content = [blocks[i] for i in sorted(blocks)]
    for block in content:
        if "toolUse" in block:
            raw = block["toolUse"]["input"]
            try:
                block["toolUse"]["input"] = json.loads(raw) if raw.strip() else {}
            except ValueError:
                block["toolUse"]["input"] = {"raw": raw}
    answer = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": usage,
        "metrics": {"latencyMs": 1},
    }
    headers = {"x-amzn-requestid": script.new_id("req"), **turn.headers}
    return JSONResponse(answer, headers=headers)


def _add_delta(blocks: dict[int, dict[str, Any]], index: int, delta: dict[str, Any]) -> None:
    """One stream delta added to the whole block it belongs to (an unstreamed answer's)."""
    if "text" in delta:
        block = blocks.setdefault(index, {"text": ""})
        block["text"] += delta["text"]
    elif "toolUse" in delta:
        blocks[index]["toolUse"]["input"] += delta["toolUse"]["input"]
    elif "redactedContent" in delta.get("reasoningContent", {}):
        blocks[index] = {"reasoningContent": dict(delta["reasoningContent"])}
    elif "reasoningContent" in delta:
        block = blocks.setdefault(index, {"reasoningContent": {"reasoningText": {"text": ""}}})
        reasoning, text = delta["reasoningContent"], block["reasoningContent"]["reasoningText"]
        text["text"] += reasoning.get("text", "")
        if "signature" in reasoning:
            text["signature"] = reasoning["signature"]


def _no_events(script: ScriptedUpstream) -> Response:
    """A 200 ConverseStream answer dropped before its first frame (``cannot_stream``: no turn
    used, the same request unstreamed gets it)."""
    from responses_gateway.testing.fake_upstream import SimulatedDisconnect

    async def frames() -> AsyncIterator[bytes]:
        raise SimulatedDisconnect()
        yield b""  # pragma: no cover - makes this an async generator

    headers = {"x-amzn-requestid": script.new_id("req")}
    return StreamingResponse(
        frames(), media_type="application/vnd.amazon.eventstream", headers=headers
    )


def bedrock_route(script: ScriptedUpstream) -> Any:
    """The Starlette endpoint answering Converse and ConverseStream from ``script``."""

    async def endpoint(request: Request) -> Response:
        raw_path = request.scope.get("raw_path", b"").decode("ascii") or request.url.path
        raw = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        body = body if isinstance(body, dict) else {}
        peer = f"{request.client.host}:{request.client.port}" if request.client else ""
        script.record(request.method, raw_path, headers, body, peer=peer)
        found = operation_of(raw_path)
        if found is None:
            return _aws_error(404, f"Unknown operation {raw_path}.")
        if not headers.get("authorization", "").startswith("Bearer "):
            url = f"{request.url.scheme}://{headers.get('host', '')}{raw_path}"
            wrong = signature_problem(request.method, url, headers, raw, _credentials())
            if wrong is not None:
                return _aws_error(403, f"The request signature is wrong: {wrong}.")
        problems = converse_problems(raw_path, raw)
        if problems:
            return _aws_error(400, "botocore rejects the request: " + "; ".join(problems))
        bad = _bad_turns(body) or _bad_signatures(body)
        if bad is not None:
            return _aws_error(400, bad)
        operation, model = found
        view = chat_view(body, model)
        if (
            operation == "ConverseStream"
            and script.cannot_stream
            and script.cannot_stream(view, "chat")
        ):
            return _no_events(script)
        turn = script.next_turn(view, "chat")
        if turn is None:
            return _aws_error(500, "The scripted Bedrock upstream's script is exhausted.")
        if turn.status != 200:
            return _aws_error(turn.status, _message_of(turn), turn.headers)
        if turn.error_as_200:
            headers = {"x-amzn-requestid": script.new_id("req"), **turn.headers}
            return JSONResponse({"message": _message_of(turn)}, headers=headers)
        if operation == "ConverseStream":
            return _stream(script, turn, body)
        return _answer(script, turn, body)

    return endpoint
