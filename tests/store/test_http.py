"""The asynchronous DynamoDB client against a scripted endpoint: the wire format, botocore's
standard-mode retries (throttling, 5xx, dropped connections, timeouts, bad CRCs, the quota),
botocore-shaped errors, and connection pools per event loop."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest

from responses_gateway.store._calls import ConditionFailed, StoreError, TableClient
from responses_gateway.store._credentials import BotocoreCredentials, StaticCredentials
from responses_gateway.store._http import (
    ChecksumError,
    ConnectionClosedError,
    ConnectTimeoutError,
    DynamoHttpClient,
    EndpointConnectionError,
    ReadTimeoutError,
    ResponseParserError,
    ServiceError,
    _encode,
    _finish,
    default_endpoint,
    mirror_botocore_client,
)
from responses_gateway.store._sigv4 import Credentials
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.meter import UnitMeter

ENDPOINT = "https://dynamodb.eu-west-1.amazonaws.com"
KEY = {"PK": {"S": "T#t#R#r"}, "SK": {"S": "R"}}
SECRET = "very-secret-key"
NOW = 1_772_409_598.0  # 2026-03-01T23:59:58Z

Answer = httpx.Response | Exception


class Script:
    """A scripted DynamoDB endpoint: answers (or raises) in order, records every request."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []
        self.transports: list[_Transport] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def transport(self) -> httpx.AsyncBaseTransport:
        made = _Transport(self.handle)
        self.transports.append(made)
        return made

    @property
    def targets(self) -> list[str]:
        return [r.headers["x-amz-target"] for r in self.requests]


class _Transport(httpx.MockTransport):
    def __init__(self, handler: Any) -> None:
        super().__init__(handler)
        self.closed = threading.Event()

    async def aclose(self) -> None:
        self.closed.set()


def ok(body: dict[str, Any], *, crc: int | None = None, **headers: str) -> httpx.Response:
    content = json.dumps(body).encode()
    checksum = zlib.crc32(content) if crc is None else crc
    return httpx.Response(
        200,
        content=content,
        headers={"content-type": "application/x-amz-json-1.0", "x-amz-crc32": str(checksum)},
    )


def error(status: int, code: str, message: str = "scripted", **fields: Any) -> httpx.Response:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **fields}
    return httpx.Response(status, json=body, headers={"x-amzn-requestid": "REQ123"})


def make_client(
    script: Script, *, max_attempts: int = 4, jitter: float = 1.0
) -> tuple[DynamoHttpClient, list[float]]:
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    client = DynamoHttpClient(
        ENDPOINT,
        "eu-west-1",
        StaticCredentials(Credentials("AKIDEXAMPLE", SECRET, "session-token")),
        max_attempts=max_attempts,
        connect_timeout=3.0,
        read_timeout=10.0,
        transport=script.transport,
        random=lambda: jitter,
        sleep=sleep,
        clock=lambda: NOW,
    )
    return client, sleeps


# -- the wire format ---------------------------------------------------------------------------


async def test_get_item_sends_signed_json_protocol_request_and_decodes_binary() -> None:
    script = Script(ok({"Item": {**KEY, "body": {"B": "aGVsbG8="}, "n": {"N": "3"}}}))
    client, _ = make_client(script)

    got = await client.get_item(TableName="t", Key=KEY, ConsistentRead=True)

    assert got == {"Item": {**KEY, "body": {"B": b"hello"}, "n": {"N": "3"}}}
    [request] = script.requests
    assert (request.method, str(request.url)) == ("POST", f"{ENDPOINT}/")
    assert json.loads(request.content) == {"TableName": "t", "Key": KEY, "ConsistentRead": True}
    headers = request.headers
    assert headers["host"] == "dynamodb.eu-west-1.amazonaws.com"
    assert headers["x-amz-target"] == "DynamoDB_20120810.GetItem"
    assert headers["content-type"] == "application/x-amz-json-1.0"
    assert headers["x-amz-date"] == "20260301T235958Z"
    assert headers["x-amz-security-token"] == "session-token"
    assert headers["authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260301/eu-west-1/dynamodb/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, "
        "Signature="
    )
    assert SECRET not in str(headers)


