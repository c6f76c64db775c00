"""Which MCP server URLs the gateway may dial, and dialling only the address that was checked.

Owns the SSRF guard for user-supplied ``server_url`` values: :func:`check_server_url` validates
the URL (https only unless allowed, no credentials in it, an ASCII host, no numeric tricks such as
``2852039166`` or ``127.1``), resolves the host off the event loop and refuses the URL unless every
address is global: loopback (unless :attr:`McpPolicy.allow_loopback`), private, link-local,
CGNAT, ``0.0.0.0/8``, multicast, reserved, unique-local (``fd00:ec2::/32`` included) and IPv6
forms that embed an IPv4 address (``::ffff:169.254.169.254``, NAT64, 6to4, Teredo) are judged by
that embedded address. It returns a :class:`ResolvedTarget`, and :func:`pinned_transport` builds
the ``httpx`` transport that connects to that target's checked address (keeping the ``Host``
header and TLS server name of the URL), so a DNS answer that changes between the check and the
connection (DNS rebinding) is never followed; :func:`bounded_transport` is the unpinned variant
for operator-configured servers, which are trusted and not checked. Both bound every response
body and build their TLS context off the event loop, once per process. It also owns
:func:`redact_url` for logs and the log filter that applies it to the ``httpx`` and ``httpcore``
loggers (MCP URLs may carry a key in their query).

It must not send a packet before a URL passed the check, must not trust proxy environment
variables, and must not put secrets or resolved addresses in user-facing messages. Importing it
imports nothing the app has not (``httpx`` is the upstream client's).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import os
import re
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from responses_gateway.errors import GatewayError

__all__ = [
    "McpPolicy",
    "McpUrlRefusedError",
    "UNBOUNDED_STREAM",
    "RefusalReason",
    "ResolvedTarget",
    "Resolver",
    "ResponseTooLargeError",
    "bounded_transport",
    "check_server_url",
    "install_log_redaction",
    "is_address_allowed",
    "pinned_transport",
    "redact_url",
]

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses``: how a host name becomes IP address strings. The default runs
``getaddrinfo`` in the event loop's executor; tests inject a fake DNS."""

RefusalReason = Literal[
    "malformed",
    "scheme",
    "credentials",
    "host",
    "host_not_allowed",
    "unresolvable",
    "address",
]

_DEFAULT_PORTS = {"http": 80, "https": 443}

_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+))*\.?$", re.IGNORECASE)
"""Anything ``inet_aton`` might read as an IPv4 address: decimal, octal or hex parts."""

_HOST_CHARS = re.compile(r"^[a-z0-9._-]+$")

