"""Converse requests: a Responses model call as the body of Bedrock's Converse API.

Owns :func:`to_converse_request` (pure, no I/O) and the provider's Bedrock settings
(:class:`BedrockOptions`), with the rules :mod:`responses_gateway.adapters.bedrock` lists: system
blocks, merged user and assistant turns (tool results first), images and files as bytes, tool
uses and results, the model's own reasoning blocks (:data:`SIGNATURE_PREFIX`,
:data:`REDACTED_PREFIX`), tools and the tool choice, inference settings, the output format, the
reasoning effort as the model family's own field, request metadata, the service tier and cache
points. What Converse cannot carry is an :class:`~responses_gateway.errors.InvalidRequestError`
naming it. It sends nothing and reads no answer (the adapter does).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from responses_gateway.adapters.base import ModelCall
from responses_gateway.errors import InvalidRequestError

__all__ = ["REDACTED_PREFIX", "SIGNATURE_PREFIX", "BedrockOptions", "to_converse_request"]

SIGNATURE_PREFIX = "bedrock.signature:"
"""``encrypted_content`` of a reasoning item: the model's signature of its reasoning text."""
REDACTED_PREFIX = "bedrock.redacted:"
"""``encrypted_content`` of a redacted reasoning item: the model's opaque bytes (base64)."""

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NOT_ID = re.compile(r"[^a-zA-Z0-9_-]")
_DATA_URL = re.compile(r"^data:([^;,]+)?(?:;[^,]*)?;base64,(.*)$", re.S)
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg"}
_IMAGE_FORMATS |= {"image/gif": "gif", "image/webp": "webp"}
_DOCUMENT_FORMATS = ("pdf", "csv", "doc", "docx", "xls", "xlsx", "html", "txt", "md")
_DOCUMENT_MIME = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})


@dataclass(frozen=True, slots=True)
class BedrockOptions:
    """A Bedrock provider's settings beyond the common ones."""

    additional_model_request_fields: Mapping[str, Any] = field(default_factory=dict)
    """Sent as ``additionalModelRequestFields`` with every call (model-specific fields, such as
    Anthropic's ``thinking`` budget or ``top_k``)."""
    cache_points: bool = False
    """Mark the prompt for Bedrock's prompt cache: a ``cachePoint`` after the system blocks,
    after the tools and at the end of the transcript, so the next call of a growing
    conversation reads its prefix from the cache (models with prompt caching)."""


_CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
_EARLIER = "(The conversation continues from earlier turns.)"
"""The user turn a transcript starting with the model's turn gets first (truncation or a
client's history can start there): Converse wants a conversation to open with the user."""


# --- request: Responses items -> Converse ----------------------------------------------------


def _refuse(message: str, param: str = "input") -> InvalidRequestError:
    return InvalidRequestError(message, param=param)


def _tool_use_id(call_id: Any) -> str:
    """A call id as Converse accepts it (``[a-zA-Z0-9_-]{1,64}``), the same for call and result."""
    text = _NOT_ID.sub("_", str(call_id or "call"))
    return text[:64] or "call"


def _decoded(data: str, what: str) -> str:
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        raise _refuse(f"Bedrock upstreams need {what} as base64 data.") from None
    return base64.b64encode(raw).decode("ascii")


def _image(part: dict[str, Any]) -> dict[str, Any]:
    url = part.get("image_url")
    match = _DATA_URL.match(url) if isinstance(url, str) else None
    if match is None:
        raise _refuse(
            "Bedrock upstreams take input_image.image_url as a data URL "
            "(data:image/png;base64,...): Bedrock does not fetch URLs or file ids."
        )
    fmt = _IMAGE_FORMATS.get((match.group(1) or "").lower())
    if fmt is None:
        raise _refuse("Bedrock upstreams take png, jpeg, gif and webp images.")
    return {"image": {"format": fmt, "source": {"bytes": _decoded(match.group(2), "images")}}}


