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
    "fastapi",  # serves the console's routes only, imported on the first request to one
    "httpx._main",  # httpx's command line (with rich and pygments; click is uvicorn's too)
    "rich",
    "pygments",
}
"""Modules the app must not import when it is built (``create_app``)."""

ON_PLAIN_REQUESTS = NEVER_AT_INIT - {"pydantic.v1"} - {"responses_gateway.store.dynamo"}
"""Modules the app's routes (a create without MCP tools on a chat provider, streamed or not, a
retrieve, a conversation read, ``/health``) must not import either (the SQLite store of the
check is not the DynamoDB one; what pydantic loads lazily is not checked)."""

_PROBE = textwrap.dedent(
    """
    import json, sys
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore
    import httpx
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn
    from responses_gateway.testing.server import run_in_thread

    upstream = ScriptedUpstream(demo=False)
    with run_in_thread(create_fake_upstream_app(upstream)) as model:
        config = parse_config({"providers": [{"base_url": model.url + "/v1", "api": "chat"}]})
        app = create_app(config, SqliteStore())
        report = {"at_init": sorted(sys.modules)}
        with run_in_thread(app) as gateway, httpx.Client(base_url=gateway.url) as client:
            for stream in (False, True):
                upstream.push(Turn(text="Hello"))
                body = {"model": "m", "input": "Hi", "stream": stream}
                answer = client.post("/v1/responses", json=body)
                assert answer.status_code == 200, answer.text
                answer = client.get("/v1/responses/resp_missing")
                assert answer.status_code == 404, answer.text
            assert client.get("/health").status_code == 200
            assert client.get("/v1/conversations/conv_missing").status_code == 404
            report["after_requests"] = sorted(sys.modules)
            answer = client.get("/v1/console/me")  # served by FastAPI
            assert answer.status_code == 200, answer.text
            import fastapi.openapi.models as openapi_models

            report["openapi_built"] = openapi_models.OpenAPI.__pydantic_complete__
            report["after_fastapi"] = sorted(sys.modules)
    print(json.dumps(report))
    """
)


STATE_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:probe-background"
"""The deployed functions name the background state machine: its client is made on first use."""


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    """What a fresh interpreter held after building the app, then after plain requests."""
    env = {**os.environ, "BACKGROUND_STATE_MACHINE_ARN": STATE_MACHINE}  # as deployed
    result = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
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


def _table_env(local: Any) -> dict[str, str]:
    """This environment, pointed at ``local`` (an embedded DynamoDB) with fake credentials."""
    return {
        **os.environ,
        "DYNAMODB_TABLE": local.table_name,
        "DYNAMODB_ENDPOINT_URL": local.endpoint_url,
        "AWS_REGION": local.region,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }


@pytest.fixture(scope="module")
def stored_probe() -> Iterator[dict[str, Any]]:
    """What a fresh interpreter held after building the DynamoDB store (from the environment a
    Lambda function has) and after stored creates and a retrieve against moto."""
    from responses_gateway.store.local import start_local_dynamodb

    local = start_local_dynamodb(table_name="coldstart")
    env = {**_table_env(local), "AWS_SESSION_TOKEN": "token"}
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


CREATE_ONLY = {
    "pydantic",  # the request and item models' library: nothing else validates with it
    "responses_gateway.protocol.request",
    "responses_gateway.protocol.items",
    "responses_gateway.loop.driver",
    "responses_gateway.adapters.select",
    "responses_gateway.adapters.chat_completions",
    "responses_gateway.adapters.responses_api",
    "responses_gateway.adapters.harmony",
    "responses_gateway.api.create",
    "responses_gateway.api.streaming",
    "responses_gateway.sockets.session",
}
"""What only a create needs: the buffered function (no create among its routes) never imports it
at init nor on its reads."""

CREATE_PATH_AT_INIT = {
    "responses_gateway.api.create",
    "responses_gateway.adapters.select",
    "responses_gateway.protocol.request",
    "responses_gateway.loop.driver",
    "responses_gateway.sinks.sse",
    "anyio._backends._asyncio",  # httpcore's locks, Starlette's streaming answer
    "anyio._core._sockets",  # httpcore's connections
}
"""What a function serving creates imports at init, so its first create does not."""

FIRST_CREATE_MAY_IMPORT = "responses_gateway.store."
"""All a first create of such a function imports that the gateway owns: the DynamoDB store, built
on first use (on the prefetch thread the first request starts)."""

