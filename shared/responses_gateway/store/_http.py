"""An asynchronous DynamoDB client over the gateway's own HTTP stack (httpx): no botocore.

Owns exactly the data-plane operations the store makes (:class:`~._calls.DynamoClient`'s
``get_item`` ... ``transact_write_items``) over DynamoDB's JSON protocol (``POST /`` with
``X-Amz-Target: DynamoDB_20120810.<Operation>``, signed with SigV4 by :mod:`._sigv4`), with the
boto3 client's semantics, since the store's callers depend on them:

- parameters and answers are the low-level client's: attribute values as ``{"S": ...}``, binary
  values as ``bytes`` (base64 on the wire);
- an error answer raises :class:`ServiceError` whose ``response`` is botocore's
  (``{"Error": {"Code", "Message"}, "ResponseMetadata": {...}}`` plus the error's own fields, such
  as ``CancellationReasons``); no answer raises a :class:`TransportError` named after botocore's;
- retries are botocore's standard mode: throttling codes, 429, 5xx, transient codes, connection
  errors, timeouts and a wrong ``x-amz-crc32`` are retried up to ``max_attempts`` (first
  included) with jittered exponential backoff (1 s base for throttling, 25 ms otherwise, at most
  20 s, ``x-amz-retry-after`` honoured) under a retry quota of 500 (14 per retry, 5 per throttled
  retry, given back on success).

Connections: one pooled transport per event loop that calls through this client (a pool's
connections belong to the loop that opened them), made on that loop's first call and closed by
:meth:`close`; the TLS context is built once per client, when it is constructed. Request bodies
and answers over 256 KiB are encoded, hashed and parsed on the loop's default executor. It must
not put an endpoint, key, signature or credential into an error's message, nor keep the HTTP
library's exceptions (their requests carry the signed headers) on the errors it raises.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import secrets
import threading
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

import httpx

from responses_gateway.store._credentials import BotocoreCredentials, CredentialSource
from responses_gateway.store._sigv4 import Signer, amz_date, payload_hash

__all__ = [
    "ChecksumError",
    "ConnectTimeoutError",
    "ConnectionClosedError",
    "DynamoDBError",
    "DynamoHttpClient",
    "EndpointConnectionError",
    "ReadTimeoutError",
    "ResponseParserError",
    "ServiceError",
    "TransportError",
    "default_endpoint",
    "mirror_botocore_client",
]

_TARGET = "DynamoDB_20120810."
_CONTENT_TYPE = "application/x-amz-json-1.0"
_OFFLOAD_BYTES = 256 * 1024
"""Bodies (or blob bytes) past this size are encoded, hashed and parsed off the loop."""
_KEEPALIVE_SECONDS = 60.0

_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
"""botocore's ``ThrottledRetryableChecker`` codes."""
_TRANSIENT_CODES = frozenset(
    {
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "ReplicatedWriteConflictException",  # modeled retryable (not throttling) by DynamoDB
    }
)
_TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
_MODELED_CODES = frozenset(
    {
        "ConditionalCheckFailedException",
        "IdempotentParameterMismatchException",
        "InternalServerError",
        "ItemCollectionSizeLimitExceededException",
        "ProvisionedThroughputExceededException",
        "ReplicatedWriteConflictException",
        "RequestLimitExceeded",
        "ResourceNotFoundException",
        "ThrottlingException",
        "TransactionCanceledException",
        "TransactionConflictException",
        "TransactionInProgressException",
    }
)
"""The data-plane operations' modeled errors: a 429 carrying one is not throttling by status."""

_THROTTLE_SCALE = 1.0
_TRANSIENT_SCALE = 0.025
_MAX_BACKOFF = 20.0
_RETRY_AFTER_EXTRA = 5.0
_QUOTA = 500
_RETRY_COST = 14
_THROTTLED_RETRY_COST = 5

Retry = Literal["throttling", "transient"] | None
_Failure = tuple["DynamoDBError", Retry, float | None]

_PARTITION_SUFFIXES = (
    ("cn-", "amazonaws.com.cn"),
    ("eusc-", "amazonaws.eu"),
    ("us-isob-", "sc2s.sgov.gov"),
    ("us-isof-", "csp.hci.ic.gov"),
    ("us-iso-", "c2s.ic.gov"),
    ("eu-isoe-", "cloud.adc-e.uk"),
)


