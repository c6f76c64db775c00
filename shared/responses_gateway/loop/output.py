"""The output writer: the one way adapters add items to a response.

Owns output-index allocation, gateway item ids and the item/part lifecycle: every item it opens is
appended to ``state.output`` and announced with :class:`ItemStarted`, every part is opened before
its text and closed before its item, and :meth:`OutputWriter.close_open` closes whatever is still
open (as ``incomplete``) when a model call ends early. Adapters parse their wire format and call
this; they never touch ``state.output`` or the sink directly, so every adapter produces the same
event shapes and no adapter can leave an item half-announced.

It also records who runs each call it adds (``LoopState.owners``), from what made the call:
a gateway tool's call is the gateway's (``mcp``), a lowered call is the tool-kind table's
(:func:`~responses_gateway.tool_kinds.lowered_owner`), a client function's is the client's, and
everything relayed is the upstream's. That is the only place ownership is decided.

It decides nothing about what the loop does next.
"""

from __future__ import annotations

from typing import Any, cast

from responses_gateway.ids import new_id
from responses_gateway.loop.events import (
    ArgumentsDelta,
    ArgumentsFinished,
    ItemEvent,
    ItemFinished,
    ItemStarted,
    PartFinished,
    PartStarted,
    Sink,
    TextDelta,
    UpstreamResponding,
)
from responses_gateway.loop.reasoning import ReasoningPolicy, sealed_content
from responses_gateway.loop.state import CallOwner, LoopState
from responses_gateway.loop.tools import NO_GATEWAY_TOOLS, GatewayTool, ToolRegistry
from responses_gateway.tool_kinds import CALL_ITEM_TYPES, Exposed, shown

__all__ = [
    "FunctionCallWriter",
    "GatewayCallWriter",
    "ListingWriter",
    "LoweredCallWriter",
    "MessageWriter",
    "OutputWriter",
    "ReasoningWriter",
    "RelayWriter",
    "snapshot",
]