_ALWAYS_BLOCKED: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = (
    ipaddress.ip_network("0.0.0.0/8"),
    ipaddress.ip_network("100.64.0.0/10"),
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("192.0.0.0/24"),
    ipaddress.ip_network("192.88.99.0/24"),
    ipaddress.ip_network("fc00::/7"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fec0::/10"),
)
"""Ranges refused whatever ``ipaddress`` says about them (it does not know all of them, e.g.
multicast counts as global there). ``fd00:ec2::/32`` (the AWS metadata service) is in fc00::/7."""

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class McpUrlRefusedError(GatewayError):
    """An MCP server URL the gateway will not dial (checked before any packet is sent).

    The message says why in terms of the URL only; it never names the addresses a host resolved
    to (that would turn the gateway into an internal DNS oracle).
    """

    status_code = 400
    error_type = "invalid_request_error"

    def __init__(self, message: str, reason: RefusalReason) -> None:
        super().__init__(message, code="invalid_mcp_server_url", param="tools")
        self.reason: RefusalReason = reason
        """A stable code for the refusal (``scheme``, ``address``, ``unresolvable``...)."""


@dataclass(frozen=True, slots=True)
class McpPolicy:
    """Which MCP servers may be dialled. The default is the strict production policy."""

    allow_http: bool = False
    """Allow ``http://`` URLs (``MCP_ALLOW_HTTP``); otherwise https only."""
    allow_loopback: bool = False
    """Allow loopback addresses (127.0.0.0/8, ::1) for local development (``MCP_ALLOW_LOOPBACK``).
    No other non-global address is ever allowed."""
    allowed_hosts: frozenset[str] | None = None
    """When set (``MCP_ALLOWED_HOSTS``, comma-separated), only these hosts may be dialled: an
    exact host name, or ``.example.com`` / ``*.example.com`` for every subdomain of it. The
    address checks still apply to allowed hosts."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> McpPolicy:
        """Read ``MCP_ALLOW_HTTP``, ``MCP_ALLOW_LOOPBACK`` and ``MCP_ALLOWED_HOSTS``.

        Raises:
            ValueError: a boolean variable is set to something other than
                ``1/0/true/false/yes/no/on/off`` (an operator typo must not relax the policy
                silently, nor tighten it without a word).
        """
        env = os.environ if environ is None else environ
        hosts_value = env.get("MCP_ALLOWED_HOSTS", "").strip()
        hosts = frozenset(h.strip().lower() for h in hosts_value.split(",") if h.strip())
        return cls(
            allow_http=_env_flag(env, "MCP_ALLOW_HTTP"),
            allow_loopback=_env_flag(env, "MCP_ALLOW_LOOPBACK"),
            allowed_hosts=hosts or None,
        )

    def host_allowed(self, host: str) -> bool:
        """Whether ``host`` (lower-case, as in the URL) passes :attr:`allowed_hosts`."""
        if self.allowed_hosts is None:
            return True
        for entry in self.allowed_hosts:
            if entry.startswith("*."):
                entry = entry[1:]
            if entry.startswith("."):
                if host.endswith(entry) and len(host) > len(entry):
                    return True
            elif host == entry:
                return True
        return False


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    """A URL that passed :func:`check_server_url`, with the address to connect to."""

    url: str
    """The URL as given (never logged as is: use :func:`redact_url`)."""
    scheme: Literal["http", "https"]
    host: str
    """The host as in the URL, lower-case, without brackets for IPv6 literals."""
    port: int
    """The port, the scheme's default when the URL has none."""
    addresses: tuple[str, ...]
    """Every address the host resolved to; all of them passed the check."""

    @property
    def address(self) -> str:
        """The address connections go to (the first one resolved)."""
        return self.addresses[0]


def redact_url(url: str) -> str:
    """``url`` for logs: scheme, host, port and path, without userinfo, query or fragment.

    A path can still carry a secret on servers that put keys in it; log the server label when
    in doubt.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<malformed url>"
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port is not None else "")
    return f"{parts.scheme}://{netloc}{parts.path}"


def is_address_allowed(address: str | IPAddress, *, allow_loopback: bool = False) -> bool:
    """Whether an MCP server may be dialled at ``address`` (an IP address, never a host name)."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:  # a zone id only makes sense for link-local and loopback use
            return False
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return is_address_allowed(embedded, allow_loopback=allow_loopback)
    if ip.is_loopback:
        return allow_loopback
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved or ip.is_link_local:
        return False
    if any(ip in network for network in _ALWAYS_BLOCKED):
        return False
    return ip.is_global


async def check_server_url(
    url: str, policy: McpPolicy, *, resolve: Resolver | None = None
) -> ResolvedTarget:
    """Validate ``url`` against ``policy`` and resolve it to addresses that may be dialled.

    Nothing is sent to the server: the only network activity is the DNS lookup of a host name
    (IP literals are not looked up at all).

    Raises:
        McpUrlRefusedError: the URL is malformed, uses a refused scheme, carries credentials,
            names a host outside :attr:`McpPolicy.allowed_hosts`, does not resolve, or resolves
            to any address that :func:`is_address_allowed` refuses.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError:
        raise McpUrlRefusedError("The MCP server URL is malformed.", "malformed") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise McpUrlRefusedError("The MCP server URL must use https.", "scheme")
    if scheme == "http" and not policy.allow_http:
        raise McpUrlRefusedError("The MCP server URL must use https, not http.", "scheme")
    if parts.username is not None or parts.password is not None:
        raise McpUrlRefusedError(
            "The MCP server URL must not contain credentials; use 'authorization' or 'headers'.",
            "credentials",
        )
    if not host:
        raise McpUrlRefusedError("The MCP server URL has no host.", "malformed")
    literal = _ip_literal(host)
    if literal is None:
        _check_host_name(host)
    if not policy.host_allowed(host):
        raise McpUrlRefusedError(
            "The MCP server host is not in the allowed hosts.", "host_not_allowed"
        )
    effective_port = port if port is not None else _DEFAULT_PORTS[scheme]
    if literal is not None:
        addresses: Sequence[str] = [str(literal)]
    else:
        try:
            addresses = await (resolve or _getaddrinfo)(host, effective_port)
        except OSError:
            addresses = []
        if not addresses:
            raise McpUrlRefusedError("The MCP server host could not be resolved.", "unresolvable")
    checked: list[str] = []
    for address in addresses:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            ip = None
        if ip is None or not is_address_allowed(ip, allow_loopback=policy.allow_loopback):
            logger.warning(
                "refused MCP server %s: it resolves to a non-public address",
                redact_url(url),
            )
            raise McpUrlRefusedError(
                "The MCP server URL resolves to an address that is not allowed.", "address"
            )
        if str(ip) not in checked:
            checked.append(str(ip))
    return ResolvedTarget(
        url=url,
        scheme="https" if scheme == "https" else "http",
        host=host,
        port=effective_port,
        addresses=tuple(checked),
    )


def pinned_transport(
    target: ResolvedTarget,
    *,
    max_response_bytes: int | None = None,
    inner: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncBaseTransport:
    """An ``httpx`` transport that only dials ``target.addresses``.

    Requests must be for the target's scheme, host and port (anything else, e.g. a redirect to
    another host, fails with ``httpx.ConnectError`` before a connection is attempted). Each
    request goes to a checked IP address (the next one when a connection is refused) with the
    URL's ``Host`` header and, for https, the URL's host as TLS server name (so the certificate
    is verified against the host name).
    Proxy environment variables are ignored. ``max_response_bytes`` bounds each response body.

    Args:
        target: What :func:`check_server_url` returned.
        max_response_bytes: Fail a response whose body grows beyond this many bytes.
        inner: The transport that really connects (tests pass a spy); by default one with no
            proxies whose TLS context (shared, built once per process) is built off the event
            loop by the first https request, and never for plain http.
    """
    return _PinnedTransport(target, inner or _DialTransport(), max_response_bytes)


def bounded_transport(
    *,
    max_response_bytes: int | None = None,
    inner: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncBaseTransport:
    """An ``httpx`` transport for operator-configured servers: no address pinning or checks
    (the operator chose the URL), but the same response-size bound, TLS context and disregard of
    proxy environment variables as :func:`pinned_transport`.

    Args:
        max_response_bytes: Fail a response whose body grows beyond this many bytes.
        inner: The transport that really connects (tests pass a spy).
    """
    inner = inner or _DialTransport()
    if max_response_bytes is None:
        return inner
    return _BoundedTransport(inner, max_response_bytes)


class ResponseTooLargeError(httpx.ReadError):
    """A response body grew past the bound of :func:`pinned_transport` /
    :func:`bounded_transport`."""


UNBOUNDED_STREAM = "responses_gateway.mcp.unbounded_stream"
"""A request extension: the response is a long-lived event stream whose reader bounds each event
itself, so the transports do not bound its whole body (the SSE transport's ``GET``)."""


def install_log_redaction() -> None:
    """Redact URLs (userinfo, query) in records of the ``httpx`` and ``httpcore`` loggers.
    Idempotent.

    Call before MCP requests are sent: filters are attached to the loggers that exist then
    (logger filters do not see records of child loggers, so every ``httpcore.*`` logger gets its
    own).
    """
    names = [
        name
        for name in list(logging.Logger.manager.loggerDict)
        if name == "httpcore" or name.startswith("httpcore.")
    ]
    for name in ["httpx", *names]:
        target = logging.getLogger(name)
        if not any(isinstance(f, _RedactUrls) for f in target.filters):
            target.addFilter(_REDACT_URLS)


# --------------------------------------------------------------------------- internals


def _env_flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name} must be a boolean (1/0, true/false, yes/no, on/off)")


