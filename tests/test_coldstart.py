"""Cold start: what the app imports at init and on requests that do not need the heavy modules.

Each check runs in a fresh interpreter (a subprocess) and inspects its ``sys.modules``: a module
imported once stays imported, so only a new process shows what a path pulls in.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from responses_gateway.coldstart import deferred_model_builds

NEVER_AT_INIT = {
    "mcp",  # the MCP SDK: requests with MCP tools only
    "responses_gateway.mcp.client",
    "openai_harmony",  # harmony providers only
    "boto3",  # the DynamoDB client is built on first use
    "botocore.client",
    "responses_gateway.store.dynamo",
    "pydantic.v1",  # FastAPI's v1 check, pulled in by response models and typed parameters
}
"""Modules the app must not import when it is built (``create_app``). FastAPI's own
``fastapi.openapi`` modules are imported by ``fastapi.applications`` whatever the app does; the
checks below assert that their pydantic models are not built."""

ON_PLAIN_REQUESTS = NEVER_AT_INIT - {"pydantic.v1"} - {"responses_gateway.store.dynamo"}
"""Modules a create without MCP tools on a chat provider must not import either (the SQLite
store of the check is not the DynamoDB one; what pydantic loads lazily is not checked)."""

_PROBE = textwrap.dedent(
    """
    import json, sys
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore
    import fastapi.openapi.models as openapi_models
    import httpx
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn
    from responses_gateway.testing.server import run_in_thread

    upstream = ScriptedUpstream(demo=False)
    with run_in_thread(create_fake_upstream_app(upstream)) as model:
        config = parse_config({"providers": [{"base_url": model.url + "/v1", "api": "chat"}]})
        app = create_app(config, SqliteStore())
        report = {
            "openapi_built": openapi_models.OpenAPI.__pydantic_complete__,
            "at_init": sorted(sys.modules),
        }
        with run_in_thread(app) as gateway, httpx.Client(base_url=gateway.url) as client:
            for stream in (False, True):
                upstream.push(Turn(text="Hello"))
                body = {"model": "m", "input": "Hi", "stream": stream}
                answer = client.post("/v1/responses", json=body)
                assert answer.status_code == 200, answer.text
                answer = client.get("/v1/responses/resp_missing")
                assert answer.status_code == 404, answer.text
    report["after_requests"] = sorted(sys.modules)
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    """What a fresh interpreter held after building the app, then after plain requests."""
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


_STORED_PROBE = textwrap.dedent(
    """
    import json, sys
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.dynamo import DynamoStore
    import httpx
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn
    from responses_gateway.testing.server import run_in_thread

    upstream = ScriptedUpstream(demo=False)
    with run_in_thread(create_fake_upstream_app(upstream)) as model:
        config = parse_config({"providers": [{"base_url": model.url + "/v1", "api": "chat"}]})
        store = DynamoStore.from_env()
        app = create_app(config, store)
        report = {"store_built": sorted(sys.modules)}
        with run_in_thread(app) as gateway, httpx.Client(base_url=gateway.url) as client:
            ids = []
            for stream in (False, True):
                upstream.push(Turn(text="Hello"))
                body = {"model": "m", "input": "Hi", "stream": stream}
                answer = client.post("/v1/responses", json=body)
                assert answer.status_code == 200, answer.text
                if not stream:
                    ids.append(answer.json()["id"])
            stored = client.get("/v1/responses/" + ids[0])
            assert stored.json()["status"] == "completed", stored.text
    report["after_requests"] = sorted(sys.modules)
    print(json.dumps(report))
    """
)
NEVER_ON_THE_DYNAMODB_PATH = {"boto3", "botocore"}
"""The DynamoDB store's calls go over the gateway's own HTTP client (``store._http``)."""


@pytest.fixture(scope="module")
def stored_probe() -> Iterator[dict[str, Any]]:
    """What a fresh interpreter held after building the DynamoDB store (from the environment a
    Lambda function has) and after stored creates and a retrieve against moto."""
    from responses_gateway.store.local import start_local_dynamodb

    local = start_local_dynamodb(table_name="coldstart")
    env = {
        **os.environ,
        "DYNAMODB_TABLE": local.table_name,
        "DYNAMODB_ENDPOINT_URL": local.endpoint_url,
        "AWS_REGION": local.region,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_SESSION_TOKEN": "token",
    }
    try:
        result = subprocess.run(
            [sys.executable, "-c", _STORED_PROBE],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env=env,
        )
    finally:
        local.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    yield json.loads(result.stdout.splitlines()[-1])


def test_building_the_dynamodb_store_imports_no_botocore(stored_probe: dict[str, Any]) -> None:
    loaded = set(stored_probe["store_built"])

    assert "responses_gateway.store.dynamo" in loaded
    assert not {m for m in loaded if m.split(".")[0] in NEVER_ON_THE_DYNAMODB_PATH}


def test_stored_creates_import_no_botocore(stored_probe: dict[str, Any]) -> None:
    loaded = set(stored_probe["after_requests"])

    assert "responses_gateway.store._http" in loaded
    assert not {m for m in loaded if m.split(".")[0] in NEVER_ON_THE_DYNAMODB_PATH}


def test_building_the_app_imports_no_heavy_module(probe: dict[str, Any]) -> None:
    loaded = set(probe["at_init"])

    assert not NEVER_AT_INIT & loaded, sorted(NEVER_AT_INIT & loaded)
    assert probe["openapi_built"] is False  # declared by FastAPI, never built


def test_plain_requests_import_no_heavy_module(probe: dict[str, Any]) -> None:
    loaded = set(probe["after_requests"])

    assert not ON_PLAIN_REQUESTS & loaded, sorted(ON_PLAIN_REQUESTS & loaded)
    assert "responses_gateway.api.responses" in loaded  # the probe did reach the routes


def test_deferred_builds_apply_inside_the_block_only() -> None:
    with deferred_model_builds():

        class Deferred(BaseModel):
            value: int

    class Eager(BaseModel):
        value: int

    assert Deferred.__pydantic_complete__ is False
    assert Eager.__pydantic_complete__ is True
    assert Deferred.model_validate({"value": 1}).value == 1  # built on first use
    assert Deferred.__pydantic_complete__ is True
    with pytest.raises(ValueError):
        Deferred.model_validate({"value": "x"})