def snapshot(item: dict[str, Any]) -> dict[str, Any]:
    """A copy of an item deep enough that later appends to it do not show in the copy."""
    out: dict[str, Any] = {}
    for key, value in item.items():
        if isinstance(value, list):
            out[key] = [dict(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    return out


class _ItemWriter:
    def __init__(self, writer: OutputWriter, index: int) -> None:
        self._writer = writer
        self.output_index = index
        self.closed = False
        self._item = writer.state.output[index]
        self._item_id = str(self._item["id"])
        self._pending: dict[tuple[int, str], tuple[dict[str, Any], list[str]]] = {}
        """Text appended since the last flush, per (part, key): appending to a list and joining
        once keeps long streams linear (``str +=`` on a dict value copies every time)."""

    @property
    def item(self) -> dict[str, Any]:
        """The item as it is now (pending text flushed into it)."""
        self._flush()
        return self._item

    @property
    def item_id(self) -> str:
        return self._item_id

    def _add(self, container: dict[str, Any], key: str, delta: str) -> None:
        slot = (id(container), key)
        pending = self._pending.get(slot)
        if pending is None:
            self._pending[slot] = (container, [container[key], delta])
        else:
            pending[1].append(delta)

    def _flush(self) -> None:
        for container, pieces in self._pending.values():
            key = next(k for k in ("text", "refusal", "arguments") if k in container)
            container[key] = "".join(pieces)
        self._pending.clear()

    def finish(self, status: str = "completed") -> None:
        raise NotImplementedError

    def _close_item(self) -> None:
        self.closed = True
        self._writer._closed(self)
        self._writer.sink.emit(ItemFinished(self.output_index, snapshot(self.item)))
        self._pending.clear()


class MessageWriter(_ItemWriter):
    """An assistant message: an ``output_text`` part (:meth:`text`, with its
    :meth:`annotation`s), and/or a ``refusal`` part (:meth:`refusal`) after it.

    Parts open with their first delta, so a message that only refuses has no empty text part;
    a message finished without any part gets one empty ``output_text`` part.
    """

    def __init__(self, writer: OutputWriter, index: int) -> None:
        super().__init__(writer, index)
        self._part = -1
        self._part_open = False

    def text(self, delta: str) -> None:
        if not delta or self.closed or self._refused():
            return
        if self._part < 0:
            self._open_part({"type": "output_text", "text": "", "annotations": [], "logprobs": []})
        self._append(delta)

    def refusal(self, delta: str) -> None:
        """Append refusal text, in a ``refusal`` part that follows the text part, if any."""
        if not delta or self.closed:
            return
        if not self._refused():
            self._close_part()
            self._open_part({"type": "refusal", "refusal": ""})
        self._append(delta)

    def annotation(self, annotation: dict[str, Any]) -> None:
        """Add a citation to the text part (``response.output_text.annotation.added``)."""
        if self.closed or self._part < 0 or self._refused():
            return
        annotations = self._item["content"][self._part]["annotations"]
        annotations.append(annotation)
        self._writer.sink.emit(
            ItemEvent(
                "response.output_text.annotation.added",
                {
                    "item_id": self._item_id,
                    "output_index": self.output_index,
                    "content_index": self._part,
                    "annotation_index": len(annotations) - 1,
                    "annotation": annotation,
                },
            )
        )

    def logprobs(self, entries: list[dict[str, Any]]) -> None:
        """Add token logprobs to the text part (``include: message.output_text.logprobs``)."""
        if entries and not self.closed and self._part >= 0 and not self._refused():
            self._item["content"][self._part]["logprobs"].extend(entries)

    def annotations(self) -> list[dict[str, Any]]:
        """The text part's annotations so far."""
        if self._part < 0 or self._refused():
            return []
        return list(self._item["content"][0].get("annotations") or [])

    def _refused(self) -> bool:
        return self._part >= 0 and self._kind() == "refusal"

    def _open_part(self, part: dict[str, Any]) -> None:
        content = self._item["content"]
        content.append(part)
        self._part = len(content) - 1
        self._part_open = True
        self._writer.sink.emit(PartStarted(self.output_index, self.item_id, self._part, dict(part)))

    def _kind(self) -> str:
        return str(self._item["content"][self._part]["type"])

    def _append(self, delta: str) -> None:
        part = self._item["content"][self._part]
        kind = part["type"]
        self._add(part, "refusal" if kind == "refusal" else "text", delta)
        self._writer.sink.emit(TextDelta(self.output_index, self._item_id, self._part, kind, delta))

    def _close_part(self) -> None:
        if self._part_open:
            self._part_open = False
            part = dict(self.item["content"][self._part])
            self._writer.sink.emit(PartFinished(self.output_index, self.item_id, self._part, part))

    def finish(self, status: str = "completed") -> None:
        if self.closed:
            return
        if self._part < 0:
            self._open_part({"type": "output_text", "text": "", "annotations": [], "logprobs": []})
        self.item["status"] = status
        self._close_part()
        self._close_item()


class ReasoningWriter(_ItemWriter):
    """A reasoning item: raw reasoning text (:meth:`text`) and/or summaries (:meth:`summary`).

    Under the writer's :class:`ReasoningPolicy`, raw text is mirrored into a summary part as it
    streams (``mirror_summary``), and the finished item gets a sealed ``encrypted_content``
    (``seal``, or whenever the upstream gave one of its own).
    """

    def __init__(self, writer: OutputWriter, index: int) -> None:
        super().__init__(writer, index)
        self._text_open = False
        self._text_index = 0
        self._summary_open: int | None = None
        self._mirror: int | None = None
        """The summary part mirroring the open raw text part, if any."""

    def text(self, delta: str) -> None:
        """Append raw reasoning text (text after a summary opens a new content part)."""
        if not delta or self.closed:
            return
        item = self._item
        if not self._text_open:
            self._close_summary()
            content = item.setdefault("content", [])
            content.append({"type": "reasoning_text", "text": ""})
            self._text_index = len(content) - 1
            self._text_open = True
            self._writer.sink.emit(
                PartStarted(self.output_index, self.item_id, self._text_index, dict(content[-1]))
            )
            if self._writer.reasoning_policy.mirror_summary:
                item["summary"].append({"type": "summary_text", "text": ""})
                self._mirror = len(item["summary"]) - 1
                self._writer.sink.emit(
                    PartStarted(
                        self.output_index, self.item_id, self._mirror, dict(item["summary"][-1])
                    )
                )
        self._add(item["content"][self._text_index], "text", delta)
        self._writer.sink.emit(
            TextDelta(self.output_index, self._item_id, self._text_index, "reasoning_text", delta)
        )
        if self._mirror is not None:
            self._add(item["summary"][self._mirror], "text", delta)
            self._writer.sink.emit(
                TextDelta(self.output_index, self._item_id, self._mirror, "summary_text", delta)
            )

    def summary(self, delta: str, index: int = 0) -> None:
        """Append text to summary part ``index`` (a new index closes the previous part)."""
        if not delta or self.closed:
            return
        item = self._item
        if self._summary_open != index:
            self._close_summary()
            self._close_text()
            while len(item["summary"]) <= index:
                item["summary"].append({"type": "summary_text", "text": ""})
            self._summary_open = index
            self._writer.sink.emit(
                PartStarted(self.output_index, self.item_id, index, dict(item["summary"][index]))
            )
        self._add(item["summary"][index], "text", delta)
        self._writer.sink.emit(
            TextDelta(self.output_index, self._item_id, index, "summary_text", delta)
        )

    def set_encrypted_content(self, value: str) -> None:
        self.item["encrypted_content"] = value

    def _close_summary(self) -> None:
        if self._summary_open is None:
            return
        index = self._summary_open
        self._summary_open = None
        self._writer.sink.emit(
            PartFinished(self.output_index, self.item_id, index, dict(self.item["summary"][index]))
        )

    def _close_text(self) -> None:
        if not self._text_open:
            return
        self._text_open = False
        index = self._text_index
        self._writer.sink.emit(
            PartFinished(self.output_index, self.item_id, index, dict(self.item["content"][index]))
        )
        mirror, self._mirror = self._mirror, None
        if mirror is not None:
            part = dict(self.item["summary"][mirror])
            self._writer.sink.emit(PartFinished(self.output_index, self.item_id, mirror, part))

    def finish(self, status: str = "completed") -> None:
        if self.closed:
            return
        self._close_summary()
        self._close_text()
        if status != "completed":
            self.item["status"] = status
        policy = self._writer.reasoning_policy
        if policy.seal or (policy.wrap_upstream and self.item.get("encrypted_content")):
            self.item["encrypted_content"] = sealed_content(self.item, policy.tenant)
        self._close_item()


class FunctionCallWriter(_ItemWriter):
    """A ``function_call`` item whose arguments stream with :meth:`arguments`."""

    def arguments(self, delta: str) -> None:
        if not delta or self.closed:
            return
        self._add(self._item, "arguments", delta)
        self._writer.sink.emit(ArgumentsDelta(self.output_index, self._item_id, delta))

    def set_name(self, name: str) -> None:
        """Name the call, for upstreams that send the name only when the call ends."""
        if not self.closed:
            self.item["name"] = name

    def finish(self, status: str = "completed") -> None:
        if self.closed:
            return
        item = self.item
        item["status"] = status
        self._writer.sink.emit(ArgumentsFinished(self.output_index, snapshot(item)))
        self._close_item()


class GatewayCallWriter(FunctionCallWriter):
    """A call to a gateway tool: arguments are gathered silently, then, when complete, it
    becomes an ``mcp_call`` (left open for the tool executor) or an ``mcp_approval_request``."""

    def __init__(self, writer: OutputWriter, gateway: GatewayTool) -> None:
        self._writer = writer
        self._gateway = gateway
        self._pieces: list[str] = []
        self.output_index = -1
        self.closed = False
        self._pending = {}

    @property
    def item(self) -> dict[str, Any]:
        if self.output_index < 0:
            return {"type": "function_call", "arguments": "".join(self._pieces), "name": ""}
        return self._writer.state.output[self.output_index]

    @property
    def item_id(self) -> str:
        return str(self.item.get("id", ""))

    def arguments(self, delta: str) -> None:
        if delta and not self.closed:
            self._pieces.append(delta)

    def set_name(self, name: str) -> None:
        return None

    def finish(self, status: str = "completed") -> None:
        if self.closed:
            return
        self.closed = True
        if status != "completed":
            return  # cut off: nothing was announced and nothing will run
        arguments = "".join(self._pieces) or "{}"
        gateway = self._gateway
        if gateway.needs_approval:
            self.output_index = self._writer._approval_request(gateway, arguments)
        else:
            self.output_index = self._writer.open_mcp_call(
                server_label=gateway.server_label, name=gateway.name, arguments=arguments
            )


class LoweredCallWriter(GatewayCallWriter):
    """A call of a lowered tool (``custom``, ``shell``, ``apply_patch``...): its function
    arguments are gathered silently, then, when complete, it becomes the kind's own item
    (``custom_tool_call``, ``shell_call``...) with the kind's events (see
    :mod:`responses_gateway.tool_kinds`)."""

    def __init__(self, writer: OutputWriter, exposed: Exposed, call_id: str) -> None:
        self._writer = writer
        self._exposed = exposed
        self._call_id = call_id
        self._pieces: list[str] = []
        self.output_index = -1
        self.closed = False
        self._pending = {}

    def finish(self, status: str = "completed") -> None:
        if self.closed:
            return
        self.closed = True
        fields = self._exposed.item("".join(self._pieces))
        self.output_index = self._writer.add_call_item(fields, self._call_id, status)


class RelayWriter:
    """An item a Responses upstream produced that the gateway relays as it is
    (``web_search_call``, ``image_generation_call``, ``custom_tool_call``...), with its own
    events, re-addressed to our output index."""

    def __init__(self, writer: OutputWriter, index: int) -> None:
        self._writer = writer
        self.output_index = index
        self.closed = False

    @property
    def item(self) -> dict[str, Any]:
        return self._writer.state.output[self.output_index]

    def event(self, name: str, data: dict[str, Any]) -> None:
        """Relay one of the item's own events (its ``output_index`` is replaced by ours)."""
        if self.closed:
            return
        fields = {k: v for k, v in data.items() if k not in ("type", "sequence_number")}
        fields["output_index"] = self.output_index
        if "item_id" in fields:
            fields["item_id"] = self.item.get("id")
        self._writer.sink.emit(ItemEvent(name, fields))

    def finish(self, final: dict[str, Any] | None = None, status: str = "completed") -> None:
        if self.closed:
            return
        self.closed = True
        item = self.item
        if final:
            item.update({k: v for k, v in final.items() if k != "id"})
        if status != "completed" and "status" in item:
            item["status"] = status
        self._writer._relay_closed(self)
        shown_item = shown(item, self._writer.state.include)
        self._writer.sink.emit(ItemFinished(self.output_index, snapshot(shown_item)))


class ListingWriter:
    """An ``mcp_list_tools`` item being filled by a server listing."""

    def __init__(self, writer: OutputWriter, index: int) -> None:
        self._writer = writer
        self.output_index = index

    def complete(self, tools: list[dict[str, Any]]) -> None:
        item = self._writer.state.output[self.output_index]
        item["tools"] = tools
        self._writer.sink.emit(ItemFinished(self.output_index, snapshot(item)))

    def fail(self, message: str) -> None:
        item = self._writer.state.output[self.output_index]
        item["error"] = message
        self._writer.sink.emit(ItemFinished(self.output_index, snapshot(item)))


class OutputWriter:
    """Opens output items on a :class:`LoopState` and reports them to a :class:`Sink`.

    Tool calls to gateway-owned tools (``tools``) are presented as ``mcp_call`` items, or as
    ``mcp_approval_request`` items when the client must approve them first; they never reach
    the client as ``function_call`` items.
    """

    def __init__(
        self,
        state: LoopState,
        sink: Sink,
        tools: ToolRegistry = NO_GATEWAY_TOOLS,
        reasoning: ReasoningPolicy | None = None,
    ):
        self.state = state
        self.sink = sink
        self.tools = tools
        self.calls: dict[str, Exposed] = {}
        """Exposed function name -> lowered tool, for the model call in progress (see
        :func:`responses_gateway.tool_kinds.tool_view`)."""
        self.reasoning_policy = reasoning if reasoning is not None else ReasoningPolicy()
        self._open: list[_ItemWriter] = []
        self._relayed: list[RelayWriter] = []

    def upstream_responding(self) -> None:
        """Report that the upstream accepted the call (its 2xx headers arrived)."""
        self.sink.emit(UpstreamResponding())

    def _append(self, item: dict[str, Any], owner: CallOwner | None = None) -> int:
        self.state.output.append(item)
        index = len(self.state.output) - 1
        if owner is not None:
            self.state.owners[index] = owner
        self.sink.emit(ItemStarted(index, snapshot(item)))
        return index

    def _call_ids(self) -> set[str]:
        return {
            str(item["call_id"])
            for items in (self.state.upstream_input, self.state.output)
            for item in items
            if item.get("type") in CALL_ITEM_TYPES and item.get("call_id")
        }

    def _closed(self, writer: _ItemWriter) -> None:
        if writer in self._open:
            self._open.remove(writer)

    def message(self, item_id: str | None = None, phase: str | None = None) -> MessageWriter:
        """Open an assistant message (its parts open with their first delta); ``phase``: the
        upstream's label (``commentary`` / ``final_answer``), kept for the client to resend."""
        item: dict[str, Any] = {
            "id": item_id or new_id("msg"),
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        if phase is not None:
            item["phase"] = phase
        index = self._append(item)
        writer = MessageWriter(self, index)
        self._open.append(writer)
        return writer

    def reasoning(self, item_id: str | None = None) -> ReasoningWriter:
        """Open a reasoning item with no summary and no content yet."""
        index = self._append({"id": item_id or new_id("rs"), "type": "reasoning", "summary": []})
        writer = ReasoningWriter(self, index)
        self._open.append(writer)
        return writer

    def function_call(
        self,
        *,
        name: str,
        call_id: str | None = None,
        item_id: str | None = None,
        namespace: str | None = None,
    ) -> FunctionCallWriter:
        """Open a tool call with empty arguments: a ``function_call`` item for a client tool; for
        a gateway tool, a call whose item appears when its arguments are complete; for a lowered
        tool (:attr:`calls`), its own item (a namespaced function keeps streaming as a
        ``function_call`` with its inner ``name`` and its ``namespace``).

        ``call_id`` is the upstream's; one already used in this transcript (some servers number
        calls per response) is replaced by a fresh id, so every call stays pairable.
        """
        gateway = self.tools.lookup(name)
        if gateway is not None:
            return GatewayCallWriter(self, gateway)
        if not call_id or call_id in self._call_ids():
            call_id = new_id("call")
        exposed = self.calls.get(name)
        if exposed is not None and exposed.kind.item_type != "function_call":
            lowered = LoweredCallWriter(self, exposed, call_id)
            self._open.append(lowered)  # a call cut off is still reported, as incomplete
            return lowered
        if exposed is not None:
            name, namespace = exposed.inner_name, exposed.namespace
        item: dict[str, Any] = {
            "id": item_id or new_id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        if namespace is not None:
            item["namespace"] = namespace
        index = self._append(item, "client")
        writer = FunctionCallWriter(self, index)
        self._open.append(writer)
        return writer

    def complete_function_call(
        self, *, name: str, arguments: str, call_id: str | None = None
    ) -> int:
        """Add a whole tool call (arguments in one delta); returns its output index."""
        writer = self.function_call(name=name, call_id=call_id)
        writer.arguments(arguments)
        writer.finish()
        return writer.output_index

    def add_call_item(self, fields: dict[str, Any], call_id: str, status: str = "completed") -> int:
        """Add a whole tool call item of a lowered kind (``fields`` from the tool-kind table),
        announced, its kind's events emitted, and closed with ``status``; returns its index."""
        from responses_gateway.tool_kinds import ITEM_KINDS, item_id_prefix, lowered_owner

        kind = ITEM_KINDS[str(fields["type"])]
        item = {"id": new_id(item_id_prefix(str(fields["type"])))}
        if kind.output_type is not None:  # answered by the client: pairable by call_id
            item["call_id"] = call_id
        item.update(fields)
        item["status"] = "in_progress"
        started = dict(item)
        if "input" in started:
            started["input"] = ""  # custom tool input streams in its own events
        owner = cast(CallOwner, lowered_owner(item))
        # a call cut off before its arguments were complete runs nowhere: it gets no owner
        index = self._append(started, owner if status == "completed" else None)
        for name, data in kind.events(item, index):
            self.sink.emit(ItemEvent(name, data))
        self.state.output[index] = item
        if status == "completed" and owner != "client":
            return index  # stays in_progress: the gateway runs it next (ExecuteTools)
        self.finish_call_item(index, status if status == "completed" else kind.cut_off)
        return index

    def finish_call_item(self, index: int, status: str = "completed") -> None:
        """Close the call item at ``index`` with ``status`` (its ``done`` event shows what the
        response's ``include`` asks for, see :func:`~responses_gateway.tool_kinds.shown`)."""
        item = self.state.output[index]
        item["status"] = status
        self.sink.emit(ItemFinished(index, snapshot(shown(item, self.state.include))))

    def add_item(self, item: dict[str, Any]) -> int:
        """Add a whole item the gateway produced (a ``tool_search_output``...), announced and
        done at once; returns its index."""
        index = self._append(item)
        self.sink.emit(ItemFinished(index, snapshot(item)))
        return index

    def relay(self, item: dict[str, Any]) -> RelayWriter:
        """Open an upstream item the gateway relays unchanged (see :class:`RelayWriter`)."""
        opened = dict(item)
        if not opened.get("id"):
            opened["id"] = new_id("item")
        writer = RelayWriter(self, self._append(opened, "upstream"))
        self._relayed.append(writer)
        return writer

    def _relay_closed(self, writer: RelayWriter) -> None:
        if writer in self._relayed:
            self._relayed.remove(writer)

    def open_mcp_call(
        self,
        *,
        server_label: str,
        name: str,
        arguments: str,
        approval_request_id: str | None = None,
    ) -> int:
        """Announce an ``mcp_call`` about to run (arguments complete); returns its index.

        The item stays ``in_progress`` until :meth:`finish_mcp_call`.
        """
        index = self._append(
            {
                "id": new_id("mcp"),
                "type": "mcp_call",
                "server_label": server_label,
                "name": name,
                "arguments": "",
                "output": None,
                "error": None,
                "approval_request_id": approval_request_id,
                "status": "in_progress",
            },
            "mcp",
        )
        item = self.state.output[index]
        item_id = str(item["id"])
        if arguments:
            item["arguments"] = arguments
            self.sink.emit(ArgumentsDelta(index, item_id, arguments))
        self.sink.emit(ArgumentsFinished(index, snapshot(item)))
        return index

    def finish_mcp_call(
        self,
        index: int,
        *,
        output: str | None = None,
        error: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> None:
        """Close the ``mcp_call`` at ``index`` with its result (``failed`` when ``error``)."""
        item = self.state.output[index]
        item["output"] = output
        item["error"] = error
        item["status"] = status or ("failed" if error else "completed")
        self.sink.emit(ItemFinished(index, snapshot(item)))

    def mcp_list_tools(self, server_label: str) -> ListingWriter:
        """Open an ``mcp_list_tools`` item for ``server_label`` (its tools not known yet)."""
        index = self._append(
            {
                "id": new_id("mcpl"),
                "type": "mcp_list_tools",
                "server_label": server_label,
                "tools": [],
                "error": None,
            }
        )
        return ListingWriter(self, index)

    def _approval_request(self, gateway: GatewayTool, arguments: str) -> int:
        index = self._append(
            {
                "id": new_id("mcpr"),
                "type": "mcp_approval_request",
                "server_label": gateway.server_label,
                "name": gateway.name,
                "arguments": arguments,
            }
        )
        self.sink.emit(ItemFinished(index, snapshot(self.state.output[index])))
        return index

    def open_compaction(self) -> int:
        """Open a ``compaction`` item (its content comes with :meth:`finish_compaction`)."""
        return self._append({"id": new_id("cmp"), "type": "compaction", "encrypted_content": ""})

    def finish_compaction(self, index: int, encrypted_content: str) -> None:
        """Close the ``compaction`` item at ``index`` with its sealed content."""
        item = self.state.output[index]
        item["encrypted_content"] = encrypted_content
        self.sink.emit(ItemFinished(index, snapshot(item)))

    def flush(self) -> None:
        """Write pending streamed text into the open items, so ``state.output`` is exact.

        Text appended while an item is open is joined lazily (linear in the stream's length);
        finishing or closing an item flushes it, so only readers of an open item need this.
        """
        for writer in self._open:
            writer._flush()

    def close_open(self, status: str = "incomplete") -> None:
        """Close every item still open, with ``status``, in output-index order."""
        for writer in sorted(self._open, key=lambda w: w.output_index):
            writer.finish(status)
        self._open.clear()
        for relayed in list(self._relayed):
            relayed.finish(status=status)
