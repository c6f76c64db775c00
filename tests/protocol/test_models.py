"""Our Response, item and event models agree with the official SDK and with OpenAI's spec (the
vendored copy in tests/fixtures/openapi: the tests never read anything outside the repo)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai.types.responses as sdk
import pytest
from openai.types.responses.response_output_item import (
    McpApprovalRequest as SdkMcpApprovalRequest,
    McpCall as SdkMcpCall,
    McpListTools as SdkMcpListTools,
    McpListToolsTool as SdkMcpListToolsTool,
)
from openai.types.responses.response_reasoning_item import (
    Content as SdkReasoningContent,
    Summary as SdkSummary,
)
from openai.types.responses.response_reasoning_summary_part_added_event import (
    Part as SdkSummaryPart,
)
from openai.types.responses.response_usage import (
    InputTokensDetails as SdkInputTokensDetails,
    OutputTokensDetails as SdkOutputTokensDetails,
)
from openai.types.responses.tool import Mcp as SdkMcpTool
from pydantic import BaseModel, TypeAdapter, ValidationError

from responses_gateway.errors import InvalidRequestError
from responses_gateway.loop.render import render_response
from responses_gateway.loop.state import LoopState
from responses_gateway.protocol import (
    EVENT_TYPES,
    CreateResponseRequest,
    ErrorEvent,
    OutputFunctionCall,
    OutputMcpApprovalRequest,
    OutputMcpCall,
    OutputMcpListTools,
    OutputMessage,
    OutputReasoning,
    Response,
    echo_fields,
    parse_create_request,
    validate_error_envelope,
    validate_event,
    validate_response,
)
from responses_gateway.protocol.events import StreamEvent

OPENAPI = Path(__file__).parents[1] / "fixtures" / "openapi" / "gateway.json"
"""OpenAI's spec as vendored (trimmed to what the gateway serves: tests/fixtures/openapi)."""

EMITTED_EVENT_TYPES = {
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.reasoning_text.delta",
    "response.reasoning_text.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.mcp_call.in_progress",
    "response.mcp_call.completed",
    "response.mcp_call.failed",
    "response.mcp_call_arguments.delta",
    "response.mcp_call_arguments.done",
    "response.mcp_list_tools.in_progress",
    "response.mcp_list_tools.completed",
    "response.mcp_list_tools.failed",
    "error",
}


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True, by_alias=True)


def _wire(model: BaseModel) -> dict[str, Any]:
    """An SDK object as the API sends it: the SDK widens whole-second timestamps to floats."""
    wire: dict[str, Any] = _whole_seconds(_dump(model))
    return wire


def _whole_seconds(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: int(item)
            if key in ("created_at", "completed_at") and isinstance(item, float)
            else _whole_seconds(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_whole_seconds(item) for item in value]
    return value


# --------------------------------------------------------------------------- SDK samples


def _sdk_output() -> list[sdk.ResponseOutputItem]:
    return [
        sdk.ResponseReasoningItem(
            id="rs_1",
            type="reasoning",
            summary=[SdkSummary(type="summary_text", text="Looking up the weather.")],
            content=[SdkReasoningContent(type="reasoning_text", text="raw")],
            encrypted_content="gAAAA",
        ),
        SdkMcpListTools(
            id="mcpl_1",
            type="mcp_list_tools",
            server_label="docs",
            tools=[
                SdkMcpListToolsTool(
                    name="search",
                    input_schema={"type": "object"},
                    description="Search docs",
                    annotations=None,
                )
            ],
            error=None,
        ),
        SdkMcpApprovalRequest(
            id="mcpr_1",
            type="mcp_approval_request",
            server_label="docs",
            name="search",
            arguments='{"q":"x"}',
        ),
        SdkMcpCall(
            id="mcp_1",
            type="mcp_call",
            server_label="docs",
            name="search",
            arguments='{"q":"x"}',
            output="result",
            error=None,
            approval_request_id="mcpr_1",
            status="completed",
        ),
        sdk.ResponseFunctionToolCall(
            id="fc_1",
            type="function_call",
            call_id="call_1",
            name="get_weather",
            arguments='{"city":"Paris"}',
            status="completed",
        ),
        sdk.ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[
                sdk.ResponseOutputText(type="output_text", text="18C", annotations=[], logprobs=[]),
                sdk.ResponseOutputRefusal(type="refusal", refusal="no more"),
            ],
        ),
    ]


