"""Loop events to Responses API Server-Sent Events.

Owns the translation of :mod:`responses_gateway.loop.events` into the wire events of the Responses
streaming contract (``response.created`` ... ``response.completed``): event names, field names,
``sequence_number`` numbering, ``obfuscation`` padding and SSE framing. Its only state is what the
translation needs (the next sequence number, each open item's type, whether the terminal event was
sent) and two savings of one response: the encoded fields of the part whose deltas it is writing
(a delta's frame is that head, its encoded text and the fields after it: the bytes the dict
would encode to) and the random bytes its padding draws from. The event dicts are built here once
for every transport: SSE frames them, and the WebSocket sink
(:mod:`responses_gateway.sinks.websocket`) overrides only :meth:`SSESink._frame` and
:meth:`SSESink._frame_json`. It makes no control decisions, never reorders, invents or drops loop
events, and does not touch the transport beyond calling ``write`` once per frame.

A cancelled response has no wire event of its own (neither the SDK's ``ResponseStreamEvent`` union
nor the OpenAPI spec has a ``response.cancelled``), so it ends with ``response.failed`` whose
``response.status`` is ``cancelled``: every client stops there, and the status tells why.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from responses_gateway.loop.events import (
    ArgumentsDelta,
    ArgumentsFinished,
    ItemEvent,
    ItemFinished,
    ItemStarted,
    LoopEvent,
    PartFinished,
    PartStarted,
    ResponseFinished,
    ResponseStarted,
    TextDelta,
)

__all__ = ["SSESink", "encode_frame"]

_TERMINAL_EVENTS: dict[str, str] = {
    "completed": "response.completed",
    "incomplete": "response.incomplete",
    "failed": "response.failed",
    "cancelled": "response.failed",
}
"""The terminal wire event for each final ``Response.status``."""

_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

_DELTA_EVENTS: dict[str, str] = {
    "output_text": "response.output_text.delta",
    "refusal": "response.refusal.delta",
    "reasoning_text": "response.reasoning_text.delta",
}

_DONE_EVENTS: dict[str, str] = {
    "output_text": "response.output_text.done",
    "refusal": "response.refusal.done",
    "reasoning_text": "response.reasoning_text.done",
}

_PAD_BLOCK = 16
_POOL_BYTES = 512
"""Random bytes drawn from the system at a time for one sink's padding (about 30 deltas)."""


def encode_frame(event_type: str, data: dict[str, Any]) -> bytes:
    """One SSE frame: ``event: <type>\\ndata: <compact json>\\n\\n`` in UTF-8."""
    return f"event: {event_type}\ndata: {_encode_json(data)}\n\n".encode()


