"""The bodies of the doors besides a create: one model per door, built from a create's fields.

Owns :class:`InputTokensRequest` (``POST /v1/responses/input_tokens``), :class:`CompactRequest`
(``POST /v1/responses/compact``), :class:`ConversationCreateRequest`
(``POST /v1/conversations``), :class:`ConversationUpdateRequest`
(``POST /v1/conversations/{id}``), :class:`ConversationItemsRequest`
(``POST /v1/conversations/{id}/items``) and the operator's :class:`PromptVersionRequest`
(``POST /v1/organization/prompts/{id}/versions``). Their fields are the create's own types
(input items, tools, ``tool_choice``, ``text``, ``reasoning``, ``metadata``...), and they are
parsed by the create's parser (:func:`~responses_gateway.protocol.request.parse_body`), so a
malformed item or field is the same 400 with the same ``param`` path wherever it enters. A
route declares its body model (``@routes.post(path, body=Door(...))``) and the mount layer
validates every request against it before the handler runs (:mod:`responses_gateway.api.doors`):
a door cannot forget to. Looks nothing up and decides nothing the service or the loop decides.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from responses_gateway.protocol.fields import Lenient, NonEmptyStr, custom_error
from responses_gateway.protocol.items import InputItem, MessageItem
from responses_gateway.protocol.request import (
    ConversationParam,
    CreateResponseRequest,
    InputParam,
    PromptCacheRetention,
    ReasoningParam,
    ServiceTier,
    TextParam,
    Tool,
    ToolChoice,
    check_metadata,
    one_history_source,
)
from responses_gateway.protocol.resources import NOT_CONVERSATION_ITEMS

__all__ = [
    "CONVERSATION_ITEMS_MAX",
    "BODY_MODELS",
    "CompactRequest",
    "ConversationCreateRequest",
    "ConversationItemsRequest",
    "ConversationUpdateRequest",
    "InputTokensRequest",
    "Metadata",
    "PromptVersionRequest",
]

CONVERSATION_ITEMS_MAX = 20
"""Most items one conversation create or items create may add (OpenAI's limit)."""

Metadata = Annotated[dict[str, str], AfterValidator(check_metadata)]
"""``metadata``: at most 16 pairs, keys <= 64 characters, values <= 512 characters."""


def _at_most_twenty(items: Any) -> Any:
    """Refuse a list that is too long before its items are validated one by one."""
    if isinstance(items, list) and len(items) > CONVERSATION_ITEMS_MAX:
        raise custom_error(
            "array_above_max_length",
            "Invalid '{param}': array too long. Expected an array with maximum length "
            f"{CONVERSATION_ITEMS_MAX}, but got an array with length {len(items)} instead.",
        )
    return items


def _conversation_items(items: list[Any]) -> list[Any]:
    for index, item in enumerate(items):
        kind = getattr(item, "type", None)
        if kind in NOT_CONVERSATION_ITEMS:
            raise custom_error(
                "invalid_value",
                f"Invalid value: '{kind}'. A {kind} item is a request to the gateway about a "
                "response's context, not a conversation item: send it in a response's input.",
                f"[{index}].type",
            )
    return items


ConversationItems = Annotated[
    list[InputItem], BeforeValidator(_at_most_twenty), AfterValidator(_conversation_items)
]
"""Items added to a conversation: input items (not requests to the gateway), at most
:data:`CONVERSATION_ITEMS_MAX`."""


class InputTokensRequest(Lenient):
    """What a create with this body would send, to be counted: every field that changes it."""

    model: NonEmptyStr | None = None
    input: InputParam | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: ConversationParam | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    reasoning: ReasoningParam | None = None
    text: TextParam | None = None
    truncation: Literal["auto", "disabled"] | None = None

    @model_validator(mode="after")
    def _one_history_source(self) -> InputTokensRequest:
        one_history_source(self.previous_response_id, self.conversation)
        return self


class CompactRequest(InputTokensRequest):
    """A conversation to compact: a would-be create's context (``model`` required) and the
    prompt-cache and tier fields relayed to a Responses upstream's own compaction."""

    model: NonEmptyStr
    prompt_cache_key: str | None = None
    prompt_cache_retention: PromptCacheRetention | None = None
    prompt_cache_options: dict[str, Any] | None = None
    service_tier: ServiceTier | None = None


class ConversationCreateRequest(Lenient):
    """``POST /v1/conversations``: initial items and metadata (both optional)."""

    items: ConversationItems | None = None
    metadata: Metadata | None = None


class ConversationUpdateRequest(Lenient):
    """``POST /v1/conversations/{id}``: the conversation's new metadata (null clears it)."""

    metadata: Metadata | None = Field(...)


class ConversationItemsRequest(Lenient):
    """``POST /v1/conversations/{id}/items``: the items to append."""

    items: ConversationItems


def _version_name(value: Any) -> Any:
    """A version named by a number is named by its digits (``2`` is ``"2"``)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class PromptVersionRequest(Lenient):
    """``POST /v1/organization/prompts/{id}/versions``: one version of a stored prompt template
    (its messages are input messages, their texts may hold ``{{variables}}``)."""

    version: Annotated[NonEmptyStr, BeforeValidator(_version_name)] | None = None
    instructions: str | None = None
    input: list[MessageItem] | None = None
    default: bool | None = None


BODY_MODELS = (
    CreateResponseRequest,
    InputTokensRequest,
    CompactRequest,
    ConversationCreateRequest,
    ConversationUpdateRequest,
    ConversationItemsRequest,
    PromptVersionRequest,
)
"""Every door's body model (a test checks each route that takes a body declares one)."""