def _sdk_response(status: str = "completed", **overrides: Any) -> sdk.Response:
    fields: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": "Be brief.",
        "metadata": {"k": "v"},
        "model": "gpt-test",
        "output": _sdk_output() if status != "in_progress" else [],
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [
            sdk.FunctionTool(
                type="function",
                name="get_weather",
                description=None,
                parameters={"type": "object"},
                strict=True,
            ),
            SdkMcpTool(
                type="mcp",
                server_label="docs",
                server_url="https://mcp.example.com",
                require_approval="never",
            ),
        ],
        "top_p": 1.0,
        "background": False,
        "conversation": {"id": "conv_1"},
        "max_output_tokens": None,
        "max_tool_calls": None,
        "previous_response_id": None,
        "prompt_cache_key": None,
        "reasoning": {"effort": None, "summary": None},
        "safety_identifier": None,
        "service_tier": "auto",
        "store": True,
        "text": {"format": {"type": "text"}},
        "top_logprobs": 0,
        "truncation": "disabled",
        "usage": sdk.ResponseUsage(
            input_tokens=10,
            input_tokens_details=SdkInputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens=5,
            output_tokens_details=SdkOutputTokensDetails(reasoning_tokens=2),
            total_tokens=15,
        ),
        "completed_at": 1_700_000_005 if status == "completed" else None,
        # Open Responses' fields (the SDK keeps them as extras)
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
    }
    if status == "incomplete":
        fields["incomplete_details"] = {"reason": "max_output_tokens"}
    if status == "failed":
        fields["error"] = {"code": "server_error", "message": "upstream failed"}
    if status in ("in_progress", "queued"):
        fields["usage"] = sdk.ResponseUsage(
            input_tokens=0,
            input_tokens_details=SdkInputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens=0,
            output_tokens_details=SdkOutputTokensDetails(reasoning_tokens=0),
            total_tokens=0,
        )
    fields.update(overrides)
    return sdk.Response(**fields)