@pytest.mark.parametrize("size", [10, 600_000])
async def test_put_item_binary_values_go_as_base64_and_binary_sets_come_back(size: int) -> None:
    blob = bytes(range(256)) * (size // 256 + 1)
    script = Script(ok({"Attributes": {**KEY, "bs": {"BS": ["AAE=", "/w=="]}}}))
    client, _ = make_client(script)

    got = await client.put_item(
        TableName="t", Item={**KEY, "d": {"B": blob}, "e": {"B": b""}}, ReturnValues="ALL_OLD"
    )

    sent = json.loads(script.requests[0].content)
    assert base64.b64decode(sent["Item"]["d"]["B"]) == blob
    assert sent["Item"]["e"] == {"B": ""}
    assert got == {"Attributes": {**KEY, "bs": {"BS": [b"\x00\x01", b"\xff"]}}}


def test_encoding_falls_back_when_a_string_spells_the_blob_mark() -> None:
    mark = "f00d" * 8
    params = {"Item": {"s": {"S": mark}, "b": {"B": b"\x01\x02"}}}
    text, blobs = _encode(params, mark)

    body, digest = _finish(params, text, blobs, mark)

    assert json.loads(body) == {"Item": {"s": {"S": mark}, "b": {"B": "AQI="}}}
    assert len(digest) == 64


async def test_every_operation_targets_its_dynamodb_action() -> None:
    operations = {
        "get_item": "GetItem",
        "put_item": "PutItem",
        "update_item": "UpdateItem",
        "delete_item": "DeleteItem",
        "query": "Query",
        "batch_get_item": "BatchGetItem",
        "batch_write_item": "BatchWriteItem",
        "transact_write_items": "TransactWriteItems",
    }
    script = Script(*(ok({}) for _ in operations))
    client, _ = make_client(script)

    for method in operations:
        assert await getattr(client, method)(TableName="t") == {}

    assert script.targets == [f"DynamoDB_20120810.{op}" for op in operations.values()]


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/"),
        ("https://proxy.example/dynamodb", "https://proxy.example/dynamodb"),
    ],
)
async def test_request_goes_where_botocore_would_send_it(endpoint: str, url: str) -> None:
    script = Script(ok({}))
    client = DynamoHttpClient(
        endpoint,
        "us-east-1",
        StaticCredentials(Credentials("AKIDEXAMPLE", SECRET)),
        max_attempts=1,
        connect_timeout=1.0,
        read_timeout=1.0,
        transport=script.transport,
    )

    await client.query(TableName="t")

    assert str(script.requests[0].url) == url


async def test_requests_carry_the_configured_timeouts() -> None:
    script = Script(ok({}))
    client, _ = make_client(script)

    await client.query(TableName="t")

    assert script.requests[0].extensions["timeout"] == {
        "connect": 3.0,
        "read": 10.0,
        "write": 10.0,
        "pool": None,
    }


# -- retries -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    ["ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"],
)
async def test_throttling_is_retried_with_one_second_backoff_then_succeeds(code: str) -> None:
    script = Script(error(400, code), error(400, code), ok({"Item": KEY}))
    client, sleeps = make_client(script)

    assert await client.get_item(TableName="t", Key=KEY) == {"Item": KEY}

    assert len(script.requests) == 3
    assert sleeps == [1.0, 2.0]  # jitter 1.0 x 1 s x 2**(attempt - 1)


@pytest.mark.parametrize(
    "answer",
    [error(500, "InternalServerError"), httpx.Response(503, content=b"<html>busy</html>")],
)
async def test_server_errors_are_retried_with_25_ms_backoff(answer: httpx.Response) -> None:
    script = Script(answer, answer, answer, ok({}))
    client, sleeps = make_client(script)

    assert await client.put_item(TableName="t", Item=KEY) == {}

    assert sleeps == [0.025, 0.05, 0.1]