def default_endpoint(region: str) -> str:
    """DynamoDB's regional endpoint (``https://dynamodb.<region>.<partition's DNS suffix>``)."""
    suffix = next((s for prefix, s in _PARTITION_SUFFIXES if region.startswith(prefix)), None)
    return f"https://dynamodb.{region}.{suffix or 'amazonaws.com'}"


# -- errors ----------------------------------------------------------------------------------


class DynamoDBError(Exception):
    """A DynamoDB call failed."""


class ServiceError(DynamoDBError):
    """DynamoDB answered with an error (botocore's ``ClientError``): ``response`` holds
    ``{"Error": {"Code", "Message"}, "ResponseMetadata": {...}}`` and the error's own fields."""

    def __init__(self, response: dict[str, Any], operation_name: str) -> None:
        error = response.get("Error", {})
        super().__init__(
            f"An error occurred ({error.get('Code')}) when calling the {operation_name} "
            f"operation: {error.get('Message', '')}"
        )
        self.response = response
        self.operation_name = operation_name


class ChecksumError(DynamoDBError):
    """Every attempt's answer failed its ``x-amz-crc32`` check."""


class ResponseParserError(DynamoDBError):
    """A success answer that is not DynamoDB's JSON."""


class TransportError(DynamoDBError):
    """No answer: the connection failed, was closed or timed out."""


class EndpointConnectionError(TransportError):
    """The connection could not be made."""


class ConnectTimeoutError(TransportError):
    """The connection was not made within the connect timeout."""


class ReadTimeoutError(TransportError):
    """The request could not be sent, or its answer did not come, within the read timeout."""


class ConnectionClosedError(TransportError):
    """The connection was closed or broken before the whole answer arrived."""


def _transport_error(exc: httpx.TransportError) -> TransportError:
    kind = type(exc).__name__
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return ConnectTimeoutError(f"no connection to DynamoDB in time ({kind})")
    if isinstance(exc, httpx.TimeoutException):
        return ReadTimeoutError(f"DynamoDB did not answer in time ({kind})")
    if isinstance(exc, httpx.ConnectError):
        return EndpointConnectionError(f"could not connect to DynamoDB ({kind})")
    return ConnectionClosedError(f"the connection to DynamoDB broke ({kind})")


# -- the wire format ---------------------------------------------------------------------------


def _b64_text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encode(params: dict[str, Any], mark: str) -> tuple[str, list[Any]]:
    """The request's JSON with every binary value replaced by ``"<mark>"``, and the values in
    order: the JSON encoder never copies the (large) base64 text, which is spliced in as bytes."""
    blobs: list[Any] = []

    def keep(value: Any) -> str:
        if isinstance(value, bytes | bytearray | memoryview):
            blobs.append(value)
            return mark
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    return json.dumps(params, separators=(",", ":"), default=keep), blobs


def _finish(params: dict[str, Any], text: str, blobs: list[Any], mark: str) -> tuple[bytes, str]:
    """The body (base64 of each blob spliced in where its mark is) and its SHA-256."""
    body = text.encode()
    if blobs:
        parts = body.split(f'"{mark}"'.encode())
        if len(parts) == len(blobs) + 1:
            out = [parts[0]]
            for blob, part in zip(blobs, parts[1:], strict=True):
                out += (b'"', base64.b64encode(blob), b'"', part)
            body = b"".join(out)
        else:  # a string value spelled the mark: encode plainly
            body = json.dumps(params, separators=(",", ":"), default=_b64_text).encode()
    return body, payload_hash(body)


def _binary_values(obj: dict[str, Any]) -> Any:
    """``json.loads`` hook: ``{"B": base64}`` and ``{"BS": [base64]}`` attribute values to bytes.

    No other object of DynamoDB's answers has the single key ``B`` with a string (or ``BS`` with
    a list): an item's attributes map names to attribute-value objects, never to strings.
    """
    if len(obj) == 1:
        value = obj.get("B")
        if isinstance(value, str):
            return {"B": base64.b64decode(value)}
        values = obj.get("BS")
        if isinstance(values, list):
            return {"BS": [base64.b64decode(v) for v in values]}
    return obj


