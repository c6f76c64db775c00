"""The SSRF guard: which URLs may be dialled, that nothing is sent before the check, and pinning.

Every refused form is checked with a socket spy in place (``dialled``): the check must refuse it
without a single connection attempt. Host names resolve through an injected fake DNS, so no test
depends on the machine's resolver (except ``localhost``, which is answered from /etc/hosts).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import pytest

from responses_gateway.mcp import McpClient, McpListError, McpPolicy, McpServer, redact_url
from responses_gateway.mcp.security import (
    McpUrlRefusedError,
    ResolvedTarget,
    check_server_url,
    install_log_redaction,
    is_address_allowed,
    pinned_transport,
)
from responses_gateway.testing.mcp_servers import McpServerPool

STRICT = McpPolicy()
HTTP_OK = McpPolicy(allow_http=True)
"""Allows http, so refusals below are about the address, not the scheme."""

BLOCKED_HOSTS = [
    # loopback, in every spelling
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "2130706433",
    "0x7f000001",
    "0x7f.1",
    "0177.0.0.1",
    "017700000001",
    "[::1]",
    "[::ffff:127.0.0.1]",
    # link-local and cloud metadata
    "169.254.169.254",
    "2852039166",
    "0xA9FEA9FE",
    "0xa9.0xfe.0xa9.0xfe",
    "0251.0376.0251.0376",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "[fd00:ec2::254]",
    "[fe80::1]",
    "[fe80::1%25eth0]",
    # private, CGNAT, this-network, unspecified
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "0.0.0.0",
    "0",
    "0.1.2.3",
    "[::]",
    "[fc00::1]",
    "[fd12:3456::1]",
    # multicast, broadcast, reserved, documentation, benchmarking
    "224.0.0.1",
    "239.255.255.250",
    "[ff02::1]",
    "255.255.255.255",
    "240.0.0.1",
    "192.0.2.1",
    "198.18.0.1",
    "[2001:db8::1]",
    # IPv6 forms that route to a blocked IPv4 address
    "[64:ff9b::a9fe:a9fe]",
    "[2002:a9fe:a9fe::1]",
    "[2002:0a00:0001::1]",
    "[::a9fe:a9fe]",
    "[2001:0:4136:e378:8000:63bf:3fff:fdd2]",
]


def fake_dns(answers: dict[str, Sequence[str]]) -> Any:
    """A resolver answering from ``answers`` and recording every lookup."""
    lookups: list[str] = []

    async def resolve(host: str, port: int) -> Sequence[str]:
        lookups.append(host)
        if host not in answers:
            raise OSError(f"no such host {host}")
        return answers[host]

    resolve.lookups = lookups  # type: ignore[attr-defined]
    return resolve


# --------------------------------------------------------------------------- the address matrix


@pytest.mark.parametrize("host", BLOCKED_HOSTS)
async def test_check_server_url_blocked_address_refused_without_dialling(
    host: str, dialled: list[Any]
) -> None:
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url(f"http://{host}/mcp", HTTP_OK, resolve=fake_dns({}))
    assert info.value.reason in ("address", "host")
    assert info.value.status_code == 400
    assert dialled == []


@pytest.mark.parametrize("host", BLOCKED_HOSTS)
async def test_list_tools_blocked_address_fails_without_dialling(
    host: str, dialled: list[Any]
) -> None:
    requests: list[httpx.Request] = []
    client = McpClient(HTTP_OK, resolve=fake_dns({}), inner_transport=lambda: _spy(requests))
    with pytest.raises(McpListError) as info:
        await client.list_tools(McpServer("x", f"http://{host}/mcp"))
    assert info.value.code == "url_not_allowed"
    assert info.value.status_code == 424
    assert requests == []
    assert dialled == []


@pytest.mark.parametrize("host", BLOCKED_HOSTS[:12])
async def test_call_tool_blocked_address_gives_http_error_without_dialling(
    host: str, dialled: list[Any]
) -> None:
    client = McpClient(HTTP_OK, resolve=fake_dns({}))
    result = await client.call_tool(McpServer("x", f"http://{host}/mcp"), "add", {})
    assert result.error is not None
    assert result.error["type"] == "http_error"
    assert result.error["code"] == 403
    assert dialled == []


@pytest.mark.parametrize(
    "answers",
    [
        ["10.0.0.7"],
        ["169.254.169.254"],
        ["93.184.216.34", "10.0.0.7"],
        ["::ffff:169.254.169.254"],
        ["fd00:ec2::254"],
        ["127.0.0.1"],
        ["not-an-address"],
    ],
)
async def test_check_server_url_host_resolving_to_blocked_address_refused(
    answers: list[str], dialled: list[Any]
) -> None:
    dns = fake_dns({"mcp.example.com": answers})
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url("https://mcp.example.com/mcp", STRICT, resolve=dns)
    assert info.value.reason == "address"
    assert "10.0.0.7" not in info.value.message  # never an internal DNS oracle
    assert dialled == []


async def test_check_server_url_public_host_resolves_to_all_checked_addresses() -> None:
    dns = fake_dns({"mcp.example.com": ["93.184.216.34", "2606:2800:220:1::1", "93.184.216.34"]})
    target = await check_server_url("https://mcp.example.com/mcp?x=1", STRICT, resolve=dns)
    assert target == ResolvedTarget(
        url="https://mcp.example.com/mcp?x=1",
        scheme="https",
        host="mcp.example.com",
        port=443,
        addresses=("93.184.216.34", "2606:2800:220:1::1"),
    )
    assert target.address == "93.184.216.34"


async def test_check_server_url_public_ip_literal_not_looked_up() -> None:
    dns = fake_dns({})
    target = await check_server_url("https://8.8.8.8:8443/mcp", STRICT, resolve=dns)
    assert (target.host, target.port, target.addresses) == ("8.8.8.8", 8443, ("8.8.8.8",))
    assert dns.lookups == []


async def test_check_server_url_unresolvable_host_refused() -> None:
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url("https://nowhere.example/mcp", STRICT, resolve=fake_dns({}))
    assert info.value.reason == "unresolvable"


# --------------------------------------------------------------------------- URL shape and policy


async def test_check_server_url_http_by_default_refused(dialled: list[Any]) -> None:
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url("http://8.8.8.8/mcp", STRICT)
    assert info.value.reason == "scheme"
    assert dialled == []


async def test_check_server_url_http_with_allow_http_accepted() -> None:
    target = await check_server_url("http://8.8.8.8/mcp", HTTP_OK)
    assert (target.scheme, target.port) == ("http", 80)


@pytest.mark.parametrize("url", ["ftp://8.8.8.8/", "file:///etc/passwd", "gopher://8.8.8.8/"])
async def test_check_server_url_other_scheme_refused(url: str) -> None:
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url(url, McpPolicy(allow_http=True))
    assert info.value.reason in ("scheme", "malformed")


@pytest.mark.parametrize("url", ["http://localhost:8000/mcp", "http://127.0.0.1/mcp"])
async def test_check_server_url_loopback_by_default_refused(url: str, dialled: list[Any]) -> None:
    with pytest.raises(McpUrlRefusedError):
        await check_server_url(url, HTTP_OK)
    assert dialled == []


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "localhost"])
async def test_check_server_url_loopback_with_allow_loopback_accepted(host: str) -> None:
    target = await check_server_url(
        f"http://{host}:9/mcp", McpPolicy(allow_http=True, allow_loopback=True)
    )
    assert all(is_address_allowed(a, allow_loopback=True) for a in target.addresses)


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001"])
async def test_check_server_url_numeric_trick_with_allow_loopback_refused(host: str) -> None:
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url(
            f"http://{host}/mcp", McpPolicy(allow_http=True, allow_loopback=True)
        )
    assert info.value.reason == "host"


async def test_check_server_url_loopback_policy_still_refuses_metadata() -> None:
    with pytest.raises(McpUrlRefusedError):
        await check_server_url(
            "http://169.254.169.254/", McpPolicy(allow_http=True, allow_loopback=True)
        )


@pytest.mark.parametrize(
    "url",
    ["https://user:pass@8.8.8.8/mcp", "https://token@8.8.8.8/mcp", "https://:x@8.8.8.8/mcp"],
)
async def test_check_server_url_credentials_in_url_refused(url: str) -> None:
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url(url, STRICT)
    assert info.value.reason == "credentials"
    assert "pass" not in info.value.message and "token" not in info.value.message


@pytest.mark.parametrize(
    "url", ["https://exämple.com/mcp", "https://a..b/mcp", "https:///mcp", "https://[::1/mcp"]
)
async def test_check_server_url_malformed_host_refused(url: str) -> None:
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url(url, STRICT, resolve=fake_dns({}))
    assert info.value.reason in ("host", "malformed")


async def test_check_server_url_allowed_hosts_exact_and_subdomain_accepted() -> None:
    policy = McpPolicy(allowed_hosts=frozenset({"mcp.example.com", ".tools.example.org"}))
    dns = fake_dns({"mcp.example.com": ["93.184.216.34"], "a.tools.example.org": ["1.1.1.1"]})
    assert (await check_server_url("https://mcp.example.com/", policy, resolve=dns)).host
    assert (await check_server_url("https://a.tools.example.org/", policy, resolve=dns)).host


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example.com/",
        "https://mcp.example.com.evil.net/",
        "https://tools.example.org/",
        "https://93.184.216.34/",
    ],
)
async def test_check_server_url_host_outside_allowed_hosts_refused(
    url: str, dialled: list[Any]
) -> None:
    policy = McpPolicy(allowed_hosts=frozenset({"mcp.example.com", "*.tools.example.org"}))
    dns = fake_dns({})
    with pytest.raises(McpUrlRefusedError) as info:
        await check_server_url(url, policy, resolve=dns)
    assert info.value.reason == "host_not_allowed"
    assert dns.lookups == []
    assert dialled == []


async def test_check_server_url_allowed_host_resolving_to_private_address_refused() -> None:
    policy = McpPolicy(allowed_hosts=frozenset({"mcp.example.com"}))
    dns = fake_dns({"mcp.example.com": ["10.1.2.3"]})
    with pytest.raises(McpUrlRefusedError):
        await check_server_url("https://mcp.example.com/", policy, resolve=dns)


def test_policy_from_env_reads_flags_and_hosts() -> None:
    policy = McpPolicy.from_env(
        {
            "MCP_ALLOW_HTTP": "true",
            "MCP_ALLOW_LOOPBACK": "1",
            "MCP_ALLOWED_HOSTS": " MCP.example.com, .corp.example ,",
        }
    )
    assert policy == McpPolicy(
        allow_http=True,
        allow_loopback=True,
        allowed_hosts=frozenset({"mcp.example.com", ".corp.example"}),
    )


def test_policy_from_env_empty_is_strict() -> None:
    assert McpPolicy.from_env({}) == McpPolicy()


def test_policy_from_env_invalid_flag_raises() -> None:
    with pytest.raises(ValueError, match="MCP_ALLOW_LOOPBACK"):
        McpPolicy.from_env({"MCP_ALLOW_LOOPBACK": "maybe"})


# --------------------------------------------------------------------------- pinning


async def test_pinned_transport_https_dials_checked_address_with_host_and_sni() -> None:
    requests: list[httpx.Request] = []
    target = ResolvedTarget(
        "https://mcp.example.com/mcp", "https", "mcp.example.com", 443, ("93.184.216.34",)
    )
    async with httpx.AsyncClient(transport=pinned_transport(target, inner=_spy(requests))) as c:
        response = await c.post("https://mcp.example.com/mcp?q=1", json={})
    assert response.status_code == 200
    (sent,) = requests
    assert sent.url.host == "93.184.216.34"
    assert sent.url.path == "/mcp" and sent.url.query == b"q=1"
    assert sent.headers["host"] == "mcp.example.com"
    assert sent.extensions["sni_hostname"] == "mcp.example.com"
    assert response.request.url.host == "mcp.example.com"  # the caller's view is unchanged


async def test_pinned_transport_ipv6_address_with_port_dialled() -> None:
    requests: list[httpx.Request] = []
    target = ResolvedTarget(
        "http://mcp.example.com:8080/", "http", "mcp.example.com", 8080, ("2606:2800:220:1::1",)
    )
    async with httpx.AsyncClient(transport=pinned_transport(target, inner=_spy(requests))) as c:
        await c.get("http://mcp.example.com:8080/")
    assert requests[0].url.host == "2606:2800:220:1::1"
    assert requests[0].url.port == 8080
    assert requests[0].headers["host"] == "mcp.example.com:8080"
    assert "sni_hostname" not in requests[0].extensions


@pytest.mark.parametrize(
    "url",
    [
        "https://other.example.com/mcp",
        "https://169.254.169.254/latest/meta-data/",
        "http://mcp.example.com/mcp",
        "https://mcp.example.com:8443/mcp",
    ],
)
async def test_pinned_transport_other_origin_refused_without_dialling(url: str) -> None:
    requests: list[httpx.Request] = []
    target = ResolvedTarget(
        "https://mcp.example.com/mcp", "https", "mcp.example.com", 443, ("93.184.216.34",)
    )
    async with httpx.AsyncClient(transport=pinned_transport(target, inner=_spy(requests))) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get(url)
    assert requests == []


async def test_pinned_transport_refused_address_falls_back_to_next_checked_one() -> None:
    attempts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(request.url.host)
        if request.url.host == "2606:2800:220:1::1":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, stream=_Chunks(b"{}"))

    target = ResolvedTarget(
        "https://mcp.example.com/",
        "https",
        "mcp.example.com",
        443,
        ("2606:2800:220:1::1", "93.184.216.34"),
    )
    transport = pinned_transport(target, inner=httpx.MockTransport(handler))
    async with httpx.AsyncClient(transport=transport) as c:
        await c.get("https://mcp.example.com/a")
        await c.get("https://mcp.example.com/b")
    assert attempts == ["2606:2800:220:1::1", "93.184.216.34", "93.184.216.34"]


async def test_pinned_transport_response_over_limit_fails() -> None:
    target = ResolvedTarget("http://a.example/", "http", "a.example", 80, ("93.184.216.34",))
    transport = pinned_transport(target, max_response_bytes=10, inner=_spy([], body=b"x" * 100))
    async with httpx.AsyncClient(transport=transport) as c:
        with pytest.raises(httpx.ReadError, match="exceeded 10 bytes"):
            await c.get("http://a.example/")


async def test_call_tool_rebinding_host_dials_first_checked_address_only(
    mcp_servers: McpServerPool,
) -> None:
    # The fake DNS answers loopback once, then an internal address: the call must neither look
    # the host up again nor follow the second answer. The server sees the URL's host name.
    server = mcp_servers.get("echo_auth")
    answers = [["127.0.0.1"], ["10.9.9.9"]]

    async def rebinding_dns(host: str, port: int) -> Sequence[str]:
        assert host == "mcp.rebind.example"
        return answers.pop(0)

    client = McpClient(McpPolicy(allow_http=True, allow_loopback=True), resolve=rebinding_dns)
    url = f"http://mcp.rebind.example:{server.port}/mcp"
    result = await client.call_tool(McpServer("echo", url), "echo_headers", {})
    assert result.error is None, result.error
    assert f'"host": "mcp.rebind.example:{server.port}"' in (result.output or "")
    assert answers == [["10.9.9.9"]]


# --------------------------------------------------------------------------- redaction


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:secret@mcp.example.com/x/mcp?key=abc#frag", "https://mcp.example.com/x/mcp"),
        ("http://[::1]:8080/mcp?t=1", "http://[::1]:8080/mcp"),
        ("https://mcp.example.com", "https://mcp.example.com"),
        ("https://[::1/mcp", "<malformed url>"),
    ],
)
def test_redact_url_drops_userinfo_query_and_fragment(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_install_log_redaction_sdk_logger_url_redacted(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction()
    install_log_redaction()  # idempotent
    caplog.set_level(logging.DEBUG, logger="httpx")
    logging.getLogger("httpx").info(
        "HTTP Request: %s %s", "POST", "https://me:pw@mcp.example.com/mcp?api_key=sk-123"
    )
    assert "HTTP Request: POST https://mcp.example.com/mcp" in caplog.text
    assert "sk-123" not in caplog.text and "pw" not in caplog.text
    assert len(logging.getLogger("httpx").filters) == 1


# --------------------------------------------------------------------------- helpers


class _Chunks(httpx.AsyncByteStream):
    """A response body delivered in chunks, as a real connection would."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self._body), 4):
            yield self._body[start : start + 4]


def _spy(requests: list[httpx.Request], body: bytes = b"{}") -> httpx.AsyncBaseTransport:
    """An inner transport that records requests and answers 200 without any network."""

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, stream=_Chunks(body))

    return httpx.MockTransport(handler)