async def test_jitter_scales_the_backoff() -> None:
    script = Script(error(400, "ThrottlingException"), ok({}))
    client, sleeps = make_client(script, jitter=0.25)

    await client.put_item(TableName="t", Item=KEY)

    assert sleeps == [0.25]


async def test_throttling_that_never_ends_raises_service_error_after_max_attempts() -> None:
    script = Script(*(error(400, "ThrottlingException", "Rate exceeded") for _ in range(3)))
    client, sleeps = make_client(script, max_attempts=3)

    with pytest.raises(ServiceError) as caught:
        await client.put_item(TableName="t", Item=KEY)

    assert len(script.requests) == 3 and len(sleeps) == 2
    assert caught.value.operation_name == "PutItem"
    assert caught.value.response == {
        "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
        "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "REQ123"},
    }
    assert str(caught.value) == (
        "An error occurred (ThrottlingException) when calling the PutItem operation: Rate exceeded"
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ConditionalCheckFailedException", 400),
        ("ValidationException", 400),
        ("ResourceNotFoundException", 400),
        ("AccessDeniedException", 400),
    ],
)
async def test_client_errors_are_not_retried(code: str, status: int) -> None:
    script = Script(error(status, code))
    client, sleeps = make_client(script)

    with pytest.raises(ServiceError) as caught:
        await client.update_item(TableName="t", Key=KEY)

    assert caught.value.response["Error"]["Code"] == code
    assert len(script.requests) == 1 and sleeps == []


async def test_429_with_an_unmodeled_code_is_throttling_and_honours_retry_after() -> None:
    limited = httpx.Response(
        429, json={"__type": "SomethingNew"}, headers={"x-amz-retry-after": "3000"}
    )
    script = Script(limited, ok({}))
    client, sleeps = make_client(script, jitter=0.5)

    await client.query(TableName="t")

    assert sleeps == [3.0]  # max(0.5 x 1 s, min(3 s, 0.5 + 5 s))


async def test_transaction_cancelled_carries_cancellation_reasons_with_items() -> None:
    reasons = [
        {"Code": "None"},
        {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
            "Item": {**KEY, "d": {"B": "AQI="}},
        },
    ]
    script = Script(error(400, "TransactionCanceledException", CancellationReasons=reasons))
    client, _ = make_client(script)

    with pytest.raises(ServiceError) as caught:
        await client.transact_write_items(TransactItems=[])

    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert caught.value.response["CancellationReasons"] == [
        {"Code": "None"},
        {
            "Code": "ConditionalCheckFailed",
            "Message": "The conditional request failed",
            "Item": {**KEY, "d": {"B": b"\x01\x02"}},
        },
    ]
    assert len(script.requests) == 1


async def test_transaction_cancelled_by_a_condition_is_condition_failed_for_the_store() -> None:
    reasons = [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}]
    script = Script(error(400, "TransactionCanceledException", CancellationReasons=reasons))
    client, _ = make_client(script)
    meter = UnitMeter()
    table = TableClient(client, "t", meter, executor=None)  # type: ignore[arg-type]

    with pytest.raises(ConditionFailed):
        await table.transact_write("record_usage", [{"Put": {"Item": KEY}}], units=1)

    assert meter.snapshot()["record_usage"].round_trips == 1


async def test_bad_crc_is_retried_then_the_good_answer_returned() -> None:
    script = Script(ok({"Item": KEY}, crc=12345), ok({"Item": KEY}))
    client, sleeps = make_client(script)

    assert await client.get_item(TableName="t", Key=KEY) == {"Item": KEY}

    assert len(script.requests) == 2 and sleeps == [0.025]


async def test_bad_crc_on_every_attempt_raises_checksum_error() -> None:
    script = Script(*(ok({"Item": KEY}, crc=1) for _ in range(4)))
    client, _ = make_client(script)

    with pytest.raises(ChecksumError):
        await client.get_item(TableName="t", Key=KEY)

    assert len(script.requests) == 4