def _sdk_events() -> list[BaseModel]:
    message, reasoning = _sdk_output()[5], _sdk_output()[0]
    text = sdk.ResponseOutputText(type="output_text", text="18C", annotations=[], logprobs=[])
    refusal = sdk.ResponseOutputRefusal(type="refusal", refusal="no")
    summary = SdkSummaryPart(type="summary_text", text="Looking")
    ids: dict[str, Any] = {"item_id": "msg_1", "output_index": 0}
    events: list[BaseModel] = [
        sdk.ResponseCreatedEvent(
            type="response.created", sequence_number=0, response=_sdk_response("in_progress")
        ),
        sdk.ResponseQueuedEvent(
            type="response.queued", sequence_number=1, response=_sdk_response("queued")
        ),
        sdk.ResponseInProgressEvent(
            type="response.in_progress", sequence_number=2, response=_sdk_response("in_progress")
        ),
        sdk.ResponseOutputItemAddedEvent(
            type="response.output_item.added", sequence_number=3, output_index=0, item=message
        ),
        sdk.ResponseContentPartAddedEvent(
            type="response.content_part.added", sequence_number=4, content_index=0, part=text, **ids
        ),
        sdk.ResponseTextDeltaEvent.model_validate(
            {
                "type": "response.output_text.delta",
                "sequence_number": 5,
                "content_index": 0,
                "delta": "18",
                "logprobs": [],
                "obfuscation": "x1y2",
                **ids,
            }
        ),
        sdk.ResponseTextDoneEvent(
            type="response.output_text.done",
            sequence_number=6,
            content_index=0,
            text="18C",
            logprobs=[],
            **ids,
        ),
        sdk.ResponseContentPartDoneEvent(
            type="response.content_part.done", sequence_number=7, content_index=0, part=text, **ids
        ),
        sdk.ResponseRefusalDeltaEvent(
            type="response.refusal.delta", sequence_number=8, content_index=1, delta="n", **ids
        ),
        sdk.ResponseRefusalDoneEvent(
            type="response.refusal.done", sequence_number=9, content_index=1, refusal="no", **ids
        ),
        sdk.ResponseContentPartDoneEvent(
            type="response.content_part.done",
            sequence_number=10,
            content_index=1,
            part=refusal,
            **ids,
        ),
        sdk.ResponseOutputItemDoneEvent(
            type="response.output_item.done", sequence_number=11, output_index=0, item=message
        ),
        sdk.ResponseOutputItemAddedEvent(
            type="response.output_item.added", sequence_number=12, output_index=1, item=reasoning
        ),
        sdk.ResponseReasoningSummaryPartAddedEvent(
            type="response.reasoning_summary_part.added",
            sequence_number=13,
            item_id="rs_1",
            output_index=1,
            summary_index=0,
            part=summary,
        ),
        sdk.ResponseReasoningSummaryTextDeltaEvent(
            type="response.reasoning_summary_text.delta",
            sequence_number=14,
            item_id="rs_1",
            output_index=1,
            summary_index=0,
            delta="Looking",
        ),
        sdk.ResponseReasoningSummaryTextDoneEvent(
            type="response.reasoning_summary_text.done",
            sequence_number=15,
            item_id="rs_1",
            output_index=1,
            summary_index=0,
            text="Looking",
        ),
        sdk.ResponseReasoningSummaryPartDoneEvent(
            type="response.reasoning_summary_part.done",
            sequence_number=16,
            item_id="rs_1",
            output_index=1,
            summary_index=0,
            part=_dump(summary),  # type: ignore[arg-type]
        ),
        sdk.ResponseReasoningTextDeltaEvent(
            type="response.reasoning_text.delta",
            sequence_number=17,
            item_id="rs_1",
            output_index=1,
            content_index=0,
            delta="raw",
        ),
        sdk.ResponseReasoningTextDoneEvent(
            type="response.reasoning_text.done",
            sequence_number=18,
            item_id="rs_1",
            output_index=1,
            content_index=0,
            text="raw",
        ),
        sdk.ResponseFunctionCallArgumentsDeltaEvent(
            type="response.function_call_arguments.delta",
            sequence_number=19,
            item_id="fc_1",
            output_index=2,
            delta='{"city"',
        ),
        sdk.ResponseFunctionCallArgumentsDoneEvent.model_validate(
            {
                "type": "response.function_call_arguments.done",
                "sequence_number": 20,
                "item_id": "fc_1",
                "output_index": 2,
                "arguments": '{"city":"Paris"}',
                "name": "get_weather",
            }
        ),
    ]
    mcp_ids: dict[str, Any] = {"item_id": "mcp_1", "output_index": 3}
    events += [
        sdk.ResponseMcpListToolsInProgressEvent(
            type="response.mcp_list_tools.in_progress", sequence_number=21, **mcp_ids
        ),
        sdk.ResponseMcpListToolsCompletedEvent(
            type="response.mcp_list_tools.completed", sequence_number=22, **mcp_ids
        ),
        sdk.ResponseMcpListToolsFailedEvent(
            type="response.mcp_list_tools.failed", sequence_number=23, **mcp_ids
        ),
        sdk.ResponseMcpCallInProgressEvent(
            type="response.mcp_call.in_progress", sequence_number=24, **mcp_ids
        ),
        sdk.ResponseMcpCallArgumentsDeltaEvent(
            type="response.mcp_call_arguments.delta", sequence_number=25, delta="{", **mcp_ids
        ),
        sdk.ResponseMcpCallArgumentsDoneEvent(
            type="response.mcp_call_arguments.done", sequence_number=26, arguments="{}", **mcp_ids
        ),
        sdk.ResponseMcpCallCompletedEvent(
            type="response.mcp_call.completed", sequence_number=27, **mcp_ids
        ),
        sdk.ResponseMcpCallFailedEvent(
            type="response.mcp_call.failed", sequence_number=28, **mcp_ids
        ),
        sdk.ResponseCompletedEvent(
            type="response.completed", sequence_number=29, response=_sdk_response("completed")
        ),
        sdk.ResponseIncompleteEvent(
            type="response.incomplete", sequence_number=30, response=_sdk_response("incomplete")
        ),
        sdk.ResponseFailedEvent(
            type="response.failed", sequence_number=31, response=_sdk_response("failed")
        ),
        sdk.ResponseErrorEvent.model_validate(
            {
                "type": "error",
                "sequence_number": 32,
                "code": "server_error",
                "message": "boom",
                "param": None,
                "error": {
                    "type": "server_error",
                    "code": "server_error",
                    "message": "boom",
                    "param": None,
                },
            }
        ),
    ]
    return events