def _crc_ok(headers: httpx.Headers, content: bytes) -> bool:
    expected = headers.get("x-amz-crc32")
    if expected is None:
        return True
    try:
        return zlib.crc32(content) & 0xFFFFFFFF == int(expected)
    except ValueError:
        return False


def _parse(content: bytes, headers: httpx.Headers) -> tuple[bool, Any]:
    """(CRC ok, the parsed body or None when it is not JSON)."""
    ok = _crc_ok(headers, content)
    if not content:
        return ok, {}
    try:
        return ok, json.loads(content, object_hook=_binary_values)
    except ValueError:
        return ok, None


def _error_response(
    status: int, headers: httpx.Headers, body: Any, content: bytes
) -> dict[str, Any]:
    """botocore's parsed error for a JSON-protocol answer."""
    if not isinstance(body, dict):
        body = {"message": content.decode("utf-8", "replace")} if content else {}
    code = body.get("__type") or str(status)
    code = str(code).split(":", 1)[0].rsplit("#", 1)[-1]
    response: dict[str, Any] = {
        key: value for key, value in body.items() if key not in ("__type", "message", "Message")
    }
    response["Error"] = {"Code": code, "Message": body.get("message", body.get("Message", ""))}
    metadata: dict[str, Any] = {"HTTPStatusCode": status}
    request_id = headers.get("x-amzn-requestid")
    if request_id:
        metadata["RequestId"] = request_id
    response["ResponseMetadata"] = metadata
    return response


def _retry_kind(code: str | None, status: int | None) -> Retry:
    """Whether botocore's standard mode retries this answer, and whether it is throttling."""
    if code in _THROTTLING_CODES:
        return "throttling"
    if status == 429 and code not in _MODELED_CODES:
        return "throttling"
    if code in _TRANSIENT_CODES or status in _TRANSIENT_STATUS:
        return "transient"
    return None


def _retry_after(headers: httpx.Headers) -> float | None:
    raw = headers.get("x-amz-retry-after")
    if raw is None:
        return None
    try:
        value = int(raw) / 1000.0
    except (ValueError, OverflowError):
        return None
    return value if value >= 0 else None


class _RetryQuota:
    """botocore's ``RetryQuota``: retries spend capacity, successes give it back."""

    def __init__(self, capacity: int = _QUOTA) -> None:
        self._max = capacity
        self._available = capacity
        self._lock = threading.Lock()

    def acquire(self, amount: int) -> bool:
        with self._lock:
            if amount > self._available:
                return False
            self._available -= amount
            return True

    def release(self, amount: int) -> None:
        if self._available == self._max:
            return
        with self._lock:
            self._available = min(self._max, self._available + amount)

    @property
    def available(self) -> int:
        return self._available


# -- the client --------------------------------------------------------------------------------


