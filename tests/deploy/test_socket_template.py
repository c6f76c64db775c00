"""The WebSocket API of ``template.yaml``, asserted on what the SAM transform makes of it.

GIVEN the template transformed offline, THEN: the WebSocket API routes every client event to
$default (no route selection by type), $connect runs the REST API's key authorizer and needs the
same API key (a usage plan holding the stack's key), $connect, $default and $disconnect reach
the socket function through one proxy integration, the function may post to (and end) only this
API's connections and invoke only itself, and its limits come from parameters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _of(cfn: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in cfn["Resources"].items() if v["Type"] == kind}


def test_websocket_api_sends_every_event_to_default(cfn: dict[str, Any]) -> None:
    (api,) = _of(cfn, "AWS::ApiGatewayV2::Api").values()
    assert api["ProtocolType"] == "WEBSOCKET"
    assert api["RouteSelectionExpression"] == "$request.body.type"
    assert api["ApiKeySelectionExpression"] == "$context.authorizer.usageIdentifierKey"
    routes = {r["RouteKey"]: r for r in _of(cfn, "AWS::ApiGatewayV2::Route").values()}
    assert set(routes) == {"$connect", "$default", "$disconnect"}
    (integration,) = _of(cfn, "AWS::ApiGatewayV2::Integration").values()
    assert integration["IntegrationType"] == "AWS_PROXY"
    assert "${SocketFunction.Arn}/invocations" in integration["IntegrationUri"]["Fn::Sub"]
    for route in routes.values():
        assert route["Target"] == {"Fn::Sub": "integrations/${SocketIntegration}"}


def test_connect_uses_the_rest_api_key_authorizer_and_keys(cfn: dict[str, Any]) -> None:
    connect = next(
        r for r in _of(cfn, "AWS::ApiGatewayV2::Route").values() if r["RouteKey"] == "$connect"
    )
    assert connect["AuthorizationType"] == "CUSTOM"
    assert connect["ApiKeyRequired"] is True
    assert connect["AuthorizerId"] == {"Ref": "SocketAuthorizer"}
    authorizer = cfn["Resources"]["SocketAuthorizer"]["Properties"]
    assert authorizer["AuthorizerType"] == "REQUEST"
    assert authorizer["IdentitySource"] == ["route.request.header.Authorization"]
    assert "${AuthorizerFunction.Arn}" in authorizer["AuthorizerUri"]["Fn::Sub"]
    plan = cfn["Resources"]["SocketUsagePlan"]["Properties"]
    assert plan["ApiStages"] == [{"ApiId": {"Ref": "SocketApi"}, "Stage": "prod"}]
    key = cfn["Resources"]["SocketUsagePlanKey"]["Properties"]
    assert key["KeyId"] == {"Ref": "GatewayApiApiKey"}  # the REST API's key works here too
    permissions = {
        p["FunctionName"]["Ref"]: p["SourceArn"]["Fn::Sub"]
        for p in _of(cfn, "AWS::Lambda::Permission").values()
        if "${SocketApi}" in str(p.get("SourceArn"))
    }
    assert set(permissions) == {"SocketFunction", "AuthorizerFunction"}


def test_socket_function_settings(cfn: dict[str, Any]) -> None:
    function = cfn["Resources"]["SocketFunction"]["Properties"]
    assert function["Handler"] == "socket_handler.handler"
    assert (ROOT / "functions/socket/socket_handler.py").is_file()
    assert function["FunctionName"] == {"Fn::Sub": "${AWS::StackName}-socket"}
    assert function["Timeout"] == 900  # a run's longest loop; $default itself returns at once
    variables = function["Environment"]["Variables"]
    assert variables["GATEWAY_WS_MAX_SECONDS"] == {"Ref": "SocketMaxSeconds"}
    assert variables["DYNAMODB_TABLE"] == {"Ref": "Table"}
    assert "AWS_LAMBDA_EXEC_WRAPPER" not in variables  # a plain handler, no web adapter
    stage = cfn["Resources"]["SocketStage"]["Properties"]
    assert stage["StageName"] == "prod" and stage["AutoDeploy"] is True
    url = cfn["Outputs"]["SocketUrl"]["Value"]["Fn::Sub"]
    assert url.startswith("wss://${SocketApi}.execute-api.") and url.endswith("/prod")
