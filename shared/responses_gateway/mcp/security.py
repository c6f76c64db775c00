"""Which MCP server URLs the gateway may dial, and dialling only the address that was checked.

Owns the SSRF guard for user-supplied ``server_url`` values: :func:`check_server_url` validates
the URL (https only unless allowed, no credentials in it, an ASCII host, no numeric tricks such as
``2852039166`` or ``127.1``), resolves the host off the event loop and refuses the URL unless every
address is global: loopback (unless :attr:`McpPolicy.allow_loopback`), private, link-local,
CGNAT, ``0.0.0.0/8``, multicast, reserved, unique-local (``fd00:ec2::/32`` included) and IPv6
forms that embed an IPv4 address (``::ffff:169.254.169.254``, NAT64, 6to4, Teredo) are judged by
that embedded address. It returns a :class:`ResolvedTarget`, and :func:`pinned_transport` builds
the ``httpx2`` transport that connects to that target's checked address (keeping the ``Host``
header and TLS server name of the URL), so a DNS answer that changes between the check and the
connection (DNS rebinding) is never followed; :func:`bounded_transport` is the unpinned variant
for operator-configured servers, which are trusted and not checked. It also owns
:func:`redact_url` for logs and the log filter that applies it to the ``httpx2`` and ``mcp`` SDK
loggers.

It must not send a packet before a URL passed the check, must not trust proxy environment
variables, and must not put secrets or resolved addresses in user-facing messages. Importing it
must stay cheap: ``httpx2`` is imported only when a transport is built.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import os
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from responses_gateway.errors import GatewayError

if TYPE_CHECKING:
    import ssl

    import httpx2

__all__ = [
    "McpPolicy",
    "McpUrlRefusedError",
    "RefusalReason",
    "ResolvedTarget",
    "Resolver",
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
    inner: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncBaseTransport:
    """An ``httpx2`` transport that only dials ``target.addresses``.

    Requests must be for the target's scheme, host and port (anything else, e.g. a redirect to
    another host, fails with ``httpx2.ConnectError`` before a connection is attempted). Each
    request goes to a checked IP address (the next one when a connection is refused) with the
    URL's ``Host`` header and, for https, the URL's host as TLS server name (so the certificate
    is verified against the host name).
    Proxy environment variables are ignored. ``max_response_bytes`` bounds each response body.

    Args:
        target: What :func:`check_server_url` returned.
        max_response_bytes: Fail a response whose body grows beyond this many bytes.
        inner: The transport that really connects (tests pass a spy); by default an
            ``httpx2.AsyncHTTPTransport`` with a shared, cached TLS context and no proxies.
    """
    cls = _pinned_transport_class()
    if inner is None:
        import httpx2

        inner = httpx2.AsyncHTTPTransport(verify=_ssl_context())
    transport: httpx2.AsyncBaseTransport = cls(target, inner, max_response_bytes)
    return transport


def bounded_transport(
    *,
    max_response_bytes: int | None = None,
    inner: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncBaseTransport:
    """An ``httpx2`` transport for operator-configured servers: no address pinning or checks
    (the operator chose the URL), but the same response-size bound, TLS context and disregard of
    proxy environment variables as :func:`pinned_transport`.

    Args:
        max_response_bytes: Fail a response whose body grows beyond this many bytes.
        inner: The transport that really connects (tests pass a spy).
    """
    if inner is None:
        import httpx2

        inner = httpx2.AsyncHTTPTransport(verify=_ssl_context())
    if max_response_bytes is None:
        return inner
    transport: httpx2.AsyncBaseTransport = _bounded_transport_class()(inner, max_response_bytes)
    return transport


def install_log_redaction() -> None:
    """Redact URLs (userinfo, query) in records of the ``httpx2`` and ``mcp`` loggers. Idempotent.

    Call after importing the SDK: filters are attached to the loggers that exist then (logger
    filters do not see records of child loggers, so every ``mcp.*`` logger gets its own).
    """
    names = [
        name
        for name in list(logging.Logger.manager.loggerDict)
        if name in ("httpx2", "httpcore2", "mcp") or name.startswith(("mcp.", "httpcore2."))
    ]
    for name in ["httpx2", *names]:
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
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for every MCP connection: loading the CA bundle costs ~35 ms each time."""
    import httpx2

    return httpx2.create_ssl_context()


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


@functools.cache
def _pinned_transport_class() -> type[Any]:
    """Defined on first use so that importing this module does not import ``httpx2``."""
    import httpx2

    class PinnedTransport(httpx2.AsyncBaseTransport):
        def __init__(
            self,
            target: ResolvedTarget,
            inner: httpx2.AsyncBaseTransport,
            max_response_bytes: int | None,
        ) -> None:
            self._target = target
            self._inner = inner
            self._max = max_response_bytes
            self._preferred = 0

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            url = request.url
            port = url.port if url.port is not None else _DEFAULT_PORTS.get(url.scheme)
            host = url.raw_host.decode("ascii").lower()
            if (url.scheme, host, port) != (
                self._target.scheme,
                self._target.host,
                self._target.port,
            ):
                raise httpx2.ConnectError(
                    "refused: this client only dials the MCP server that was checked",
                    request=request,
                )
            extensions = dict(request.extensions)
            if url.scheme == "https":
                extensions["sni_hostname"] = self._target.host
            # Try the checked addresses in order (as a client would on a dual-stack host), from
            # the one that worked last; only a refused connection moves on (nothing was sent).
            addresses = self._target.addresses
            for attempt in range(len(addresses)):
                index = (self._preferred + attempt) % len(addresses)
                pinned = httpx2.Request(
                    request.method,
                    url.copy_with(host=addresses[index]),
                    headers=request.headers,  # keeps the Host header of the original URL
                    stream=request.stream,
                    extensions=extensions,
                )
                try:
                    response = await self._inner.handle_async_request(pinned)
                except httpx2.ConnectError:
                    if attempt == len(addresses) - 1:
                        raise
                    continue
                self._preferred = index
                if self._max is not None:
                    response.stream = _bounded_stream_class()(response.stream, self._max, request)
                return response
            raise AssertionError("a target always has an address")  # pragma: no cover

        async def aclose(self) -> None:
            await self._inner.aclose()

    return PinnedTransport


@functools.cache
def _bounded_stream_class() -> type[Any]:
    import httpx2

    class BoundedStream(httpx2.AsyncByteStream):
        def __init__(self, inner: Any, limit: int, request: httpx2.Request) -> None:
            self._inner = inner
            self._limit = limit
            self._request = request

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = 0
            async for chunk in self._inner:
                seen += len(chunk)
                if seen > self._limit:
                    raise httpx2.ReadError(
                        f"MCP server response exceeded {self._limit} bytes", request=self._request
                    )
                yield chunk

        async def aclose(self) -> None:
            await self._inner.aclose()

    return BoundedStream


@functools.cache
def _bounded_transport_class() -> type[Any]:
    import httpx2

    class BoundedTransport(httpx2.AsyncBaseTransport):
        def __init__(self, inner: httpx2.AsyncBaseTransport, max_response_bytes: int) -> None:
            self._inner = inner
            self._max = max_response_bytes

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            response = await self._inner.handle_async_request(request)
            response.stream = _bounded_stream_class()(response.stream, self._max, request)
            return response

        async def aclose(self) -> None:
            await self._inner.aclose()

    return BoundedTransport