async def test_answer_without_crc_header_is_accepted() -> None:
    script = Script(httpx.Response(200, json={"Count": 0}))
    client, _ = make_client(script)

    assert await client.query(TableName="t") == {"Count": 0}


async def test_unreadable_success_is_a_parser_error_not_retried() -> None:
    script = Script(httpx.Response(200, content=b"<html>proxy</html>"))
    client, _ = make_client(script)

    with pytest.raises(ResponseParserError):
        await client.query(TableName="t")

    assert len(script.requests) == 1


@pytest.mark.parametrize(
    ("failure", "raised"),
    [
        (httpx.ReadError("connection reset by peer"), ConnectionClosedError),
        (httpx.RemoteProtocolError("server disconnected"), ConnectionClosedError),
        (httpx.ConnectError("connection refused"), EndpointConnectionError),
        (httpx.ConnectTimeout("timed out"), ConnectTimeoutError),
        (httpx.ReadTimeout("timed out"), ReadTimeoutError),
        (httpx.WriteTimeout("timed out"), ReadTimeoutError),
    ],
)
async def test_transport_failures_are_retried_and_named_like_botocore(
    failure: Exception, raised: type[Exception]
) -> None:
    recovered = Script(failure, ok({}))
    client, sleeps = make_client(recovered)
    assert await client.delete_item(TableName="t", Key=KEY) == {}
    assert sleeps == [0.025]

    exhausted = Script(failure, failure)
    client, _ = make_client(exhausted, max_attempts=2)
    with pytest.raises(raised) as caught:
        await client.delete_item(TableName="t", Key=KEY)

    assert len(exhausted.requests) == 2
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert "amazonaws" not in str(caught.value) and SECRET not in str(caught.value)


async def test_retry_quota_stops_retries_when_spent_and_successes_refill_it() -> None:
    failing = error(500, "InternalServerError")
    script = Script(*([failing] * 200))
    client, _ = make_client(script, max_attempts=2)

    for _ in range(35):  # 35 retries x 14 = 490 of the 500
        with pytest.raises(ServiceError):
            await client.get_item(TableName="t", Key=KEY)
    assert (len(script.requests), client.retry_quota) == (70, 10)

    with pytest.raises(ServiceError):
        await client.get_item(TableName="t", Key=KEY)
    assert len(script.requests) == 71  # no capacity left for a retry: one attempt

    script.answers = [ok({})] * 4 + [failing, ok({})]
    for _ in range(4):  # a success without a retry gives back 1
        await client.get_item(TableName="t", Key=KEY)
    assert client.retry_quota == 14
    await client.get_item(TableName="t", Key=KEY)  # retried (14 taken), then succeeded
    assert len(script.requests) == 71 + 4 + 2
    assert client.retry_quota == 14  # the retry's capacity comes back with its success


async def test_store_error_names_operation_and_code_only() -> None:
    script = Script(*(error(400, "ThrottlingException", f"for {ENDPOINT}") for _ in range(4)))
    client, _ = make_client(script)
    store = DynamoStore(client, "table")
    try:
        with pytest.raises(StoreError) as caught:
            await store.get_response("tenant", "resp_1")
    finally:
        store.close()

    assert str(caught.value) == "DynamoDB query failed during get_response: ThrottlingException"
    assert caught.value.status_code == 500


# -- a real connection -------------------------------------------------------------------------


