"""WebSocket mode on an API Gateway WebSocket API: the socket function's routes and runs.

Owns the transport of a :class:`~responses_gateway.sockets.session.Session` when API Gateway
holds the connection and each client message is a Lambda invocation:

- ``$connect``: the tenant, resolved exactly as for HTTP (the API key id API Gateway put in the
  request context, or ``GATEWAY_API_KEYS``), the key's id and the handshake's client-id headers
  (Codex's ``session_id``, ...: :func:`~responses_gateway.usage.clientids.client_id_headers`,
  no other header) are kept in the connection's item, which lives (TTL) as long as API Gateway
  lets a connection live: later messages carry no headers, and the request log reads them there.
- ``$default``: answers at once. Bad messages (and a create on a busy stream) get their
  ``error`` event here, after their request-log record (the session's refusal); a create marks
  its stream busy (a conditional write: one response at a time per stream, across invocations)
  and is handed to an asynchronous invocation of this same function, which runs the loop.
- a run (``{"socket_run": ...}``): the shared loop through the same session code as a local
  socket, with the connection's memory in DynamoDB (:class:`DynamoMemory`) and each event
  posted with ``PostToConnection`` (one event per message, in order). A client that left
  (``GoneException``) cancels the response, as an HTTP disconnect does.
- ``$disconnect``: the connection's items are deleted.
- long loops: a stored run still going ``HAND_OVER_MARGIN_SECONDS`` before its invocation ends
  hands over to the background worker (Step Functions) between two actions, exactly as a
  foreground HTTP create does; a follower invocation (``{"socket_follow": ...}``) posts the
  rest of its log to the connection, and hands itself over to a fresh invocation near its own
  end, until the terminal event.

Connection items share the gateway's table under ``PK = "WS#<connection id>"``. It never
decides what a create does (that is the session and the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from responses_gateway.errors import GatewayError, InvalidRequestError
from responses_gateway.sockets.memory import DEFAULT_STREAM, Latest
from responses_gateway.sockets.rules import invalid_create
from responses_gateway.tenancy import TenancyPolicy, current_policy
from responses_gateway.usage.clientids import client_id_headers

if TYPE_CHECKING:
    from responses_gateway.service import Gateway
    from responses_gateway.sockets.session import Session

__all__ = [
    "CONNECTION_SECONDS",
    "DynamoMemory",
    "Poster",
    "SocketRuntime",
    "handle",
    "run_create",
]

logger = logging.getLogger(__name__)

CONNECTION_SECONDS = 2 * 3600
"""API Gateway's maximum connection duration: the TTL of a connection's items."""
BUSY_SECONDS = 16 * 60
"""How long a stream stays busy if its run never ends (the function's 15-minute timeout)."""
_MAX_ITEM_BYTES = 350_000
"""Larger compressed histories are not kept (DynamoDB items are at most 400 KB)."""
HAND_OVER_MARGIN = 180.0
"""Seconds before the invocation's end a run hands over to the worker (room for one action)."""
FOLLOW_MARGIN = 30.0
"""Seconds before the invocation's end a follower hands over to a fresh invocation."""
MANAGEMENT_ENDPOINT_ENV = "SOCKET_MANAGEMENT_ENDPOINT"
"""Overrides the management API's endpoint (tests: a moto server)."""


def _pk(connection_id: str) -> dict[str, str]:
    return {"S": f"WS#{connection_id}"}


def _key(connection_id: str, sk: str) -> dict[str, dict[str, str]]:
    return {"PK": _pk(connection_id), "SK": {"S": sk}}


class DynamoMemory:
    """A connection's memory (:class:`~responses_gateway.sockets.memory.ConnectionMemory`) in
    the gateway's table: one item per stream's latest response, compressed, with the
    connection's TTL. Remembering also frees the stream (one transaction)."""

    def __init__(self, client: Any, table: str, connection_id: str, expires_at: int) -> None:
        self._client = client
        self._table = table
        self._connection = connection_id
        self._expires_at = expires_at

    async def find(self, response_id: str) -> Latest | None:
        def query() -> list[dict[str, Any]]:
            answer = self._client.query(
                TableName=self._table,
                KeyConditionExpression="PK = :pk AND begins_with(SK, :latest)",
                ExpressionAttributeValues={":pk": _pk(self._connection), ":latest": {"S": "L#"}},
                ConsistentRead=True,
            )
            items: list[dict[str, Any]] = answer.get("Items", [])
            return items

        for item in await asyncio.to_thread(query):
            if item.get("rid", {}).get("S") == response_id:
                return Latest.from_json(json.loads(zlib.decompress(bytes(item["body"]["B"]))))
        return None

    async def remember(self, stream_id: str, latest: Latest) -> None:
        body = zlib.compress(json.dumps(latest.to_json(), separators=(",", ":")).encode())
        key = _key(self._connection, f"L#{stream_id}")
        writes: list[dict[str, Any]] = [
            {"Delete": {"TableName": self._table, "Key": _key(self._connection, f"B#{stream_id}")}}
        ]
        if len(body) <= _MAX_ITEM_BYTES:
            item = {
                **key,
                "rid": {"S": latest.response_id},
                "body": {"B": body},
                "ttl": {"N": str(self._expires_at)},
            }
            writes.append({"Put": {"TableName": self._table, "Item": item}})
        else:  # stored responses still continue from the table; unstored ones cannot
            logger.warning("socket memory: response %s too large to keep", latest.response_id)
            writes.append({"Delete": {"TableName": self._table, "Key": key}})
        await asyncio.to_thread(self._client.transact_write_items, TransactItems=writes)

    def claim(self, stream_id: str, now: float) -> bool:
        """Mark ``stream_id`` busy unless a run holds it; False when one does."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    **_key(self._connection, f"B#{stream_id}"),
                    "ttl": {"N": str(int(now) + BUSY_SECONDS)},
                },
                ConditionExpression="attribute_not_exists(PK) OR #ttl < :now",
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues={":now": {"N": str(int(now))}},
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    async def finish(self, stream_id: str) -> None:
        """A handed-over run ended: the stream is idle, and its latest response is the stored
        one (continued from the table), not an older one kept here."""
        writes = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": _key(self._connection, f"{kind}#{stream_id}"),
                }
            }
            for kind in ("B", "L")
        ]
        await asyncio.to_thread(self._client.transact_write_items, TransactItems=writes)

    async def release(self, stream_id: str) -> None:
        await asyncio.to_thread(
            self._client.delete_item,
            TableName=self._table,
            Key=_key(self._connection, f"B#{stream_id}"),
        )

    async def forget(self, response_id: str) -> None:
        def delete() -> None:
            answer = self._client.query(
                TableName=self._table,
                KeyConditionExpression="PK = :pk AND begins_with(SK, :latest)",
                ExpressionAttributeValues={":pk": _pk(self._connection), ":latest": {"S": "L#"}},
                ConsistentRead=True,
                ProjectionExpression="PK, SK, rid",
            )
            for item in answer.get("Items", []):
                if item.get("rid", {}).get("S") == response_id:
                    key = {"PK": item["PK"], "SK": item["SK"]}
                    self._client.delete_item(TableName=self._table, Key=key)

        await asyncio.to_thread(delete)


def _too_large(message: bytes) -> bytes:
    from responses_gateway.sinks.websocket import encode_message, error_event

    try:
        event = json.loads(message)
    except ValueError:
        event = {}
    response_id = (event.get("response") or {}).get("id") if isinstance(event, dict) else None
    hint = f" Retrieve it with GET /v1/responses/{response_id}." if response_id else ""
    error = GatewayError(
        f"A {event.get('type', 'server')} event of {len(message)} bytes could not be delivered: "
        f"API Gateway carries WebSocket messages up to 128 KB.{hint}",
        code="event_too_large",
    )
    stream = event.get("stream_id") if isinstance(event, dict) else None
    return encode_message(error_event(error, stream if isinstance(stream, str) else None))


class Poster:
    """Posts server messages to one connection in order, one ``PostToConnection`` each, from a
    worker thread (``send`` never blocks the loop). ``gone`` is set when the client left."""

    def __init__(self, client: Any, connection_id: str) -> None:
        self._client = client
        self._connection = connection_id
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.gone = asyncio.Event()
        self.posted = 0
        self._task: asyncio.Task[None] | None = None

    def send(self, message: bytes) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._drain())
        self._queue.put_nowait(message)

    async def _drain(self) -> None:
        while (message := await self._queue.get()) is not None:
            if self.gone.is_set():
                continue
            try:
                await self._post(message)
            except self._client.exceptions.GoneException:
                self.gone.set()
            except Exception:
                # API Gateway refuses messages over 128 KB (a terminal event carrying a long
                # output): the client hears why instead of waiting for an event that never comes.
                logger.exception("socket: could not post an event of %d bytes", len(message))
                with contextlib.suppress(Exception):
                    await self._post(_too_large(message))

    async def _post(self, message: bytes) -> None:
        await asyncio.to_thread(
            self._client.post_to_connection, ConnectionId=self._connection, Data=message
        )
        self.posted += 1

    async def flush(self) -> None:
        """Wait until every message sent so far was posted (or the client left)."""
        if self._task is not None:
            self._queue.put_nowait(None)
            await self._task
            self._task = None


@dataclass
class SocketRuntime:
    """The clients and settings of the socket function (built once per container)."""

    dynamodb: Any
    table: str
    management: Callable[[str], Any]
    """A management API client for an endpoint (``https://<domain>/<stage>``)."""
    invoke: Callable[[dict[str, Any]], None]
    """Hands a run to an asynchronous invocation of this function."""
    gateway: Callable[[], Gateway]
    max_seconds: float = 3600.0
    hand_over_margin: float = HAND_OVER_MARGIN
    tenancy: TenancyPolicy | None = None
    """How $connect names the tenant (the environment's policy by default)."""
    clock: Callable[[], float] = time.time
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)

    @classmethod
    def from_env(cls) -> SocketRuntime:
        import boto3  # type: ignore[import-untyped]  # lazily: cold start

        from responses_gateway.sockets.session import SessionLimits
        from responses_gateway.store.table import make_client

        dynamodb = make_client(
            endpoint_url=os.environ.get("DYNAMODB_ENDPOINT_URL") or None,
            region=os.environ.get("AWS_REGION") or "us-east-1",
        )
        function = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        lam: list[Any] = []

        def management(url: str) -> Any:
            return boto3.client(
                "apigatewaymanagementapi",
                endpoint_url=os.environ.get(MANAGEMENT_ENDPOINT_ENV) or url,
            )

        def invoke(payload: dict[str, Any]) -> None:
            if not lam:
                lam.append(boto3.client("lambda"))
            lam[0].invoke(
                FunctionName=function, InvocationType="Event", Payload=json.dumps(payload)
            )

        built: list[Gateway] = []
        made: list[SocketRuntime] = []

        def gateway() -> Gateway:
            if not built:
                from responses_gateway.observability import lambda_app

                app: Any = lambda_app("socket").app
                built.append(app.state.gateway)
                # The container's loop serves every invocation: shared MCP servers stay warm.
                built[0].keep_shared_mcp(made[0].loop)
            return built[0]

        made.append(
            cls(
                dynamodb=dynamodb,
                table=os.environ["DYNAMODB_TABLE"],
                management=management,
                invoke=invoke,
                gateway=gateway,
                max_seconds=SessionLimits.from_env().max_seconds,
            )
        )
        return made[0]


def _endpoint(context: dict[str, Any]) -> str:
    return f"https://{context['domainName']}/{context['stage']}"


def _post_error(
    runtime: SocketRuntime, context: dict[str, Any], error: GatewayError, stream: str | None
) -> None:
    from responses_gateway.sinks.websocket import encode_message, error_event  # loop's modules

    client = runtime.management(_endpoint(context))
    client.post_to_connection(
        ConnectionId=context["connectionId"], Data=encode_message(error_event(error, stream))
    )


def _connect(runtime: SocketRuntime, event: dict[str, Any]) -> dict[str, Any]:
    context = event["requestContext"]
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    try:
        policy = runtime.tenancy or current_policy()
        identity = policy.identify(event=event, headers=headers)
    except GatewayError:
        return {"statusCode": 401}
    now = runtime.clock()
    item: dict[str, Any] = {
        **_key(context["connectionId"], "C"),
        "tenant": {"S": identity.tenant},
        "at": {"N": str(int(now))},
        "ttl": {"N": str(int(now) + CONNECTION_SECONDS)},
    }
    if identity.api_key_id:
        item["key"] = {"S": identity.api_key_id}
    client = client_id_headers(headers)
    if client:
        item["client"] = {"M": {name: {"S": value} for name, value in client.items()}}
    runtime.dynamodb.put_item(TableName=runtime.table, Item=item)
    return {"statusCode": 200}


def _identity(connection: dict[str, Any]) -> dict[str, Any]:
    """What a connection's item says of its handshake: ``tenant``, ``api_key_id`` and
    ``client_headers`` (the client-id headers only)."""
    client = connection.get("client", {}).get("M", {})
    return {
        "tenant": connection["tenant"]["S"],
        "api_key_id": connection.get("key", {}).get("S", ""),
        "client_headers": {name: value["S"] for name, value in client.items()},
    }


def _disconnect(runtime: SocketRuntime, event: dict[str, Any]) -> dict[str, Any]:
    connection_id = event["requestContext"]["connectionId"]
    answer = runtime.dynamodb.query(
        TableName=runtime.table,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": _pk(connection_id)},
        ProjectionExpression="PK, SK",
    )
    for item in answer.get("Items", []):
        runtime.dynamodb.delete_item(TableName=runtime.table, Key=item)
    return {"statusCode": 200}


def _default(runtime: SocketRuntime, event: dict[str, Any]) -> dict[str, Any]:
    context = event["requestContext"]
    connection_id = context["connectionId"]
    connection = runtime.dynamodb.get_item(
        TableName=runtime.table, Key=_key(connection_id, "C"), ConsistentRead=True
    ).get("Item")
    if connection is None:
        return {"statusCode": 410}
    now = runtime.clock()
    if now - float(connection["at"]["N"]) >= runtime.max_seconds:
        from responses_gateway.sockets.session import SessionLimits, connection_limit_error

        error = connection_limit_error(SessionLimits(max_seconds=runtime.max_seconds))
        _post_error(runtime, context, error, None)
        runtime.management(_endpoint(context)).delete_connection(ConnectionId=connection_id)
        return {"statusCode": 200}
    body = event.get("body") or ""
    try:
        message = json.loads(body)
    except ValueError:
        message = None
    if (
        not isinstance(message, dict)
        or message.get("type") != "response.create"
        or invalid_create(message) is not None
    ):
        # the session owns the wording of every message-level error, and logs the refusal
        _answer_with_session(runtime, context, connection, lambda session: session.receive(body))
        return {"statusCode": 200}
    stream_id = message.get("stream_id")
    memory = DynamoMemory(
        runtime.dynamodb, runtime.table, connection_id, int(connection["ttl"]["N"])
    )
    if not memory.claim(stream_id or DEFAULT_STREAM, now):
        busy = InvalidRequestError(
            "A response is already in progress on this stream; wait for its terminal event "
            "before the next response.create, or use another stream_id.",
            param="stream_id",
            code="stream_busy",
        )
        _answer_with_session(
            runtime, context, connection, lambda session: session.refuse(busy, message)
        )
        return {"statusCode": 200}
    runtime.invoke(
        {
            "socket_run": {
                "connection_id": connection_id,
                "endpoint": _endpoint(context),
                **_identity(connection),
                "expires_at": int(connection["ttl"]["N"]),
                "message": body,
            }
        }
    )
    return {"statusCode": 200}


def _answer_with_session(
    runtime: SocketRuntime,
    context: dict[str, Any],
    connection: dict[str, Any],
    answer: Callable[[Session], None],
) -> None:
    """Answer a message that starts no run through a session of the connection (``answer``
    hands it the message): its request-log record, then its ``error`` event."""
    from responses_gateway.sockets.session import Session

    messages: list[bytes] = []
    identity = _identity(connection)
    session = Session(
        runtime.gateway(),
        identity["tenant"],
        messages.append,
        api_key_id=identity["api_key_id"],
        client_headers=identity["client_headers"],
    )

    async def main() -> None:
        answer(session)
        await session.settle()

    asyncio.set_event_loop(runtime.loop)
    runtime.loop.run_until_complete(main())
    client = runtime.management(_endpoint(context))
    for message in messages:
        client.post_to_connection(ConnectionId=context["connectionId"], Data=message)


async def run_create(
    gateway: Gateway,
    memory: DynamoMemory,
    poster: Poster,
    tenant: str,
    message: str,
    *,
    pause: Any = None,
    hand_over: Any = None,
    api_key_id: str = "",
    client_headers: dict[str, str] | None = None,
) -> None:
    """Run one ``response.create`` message on the connection: the session's own create path,
    events posted as they come; the client leaving cancels the response. ``pause`` and
    ``hand_over`` are the session's (a long loop continues in the background worker);
    ``api_key_id`` and ``client_headers`` are the handshake's, for the request log."""
    from responses_gateway.sockets.session import Session

    session = Session(
        gateway,
        tenant,
        poster.send,
        memory=memory,
        pause=pause,
        hand_over=hand_over,
        api_key_id=api_key_id,
        client_headers=client_headers,
    )
    session.receive(message)
    await session.settle()
    tasks = list(session.running.values())
    if tasks:
        gone = asyncio.ensure_future(poster.gone.wait())
        done, _ = await asyncio.wait({tasks[0], gone}, return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        if tasks[0] not in done:
            await session.close()
    await poster.flush()


def _remaining(context: Any) -> float | None:
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    return float(remaining()) / 1000 if callable(remaining) else None


def _run(runtime: SocketRuntime, payload: dict[str, Any], context: Any) -> dict[str, Any]:
    connection_id = payload["connection_id"]
    memory = DynamoMemory(runtime.dynamodb, runtime.table, connection_id, payload["expires_at"])
    poster = Poster(runtime.management(payload["endpoint"]), connection_id)
    gateway = runtime.gateway()
    left = _remaining(context)
    pause = None
    if left is not None:
        from responses_gateway.api.deps import Timing

        timing = Timing(hand_over_at=time.time() + left - runtime.hand_over_margin)
        pause = timing.pause

    async def hand_over(run: Any, stream_id: str | None, sent: list[bytes]) -> None:
        from responses_gateway.background.runs import hand_over as to_worker
        from responses_gateway.sinks.sse import encode_frame

        frames = []
        for message in sent:
            event = json.loads(message)
            event.pop("stream_id", None)
            frames.append(encode_frame(event["type"], event))
        await to_worker(gateway, run, frames)
        runtime.invoke(
            {
                "socket_follow": {
                    **payload,
                    "response_id": run.state.response_id,
                    "stream_id": stream_id,
                    "after": len(frames) - 1,
                }
            }
        )

    asyncio.set_event_loop(runtime.loop)
    runtime.loop.run_until_complete(
        run_create(
            gateway,
            memory,
            poster,
            payload["tenant"],
            payload["message"],
            pause=pause,
            hand_over=hand_over,
            api_key_id=payload.get("api_key_id", ""),
            client_headers=payload.get("client_headers"),
        )
    )
    return {"statusCode": 200}


def _log_events(frame: bytes) -> list[dict[str, Any]]:
    """The events of logged SSE frames (comments, the log's heartbeats, carry none)."""
    events = []
    for block in frame.decode().split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


def _follow(runtime: SocketRuntime, payload: dict[str, Any], context: Any) -> dict[str, Any]:
    """Post a handed-over run's log to the connection (see the module docstring)."""
    from responses_gateway.background.log import follow
    from responses_gateway.background.runs import cancel_handed_over
    from responses_gateway.sinks.websocket import encode_message

    connection_id = payload["connection_id"]
    tenant, response_id = payload["tenant"], payload["response_id"]
    stream_id = payload.get("stream_id")
    memory = DynamoMemory(runtime.dynamodb, runtime.table, connection_id, payload["expires_at"])
    poster = Poster(runtime.management(payload["endpoint"]), connection_id)
    gateway = runtime.gateway()
    left = _remaining(context)
    deadline = None if left is None else time.monotonic() + left - FOLLOW_MARGIN
    terminal = ("response.completed", "response.incomplete", "response.failed")

    async def main() -> tuple[int, bool]:
        after, ended = int(payload["after"]), False
        frames = follow(
            gateway.store,
            tenant,
            response_id,
            after,
            notifier=gateway.notifier,
            deadline=deadline,
            heartbeat=None,
        )
        async for frame in frames:
            for event in _log_events(frame):
                after = max(after, int(event.get("sequence_number", after)))
                if event["type"] in terminal:
                    ended = True
                    await memory.finish(stream_id or DEFAULT_STREAM)
                if stream_id is not None:
                    event["stream_id"] = stream_id
                poster.send(encode_message(event))
            if poster.gone.is_set():  # the client left: cancel, as for a streaming client
                await cancel_handed_over(gateway, tenant, response_id)
                return after, True
        await poster.flush()
        return after, ended

    asyncio.set_event_loop(runtime.loop)
    after, ended = runtime.loop.run_until_complete(main())
    if not ended:
        runtime.invoke({"socket_follow": {**payload, "after": after}})
    return {"statusCode": 200}


_ROUTES: dict[str, Callable[[SocketRuntime, dict[str, Any]], dict[str, Any]]] = {
    "$connect": _connect,
    "$disconnect": _disconnect,
    "$default": _default,
}


def handle(event: dict[str, Any], runtime: SocketRuntime, context: Any = None) -> dict[str, Any]:
    """Route one invocation of the socket function (see the module docstring)."""
    if "socket_run" in event:
        return _run(runtime, event["socket_run"], context)
    if "socket_follow" in event:
        return _follow(runtime, event["socket_follow"], context)
    route = _ROUTES.get(str(event.get("requestContext", {}).get("routeKey")))
    if route is None:
        return {"statusCode": 400}
    return route(runtime, event)