class _Documents:
    """Document names of one request (Converse wants them distinct and plain)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def block(self, part: dict[str, Any]) -> dict[str, Any]:
        data = part.get("file_data")
        filename = str(part.get("filename") or "document")
        if not isinstance(data, str) or not data:
            raise _refuse(
                "Bedrock upstreams take input_file with file_data: Bedrock does not fetch URLs "
                "or file ids."
            )
        match = _DATA_URL.match(data)
        mime = (match.group(1) or "").lower() if match else ""
        payload = match.group(2) if match else data
        stem, _, extension = filename.rpartition(".")
        fmt = _DOCUMENT_MIME.get(mime) or (extension.lower() if stem else "")
        if fmt not in _DOCUMENT_FORMATS:
            raise _refuse(
                f"Bedrock upstreams take files of types {', '.join(_DOCUMENT_FORMATS)}; "
                f"{filename!r} is none of them."
            )
        return {
            "document": {
                "format": fmt,
                "name": self._name(stem or filename),
                "source": {"bytes": _decoded(payload, "input_file.file_data")},
            }
        }

    def _name(self, stem: str) -> str:
        base = " ".join(re.sub(r"[^a-zA-Z0-9\-()\[\] ]", " ", stem).split())[:180] or "document"
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base} ({n})"
        self.names.add(name)
        return name


def _text_of(part: dict[str, Any]) -> str:
    value = part.get("refusal") if part.get("type") == "refusal" else part.get("text")
    return value if isinstance(value, str) else ""


def _blocks(content: Any, documents: _Documents, media: bool = True) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            text = _text_of(part)
            if text.strip():
                blocks.append({"text": text})
        elif kind == "input_image" and media:
            blocks.append(_image(part))
        elif kind == "input_file" and media:
            blocks.append(documents.block(part))
    return blocks


def _arguments(raw: Any) -> Any:
    if isinstance(raw, dict):
        return raw
    text = raw if isinstance(raw, str) and raw.strip() else "{}"
    try:
        value = json.loads(text)
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def _reasoning_block(item: dict[str, Any]) -> dict[str, Any] | None:
    blob = item.get("encrypted_content")
    if not isinstance(blob, str):
        return None
    if blob.startswith(REDACTED_PREFIX):
        return {"reasoningContent": {"redactedContent": blob[len(REDACTED_PREFIX) :]}}
    if not blob.startswith(SIGNATURE_PREFIX):
        return None
    content = item.get("content")
    text = "".join(
        str(p.get("text") or "")
        for p in (content if isinstance(content, list) else [])
        if isinstance(p, dict) and p.get("type") == "reasoning_text"
    )
    signature = blob[len(SIGNATURE_PREFIX) :]
    return {"reasoningContent": {"reasoningText": {"text": text, "signature": signature}}}


def _tool_result(item: dict[str, Any], documents: _Documents) -> dict[str, Any]:
    output = item.get("output")
    if isinstance(output, list):
        content = _blocks(output, documents)
    elif isinstance(output, str):
        content = [{"text": output}] if output.strip() else []
    elif output is None:
        content = []
    else:
        content = [{"json": output}]
    return {"toolResult": {"toolUseId": _tool_use_id(item.get("call_id")), "content": content}}


class _Conversation:
    """Converse ``system`` blocks and ``messages``, built item by item."""

    def __init__(self) -> None:
        self.system: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.documents = _Documents()
        self.tool_blocks = False
        """Whether a ``toolUse`` or ``toolResult`` block was added (then tools must be sent)."""

    def _add(self, role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if not self.messages or self.messages[-1]["role"] != role:
            self.messages.append({"role": role, "content": blocks})
            return
        content = self.messages[-1]["content"]
        if "toolResult" in blocks[0]:  # tool results lead the user turn that answers the calls
            at = next((i for i, b in enumerate(content) if "toolResult" not in b), len(content))
            content[at:at] = blocks
        else:
            content.extend(blocks)

    def add(self, item: dict[str, Any]) -> None:
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = str(item.get("role") or "user")
            if role in ("system", "developer"):
                self.system += _blocks(item.get("content"), self.documents, media=False)
            else:
                assistant = role == "assistant"
                blocks = _blocks(item.get("content"), self.documents, media=not assistant)
                self._add("assistant" if assistant else "user", blocks)
        elif kind == "function_call":
            self.tool_blocks = True
            use = {
                "toolUseId": _tool_use_id(item.get("call_id")),
                "name": str(item.get("name") or ""),
                "input": _arguments(item.get("arguments")),
            }
            self._add("assistant", [{"toolUse": use}])
        elif kind == "function_call_output":
            self.tool_blocks = True
            self._add("user", [_tool_result(item, self.documents)])
        elif kind == "reasoning":
            block = _reasoning_block(item)
            if block is not None:
                self._add("assistant", [block])


def _tool_spec(tool: dict[str, Any], index: int) -> dict[str, Any]:
    name = str(tool.get("name") or "")
    if not _NAME.match(name):
        raise _refuse(
            f"Bedrock upstreams take tool names of 1 to 64 letters, digits, '_' and '-'; "
            f"{name!r} is not one.",
            param=f"tools[{index}].name",
        )
    parameters = tool.get("parameters")
    schema = parameters if isinstance(parameters, dict) else {"type": "object", "properties": {}}
    spec: dict[str, Any] = {"name": name, "inputSchema": {"json": schema}}
    if isinstance(tool.get("description"), str) and tool["description"]:
        spec["description"] = tool["description"]
    if tool.get("strict") is True:
        spec["strict"] = True
    return {"toolSpec": spec}


def _tool_choice(choice: Any) -> dict[str, Any] | None:
    """The Converse ``toolChoice`` for a Responses ``tool_choice`` (None: leave it out)."""
    if isinstance(choice, dict):
        if choice.get("type") == "function" and choice.get("name"):
            return {"tool": {"name": str(choice["name"])}}
        if choice.get("type") == "allowed_tools":
            choice = choice.get("mode")
    if choice == "required":
        return {"any": {}}
    if choice == "auto":
        return {"auto": {}}
    return None


def _inference(params: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for ours, theirs in (
        ("max_output_tokens", "maxTokens"),
        ("temperature", "temperature"),
        ("top_p", "topP"),
    ):
        if params.get(ours) is not None:
            config[theirs] = params[ours]
    return config


_ANY_OBJECT = {"type": "json_schema", "name": "json_object", "schema": {"type": "object"}}
"""A ``json_object`` format as the schema it amounts to (Converse has only JSON schemas)."""


def _output_config(params: dict[str, Any]) -> dict[str, Any] | None:
    fmt = (params.get("text") or {}).get("format") or {}
    if fmt.get("type") == "json_object":
        fmt = _ANY_OBJECT
    if fmt.get("type") != "json_schema":
        return None
    schema: dict[str, Any] = {"schema": json.dumps(fmt.get("schema") or {}), "name": fmt["name"]}
    if isinstance(fmt.get("description"), str):
        schema["description"] = fmt["description"]
    return {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": schema}}}


_THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
"""Anthropic's thinking budget (tokens) for each reasoning effort."""
_NOVA_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
_NOVA_EFFORT["xhigh"] = "high"
_ANSWER_ROOM = 8192
"""Tokens left for the answer above a thinking budget when the client set no limit."""


