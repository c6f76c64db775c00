"""A validator for whole Responses API event streams, for tests.

Owns the rules a finished stream must satisfy: the wire contract's canonical orders
(``response.created`` first, ``sequence_number`` 0, 1, 2... without gaps, one response id, every
item and part opened before its content and closed before the terminal event, exactly one terminal
event and nothing after it, ``response.completed.output`` equal to the items marked done, streamed
text and arguments equal to their ``.done`` values), the rules of the openai SDK's strict
``client.responses.stream()`` helper, and each event's shape as the SDK's event model declares it
(no missing field, no unknown top-level field). It is an independent oracle: it imports nothing
from the code that produces streams and never repairs or reorders what it is given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, get_args

import pydantic
from openai.types.responses import ResponseStreamEvent

__all__ = [
    "StreamViolation",
    "check_socket_error",
    "check_socket_stream",
    "check_stream",
    "parse_sse",
]


class StreamViolation(AssertionError):
    """A stream breaks the contract; the message names the event and the rule."""


def _event_models() -> dict[str, type[pydantic.BaseModel]]:
    union = get_args(ResponseStreamEvent)[0]
    models: dict[str, type[pydantic.BaseModel]] = {}
    for model in get_args(union):
        (name,) = get_args(model.model_fields["type"].annotation)
        models[name] = model
    return models


_MODELS = _event_models()

_LIFECYCLE = frozenset(
    {
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.completed",
        "response.incomplete",
        "response.failed",
    }
)
_TERMINAL_STATUSES: dict[str, frozenset[str]] = {
    "response.completed": frozenset({"completed"}),
    "response.incomplete": frozenset({"incomplete"}),
    "response.failed": frozenset({"failed", "cancelled"}),
}
_STARTED_STATUSES: dict[str, frozenset[str]] = {
    "response.created": frozenset({"queued", "in_progress"}),
    "response.queued": frozenset({"queued"}),
    "response.in_progress": frozenset({"in_progress"}),
}
_CONTRACT_FIELDS: dict[str, frozenset[str]] = {
    # Required by the contract although the SDK model does not declare them: the OpenAPI spec
    # requires ``name`` here, and the SDK raises on an error event only with a nested ``error``.
    "response.function_call_arguments.done": frozenset({"name"}),
    "error": frozenset({"error"}),
}

# Content part events: event type -> (part type it belongs to, the part field holding its text).
_TEXT_DELTAS = {
    "response.output_text.delta": "output_text",
    "response.refusal.delta": "refusal",
    "response.reasoning_text.delta": "reasoning_text",
}
_TEXT_DONES = {
    "response.output_text.done": ("output_text", "text"),
    "response.refusal.done": ("refusal", "refusal"),
    "response.reasoning_text.done": ("reasoning_text", "text"),
}
_PART_TEXT_FIELD = {"output_text": "text", "refusal": "refusal", "reasoning_text": "text"}
_PART_ITEM_TYPE = {"output_text": "message", "refusal": "message", "reasoning_text": "reasoning"}
_ARGUMENT_EVENTS = {
    "response.function_call_arguments.delta": "function_call",
    "response.function_call_arguments.done": "function_call",
    "response.mcp_call_arguments.delta": "mcp_call",
    "response.mcp_call_arguments.done": "mcp_call",
}
_ITEM_STATUS_EVENTS = {
    "response.mcp_call.in_progress": "mcp_call",
    "response.mcp_call.completed": "mcp_call",
    "response.mcp_call.failed": "mcp_call",
    "response.mcp_list_tools.in_progress": "mcp_list_tools",
    "response.mcp_list_tools.completed": "mcp_list_tools",
    "response.mcp_list_tools.failed": "mcp_list_tools",
    **{
        f"response.{kind}.{step}": kind
        for kind, steps in (
            ("web_search_call", ("in_progress", "searching", "completed")),
            ("file_search_call", ("in_progress", "searching", "completed")),
            ("code_interpreter_call", ("in_progress", "interpreting", "completed")),
            ("image_generation_call", ("in_progress", "generating", "completed", "partial_image")),
        )
        for step in steps
    },
}
_STREAMED_FIELDS = {
    # event type -> (item type, the item field the deltas build, "delta" or the .done field)
    "response.custom_tool_call_input.delta": ("custom_tool_call", "input", "delta"),
    "response.custom_tool_call_input.done": ("custom_tool_call", "input", "input"),
    "response.code_interpreter_call_code.delta": ("code_interpreter_call", "code", "delta"),
    "response.code_interpreter_call_code.done": ("code_interpreter_call", "code", "code"),
}
_SHELL_COMMAND_EVENTS = frozenset(
    {
        "response.shell_call_command.added",
        "response.shell_call_command.delta",
        "response.shell_call_command.done",
    }
)


@dataclass(slots=True)
class _Part:
    type: str
    text: str
    open: bool = True
    text_done: bool = False


@dataclass(slots=True)
class _Item:
    type: str
    id: str | None
    call_id: str | None
    name: str | None
    """The call's name: from ``added``, then from ``arguments.done`` (an upstream may name a call
    only when it ends), and ``output_item.done`` must agree with the latter."""
    arguments: str
    arguments_done: str | None = None
    parts: dict[int, _Part] = field(default_factory=dict)
    summaries: dict[int, _Part] = field(default_factory=dict)
    done: dict[str, Any] | None = None
    streamed: dict[str, _Part] = field(default_factory=dict)
    """Item fields built from deltas (``input`` of a custom tool call, ``code``...)."""
    commands: dict[int, _Part] = field(default_factory=dict)
    """A shell call's commands, by ``command_index``."""