# --------------------------------------------------------------------------- Response


@pytest.mark.parametrize("status", ["in_progress", "queued", "completed", "incomplete", "failed"])
def test_validate_response_sdk_sample_round_trips(status: str) -> None:
    original = _sdk_response(status)
    wire = _wire(original)
    ours = validate_response(wire)
    assert _dump(ours) == wire
    assert sdk.Response.model_validate(_dump(ours)) == original


def test_validate_response_sdk_reads_output_text() -> None:
    ours = validate_response(_wire(_sdk_response()))
    assert sdk.Response.model_validate(_dump(ours)).output_text == "18C"


def test_response_fields_subset_of_sdk_response() -> None:
    # ``store`` is echoed by the API and listed by the contract, but the SDK does not model it;
    # the penalties are the Open Responses spec's (required there).
    assert set(Response.model_fields) - set(sdk.Response.model_fields) == {
        "store",
        "presence_penalty",
        "frequency_penalty",
    }


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (OutputMessage, sdk.ResponseOutputMessage),
        (OutputFunctionCall, sdk.ResponseFunctionToolCall),
        (OutputReasoning, sdk.ResponseReasoningItem),
        (OutputMcpListTools, SdkMcpListTools),
        (OutputMcpCall, SdkMcpCall),
        (OutputMcpApprovalRequest, SdkMcpApprovalRequest),
    ],
)
def test_output_item_model_fields_agree_with_sdk(
    ours: type[BaseModel], theirs: type[BaseModel]
) -> None:
    required = {name for name, field in theirs.model_fields.items() if field.is_required()}
    assert required <= set(ours.model_fields)
    assert set(ours.model_fields) <= set(theirs.model_fields)


