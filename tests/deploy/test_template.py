"""The wiring of ``template.yaml``, asserted on what the SAM transform makes of it.

GIVEN the template transformed offline (``infra/check_template.py``), THEN: the two streaming
routes use response streaming through the streaming function (its own runtime, no layer from
another account), every other app route is buffered through Mangum, every route is wired
exactly once and needs an API key, the table matches the store's definition, the background
state machine runs ``infra/statemachines/background.asl.json`` with the worker function, and
IAM is scoped to the table (and to the key's parameter or secret, the state machine and its
executions, the worker).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi.routing import APIRoute

from responses_gateway.api import admin, console, conversations, prompts, responses, traces, usage
from responses_gateway.store.table import TABLE_DEFINITION, TTL_ATTRIBUTE

ROOT = Path(__file__).resolve().parents[2]
ASL_FILE = "infra/statemachines/background.asl.json"
STATE_MACHINE_NAME = "${AWS::StackName}-background"
STATE_MACHINE_ARN = (
    "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"
    + STATE_MACHINE_NAME
)
EXECUTION_ARNS = (
    "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"
    + STATE_MACHINE_NAME
    + ":*"
)
API_FUNCTIONS = {"StreamingFunction", "BufferedFunction"}
UPSTREAM_CALLERS = {"StreamingFunction", "WorkerFunction", "SocketFunction"}
SEALING_SECRET_ARN = {
    "Fn::If": [
        "GenerateSealingKeys",
        {"Ref": "SealingKeysSecret"},
        {
            "Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:"
            "secret:${SealingKeysSecretName}-??????"
        },
    ]
}
"""The functions that call the upstream model (and so read its key)."""
STREAMING_ROUTES = {
    ("POST", "/v1/responses"),
    ("GET", "/v1/responses/{response_id}"),
    ("POST", "/v1/responses/compact"),  # these two call the upstream: its key, long timeout
    ("POST", "/v1/responses/input_tokens"),
}


def _resources(cfn: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in cfn["Resources"].items() if v["Type"] == kind}


def _routes(cfn: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(METHOD, path) -> OpenAPI operation of the REST API."""
    body = cfn["Resources"]["GatewayApi"]["Properties"]["Body"]
    return {
        (method.upper(), path): operation
        for path, operations in body["paths"].items()
        for method, operation in operations.items()
    }


def _app_routes() -> set[tuple[str, str]]:
    return {
        (method, route.path)
        for router in (
            responses.router,
            conversations.router,
            usage.router,
            prompts.router,
            console.router,
            admin.router,
            traces.router,
        )
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    }