_LAMBDA_PROBE = textwrap.dedent(
    """
    import asyncio, json, sys
    from responses_gateway.observability import NullTelemetry, lambda_app

    kind = sys.argv[1]
    app = lambda_app(kind, telemetry=NullTelemetry())
    report = {"at_init": sorted(sys.modules)}
    import httpx

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://fn") as client:
            async def send(method, path, expected, body=None):
                answer = await client.request(method, path, json=body)
                assert answer.status_code == expected, answer.text
                return answer.json()

            if kind == "buffered":
                await send("GET", "/v1/responses/resp_missing", 404)
                await send("DELETE", "/v1/responses/resp_missing", 404)
                await send("GET", "/v1/responses/resp_missing/input_items", 404)
                await send("GET", "/v1/conversations/conv_missing", 404)
                await send("GET", "/v1/conversations/conv_missing/items", 404)
                report["after_reads"] = sorted(sys.modules)
                conversation = await send("POST", "/v1/conversations", 200, {})
                await send("GET", f"/v1/conversations/{conversation['id']}/items", 200)
                items = [{"role": "user", "content": "Hi"}]
                await send("POST", "/v1/conversations", 200, {"items": items})
                report["after_items"] = sorted(sys.modules)
            else:
                for stream in (False, True):
                    body = {"model": "m", "input": "Hi", "store": False, "stream": stream}
                    answer = await client.post("/v1/responses", json=body)
                    assert answer.status_code == 200, answer.text
                report["after_creates"] = sorted(sys.modules)

    asyncio.run(main())
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def lambda_probe() -> Iterator[dict[str, dict[str, Any]]]:
    """What fresh interpreters held after building the buffered and the streaming functions'
    app (``lambda_app``, DynamoDB on moto, a scripted chat upstream: both in this process, so
    the probes' modules are the functions' own), then after their requests."""
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn
    from responses_gateway.testing.server import run_in_thread

    local = start_local_dynamodb(table_name="coldstart-lambda")
    upstream = ScriptedUpstream(demo=False)
    reports: dict[str, dict[str, Any]] = {}
    try:
        with run_in_thread(create_fake_upstream_app(upstream)) as model:
            env = {
                **_table_env(local),
                "UPSTREAM_BASE_URL": f"{model.url}/v1",
                "UPSTREAM_API": "chat",
                "BACKGROUND_STATE_MACHINE_ARN": STATE_MACHINE,
            }
            for kind in ("buffered", "streaming"):
                if kind == "streaming":
                    upstream.push(Turn(text="Hello"), Turn(text="Hello"))
                result = subprocess.run(
                    [sys.executable, "-c", _LAMBDA_PROBE, kind],
                    capture_output=True,
                    text=True,
                    check=False,
                    timeout=120,
                    env=env,
                )
                assert result.returncode == 0, result.stderr[-3000:]
                reports[kind] = json.loads(result.stdout.splitlines()[-1])
    finally:
        local.stop()
    yield reports


def test_the_buffered_function_imports_no_create_path(
    lambda_probe: dict[str, dict[str, Any]],
) -> None:
    report = lambda_probe["buffered"]

    assert not CREATE_ONLY & set(report["at_init"]), sorted(CREATE_ONLY & set(report["at_init"]))
    assert "pydantic_core" not in report["at_init"]  # JSON bodies are parsed with it: on the first
    assert not CREATE_ONLY & set(report["after_reads"])
    assert not NEVER_AT_INIT & set(report["at_init"])
    # a body is validated by its door's model (items as a create's input): the request models
    # load on the first write
    assert "responses_gateway.protocol.request" in report["after_items"]


def test_a_function_serving_creates_imports_the_create_path_at_init(
    lambda_probe: dict[str, dict[str, Any]],
) -> None:
    report = lambda_probe["streaming"]
    at_init = set(report["at_init"])
    first_creates = set(report["after_creates"]) - at_init
    owned = ("responses_gateway", "anyio", "starlette", "httpx", "httpcore", "h11", "pydantic")

    assert at_init >= CREATE_PATH_AT_INIT, sorted(CREATE_PATH_AT_INIT - at_init)
    assert not NEVER_AT_INIT & at_init
    assert {
        module
        for module in first_creates
        if module.split(".")[0] in owned and not module.startswith(FIRST_CREATE_MAY_IMPORT)
    } == set()
    assert "responses_gateway.store.dynamo" in first_creates  # the probe did reach the store


def test_building_the_app_imports_no_heavy_module(probe: dict[str, Any]) -> None:
    loaded = set(probe["at_init"])

    assert not NEVER_AT_INIT & loaded, sorted(NEVER_AT_INIT & loaded)


def test_plain_requests_import_no_heavy_module(probe: dict[str, Any]) -> None:
    loaded = set(probe["after_requests"])

    assert not ON_PLAIN_REQUESTS & loaded, sorted(ON_PLAIN_REQUESTS & loaded)
    assert "responses_gateway.api.responses" in loaded  # the probe did reach the routes


def test_fastapi_loads_for_the_console_without_building_openapi(
    probe: dict[str, Any],
) -> None:
    loaded = set(probe["after_fastapi"])

    assert "fastapi.routing" in loaded  # the console's routes are FastAPI's
    assert probe["openapi_built"] is False  # declared by FastAPI, never built
    assert not {"mcp", "httpx._main", "rich"} & loaded  # (the console's files route: pydantic.v1)


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


def test_overlapping_deferred_blocks_restore_the_default_when_the_last_one_ends() -> None:
    first, second = deferred_model_builds(), deferred_model_builds()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # another thread's block may end first

    class StillDeferred(BaseModel):
        value: int

    second.__exit__(None, None, None)

    class Eager(BaseModel):
        value: int

    assert StillDeferred.__pydantic_complete__ is False
    assert Eager.__pydantic_complete__ is True


_MCP_SERVER = textwrap.dedent(
    """
    import sys
    from responses_gateway.testing.mcp_servers import start_mcp_server

    server = start_mcp_server("calc")
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()
    """
)

_MCP_PROBE = textwrap.dedent(
    """
    import json, sys
    import httpx
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream, Turn
    from responses_gateway.testing.server import run_in_thread

    upstream = ScriptedUpstream(demo=False)
    tool = {"type": "mcp", "server_label": "calc", "server_url": sys.argv[1],
            "require_approval": "never"}
    with run_in_thread(create_fake_upstream_app(upstream)) as model:
        config = parse_config({"providers": [{"base_url": model.url + "/v1", "api": "chat"}]})
        app = create_app(config, SqliteStore())
        with run_in_thread(app) as gateway, httpx.Client(base_url=gateway.url) as client:
            upstream.push(Turn(text="Hello"))
            body = {"model": "m", "input": "Hi", "tools": [tool], "store": False}
            answer = client.post("/v1/responses", json=body, timeout=60)
            assert answer.status_code == 200, answer.text
            listed = [item["type"] for item in answer.json()["output"]]
    heavy = ("mcp", "mcp_types", "httpx2", "httpcore2", "sse_starlette", "opentelemetry")
    print(json.dumps({
        "listed": listed,
        "client": "responses_gateway.mcp.remote" in sys.modules,
        "heavy": sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy),
        "fastapi": "fastapi" in sys.modules,
    }))
    """
)


def _probe_beside(server_code: str, probe_code: str, env: dict[str, str]) -> dict[str, Any]:
    """The report of ``probe_code`` run in a fresh interpreter beside a server that
    ``server_code`` runs in another (it prints its URL, the probe's argument, and stops when its
    stdin closes): what the server imports stays out of the probe's ``sys.modules``."""
    with subprocess.Popen(
        [sys.executable, "-c", server_code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as server:
        assert server.stdout is not None and server.stdin is not None
        url = server.stdout.readline().strip()
        result = subprocess.run(
            [sys.executable, "-c", probe_code, url],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env=env,
        )
        server.stdin.close()
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


def test_a_create_with_mcp_tools_imports_neither_the_mcp_sdk_nor_fastapi() -> None:
    env = {**os.environ, "MCP_ALLOW_HTTP": "1", "MCP_ALLOW_LOOPBACK": "1"}
    report = _probe_beside(_MCP_SERVER, _MCP_PROBE, env)

    assert report["listed"] == ["mcp_list_tools", "message"]
    assert report["client"] is True  # the listing went through the gateway's own MCP client
    assert report["heavy"] == []  # no module of the SDK, its httpx fork or its dependencies
    assert report["fastapi"] is False  # MCP tools or not


_BEDROCK_UPSTREAM = textwrap.dedent(
    """
    import sys
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream
    from responses_gateway.testing.server import run_in_thread

    with run_in_thread(create_fake_upstream_app(ScriptedUpstream())) as server:
        print(server.url, flush=True)
        sys.stdin.read()
    """
)

_BEDROCK_PROBE = textwrap.dedent(
    """
    import json, sys
    import httpx
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore
    from responses_gateway.testing.server import run_in_thread

    provider = {"base_url": sys.argv[1], "api": "bedrock", "aws_region": "us-east-1"}
    app = create_app(parse_config({"providers": [provider]}), SqliteStore())
    texts = []
    with run_in_thread(app) as gateway, httpx.Client(base_url=gateway.url) as client:
        for stream in (False, True):
            body = {"model": "m", "input": "Hi", "stream": stream}
            answer = client.post("/v1/responses", json=body)
            assert answer.status_code == 200, answer.text
            texts.append(answer.text)
    print(json.dumps({"modules": sorted(sys.modules), "answered": "event: response.completed"
                      in texts[1] and json.loads(texts[0])["status"] == "completed"}))
    """
)


def test_bedrock_creates_sign_with_the_environments_credentials_and_import_no_botocore() -> None:
    """The function's role reaches it as environment variables: signing them needs no botocore
    (the scripted Bedrock upstream, in its own process, checks each signature with botocore's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
    report = _probe_beside(_BEDROCK_UPSTREAM, _BEDROCK_PROBE, env)

    assert report["answered"] is True
    assert "responses_gateway.adapters.bedrock" in report["modules"]
    assert not {m for m in report["modules"] if m.split(".")[0] in ("boto3", "botocore")}