def _host_header(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    default = {"http": 80, "https": 443}.get(parts.scheme)
    if parts.port is not None and parts.port != default:
        host = f"{host}:{parts.port}"
    return host


def _environment_proxy(url: str) -> str | None:
    """The ``HTTP(S)_PROXY`` for ``url`` unless ``NO_PROXY`` bypasses it (as botocore reads
    them)."""
    import urllib.request

    scheme = urlsplit(url).scheme
    proxy = urllib.request.getproxies().get(scheme)
    if not proxy or urllib.request.proxy_bypass(urlsplit(url).hostname or ""):
        return None
    return proxy


TransportFactory = Callable[[], httpx.AsyncBaseTransport]


class DynamoHttpClient:
    """DynamoDB's data-plane operations the store uses, as coroutines (see the module
    docstring). Safe to share between tasks and event loops; build one per store."""

    def __init__(
        self,
        endpoint_url: str,
        region: str,
        credentials: CredentialSource,
        *,
        max_attempts: int,
        connect_timeout: float,
        read_timeout: float,
        max_pool_connections: int = 32,
        ca_bundle: str | None = None,
        transport: TransportFactory | None = None,
        random: Callable[[], float] = random.random,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        parts = urlsplit(endpoint_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a DynamoDB endpoint URL is http(s)://host[:port][/path]")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.endpoint_url = endpoint_url
        self.region = region
        self.max_attempts = max_attempts
        self._path = parts.path or "/"  # as botocore joins an endpoint and ``/``
        self._url = httpx.URL(urlunsplit((parts.scheme, parts.netloc, self._path, "", "")))
        self._host = _host_header(endpoint_url)
        self._credentials = credentials
        self._signer = Signer(region)
        self._timeout = {
            "connect": connect_timeout,
            "read": read_timeout,
            "write": read_timeout,
            "pool": None,
        }
        self._random = random
        self._sleep = sleep
        self._clock = clock
        self._quota = _RetryQuota()
        self._mark = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._transports: dict[asyncio.AbstractEventLoop, httpx.AsyncBaseTransport] = {}
        self._last: tuple[asyncio.AbstractEventLoop, httpx.AsyncBaseTransport] | None = None
        self._closing: set[asyncio.Future[Any]] = set()
        if transport is None:
            transport = self._transport_factory(parts.scheme, max_pool_connections, ca_bundle)
        self._new_transport = transport

    def _transport_factory(self, scheme: str, pool: int, ca_bundle: str | None) -> TransportFactory:
        verify: Any = False
        if scheme == "https":  # built now: the deployed store is built off the loop
            if ca_bundle:
                import ssl

                verify = ssl.create_default_context(cafile=ca_bundle)
            else:
                verify = httpx.create_ssl_context()
        limits = httpx.Limits(
            max_connections=None,  # like botocore's pool: extra connections are not kept
            max_keepalive_connections=pool,
            keepalive_expiry=_KEEPALIVE_SECONDS,
        )
        proxy = _environment_proxy(str(self._url))

        def build() -> httpx.AsyncBaseTransport:
            return httpx.AsyncHTTPTransport(verify=verify, limits=limits, proxy=proxy)

        return build

    @property
    def retry_quota(self) -> int:
        """Retry capacity left (botocore's quota: 500 when nothing failed lately)."""
        return self._quota.available

    # The operations (names and parameters as boto3's low-level client).

    async def get_item(self, **params: Any) -> dict[str, Any]:
        return await self._call("GetItem", params)

    async def put_item(self, **params: Any) -> dict[str, Any]:
        return await self._call("PutItem", params)

    async def update_item(self, **params: Any) -> dict[str, Any]:
        return await self._call("UpdateItem", params)

    async def delete_item(self, **params: Any) -> dict[str, Any]:
        return await self._call("DeleteItem", params)

    async def query(self, **params: Any) -> dict[str, Any]:
        return await self._call("Query", params)

    async def batch_get_item(self, **params: Any) -> dict[str, Any]:
        return await self._call("BatchGetItem", params)

    async def batch_write_item(self, **params: Any) -> dict[str, Any]:
        return await self._call("BatchWriteItem", params)

    async def transact_write_items(self, **params: Any) -> dict[str, Any]:
        return await self._call("TransactWriteItems", params)

    # Mechanics.

    def _transport(self, loop: asyncio.AbstractEventLoop) -> httpx.AsyncBaseTransport:
        last = self._last
        if last is not None and last[0] is loop:
            return last[1]
        with self._lock:
            transport = self._transports.get(loop)
            if transport is None:
                for gone in [other for other in self._transports if other.is_closed()]:
                    del self._transports[gone]  # its sockets close when it is collected
                transport = self._new_transport()
                self._transports[loop] = transport
            self._last = (loop, transport)
        return transport

    async def _body(
        self, params: dict[str, Any], loop: asyncio.AbstractEventLoop
    ) -> tuple[bytes, str]:
        text, blobs = _encode(params, self._mark)
        if len(text) + sum(len(b) for b in blobs) > _OFFLOAD_BYTES:
            return await loop.run_in_executor(None, _finish, params, text, blobs, self._mark)
        return _finish(params, text, blobs, self._mark)

    async def _call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        transport = self._transport(loop)
        body, digest = await self._body(params, loop)
        headers = {
            "Host": self._host,
            "Content-Type": _CONTENT_TYPE,
            "X-Amz-Target": _TARGET + operation,
        }
        acquired: int | None = None
        attempt = 0
        while True:
            attempt += 1
            credentials = await self._credentials.get()
            signed = self._signer.sign(
                method="POST",
                path=self._path,
                headers=headers,
                body_hash=digest,
                credentials=credentials,
                timestamp=amz_date(self._clock()),
            )
            signed["User-Agent"] = "responses-gateway"
            outcome = await self._attempt(transport, signed, body, operation, loop)
            if isinstance(outcome, dict):
                self._quota.release(acquired if acquired is not None else 1)
                return outcome
            error, kind, retry_after = outcome
            if kind is None or attempt >= self.max_attempts:
                raise error
            cost = _THROTTLED_RETRY_COST if kind == "throttling" else _RETRY_COST
            if not self._quota.acquire(cost):
                raise error
            acquired = cost
            scale = _THROTTLE_SCALE if kind == "throttling" else _TRANSIENT_SCALE
            delay = self._random() * min(scale * 2 ** (attempt - 1), _MAX_BACKOFF)
            if retry_after is not None:
                delay = max(delay, min(retry_after, _RETRY_AFTER_EXTRA + delay))
            await self._sleep(delay)

    async def _attempt(
        self,
        transport: httpx.AsyncBaseTransport,
        headers: dict[str, str],
        body: bytes,
        operation: str,
        loop: asyncio.AbstractEventLoop,
    ) -> dict[str, Any] | _Failure:
        """One request: the parsed success, or the error with its retry kind (None: not
        retryable) and the answer's ``x-amz-retry-after``."""
        request = httpx.Request(
            "POST", self._url, headers=headers, content=body, extensions={"timeout": self._timeout}
        )
        try:
            response = await transport.handle_async_request(request)
            try:
                content = await response.aread()
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            return _transport_error(exc), "transient", None
        status = response.status_code
        if len(content) > _OFFLOAD_BYTES:
            crc_ok, parsed = await loop.run_in_executor(None, _parse, content, response.headers)
        else:
            crc_ok, parsed = _parse(content, response.headers)
        if 200 <= status < 300:
            if not crc_ok:
                return ChecksumError("the answer's CRC32 does not match"), "transient", None
            if not isinstance(parsed, dict):
                return ResponseParserError(f"{operation} answered with unreadable JSON"), None, None
            return parsed
        answer = _error_response(status, response.headers, parsed, content)
        kind = _retry_kind(answer["Error"]["Code"], status)
        if kind is None and not crc_ok:
            kind = "transient"
        return ServiceError(answer, operation), kind, _retry_after(response.headers)

    def close(self) -> None:
        """Close every loop's connections (callable from any thread, inside or outside a loop):
        on the running loop and on loops running in other threads, the close is scheduled there;
        a stopped loop's connections close when they are collected. Calls after this open new
        connections, as a botocore client's do."""
        with self._lock:
            transports, self._transports, self._last = self._transports, {}, None
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, transport in transports.items():
            if loop.is_closed():
                continue
            if loop is running:
                task = loop.create_task(transport.aclose())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(transport.aclose(), loop)

    async def aclose(self) -> None:
        """Close this loop's connections now (and schedule the others', as :meth:`close`)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            mine = self._transports.pop(loop, None)
            if self._last is not None and self._last[0] is loop:
                self._last = None
        self.close()
        if mine is not None:
            await mine.aclose()


def mirror_botocore_client(client: Any) -> DynamoHttpClient:
    """A client with a botocore DynamoDB client's endpoint, region, credentials (its own
    credentials object, refreshed as botocore would), attempts, timeouts and pool size."""
    meta = client.meta
    config = meta.config
    retries = config.retries or {}
    attempts = retries.get("total_max_attempts")
    if attempts is None:
        attempts = retries["max_attempts"] + 1 if "max_attempts" in retries else 4
    signer = getattr(client, "_request_signer", None)
    return DynamoHttpClient(
        meta.endpoint_url,
        meta.region_name,
        BotocoreCredentials.of(getattr(signer, "_credentials", None)),
        max_attempts=int(attempts),
        connect_timeout=float(config.connect_timeout),
        read_timeout=float(config.read_timeout),
        max_pool_connections=int(config.max_pool_connections or 10),
    )
