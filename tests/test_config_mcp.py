"""Operator MCP servers in the ``GATEWAY_CONFIG`` file: parsing, secrets, lookup, and every
startup error (a ``ConfigError`` naming the entry, never a secret)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.config import (
    ConfigError,
    GatewayConfig,
    OperatorMcpServer,
    load_config,
    parse_config,
)

PROVIDERS = [{"base_url": "http://x/v1"}]

TOML = """
[[providers]]
base_url = "http://127.0.0.1:8000/v1"

[[mcp_servers]]
server_label = "time"
command = "mcp-server-time"
args = ["--local-timezone", "UTC"]
env = { TZ_DEBUG = "1" }
env_from = { TIME_API_KEY = "GATEWAY_TIME_KEY" }

[[mcp_servers]]
server_label = "docs"
url = "https://docs.internal.example/mcp?tenant=abc"
headers = { "X-Team" = "search" }
headers_env = { Authorization = "DOCS_MCP_AUTH" }

[[mcp_servers]]
server_label = "legacy"
url = "http://10.1.2.3:9000/sse"
transport = "sse"
"""

ENV = {"GATEWAY_TIME_KEY": "time-secret-1", "DOCS_MCP_AUTH": "Bearer docs-secret-2"}


def _config(*servers: dict[str, Any], env: dict[str, str] | None = None) -> GatewayConfig:
    return parse_config({"providers": PROVIDERS, "mcp_servers": list(servers)}, env or {})


def test_toml_file_with_stdio_and_remote_servers(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(TOML)
    config = load_config({"GATEWAY_CONFIG": str(path), **ENV})
    assert config is not None
    assert [s.server_label for s in config.mcp_servers] == ["time", "docs", "legacy"]
    assert config.mcp_server("time") == OperatorMcpServer(
        server_label="time",
        transport="stdio",
        command="mcp-server-time",
        args=("--local-timezone", "UTC"),
        env={"TZ_DEBUG": "1", "TIME_API_KEY": "time-secret-1"},
    )
    assert config.mcp_server("docs") == OperatorMcpServer(
        server_label="docs",
        transport="auto",
        url="https://docs.internal.example/mcp?tenant=abc",
        headers={"X-Team": "search", "Authorization": "Bearer docs-secret-2"},
    )
    legacy = config.mcp_server("legacy")
    assert legacy is not None and (legacy.transport, legacy.url) == (
        "sse",
        "http://10.1.2.3:9000/sse",
    )
    assert config.mcp_server("unknown") is None
    assert config.route("anything")[0].base_url == "http://127.0.0.1:8000/v1"  # providers intact


def test_json_file(tmp_path: Path) -> None:
    path = tmp_path / "gateway.json"
    server = {"server_label": "time", "command": "python", "args": ["-m", "mcp_server_time"]}
    path.write_text(json.dumps({"providers": PROVIDERS, "mcp_servers": [server]}))
    config = load_config({"GATEWAY_CONFIG": str(path)})
    assert config is not None
    time_server = config.mcp_server("time")
    assert time_server is not None and time_server.args == ("-m", "mcp_server_time")


def test_no_mcp_servers_by_default() -> None:
    assert parse_config({"providers": PROVIDERS}).mcp_servers == ()
    assert GatewayConfig(providers=()).mcp_servers == ()


def test_reprs_never_show_secrets(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(TOML.replace("--local-timezone", "--api-key=arg-secret-3"))
    config = load_config({"GATEWAY_CONFIG": str(path), **ENV})
    text = repr(config) + str(config) + "".join(repr(s) for s in config.mcp_servers)  # type: ignore[union-attr]
    for secret in ("time-secret-1", "docs-secret-2", "arg-secret-3", "tenant=abc", "search"):
        assert secret not in text
    assert "OperatorMcpServer(server_label='docs', transport='auto', " in text
    assert "url='https://docs.internal.example')" in text
    assert "command='mcp-server-time'" in text


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"server_label": "a"}, "exactly one of url"),
        ({"server_label": "a", "url": "https://x/mcp", "command": "x"}, "exactly one of url"),
        ({"command": "x"}, r"mcp_servers\[0\]: server_label"),
        ({"server_label": "has space", "command": "x"}, "server_label must be"),
        ({"server_label": "a", "command": "x", "cwd": "/"}, "unknown key 'cwd'"),
        ({"server_label": "a", "url": "ftp://x"}, "http"),
        ({"server_label": "a", "url": "https://u:p@x/mcp"}, "credentials"),
        ({"server_label": "a", "url": "https://x:99999/mcp"}, "malformed"),
        ({"server_label": "a", "url": "https://x/mcp", "transport": "stdio"}, "transport of a url"),
        ({"server_label": "a", "command": "x", "transport": "sse"}, "must be 'stdio'"),
        ({"server_label": "a", "url": "https://x/mcp", "args": ["a"]}, "args only applies"),
        ({"server_label": "a", "url": "https://x/mcp", "env": {"A": "1"}}, "env only applies"),
        ({"server_label": "a", "command": "x", "headers": {"A": "1"}}, "headers only applies"),
        ({"server_label": "a", "url": "https://x/mcp", "shared": True}, "shared only applies"),
        ({"server_label": "a", "command": "x", "shared": "yes"}, "shared must be true or false"),
        ({"server_label": "a", "command": ""}, "non-empty string"),
        ({"server_label": "a", "command": "x", "args": "--flag"}, "args must be a list"),
        ({"server_label": "a", "command": "x", "env": {"A": 1}}, "env must be a table"),
        ({"server_label": "a", "command": "x", "env": {"A=B": "1"}}, "not a valid environment"),
        ({"server_label": "a", "command": "x", "env_from": {"K": "UNSET_VAR"}}, "'UNSET_VAR'"),
        ({"server_label": "a", "url": "https://x", "headers_env": {"K": "UNSET_VAR"}}, "not set"),
        ({"server_label": "a", "url": "https://x", "headers": {"Host": "y"}}, "cannot be over"),
        ({"server_label": "a", "url": "https://x", "headers": {"Mcp-Session-Id": "y"}}, "Mcp-"),
        (
            {
                "server_label": "a",
                "url": "https://x",
                "headers": {"authorization": "a"},
                "headers_env": {"Authorization": "V"},
            },
            "in both headers and headers_env",
        ),
    ],
)
def test_invalid_server_is_a_config_error(servers: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(servers, env={"V": "v"})


def test_labels_are_unique() -> None:
    with pytest.raises(ConfigError, match="unique"):
        _config({"server_label": "a", "command": "x"}, {"server_label": "a", "url": "https://y"})


def test_mcp_servers_must_be_a_list_of_tables() -> None:
    with pytest.raises(ConfigError, match="list of tables"):
        parse_config({"providers": PROVIDERS, "mcp_servers": {"server_label": "a"}}, {})
    with pytest.raises(ConfigError, match=r"mcp_servers\[0\] must be a table"):
        _config("time")  # type: ignore[arg-type]


def test_errors_never_show_a_header_value() -> None:
    with pytest.raises(ConfigError) as info:
        _config({"server_label": "a", "url": "https://x", "headers": {"X-K": "bad\nsecret-value"}})
    assert "secret-value" not in str(info.value)


def test_a_stdio_server_may_be_shared() -> None:
    config = _config(
        {"server_label": "time", "command": "mcp-server-time", "shared": True},
        {"server_label": "calc", "command": "calc-server"},
    )
    shared, alone = config.mcp_servers
    assert (shared.shared, alone.shared) == (True, False)
    assert repr(shared) == (
        "OperatorMcpServer(server_label='time', transport='stdio', "
        "command='mcp-server-time', shared=True)"
    )
    assert "shared" not in repr(alone)
