"""The Lambda edge: Powertools wiring and the instrumented app the Lambda entry points serve.

Owns what the deployed functions add around :func:`responses_gateway.app.create_app`:

- :func:`lambda_app`: the app built from the function's environment (upstream key read through
  Powertools Parameters from SSM or Secrets Manager, the DynamoDB store built lazily, the tenancy
  policy checked at startup), wrapped in :class:`TelemetryMiddleware`;
- :func:`mangum_handler`: the buffered function's Lambda handler (Mangum, lifespan off, the
  Powertools Tracer when ``aws_xray_sdk`` is importable);
- telemetry: one structured access-log line per request (Powertools Logger, JSON, correlation id
  = API Gateway's request id; locally :class:`AccessLog`, the same fields as one JSON line) and
  EMF metrics (Powertools Metrics): ``Requests``, ``Latency``, ``UpstreamLatency``,
  ``InputTokens``, ``OutputTokens``, ``ToolCalls``, ``Errors`` by ``ErrorType`` and
  ``UpstreamErrors`` by ``Status``. Counts come from what the app sends (status, error envelope,
  the final response object or terminal SSE event) and from the upstream HTTP client's hooks;
- usage metrics from the ledger (:meth:`PowertoolsTelemetry.usage_recorded`, called once per
  response the ledger counted, foreground or background): ``ModelInputTokens``,
  ``ModelOutputTokens``, ``ModelCostUSD``, ``ModelCalls``, ``GatewayToolCalls`` by ``Model``, and
  ``BackgroundRuns`` by ``Status``.

Powertools is imported lazily and only here; without it (local runs) telemetry is a no-op.
Nothing here logs a request or response body, a header value or a key: log lines and metrics
carry only method, path, status, timings, counts, error codes and ids. It decides nothing about
requests: routes, tenancy and the loop live elsewhere.
"""

from __future__ import annotations

# First, before anything imports httpx: import it without its command-line interface (a
# cold-start saving; see the module).
import responses_gateway.coldstart  # noqa: F401

# isort: split

import asyncio
import importlib.util
import json
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol, cast

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from responses_gateway.config import (
    ConfigError,
    GatewayConfig,
    config_document,
    load_config,
    parse_config_data,
)
from responses_gateway.tenancy import REQUEST_CONTEXT_HEADER, TenancyPolicy, api_key_id
from responses_gateway.upstream_http import upstream_http_client

if TYPE_CHECKING:
    from responses_gateway.store.base import Store
    from responses_gateway.usage.records import UsageEntry

__all__ = [
    "CONFIG_PARAMETER_ENV",
    "DEFAULT_NAMESPACE",
    "DEFAULT_SERVICE",
    "AccessLog",
    "KEY_PARAMETER_ENV",
    "KEY_SECRET_ENV",
    "FunctionKind",
    "LazyStore",
    "NullTelemetry",
    "PowertoolsTelemetry",
    "RequestRecord",
    "Telemetry",
    "TelemetryMiddleware",
    "lambda_app",
    "load_lambda_config",
    "make_telemetry",
    "mangum_handler",
    "upstream_api_key",
    "upstream_client",
]

FunctionKind = Literal["streaming", "buffered", "worker", "socket"]
"""The functions that run the gateway (see ``template.yaml``): two serve the app, one is the
background worker."""

KEY_PARAMETER_ENV = "UPSTREAM_API_KEY_PARAMETER"
"""Name of an SSM SecureString parameter holding the upstream key."""
CONFIG_PARAMETER_ENV = "GATEWAY_CONFIG_PARAMETER"
"""Name of an SSM parameter holding the whole configuration (JSON or TOML)."""
KEY_SECRET_ENV = "UPSTREAM_API_KEY_SECRET"
"""Name or ARN of a Secrets Manager secret holding the upstream key (a string, or a JSON object
with ``api_key``)."""

DEFAULT_SERVICE = "responses-gateway"
"""The ``service`` of log lines and metrics unless ``POWERTOOLS_SERVICE_NAME`` says otherwise."""
DEFAULT_NAMESPACE = "ResponsesGateway"
"""The CloudWatch metrics namespace unless ``POWERTOOLS_METRICS_NAMESPACE`` says otherwise."""

