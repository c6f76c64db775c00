"""The whole Responses contract as tables: for every name the SDK knows, what each wire does.

Owns one registry per family (:data:`TOOLS`, :data:`INPUT_ITEMS`, :data:`OUTPUT_ITEMS`,
:data:`STREAM_EVENTS`, :data:`CREATE_FIELDS`, :data:`INCLUDE_VALUES`; all in :data:`FAMILIES`).
A :class:`Row` says, per upstream wire (``chat``, ``responses``, ``harmony``, ``bedrock``), one
:class:`Handling`: ``relayed`` exactly, ``lowered`` (to what), run by the ``gateway``, or
``refused`` / ``omitted`` under a named policy (``refused``: a 400 naming the field;
``omitted``: left out, with the reason in the row). The tool rows are derived from the tool-kind
table (:mod:`responses_gateway.tool_kinds`), which stays the single source for tools. Bedrock's
Converse API is a function wire: where its row gives no handling of its own, it handles a name as
chat does (:meth:`Row.on`).

It also owns the one place where input items no function wire can show become transcript items a
model can use (:func:`lower_context_items`, driven by each input row's ``lower`` function): a
replayed hosted call (``web_search_call``...) becomes context text, a ``program`` and its
``program_output`` a call and its result, a ``configuration_update`` a developer note, a
``function_call_output`` without ``call_id`` its output as context. Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the errors module is imported where a 400 is raised
    from responses_gateway.errors import InvalidRequestError

__all__ = [
    "CREATE_FIELDS",
    "FAMILIES",
    "GATEWAY_FAILURE_CODES",
    "GATEWAY_INCOMPLETE_REASONS",
    "INCLUDE_VALUES",
    "OPENAI_FAILURE_CODES",
    "OPENAI_INCOMPLETE_REASONS",
    "INPUT_ITEMS",
    "OUTPUT_ITEMS",
    "STREAM_EVENTS",
    "TOOLS",
    "ALL_CHECKED_FIELDS",
    "WIRES",
    "Fate",
    "Handling",
    "Row",
    "check_request",
    "checked_fields",
    "wire_refusals",
    "coverage",
    "failure_code",
    "include_gated",
    "lower_context_items",
]

Wire = Literal["chat", "responses", "harmony", "bedrock"]
WIRES: tuple[Wire, ...] = ("chat", "responses", "harmony", "bedrock")
Fate = Literal["relayed", "lowered", "gateway", "refused", "omitted"]
Lowering = Callable[[dict[str, Any]], list[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Handling:
    """What one wire does with one name."""

    fate: Fate
    how: str = ""
    """What it is lowered to, what the gateway does, or the policy and its reason."""
    sent_as: str = ""
    """Create fields forwarded (``relayed``/``lowered``): the key of the upstream payload the
    value lands in (``max_tokens`` for ``max_output_tokens`` on chat, ``prompt`` for what
    harmony renders into its prompt). tests/e2e/test_contract_fields.py sets each field and
    checks that key changes."""
    accepts: Callable[[Any], bool] | None = field(default=None, compare=False)
    """Create fields: the values this fate covers; any other value the client sets is refused
    (a 400 naming the field, the reason in :attr:`how`). None: every value."""


@dataclass(frozen=True, slots=True)
class Row:
    """One name of a family and its handling on each wire."""

    name: str
    chat: Handling
    responses: Handling
    harmony: Handling
    lower: Lowering | None = field(default=None, compare=False)
    """Input items only: the items this one becomes on a function wire (chat, harmony, bedrock)
    when the tool-kind table does not lower it itself."""
    bedrock: Handling | None = None
    """Bedrock's Converse API; None: as :attr:`chat` (both are function wires)."""

    def on(self, wire: str) -> Handling:
        """The handling on ``wire``."""
        if wire == "responses":
            return self.responses
        if wire == "chat":
            return self.chat
        if wire == "harmony":
            return self.harmony
        if wire == "bedrock":
            return self.bedrock if self.bedrock is not None else self.chat
        raise KeyError(wire)


def _row(
    name: str,
    responses: Handling,
    chat: Handling,
    harmony: Handling | None = None,
    lower: Lowering | None = None,
    bedrock: Handling | None = None,
) -> Row:
    return Row(name, chat, responses, harmony if harmony is not None else chat, lower, bedrock)


def _all(name: str, handling: Handling) -> Row:
    return Row(name, handling, handling, handling)


RELAYED = Handling("relayed")

# --------------------------------------------------------------------------- lowerings


def _text(item: dict[str, Any], role: str, text: str) -> list[dict[str, Any]]:
    part = "output_text" if role == "assistant" else "input_text"
    return [{"type": "message", "role": role, "content": [{"type": part, "text": text}]}]