def _describe(error: pydantic.ValidationError, limit: int = 5) -> str:
    """The relevant lines of a validation error.

    A union (output items, content parts) reports a failure per member; the members whose
    ``type`` literal did not match are noise, so their errors are dropped.
    """
    errors = error.errors(include_url=False)
    wrong = [
        e["loc"][:-1] for e in errors if e["type"] == "literal_error" and e["loc"][-1:] == ("type",)
    ]
    relevant = [e for e in errors if not any(e["loc"][: len(w)] == w for w in wrong)] or errors
    lines = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in relevant[:limit]]
    if len(relevant) > limit:
        lines.append(f"... and {len(relevant) - limit} more")
    return "; ".join(lines)


def _first_difference(output: Any, done: list[Any]) -> str:
    if not isinstance(output, list) or len(output) != len(done):
        count = len(output) if isinstance(output, list) else output
        return f"{count!r} output items, {len(done)} items done"
    index = next(i for i, (a, b) in enumerate(zip(output, done, strict=True)) if a != b)
    return f"output[{index}] = {output[index]!r}, done item = {done[index]!r}"


class _Checker:
    def __init__(self) -> None:
        self.position = 0
        self.event_type = ""
        self.response_id: str | None = None
        self.items: dict[int, _Item] = {}
        self.terminal: dict[str, Any] | None = None

    def fail(self, message: str) -> StreamViolation:
        return StreamViolation(f"event {self.position} ({self.event_type}): {message}")

    def check(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        if not events:
            raise StreamViolation("the stream has no events")
        for position, event in enumerate(events):
            self.position = position
            self.event_type = str(event.get("type")) if isinstance(event, dict) else "?"
            self.check_event(event)
        if self.terminal is None:
            raise StreamViolation(
                f"the stream ended after {len(events)} events without a terminal event "
                "(response.completed, response.incomplete or response.failed)"
            )
        return self.terminal

    def check_event(self, event: dict[str, Any]) -> None:
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise self.fail("an event must be a JSON object with a string 'type'")
        if self.terminal is not None:
            raise self.fail(
                f"sent after the terminal event {self.terminal['type']}; it must be the last"
            )
        if self.position == 0 and event["type"] != "response.created":
            raise self.fail("the first event must be response.created")
        if event.get("sequence_number") != self.position:
            raise self.fail(
                f"sequence_number is {event.get('sequence_number')!r}, expected {self.position}"
            )
        self.check_shape(event)
        event_type = event["type"]
        if event_type in _LIFECYCLE:
            self.check_lifecycle(event)
        elif event_type == "response.output_item.added":
            self.item_added(event)
        elif event_type == "response.output_item.done":
            self.item_done(event)
        elif event_type == "error":
            return
        elif "output_index" in event:
            self.content_event(event)

    def check_shape(self, event: dict[str, Any]) -> None:
        event_type = event["type"]
        model = _MODELS.get(event_type)
        if model is None:
            raise self.fail("not an event type the openai SDK knows")
        try:
            model.model_validate(event)
        except pydantic.ValidationError as error:
            raise self.fail(
                f"does not match the SDK's {model.__name__}: {_describe(error)}"
            ) from None
        contract_fields = _CONTRACT_FIELDS.get(event_type, frozenset())
        allowed = set(model.model_fields) | contract_fields
        if event_type.endswith(".delta"):
            allowed.add("obfuscation")
            if not isinstance(event.get("obfuscation", ""), str):
                raise self.fail("obfuscation must be a string")
        unknown = sorted(set(event) - allowed)
        if unknown:
            raise self.fail(f"fields unknown to the SDK's {model.__name__}: {unknown}")
        missing = sorted(contract_fields - set(event))
        if missing:
            raise self.fail(f"missing fields the contract requires: {missing}")
        if event_type == "error":
            nested = event["error"]
            if not isinstance(nested, dict) or not {"type", "code", "message", "param"} <= set(
                nested
            ):
                raise self.fail("an error event needs a nested error {type, code, message, param}")

    def check_lifecycle(self, event: dict[str, Any]) -> None:
        event_type = event["type"]
        response = event["response"]
        if event_type == "response.created":
            if self.position != 0:
                raise self.fail("response.created may only be the first event")
            self.response_id = response["id"]
        elif response["id"] != self.response_id:
            raise self.fail(
                f"response id {response['id']!r} differs from {self.response_id!r} "
                "in response.created"
            )
        status = response.get("status")
        if event_type in _STARTED_STATUSES:
            if status not in _STARTED_STATUSES[event_type]:
                raise self.fail(f"response.status {status!r} does not fit this event")
            return
        if status not in _TERMINAL_STATUSES[event_type]:
            raise self.fail(f"response.status {status!r} does not fit this terminal event")
        open_items = sorted(i for i, item in self.items.items() if item.done is None)
        if open_items:
            raise self.fail(f"output indexes {open_items} were added but never marked done")
        done = [self.items[i].done for i in sorted(self.items)]
        output = response.get("output")
        if output != done:
            raise self.fail(
                "response.output differs from the output_item.done items in output_index order: "
                + _first_difference(output, done)
            )
        self.terminal = event

    def item_added(self, event: dict[str, Any]) -> None:
        index = event["output_index"]
        if index in self.items:
            raise self.fail(f"output_index {index} was already added")
        item = event["item"]
        self.items[index] = _Item(
            type=item["type"],
            id=item.get("id"),
            call_id=item.get("call_id"),
            name=item.get("name"),
            arguments=item.get("arguments") or "",
        )

    def open_item(self, event: dict[str, Any]) -> _Item:
        index = event["output_index"]
        item = self.items.get(index)
        if item is None:
            raise self.fail(f"output_index {index} has no output_item.added before it")
        if item.done is not None:
            raise self.fail(f"output_index {index} was already marked done")
        if "item_id" in event and event["item_id"] != item.id:
            raise self.fail(
                f"item_id {event['item_id']!r} is not the id {item.id!r} added at {index}"
            )
        return item

    def item_done(self, event: dict[str, Any]) -> None:
        item = self.open_item(event)
        done = event["item"]
        if done["type"] != item.type or done.get("id") != item.id:
            raise self.fail(
                f"item ({done['type']}, {done.get('id')!r}) is not the one added "
                f"({item.type}, {item.id!r})"
            )
        if item.call_id is not None and done.get("call_id") != item.call_id:
            raise self.fail(f"call_id {done.get('call_id')!r} changed from {item.call_id!r}")
        for kind, parts in (("content part", item.parts), ("summary part", item.summaries)):
            still_open = sorted(i for i, part in parts.items() if part.open)
            if still_open:
                raise self.fail(f"{kind}s {still_open} are still open")
        for index, part in item.parts.items():
            key = _PART_TEXT_FIELD[part.type]
            content = done.get("content") or []
            final = content[index].get(key) if index < len(content) else None
            if final != part.text:
                raise self.fail(f"content[{index}].{key} {final!r} != streamed {part.text!r}")
        for index, part in item.summaries.items():
            summary = done.get("summary") or []
            final = summary[index].get("text") if index < len(summary) else None
            if final != part.text:
                raise self.fail(f"summary[{index}].text {final!r} != streamed {part.text!r}")
        for key, part in item.streamed.items():
            if not part.text_done:
                raise self.fail(f"the item's {key} was streamed but never marked done")
            if done.get(key) != part.text:
                raise self.fail(f"{key} {done.get(key)!r} != streamed {part.text!r}")
        commands = (done.get("action") or {}).get("commands") if item.commands else None
        for index, part in item.commands.items():
            final = commands[index] if commands and index < len(commands) else None
            if not part.text_done or final != part.text:
                raise self.fail(f"command {index} {final!r} != streamed {part.text!r}")
        if item.arguments_done is not None and done.get("name", item.name) != item.name:
            raise self.fail(f"name {done.get('name')!r} != arguments.done name {item.name!r}")
        if item.arguments_done is not None and done.get("arguments") != item.arguments_done:
            raise self.fail(
                f"arguments {done.get('arguments')!r} != arguments.done {item.arguments_done!r}"
            )
        item.done = done

    def content_event(self, event: dict[str, Any]) -> None:
        event_type = event["type"]
        item = self.open_item(event)
        if event_type == "response.content_part.added":
            self.part_added(item, item.parts, event["content_index"], event["part"])
        elif event_type == "response.reasoning_summary_part.added":
            self.part_added(item, item.summaries, event["summary_index"], event["part"])
        elif event_type in _TEXT_DELTAS:
            part = self.open_part(item.parts, event["content_index"], _TEXT_DELTAS[event_type])
            part.text += event["delta"]
        elif event_type == "response.reasoning_summary_text.delta":
            part = self.open_part(item.summaries, event["summary_index"], "summary_text")
            part.text += event["delta"]
        elif event_type in _TEXT_DONES:
            part_type, key = _TEXT_DONES[event_type]
            part = self.open_part(item.parts, event["content_index"], part_type)
            self.text_done(part, event[key])
        elif event_type == "response.reasoning_summary_text.done":
            part = self.open_part(item.summaries, event["summary_index"], "summary_text")
            self.text_done(part, event["text"])
        elif event_type == "response.content_part.done":
            self.part_done(item.parts, event["content_index"], event["part"])
        elif event_type == "response.reasoning_summary_part.done":
            self.part_done(item.summaries, event["summary_index"], event["part"])
        elif event_type in _ARGUMENT_EVENTS:
            self.arguments(item, event)
        elif event_type in _ITEM_STATUS_EVENTS and item.type != _ITEM_STATUS_EVENTS[event_type]:
            raise self.fail(f"sent for a {item.type} item")
        elif event_type in _STREAMED_FIELDS:
            self.streamed_field(item, event)
        elif event_type in _SHELL_COMMAND_EVENTS:
            self.shell_command(item, event)

    def streamed_field(self, item: _Item, event: dict[str, Any]) -> None:
        item_type, key, source = _STREAMED_FIELDS[event["type"]]
        if item.type != item_type:
            raise self.fail(f"sent for a {item.type} item")
        part = item.streamed.setdefault(key, _Part(key, ""))
        if part.text_done:
            raise self.fail(f"the item's {key} is already done")
        if source == "delta":
            part.text += event["delta"]
        else:
            self.text_done(part, event[source])

    def shell_command(self, item: _Item, event: dict[str, Any]) -> None:
        if item.type != "shell_call":
            raise self.fail(f"sent for a {item.type} item")
        index = event["command_index"]
        if event["type"].endswith(".added"):
            if index in item.commands:
                raise self.fail(f"command {index} was already added")
            item.commands[index] = _Part("command", event["command"])
            return
        part = item.commands.get(index)
        if part is None:
            raise self.fail(f"command {index} has no shell_call_command.added before it")
        if event["type"].endswith(".delta"):
            if part.text_done:
                raise self.fail(f"command {index} is already done")
            part.text += event["delta"]
        else:
            self.text_done(part, event["command"])

    def part_added(
        self, item: _Item, parts: dict[int, _Part], index: int, part: dict[str, Any]
    ) -> None:
        part_type = part["type"]
        expected_item = _PART_ITEM_TYPE.get(part_type, "reasoning")
        if item.type != expected_item:
            raise self.fail(f"a {part_type} part cannot open in a {item.type} item")
        if index in parts:
            raise self.fail(f"part {index} was already added")
        parts[index] = _Part(part_type, part.get(_PART_TEXT_FIELD.get(part_type, "text"), ""))

    def open_part(self, parts: dict[int, _Part], index: int, part_type: str) -> _Part:
        part = parts.get(index)
        if part is None:
            raise self.fail(f"part {index} has no part added event before it")
        if not part.open:
            raise self.fail(f"part {index} is already done")
        if part.type != part_type:
            raise self.fail(f"part {index} is a {part.type} part, not {part_type}")
        return part

    def text_done(self, part: _Part, text: str) -> None:
        if part.text_done:
            raise self.fail("the part's text is already done")
        if text != part.text:
            raise self.fail(f"text {text!r} != accumulated deltas {part.text!r}")
        part.text_done = True

    def part_done(self, parts: dict[int, _Part], index: int, done: dict[str, Any]) -> None:
        part = self.open_part(parts, index, done["type"])
        if not part.text_done:
            raise self.fail(f"part {index} closed before its text .done event")
        final = done.get(_PART_TEXT_FIELD.get(part.type, "text"))
        if final != part.text:
            raise self.fail(f"part text {final!r} != accumulated deltas {part.text!r}")
        part.open = False

    def arguments(self, item: _Item, event: dict[str, Any]) -> None:
        event_type = event["type"]
        if item.type != _ARGUMENT_EVENTS[event_type]:
            raise self.fail(f"sent for a {item.type} item")
        if item.arguments_done is not None:
            raise self.fail("the arguments are already done")
        if event_type.endswith(".delta"):
            item.arguments += event["delta"]
            return
        if event["arguments"] != item.arguments:
            raise self.fail(
                f"arguments {event['arguments']!r} != accumulated deltas {item.arguments!r}"
            )
        item.name = event.get("name", item.name)
        item.arguments_done = event["arguments"]


def check_stream(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Validate a whole stream of parsed events; return its terminal event's ``response``.

    Raises:
        StreamViolation: the first rule the stream breaks, naming the event's position and type.
    """
    terminal = _Checker().check(events)
    response: dict[str, Any] = terminal["response"]
    return response


def check_socket_stream(
    events: list[dict[str, Any]], stream_id: str | None = None
) -> dict[str, Any]:
    """Validate one response's WebSocket-mode events (parsed messages, in order); return its
    terminal ``response``. Every event must carry ``stream_id`` exactly when the create named
    one, and with that value; without it, the events must form a valid HTTP stream.

    Raises:
        StreamViolation: the first rule the events break.
    """
    stripped = []
    for position, event in enumerate(events):
        if event.get("stream_id") != stream_id or (stream_id is None and "stream_id" in event):
            raise StreamViolation(
                f"event {position} ({event.get('type')}): stream_id is "
                f"{event.get('stream_id')!r}, expected {stream_id!r}"
            )
        stripped.append({k: v for k, v in event.items() if k != "stream_id"})
    return check_stream(stripped)


def check_socket_error(event: dict[str, Any], stream_id: str | None = None) -> dict[str, Any]:
    """Validate a WebSocket-mode ``error`` event against the SDK's ``ResponseWsError`` (no field
    it does not declare; a nested ``error`` with ``type``, ``code``, ``message`` and ``param``;
    an integer ``status``) and return its nested error.

    Raises:
        StreamViolation: the event breaks one of those rules.
    """
    from openai.types.responses.responses_server_event import ResponseWsError

    try:
        ResponseWsError.model_validate(event)
    except pydantic.ValidationError as error:
        raise StreamViolation(f"error event: {_describe(error)}") from None
    unknown = sorted(set(event) - set(ResponseWsError.model_fields))
    if unknown:
        raise StreamViolation(f"error event: fields unknown to ResponseWsError: {unknown}")
    nested = event["error"]
    if not {"type", "code", "message", "param"} <= set(nested):
        raise StreamViolation("error event: the nested error needs type, code, message, param")
    if not isinstance(event.get("status"), int):
        raise StreamViolation("error event: status must be the HTTP status as an integer")
    if event.get("stream_id") != stream_id:
        raise StreamViolation(f"error event: stream_id {event.get('stream_id')!r} != {stream_id!r}")
    return dict(nested)


def parse_sse(body: bytes | str) -> list[dict[str, Any]]:
    """Parse a whole SSE body into its events' JSON objects.

    Every frame must have an ``event:`` name equal to its data's ``type`` and one JSON object as
    data; a ``[DONE]`` sentinel is a violation (the Responses API sends none). Comment lines and
    ``id:``/``retry:`` fields are ignored.

    Raises:
        StreamViolation: a frame breaks one of those rules.
    """
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    events: list[dict[str, Any]] = []
    for number, frame in enumerate(text.split("\n\n")):
        name: str | None = None
        data: list[str] = []
        for line in frame.split("\n"):
            if not line or line.startswith(":"):
                continue
            key, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
            elif key not in ("id", "retry"):
                raise StreamViolation(f"frame {number}: unknown SSE field {key!r}")
        if name is None and not data:
            continue
        payload = "\n".join(data)
        if payload.strip() == "[DONE]":
            raise StreamViolation(f"frame {number}: the Responses API sends no [DONE]")
        try:
            event = json.loads(payload)
        except ValueError as error:
            raise StreamViolation(f"frame {number}: data is not JSON: {error}") from None
        if not isinstance(event, dict):
            raise StreamViolation(f"frame {number}: data is not a JSON object")
        if name is None:
            raise StreamViolation(f"frame {number}: no event: line for {event.get('type')!r}")
        if name != event.get("type"):
            raise StreamViolation(
                f"frame {number}: event name {name!r} != data.type {event.get('type')!r}"
            )
        events.append(event)
    return events