@pytest.fixture
def drop_first_connection() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback endpoint that reads the first request and closes the connection without an
    answer, then answers every later request with an empty item."""
    seen: list[bytes] = []
    ready = threading.Event()
    stop: list[Any] = []
    address: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            seen.append(await reader.readexactly(length))
            if len(seen) == 1:
                writer.close()
                return
            body = b"{}"
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-amz-json-1.0\r\n"
                b"x-amz-crc32: %d\r\ncontent-length: 2\r\n\r\n%s" % (zlib.crc32(body), body)
            )
            await writer.drain()

    def run() -> None:
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", 0))
        address.append(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        stop.append((loop, server))
        ready.set()
        loop.run_forever()
        server.close()
        loop.run_until_complete(server.wait_closed())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield address[0], seen
    finally:
        loop, _ = stop[0]
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


async def test_dropped_connection_over_loopback_is_retried_on_a_new_connection(
    drop_first_connection: tuple[str, list[bytes]],
) -> None:
    url, seen = drop_first_connection
    client = DynamoHttpClient(
        url,
        "us-east-1",
        StaticCredentials(Credentials("local", "local")),
        max_attempts=4,
        connect_timeout=3.0,
        read_timeout=10.0,
    )
    try:
        assert await client.put_item(TableName="t", Item=KEY) == {}
    finally:
        await client.aclose()

    assert len(seen) == 2 and seen[0] == seen[1]  # the same body, sent again


# -- connection pools per event loop -------------------------------------------------------------


async def test_each_event_loop_gets_its_own_pool_and_close_closes_every_one() -> None:
    script = Script(ok({}), ok({}), ok({}))
    client, _ = make_client(script)
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        await client.query(TableName="t")
        await client.query(TableName="t")  # the same loop: the same pool
        asyncio.run_coroutine_threadsafe(client.query(TableName="t"), other).result(10)
        assert len(script.transports) == 2

        client.close()

        mine, theirs = script.transports
        await asyncio.wait_for(
            asyncio.get_running_loop().run_in_executor(None, mine.closed.wait), 10
        )
        assert theirs.closed.wait(10)
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(10)
        other.close()


async def test_calls_after_close_open_a_new_pool() -> None:
    script = Script(ok({}), ok({}))
    client, _ = make_client(script)
    await client.query(TableName="t")

    await client.aclose()
    await client.query(TableName="t")

    assert [t.closed.is_set() for t in script.transports] == [True, False]


def test_a_pool_of_a_closed_loop_is_dropped_when_a_new_loop_calls() -> None:
    script = Script(ok({}), ok({}))
    client, _ = make_client(script)

    asyncio.run(client.query(TableName="t"))
    asyncio.run(client.query(TableName="t"))

    assert len(script.transports) == 2 and len(client._transports) == 1


# -- endpoints and botocore clients ---------------------------------------------------------------


@pytest.mark.parametrize(
    "region",
    [
        "us-east-1",
        "eu-central-2",
        "ap-southeast-7",
        "us-gov-west-1",
        "cn-north-1",
        "us-iso-east-1",
        "us-isob-east-1",
        "us-isof-south-1",
        "eu-isoe-west-1",
        "eusc-de-east-1",
    ],
)
def test_default_endpoint_is_botocores(region: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    botocore_client = boto3.client(
        "dynamodb", region_name=region, aws_access_key_id="a", aws_secret_access_key="b"
    )

    assert default_endpoint(region) == botocore_client.meta.endpoint_url


def test_mirror_botocore_client_takes_its_settings_and_credentials() -> None:
    from responses_gateway.store.table import make_client as make_boto3_client

    botocore_client = make_boto3_client(
        endpoint_url="http://127.0.0.1:8000",
        region="eu-north-1",
        credentials=("AKIDMIRROR", "mirror-secret"),
        max_attempts=3,
        connect_timeout=1.0,
        read_timeout=1.5,
    )

    mirrored = mirror_botocore_client(botocore_client)

    assert (mirrored.endpoint_url, mirrored.region, mirrored.max_attempts) == (
        "http://127.0.0.1:8000",
        "eu-north-1",
        3,
    )
    assert mirrored._timeout == {"connect": 1.0, "read": 1.5, "write": 1.5, "pool": None}
    assert isinstance(mirrored._credentials, BotocoreCredentials)
    got = asyncio.run(mirrored._credentials.get())
    assert got == Credentials("AKIDMIRROR", "mirror-secret")