_JSON_LIMIT = 32 * 1024 * 1024
"""Largest JSON body the probe keeps to read usage from (bigger ones are not counted)."""
_TERMINAL_EVENTS = (b"response.completed", b"response.incomplete", b"response.failed")
_CREATE_PATH = "/v1/responses"
_UNOBSERVED_PATHS = frozenset({"/health"})
"""The adapter's readiness checks: neither logged nor counted."""

logger = logging.getLogger(__name__)


# -- what one request amounts to ------------------------------------------------------------


@dataclass(slots=True)
class RequestRecord:
    """What the telemetry learns about one request (never a body, header value or key)."""

    method: str
    path: str
    request_id: str | None = None
    """API Gateway's request id (the correlation id), else the client's ``x-request-id``."""
    lambda_request_id: str | None = None
    """The Lambda invocation's request id."""
    api_key_id: str | None = None
    """The API key id (the tenant) when API Gateway named one."""
    cold_start: bool = False
    status: int = 0
    duration_ms: float = 0.0
    streamed: bool = False
    error_type: str | None = None
    """The error envelope's ``code`` (else its ``type``), or a failed stream's error code."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: int = 0
    tenant: str | None = None
    """The tenant the request acted for (once authenticated)."""
    model: str | None = None
    """The ``model`` of a created response."""
    deployment: str | None = None
    """Which deployments answered its model calls (the ``x-gateway-deployment`` header)."""

    def access_fields(self) -> dict[str, Any]:
        """The access-log line's fields: never a body, a header value or a key (``deployment``
        only on responses of routed models)."""
        fields = {
            "method": self.method,
            "route": self.path,
            "status": self.status,
            "duration_ms": round(self.duration_ms, 1),
            "request_id": self.request_id,
            "tenant": self.tenant,
            "api_key_id": self.api_key_id,
            "model": self.model,
            "streamed": self.streamed,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tool_calls": self.tool_calls,
            "error_code": self.error_type,
        }
        if self.deployment is not None:
            fields["deployment"] = self.deployment
        return fields


class Telemetry(Protocol):
    """Where request and upstream observations go."""

    def request_started(self, record: RequestRecord) -> None: ...

    def request_finished(self, record: RequestRecord) -> None: ...

    def upstream_response(self, status: int, latency_ms: float) -> None: ...


class NullTelemetry:
    """Telemetry that records nothing (Powertools absent, local runs)."""

    def request_started(self, record: RequestRecord) -> None:
        pass

    def request_finished(self, record: RequestRecord) -> None:
        pass

    def upstream_response(self, status: int, latency_ms: float) -> None:
        pass


class AccessLog:
    """Local telemetry: one JSON access-log line per request on ``stream`` (``serve`` uses
    stdout), the fields of :meth:`RequestRecord.access_fields` plus a UTC timestamp."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def request_started(self, record: RequestRecord) -> None:
        pass

    def request_finished(self, record: RequestRecord) -> None:
        fields = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "msg": "request",
            **record.access_fields(),
        }
        line = json.dumps(fields, separators=(",", ":"))
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def upstream_response(self, status: int, latency_ms: float) -> None:
        pass


