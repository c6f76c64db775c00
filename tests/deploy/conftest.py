"""Deployment fixtures: the SAM template (as written and as transformed), the Lambda entry points
loaded from ``functions/``, an embedded DynamoDB endpoint and a scripted upstream.

The transformed template comes from ``infra/check_template.py`` (the same code CI runs), once per
session. Entry points are loaded from their files, as Lambda loads them, with the environment the
template gives them.
"""

from __future__ import annotations

import base64
import copy
import fcntl
import importlib.util
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.testing import (
    RunningServer,
    ScriptedUpstream,
    create_fake_upstream_app,
    run_in_thread,
)

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
TABLE = "deploy-tests"
UPSTREAM_KEY = "sk-upstream-deploy-secret"


def load_module(path: Path, name: str) -> ModuleType:
    """Import ``path`` as module ``name`` (fresh each call), as the Lambda runtime would."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(name, None)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def check_template() -> ModuleType:
    return load_module(ROOT / "infra" / "check_template.py", "check_template")


@pytest.fixture(scope="session")
def sam_template(check_template: ModuleType) -> dict[str, Any]:
    template: dict[str, Any] = check_template.load_template()
    return template


SAM_TRANSLATOR = ROOT / "infra" / "sam-translator.txt"
"""The pinned SAM translator (installed without its dependencies: it pins an older pydantic)."""


def install_sam_translator() -> None:
    """Install the pinned SAM translator unless importable, as ``infra/check_template.sh``
    does; serialised across test processes with ``flock``. Fails (never skips) when it cannot."""
    if importlib.util.find_spec("samtranslator") is not None:
        return
    lock_path = ROOT / "build" / ".sam-translator.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        importlib.invalidate_caches()
        if importlib.util.find_spec("samtranslator") is None:
            done = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
                + ["--no-deps", "-r", str(SAM_TRANSLATOR)],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if done.returncode != 0:
                pytest.fail(f"cannot install {SAM_TRANSLATOR.name}: {done.stderr}", pytrace=False)
            importlib.invalidate_caches()


@pytest.fixture(scope="session")
def sam_translator() -> None:
    install_sam_translator()


@pytest.fixture(scope="session")
def cfn(check_template: ModuleType, sam_translator: None) -> dict[str, Any]:
    """The CloudFormation the SAM transform makes of ``template.yaml`` (default parameters)."""
    transformed: dict[str, Any] = check_template.transformed()
    return transformed


@pytest.fixture(scope="session")
def dynamo() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name=TABLE)
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="session")
def upstream_server() -> Iterator[tuple[ScriptedUpstream, RunningServer]]:
    upstream = ScriptedUpstream(demo=False)
    server = run_in_thread(create_fake_upstream_app(upstream))
    try:
        yield upstream, server
    finally:
        server.stop()


@pytest.fixture
def upstream(upstream_server: tuple[ScriptedUpstream, RunningServer]) -> ScriptedUpstream:
    scripted = upstream_server[0]
    scripted.reset()
    return scripted


def function_env(dynamo: LocalDynamo, upstream_url: str) -> dict[str, str]:
    """The environment ``template.yaml`` gives the functions, pointed at local stand-ins."""
    return {
        "DYNAMODB_TABLE": dynamo.table_name,
        "DYNAMODB_ENDPOINT_URL": dynamo.endpoint_url,
        "AWS_REGION": dynamo.region,
        "RETENTION_DAYS": "30",
        "UPSTREAM_BASE_URL": f"{upstream_url}/v1",
        "UPSTREAM_API": "chat",
        "UPSTREAM_API_KEY": UPSTREAM_KEY,
        "GATEWAY_TRUST_LAMBDA_CONTEXT": "1",
        "POWERTOOLS_SERVICE_NAME": "responses-gateway",
        "POWERTOOLS_METRICS_NAMESPACE": "ResponsesGateway",
    }


_SAMPLE_EVENT = json.loads((Path(__file__).parent / "events" / "rest_api_request.json").read_text())


def rest_event(
    method: str,
    resource: str,
    path: str,
    *,
    key_id: str | None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    base64_body: bool = False,
) -> dict[str, Any]:
    """An API Gateway REST (v1 proxy) event, shaped like ``events/rest_api_request.json``.

    Args:
        method: the HTTP method.
        resource: the API resource (``/v1/conversations/{conversation_id}``).
        path: the request path with its query (``/v1/conversations/conv_1/items?limit=2``).
        key_id: the API key id API Gateway put in ``requestContext.identity`` (None: no key).
        body: a JSON-able body (or raw ``str``/``bytes``), None for none.
        headers: extra headers.
        base64_body: send the body base64-encoded, as API Gateway does for binary types.
    """
    event: dict[str, Any] = copy.deepcopy(_SAMPLE_EVENT)
    split = urlsplit(path)
    query = parse_qs(split.query)
    all_headers = {**event["headers"], **(headers or {})}
    names = [part[1:-1] for part in resource.split("/") if part.startswith("{")]
    values = [
        value
        for template, value in zip(resource.split("/"), split.path.split("/"), strict=True)
        if template.startswith("{")
    ]
    raw: bytes | None
    if body is None:
        raw = None
    elif isinstance(body, bytes):
        raw = body
    elif isinstance(body, str):
        raw = body.encode()
    else:
        raw = json.dumps(body).encode()
    event.update(
        resource=resource,
        path=split.path,
        httpMethod=method,
        headers=all_headers,
        multiValueHeaders={k: [v] for k, v in all_headers.items()},
        queryStringParameters={k: v[-1] for k, v in query.items()} or None,
        multiValueQueryStringParameters=query or None,
        pathParameters=dict(zip(names, values, strict=True)) or None,
        body=None
        if raw is None
        else (base64.b64encode(raw).decode() if base64_body else raw.decode()),
        isBase64Encoded=base64_body and raw is not None,
    )
    context = event["requestContext"]
    context.update(
        resourcePath=resource,
        httpMethod=method,
        path=f"/prod{split.path}",
        requestId=str(uuid.uuid4()),
    )
    if key_id is None:
        del context["identity"]["apiKeyId"]
        context["identity"]["apiKey"] = None
    else:
        context["identity"]["apiKeyId"] = key_id
    return event


@dataclass
class LambdaContext:
    """The attributes of the Lambda context object that handlers read."""

    function_name: str = "responses-gateway-BufferedFunction"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = (
        "arn:aws:lambda:eu-west-1:123456789012:function:responses-gateway-BufferedFunction"
    )
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


@pytest.fixture
def make_event() -> Any:
    """:func:`rest_event`, for tests (conftest helpers are not importable)."""
    return rest_event


@pytest.fixture
def lambda_context() -> LambdaContext:
    return LambdaContext()


@pytest.fixture(scope="session")
def deployed_env(
    dynamo: LocalDynamo, upstream_server: tuple[ScriptedUpstream, RunningServer]
) -> dict[str, str]:
    """:func:`function_env` for the session's DynamoDB endpoint and scripted upstream."""
    return function_env(dynamo, upstream_server[1].url)


def load_entry(directory: str, filename: str, env: Mapping[str, str]) -> ModuleType:
    """Load ``functions/<directory>/<filename>`` with ``env`` set while it initializes (the
    entry points read their environment at import, as on a Lambda cold start)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return load_module(FUNCTIONS / directory / filename, f"entry_{directory}")


@pytest.fixture(scope="session")
def buffered_handler(deployed_env: dict[str, str]) -> Any:
    """The buffered function's ``handler``, loaded from its entry module."""
    handler: Any = load_entry("buffered", "buffered_handler.py", deployed_env).handler
    return handler


@pytest.fixture(scope="session")
def worker_handler(deployed_env: dict[str, str]) -> Any:
    """The background worker function's ``handler``, loaded from its entry module."""
    handler: Any = load_entry("worker", "worker_handler.py", deployed_env).handler
    return handler
