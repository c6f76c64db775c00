"""The tool-kind table itself: one :class:`ToolKind` per tool family, the item types they make,
and the exposed names their tools get on function-only wires.

Owns :data:`KINDS`, the lookups derived from it (:func:`kind_of`, :data:`ITEM_KINDS`...),
:class:`Exposed` (one lowered tool and what its calls become) and :func:`exposed_name`. It
decides nothing about a request: :mod:`responses_gateway.tool_kinds.view` does.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from responses_gateway.tool_kinds._shapes import (
    APPLY_PATCH_SCHEMA,
    CODE_INTERPRETER_SCHEMA,
    COMPUTER_SCHEMA,
    FILE_SEARCH_SCHEMA,
    IMAGE_GENERATION_SCHEMA,
    LOCAL_SHELL_SCHEMA,
    SHELL_SCHEMA,
    WEB_SEARCH_SCHEMA,
    Event,
    action_arguments,
    apply_patch_arguments,
    apply_patch_fields,
    apply_patch_output,
    by_backend,
    code_interpreter_arguments,
    code_interpreter_events,
    code_interpreter_fields,
    code_interpreter_result,
    code_interpreter_seen,
    code_of,
    computer_arguments,
    computer_fields,
    custom_arguments,
    custom_events,
    custom_fields,
    custom_schema,
    file_search_arguments,
    file_search_events,
    file_search_fields,
    file_search_query,
    file_search_result,
    file_search_seen,
    fixed,
    function_arguments,
    function_fields,
    function_schema,
    image_generation_arguments,
    image_generation_events,
    image_generation_fields,
    image_generation_progress,
    image_generation_result,
    image_generation_seen,
    local_shell_fields,
    no_events,
    no_progress,
    plain_output,
    prompt_of,
    server_search,
    shell_events,
    shell_fields,
    tool_search_arguments,
    tool_search_fields,
    tool_search_output,
    tool_search_schema,
    web_search_arguments,
    web_search_events,
    web_search_fields,
    web_search_query,
    web_search_result,
    web_search_seen,
)

__all__ = [
    "BACKED_KINDS",
    "CALL_ITEM_TYPES",
    "CLIENT_CALL_ITEM_TYPES",
    "HOSTED_ITEM_TYPES",
    "ITEM_KINDS",
    "KINDS",
    "Exposed",
    "Backend",
    "ToolKind",
    "exposed_for",
    "exposed_name",
    "hosted_seen",
    "item_id_prefix",
    "kind_of",
    "lowered_owner",
    "shown",
]

Runner = Literal["client", "upstream"]
"""Who runs a kind's calls: the client (its call item goes back to it), or the upstream
(OpenAI's hosted tools: only a Responses upstream can)."""


_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def exposed_name(server_label: str, tool_name: str) -> str:
    """The function name a gateway tool is shown to the model under: ``<label>__<tool>``.

    Deterministic and collision-free: characters a function name cannot hold are replaced, and
    whenever that (or the 64-character limit) changed anything, a hash of the exact pair is
    appended, so two different pairs never share a name.
    """
    plain = f"{server_label}__{tool_name}"
    safe = _UNSAFE.sub("_", plain)
    if safe == plain and len(safe) <= 64:
        return safe
    digest = hashlib.sha256(f"{server_label}\0{tool_name}".encode()).hexdigest()[:8]
    return f"{safe[:55]}_{digest}"


@dataclass(frozen=True, slots=True)
class Backend:
    """How a hosted kind runs through an operator's MCP tool (``[[tool_backends]]``), and how
    its result lives in the call item (so later turns replay it from the item alone)."""

    argument: str
    """The MCP tool argument receiving :attr:`value` (the default of ``tool_backends.argument``)."""
    value: Callable[[dict[str, Any]], str]
    """Call item -> the string passed as :attr:`argument` (query, code, prompt)."""
    result: Callable[[dict[str, Any], str], dict[str, Any]]
    """(call item, the tool's text result) -> the item's result fields."""
    seen: Callable[[dict[str, Any]], str | None]
    """A finished call item -> the result text the model reads (None: the item has none)."""
    gated: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(include value, field path)``: result fields the client sees only when its
    ``include`` names them (they are stored regardless, for replay)."""
    progress: Callable[[dict[str, Any], str, int], list[Event]] = no_progress
    """(call item, the tool's text result, output index) -> events before ``.completed``
    (``image_generation_call.partial_image``)."""


@dataclass(frozen=True, slots=True)
class ToolKind:
    """One tool family, and how every part of the gateway treats it."""

    name: str
    tool_types: tuple[str, ...]
    """The ``tools[].type`` values of this kind."""
    runner: Runner
    item_type: str | None = None
    """The item its calls become (None: a hosted tool, which only a Responses upstream runs)."""
    output_type: str | None = None
    """The input item the client answers a call with."""
    schema: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Tool definition -> ``{description, parameters[, strict]}`` of its lowered function."""
    fixed_name: str | None = None
    """The exposed name of a built-in tool; None: the tool's own ``name``."""
    fields: Callable[[Exposed, str], dict[str, Any]] | None = None
    """(binding, the model's JSON arguments) -> the call item's own fields."""
    arguments: Callable[[dict[str, Any]], str] | None = None
    """A call item -> the lowered call's JSON arguments (replay)."""
    output_text: Callable[[dict[str, Any]], str] = plain_output
    """An output item -> the lowered ``function_call_output`` text (replay)."""
    events: Callable[[dict[str, Any], int], list[Event]] = no_events
    """(call item, output index) -> the events between its ``added`` and ``done``."""
    id_prefix: str = "item"
    """The prefix of the ids the gateway gives its call items."""
    gateway_runner: Callable[[dict[str, Any]], str | None] = lambda item: None
    """Who of the gateway runs a call item of this kind that it made from a lowered function
    call (``backend``: a hosted kind's configured backend; ``search``: a server tool search),
    or None: the client does (see :func:`lowered_owner`)."""
    backend: Backend | None = None
    """A hosted kind an operator may give a backend: how it is called and answered."""
    cut_off: str = "incomplete"
    """The status of a call the model was cut off in (one the SDK accepts for the item)."""

    @property
    def hosted(self) -> bool:
        return self.runner == "upstream"


KINDS: tuple[ToolKind, ...] = (
    ToolKind(
        "function",
        ("function",),
        "client",
        item_type="function_call",
        output_type="function_call_output",
        schema=function_schema,
        fields=function_fields,
        arguments=function_arguments,
        id_prefix="fc",
    ),
    ToolKind(
        "custom",
        ("custom",),
        "client",
        item_type="custom_tool_call",
        output_type="custom_tool_call_output",
        schema=custom_schema,
        fields=custom_fields,
        arguments=custom_arguments,
        events=custom_events,
        id_prefix="ctc",
    ),
    ToolKind(
        "shell",
        ("shell",),
        "client",
        item_type="shell_call",
        output_type="shell_call_output",
        schema=fixed(SHELL_SCHEMA),
        fixed_name="shell",
        fields=shell_fields,
        arguments=action_arguments,
        events=shell_events,
        id_prefix="sh",
    ),
    ToolKind(
        "local_shell",
        ("local_shell",),
        "client",
        item_type="local_shell_call",
        output_type="local_shell_call_output",
        schema=fixed(LOCAL_SHELL_SCHEMA),
        fixed_name="local_shell",
        fields=local_shell_fields,
        arguments=action_arguments,
        id_prefix="lsh",
    ),
    ToolKind(
        "apply_patch",
        ("apply_patch",),
        "client",
        item_type="apply_patch_call",
        output_type="apply_patch_call_output",
        schema=fixed(APPLY_PATCH_SCHEMA),
        fixed_name="apply_patch",
        fields=apply_patch_fields,
        arguments=apply_patch_arguments,
        output_text=apply_patch_output,
        id_prefix="apc",
        cut_off="in_progress",  # the SDK's apply_patch_call status is in_progress|completed
    ),
    ToolKind(
        "computer",
        ("computer", "computer_use_preview", "computer_use"),
        "client",
        item_type="computer_call",
        output_type="computer_call_output",
        schema=fixed(COMPUTER_SCHEMA),
        fixed_name="computer",
        fields=computer_fields,
        arguments=computer_arguments,
        id_prefix="cu",
    ),
    ToolKind(
        "tool_search",
        ("tool_search",),
        "client",
        item_type="tool_search_call",
        output_type="tool_search_output",
        schema=tool_search_schema,
        fixed_name="tool_search",
        fields=tool_search_fields,
        arguments=tool_search_arguments,
        output_text=tool_search_output,
        id_prefix="tsc",
        gateway_runner=server_search,
    ),
    ToolKind(
        "web_search",
        (
            "web_search",
            "web_search_preview",
            "web_search_2025_08_26",
            "web_search_preview_2025_03_11",
        ),
        "upstream",
        item_type="web_search_call",
        schema=fixed(WEB_SEARCH_SCHEMA),  # used only with a configured backend
        fixed_name="web_search",
        fields=web_search_fields,
        arguments=web_search_arguments,
        events=web_search_events,
        id_prefix="ws",
        gateway_runner=by_backend,
        backend=Backend(
            "query",
            web_search_query,
            web_search_result,
            web_search_seen,
            gated=(("web_search_call.action.sources", ("action", "sources")),),
        ),
        cut_off="failed",  # both specs' web_search_call status has no incomplete
    ),
    ToolKind(
        "file_search",
        ("file_search",),
        "upstream",
        item_type="file_search_call",
        schema=fixed(FILE_SEARCH_SCHEMA),
        fixed_name="file_search",
        fields=file_search_fields,
        arguments=file_search_arguments,
        events=file_search_events,
        id_prefix="fs",
        gateway_runner=by_backend,
        backend=Backend(
            "query",
            file_search_query,
            file_search_result,
            file_search_seen,
            gated=(("file_search_call.results", ("results",)),),
        ),
    ),
    ToolKind(
        "code_interpreter",
        ("code_interpreter",),
        "upstream",
        item_type="code_interpreter_call",
        schema=fixed(CODE_INTERPRETER_SCHEMA),
        fixed_name="code_interpreter",
        fields=code_interpreter_fields,
        arguments=code_interpreter_arguments,
        events=code_interpreter_events,
        id_prefix="ci",
        gateway_runner=by_backend,
        backend=Backend(
            "code",
            code_of,
            code_interpreter_result,
            code_interpreter_seen,
            gated=(("code_interpreter_call.outputs", ("outputs",)),),
        ),
    ),
    ToolKind(
        "image_generation",
        ("image_generation",),
        "upstream",
        item_type="image_generation_call",
        schema=fixed(IMAGE_GENERATION_SCHEMA),
        fixed_name="image_generation",
        fields=image_generation_fields,
        arguments=image_generation_arguments,
        events=image_generation_events,
        id_prefix="ig",
        gateway_runner=by_backend,
        backend=Backend(
            "prompt",
            prompt_of,
            image_generation_result,
            image_generation_seen,
            progress=image_generation_progress,
        ),
        cut_off="failed",  # the SDK's image_generation_call status has no incomplete
    ),
)
"""Every tool kind the gateway knows (``mcp`` excepted: the gateway runs it itself)."""

_BY_TYPE: dict[str, ToolKind] = {t: kind for kind in KINDS for t in kind.tool_types}

ITEM_KINDS: dict[str, ToolKind] = {
    item: kind
    for kind in KINDS
    for item in (kind.item_type, kind.output_type)
    if item is not None and kind.schema is not None
}
"""Call and output item types -> the kind that lowers them on replay."""

HOSTED_ITEM_TYPES = frozenset(k.item_type for k in KINDS if k.hosted and k.item_type)
"""Call items of hosted tools (only a Responses upstream shows or replays them)."""

CALL_ITEM_TYPES = frozenset(k.item_type for k in KINDS if k.item_type)
"""Every tool call item type carrying a ``call_id`` the client may answer."""

CLIENT_CALL_ITEM_TYPES = frozenset(k.item_type for k in KINDS if k.item_type and not k.hosted)
"""Call items that end a response: the client runs them and answers in its next request."""


BACKED_KINDS: dict[str, Backend] = {k.name: k.backend for k in KINDS if k.backend is not None}
"""Hosted kinds an operator may give a backend (``[[tool_backends]] type``) -> how."""


def shown(item: dict[str, Any], include: Iterable[str]) -> dict[str, Any]:
    """``item`` as the client sees it: result fields its ``include`` does not name emptied
    (``results: null``; a nested field left out), in a copy; the item itself when nothing
    was."""
    kind = ITEM_KINDS.get(str(item.get("type")))
    if kind is None or kind.backend is None or item.get("type") != kind.item_type:
        return item
    wanted = set(include)
    out = item
    for value, path in kind.backend.gated:
        if value in wanted:
            continue
        parent, key = (out, path[0]) if len(path) == 1 else (out.get(path[0]), path[1])
        if not isinstance(parent, dict) or parent.get(key) is None:
            continue
        if out is item:
            out = {**item}
        if len(path) == 1:
            out[key] = None  # as OpenAI answers an item whose results were not asked for
        else:
            out[path[0]] = {k: v for k, v in parent.items() if k != key}
    return out


def hosted_seen(item: dict[str, Any]) -> str | None:
    """What the model reads as the result of a finished hosted call item that carries one
    (None: the item carries no result, as a call relayed without ``include``)."""
    kind = ITEM_KINDS.get(str(item.get("type")))
    if kind is None or kind.backend is None or item.get("type") != kind.item_type:
        return None
    if item.get("status") == "failed":
        return f"The {kind.name} call failed."
    return kind.backend.seen(item)


def item_id_prefix(item_type: str) -> str:
    """The id prefix of a call item the gateway creates (``ctc`` for ``custom_tool_call``...)."""
    kind = ITEM_KINDS.get(item_type)
    return kind.id_prefix if kind is not None else "item"


def kind_of(tool_type: str) -> ToolKind | None:
    """The kind of a ``tools[].type``; None for ``mcp``, ``namespace`` and unknown types."""
    return _BY_TYPE.get(tool_type)


@dataclass(frozen=True, slots=True)
class Exposed:
    """One function the model sees on a lowering wire, and what its calls become."""

    name: str
    """The exposed (function) name."""
    kind: ToolKind
    tool: dict[str, Any]
    """The (inner) tool definition."""
    namespace: str | None = None

    @property
    def inner_name(self) -> str:
        return str(self.tool.get("name") or self.kind.fixed_name or self.name)

    def function(self) -> dict[str, Any]:
        """The Responses ``function`` tool the model is offered."""
        assert self.kind.schema is not None
        schema = self.kind.schema(self.tool)
        tool = {"type": "function", "name": self.name, **schema}
        return {k: v for k, v in tool.items() if v is not None}

    def item(self, arguments: str) -> dict[str, Any]:
        """The fields (``type`` included) of the item a call with ``arguments`` becomes."""
        assert self.kind.fields is not None and self.kind.item_type is not None
        return {"type": self.kind.item_type, **self.kind.fields(self, arguments)}


def exposed_for(kind: ToolKind, name: str | None, namespace: str | None) -> str:
    """The exposed name of a tool: stable across turns, a pure function of its identity."""
    if namespace is not None:
        return exposed_name(namespace, name or "")
    return kind.fixed_name or name or kind.name


def lowered_owner(item: dict[str, Any]) -> str:
    """Who runs a call item the gateway made from a lowered function call (a lowering wire's
    model called a built-in or hosted tool): ``backend`` or ``search`` (the gateway), else
    ``client``. Decided once, when the item is made; items a Responses upstream relays are never
    asked (they are the upstream's)."""
    kind = ITEM_KINDS.get(str(item.get("type")))
    if kind is None or item.get("type") != kind.item_type:
        return "client"
    return kind.gateway_runner(item) or "client"