class _Stdout:
    """Writes to whatever ``sys.stdout`` is at the time (EMF and log lines share one stream)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


class PowertoolsTelemetry:
    """Powertools Logger (JSON lines on stdout) and Metrics (EMF, flushed after each request).

    A Lambda environment serves one request at a time, so the metric set of a request is flushed
    as one EMF document when it ends.
    """

    def __init__(
        self,
        function: FunctionKind,
        *,
        service: str | None = None,
        namespace: str | None = None,
        stream: IO[str] | None = None,
        route_library_logs: bool | None = None,
    ) -> None:
        """Set up the Powertools Logger and Metrics.

        Args:
            function: the function's kind, a default dimension of every metric.
            service: the ``service`` key and dimension (``POWERTOOLS_SERVICE_NAME``, else
                ``responses-gateway``).
            namespace: the metrics namespace (``POWERTOOLS_METRICS_NAMESPACE``, else
                ``ResponsesGateway``).
            stream: where log lines go (by default the current ``sys.stdout``, where EMF
                documents go too).
            route_library_logs: send the ``responses_gateway`` loggers' records through the same
                JSON handler (default: only inside Lambda, where nothing else configures logging).

        Raises:
            ImportError: Powertools is not installed.
        """
        from aws_lambda_powertools import Logger, Metrics

        service = service or os.environ.get("POWERTOOLS_SERVICE_NAME") or DEFAULT_SERVICE
        namespace = namespace or os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE
        self.function = function
        self.logger = Logger(service=service, stream=stream or cast("IO[str]", _Stdout()))
        self.namespace = namespace
        self.metrics = Metrics(service=service, namespace=namespace)
        self.metrics.clear_default_dimensions()  # state shared by every Metrics instance
        self.metrics.clear_metrics()
        self.metrics.set_default_dimensions(function=function)
        self._dimensions = {"function": function, "service": service}
        if route_library_logs is None:
            route_library_logs = "AWS_LAMBDA_FUNCTION_NAME" in os.environ
        if route_library_logs:
            library = logging.getLogger("responses_gateway")
            handler = self.logger.registered_handler
            if handler not in library.handlers:
                library.addHandler(handler)
                library.setLevel(logging.INFO)
                library.propagate = False

    def request_started(self, record: RequestRecord) -> None:
        self.logger.set_correlation_id(record.request_id)
        self.logger.append_keys(
            api_key_id=record.api_key_id,
            lambda_request_id=record.lambda_request_id,
            cold_start=record.cold_start,
        )

    def request_finished(self, record: RequestRecord) -> None:
        """Flush the request's metrics, then write its log line (so once the line is visible,
        so are the metrics)."""
        from aws_lambda_powertools.metrics import MetricUnit

        self.metrics.add_metric(name="Requests", unit=MetricUnit.Count, value=1)
        self.metrics.add_metric(
            name="Latency", unit=MetricUnit.Milliseconds, value=record.duration_ms
        )
        counts = {
            "InputTokens": record.input_tokens,
            "OutputTokens": record.output_tokens,
            "ToolCalls": record.tool_calls or None,
        }
        for name, value in counts.items():
            if value is not None:
                self.metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
        self.metrics.flush_metrics()
        if record.error_type is not None:
            self._dimensioned("Errors", MetricUnit.Count, 1, "ErrorType", record.error_type)
        fields = record.access_fields()
        fields.pop("api_key_id")  # appended as a key at the start of the request
        self.logger.info(
            "request",
            extra={**fields, "path": record.path, "error_type": record.error_type},
        )
        self.logger.remove_keys(["api_key_id", "lambda_request_id", "cold_start"])
        self.logger.set_correlation_id(None)

    def _dimensioned(self, name: str, unit: Any, value: float, dimension: str, label: str) -> None:
        """One metric in its own EMF document, with one dimension beyond the function's."""
        from aws_lambda_powertools.metrics import single_metric

        with single_metric(
            name=name,
            unit=unit,
            value=value,
            namespace=self.namespace,
            default_dimensions=self._dimensions,
        ) as metric:
            metric.add_dimension(name=dimension, value=label)

    def usage_recorded(self, entry: UsageEntry) -> None:
        """Metrics of one response the ledger counted: tokens, cost and calls by model, and
        background runs by status (one EMF document each)."""
        from aws_lambda_powertools.metrics import MetricUnit

        counts = entry.counts
        by_model = {
            "ModelInputTokens": counts.input_tokens,
            "ModelOutputTokens": counts.output_tokens,
            "ModelCalls": counts.model_calls,
            "GatewayToolCalls": counts.tool_calls,
            "ModelCostUSD": float(counts.cost_usd),
        }
        for name, value in by_model.items():
            self._dimensioned(
                name,
                MetricUnit.Count if name != "ModelCostUSD" else MetricUnit.NoUnit,
                value,
                "Model",
                entry.model[:250] or "unknown",
            )
        if entry.background:
            self._dimensioned("BackgroundRuns", MetricUnit.Count, 1, "Status", entry.status)

    def upstream_response(self, status: int, latency_ms: float) -> None:
        from aws_lambda_powertools.metrics import MetricUnit

        self.metrics.add_metric(
            name="UpstreamLatency", unit=MetricUnit.Milliseconds, value=latency_ms
        )
        if status >= 400:
            self._dimensioned("UpstreamErrors", MetricUnit.Count, 1, "Status", str(status))


def make_telemetry(function: FunctionKind) -> Telemetry:
    """Powertools telemetry when the package is importable, else :class:`NullTelemetry`."""
    try:
        return PowertoolsTelemetry(function)
    except ImportError:
        return NullTelemetry()


# -- the ASGI middleware ----------------------------------------------------------------------


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _json_object(text: str | None) -> Mapping[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, Mapping) else None