class _Padding:
    """Random hex characters that round a delta up to a block and add up to a block of noise.

    The padded length depends on the delta's length only through its block, plus random noise,
    so the frame size no longer tells an observer how many characters the delta carried. The
    noise comes from the operating system's CSPRNG (``os.urandom``), drawn :data:`_POOL_BYTES`
    at a time rather than per delta; each byte is used once, and the pool belongs to one sink
    (one response), never shared.
    """

    __slots__ = ("_at", "_pool")

    def __init__(self) -> None:
        self._pool = b""
        self._at = 0

    def _take(self, count: int) -> bytes:
        if self._at + count > len(self._pool):
            self._pool = os.urandom(_POOL_BYTES)
            self._at = 0
        taken = self._pool[self._at : self._at + count]
        self._at += count
        return taken

    def __call__(self, delta: str) -> str:
        noise = self._take(1)[0] % _PAD_BLOCK  # uniform: 256 is a multiple of the block
        size = _PAD_BLOCK - len(delta) % _PAD_BLOCK + noise
        return self._take((size + 1) // 2).hex()[:size]


class SSESink:
    """A :class:`~responses_gateway.loop.events.Sink` writing Responses SSE frames.

    Args:
        write: Called once per frame with its bytes. An ``OSError`` from it (the client went away)
            closes the sink instead of propagating.
        include_obfuscation: Add an ``obfuscation`` field of random padding to every delta event.
        first_sequence_number: The ``sequence_number`` of the first frame. A sink continuing a
            stream that another sink started (a background worker after ``response.queued``)
            passes the next number; such a sink (any value above 0) treats ``response.created``
            as already sent and translates :class:`ResponseStarted` into its status event only.
    """

    __slots__ = (
        "_closed",
        "_created",
        "_delta_head",
        "_delta_key",
        "_item_types",
        "_padding",
        "_seq",
        "_write",
    )

    def __init__(
        self,
        write: Callable[[bytes], None],
        *,
        include_obfuscation: bool = False,
        first_sequence_number: int = 0,
    ) -> None:
        self._write = write
        self._padding = _Padding() if include_obfuscation else None
        self._seq = first_sequence_number
        self._created = first_sequence_number > 0
        self._closed = False
        self._item_types: dict[int, str] = {}
        self._delta_key: tuple[str, str, int, str, int] | None = None
        self._delta_head = ""
        """The encoded fields before ``delta`` of the last delta event's part (its deltas
        follow one another, so one entry is the whole cache)."""

    @property
    def sequence_number(self) -> int:
        """The ``sequence_number`` the next frame will carry (frames written so far, from 0)."""
        return self._seq

    @property
    def closed(self) -> bool:
        """Whether the sink writes nothing more (client gone, or the terminal event was sent)."""
        return self._closed

    def close(self) -> None:
        """The client went away: every later :meth:`emit` is a no-op."""
        self._closed = True

    def emit(self, event: LoopEvent) -> None:
        """Translate one loop event into zero or more frames."""
        if self._closed:
            return
        if isinstance(event, TextDelta):
            self._text_delta(event)
        elif isinstance(event, ArgumentsDelta):
            self._arguments_delta(event)
        elif isinstance(event, PartStarted):
            self._part_started(event)
        elif isinstance(event, PartFinished):
            self._part_finished(event)
        elif isinstance(event, ItemStarted):
            self._item_started(event)
        elif isinstance(event, ItemFinished):
            self._item_finished(event)
        elif isinstance(event, ArgumentsFinished):
            self._arguments_finished(event)
        elif isinstance(event, ItemEvent):
            data = {"type": event.name, **event.data}
            if self._padding is not None and event.name.endswith(".delta"):
                data["obfuscation"] = self._padding(str(data.get("delta") or ""))
            self._send(event.name, data)
        elif isinstance(event, ResponseStarted):
            self._response_started(event)
        elif isinstance(event, ResponseFinished):
            self._response_finished(event)
        # UpstreamResponding has no wire event.

    def _send(self, event_type: str, data: dict[str, Any]) -> None:
        if self._closed:
            return
        data["sequence_number"] = self._seq
        try:
            self._write(self._frame(event_type, data))
        except OSError:
            self._closed = True
            return
        self._seq += 1

    def _frame(self, event_type: str, data: dict[str, Any]) -> bytes:
        """The bytes of one event on this transport: an SSE frame. Other transports of the same
        events (the WebSocket sink) override this and :meth:`_frame_json`, nothing else."""
        return encode_frame(event_type, data)

    def _frame_json(self, event_type: str, json_text: str) -> bytes:
        """The bytes of one event already encoded as a compact JSON object (what
        :meth:`_frame` makes of the same event as a dict)."""
        return f"event: {event_type}\ndata: {json_text}\n\n".encode()

    def _send_delta(self, key: tuple[str, str, int, str, int], tail: str) -> None:
        """Send a delta event: ``key`` is (type, item_id, output_index, the name of the part's
        index field or "", that index), ``tail`` the encoded ``delta`` and the keys after it
        (each with its leading comma). The bytes are those :meth:`_send` makes of the whole
        dict; the fields before ``delta`` are encoded once per part rather than per delta."""
        if self._closed:
            return
        if key != self._delta_key:
            event_type, item_id, output_index, index_name, index = key
            fields = {"type": event_type, "item_id": item_id, "output_index": output_index}
            if index_name:
                fields[index_name] = index
            self._delta_key = key
            self._delta_head = _encode_json(fields)[:-1]
        json_text = f'{self._delta_head},"delta":{tail},"sequence_number":{self._seq}}}'
        try:
            self._write(self._frame_json(key[0], json_text))
        except OSError:
            self._closed = True
            return
        self._seq += 1

    def _response_started(self, event: ResponseStarted) -> None:
        response = event.response
        if not self._created:
            self._created = True
            self._send("response.created", {"type": "response.created", "response": response})
        queued = response.get("status") == "queued"
        status_event = "response.queued" if queued else "response.in_progress"
        self._send(status_event, {"type": status_event, "response": response})

    def _item_started(self, event: ItemStarted) -> None:
        item = event.item
        item_type = item["type"]
        index = event.output_index
        self._item_types[index] = item_type
        self._send(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": index, "item": item},
        )
        if item_type == "mcp_call" or item_type == "mcp_list_tools":
            name = f"response.{item_type}.in_progress"
            self._send(name, {"type": name, "item_id": item["id"], "output_index": index})
        elif item_type == "compaction":
            name = "response.compaction.compacting"
            self._send(name, {"type": name, "item_id": item["id"], "output_index": index})

    def _part_started(self, event: PartStarted) -> None:
        part = event.part
        if part["type"] == "summary_text":
            self._send(
                "response.reasoning_summary_part.added",
                {
                    "type": "response.reasoning_summary_part.added",
                    "item_id": event.item_id,
                    "output_index": event.output_index,
                    "summary_index": event.content_index,
                    "part": {"type": "summary_text", "text": part.get("text", "")},
                },
            )
            return
        self._send(
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "item_id": event.item_id,
                "output_index": event.output_index,
                "content_index": event.content_index,
                "part": part,
            },
        )

    def _text_delta(self, event: TextDelta) -> None:
        part_type = event.part_type
        if part_type == "summary_text":
            event_type = "response.reasoning_summary_text.delta"
            index_name = "summary_index"
        else:
            event_type = _DELTA_EVENTS[part_type]
            index_name = "content_index"
        delta = event.delta
        tail = encode_basestring(delta)
        if part_type == "output_text":
            tail += ',"logprobs":[]'
        if self._padding is not None:
            tail += ',"obfuscation":' + encode_basestring(self._padding(delta))
        key = (event_type, event.item_id, event.output_index, index_name, event.content_index)
        self._send_delta(key, tail)

    def _part_finished(self, event: PartFinished) -> None:
        part = event.part
        part_type = part["type"]
        item_id = event.item_id
        index = event.output_index
        if part_type == "summary_text":
            text = part["text"]
            self._send(
                "response.reasoning_summary_text.done",
                {
                    "type": "response.reasoning_summary_text.done",
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": event.content_index,
                    "text": text,
                },
            )
            self._send(
                "response.reasoning_summary_part.done",
                {
                    "type": "response.reasoning_summary_part.done",
                    "item_id": item_id,
                    "output_index": index,
                    "summary_index": event.content_index,
                    "part": {"type": "summary_text", "text": text},
                },
            )
            return
        event_type = _DONE_EVENTS[part_type]
        done: dict[str, Any] = {
            "type": event_type,
            "item_id": item_id,
            "output_index": index,
            "content_index": event.content_index,
        }
        if part_type == "refusal":
            done["refusal"] = part["refusal"]
        else:
            done["text"] = part["text"]
            if part_type == "output_text":
                done["logprobs"] = part.get("logprobs") or []
        self._send(event_type, done)
        self._send(
            "response.content_part.done",
            {
                "type": "response.content_part.done",
                "item_id": item_id,
                "output_index": index,
                "content_index": event.content_index,
                "part": part,
            },
        )

    def _arguments_delta(self, event: ArgumentsDelta) -> None:
        if self._item_types.get(event.output_index) == "mcp_call":
            event_type = "response.mcp_call_arguments.delta"
        else:
            event_type = "response.function_call_arguments.delta"
        tail = encode_basestring(event.delta)
        if self._padding is not None:
            tail += ',"obfuscation":' + encode_basestring(self._padding(event.delta))
        self._send_delta((event_type, event.item_id, event.output_index, "", 0), tail)

    def _arguments_finished(self, event: ArgumentsFinished) -> None:
        item = event.item
        if item["type"] == "mcp_call":
            self._send(
                "response.mcp_call_arguments.done",
                {
                    "type": "response.mcp_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": event.output_index,
                    "arguments": item["arguments"],
                },
            )
            return
        self._send(
            "response.function_call_arguments.done",
            {
                "type": "response.function_call_arguments.done",
                "item_id": item["id"],
                "output_index": event.output_index,
                "name": item["name"],
                "arguments": item["arguments"],
            },
        )

    def _item_finished(self, event: ItemFinished) -> None:
        item = event.item
        index = event.output_index
        item_type = item["type"]
        self._item_types.pop(index, None)
        if item_type == "mcp_call" or item_type == "mcp_list_tools":
            outcome = "failed" if item.get("error") else "completed"
            name = f"response.{item_type}.{outcome}"
            self._send(name, {"type": name, "item_id": item["id"], "output_index": index})
        self._send(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": index, "item": item},
        )

    def _response_finished(self, event: ResponseFinished) -> None:
        response = event.response
        event_type = _TERMINAL_EVENTS.get(str(response.get("status")), "response.failed")
        self._send(event_type, {"type": event_type, "response": response})
        self._closed = True
