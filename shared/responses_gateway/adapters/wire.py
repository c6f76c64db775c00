"""Helpers every adapter needs to reach an upstream and read its answer safely.

Owns :class:`UpstreamEndpoint` (where an adapter posts, with which key, headers and timeout, and
how HTTP and transport failures map to :mod:`responses_gateway.errors`), plus two small rules
shared by all wire formats: upstream JSON is decoded so that no lone UTF-16
surrogate (a JSON escape like ``"\\ud83d"`` with no partner) survives into our own output, which
no UTF-8 encoder accepts; and which headers of an upstream HTTP error are passed on to the client
(``retry-after``, so the SDK's backoff honours the provider's). Nothing here parses a wire format;
the one rule about a wire's chunks kept here is which chunk of an OpenAI-style completions stream
is a data event (:func:`is_data_chunk`), so that both wires that speak it classify alike.

Upstreams that cannot stream a request are still served (:func:`read_model_answer`, per provider
``streaming``): ``auto`` (the default) streams, and when the stream breaks before its first data
event (:func:`decide_after_break`: llama-cpp-python's server answers 200 to tools with
``tool_choice: "auto"``, starts its event stream, then raises inside it and drops the connection
mid-body) sends the same request once more unstreamed, and when a server answers a streamed
request with JSON it reads that JSON; ``off`` always calls unstreamed; ``on`` never falls back.

Failures are classified by what happened (:func:`break_point`), not by their shape, so that any
adapter (one with its own SDK included) can ask the same question: was the upstream never reached
(``unreached``: connect errors, timeouts, HTTP error statuses: the error as it is), did its
answer break before any data event (``before_data``: a connection closed, reset or truncated, a
chunked body cut short, an undecodable or error event, a 200 with an error object or no event at
all, or a stream that ends with no data event: in ``auto`` the one unstreamed retry, else the
error), or after data events
(``after_data``: the response ends ``failed`` with the cause in ``error.message``, which the
loop does for every error raised once output exists). A data event is one that carries output, a
finish or usage: the chunks a Chat Completions stream opens with (only the assistant ``role``,
empty content) are none, so llama-cpp-python's one-slot server, which answers a request arriving
while another generates with that role chunk and ``[DONE]``, gives the empty-stream case (never a
``completed`` response with no output), and a stream cut after them broke before its data.

Either way the answer reaches the wire's own stream parser: each adapter turns an unstreamed body
into the data events its stream would have held (``as_events``), so what the loop sees does not
depend on how the upstream answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import httpx

from responses_gateway.adapters.sse import cause_of
from responses_gateway.errors import (
    UpstreamError,
    UpstreamProtocolError,
    UpstreamStatusError,
    UpstreamTransportError,
)

if TYPE_CHECKING:
    from responses_gateway.loop.output import OutputWriter

NOT_A_STREAM = ("application/json", "text/html")
"""Content types of 2xx answers that are surely no event stream."""

Streaming = Literal["auto", "on", "off"]
"""How an adapter asks its upstream for an answer (the provider's ``streaming``)."""

AsEvents = Callable[[Any], list[str]]
"""An unstreamed answer (parsed JSON) as the data payloads its event stream would have held."""

logger = logging.getLogger(__name__)

__all__ = [
    "BREAK_POINTS",
    "NOT_A_STREAM",
    "AsEvents",
    "BreakPoint",
    "CallProgress",
    "EndpointAdapter",
    "EventConsumer",
    "NoEventStream",
    "NotAnAnswer",
    "Streaming",
    "UpstreamEndpoint",
    "break_point",
    "call_failed",
    "clean_surrogates",
    "decide_after_break",
    "finish_reading",
    "is_data_chunk",
    "json_answer",
    "loads_json",
    "passed_headers",
    "read_event_stream",
    "read_model_answer",
    "unstreamed",
]

_TRAILER_WAIT = 0.5
"""Seconds to wait for the end of an upstream body once its terminal event arrived."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def clean_surrogates(value: Any) -> Any:
    """``value`` with every UTF-16 surrogate left in its strings replaced by U+FFFD.

    ``json.loads`` joins escaped surrogate pairs into one character, so any surrogate still in a
    decoded string is a lone one, which no UTF-8 encoder accepts.
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [clean_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {clean_surrogates(k): clean_surrogates(v) for k, v in value.items()}
    return value


_scan_value: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
"""The stdlib's C scanner, as ``json.loads`` runs it, without the wrapping around it."""


def loads_json(text: str) -> Any:
    """Upstream JSON, decoded with lone surrogates replaced (see :func:`clean_surrogates`).

    A document that is one value from its first character to its last (every event an upstream
    sends) is scanned directly; anything else (surrounding whitespace, an error) goes through
    ``json.loads``, which raises the same errors it always did.
    """
    try:
        value, end = _scan_value(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        value = json.loads(text)
    if text.isascii():  # no raw surrogate can be in it: only an escaped one
        if "\\u" in text and _ESCAPED_SURROGATE.search(text):
            return clean_surrogates(value)
        return value
    if _ESCAPED_SURROGATE.search(text) or _SURROGATE.search(text):
        return clean_surrogates(value)
    return value


_PASSED = ("retry-after", "retry-after-ms")


def passed_headers(response: httpx.Response) -> dict[str, str]:
    """The headers of an upstream error response that the client should see too."""
    return {name: response.headers[name] for name in _PASSED if name in response.headers}


async def finish_reading(events: AsyncIterator[Any]) -> None:
    """Read an upstream stream to its end after the terminal event, briefly.

    The body usually ends right after its terminal event (the chunked-encoding trailer is still
    in flight). Reading it lets the HTTP client put the connection back in its pool instead of
    closing it, which saves a TCP (and TLS) handshake on the next model call. An upstream that
    keeps the body open is given up on after a short wait; nothing it sends is used.
    """
    with contextlib.suppress(Exception):
        async with asyncio.timeout(_TRAILER_WAIT):
            async for _ in events:
                pass


def _parsed(url: str) -> httpx.URL | None:
    try:
        return httpx.URL(url)
    except httpx.InvalidURL:  # left to the call, which fails as it always did
        return None


@dataclass(frozen=True, slots=True)
class UpstreamEndpoint:
    """One upstream endpoint an adapter streams from."""

    client: httpx.AsyncClient
    url: str
    headers: dict[str, str]
    timeout: httpx.Timeout | None
    """Seconds to wait for upstream bytes (connecting: 10 s); None keeps the client's own."""
    target: httpx.URL | None = None
    """``url`` parsed once (every call would parse the string again); None: parse ``url``."""
    auth: httpx.Auth | None = None
    """Signs each request (SigV4 for Bedrock's OpenAI-compatible endpoints); None: the key."""

    @classmethod
    def at(
        cls,
        client: httpx.AsyncClient,
        base_url: str,
        path: str,
        api_key: str | None,
        headers: dict[str, str] | None,
        timeout: float | None,
        auth: httpx.Auth | None = None,
    ) -> UpstreamEndpoint:
        """``{base_url}{path}``, with ``Authorization: Bearer`` only when a key is set."""
        merged = {"Accept": "text/event-stream", **(headers or {})}
        if api_key:
            merged["Authorization"] = f"Bearer {api_key}"
        url = base_url.rstrip("/") + path
        return cls(
            client=client,
            url=url,
            headers=merged,
            timeout=None if timeout is None else httpx.Timeout(timeout, connect=10.0),
            target=_parsed(url),
            auth=auth,
        )

    @contextlib.asynccontextmanager
    async def stream(
        self, payload: dict[str, Any], status_error: Callable[[int, str], UpstreamStatusError]
    ) -> AsyncIterator[httpx.Response]:
        """POST ``payload`` and yield the 2xx streaming response.

        Raises:
            UpstreamStatusError: a non-2xx answer (built by ``status_error`` from the status and
                body), before anything was yielded; it carries the headers the client may see.
            UpstreamTransportError: the upstream could not be reached, timed out (before or
                during the stream) or dropped the connection.
            UpstreamProtocolError: the body could not be decoded.
        """
        timeout = httpx.USE_CLIENT_DEFAULT if self.timeout is None else self.timeout
        auth = httpx.USE_CLIENT_DEFAULT if self.auth is None else self.auth
        try:
            async with self.client.stream(
                "POST",
                self.target or self.url,
                json=payload,
                headers=self.headers,
                timeout=timeout,
                auth=auth,
            ) as response:
                if not response.is_success:
                    raw = (await response.aread()).decode("utf-8", errors="replace")
                    error = status_error(response.status_code, raw)
                    error.headers.update(passed_headers(response))
                    raise error
                yield response
        except UpstreamTransportError as exc:  # from the SSE reader: say so if it was a timeout
            cause = exc.__cause__
            if not isinstance(cause, httpx.TimeoutException):
                raise
            raise UpstreamTransportError(
                f"The upstream model timed out mid-stream: {type(cause).__name__}"
            ) from cause
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise call_failed(exc) from exc

    async def post_json(
        self, payload: dict[str, Any], status_error: Callable[[int, str], UpstreamStatusError]
    ) -> Any:
        """POST ``payload`` unstreamed and return its 2xx JSON answer, decoded.

        Raises:
            UpstreamStatusError: a non-2xx answer (as :meth:`stream` raises it).
            UpstreamTransportError: the upstream could not be reached, timed out or dropped.
            UpstreamProtocolError: the answer is not JSON.
        """
        headers = {**self.headers, "Accept": "application/json"}
        timeout = httpx.USE_CLIENT_DEFAULT if self.timeout is None else self.timeout
        auth = httpx.USE_CLIENT_DEFAULT if self.auth is None else self.auth
        try:
            response = await self.client.post(
                self.target or self.url, json=payload, headers=headers, timeout=timeout, auth=auth
            )
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise call_failed(exc) from exc
        if not response.is_success:
            error = status_error(response.status_code, response.text)
            error.headers.update(passed_headers(response))
            raise error
        return json_answer(response.text)


_UNREACHED = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
)
"""Transport failures that mean the upstream never saw the request (no connection was made)."""


def call_failed(
    exc: httpx.TransportError | httpx.DecodingError,
) -> UpstreamTransportError | UpstreamProtocolError:
    """What an HTTP failure of a model call (streamed or not) is, in the gateway's terms (its
    ``__cause__`` is what :func:`break_point` reads: raise it ``from exc``)."""
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamTransportError(f"The upstream model timed out: {type(exc).__name__}")
    if isinstance(exc, _UNREACHED):
        return UpstreamTransportError(
            f"The upstream model could not be reached: {type(exc).__name__}"
        )
    if isinstance(exc, httpx.TransportError):
        return UpstreamTransportError(
            f"The upstream model dropped the connection before answering: {cause_of(exc)}"
        )
    return UpstreamProtocolError(
        f"The upstream response body could not be decoded: {cause_of(exc)}"
    )


BreakPoint = Literal["unreached", "before_data", "after_data"]
"""Where a model call broke: before the upstream took it (or with an HTTP error status), after
it answered 2xx (or took the connection) but before its first data event, or after data events."""
BREAK_POINTS: tuple[BreakPoint, ...] = ("unreached", "before_data", "after_data")


@dataclass(slots=True)
class CallProgress:
    """How far one model call got: whether its 2xx head arrived."""

    answered: bool = False


def break_point(error: UpstreamError, *, answered: bool, decoded: bool) -> BreakPoint:
    """Where the call that raised ``error`` broke: ``after_data`` once its parser took a data
    event (``decoded``), ``before_data`` once a 2xx head arrived (``answered``) or when the
    connection was taken and then closed or reset before any answer (a protocol or read error,
    not a refused connection or a timeout), else ``unreached`` (a connect error, a timeout before
    any answer, an HTTP error status)."""
    if decoded:
        return "after_data"
    if answered:
        return "before_data"
    cause = error.__cause__
    if (
        isinstance(error, UpstreamTransportError)
        and isinstance(cause, httpx.TransportError)
        and not isinstance(cause, (*_UNREACHED, httpx.TimeoutException))
    ):
        return "before_data"
    return "unreached"


def _timed_out(error: BaseException) -> bool:
    return isinstance(error.__cause__, httpx.TimeoutException)


def _rate_limited(error: UpstreamError) -> bool:
    return isinstance(error, UpstreamStatusError) and error.upstream_status == 429


def decide_after_break(streaming: Streaming, point: BreakPoint, error: UpstreamError) -> bool:
    """Whether a streamed call that broke at ``point`` is sent once more unstreamed: only in
    ``auto``, only before its first data event, never after a timeout (it would wait as long
    again), a rate limit (it says nothing of streaming) or a body that is no answer at all
    (:class:`NotAnAnswer`). Otherwise ``error`` is the answer."""
    return (
        streaming == "auto"
        and point == "before_data"
        and not isinstance(error, NotAnAnswer)
        and not _timed_out(error)
        and not _rate_limited(error)
    )


_OUTPUT_FIELDS = ("content", "text", "refusal", "reasoning_content", "reasoning")
"""The string fields of a completions choice (``text``) or chat delta that carry output."""


def is_data_chunk(chunk: dict[str, Any]) -> bool:
    """Whether one chunk of an OpenAI-style completions stream (Chat Completions, or the raw
    completions harmony reads) is a data event for :func:`break_point`: it carries ``usage``, or a
    choice with a ``finish_reason`` or output (non-empty text, refusal or reasoning, a tool
    call). A chunk with none of these (the opening ``{"role": "assistant"}`` delta, an empty
    text) leaves nothing to redo: a stream of only such chunks has no data event."""
    if isinstance(chunk.get("usage"), dict):
        return True
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        if choice.get("finish_reason") or _carries_output(choice):
            return True
        delta = choice.get("delta")
        if isinstance(delta, dict) and (
            _carries_output(delta) or delta.get("tool_calls") or delta.get("function_call")
        ):
            return True
    return False


def _carries_output(fields: dict[str, Any]) -> bool:
    return any(isinstance(fields.get(key), str) and fields[key] for key in _OUTPUT_FIELDS)


class NotAnAnswer(UpstreamProtocolError):
    """A 2xx body that is no model answer at all (HTML, JSON that does not parse): asked again,
    unstreamed, the upstream would send it again."""


def json_answer(text: str) -> Any:
    """A 2xx answer's JSON (:func:`loads_json`); text that is no JSON is :class:`NotAnAnswer`."""
    try:
        return loads_json(text)
    except ValueError as exc:
        raise NotAnAnswer("The upstream model answered with invalid JSON: " + text[:200]) from exc


class EndpointAdapter:
    """Base of the adapters that stream from one HTTP endpoint under ``base_url``.

    Args:
        client: the shared upstream HTTP client.
        base_url: the provider's base URL, including ``/v1``.
        api_key: sent as ``Authorization: Bearer`` when set.
        headers: extra headers for every call.
        timeout: seconds to wait for upstream bytes (connecting: 10 s); None keeps the
            client's own timeouts.
        streaming: how answers are asked for (:data:`Streaming`, the provider's ``streaming``).
        auth: signs each request (SigV4 against Bedrock's OpenAI-compatible endpoints).
    """

    path: ClassVar[str]
    """The endpoint's path under ``base_url`` (e.g. ``/responses``)."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        base_url: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
        streaming: Streaming = "auto",
        auth: httpx.Auth | None = None,
    ) -> None:
        self._endpoint = UpstreamEndpoint.at(
            client, base_url, self.path, api_key, headers, timeout, auth
        )
        self.streaming: Streaming = streaming


class EventConsumer(Protocol):
    """A wire parser fed one SSE ``data`` payload at a time."""

    @property
    def decoded(self) -> bool:
        """Whether any data event was taken (one that raised is not, nor one that carries no
        output, finish or usage: see :func:`is_data_chunk`)."""
        ...

    def feed(self, data: str, event: str = "message") -> bool:
        """Take one data payload (of an event named ``event``); True when the answer is complete
        (stop reading). A payload that raises leaves ``decoded`` as it was."""
        ...


class NoEventStream(UpstreamProtocolError):
    """A 2xx answer to a streamed call whose body held no data event (none at all, or only
    events without output, finish or usage)."""


async def read_event_stream(
    endpoint: UpstreamEndpoint,
    payload: dict[str, Any],
    status_error: Callable[[int, str], UpstreamStatusError],
    out: OutputWriter,
    consumer: EventConsumer,
    as_events: AsEvents | None = None,
    progress: CallProgress | None = None,
) -> None:
    """POST ``payload`` and feed the answer's SSE data events to ``consumer`` until it is done.

    A 2xx answer that is HTML, JSON (unless ``as_events`` reads it: a server that ignored
    ``stream``), or a stream without a single data event (:class:`NoEventStream`) is an
    :class:`UpstreamProtocolError`; the body is read to its end when the consumer stops early,
    so the connection is reused. ``progress`` records whether the 2xx head arrived.
    """
    from responses_gateway.adapters.sse import aiter_sse

    async with endpoint.stream(payload, status_error) as response:
        if progress is not None:
            progress.answered = True
        content_type = response.headers.get("content-type", "")
        if content_type.startswith(NOT_A_STREAM):
            await response.aread()
            if as_events is not None and content_type.startswith("application/json"):
                logger.info("the upstream answered a streamed call with JSON: reading that")
                answer = as_events(json_answer(response.text))
                out.upstream_responding()
                _feed(consumer, answer)
                return
            kind = "JSON" if content_type.startswith("application/json") else "HTML"
            raise NotAnAnswer(
                f"The upstream model answered with {kind} instead of an event stream: "
                + response.text[:200]
            )
        out.upstream_responding()
        # aiter_sse is an async generator: close it even when we stop early.
        async with contextlib.aclosing(aiter_sse(response)) as events:
            async for event in events:
                if consumer.feed(event.data, event.event):
                    await finish_reading(events)  # so the connection is reused
                    break
    if not consumer.decoded:
        raise NoEventStream(
            "The upstream model answered with no event stream: its body held no data event "
            "(no output, no finish_reason, no usage)."
        )


def _feed(consumer: EventConsumer, data: list[str]) -> None:
    for payload in data:
        if consumer.feed(payload):
            return


def unstreamed(payload: dict[str, Any]) -> dict[str, Any]:
    """A streamed request's payload, asking for one JSON answer instead."""
    plain = {key: value for key, value in payload.items() if key != "stream_options"}
    plain["stream"] = False
    return plain


async def read_model_answer(
    endpoint: UpstreamEndpoint,
    payload: dict[str, Any],
    status_error: Callable[[int, str], UpstreamStatusError],
    out: OutputWriter,
    consumer: EventConsumer,
    *,
    as_events: AsEvents,
    streaming: Streaming = "auto",
) -> None:
    """Read one model call's answer (``payload`` asks for a stream) into ``consumer``: streamed,
    or unstreamed as ``streaming`` says (see the module docstring).

    Raises:
        UpstreamStatusError: the upstream answered with an HTTP error.
        UpstreamTransportError: the upstream could not be reached, timed out or dropped.
        UpstreamProtocolError: no answer the wire's parser can read (also after the fallback).

    When the unstreamed retry gets no readable answer either, the stream's failure is raised.
    """
    broken: UpstreamError | None = None
    if streaming != "off":
        progress = CallProgress()
        try:
            await read_event_stream(
                endpoint,
                payload,
                status_error,
                out,
                consumer,
                as_events if streaming == "auto" else None,
                progress,
            )
            return
        except UpstreamError as error:
            point = break_point(error, answered=progress.answered, decoded=consumer.decoded)
            if not decide_after_break(streaming, point, error):
                raise
            logger.warning(
                "the upstream's stream broke before its first data event (%s): "
                "calling it again unstreamed",
                error.message,
            )
            broken = error
    try:
        answer = as_events(await _post_unstreamed(endpoint, payload, status_error, broken))
    except NotAnAnswer:
        if broken is None:
            raise
        raise broken from None  # no readable answer either: the stream's own failure says more
    out.upstream_responding()
    _feed(consumer, answer)
    if not consumer.decoded:
        raise UpstreamProtocolError("The upstream model's unstreamed answer held no output.")


async def _post_unstreamed(
    endpoint: UpstreamEndpoint,
    payload: dict[str, Any],
    status_error: Callable[[int, str], UpstreamStatusError],
    broken: UpstreamError | None,
) -> Any:
    """The unstreamed call; after a broken stream, sent once more when the connection it took was
    closed before any answer: a server that aborts a stream (llama-cpp-python's does) closes its
    connection, which the pool may hand to this very call before the close reaches it."""
    try:
        return await endpoint.post_json(unstreamed(payload), status_error)
    except UpstreamTransportError as error:
        # httpx's words for a kept-alive connection the server had closed: nothing was answered
        if broken is None or not isinstance(error.__cause__, httpx.RemoteProtocolError):
            raise
        logger.warning("the unstreamed call met a closed connection (%s): once more", error.message)
        return await endpoint.post_json(unstreamed(payload), status_error)