def _effort_fields(model: str, effort: Any, inference: dict[str, Any]) -> dict[str, Any]:
    """A reasoning effort as the model family's own request field (``inference`` may grow a
    ``maxTokens``: Anthropic's models need it above the thinking budget)."""
    if not isinstance(effort, str) or effort == "none":
        return {}
    family = model.lower()
    if "anthropic" in family or "claude" in family:
        budget = _THINKING_BUDGET.get(effort, _THINKING_BUDGET["medium"])
        limit = inference.get("maxTokens")
        if isinstance(limit, int) and limit <= budget:
            budget = limit - 1
            if budget < _THINKING_BUDGET["minimal"]:
                return {}  # no room to think within the client's limit
        elif limit is None:
            inference["maxTokens"] = budget + _ANSWER_ROOM
        return {"thinking": {"type": "enabled", "budget_tokens": budget}}
    if "nova" in family:
        level = _NOVA_EFFORT.get(effort, "medium")
        return {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": level}}
    return {"reasoning_effort": effort}


_METADATA_VALUE = re.compile(r"[^a-zA-Z0-9\s:_@$#=/+,.-]")
_TIERS = frozenset({"default", "flex", "priority"})


def _mark_cache_points(body: dict[str, Any]) -> None:
    """A cache point after the system blocks, the tools and the last message (at most three of
    the four a request may hold)."""
    if body.get("system"):
        body["system"].append(dict(_CACHE_POINT))
    tools = (body.get("toolConfig") or {}).get("tools")
    if tools:
        tools.append(dict(_CACHE_POINT))
    if body["messages"]:
        body["messages"][-1]["content"].append(dict(_CACHE_POINT))


def to_converse_request(
    call: ModelCall, options: BedrockOptions = BedrockOptions()
) -> dict[str, Any]:
    """The exact Converse / ConverseStream request body for ``call`` (``modelId`` is in the path).

    Raises:
        InvalidRequestError: the request holds something Converse cannot carry (named).
    """
    conversation = _Conversation()
    if call.instructions and call.instructions.strip():
        conversation.system.append({"text": call.instructions})
    for item in call.input:
        conversation.add(item)
    if conversation.messages and conversation.messages[0]["role"] == "assistant":
        conversation.messages.insert(0, {"role": "user", "content": [{"text": _EARLIER}]})
    body: dict[str, Any] = {"messages": conversation.messages}
    if conversation.system:
        body["system"] = conversation.system
    inference = _inference(call.params)
    effort = _effort_fields(
        call.model, (call.params.get("reasoning") or {}).get("effort"), inference
    )
    if inference:
        body["inferenceConfig"] = inference
    functions = [t for t in call.tools if t.get("type", "function") == "function"]
    tools = [_tool_spec(t, i) for i, t in enumerate(functions)]
    if tools and (call.tool_choice != "none" or conversation.tool_blocks):
        body["toolConfig"] = {"tools": tools}
        choice = _tool_choice(call.tool_choice)
        if choice is not None:
            body["toolConfig"]["toolChoice"] = choice
    output = _output_config(call.params)
    if output is not None:
        body["outputConfig"] = output
    if options.cache_points:
        _mark_cache_points(body)
    extra = {**effort, **options.additional_model_request_fields}
    if extra:
        body["additionalModelRequestFields"] = extra
    user = call.params.get("user")
    if isinstance(user, str) and user:
        body["requestMetadata"] = {"user": _METADATA_VALUE.sub("_", user)[:256]}
    if call.params.get("service_tier") in _TIERS:
        body["serviceTier"] = {"type": call.params["service_tier"]}
    return body