def _ip_literal(host: str) -> IPAddress | None:
    """The address of an IP-literal host; refuses numeric forms that are not canonical."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if "%" in host:  # an IPv6 literal with a zone id: always link-local or meaningless
        raise McpUrlRefusedError(
            "The MCP server URL resolves to an address that is not allowed.", "address"
        )
    if _NUMERIC_HOST.match(host):
        raise McpUrlRefusedError(
            "The MCP server host is a non-canonical numeric address; write it as a dotted quad.",
            "host",
        )
    return None


def _check_host_name(host: str) -> None:
    if not _HOST_CHARS.match(host) or ".." in host or host.startswith((".", "-")):
        raise McpUrlRefusedError(
            "The MCP server host must be an ASCII host name (use the punycode form) or an IP "
            "address.",
            "host",
        )


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address is a route to (IPv4-mapped, NAT64, 6to4), if any.

    Teredo (2001::/32) and the deprecated IPv4-compatible ``::a.b.c.d`` are not unwrapped: they
    are not global, so they are refused as they are.
    """
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in network for network in _NAT64):
        return ipaddress.IPv4Address(ip.packed[-4:])
    return None


async def _getaddrinfo(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@functools.cache
def _tls_context() -> Future[ssl.SSLContext]:
    """The TLS context of every MCP connection, built once per process by a thread (loading the
    CA bundle costs ~25 ms of CPU, which must not block the event loop)."""
    future: Future[ssl.SSLContext] = Future()

    def build() -> None:
        try:
            future.set_result(httpx.create_ssl_context())
        except BaseException as exc:  # surfaces on the https request that waits for it
            future.set_exception(exc)

    threading.Thread(target=build, name="mcp-tls-context", daemon=True).start()
    return future


@functools.cache
def _plain_context() -> ssl.SSLContext:
    """The context of connections that never use TLS (``http://`` servers): it trusts no
    certificate at all, so it fails closed if one ever did."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


_URL_IN_TEXT = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<rest>[^\s'\"<>]+)")


def _redact_text(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        url = match.group(0)
        if "@" not in url and "?" not in url and "#" not in url:
            return url
        return redact_url(url)

    return _URL_IN_TEXT.sub(one, text)


class _RedactUrls(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken record: let logging report it as usual
            return True
        redacted = _redact_text(message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True


_REDACT_URLS = _RedactUrls()


class _DialTransport(httpx.AsyncBaseTransport):
    """httpx's HTTP transport (no proxies), one pool for ``https`` requests (with the shared,
    verified TLS context, awaited off the event loop) and one for plain ``http``."""

    def __init__(self) -> None:
        self._tls: httpx.AsyncHTTPTransport | None = None
        self._plain: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme == "https":
            if self._tls is None:
                context = await asyncio.wrap_future(_tls_context())
                if self._tls is None:
                    self._tls = httpx.AsyncHTTPTransport(verify=context, trust_env=False)
            return await self._tls.handle_async_request(request)
        if self._plain is None:
            self._plain = httpx.AsyncHTTPTransport(verify=_plain_context(), trust_env=False)
        return await self._plain.handle_async_request(request)

    async def aclose(self) -> None:
        for transport in (self._tls, self._plain):
            if transport is not None:
                await transport.aclose()


class _PinnedTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        target: ResolvedTarget,
        inner: httpx.AsyncBaseTransport,
        max_response_bytes: int | None,
    ) -> None:
        self._target = target
        self._inner = inner
        self._max = max_response_bytes
        self._preferred = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        port = url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)
        host = url.raw_host.decode("ascii").lower()
        if (url.scheme, host, port) != (self._target.scheme, self._target.host, self._target.port):
            raise httpx.ConnectError(
                "refused: this client only dials the MCP server that was checked",
                request=request,
            )
        extensions = dict(request.extensions)
        if url.scheme == "https":
            extensions["sni_hostname"] = self._target.host
        # Try the checked addresses in order (as a client would on a dual-stack host), from the
        # one that worked last; only a refused connection moves on (nothing was sent).
        addresses = self._target.addresses
        for attempt in range(len(addresses)):
            index = (self._preferred + attempt) % len(addresses)
            pinned = httpx.Request(
                request.method,
                url.copy_with(host=addresses[index]),
                headers=request.headers,  # keeps the Host header of the original URL
                stream=request.stream,
                extensions=extensions,
            )
            try:
                response = await self._inner.handle_async_request(pinned)
            except httpx.ConnectError:
                if attempt == len(addresses) - 1:
                    raise
                continue
            self._preferred = index
            return _bound(response, self._max, request)
        raise AssertionError("a target always has an address")  # pragma: no cover

    async def aclose(self) -> None:
        await self._inner.aclose()


class _BoundedTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, max_response_bytes: int) -> None:
        self._inner = inner
        self._max = max_response_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        return _bound(response, self._max, request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _bound(response: httpx.Response, limit: int | None, request: httpx.Request) -> httpx.Response:
    if limit is not None and not request.extensions.get(UNBOUNDED_STREAM):
        response.stream = _BoundedStream(response.stream, limit, request)
    return response


class _BoundedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, limit: int, request: httpx.Request) -> None:
        self._inner = inner
        self._limit = limit
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLargeError(
                    f"MCP server response exceeded {self._limit} bytes", request=self._request
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