def _wire_response(**changes: Any) -> dict[str, Any]:
    wire = _wire(_sdk_response())
    wire.update(changes)
    return wire


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(_wire_response(billing={"payer": "x"}), id="extra_key"),
        pytest.param(
            {k: v for k, v in _wire_response().items() if k != "tools"}, id="tools_missing"
        ),
        pytest.param(_wire_response(created_at="1700000000"), id="created_at_string"),
        pytest.param(_wire_response(status="incomplete"), id="incomplete_without_details"),
        pytest.param(_wire_response(status="failed"), id="failed_without_error"),
        pytest.param(
            _wire_response(tools=[{"type": "mcp", "server_label": "d", "headers": {"A": "b"}}]),
            id="mcp_headers_leaked",
        ),
        pytest.param(
            _wire_response(tools=[{"type": "mcp", "server_label": "d", "authorization": "t"}]),
            id="mcp_authorization_leaked",
        ),
        pytest.param(
            _wire_response(
                tools=[{"type": "mcp", "server_label": "d", "server_url": "https://x/mcp?k=1"}]
            ),
            id="mcp_url_path_leaked",
        ),
        pytest.param(
            _wire_response(
                output=[
                    {
                        "id": "mcpl_1",
                        "type": "mcp_list_tools",
                        "server_label": "d",
                        "tools": [],
                        "error": None,
                        "status": "completed",
                    }
                ]
            ),
            id="mcp_list_tools_with_status",
        ),
        pytest.param(
            _wire_response(
                output=[
                    {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": "hi", "annotations": []}],
                    }
                ]
            ),
            id="output_text_without_logprobs",
        ),
        pytest.param(
            _wire_response(
                usage={
                    "input_tokens": 1,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": 1,
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": 2,
                }
            ),
            id="usage_without_cache_write_tokens",
        ),
    ],
)
def test_validate_response_contract_violation_rejected(wire: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        validate_response(wire)


def _loop_state(body: dict[str, Any], **fields: Any) -> LoopState:
    return LoopState(
        response_id="resp_1",
        created_at=1_700_000_000,
        model="gpt-test",
        request=echo_fields(parse_create_request(body)),
        upstream_input=[],
        **fields,
    )


def test_render_response_echo_fields_snapshot_validates() -> None:
    body = {
        "model": "gpt-test",
        "tools": [
            {"type": "function", "name": "f"},
            {
                "type": "mcp",
                "server_label": "docs",
                "server_url": "https://u:p@mcp.example.com/sse?key=1",
                "headers": {"Authorization": "Bearer x"},
            },
            {"type": "web_search"},
        ],
        "conversation": "conv_1",
        "metadata": {"a": "b"},
    }
    rendered = render_response(_loop_state(body))
    validate_response(rendered)
    assert sdk.Response.model_validate(rendered).status == "in_progress"


def test_render_response_completed_output_and_usage_validates() -> None:
    output = [_dump(item) for item in _sdk_output()]
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    state = _loop_state({"model": "gpt-test"}, output=output, status="completed", usage=usage)
    rendered = render_response(state)
    response = validate_response(rendered)
    assert response.output[-1].type == "message"
    assert response.usage is not None
    assert response.usage.total_tokens == 15


def test_validate_error_envelope_invalid_request_error_accepted() -> None:
    error = InvalidRequestError("Missing required parameter: 'model'.", param="model")
    assert validate_error_envelope({"error": error.to_error()}).error.param == "model"


# --------------------------------------------------------------------------- events


def test_sdk_event_samples_cover_every_event_type() -> None:
    assert {event.type for event in _sdk_events()} == EVENT_TYPES  # type: ignore[attr-defined]


def test_event_types_cover_every_emitted_event() -> None:
    assert EVENT_TYPES == EMITTED_EVENT_TYPES


@pytest.mark.parametrize("sample", _sdk_events(), ids=lambda e: str(getattr(e, "type", "")))
def test_validate_event_sdk_sample_round_trips(sample: BaseModel) -> None:
    wire = _wire(sample)
    ours = validate_event(wire)
    assert _dump(ours) == wire
    again = TypeAdapter(sdk.ResponseStreamEvent).validate_python(_dump(ours))
    assert again.type == wire["type"]


@pytest.mark.parametrize(
    ("change", "drop"),
    [
        pytest.param({"unexpected": 1}, None, id="extra_key"),
        pytest.param({}, "sequence_number", id="no_sequence_number"),
        pytest.param({"sequence_number": -1}, None, id="negative_sequence_number"),
        pytest.param({"output_index": "0"}, None, id="string_output_index"),
    ],
)
def test_validate_event_malformed_delta_rejected(change: dict[str, Any], drop: str | None) -> None:
    wire = {
        "type": "response.output_text.delta",
        "sequence_number": 5,
        "item_id": "msg_1",
        "output_index": 0,
        "content_index": 0,
        "delta": "hi",
        "logprobs": [],
        **change,
    }
    if drop:
        del wire[drop]
    with pytest.raises(ValidationError):
        validate_event(wire)


def test_validate_event_arguments_done_without_name_rejected() -> None:
    with pytest.raises(ValidationError):
        validate_event(
            {
                "type": "response.function_call_arguments.done",
                "sequence_number": 1,
                "item_id": "fc_1",
                "output_index": 0,
                "arguments": "{}",
            }
        )


def test_validate_event_error_without_nested_error_rejected() -> None:
    with pytest.raises(ValidationError):
        validate_event(
            {"type": "error", "sequence_number": 0, "code": None, "message": "x", "param": None}
        )


def test_validate_event_unknown_type_rejected() -> None:
    with pytest.raises(ValidationError):
        validate_event({"type": "response.audio.delta", "sequence_number": 0, "delta": ""})


def test_validate_event_error_event_model_returned() -> None:
    error = {"type": "server_error", "code": "server_error", "message": "boom", "param": None}
    event = validate_event(
        {
            "type": "error",
            "sequence_number": 3,
            "error": error,
            "code": "server_error",
            "message": "boom",
            "param": None,
        }
    )
    assert isinstance(event, ErrorEvent)


# --------------------------------------------------------------------------- openapi.yaml


@pytest.fixture(scope="module")
def schemas() -> dict[str, Any]:
    spec = json.loads(OPENAPI.read_text())
    return dict(spec["components"]["schemas"])


def _ref_name(ref: dict[str, Any]) -> str:
    return str(ref["$ref"]).rsplit("/", 1)[-1]


def _spec_events(schemas: dict[str, Any]) -> dict[str, dict[str, Any]]:
    union = schemas["ResponseStreamEvent"]
    members = union.get("anyOf") or union.get("oneOf")
    found: dict[str, dict[str, Any]] = {}
    for ref in members:
        schema = schemas[_ref_name(ref)]
        (kind,) = schema["properties"]["type"]["enum"]
        found[kind] = schema
    return found


def _properties(schemas: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        names |= _properties(schemas, schemas[_ref_name(part)] if "$ref" in part else part)
    return names


def test_event_types_all_in_openapi_stream_events(schemas: dict[str, Any]) -> None:
    assert EVENT_TYPES - set(_spec_events(schemas)) == set()


def test_event_models_fields_agree_with_openapi(schemas: dict[str, Any]) -> None:
    spec = _spec_events(schemas)
    for member in StreamEvent.__origin__.__args__:  # type: ignore[attr-defined]
        kind = member.model_fields["type"].annotation.__args__[0]
        schema = spec[kind]
        ours = set(member.model_fields)
        assert set(schema["required"]) <= ours, kind
        extras = {"obfuscation"} | ({"error"} if kind == "error" else set())
        assert ours <= set(schema["properties"]) | extras, kind


@pytest.mark.parametrize(
    ("ours", "spec_name"),
    [
        (OutputMessage, "OutputMessage"),
        (OutputFunctionCall, "FunctionToolCall"),
        (OutputReasoning, "ReasoningItem"),
        (OutputMcpListTools, "MCPListTools"),
        (OutputMcpCall, "MCPToolCall"),
        (OutputMcpApprovalRequest, "MCPApprovalRequest"),
    ],
)
def test_output_item_model_fields_agree_with_openapi(
    schemas: dict[str, Any], ours: type[BaseModel], spec_name: str
) -> None:
    schema = schemas[spec_name]
    assert set(schema["required"]) <= set(ours.model_fields)
    assert set(ours.model_fields) <= set(schema["properties"])


def test_response_fields_agree_with_openapi_response(schemas: dict[str, Any]) -> None:
    # ``store`` and the penalties: see test_response_fields_subset_of_sdk_response.
    assert set(Response.model_fields) - _properties(schemas, schemas["Response"]) == {
        "store",
        "presence_penalty",
        "frequency_penalty",
    }


def test_create_response_request_covers_openapi_create_response(schemas: dict[str, Any]) -> None:
    spec_fields = _properties(schemas, schemas["CreateResponse"])
    assert spec_fields - set(CreateResponseRequest.model_fields) == set()
