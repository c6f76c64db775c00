"""``sam local`` without Docker: the built functions behind a local endpoint shaped like the API.

``python -m responses_gateway.testing.lambda_local [--port 3000] [--api-key KEY]`` starts every
function of ``template.yaml`` under AWS's runtime interface emulator exactly as the tests do
(:mod:`.lambda_emulator`: Lambda's paths, the layers built for this machine, the runtime's
Python client, the template's environment, moto's server for DynamoDB, Secrets Manager and Step
Functions), then serves ``http://127.0.0.1:<port>/prod/v1`` the way the REST API does:

- each request first goes to the authorizer function (a REQUEST authorizer event); its
  ``usageIdentifierKey`` must be one of the ``--api-key`` values (API Gateway's usage-plan check),
  whose id becomes ``requestContext.identity.apiKeyId``; API Gateway's own 401/403/404 answers
  are the template's gateway responses;
- the route is found in the template's ``Api`` events: the streaming function's routes get its
  answer split at the metadata prelude (status and headers, then the payload), the others the
  buffered function's proxy result;
- background responses: the executions the functions start on moto's state machine are driven
  here, as Step Functions would (the worker invoked with the execution's input until it answers
  ``done``);
- the WebSocket API at ``ws://127.0.0.1:<port>/prod``: the authorizer and the key on the
  handshake, then ``$connect``, ``$default`` per message and ``$disconnect`` events to the
  socket function; its ``PostToConnection`` calls and its asynchronous self-invocations (the
  runs, on a second emulated socket function) come back to this process.

The upstream is the bundled demo model unless ``--upstream-base-url`` (and the key in
``UPSTREAM_API_KEY``) names a real one. What it does not reproduce: the emulator returns a
streamed answer in one piece (events arrive together at the end), one invocation per function
at a time (no concurrency), no usage-plan throttling or quotas, no CloudWatch.
Local tooling only: never shipped in a layer.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import hashlib
import json
import os
import re
import secrets
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from responses_gateway.testing.lambda_emulator import (
    ROOT,
    EmulatedFunction,
    LocalServices,
    emulate,
    prepare_kit,
)

__all__ = ["Route", "main", "routes_of", "rest_event"]

_SAMPLE = ROOT / "tests" / "deploy" / "events" / "rest_api_request.json"
_STAGE = "prod"


@dataclass(frozen=True)
class Route:
    method: str
    resource: str
    """The API resource (``/v1/responses/{response_id}``)."""
    function: str
    streaming: bool
    pattern: re.Pattern[str]

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if method != self.method:
            return None
        found = self.pattern.fullmatch(path)
        return None if found is None else found.groupdict()


def routes_of(template: Mapping[str, Any]) -> list[Route]:
    """The REST API's routes, from the functions' ``Api`` events (literal paths first)."""
    found = []
    for name, resource in template["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        for event in (resource["Properties"].get("Events") or {}).values():
            if event.get("Type") != "Api":
                continue
            props = event["Properties"]
            path = str(props["Path"])
            regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path))
            found.append(
                Route(
                    method=str(props["Method"]).upper(),
                    resource=path,
                    function=name,
                    streaming=props.get("ResponseTransferMode") == "RESPONSE_STREAM",
                    pattern=re.compile(regex),
                )
            )
    return sorted(found, key=lambda r: (r.resource.count("{"), r.resource))


def rest_event(
    method: str,
    route: Route,
    path: str,
    parameters: Mapping[str, str],
    query: bytes,
    headers: Mapping[str, str],
    body: bytes,
    key: tuple[str, str] | None,
) -> dict[str, Any]:
    """The API Gateway REST proxy event for one request."""
    event: dict[str, Any] = copy.deepcopy(json.loads(_SAMPLE.read_text()))
    multi_query = parse_qs(query.decode("latin-1"), keep_blank_values=True)
    text: str | None
    encoded = False
    try:
        text = body.decode("utf-8") if body else None
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    event.update(
        resource=route.resource,
        path=path,
        httpMethod=method,
        headers=dict(headers),
        multiValueHeaders={name: [value] for name, value in headers.items()},
        queryStringParameters={k: v[-1] for k, v in multi_query.items()} or None,
        multiValueQueryStringParameters=multi_query or None,
        pathParameters=dict(parameters) or None,
        body=text,
        isBase64Encoded=encoded,
    )
    context = event["requestContext"]
    context.update(
        resourcePath=route.resource,
        httpMethod=method,
        path=f"/{_STAGE}{path}",
        requestId=str(uuid.uuid4()),
        requestTimeEpoch=int(time.time() * 1000),
    )
    context["identity"]["apiKey"], context["identity"]["apiKeyId"] = key or (None, None)
    return event


def _gateway_error(status: int, message: str, kind: str, code: str | None) -> tuple[int, bytes]:
    error = {"message": message, "type": kind, "param": None, "code": code}
    return status, json.dumps({"error": error}).encode()


class _BackgroundDriver(threading.Thread):
    """Step Functions' part: runs each RUNNING execution of the background state machine by
    invoking the worker with its input until it answers ``done``."""

    def __init__(self, services: LocalServices, worker: EmulatedFunction) -> None:
        super().__init__(daemon=True)
        self.services = services
        self.worker = worker
        self.stopped = threading.Event()
        self._done: set[str] = set()

    def run(self) -> None:
        client = self.services.client("stepfunctions")
        machine = client.list_state_machines()["stateMachines"][0]["stateMachineArn"]
        while not self.stopped.wait(0.5):
            listed = client.list_executions(stateMachineArn=machine, statusFilter="RUNNING")
            for execution in listed["executions"]:
                arn = execution["executionArn"]
                if arn in self._done:
                    continue
                self._done.add(arn)
                step = json.loads(client.describe_execution(executionArn=arn)["input"])
                while not self.stopped.is_set():
                    step = self.worker.invoke(step, timeout=960)
                    if not isinstance(step, dict) or step.get("status") != "continue":
                        break


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m responses_gateway.testing.lambda_local",
        description="The built functions under AWS's runtime interface emulator, behind a local "
        "endpoint shaped like the deployed REST API (no Docker).",
    )
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument(
        "--api-key", action="append", default=[], help="an API key clients may use (repeatable)"
    )
    parser.add_argument("--upstream-base-url", default="", help="default: the bundled demo model")
    parser.add_argument("--upstream-api", default="chat", choices=["chat", "responses"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - one start-up sequence
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route as StarletteRoute, WebSocketRoute
    from starlette.websockets import WebSocket

    args = _parse_args(argv)
    keys = {key: f"key-{hashlib.sha256(key.encode()).hexdigest()[:10]}" for key in args.api_key}
    if not keys:
        generated = f"local-{secrets.token_urlsafe(12)}"
        keys[generated] = "key-local"
    demo = None
    upstream_url = args.upstream_base_url.rstrip("/").removesuffix("/v1")
    if not upstream_url:
        from responses_gateway.testing import (
            ScriptedUpstream,
            create_fake_upstream_app,
            run_in_thread,
        )

        demo = run_in_thread(create_fake_upstream_app(ScriptedUpstream()))
        upstream_url = demo.url
    print("building the layers and fetching the emulator (first run: about a minute) ...")
    kit = prepare_kit()
    upstream_key = os.environ.get("UPSTREAM_API_KEY", "") or "sk-local"
    services = LocalServices.start(upstream_url, upstream_key=upstream_key)
    sys.path.insert(0, str(ROOT / "infra"))
    from check_template import load_template  # type: ignore[import-not-found]

    template = load_template()
    routes = routes_of(template)
    root = Path(tempfile.mkdtemp(prefix="lambda-local-"))
    extra = {"UPSTREAM_API": args.upstream_api}
    functions = {
        name: emulate(name, kit, root, services, extra_env=extra).start()
        for name in (
            "StreamingFunction",
            "BufferedFunction",
            "WorkerFunction",
            "AuthorizerFunction",
        )
    }
    # The WebSocket API: one emulated socket function for the routes, one for the asynchronous
    # runs its $default hands creates to (an emulator takes one invocation at a time). Both post
    # events to, and invoke Lambda through, this process.
    here = f"http://127.0.0.1:{args.port}"
    socket_env = {
        **extra,
        "SOCKET_MANAGEMENT_ENDPOINT": f"{here}/_management",
        "AWS_ENDPOINT_URL_LAMBDA": f"{here}/_lambda",
    }
    for name, part in (("SocketFunction", "routes"), ("SocketRuns", "runs")):
        functions[name] = emulate(
            "SocketFunction", kit, root / part, services, extra_env=socket_env
        ).start()
    sockets: dict[str, Any] = {}
    driver = _BackgroundDriver(services, functions["WorkerFunction"])
    driver.start()

    def authorize(headers: Mapping[str, str], method: str, path: str) -> tuple[str, str] | None:
        answer = functions["AuthorizerFunction"].invoke(
            {
                "type": "REQUEST",
                "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:local/{_STAGE}/"
                f"{method}{path}",
                "headers": dict(headers),
            }
        )
        key = answer.get("usageIdentifierKey") if isinstance(answer, dict) else None
        if not isinstance(key, str) or key not in keys:
            return None
        return key, keys[key]

    async def serve(request: Request) -> Response:
        path = request.url.path.removeprefix(f"/{_STAGE}")
        method = request.method
        for route in routes:
            parameters = route.match(method, path)
            if parameters is not None:
                break
        else:
            status, body = _gateway_error(
                404, f"Invalid URL ({method} {path}).", "invalid_request_error", None
            )
            return Response(body, status, media_type="application/json")
        headers = {name.title(): value for name, value in request.headers.items()}
        if not headers.get("Authorization", "").startswith("Bearer "):
            status, body = _gateway_error(
                401, "You didn't provide an API key.", "invalid_request_error", "invalid_api_key"
            )
            return Response(body, status, media_type="application/json")
        key = await asyncio.to_thread(authorize, headers, method, path)
        if key is None:
            status, body = _gateway_error(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
            return Response(body, status, media_type="application/json")
        event = rest_event(
            method,
            route,
            path,
            parameters,
            request.url.query.encode(),
            headers,
            await request.body(),
            key,
        )
        function = functions[route.function]
        if route.streaming:
            raw = (await asyncio.to_thread(function.invoke_raw, event, timeout=960)).content
            head, delimiter, payload = raw.partition(b"\x00" * 8)
            if not delimiter:
                status, body = _gateway_error(502, "Internal server error", "server_error", None)
                return Response(body, status, media_type="application/json")
            metadata = json.loads(head)
            return Response(payload, metadata.get("statusCode", 200), metadata.get("headers"))
        result = await asyncio.to_thread(function.invoke, event, timeout=60)
        if not isinstance(result, dict) or "statusCode" not in result:
            status, body = _gateway_error(502, "Internal server error", "server_error", None)
            return Response(body, status, media_type="application/json")
        raw_body = result.get("body") or ""
        data = base64.b64decode(raw_body) if result.get("isBase64Encoded") else raw_body.encode()
        return Response(data, int(result["statusCode"]), result.get("headers"))

    def socket_event(route_key: str, connection: str, key: tuple[str, str]) -> dict[str, Any]:
        kinds = {"$connect": "CONNECT", "$disconnect": "DISCONNECT"}
        return {
            "requestContext": {
                "routeKey": route_key,
                "eventType": kinds.get(route_key, "MESSAGE"),
                "connectionId": connection,
                "domainName": f"127.0.0.1:{args.port}",
                "stage": _STAGE,
                "identity": {"apiKeyId": key[1], "apiKey": key[0], "sourceIp": "127.0.0.1"},
                "authorizer": {"principalId": "api-key"},
                "requestId": str(uuid.uuid4()),
            },
            "isBase64Encoded": False,
        }

    async def socket(websocket: WebSocket) -> None:
        headers = {name.title(): value for name, value in websocket.headers.items()}
        key = await asyncio.to_thread(authorize, headers, "GET", "/")
        if key is None:
            await websocket.close(code=1008)
            return
        connection = base64.b64encode(secrets.token_bytes(9)).decode()
        routes = functions["SocketFunction"]
        connect = {**socket_event("$connect", connection, key), "headers": headers}
        answer = await asyncio.to_thread(routes.invoke, connect)
        if not isinstance(answer, dict) or answer.get("statusCode") != 200:
            await websocket.close(code=1008)
            return
        await websocket.accept()
        sockets[connection] = websocket
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                text = message.get("text")
                if text is None:
                    text = (message.get("bytes") or b"").decode("utf-8", "replace")
                event = {**socket_event("$default", connection, key), "body": text}
                await asyncio.to_thread(routes.invoke, event)
        finally:
            sockets.pop(connection, None)
            await asyncio.to_thread(routes.invoke, socket_event("$disconnect", connection, key))

    async def management(request: Request) -> Response:
        """API Gateway's management API: PostToConnection, DeleteConnection, GetConnection."""
        websocket = sockets.get(request.path_params["connection"])
        if websocket is None:
            return Response(b'{"message": "Gone"}', 410, media_type="application/json")
        if request.method == "POST":
            data = await request.body()
            try:
                await websocket.send_text(data.decode("utf-8"))
            except UnicodeDecodeError:
                await websocket.send_bytes(data)
        elif request.method == "DELETE":
            await websocket.close()
        return Response(b"{}", 200, media_type="application/json")

    async def invoke(request: Request) -> Response:
        """Lambda's Invoke for the socket function's asynchronous runs (InvocationType Event)."""
        payload = json.loads(await request.body() or b"{}")
        runs = functions["SocketRuns"]
        threading.Thread(target=runs.invoke, args=(payload,), kwargs={"timeout": 960}).start()
        return Response(b"", 202)

    app = Starlette(
        routes=[
            StarletteRoute(
                "/_management/@connections/{connection}",
                management,
                methods=["GET", "POST", "DELETE"],
            ),
            StarletteRoute(
                "/_lambda/2015-03-31/functions/{name}/invocations", invoke, methods=["POST"]
            ),
            WebSocketRoute(f"/{_STAGE}", socket),
            WebSocketRoute(f"/{_STAGE}/{{rest:path}}", socket),
            StarletteRoute("/{path:path}", serve, methods=["GET", "POST", "PUT", "DELETE"]),
        ]
    )

    print(f"base URL: http://127.0.0.1:{args.port}/{_STAGE}/v1")
    print(f"WebSocket URL: ws://127.0.0.1:{args.port}/{_STAGE}")
    for key in keys:
        print(f"API key: {key}")
    print(f"function logs: {root}/<Function>/<Function>.log")
    # uvicorn re-raises the SIGTERM it caught once it has stopped: exit through the finally
    # below then, so the emulators stop with this process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    finally:
        driver.stopped.set()
        for function in functions.values():
            function.stop()
        services.stop()
        if demo is not None:
            demo.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