def _error_type(error: Any) -> str | None:
    if not isinstance(error, Mapping):
        return None
    for key in ("code", "type"):
        value = error.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _count_response(record: RequestRecord, response: Any) -> None:
    if not isinstance(response, Mapping):
        return
    model = response.get("model")
    if isinstance(model, str):
        record.model = model[:256]
    usage = response.get("usage")
    if isinstance(usage, Mapping):
        for field_name in ("input_tokens", "output_tokens"):
            value = usage.get(field_name)
            if isinstance(value, int):
                setattr(record, field_name, value)
    output = response.get("output")
    if isinstance(output, list):
        record.tool_calls = sum(
            1
            for item in output
            if isinstance(item, Mapping) and item.get("type") == "function_call"
        )
    if response.get("status") == "failed" and record.error_type is None:
        record.error_type = _error_type(response.get("error")) or "response_failed"


class _ResponseProbe:
    """Watches the messages an app sends and fills a :class:`RequestRecord` from them: the
    status, an error envelope's code, and the usage and tool calls of a created response (the
    JSON body, or the terminal SSE event). Bodies are parsed, never stored or logged."""

    def __init__(self, record: RequestRecord, is_create: bool) -> None:
        self._record = record
        self._is_create = is_create
        self._mode: Literal["skip", "json", "sse"] = "skip"
        self._buffer = bytearray()
        self._frame = bytearray()

    def observe(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._start(int(message["status"]), message.get("headers", ()))
        elif message["type"] == "http.response.body" and self._mode != "skip":
            self._body(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                self._end()

    def _start(self, status: int, headers: Any) -> None:
        self._record.status = status
        content_type = ""
        for key, value in headers:
            name = bytes(key).lower()
            if name == b"content-type":
                content_type = bytes(value).decode("latin-1").lower()
            elif name == b"x-request-id" and self._record.request_id is None:
                self._record.request_id = bytes(value).decode("latin-1")[:128]
            elif name == b"x-gateway-deployment":
                self._record.deployment = bytes(value).decode("latin-1")[:256]
        if content_type.startswith("text/event-stream"):
            self._record.streamed = True
            self._mode = "sse" if self._is_create else "skip"
        elif content_type.startswith("application/json") and (status >= 400 or self._is_create):
            self._mode = "json"

    def _body(self, chunk: bytes) -> None:
        if self._mode == "json":
            if len(self._buffer) + len(chunk) > _JSON_LIMIT:
                self._mode = "skip"
                self._buffer.clear()
            else:
                self._buffer += chunk
            return
        self._frame += chunk
        while True:
            end = self._frame.find(b"\n\n")
            if end < 0:
                break
            frame = bytes(self._frame[:end])
            del self._frame[: end + 2]
            self._sse_frame(frame)

    def _sse_frame(self, frame: bytes) -> None:
        event = data = b""
        for line in frame.split(b"\n"):
            if line.startswith(b"event:"):
                event = line[6:].strip()
            elif line.startswith(b"data:"):
                data = line[5:].strip()
        if event == b"error":
            payload = _json_object(data.decode("utf-8", "replace"))
            self._record.error_type = _error_type(payload) or "stream_error"
        elif event in _TERMINAL_EVENTS:
            payload = _json_object(data.decode("utf-8", "replace"))
            if payload is not None:
                _count_response(self._record, payload.get("response"))

    def _end(self) -> None:
        if self._mode != "json":
            return
        payload = _json_object(self._buffer.decode("utf-8", "replace"))
        self._buffer.clear()
        if payload is None:
            return
        if self._record.status >= 400:
            self._record.error_type = _error_type(payload.get("error")) or str(self._record.status)
        elif payload.get("object") == "response":
            _count_response(self._record, payload)


class TelemetryMiddleware:
    """Reports every HTTP request (readiness checks aside) to a :class:`Telemetry`, and calls
    ``on_first_request`` when the first one arrives (the store's prefetch: it then overlaps the
    first request's upstream call instead of slowing the readiness check)."""

    def __init__(
        self,
        app: ASGIApp,
        telemetry: Telemetry,
        *,
        trust_lambda_context: bool = False,
        on_first_request: Callable[[], None] | None = None,
    ) -> None:
        self.app = app
        self.telemetry = telemetry
        self.trust_lambda_context = trust_lambda_context
        self._on_first_request = on_first_request
        self._cold = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _UNOBSERVED_PATHS:
            await self.app(scope, receive, send)
            return
        first, self._on_first_request = self._on_first_request, None
        if first is not None:
            first()
        started = time.perf_counter()
        record = self._record(scope)
        probe = _ResponseProbe(
            record, is_create=scope["method"] == "POST" and scope["path"] == _CREATE_PATH
        )

        async def observed_send(message: Message) -> None:
            probe.observe(message)
            await send(message)

        self.telemetry.request_started(record)
        try:
            await self.app(scope, receive, observed_send)
        finally:
            record.duration_ms = (time.perf_counter() - started) * 1000
            identity = (scope.get("state") or {}).get("identity")
            if identity is not None:
                record.tenant = getattr(identity, "tenant", None)
                record.api_key_id = (
                    record.api_key_id or getattr(identity, "api_key_id", None) or None
                )
            try:
                self.telemetry.request_finished(record)
            except Exception:  # telemetry never fails a request
                logger.exception("telemetry failed")

    def _record(self, scope: Scope) -> RequestRecord:
        record = RequestRecord(method=scope["method"], path=scope["path"], cold_start=self._cold)
        self._cold = False
        context: Any = None
        event = scope.get("aws.event")
        if isinstance(event, Mapping):
            context = event.get("requestContext")
            lambda_context = scope.get("aws.context")
            record.lambda_request_id = getattr(lambda_context, "aws_request_id", None)
        elif self.trust_lambda_context:
            context = _json_object(_header(scope, REQUEST_CONTEXT_HEADER.encode()))
            lambda_header = _json_object(_header(scope, b"x-amzn-lambda-context"))
            if lambda_header is not None:
                value = lambda_header.get("request_id")
                record.lambda_request_id = value if isinstance(value, str) else None
        if isinstance(context, Mapping):
            request_id = context.get("requestId")
            record.request_id = request_id if isinstance(request_id, str) else None
            record.api_key_id = api_key_id(context)
        if record.request_id is None:
            client_id = _header(scope, b"x-request-id")
            record.request_id = client_id[:128] if client_id else None
        return record


# -- upstream timing ---------------------------------------------------------------------------


class _UpstreamTimer:
    """httpx event hooks: upstream latency (request sent to response headers) and status."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._telemetry = telemetry
        self._started: weakref.WeakKeyDictionary[httpx.Request, float] = weakref.WeakKeyDictionary()

    async def on_request(self, request: httpx.Request) -> None:
        self._started[request] = time.perf_counter()

    async def on_response(self, response: httpx.Response) -> None:
        started = self._started.pop(response.request, None)
        if started is not None:
            latency = (time.perf_counter() - started) * 1000
            self._telemetry.upstream_response(response.status_code, latency)


def upstream_client(
    telemetry: Telemetry, *, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The upstream HTTP client ``create_app`` would make (same timeouts and limits), reporting
    each upstream response's latency and status to ``telemetry``."""
    timer = _UpstreamTimer(telemetry)
    return upstream_http_client(
        transport=transport,
        event_hooks={"request": [timer.on_request], "response": [timer.on_response]},
    )


# -- configuration and the store ---------------------------------------------------------------


def _secret_text(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.startswith("{"):
        document = _json_object(text)
        key = document.get("api_key") if document is not None else None
        return key.strip() if isinstance(key, str) and key.strip() else None
    return text or None


def upstream_api_key(env: Mapping[str, str]) -> str | None:
    """The upstream key named by ``UPSTREAM_API_KEY_PARAMETER`` (SSM SecureString) or
    ``UPSTREAM_API_KEY_SECRET`` (Secrets Manager), read through Powertools Parameters (cached for
    five minutes); None when neither is set.

    Raises:
        ConfigError: both are set, Powertools is missing, or the value cannot be read (the
            message names the parameter, never its value).
    """
    parameter = env.get(KEY_PARAMETER_ENV, "").strip()
    secret = env.get(KEY_SECRET_ENV, "").strip()
    if parameter and secret:
        raise ConfigError(f"set {KEY_PARAMETER_ENV} or {KEY_SECRET_ENV}, not both")
    if not parameter and not secret:
        return None
    from responses_gateway.aws_values import read_value

    try:
        value: Any = (
            read_value("parameter", parameter) if parameter else read_value("secret", secret)
        )
    except ImportError as exc:
        raise ConfigError("reading the upstream key needs aws-lambda-powertools") from exc
    except Exception as exc:
        where = f"SSM parameter {parameter}" if parameter else f"secret {secret}"
        raise ConfigError(f"cannot read the upstream key from {where}: {type(exc).__name__}") from (
            None
        )
    key = _secret_text(value)
    if key is None:
        where = f"SSM parameter {parameter}" if parameter else f"secret {secret}"
        raise ConfigError(f"{where} holds no upstream key")
    return key


def _read_secret(kind: str, name: str, where: str) -> str:
    """A value from SSM (``parameter``, decrypted) or Secrets Manager (``secret``) through
    Powertools Parameters (cached five minutes).

    Raises:
        ConfigError: unreadable (the message names ``where`` and the name, never a value).
    """
    from responses_gateway.aws_values import read_value

    try:
        value: Any = read_value("parameter" if kind == "parameter" else "secret", name)
    except ImportError as exc:
        raise ConfigError(f"{where}: reading {name} needs aws-lambda-powertools") from exc
    except Exception as exc:
        label = "SSM parameter" if kind == "parameter" else "secret"
        raise ConfigError(f"{where}: cannot read {label} {name}: {type(exc).__name__}") from None
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: {name} is empty")
    return value


_PROVIDER_SECRETS = (("api_key_parameter", "parameter"), ("api_key_secret", "secret"))
"""Provider fields naming where its key lives, for deployed configurations."""


def _resolve_provider_keys(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each provider's ``api_key_parameter`` / ``api_key_secret`` replaced by the
    ``api_key`` it names (read now, at cold start)."""
    providers = data.get("providers")
    if not isinstance(providers, list):
        return data
    resolved = []
    for index, raw in enumerate(providers):
        if not isinstance(raw, dict):
            resolved.append(raw)
            continue
        provider = dict(raw)
        named = [(field, kind) for field, kind in _PROVIDER_SECRETS if provider.get(field)]
        if len(named) > 1 or (named and provider.get("api_key")):
            raise ConfigError(
                f"providers[{index}]: give one of api_key, api_key_parameter, api_key_secret"
            )
        for field_name, kind in named:
            name = provider.pop(field_name)
            if not isinstance(name, str):
                raise ConfigError(f"providers[{index}].{field_name} must be a string")
            text = _read_secret(kind, name, f"providers[{index}].{field_name}")
            key = _secret_text(text)
            if key is None:
                raise ConfigError(f"providers[{index}].{field_name}: {name} holds no key")
            provider["api_key"] = key
        resolved.append(provider)
    return {**data, "providers": resolved}


def load_lambda_config(env: Mapping[str, str]) -> GatewayConfig:
    """The gateway's configuration as a deployed function loads it, at cold start:

    - ``GATEWAY_CONFIG_PARAMETER``: the whole configuration (JSON or TOML) from that SSM
      parameter; or ``GATEWAY_CONFIG``: from that file (shipped with the build);
      providers may name their key with ``api_key_parameter`` (SSM SecureString) or
      ``api_key_secret`` (Secrets Manager), read now;
    - otherwise one provider from ``UPSTREAM_*``, its key from ``UPSTREAM_API_KEY_PARAMETER`` /
      ``UPSTREAM_API_KEY_SECRET``.

    Raises:
        ConfigError: no upstream configured, a key or the parameter cannot be read, or the
            configuration breaks a rule (the message names the source and the field).
    """
    parameter = env.get(CONFIG_PARAMETER_ENV, "").strip()
    path = env.get("GATEWAY_CONFIG", "").strip()
    if parameter or path:
        if parameter:
            source = f"SSM parameter {parameter}"
            text = _read_secret("parameter", parameter, CONFIG_PARAMETER_ENV)
        else:
            source = path
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read GATEWAY_CONFIG {path}: {exc.strerror}") from None
        data = _resolve_provider_keys(config_document(text, source))
        return parse_config_data(data, source, env)
    key = upstream_api_key(env)
    if key is not None:
        env = {**env, "UPSTREAM_API_KEY": key}
    config = load_config(env)
    if config is None:
        raise ConfigError("set UPSTREAM_BASE_URL or GATEWAY_CONFIG for the deployed gateway")
    return config


class LazyStore:
    """A store built on first use, or ahead of time in a background thread (:meth:`prefetch`).

    Building the DynamoDB store imports its modules and builds its HTTP client, with the TLS
    context of an https endpoint (tens of milliseconds; no botocore); deferring it keeps startup
    fast, and prefetching when the first request arrives overlaps it with that request's parsing
    and validation. Attribute access is delegated to the built store.
    """

    def __init__(self, factory: Callable[[], Store]) -> None:
        self._factory = factory
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._flag_lock = threading.Lock()
        self._prefetching = False

    @property
    def built(self) -> bool:
        """Whether the store exists yet."""
        return self._store is not None

    def get(self) -> Store:
        """The store, built now if needed (a failed build is retried on the next call)."""
        store = self._store
        if store is not None:
            return store
        with self._lock:
            if self._store is None:
                self._store = self._factory()
            return self._store

    def prefetch(self) -> None:
        """Start building the store in a daemon thread (once; failures surface on use)."""
        with self._flag_lock:  # never waits for a build in progress
            if self._prefetching or self._store is not None:
                return
            self._prefetching = True

        def build() -> None:
            try:
                self.get()
            except Exception:
                logger.warning("store prefetch failed; retrying on first use", exc_info=True)

        threading.Thread(target=build, name="store-prefetch", daemon=True).start()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


def _store_factory(env: Mapping[str, str]) -> Callable[[], Store]:
    if not env.get("DYNAMODB_TABLE"):
        raise ConfigError("DYNAMODB_TABLE is not set")

    def build() -> Store:
        from responses_gateway.store.dynamo import DynamoStore

        return DynamoStore.from_env(env)

    return build


# -- the entry points' app and handler ---------------------------------------------------------


def lambda_app(
    function: FunctionKind,
    env: Mapping[str, str] | None = None,
    *,
    telemetry: Telemetry | None = None,
) -> TelemetryMiddleware:
    """The gateway app as a deployed function serves it, built from ``env`` (default: the process
    environment). Fails fast (at init) on a bad configuration.

    The functions that run the loop (streaming, worker, socket) read the sealing keys here too
    (``GATEWAY_SEALING_KEYS_SECRET``, see :mod:`responses_gateway.sealing`) and import the
    create path (:func:`~responses_gateway.app.preload_create_path`), so their first create
    does not; the buffered function serves no create and never imports it.

    Raises:
        ConfigError: no upstream, no ``DYNAMODB_TABLE`` or an unreadable upstream key.
        TenancyConfigError: malformed ``GATEWAY_API_KEYS``.
        SealingConfigError: unreadable or malformed sealing keys.
    """
    from responses_gateway.app import create_app, preload_create_path

    env = dict(os.environ if env is None else env)
    policy = TenancyPolicy.from_env(env)
    telemetry = make_telemetry(function) if telemetry is None else telemetry
    config = load_lambda_config(env)
    if function != "buffered":  # it serves no create: the create path stays unimported
        from responses_gateway.sealing import configure

        configure(env)
        preload_create_path()
    store = LazyStore(_store_factory(env))
    client = None if isinstance(telemetry, NullTelemetry) else upstream_client(telemetry)
    app = create_app(config, cast("Store", store), client=client)
    app.state.tenancy = policy
    usage_recorded = getattr(telemetry, "usage_recorded", None)
    if callable(usage_recorded):
        app.state.gateway.usage_observers.append(usage_recorded)
    app.state.lazy_store = store
    return TelemetryMiddleware(
        app,
        telemetry,
        trust_lambda_context=policy.trust_lambda_context,
        on_first_request=store.prefetch,
    )


def mangum_handler(app: TelemetryMiddleware) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """The buffered function's handler: ``app`` through Mangum (API Gateway REST events, lifespan
    off so nothing is torn down between invocations, one event loop for the life of the
    process) and the
    Powertools Tracer around it when ``aws_xray_sdk`` is importable (X-Ray subsegments for
    DynamoDB calls); ``POWERTOOLS_TRACE_DISABLED=true`` turns that off."""
    from mangum import Mangum

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    adapter = Mangum(app, lifespan="off")

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        # Mangum runs each event on the thread's current loop: make it this one, every time, so
        # the upstream client's connections and the store's futures always meet the same loop.
        asyncio.set_event_loop(loop)
        return adapter(event, context)

    tracing_off = os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() in ("1", "true")
    if tracing_off or isinstance(app.telemetry, NullTelemetry):
        return handler
    if importlib.util.find_spec("aws_xray_sdk") is None:
        return handler
    from aws_lambda_powertools import Tracer

    tracer = Tracer(patch_modules=["botocore"])
    traced: Callable[[dict[str, Any], Any], dict[str, Any]] = tracer.capture_lambda_handler(
        handler, capture_response=False
    )
    return traced