def _target(operation: dict[str, Any]) -> tuple[str, str]:
    """(function logical id, invocation kind) an operation's integration calls."""
    uri = operation["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
    match = re.fullmatch(
        r"arn:aws:apigateway:\$\{AWS::Region\}:lambda:path/(?P<version>[\d-]+)/functions/"
        r"\$\{(?P<function>\w+)\.Arn\}/(?P<kind>[\w-]+)",
        uri,
    )
    assert match, uri
    return match["function"], f"{match['version']}/{match['kind']}"


def test_template_transforms_and_lints_clean(
    check_template: ModuleType, sam_translator: None
) -> None:
    assert check_template.main([]) == 0


CONSOLE_FILES = {("GET", "/console"), ("GET", "/console/{proxy+}")}
"""The console's static files (the app's ``/console/{name:path}``): served without a key."""


def test_every_app_route_is_wired_exactly_once(cfn: dict[str, Any]) -> None:
    wired = _routes(cfn)
    assert set(wired) == _app_routes() | CONSOLE_FILES
    assert ("GET", "/health") not in wired


def test_console_files_need_no_key_and_console_data_does(cfn: dict[str, Any]) -> None:
    for route, operation in _routes(cfn).items():
        keyless = not any(operation.get("security") or [{}])
        assert keyless == (route in CONSOLE_FILES), route


def test_streaming_routes_use_response_streaming_to_the_streaming_function(
    cfn: dict[str, Any],
) -> None:
    for route, operation in _routes(cfn).items():
        integration = operation["x-amazon-apigateway-integration"]
        assert integration["type"] == "aws_proxy"
        function, kind = _target(operation)
        if route in STREAMING_ROUTES:
            assert function == "StreamingFunction", route
            assert kind == "2021-11-15/response-streaming-invocations", route
            assert integration["responseTransferMode"] == "STREAM", route
            assert integration["timeoutInMillis"] == 900_000, route
        else:
            assert function == "BufferedFunction", route
            assert kind == "2015-03-31/invocations", route
            assert integration.get("responseTransferMode", "BUFFERED") == "BUFFERED", route


def test_streaming_function_runs_the_app_on_its_own_runtime(
    sam_template: dict[str, Any], cfn: dict[str, Any]
) -> None:
    function = cfn["Resources"]["StreamingFunction"]["Properties"]
    assert function["Handler"] == "streaming_app.app"
    assert function["Runtime"] == "python3.11"
    assert function["Timeout"] == 900
    assert function["Architectures"] == ["arm64"]
    variables = function["Environment"]["Variables"]
    # the managed runtime hands the process to the function's own bootstrap
    assert variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/var/task/bootstrap"
    assert not [name for name in variables if name.startswith("AWS_LWA_")]
    assert variables["GATEWAY_TRUST_LAMBDA_CONTEXT"] == "1"
    # every layer is the stack's own: nothing is taken by ARN from another account
    assert all(set(layer) == {"Ref"} for layer in function["Layers"]), function["Layers"]
    assert "LambdaAdapterLayerVersion" not in sam_template["Parameters"]


def test_buffered_function_is_the_mangum_handler(cfn: dict[str, Any]) -> None:
    function = cfn["Resources"]["BufferedFunction"]["Properties"]
    assert function["Handler"] == "buffered_handler.handler"
    assert "AWS_LAMBDA_EXEC_WRAPPER" not in function["Environment"]["Variables"]
    assert function["Timeout"] <= 30  # API Gateway's buffered integrations stop at 29 s


def test_every_function_is_arm64_on_one_python_runtime_with_matching_layers(
    cfn: dict[str, Any], sam_template: dict[str, Any]
) -> None:
    functions = _resources(cfn, "AWS::Lambda::Function")
    assert set(functions) == {
        "StreamingFunction",
        "BufferedFunction",
        "WorkerFunction",
        "AuthorizerFunction",
        "SocketFunction",
    }
    runtimes = {f["Properties"]["Runtime"] for f in functions.values()}
    assert len(runtimes) == 1
    (runtime,) = runtimes
    for function in functions.values():
        assert function["Properties"]["Architectures"] == ["arm64"]
    makefile = (ROOT / "infra/layers/Makefile").read_text()
    assert f"RUNTIME_VERSION := {runtime.removeprefix('python')}\n" in makefile
    assert "PLATFORM := manylinux2014_aarch64\n" in makefile
    for name in ("DependenciesLayer", "SharedLayer"):
        layer = sam_template["Resources"][name]
        assert layer["Metadata"] == {
            "BuildMethod": "makefile",
            "BuildArchitecture": "arm64",
            "ContextPath": "infra/layers",
        }
        assert f"build-{name}:" in makefile
        assert layer["Properties"]["CompatibleRuntimes"] == [runtime]
        assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_every_route_requires_an_api_key_from_the_bearer_header(cfn: dict[str, Any]) -> None:
    api = cfn["Resources"]["GatewayApi"]["Properties"]
    assert api["ApiKeySourceType"] == "AUTHORIZER"
    assert api["EndpointConfiguration"] == {"Types": ["REGIONAL"]}
    schemes = api["Body"]["components"]["securitySchemes"]
    authorizer = schemes["KeyAuthorizer"]["x-amazon-apigateway-authorizer"]
    assert authorizer["type"] == "request"
    assert authorizer["identitySource"] == "method.request.header.Authorization"
    for route, operation in _routes(cfn).items():
        required = {name for requirement in operation.get("security", []) for name in requirement}
        wanted = set() if route in CONSOLE_FILES else {"api_key", "KeyAuthorizer"}
        assert required == wanted, route


def test_usage_plan_limits_come_from_parameters(sam_template: dict[str, Any]) -> None:
    plan = sam_template["Resources"]["GatewayApi"]["Properties"]["Auth"]["UsagePlan"]
    assert plan["CreateUsagePlan"] == "PER_API"
    assert plan["Throttle"] == {
        "RateLimit": {"Ref": "ThrottleRateLimit"},
        "BurstLimit": {"Ref": "ThrottleBurstLimit"},
    }
    assert plan["Quota"] == {"Limit": {"Ref": "QuotaLimit"}, "Period": {"Ref": "QuotaPeriod"}}


def test_usage_plan_key_and_outputs_exist(cfn: dict[str, Any]) -> None:
    assert _resources(cfn, "AWS::ApiGateway::UsagePlan")
    assert _resources(cfn, "AWS::ApiGateway::ApiKey")
    assert _resources(cfn, "AWS::ApiGateway::UsagePlanKey")
    outputs = cfn["Outputs"]
    assert "/prod/v1" in outputs["ApiBaseUrl"]["Value"]["Fn::Sub"]
    assert "get-api-key" in outputs["FetchApiKeyCommand"]["Value"]["Fn::Sub"]


def test_gateway_errors_are_openai_envelopes(cfn: dict[str, Any]) -> None:
    body = cfn["Resources"]["GatewayApi"]["Properties"]["Body"]
    kinds = body["x-amazon-apigateway-gateway-responses"]
    assert {"UNAUTHORIZED", "INVALID_API_KEY", "THROTTLED", "QUOTA_EXCEEDED"} <= set(kinds)
    assert kinds["INVALID_API_KEY"]["statusCode"] == "401"
    assert kinds["THROTTLED"]["statusCode"] == "429"
    assert kinds["MISSING_AUTHENTICATION_TOKEN"]["statusCode"] == "404"
    for properties in kinds.values():
        template = properties["responseTemplates"]["application/json"]
        rendered = template.replace("$context.error.messageString", '"message"')
        rendered = rendered.replace("$context.httpMethod", "GET").replace("$context.path", "/x")
        error = json.loads(rendered)["error"]
        assert set(error) == {"message", "type", "param", "code"}


def test_table_matches_the_store_definition(cfn: dict[str, Any]) -> None:
    table = cfn["Resources"]["Table"]
    properties = table["Properties"]
    assert table["DeletionPolicy"] == "Retain"
    assert properties["BillingMode"] == TABLE_DEFINITION["BillingMode"] == "PAY_PER_REQUEST"
    assert properties["KeySchema"] == TABLE_DEFINITION["KeySchema"]
    assert properties["AttributeDefinitions"] == TABLE_DEFINITION["AttributeDefinitions"]
    assert properties["TimeToLiveSpecification"] == {
        "AttributeName": TTL_ATTRIBUTE,
        "Enabled": True,
    }
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["SSESpecification"] == {"SSEEnabled": True}
    for function in _resources(cfn, "AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["DYNAMODB_TABLE"] == {"Ref": "Table"}


def _statements(role: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """(condition, statement) for every inline statement of a role."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for policy in role["Properties"].get("Policies", []):
        condition = None
        if "Fn::If" in policy:
            condition, policy, otherwise = policy["Fn::If"]
            assert otherwise == {"Ref": "AWS::NoValue"}
        found += [(condition, s) for s in policy["PolicyDocument"]["Statement"]]
    return found


def _table_arn(resource: Any) -> bool:
    return (
        isinstance(resource, dict)
        and resource["Fn::Sub"][1] == {"tableName": {"Ref": "Table"}}
        and resource["Fn::Sub"][0].startswith("arn:${AWS::Partition}:dynamodb:")
    )


def test_iam_is_scoped_to_the_table_and_the_key(cfn: dict[str, Any]) -> None:
    roles = _resources(cfn, "AWS::IAM::Role")
    assert set(roles) == {
        "StreamingFunctionRole",
        "BufferedFunctionRole",
        "WorkerFunctionRole",
        "AuthorizerFunctionRole",
        "SocketFunctionRole",
        "BackgroundStateMachineRole",
    }
    for name, role in roles.items():
        for condition, statement in _statements(role):
            actions = statement["Action"]
            actions = [actions] if isinstance(actions, str) else actions
            assert all(not a.endswith("*") for a in actions), (name, actions)
            resources = statement["Resource"]
            resources = resources if isinstance(resources, list) else [resources]
            if all(a.startswith("dynamodb:") for a in actions):
                assert condition is None
                assert all(_table_arn(r) for r in resources), name
                assert "dynamodb:DeleteTable" not in actions
            elif "${ConfigSecretsPrefix}/*" in json.dumps(resources):
                # the configuration parameter and providers' keys: reads under one prefix
                assert condition is None
                assert name.removesuffix("Role") in UPSTREAM_CALLERS | {"BufferedFunction"}
                assert all(a.startswith(("ssm:Get", "secretsmanager:Get")) for a in actions)
            elif actions == ["ssm:DescribeParameters"]:
                assert condition in ("HasKeyParameter", None)
            elif all(a.startswith("ssm:Get") for a in actions):
                assert name.removesuffix("Role") in UPSTREAM_CALLERS
                assert condition == "HasKeyParameter"
                assert "UpstreamApiKeyParameterName" in json.dumps(resources)
            elif actions == ["secretsmanager:GetSecretValue"] and "Sealing" in json.dumps(
                resources
            ):
                assert name.removesuffix("Role") in UPSTREAM_CALLERS  # they seal and unseal
                assert condition is None
                assert resources == [
                    {"Fn::Sub": ["${secretArn}", {"secretArn": SEALING_SECRET_ARN}]}
                ], name
            elif actions == ["secretsmanager:GetSecretValue"]:
                assert name.removesuffix("Role") in UPSTREAM_CALLERS
                assert condition == "HasKeySecret"
                assert "${UpstreamApiKeySecretName}-??????" in json.dumps(resources)
            elif actions == ["states:StartExecution"]:
                assert name.removesuffix("Role") in API_FUNCTIONS | {"BackgroundStateMachine"}
                assert resources == [{"Fn::Sub": STATE_MACHINE_ARN}], name
            elif sorted(actions) == ["states:DescribeExecution", "states:StopExecution"]:
                assert name.removesuffix("Role") in API_FUNCTIONS
                assert resources == [{"Fn::Sub": EXECUTION_ARNS}], name
            elif actions == ["execute-api:ManageConnections"]:
                assert name == "SocketFunctionRole"
                assert resources == [
                    {
                        "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:"
                        "${AWS::AccountId}:${SocketApi}/*"
                    }
                ]
            elif actions == ["lambda:InvokeFunction"] and name == "SocketFunctionRole":
                assert resources == [  # itself only (the asynchronous runs)
                    {
                        "Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:"
                        "${AWS::AccountId}:function:${AWS::StackName}-socket"
                    }
                ]
            elif actions == ["lambda:InvokeFunction"]:
                assert name == "BackgroundStateMachineRole"
                ((pattern, variables),) = [r["Fn::Sub"] for r in resources]
                assert pattern.endswith(":function:${functionName}*")
                assert variables == {"functionName": {"Ref": "WorkerFunction"}}
            else:
                pytest.fail(f"{name}: unexpected statement {statement}")
            assert condition is None or not actions[0].startswith(("states:", "lambda:"))
    assert _statements(roles["AuthorizerFunctionRole"]) == []
    buffered = json.dumps(roles["BufferedFunctionRole"])
    assert "UpstreamApiKey" not in buffered  # it reads the configuration, never the old key
    for name in ("WorkerFunctionRole", "AuthorizerFunctionRole"):
        assert "states:" not in json.dumps(roles[name]), name
    machine = json.dumps(roles["BackgroundStateMachineRole"])
    assert "dynamodb:" not in machine and "ssm:" not in machine


APIGATEWAY = "arn:${AWS::Partition}:apigateway:${AWS::Region}::"
REQUEST_LOG_WRITERS = {"StreamingFunction", "BufferedFunction", "WorkerFunction", "SocketFunction"}
"""The functions that end runs, and so write request-log records (the buffered one cancels)."""


def test_console_keys_policy_names_this_stack_and_its_two_plans_only(cfn: dict[str, Any]) -> None:
    policies = _resources(cfn, "AWS::IAM::Policy")
    assert set(policies) == {"ConsoleKeysPolicy", "BedrockInvokePolicy"}
    name = "ConsoleKeysPolicy"
    policy = cfn["Resources"][name]["Properties"]
    assert (name, policy["Roles"]) == ("ConsoleKeysPolicy", [{"Ref": "BufferedFunctionRole"}])
    granted = {
        (
            tuple(sorted([s["Action"]] if isinstance(s["Action"], str) else s["Action"])),
            s["Resource"]["Fn::Sub"],
        )
        for s in policy["PolicyDocument"]["Statement"]
    }
    assert all(s["Effect"] == "Allow" for s in policy["PolicyDocument"]["Statement"])
    assert granted == {
        (
            ("cloudformation:DescribeStacks",),
            "arn:${AWS::Partition}:cloudformation:${AWS::Region}:${AWS::AccountId}:"
            "stack/${AWS::StackName}/*",
        ),
        (("apigateway:GET", "apigateway:POST"), APIGATEWAY + "/apikeys"),
        (("apigateway:DELETE",), APIGATEWAY + "/apikeys/*"),
        (
            ("apigateway:GET", "apigateway:POST"),
            APIGATEWAY + "/usageplans/${GatewayApiUsagePlan}/keys",
        ),
        (("apigateway:POST",), APIGATEWAY + "/usageplans/${SocketUsagePlan}/keys"),
    }
    for function_name, function in _resources(cfn, "AWS::Lambda::Function").items():
        stack = function["Properties"]["Environment"]["Variables"].get("GATEWAY_KEYS_STACK")
        wanted = {"Ref": "AWS::StackName"} if function_name == "BufferedFunction" else None
        assert stack == wanted, function_name
    outputs = cfn["Outputs"]
    assert outputs["UsagePlanId"]["Value"] == {"Ref": "GatewayApiUsagePlan"}
    assert outputs["SocketUsagePlanId"]["Value"] == {"Ref": "SocketUsagePlan"}


def test_log_content_parameter_reaches_the_functions_that_write_the_request_log(
    sam_template: dict[str, Any], cfn: dict[str, Any]
) -> None:
    parameter = sam_template["Parameters"]["LogContentTenants"]
    assert (parameter["Type"], parameter["Default"]) == ("String", "")  # off by default
    pattern = re.compile(parameter["AllowedPattern"])
    assert pattern.fullmatch("") and pattern.fullmatch("k1a2b3,team.b@x")
    assert not pattern.fullmatch("a b") and not pattern.fullmatch("a;b")
    for name, function in _resources(cfn, "AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        content = variables.get("GATEWAY_LOG_CONTENT_TENANTS")
        wanted = {"Ref": "LogContentTenants"} if name in REQUEST_LOG_WRITERS else None
        assert content == wanted, name


def _evaluate(condition: Any, parameters: dict[str, str]) -> Any:
    """A tiny evaluator of the intrinsics the template's conditions use."""
    if isinstance(condition, dict):
        ((name, value),) = condition.items()
        if name == "Ref":
            return parameters[value]
        args = [_evaluate(v, parameters) for v in value]
        if name == "Fn::Equals":
            return args[0] == args[1]
        if name == "Fn::Not":
            return not args[0]
        if name == "Fn::Split":
            return args[1].split(args[0])
        if name == "Fn::Select":
            return args[1][int(args[0])]
        raise AssertionError(f"unexpected intrinsic {name}")
    return condition


@pytest.mark.parametrize(
    ("name", "has_key", "is_path"),
    [("", False, True), ("/gw/upstream-key", True, True), ("gw-upstream-key", True, False)],
)
def test_key_parameter_conditions(
    cfn: dict[str, Any], name: str, has_key: bool, is_path: bool
) -> None:
    conditions = cfn["Conditions"]
    parameters = {"UpstreamApiKeyParameterName": name}
    assert _evaluate(conditions["HasKeyParameter"], parameters) is has_key
    assert _evaluate(conditions["KeyParameterIsPath"], parameters) is is_path


def test_every_function_keeps_logs_for_a_set_time(cfn: dict[str, Any]) -> None:
    groups = _resources(cfn, "AWS::Logs::LogGroup")
    named = {g["Properties"]["LogGroupName"]["Fn::Sub"] for g in groups.values()}
    assert named == {f"/aws/lambda/${{{f}}}" for f in _resources(cfn, "AWS::Lambda::Function")}
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_tracing_is_on(cfn: dict[str, Any]) -> None:
    assert cfn["Resources"]["GatewayApiprodStage"]["Properties"]["TracingEnabled"] is True
    for name in ("StreamingFunction", "BufferedFunction", "WorkerFunction"):
        properties = cfn["Resources"][name]["Properties"]
        assert properties["TracingConfig"] == {"Mode": "Active"}


def test_upstream_key_reaches_only_the_functions_calling_the_upstream(cfn: dict[str, Any]) -> None:
    functions = _resources(cfn, "AWS::Lambda::Function")
    for name, function in functions.items():
        variables = function["Properties"]["Environment"]["Variables"]
        has_key_source = {"UPSTREAM_API_KEY_PARAMETER", "UPSTREAM_API_KEY_SECRET"} & set(variables)
        assert bool(has_key_source) is (name in UPSTREAM_CALLERS), name
        assert "UPSTREAM_API_KEY" not in variables


# -- background mode -----------------------------------------------------------------------------


def _definition(cfn: dict[str, Any]) -> dict[str, Any]:
    """The state machine definition CloudFormation gets (SAM joins it into lines)."""
    properties = cfn["Resources"]["BackgroundStateMachine"]["Properties"]
    separator, lines = properties["DefinitionString"]["Fn::Join"]
    definition: dict[str, Any] = json.loads(separator.join(lines))
    return definition


def test_worker_function_runs_the_background_entry_for_fifteen_minutes(
    sam_template: dict[str, Any], cfn: dict[str, Any]
) -> None:
    function = cfn["Resources"]["WorkerFunction"]["Properties"]
    assert function["Handler"] == "worker_handler.handler"
    assert sam_template["Resources"]["WorkerFunction"]["Properties"]["CodeUri"] == (
        "functions/worker/"
    )
    assert function["Timeout"] == 900
    assert function["MemorySize"] == {"Ref": "WorkerMemorySize"}
    written = sam_template["Resources"]["WorkerFunction"]["Properties"]
    assert written["Layers"] == [{"Ref": "DependenciesLayer"}, {"Ref": "SharedLayer"}]
    variables = function["Environment"]["Variables"]
    assert variables["BACKGROUND_MAX_SECONDS"] == {"Ref": "BackgroundMaxSeconds"}
    assert variables["POWERTOOLS_SERVICE_NAME"] == "responses-gateway"
    assert "AWS_LAMBDA_EXEC_WRAPPER" not in variables
    assert "BACKGROUND_STATE_MACHINE_ARN" not in variables  # the machine hands over itself
    assert sam_template["Parameters"]["BackgroundMaxSeconds"]["Default"] == 6 * 3600
    # the task gives up on a lost invocation a minute after Lambda would have ended it
    run_worker = _definition(cfn)["States"]["RunWorker"]
    assert run_worker["TimeoutSeconds"] == function["Timeout"] + 60


def test_background_state_machine_runs_the_asl_file_with_the_worker(
    sam_template: dict[str, Any], cfn: dict[str, Any]
) -> None:
    written = sam_template["Resources"]["BackgroundStateMachine"]["Properties"]
    assert written["DefinitionUri"] == ASL_FILE
    assert written["Type"] == "STANDARD"
    machine = cfn["Resources"]["BackgroundStateMachine"]
    assert machine["Type"] == "AWS::StepFunctions::StateMachine"
    properties = machine["Properties"]
    assert properties["StateMachineType"] == "STANDARD"
    assert properties["StateMachineName"] == {"Fn::Sub": STATE_MACHINE_NAME}
    assert properties["RoleArn"] == {"Fn::GetAtt": ["BackgroundStateMachineRole", "Arn"]}
    text = (ROOT / ASL_FILE).read_text()
    assert _definition(cfn) == json.loads(text)
    substitutions = properties["DefinitionSubstitutions"]
    assert substitutions == {"WorkerFunctionArn": {"Fn::GetAtt": ["WorkerFunction", "Arn"]}}
    assert set(re.findall(r"\$\{(\w+)\}", text)) == set(substitutions)
    invoked = {
        state["Parameters"]["FunctionName"]
        for state in json.loads(text)["States"].values()
        if state.get("Resource") == "arn:aws:states:::lambda:invoke"
    }
    assert invoked == {"${WorkerFunctionArn}"}
    assert cfn["Outputs"]["BackgroundStateMachineArn"]["Value"] == {"Ref": "BackgroundStateMachine"}


def test_api_functions_know_the_state_machine_by_its_fixed_name(cfn: dict[str, Any]) -> None:
    for name, function in _resources(cfn, "AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        if name in API_FUNCTIONS:
            assert variables["BACKGROUND_STATE_MACHINE_ARN"] == {"Fn::Sub": STATE_MACHINE_ARN}
        else:
            assert "BACKGROUND_STATE_MACHINE_ARN" not in variables, name


def test_cancel_is_a_buffered_route(cfn: dict[str, Any]) -> None:
    operation = _routes(cfn)[("POST", "/v1/responses/{response_id}/cancel")]
    assert _target(operation) == ("BufferedFunction", "2015-03-31/invocations")


def test_executions_ending_without_their_response_reach_the_worker(cfn: dict[str, Any]) -> None:
    rules = _resources(cfn, "AWS::Events::Rule")
    (rule,) = rules.values()
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["source"] == ["aws.states"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert pattern["detail"]["status"] == ["FAILED", "TIMED_OUT", "ABORTED"]
    (machine,) = pattern["detail"]["stateMachineArn"]
    assert machine["Fn::Sub"].endswith(":stateMachine:${AWS::StackName}-background")
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["WorkerFunction", "Arn"]}
    permissions = [
        p["Properties"]
        for p in _resources(cfn, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert [p["FunctionName"] for p in permissions] == [{"Ref": "WorkerFunction"}]
    for name in ("StreamingFunction", "BufferedFunction"):
        variables = cfn["Resources"][name]["Properties"]["Environment"]["Variables"]
        assert variables["BACKGROUND_MAX_SECONDS"] == {"Ref": "BackgroundMaxSeconds"}


def _resolve(value: Any, parameters: dict[str, Any], conditions: dict[str, Any]) -> Any:
    """The intrinsics of an IAM statement evaluated for ``parameters`` (a list parameter as a
    list), ``AWS::`` pseudo parameters included."""
    if isinstance(value, list):
        return [_resolve(v, parameters, conditions) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1 or not next(iter(value)).startswith(("Fn::", "Ref")):
        return {k: _resolve(v, parameters, conditions) for k, v in value.items()}
    ((name, args),) = value.items()
    if name == "Ref":
        return parameters[args]
    if name == "Fn::If":
        chosen = args[1] if _resolve(conditions[args[0]], parameters, conditions) else args[2]
        return _resolve(chosen, parameters, conditions)
    if name == "Fn::Sub":
        template, names = (args, {}) if isinstance(args, str) else args
        known = {**parameters, **{k: _resolve(v, parameters, conditions) for k, v in names.items()}}
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(known[m.group(1)]), template)
    resolved = _resolve(args, parameters, conditions)
    if name == "Fn::Join":
        return resolved[0].join(resolved[1])
    if name == "Fn::Split":
        return resolved[1].split(resolved[0])
    if name == "Fn::Equals":
        return resolved[0] == resolved[1]
    if name == "Fn::Not":
        return not resolved[0]
    raise AssertionError(f"unexpected intrinsic {name}")


BEDROCK_ACTIONS = ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"]


@pytest.mark.parametrize("partition", ["aws", "aws-us-gov"])
def test_bedrock_policy_grants_invoking_exactly_the_listed_models_and_profiles(
    sam_template: dict[str, Any], cfn: dict[str, Any], partition: str
) -> None:
    parameter = sam_template["Parameters"]["BedrockModels"]
    assert (parameter["Type"], parameter["Default"]) == ("CommaDelimitedList", "")
    models = ["us.anthropic.claude-sonnet-4-5-20250929-v1:0", "amazon.nova-pro-v1:0"]
    parameters = {"BedrockModels": models, "AWS::Partition": partition, "AWS::AccountId": "123"}
    conditions = cfn["Conditions"]
    policy = cfn["Resources"]["BedrockInvokePolicy"]
    assert policy["Condition"] == "HasBedrockModels"
    assert _resolve(conditions["HasBedrockModels"], parameters, conditions) is True
    assert _resolve(conditions["HasBedrockModels"], {"BedrockModels": [""]}, conditions) is False
    roles = {r["Ref"] for r in policy["Properties"]["Roles"]}
    assert roles == {f"{f}Role" for f in UPSTREAM_CALLERS}
    statements = _resolve(
        policy["Properties"]["PolicyDocument"]["Statement"], parameters, conditions
    )
    assert all(s["Effect"] == "Allow" and s["Action"] == BEDROCK_ACTIONS for s in statements)
    by_sid = {s["Sid"]: s for s in statements}
    arn = f"arn:{partition}:bedrock"
    assert by_sid["FoundationModels"]["Resource"] == [
        f"{arn}:*::foundation-model/{m}" for m in models
    ]
    assert "Condition" not in by_sid["FoundationModels"]
    profiles = [f"{arn}:*:*:inference-profile/{m}" for m in models]
    assert by_sid["InferenceProfiles"]["Resource"] == profiles
    assert by_sid["InferenceProfiles"]["Condition"] == {
        "StringEquals": {"aws:ResourceAccount": "123"}
    }
    through = by_sid["ModelsOfTheInferenceProfiles"]
    assert through["Resource"] == f"{arn}:*::foundation-model/*"
    assert through["Condition"] == {"StringLike": {"bedrock:InferenceProfileArn": profiles}}
    for name, function in _resources(cfn, "AWS::Lambda::Function").items():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["BEDROCK_MODELS"] == {"Fn::Join": [",", {"Ref": "BedrockModels"}]}, name
