"""The buffered function's handler (``functions/buffered/buffered_handler.py``), driven with API
Gateway REST events: routes, errors, tenant isolation, and what it logs.

GIVEN the entry module loaded as Lambda loads it, with the environment ``template.yaml`` gives
it (pointed at an embedded DynamoDB), WHEN it receives REST proxy events carrying an API key id,
THEN answers are API Gateway proxy results with OpenAI shapes, scoped to that key id.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from responses_gateway.keys import TENANT_TAG
from responses_gateway.store.base import StoredResponse
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo

from .conftest import load_entry

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

KEY_A = "k1a2b3c4d5"
KEY_B = "k9z8y7x6w5"
CONV = "/v1/conversations/{conversation_id}"
ITEMS = "/v1/conversations/{conversation_id}/items"
ITEM = "/v1/conversations/{conversation_id}/items/{item_id}"
RESPONSE = "/v1/responses/{response_id}"
INPUT_ITEMS = "/v1/responses/{response_id}/input_items"
KEYS = "/v1/console/keys"
KEY = "/v1/console/keys/{key_id}"
KEY_OPS = "kops0p3r4t"


def _call(handler: Handler, event: dict[str, Any], context: Any) -> tuple[int, Any, dict[str, Any]]:
    result = handler(event, context)
    assert result["isBase64Encoded"] is False
    body = json.loads(result["body"]) if result["body"] else None
    return result["statusCode"], body, result["headers"]


def _put_response(dynamo: LocalDynamo, tenant: str, response_id: str) -> None:
    store = DynamoStore(dynamo.client, dynamo.table_name)
    response = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": "scripted",
        "output": [],
    }
    items = [{"id": f"msg_{n}", "type": "message", "role": "user", "content": []} for n in range(3)]
    try:
        asyncio.run(store.put_response(StoredResponse(tenant, response_id, response, items)))
    finally:
        store.close()


def test_conversation_routes_round_trip(
    buffered_handler: Handler, make_event: Any, lambda_context: Any
) -> None:
    # GIVEN a conversation created with key A
    status, created, headers = _call(
        buffered_handler,
        make_event(
            "POST",
            "/v1/conversations",
            "/v1/conversations",
            key_id=KEY_A,
            body={
                "metadata": {"topic": "deploy"},
                "items": [{"type": "message", "role": "user", "content": "hello"}],
            },
        ),
        lambda_context,
    )
    assert status == 200, created
    assert headers["content-type"] == "application/json"
    assert headers["x-request-id"]
    conv_id = created["id"]
    path = f"/v1/conversations/{conv_id}"
    # WHEN it is read, updated and listed with the same key THEN each route answers
    assert (
        _call(buffered_handler, make_event("GET", CONV, path, key_id=KEY_A), lambda_context)[0]
        == 200
    )
    status, updated, _ = _call(
        buffered_handler,
        make_event("POST", CONV, path, key_id=KEY_A, body={"metadata": {"topic": "lambda"}}),
        lambda_context,
    )
    assert (status, updated["metadata"]) == (200, {"topic": "lambda"})
    status, appended, _ = _call(
        buffered_handler,
        make_event(
            "POST",
            ITEMS,
            f"{path}/items",
            key_id=KEY_A,
            body={"items": [{"type": "message", "role": "user", "content": "again"}]},
        ),
        lambda_context,
    )
    assert status == 200, appended
    item_id = appended["data"][0]["id"]
    status, page, _ = _call(
        buffered_handler,
        make_event("GET", ITEMS, f"{path}/items?limit=1&order=asc", key_id=KEY_A),
        lambda_context,
    )
    assert (status, len(page["data"]), page["has_more"]) == (200, 1, True)
    item_path = f"{path}/items/{item_id}"
    assert (
        _call(buffered_handler, make_event("GET", ITEM, item_path, key_id=KEY_A), lambda_context)[0]
        == 200
    )
    assert (
        _call(
            buffered_handler, make_event("DELETE", ITEM, item_path, key_id=KEY_A), lambda_context
        )[0]
        == 200
    )
    status, deleted, _ = _call(
        buffered_handler, make_event("DELETE", CONV, path, key_id=KEY_A), lambda_context
    )
    assert (status, deleted["deleted"]) == (200, True)
    assert (
        _call(buffered_handler, make_event("GET", CONV, path, key_id=KEY_A), lambda_context)[0]
        == 404
    )


def test_conversations_are_invisible_to_another_key(
    buffered_handler: Handler, make_event: Any, lambda_context: Any
) -> None:
    _, created, _ = _call(
        buffered_handler,
        make_event("POST", "/v1/conversations", "/v1/conversations", key_id=KEY_A, body={}),
        lambda_context,
    )
    path = f"/v1/conversations/{created['id']}"
    for method, resource, route_path, body in [
        ("GET", CONV, path, None),
        ("POST", CONV, path, {"metadata": {"x": "y"}}),
        ("DELETE", CONV, path, None),
        ("GET", ITEMS, f"{path}/items", None),
        (
            "POST",
            ITEMS,
            f"{path}/items",
            {"items": [{"type": "message", "role": "user", "content": "x"}]},
        ),
    ]:
        status, answer, _ = _call(
            buffered_handler,
            make_event(method, resource, route_path, key_id=KEY_B, body=body),
            lambda_context,
        )
        assert status == 404, (method, route_path, answer)
        assert answer["error"]["type"] == "invalid_request_error"
    assert (
        _call(buffered_handler, make_event("GET", CONV, path, key_id=KEY_A), lambda_context)[0]
        == 200
    )


def test_stored_responses_are_invisible_to_another_key(
    buffered_handler: Handler, make_event: Any, lambda_context: Any, dynamo: LocalDynamo
) -> None:
    # GIVEN a stored response of tenant A (the streaming function writes these)
    _put_response(dynamo, KEY_A, "resp_deploy_isolation")
    path = "/v1/responses/resp_deploy_isolation"
    # THEN tenant B sees nothing and cannot delete it; tenant A reads its items and deletes it
    status, answer, _ = _call(
        buffered_handler,
        make_event("GET", INPUT_ITEMS, f"{path}/input_items", key_id=KEY_B),
        lambda_context,
    )
    assert status == 404 and "resp_deploy_isolation" in answer["error"]["message"]
    assert (
        _call(buffered_handler, make_event("DELETE", RESPONSE, path, key_id=KEY_B), lambda_context)[
            0
        ]
        == 404
    )
    status, page, _ = _call(
        buffered_handler,
        make_event("GET", INPUT_ITEMS, f"{path}/input_items?order=asc&limit=2", key_id=KEY_A),
        lambda_context,
    )
    assert status == 200
    assert [item["id"] for item in page["data"]] == ["msg_0", "msg_1"]
    status, deleted, _ = _call(
        buffered_handler, make_event("DELETE", RESPONSE, path, key_id=KEY_A), lambda_context
    )
    assert (status, deleted) == (
        200,
        {"id": "resp_deploy_isolation", "object": "response", "deleted": True},
    )


def test_input_tokens_reads_a_base64_body(
    buffered_handler: Handler, make_event: Any, lambda_context: Any
) -> None:
    event = make_event(
        "POST",
        "/v1/responses/input_tokens",
        "/v1/responses/input_tokens",
        key_id=KEY_A,
        body={"model": "any", "input": "count these words please"},
        base64_body=True,
    )
    status, answer, _ = _call(buffered_handler, event, lambda_context)
    assert status == 200, answer
    assert answer["object"] == "response.input_tokens"
    assert answer["input_tokens"] > 0


@pytest.mark.parametrize(
    ("method", "resource", "path", "body", "status", "param"),
    [
        ("POST", "/v1/conversations", "/v1/conversations", "{not json", 400, None),
        ("GET", INPUT_ITEMS, "/v1/responses/resp_x/input_items?limit=abc", None, 400, "limit"),
        ("GET", ITEMS, "/v1/conversations/conv_missing/items?order=up", None, 400, "order"),
        ("GET", CONV, "/v1/conversations/conv_missing", None, 404, None),
        ("DELETE", RESPONSE, "/v1/responses/resp_missing", None, 404, "response_id"),
    ],
)
def test_errors_are_openai_envelopes(
    buffered_handler: Handler,
    make_event: Any,
    lambda_context: Any,
    method: str,
    resource: str,
    path: str,
    body: Any,
    status: int,
    param: str | None,
) -> None:
    answered, answer, _ = _call(
        buffered_handler,
        make_event(method, resource, path, key_id=KEY_A, body=body),
        lambda_context,
    )
    assert answered == status
    assert set(answer["error"]) == {"message", "type", "param", "code"}
    if param is not None:
        assert answer["error"]["param"] == param


def test_an_event_without_an_api_key_id_is_refused(
    buffered_handler: Handler, make_event: Any, lambda_context: Any
) -> None:
    status, answer, headers = _call(
        buffered_handler,
        make_event("GET", CONV, "/v1/conversations/conv_1", key_id=None),
        lambda_context,
    )
    assert status == 401
    assert answer["error"]["code"] == "invalid_api_key"
    assert headers["www-authenticate"] == "Bearer"


def test_logs_carry_the_request_id_and_no_body(
    buffered_handler: Handler,
    make_event: Any,
    lambda_context: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    secret_text = "a very private prompt about the quarterly numbers"
    event = make_event(
        "POST",
        "/v1/conversations",
        "/v1/conversations",
        key_id=KEY_A,
        body={"items": [{"type": "message", "role": "user", "content": secret_text}]},
    )
    capsys.readouterr()
    assert _call(buffered_handler, event, lambda_context)[0] == 200
    lines = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    request_logs = [line for line in lines if line.get("message") == "request"]
    assert len(request_logs) == 1
    log = request_logs[0]
    assert log["correlation_id"] == event["requestContext"]["requestId"]
    assert log["lambda_request_id"] == lambda_context.aws_request_id
    assert (log["api_key_id"], log["status"], log["path"]) == (KEY_A, 200, "/v1/conversations")
    metrics = [line for line in lines if "Requests" in line]
    assert len(metrics) == 1
    assert metrics[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ResponsesGateway"
    assert (metrics[0]["Requests"], metrics[0]["function"]) == ([1.0], "buffered")
    everything = json.dumps(lines)
    assert secret_text not in everything
    assert "gw-key-value" not in everything


def _stack_template(stack: str, with_outputs: bool) -> str:
    """A stand-in stack: the real one's outputs name its two usage plans (moto's CloudFormation
    cannot build API Gateway usage plans, so they come in as parameters)."""
    marker = {"Type": "String", "Name": f"/stand-in/{stack}", "Value": "stand-in"}
    template: dict[str, Any] = {
        "Parameters": {"Plan": {"Type": "String"}, "SocketPlan": {"Type": "String"}},
        "Resources": {"Marker": {"Type": "AWS::SSM::Parameter", "Properties": marker}},
    }
    if with_outputs:
        template["Outputs"] = {
            "UsagePlanId": {"Value": {"Ref": "Plan"}},
            "SocketUsagePlanId": {"Value": {"Ref": "SocketPlan"}},
        }
    return json.dumps(template)


def test_console_keys_administer_the_stacks_api_gateway_keys(
    deployed_env: dict[str, str],
    dynamo: LocalDynamo,
    make_event: Any,
    lambda_context: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a stack whose usage plans (REST and WebSocket) live in moto's API Gateway, and the
    # buffered function told its stack name as the template tells it
    stack = f"gw-{uuid.uuid4().hex[:8]}"
    env = {
        **deployed_env,
        "GATEWAY_OPERATOR_TENANTS": KEY_OPS,
        "GATEWAY_KEYS_STACK": stack,
        "AWS_ENDPOINT_URL": dynamo.endpoint_url,  # API Gateway and CloudFormation: moto
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    aws = {"region_name": dynamo.region, "endpoint_url": dynamo.endpoint_url}
    apigateway = boto3.client("apigateway", **aws)
    cloudformation = boto3.client("cloudformation", **aws)
    api = apigateway.create_rest_api(name=stack)["id"]
    plan, socket_plan = (
        apigateway.create_usage_plan(
            name=f"{stack}-{kind}", apiStages=[{"apiId": api, "stage": "prod"}]
        )["id"]
        for kind in ("rest", "socket")
    )
    parameters = [
        {"ParameterKey": "Plan", "ParameterValue": plan},
        {"ParameterKey": "SocketPlan", "ParameterValue": socket_plan},
    ]
    cloudformation.create_stack(
        StackName=stack, TemplateBody=_stack_template(stack, False), Parameters=parameters
    )
    handler: Handler = load_entry("buffered", "buffered_handler.py", env).handler

    def call(
        method: str, resource: str, path: str, key_id: str = KEY_OPS, body: Any = None
    ) -> tuple[int, Any]:
        status, answer, _ = _call(
            handler, make_event(method, resource, path, key_id=key_id, body=body), lambda_context
        )
        return status, answer

    # WHEN the stack does not name its plans yet THEN the Keys page hears why (and nothing is kept)
    status, answer = call("GET", KEYS, KEYS)
    assert (status, answer["error"]["code"]) == (500, "keys_unavailable")
    assert stack in answer["error"]["message"]
    cloudformation.update_stack(
        StackName=stack, TemplateBody=_stack_template(stack, True), Parameters=parameters
    )
    # a tenant's key may not administer keys
    assert call("GET", KEYS, KEYS, key_id=KEY_A)[0] == 403
    assert call("POST", KEYS, KEYS, key_id=KEY_A, body={"tenant": "team-b"})[0] == 403

    # WHEN an operator key creates a key THEN it exists, tagged, enabled, in both plans
    status, created = call("POST", KEYS, KEYS, body={"tenant": "team-b"})
    assert status == 201, created
    key_id, value = created["id"], created["value"]
    assert (created["tenant"], created["enabled"], value[:6]) == ("team-b", True, "sk-gw-")
    key = apigateway.get_api_key(apiKey=key_id, includeValue=True)
    assert (key["value"], key["enabled"], key["tags"]) == (value, True, {TENANT_TAG: "team-b"})
    for plan_id in (plan, socket_plan):
        assert [k["id"] for k in apigateway.get_usage_plan_keys(usagePlanId=plan_id)["items"]] == [
            key_id
        ]

    # the plans were read once: the stack's outputs are not read again
    cloudformation.delete_stack(StackName=stack)
    status, listed = call("GET", KEYS, KEYS)
    assert status == 200, listed
    assert listed["data"] == [
        {
            "object": "gateway.api_key",
            "id": key_id,
            "tenant": "team-b",
            "enabled": True,
            "name": created["name"],
            "created_at": created["created_at"],  # API Gateway's createdDate
            "last_used_at": None,
            "current": False,
        }
    ]
    assert isinstance(created["created_at"], int)
    assert value not in json.dumps(listed)  # a listing never shows a key
    assert call("GET", KEYS, f"{KEYS}?tenant=other")[1]["data"] == []

    # WHEN it is revoked THEN it is gone (AWS drops a deleted key from its plans; moto keeps
    # the plan entries of deleted keys, so the listing's join is what shows it gone)
    path = f"{KEYS}/{key_id}?tenant=team-b"
    assert call("DELETE", KEY, path) == (
        200,
        {"object": "gateway.api_key.deleted", "id": key_id, "deleted": True},
    )
    assert key_id not in [k["id"] for k in apigateway.get_api_keys()["items"]]
    assert call("GET", KEYS, KEYS) == (200, {"object": "list", "data": []})
    status, missing = call("DELETE", KEY, path)
    assert (status, missing["error"]["param"]) == (404, "key_id")