def _fields(item: dict[str, Any], *skip: str) -> str:
    shown = {k: v for k, v in item.items() if k not in ("type", "id", "status", *skip)}
    return json.dumps(shown, ensure_ascii=False, sort_keys=True)


def _hosted_context(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A hosted tool call replayed on a function wire: what it did, as the model's own note."""
    return _text(
        item, "assistant", f"[{item.get('type')} {item.get('status') or ''}] {_fields(item)}"
    )


def _program(item: dict[str, Any]) -> list[dict[str, Any]]:
    call = {"type": "function_call", "call_id": str(item.get("call_id") or item.get("id"))}
    return [{**call, "name": "program", "arguments": json.dumps({"code": item.get("code", "")})}]


def _program_output(item: dict[str, Any]) -> list[dict[str, Any]]:
    call_id = str(item.get("call_id") or item.get("id"))
    return [{"type": "function_call_output", "call_id": call_id, "output": item.get("result", "")}]


def _configuration_update(item: dict[str, Any]) -> list[dict[str, Any]]:
    return _text(item, "developer", f"Configuration update for the rest of this conversation: "
                 f"{_fields(item)}")  # fmt: skip


def _orphan_output(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``function_call_output`` without ``call_id`` (a program's tool result): context text."""
    output = item.get("output")
    if not isinstance(output, str):
        output = "".join(str(p.get("text") or "") for p in output or [] if isinstance(p, Mapping))
    caller = item.get("caller")
    caller_id = caller.get("caller_id") if isinstance(caller, Mapping) else None
    source = f" (for {caller_id})" if caller_id else ""
    return _text(item, "user", f"Tool output{source}: {output}")


# --------------------------------------------------------------------------- tools


def _tool_rows() -> tuple[Row, ...]:
    from responses_gateway.tool_kinds import KINDS

    rows: list[Row] = []
    for kind in KINDS:
        for tool_type in kind.tool_types:
            if kind.hosted:
                lowered = Handling(
                    "omitted",
                    "hosted tool without a configured backend: the provider's hosted_tools "
                    "policy omits it visibly or rejects the request (400 on tools)",
                )
            else:
                lowered = Handling("lowered", f"function '{kind.fixed_name or '<name>'}'; calls "
                                   f"become {kind.item_type} items")  # fmt: skip
            rows.append(_row(tool_type, RELAYED, lowered))
    rows.append(_all("mcp", Handling("gateway", "the gateway lists and calls the MCP server")))
    rows.append(
        _row("namespace", RELAYED, Handling("lowered", "its functions as '<namespace>__<name>'"))
    )
    rows.append(
        _row(
            "programmatic_tool_calling",
            RELAYED,
            Handling("refused", "no function wire can run programs (400 on tools)"),
        )
    )
    return tuple(rows)


# --------------------------------------------------------------------------- input items

_TOOL_ITEM = Handling("lowered", "function_call / function_call_output under the exposed name")
_HOSTED_ITEM = Handling("lowered", "assistant context text describing the call")


def _input_rows() -> tuple[Row, ...]:
    from responses_gateway.tool_kinds import HOSTED_ITEM_TYPES, ITEM_KINDS

    rows = [
        _row(
            "message",
            RELAYED,
            Handling("lowered", "a chat / harmony message"),
            bedrock=Handling(
                "lowered",
                "a user or assistant message's content blocks (consecutive items of one role "
                "merged); system and developer messages as system blocks; images and files as "
                "bytes (a URL or file_id: 400)",
            ),
        ),
        _row(
            "function_call",
            RELAYED,
            Handling("lowered", "an assistant tool call (chat tool_calls, harmony commentary)"),
            bedrock=Handling("lowered", "a toolUse block (arguments as a JSON document)"),
        ),
        _row(
            "function_call_output",
            RELAYED,
            Handling(
                "lowered",
                "the call's tool message; without call_id (a program's result) user context text",
            ),
            lower=_orphan_output,
            bedrock=Handling(
                "lowered",
                "a toolResult block (text, images, files); without call_id (a program's "
                "result) user context text",
            ),
        ),
        _all("item_reference", Handling("gateway", "resolved from the store, then as its item")),
        _row(
            "reasoning",
            Handling(
                "lowered",
                "relayed with its encrypted_content (the gateway's seal opened); without one "
                "omitted: a store:false upstream cannot resolve a bare reasoning id",
            ),
            Handling(
                "lowered",
                "chat: reasoning_content when the provider sets send_reasoning_content, "
                "otherwise omitted (chat has no reasoning input)",
            ),
            Handling("lowered", "an analysis-channel message"),
            bedrock=Handling(
                "lowered",
                "a reasoningContent block when its encrypted_content holds Bedrock's signature "
                "or redacted reasoning (sealed by the gateway); otherwise omitted (a model "
                "refuses reasoning it did not sign)",
            ),
        ),
        _all("mcp_list_tools", Handling("gateway", "the listing is reused; no upstream call")),
        _all("mcp_approval_request", Handling("gateway", "pairs with mcp_approval_response")),
        _all("mcp_approval_response", Handling("gateway", "the approved call runs on the gateway")),
        _all("mcp_call", Handling("gateway", "replayed as the exposed call and its output")),
        _row(
            "additional_tools",
            RELAYED,
            Handling("gateway", "its tools are offered as declared tools; the item is not sent"),
        ),
        _all("compaction", Handling("gateway", "unsealed and expanded into its transcript")),
        _all("compaction_trigger", Handling("gateway", "compacts the transcript before the call")),
        _row(
            "configuration_update",
            RELAYED,
            Handling("lowered", "a developer note stating the update"),
            lower=_configuration_update,
        ),
        _row(
            "program",
            RELAYED,
            Handling("lowered", "a function_call named 'program' with its code"),
            lower=_program,
        ),
        _row(
            "program_output",
            RELAYED,
            Handling("lowered", "the program call's function_call_output"),
            lower=_program_output,
        ),
    ]
    named = {row.name for row in rows}
    for item_type in sorted(ITEM_KINDS.keys() - HOSTED_ITEM_TYPES - named):
        rows.append(_row(item_type, RELAYED, _TOOL_ITEM))
    for item_type in sorted(HOSTED_ITEM_TYPES - named):
        rows.append(_row(item_type, RELAYED, _HOSTED_ITEM, lower=_hosted_context))
    return tuple(rows)


# --------------------------------------------------------------------------- output items

_BEDROCK_OUTPUT: dict[str, Handling] = {
    "message": Handling("lowered", "from Converse text blocks"),
    "function_call": Handling("lowered", "from toolUse blocks (input streamed as arguments)"),
    "reasoning": Handling(
        "lowered",
        "from reasoningContent blocks: text, the signature or redacted content sealed into "
        "encrypted_content",
    ),
}
_OUTPUT_NOTES: dict[str, Handling] = {
    "message": Handling("lowered", "from chat content/refusal, harmony final channel"),
    "function_call": Handling("lowered", "from chat tool_calls, harmony commentary calls"),
    "reasoning": Handling("lowered", "from chat reasoning_content, harmony analysis channel"),
    "mcp_call": Handling("gateway", "the gateway's own call of an MCP tool"),
    "mcp_list_tools": Handling("gateway", "the gateway's listing of an MCP server"),
    "mcp_approval_request": Handling("gateway", "a gateway MCP call awaiting approval"),
    "compaction": Handling("gateway", "the gateway's sealed compaction summary"),
}
_NEVER_OUTPUT = Handling(
    "omitted",
    "a client-sent item type: no function wire model produces it (a Responses upstream's is "
    "relayed)",
)


def _output_rows(names: tuple[str, ...]) -> tuple[Row, ...]:
    from responses_gateway.tool_kinds import CLIENT_CALL_ITEM_TYPES, HOSTED_ITEM_TYPES

    rows: list[Row] = []
    for name in names:
        if name in _OUTPUT_NOTES:
            handling = _OUTPUT_NOTES[name]
        elif name in CLIENT_CALL_ITEM_TYPES:
            handling = Handling("lowered", "from a call of its exposed function")
        elif name in HOSTED_ITEM_TYPES:
            handling = Handling(
                "gateway", "only when a backend is configured for the hosted tool; else omitted"
            )
        else:
            handling = _NEVER_OUTPUT
        rows.append(_row(name, RELAYED, handling, bedrock=_BEDROCK_OUTPUT.get(name)))
    return tuple(rows)


OUTPUT_ITEM_TYPES: tuple[str, ...] = (
    "message", "file_search_call", "function_call", "function_call_output", "web_search_call",
    "computer_call", "computer_call_output", "reasoning", "program", "program_output",
    "tool_search_call", "tool_search_output", "additional_tools", "compaction",
    "image_generation_call", "code_interpreter_call", "local_shell_call",
    "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
    "apply_patch_call_output", "mcp_call", "mcp_list_tools", "mcp_approval_request",
    "mcp_approval_response", "custom_tool_call", "custom_tool_call_output",
)  # fmt: skip

# --------------------------------------------------------------------------- stream events

_WRITER = Handling("gateway", "written by the gateway's output writer from the model's output")


def _event_rows() -> tuple[Row, ...]:
    own = (
        "response.created", "response.in_progress", "response.completed", "response.failed",
        "response.incomplete", "response.output_item.added", "response.output_item.done",
        "response.content_part.added", "response.content_part.done",
        "response.output_text.delta", "response.output_text.done", "response.refusal.delta",
        "response.refusal.done", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_text.delta",
        "response.reasoning_text.done", "error",
    )  # fmt: skip
    mcp = (
        "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done",
        "response.mcp_call.completed", "response.mcp_call.failed", "response.mcp_call.in_progress",
        "response.mcp_list_tools.completed", "response.mcp_list_tools.failed",
        "response.mcp_list_tools.in_progress",
    )  # fmt: skip
    lowered_tool = (
        "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done",
        "response.shell_call_command.added", "response.shell_call_command.delta",
        "response.shell_call_command.done", "response.web_search_call.completed",
        "response.web_search_call.in_progress", "response.web_search_call.searching",
    )  # fmt: skip
    hosted = (
        "response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.completed", "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting", "response.file_search_call.completed",
        "response.file_search_call.in_progress", "response.file_search_call.searching",
        "response.image_generation_call.completed", "response.image_generation_call.generating",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.partial_image",
        "response.shell_call_output_content.delta", "response.shell_call_output_content.done",
    )  # fmt: skip
    rows = [_row(name, _WRITER, _WRITER) for name in own]
    rows += [_all(name, Handling("gateway", "the gateway's MCP call events")) for name in mcp]
    rows += [
        _row(name, RELAYED, Handling("lowered", "the tool kind's events for a lowered call"))
        for name in lowered_tool
    ]
    rows += [
        _row(name, RELAYED, Handling("gateway", "only with a configured hosted-tool backend"))
        for name in hosted
    ]
    rows += [
        _row(
            "response.output_text.annotation.added",
            RELAYED,
            Handling("omitted", "chat, harmony and Converse upstreams send no annotations"),
        ),
        _all("response.queued", Handling("gateway", "background responses, before they start")),
        _all(
            "response.compaction.compacting",
            Handling(
                "gateway",
                "the gateway's own compaction item opening (upstream "
                "compaction is never asked for)",
            ),
        ),
    ]
    audio = Handling("omitted", "audio output is not offered: no request field asks for it")
    rows += [
        _all(name, audio)
        for name in (
            "response.audio.delta",
            "response.audio.done",
            "response.audio.transcript.delta",
            "response.audio.transcript.done",
        )
    ]
    return tuple(rows)


# --------------------------------------------------------------------------- create fields

RESPONSES_ONLY_FIELDS: tuple[str, ...] = (
    "moderation",
    "prompt_cache_options",
    "prompt_cache_retention",
    "image",
    "access_programs",
)
"""Create fields sent as they are to a Responses upstream (the rows say ``relayed``) and refused
on the function wires, except the ``image`` values those honour."""


def _sent(name: str, how: str = "") -> Handling:
    """Forwarded under the wire's own name ``name`` (``lowered`` when that is not the field's)."""
    return Handling("lowered", how or f"sent as {name}", sent_as=name)


def _relayed(name: str) -> Handling:
    return Handling("relayed", sent_as=name)


_IN_PROMPT = "prompt"
"""Harmony's payload key for what it renders into the prompt text."""


def _soonest_only(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and set(value) <= {"completion_window"}
        and (value.get("completion_window") in (None, "soonest"))
    )


def _uncompressed(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and set(value) <= {"context_compression"}
        and (value.get("context_compression") in (None, "auto", "disabled"))
    )


def _one_tier(value: Any) -> bool:
    return value in ("auto", "default")


def _bedrock_tier(value: Any) -> bool:
    return value in ("auto", "default", "flex", "priority")


_CONVERSE_HAS_NO = Handling("refused", "Converse has no such setting")


def _field_rows() -> tuple[Row, ...]:
    rows = [
        _row(
            "model",
            _relayed("model"),
            _sent("model", "the provider's model name (routing, strip_prefix)"),
            bedrock=_sent("modelId", "the URL's model id, inference profile id or ARN"),
        ),
        _row(
            "input",
            _sent("input", "the transcript: history, then input, as Responses items"),
            _sent("messages", "chat messages"),
            _sent(_IN_PROMPT, "harmony messages"),
            bedrock=_sent("messages", "Converse messages (system messages: system blocks)"),
        ),
        _row(
            "instructions",
            _relayed("instructions"),
            _sent("messages", "a system message"),
            _sent(_IN_PROMPT, "the developer message's instructions"),
            bedrock=_sent("system", "the first system block"),
        ),
        _row(
            "tools",
            _sent("tools", "relayed, gateway MCP tools added as functions"),
            _sent("tools", "functions, through the tool-kind table"),
            _sent(_IN_PROMPT, "the developer message's function namespace"),
            bedrock=_sent("toolConfig", "toolConfig.tools toolSpecs, through the tool-kind table"),
        ),
        _row(
            "tool_choice",
            _relayed("tool_choice"),
            _sent(
                "tool_choice",
                "chat tool_choice; a forced tool of another kind as its "
                "exposed function; allowed_tools as the tool list restricted to them, with "
                "its mode",
            ),
            _sent(
                _IN_PROMPT,
                "none: no tools shown; required: an instruction to call, and an "
                "answer without a call fails (502 invalid_model_output); a named function: "
                "only that tool shown, the instruction, the call checked; allowed_tools: "
                "the tool list restricted to them, with its mode",
            ),
            bedrock=_sent(
                "toolConfig",
                "toolConfig.toolChoice: auto, required as any, a named function as tool; "
                "none: no tools sent (unless the transcript holds tool blocks, which Converse "
                "then requires: the model is not forced)",
            ),
        ),
        _row(
            "parallel_tool_calls",
            _relayed("parallel_tool_calls"),
            _sent("parallel_tool_calls"),
            Handling(
                "gateway",
                "false: the completion is read up to its first tool call; later calls are "
                "discarded, never surfaced or run (one log line)",
            ),
            bedrock=Handling(
                "gateway", "false: toolUse blocks after the first are not reported or run"
            ),
        ),
        _row(
            "max_output_tokens",
            _relayed("max_output_tokens"),
            _sent("max_tokens"),
            _sent("max_tokens"),
            bedrock=_sent("inferenceConfig", "inferenceConfig.maxTokens"),
        ),
        _row(
            "temperature",
            _relayed("temperature"),
            _sent("temperature"),
            _sent("temperature"),
            bedrock=_sent("inferenceConfig", "inferenceConfig.temperature"),
        ),
        _row(
            "top_p",
            _relayed("top_p"),
            _sent("top_p"),
            _sent("top_p"),
            bedrock=_sent("inferenceConfig", "inferenceConfig.topP"),
        ),
        _row(
            "presence_penalty",
            _relayed("presence_penalty"),
            _sent("presence_penalty"),
            _sent("presence_penalty"),
            bedrock=_CONVERSE_HAS_NO,
        ),
        _row(
            "frequency_penalty",
            _relayed("frequency_penalty"),
            _sent("frequency_penalty"),
            _sent("frequency_penalty"),
            bedrock=_CONVERSE_HAS_NO,
        ),
        _row(
            "top_logprobs",
            _relayed("top_logprobs"),
            _sent("top_logprobs", "chat logprobs/top_logprobs"),
            _sent("logprobs", "completions logprobs (alternatives per token)"),
            bedrock=Handling("refused", "Converse returns no logprobs"),
        ),
        _row(
            "user",
            _relayed("user"),
            _sent("user"),
            _sent("user"),
            bedrock=_sent(
                "requestMetadata", "requestMetadata.user (filterable in invocation logs)"
            ),
        ),
        _row(
            "reasoning",
            _relayed("reasoning"),
            _sent(
                "reasoning_effort",
                "effort as reasoning_effort; reasoning_content comes back as reasoning items",
            ),
            _sent(_IN_PROMPT, "effort as the system message's 'Reasoning:' level"),
            bedrock=_sent(
                "additionalModelRequestFields",
                "effort as the model family's own field (Anthropic: a thinking budget; Amazon "
                "Nova: reasoningConfig; others: reasoning_effort); the provider's "
                "additional_model_request_fields win; reasoning comes back as reasoning items",
            ),
        ),
        _row(
            "text",
            _relayed("text"),
            _sent(
                "response_format",
                "format as response_format; verbosity as verbosity with "
                "the provider's send_verbosity",
            ),
            _sent(
                _IN_PROMPT,
                "format: a '# Response Formats' section of the developer "
                "message, and the answer checked against the schema (json_object: a JSON "
                "object): a mismatch fails the response (502 invalid_model_output)",
            ),
            bedrock=_sent(
                "outputConfig",
                "json_schema as outputConfig.textFormat (json_object as the schema of any "
                "object); verbosity: Converse has none, it is not sent",
            ),
        ),
        _row(
            "service_tier",
            _relayed("service_tier"),
            _sent("service_tier"),
            Handling(
                "gateway",
                "auto and default: the one tier a completions server has; other tiers: "
                "400 (a raw completions server has no tiers)",
                accepts=_one_tier,
            ),
            bedrock=Handling(
                "lowered",
                "serviceTier: default, flex and priority as Bedrock's tiers; auto: not sent "
                "(Bedrock's default); scale: 400",
                sent_as="serviceTier",
                accepts=_bedrock_tier,
            ),
        ),
        _row(
            "max_tool_calls",
            Handling(
                "relayed",
                "and the gateway caps the calls it runs itself (MCP, hosted "
                "backends) across the response",
                sent_as="max_tool_calls",
            ),
            Handling(
                "gateway",
                "caps the tool calls the gateway runs (MCP, hosted backends) across the response",
            ),
        ),
        _row(
            "include",
            Handling("relayed", "merged with reasoning.encrypted_content", sent_as="include"),
            Handling("gateway", "per value: see the include rows"),
        ),
        _all("stream", Handling("gateway", "the gateway streams every upstream call")),
        _all("stream_options", Handling("gateway", "include_obfuscation on the gateway's SSE")),
        _all("store", Handling("gateway", "the gateway's store; upstream calls use store:false")),
        _all(
            "metadata",
            Handling(
                "gateway", "stored with the response and echoed (upstream calls are store:false)"
            ),
        ),
        _all("background", Handling("gateway", "run by the gateway's background worker")),
        _all(
            "background_options",
            Handling(
                "gateway",
                "completion_window soonest: what the gateway's background worker does (a Responses "
                "upstream never sees background runs); the 2h/8h windows and continuation_id: "
                "400 (no batch windows, no priorities)",
                accepts=_soonest_only,
            ),
        ),
        _all("conversation", Handling("gateway", "the gateway's conversations")),
        _all("previous_response_id", Handling("gateway", "the gateway's stored chain")),
        _all("truncation", Handling("gateway", "the gateway's context windows truncate")),
        _all("context_management", Handling("gateway", "the gateway compacts")),
        _all(
            "prompt",
            Handling(
                "gateway",
                "operator templates (GATEWAY_CONFIG prompts, then versions kept in the store "
                "through POST /v1/organization/prompts/{id}/versions) resolved into "
                "instructions and input; unknown id 404, unknown version or variable 400, before "
                "any model call; resolved prompt echoed",
            ),
        ),
        _row(
            "safety_identifier",
            Handling("relayed", "and recorded in the request log", sent_as="safety_identifier"),
            Handling(
                "gateway",
                "recorded in the request log as the end user's id (the operator's abuse "
                "tracing; chat and completions servers take no such field)",
            ),
        ),
        _row(
            "prompt_cache_key",
            Handling("relayed", "and used as the routing key", sent_as="prompt_cache_key"),
            Handling(
                "gateway",
                "the routing key: a routed model's calls with the same key go to the same "
                "healthy deployment (weighted rendezvous hashing), where its prefix cache is "
                "warm; a model with one deployment always reaches the same server",
            ),
        ),
    ]
    refused = "a chat, completions or Converse server has no equivalent"
    for name in RESPONSES_ONLY_FIELDS:
        if name == "image":
            function_wire = Handling(
                "gateway",
                "context_compression auto or disabled: the gateway sends images uncompressed; "
                "enabled: 400 (no compression on this wire)",
                accepts=_uncompressed,
            )
        else:
            function_wire = Handling("refused", refused)
        rows.append(_row(name, _relayed(name), function_wire))
    return tuple(rows)


# --------------------------------------------------------------------------- include values


def _include_rows() -> tuple[Row, ...]:
    no_data = Handling("omitted", "the function wire has no such data")
    no_logprobs = Handling("omitted", "Converse returns no logprobs")
    return (
        _all(
            "reasoning.encrypted_content",
            Handling("gateway", "the gateway seals reasoning for stateless replay"),
        ),
        _row("message.output_text.logprobs", RELAYED,
             Handling("lowered", "chat choice logprobs.content -> output_text.logprobs "
                      "(needs top_logprobs, which asks chat for logprobs)"),
             Handling("lowered", "completions chunk logprobs -> output_text.logprobs, special "
                      "tokens left out (needs top_logprobs, which asks the server for them)"),
             bedrock=no_logprobs),
        _row("message.input_image.image_url",
             Handling("relayed", "and the gateway's own reads of the stored input gate URLs as "
                      "on the function wires"),
             Handling("gateway", "input_items and conversation item reads show the stored input "
                      "images' image_url only when their include names it (null otherwise)")),
        _row("web_search_call.action.sources", RELAYED, no_data),
        _row("web_search_call.results", RELAYED, no_data),
        _row("file_search_call.results", RELAYED, no_data),
        _row("code_interpreter_call.outputs", RELAYED, no_data),
        _row("computer_call_output.output.image_url", RELAYED, no_data),
    )  # fmt: skip


# --------------------------------------------------------------------------- incomplete reasons

OPENAI_INCOMPLETE_REASONS: tuple[str, ...] = ("max_output_tokens", "content_filter")
"""The ``incomplete_details.reason`` values OpenAI's spec enumerates (Open Responses takes any
string)."""

GATEWAY_INCOMPLETE_REASONS: dict[str, str] = {
    "budget_exceeded": (
        "the tenant's budget was spent before the next model call (usage/budget.py): the "
        "response ends incomplete with what it produced so far"
    ),
    "max_model_calls": (
        "the response made its provider's or route's max_model_calls model calls and the loop "
        "would call the model again (loop/limits.py)"
    ),
    "max_loop_seconds": (
        "the response's loop ran max_loop_seconds of wall time: the action in flight is cut, "
        "what it produced kept (loop/limits.py)"
    ),
    "no_progress": (
        "a model call and the gateway calls it made repeated the previous round exactly, so "
        "the next call would repeat it too (loop/limits.py)"
    ),
}
"""The gateway's own ``incomplete_details.reason`` values (reason -> when it is emitted),
beyond :data:`OPENAI_INCOMPLETE_REASONS`: every reason the gateway may emit is named here, and
the spec oracle accepts no other (``testing/spec_oracle.py``; docs/contract.md lists them)."""


# --------------------------------------------------------------------------- failure codes

OPENAI_FAILURE_CODES: tuple[str, ...] = (
    "server_error", "rate_limit_exceeded", "invalid_prompt", "data_residency_mismatch",
    "bio_policy", "vector_store_timeout", "invalid_image", "invalid_image_format",
    "invalid_base64_image", "invalid_image_url", "image_too_large", "image_too_small",
    "image_parse_error", "image_content_policy_violation", "invalid_image_mode",
    "image_file_too_large", "unsupported_image_media_type", "empty_image_file",
    "failed_to_download_image", "image_file_not_found",
)  # fmt: skip
"""The ``error.code`` values of a failed Response that OpenAI's spec enumerates (its
``ResponseErrorCode``; Open Responses takes any string)."""

GATEWAY_FAILURE_CODES: dict[str, str] = {
    "context_length_exceeded": (
        "the context does not fit the model's window and cannot be cut (truncation disabled, "
        "or nothing left to drop), found before or by the model call; the gateway already "
        "answered it under this code (HTTP errors, earlier failed responses), and a client "
        "may compact on it"
    ),
}
"""The gateway's own ``error.code`` values of a failed Response beyond
:data:`OPENAI_FAILURE_CODES` (code -> when it is sent); the spec oracle accepts no other."""


def failure_code(status: int, code: str | None) -> str:
    """The ``error.code`` of a Response failed by an error of HTTP ``status``: a 429 is
    ``rate_limit_exceeded``; another 4xx keeps its code when a table above names it, and is
    ``invalid_prompt`` otherwise (the request was at fault: an orphan ``call_id``, a refused
    value...); anything else is ``server_error``, a 424 included (a dependency of the request
    failed, an MCP server's listing: not the prompt's fault)."""
    if status == 429:
        return "rate_limit_exceeded"
    if 400 <= status < 500 and status != 424:
        known = code in OPENAI_FAILURE_CODES or code in GATEWAY_FAILURE_CODES
        return code if known and code is not None else "invalid_prompt"
    return "server_error"


# --------------------------------------------------------------------------- the registries


def _index(rows: tuple[Row, ...]) -> dict[str, Row]:
    out: dict[str, Row] = {}
    for row in rows:
        assert row.name not in out, f"two rows for {row.name}"
        out[row.name] = row
    return out


TOOLS = _index(_tool_rows())
INPUT_ITEMS = _index(_input_rows())
OUTPUT_ITEMS = _index(_output_rows(OUTPUT_ITEM_TYPES))
STREAM_EVENTS = _index(_event_rows())
CREATE_FIELDS = _index(_field_rows())
INCLUDE_VALUES = _index(_include_rows())

FAMILIES: dict[str, dict[str, Row]] = {
    "tools": TOOLS,
    "input_items": INPUT_ITEMS,
    "output_items": OUTPUT_ITEMS,
    "stream_events": STREAM_EVENTS,
    "create_fields": CREATE_FIELDS,
    "include_values": INCLUDE_VALUES,
}
"""Family name -> its registry (name -> row)."""


def coverage() -> dict[str, dict[str, dict[Fate, int]]]:
    """Family -> wire -> fate -> how many names."""
    table: dict[str, dict[str, dict[Fate, int]]] = {}
    for family, rows in FAMILIES.items():
        per_wire = table[family] = {}
        for wire in WIRES:
            counts: dict[Fate, int] = {}
            for row in rows.values():
                fate = row.on(wire).fate
                counts[fate] = counts.get(fate, 0) + 1
            per_wire[wire] = counts
    return table


def lower_context_items(
    items: list[dict[str, Any]], keep: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """A transcript for a function wire: each item whose row has a ``lower`` function replaced
    by what it returns. Hosted calls that carry their result (the gateway ran them through a
    backend, in this response (``keep``, by id) or an earlier one) stay for the tool-kind table,
    which replays them as a call and its result. ``function_call_output`` is lowered only
    without a ``call_id``."""
    from responses_gateway.tool_kinds import HOSTED_ITEM_TYPES, hosted_seen

    out: list[dict[str, Any]] = []
    keep = keep or {}
    for item in items:
        row = INPUT_ITEMS.get(str(item.get("type")))
        skip = row is None or row.lower is None or str(item.get("id")) in keep
        if not skip and item.get("type") in HOSTED_ITEM_TYPES and hosted_seen(item) is not None:
            skip = True
        if not skip and item.get("type") == "function_call_output" and item.get("call_id"):
            skip = True
        out.extend([item] if skip or row is None or row.lower is None else row.lower(item))
    return out


INPUT_IMAGE_URL = "message.input_image.image_url"


def include_gated(item: dict[str, Any], include: Any, *, results: bool = True) -> dict[str, Any]:
    """``item`` as a read with ``include`` shows it: a message's ``input_image`` parts keep their
    ``image_url`` only when ``include`` names ``message.input_image.image_url`` (else null, as
    OpenAI answers), and (``results``) tool items their result fields only when it names them
    (the tool-kind table's gates). A copy when anything changed, else ``item`` itself."""
    from responses_gateway.tool_kinds import shown

    wanted = list(include or ())
    if results:
        item = shown(item, wanted)
    content = item.get("content")
    if INPUT_IMAGE_URL in wanted or item.get("type", "message") != "message":
        return item
    if not isinstance(content, list) or not any(_gated_image(part) for part in content):
        return item
    parts = [{**part, "image_url": None} if _gated_image(part) else part for part in content]
    return {**item, "content": parts}


def _gated_image(part: Any) -> bool:
    return (
        isinstance(part, Mapping)
        and part.get("type") == "input_image"
        and bool(part.get("image_url"))
    )


_REFUSED_TOOLS: dict[str, dict[str, Row]] = {
    wire: {name: row for name, row in TOOLS.items() if row.on(wire).fate == "refused"}
    for wire in WIRES
}
_FIELD_POLICIES: dict[str, tuple[Row, ...]] = {
    wire: tuple(
        row
        for row in CREATE_FIELDS.values()
        if row.on(wire).fate == "refused" or row.on(wire).accepts is not None
    )
    for wire in WIRES
}
"""The rows' request-level policies per wire, worked out once (every create applies them)."""


def checked_fields(wire: str) -> frozenset[str]:
    """The create fields :func:`check_request` reads on ``wire`` (``tools`` and the fields the
    wire refuses, wholly or for some values; ``input`` never): a caller holding a model need
    dump only these."""
    if wire not in WIRES:
        return frozenset()
    return frozenset({"tools", *(row.name for row in _FIELD_POLICIES[wire])} - {"input"})


def check_request(request: Mapping[str, Any], wire: str) -> None:
    """Apply the request-level policies of the rows for ``wire``: a create field or a tool the
    wire refuses is a 400 naming it (``request`` holds the fields the client set).

    Raises:
        InvalidRequestError: a tool whose row refuses it on ``wire`` (``param``
            ``tools[i].type``), or a create field whose row refuses it, or the value it was
            given, on ``wire`` (``param`` the field).
    """
    from responses_gateway.errors import InvalidRequestError

    if wire not in WIRES:  # a test double's wire: no policies
        return
    refused = _REFUSED_TOOLS[wire]
    for index, tool in enumerate(request.get("tools") or []):
        row = refused.get(str(tool.get("type")) if isinstance(tool, Mapping) else "")
        if row is not None:
            raise InvalidRequestError(
                f"Tool type '{row.name}' is not supported by this model's upstream: "
                f"{row.on(wire).how}.",
                param=f"tools[{index}].type",
                code="unsupported_value",
            )
    for row in _FIELD_POLICIES[wire]:
        value = request.get(row.name)
        if value in (None, [], {}):
            continue
        handling = row.on(wire)
        if handling.fate == "refused" or (
            handling.accepts is not None and not handling.accepts(value)
        ):
            raise InvalidRequestError(
                f"Parameter '{row.name}' is not supported by this model's upstream "
                f"({wire} wire): {handling.how}.",
                param=row.name,
                code="unsupported_parameter",
            )


ALL_CHECKED_FIELDS = frozenset().union(*(checked_fields(wire) for wire in WIRES))
"""The create fields :func:`wire_refusals` reads (those :func:`check_request` reads on any wire)."""


def wire_refusals(request: Mapping[str, Any]) -> dict[str, InvalidRequestError]:
    """Wire -> the 400 :func:`check_request` answers ``request`` with on it, for each wire that
    refuses a field, a value or a tool the client set (``request``: the fields the client set,
    at least :data:`ALL_CHECKED_FIELDS`). A routed call never goes to a deployment on one of
    these wires (:class:`~responses_gateway.routing.router.Router`): a sibling or a fallback
    must not drop what the model's own provider honours."""
    from responses_gateway.errors import InvalidRequestError

    refusals: dict[str, InvalidRequestError] = {}
    for wire in WIRES:
        try:
            check_request(request, wire)
        except InvalidRequestError as error:
            refusals[wire] = error
    return refusals
