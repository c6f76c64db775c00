"""Every typo is a startup error naming where it is: one test per configuration surface.

The surfaces: the ``GATEWAY_CONFIG`` file (every table of it, TOML and JSON), the single-provider
``UPSTREAM_*`` variables, the API keys (``GATEWAY_API_KEYS`` / ``GATEWAY_API_KEYS_FILE``) and
every other environment setting of :data:`responses_gateway.settings.SETTINGS`; then ``serve``
itself, which refuses to start (status 2, one line on stderr, no traceback) instead of
answering 500.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from responses_gateway.config import ConfigError, load_config
from responses_gateway.settings import OTHER_VARIABLES, SETTINGS, check_environment, setting_names

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _keep_the_process_keyring() -> Iterator[None]:
    """check_environment installs the sealing keyring it checks: put the session's back."""
    from responses_gateway import sealing

    kept = sealing._keyring
    yield
    sealing._keyring = kept


BASE = """
[[providers]]
name = "openai"
base_url = "https://api.openai.com/v1"
api_key = "sk-test"
models = ["gpt-4o"]
"""

FILE_TYPOS = [
    # (text added to BASE or replacing a line, the error after "<file>: ")
    (
        BASE.replace('models = ["gpt-4o"]', 'model = ["gpt-4o"]'),
        "provider 'openai': unknown key 'model' (did you mean 'models'?)",
    ),
    (
        BASE.replace('models = ["gpt-4o"]', 'prefix = ["gpt-"]'),
        "provider 'openai': unknown key 'prefix' (did you mean 'prefixes'?)",
    ),
    (
        BASE + "timeout = 'fast'\n",
        "provider 'openai'.timeout must be a positive number of seconds, got 'fast'",
    ),  # noqa: E501
    (BASE + "strip_prefix = 'yes'\n", "provider 'openai'.strip_prefix must be true or false"),
    (BASE + "headers = { x = 1 }\n", "provider 'openai'.headers must be a table of strings"),
    (
        BASE.replace('api_key = "sk-test"', 'api_key_env = "I39_UNSET_KEY"'),
        "provider 'openai'.api_key_env names the environment variable 'I39_UNSET_KEY', which is "
        "not set",
    ),
    (
        BASE + 'api_key_secret = "openai-key"\n',
        "provider 'openai': give one of api_key, api_key_secret, not several",
    ),
    (
        BASE.replace('api_key = "sk-test"', "api_key_parameter = 7"),
        "provider 'openai'.api_key_parameter must be a non-empty string",
    ),
    (
        "operator = ['ops']\n" + BASE,
        "top level: unknown key 'operator' (did you mean 'operators'?)",
    ),
    (
        BASE + "[budget]\ndaily_tokens = 5\n",
        "top level: unknown key 'budget' (did you mean 'budgets'?)",
    ),  # noqa: E501
    (
        BASE + "[budgets]\ndaily_token = 5\n",
        "budgets: unknown key 'daily_token' (did you mean 'daily_tokens'?)",
    ),
    (
        BASE + '[prices."gpt-4o"]\ninput = 1\nouput = 2\n',
        "prices.gpt-4o: unknown key 'ouput' (did you mean 'output'?)",
    ),
    (
        BASE + "[request_log]\ncontent_tenant = ['a']\n",
        "request_log: unknown key 'content_tenant' (did you mean 'content_tenants'?)",
    ),
    (
        BASE + '[[routes]]\nmodel = "m"\ndeployments = [{ provider = "openai", model = "x", '
        "wieght = 2 }]\n",
        "route 'm'.deployments[0]: unknown key 'wieght' (did you mean 'weight'?)",
    ),
    (
        BASE + '[[routes]]\nmodel = "m"\nfallback = ["gpt-4o"]\ndeployments = [{ provider = '
        '"openai", model = "x" }]\n',
        "routes[0]: unknown key 'fallback' (did you mean 'fallbacks'?)",
    ),
    (
        BASE + '[[mcp_servers]]\nserver_label = "s"\nurl = "https://mcp.example.com/mcp"\n'
        'header = { a = "b" }\n',
        "mcp server 's': unknown key 'header' (did you mean 'headers'?)",
    ),
    (
        BASE + '[[mcp_servers]]\nserver_label = "s"\nurl = "https://mcp.example.com/mcp"\n'
        '[[tool_backends]]\ntype = "web_search"\nserver = "s"\ntool = "search"\n',
        "tool_backends[0]: unknown key 'server' (did you mean 'server_label'?)",
    ),
    (
        BASE + '[prompts.p]\nversion = { "1" = { instructions = "x" } }\n',
        "prompt 'p': unknown key 'version' (did you mean 'versions'?)",
    ),
]


@pytest.mark.parametrize(("text", "error"), FILE_TYPOS, ids=[e for _, e in FILE_TYPOS])
def test_the_configuration_file_refuses_each_typo_by_file_table_and_key(
    tmp_path: Path, text: str, error: str
) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config({"GATEWAY_CONFIG": str(path)})
    assert str(caught.value) == f"{path}: {error}"


def test_a_json_configuration_follows_the_same_schema(tmp_path: Path) -> None:
    path = tmp_path / "gateway.json"
    path.write_text(
        '{"providers": [{"name": "p", "base_url": "http://x/v1", "prefix": ["a"]}]}',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config({"GATEWAY_CONFIG": str(path)})
    assert str(caught.value) == (
        f"{path}: provider 'p': unknown key 'prefix' (did you mean 'prefixes'?)"
    )


def test_a_missing_configuration_file_is_named() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"GATEWAY_CONFIG": "/nonexistent/gateway.toml"})
    assert str(caught.value) == (
        "cannot read GATEWAY_CONFIG /nonexistent/gateway.toml: No such file or directory"
    )


@pytest.mark.parametrize(
    ("variable", "value", "error"),
    [
        (
            "UPSTREAM_API",
            "grpc",
            "UPSTREAM_API must be 'auto', 'chat', 'responses', 'harmony' or 'bedrock'",
        ),
        ("UPSTREAM_HOSTED_TOOLS", "drop", "UPSTREAM_HOSTED_TOOLS must be 'omit' or 'reject'"),
        ("UPSTREAM_STREAMING", "yes", "UPSTREAM_STREAMING must be 'auto', 'on' or 'off'"),
    ],
)
def test_the_single_provider_variables_are_named(variable: str, value: str, error: str) -> None:
    env = {"UPSTREAM_BASE_URL": "http://127.0.0.1:9/v1", variable: value}
    with pytest.raises(ConfigError, match=re.escape(error)):
        load_config(env)
    with pytest.raises(ConfigError, match="UPSTREAM_BASE_URL must be an http"):
        load_config({"UPSTREAM_BASE_URL": "127.0.0.1:8000/v1"})


def test_the_api_keys_are_checked_at_startup(tmp_path: Path) -> None:
    missing = tmp_path / "keys.txt"
    cases = {
        ("GATEWAY_API_KEYS_FILE", str(missing)): (
            f"cannot read GATEWAY_API_KEYS_FILE {missing}: No such file or directory"
        ),
        ("GATEWAY_API_KEYS", "sk-1:team a"): (
            "GATEWAY_API_KEYS: tenant 'team a' must be 1-128 of A-Z a-z 0-9 . _ @ -"
        ),
        ("GATEWAY_API_KEYS", "sk-1:a,sk-1:b"): "GATEWAY_API_KEYS: a key is listed twice",
    }
    for (variable, value), error in cases.items():
        with pytest.raises(ConfigError) as caught:
            check_environment({variable: value})
        assert str(caught.value) == error
    bad_file = tmp_path / "bad-keys.txt"
    bad_file.write_text("sk-1:ops\nsk-2:team b\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        check_environment({"GATEWAY_API_KEYS_FILE": str(bad_file)})
    assert str(caught.value) == (
        f"GATEWAY_API_KEYS_FILE {bad_file} (line 2): tenant 'team b' must be 1-128 of "
        "A-Z a-z 0-9 . _ @ -"
    )


SETTING_TYPOS: dict[str, tuple[str, str]] = {
    "BEDROCK_MODELS": ("anthropic.claude", "BEDROCK_MODELS: api 'bedrock' needs aws_region"),
    "GATEWAY_STORE": ("sqlit", "GATEWAY_STORE must be one of sqlite, dynamodb, moto, got 'sqlit'"),
    "RETENTION_DAYS": ("30d", "RETENTION_DAYS must be a whole number of days >= 1, got '30d'"),
    "DYNAMODB_CLIENT": ("boto", "DYNAMODB_CLIENT must be http or boto3, got 'boto'"),
    "DYNAMODB_MAX_ATTEMPTS": ("0", "DYNAMODB_MAX_ATTEMPTS must be a positive whole number"),
    "DYNAMODB_READ_TIMEOUT": ("1.5", "DYNAMODB_READ_TIMEOUT must be a positive whole number"),
    "GATEWAY_TRUST_LAMBDA_CONTEXT": ("maybe", "GATEWAY_TRUST_LAMBDA_CONTEXT must be 1 or 0"),
    "GATEWAY_ENFORCE_BUDGETS": ("yes please", "GATEWAY_ENFORCE_BUDGETS must be 1 or 0"),
    "GATEWAY_OPERATOR_TENANTS": ("ops team", "GATEWAY_OPERATOR_TENANTS: tenant 'ops team'"),
    "GATEWAY_LOG_CONTENT_TENANTS": ("a;b", "GATEWAY_LOG_CONTENT_TENANTS: tenant 'a;b'"),
    "MCP_ALLOW_HTTP": ("allow", "MCP_ALLOW_HTTP must be a boolean"),
    "MCP_ALLOW_LOOPBACK": ("2", "MCP_ALLOW_LOOPBACK must be a boolean"),
    "GATEWAY_MAX_BODY_BYTES": ("5MB", "GATEWAY_MAX_BODY_BYTES must be a positive integer"),
    "GATEWAY_MAX_INPUT_ITEMS": ("-1", "GATEWAY_MAX_INPUT_ITEMS must be a positive integer"),
    "GATEWAY_MAX_TOOLS": ("x", "GATEWAY_MAX_TOOLS must be a positive integer"),
    "GATEWAY_MAX_JSON_DEPTH": ("0", "GATEWAY_MAX_JSON_DEPTH must be a positive integer"),
    "GATEWAY_MAX_STRING_CHARS": ("1e6", "GATEWAY_MAX_STRING_CHARS must be a positive integer"),
    "GATEWAY_STREAM_BUFFER_BYTES": ("1M", "GATEWAY_STREAM_BUFFER_BYTES must be a positive"),
    "GATEWAY_STREAM_STALL_SECONDS": ("1m", "GATEWAY_STREAM_STALL_SECONDS must be a positive"),
    "GATEWAY_MAX_UPSTREAM_EVENT_BYTES": ("8MB", "GATEWAY_MAX_UPSTREAM_EVENT_BYTES must be"),
    "GATEWAY_MAX_UPSTREAM_STREAM_BYTES": ("0", "GATEWAY_MAX_UPSTREAM_STREAM_BYTES must be"),
    "GATEWAY_WS_MAX_SECONDS": ("1h", "GATEWAY_WS_MAX_SECONDS must be a positive number"),
    "GATEWAY_RUN_LEASE_SECONDS": ("10s", "GATEWAY_RUN_LEASE_SECONDS must be a positive number"),
    "GATEWAY_WS_MAX_MESSAGE_BYTES": ("12MiB", "GATEWAY_WS_MAX_MESSAGE_BYTES must be a positive"),
    "BACKGROUND_MAX_SECONDS": ("6h", "BACKGROUND_MAX_SECONDS must be a positive number"),
    "GATEWAY_SEALING_KEYS": ("k1:short", "GATEWAY_SEALING_KEYS: sealing key 'k1' is not valid"),
    "GATEWAY_SEALING_KEYS_FILE": ("/nonexistent/keys", "cannot read GATEWAY_SEALING_KEYS_FILE"),
}
"""A typo for every setting that has a form to get wrong (the others are free text)."""

FREE_TEXT = {
    "UPSTREAM_API_KEY",
    "DYNAMODB_TABLE",
    "DYNAMODB_ENDPOINT_URL",
    "AWS_REGION",
    "GATEWAY_KEYS_STACK",
    "GATEWAY_CONFIG_PARAMETER",
    "MCP_ALLOWED_HOSTS",
    "GATEWAY_SEALING_KEYS_PARAMETER",
    "GATEWAY_SEALING_KEYS_SECRET",
}
"""Settings without a typo to make here: names of AWS resources, host lists, the key itself.
(``UPSTREAM_*``, ``GATEWAY_CONFIG``, ``GATEWAY_DB_PATH`` and the API keys have their own
tests above and in tests/test_cli_usage.py.)"""

OWN_TESTS = {
    "UPSTREAM_BASE_URL",
    "UPSTREAM_API",
    "UPSTREAM_HOSTED_TOOLS",
    "UPSTREAM_STREAMING",
    "GATEWAY_CONFIG",
    "GATEWAY_DB_PATH",
    "GATEWAY_API_KEYS",
    "GATEWAY_API_KEYS_FILE",
}


def test_every_setting_has_a_typo_case_or_is_free_text() -> None:
    assert set(setting_names()) == set(SETTING_TYPOS) | FREE_TEXT | OWN_TESTS


@pytest.mark.parametrize("variable", sorted(SETTING_TYPOS))
def test_every_environment_setting_refuses_a_typo_by_name(variable: str) -> None:
    value, error = SETTING_TYPOS[variable]
    with pytest.raises(ConfigError) as caught:
        check_environment({variable: value})
    assert str(caught.value).startswith(error), str(caught.value)


def test_a_correct_environment_passes() -> None:
    check_environment(
        {
            "GATEWAY_STORE": "sqlite",
            "RETENTION_DAYS": "7",
            "GATEWAY_ENFORCE_BUDGETS": "1",
            "GATEWAY_OPERATOR_TENANTS": "ops, team-b",
            "MCP_ALLOW_HTTP": "true",
            "GATEWAY_MAX_BODY_BYTES": "1048576",
            "GATEWAY_WS_MAX_SECONDS": "90.5",
            "GATEWAY_API_KEYS": "sk-1:ops,sk-2:team-b",
            "GATEWAY_SEALING_KEYS": "k1:" + "A" * 43 + "=",
        }
    )


VARIABLE = re.compile(
    r'"((?:GATEWAY|UPSTREAM|DYNAMODB|MCP|RETENTION|BACKGROUND|HANDOVER|WORKER|SOCKET|'
    r'STEPFUNCTIONS|AWS|POWERTOOLS|XDG)_[A-Z0-9_]+)"'
)


def test_every_variable_the_code_reads_is_a_setting_or_named_elsewhere() -> None:
    """A variable added to the code without a row in SETTINGS (and so in the README) fails:
    every such quoted name in the package is a setting, or in OTHER_VARIABLES, or the name of
    a Python constant (``__all__`` entries)."""
    texts = [
        path.read_text(encoding="utf-8")
        for path in (ROOT / "shared" / "responses_gateway").rglob("*.py")
        if "testing" not in path.relative_to(ROOT).parts
    ]
    quoted = {name for text in texts for name in VARIABLE.findall(text)}
    constants = {
        name
        for text in texts
        for name in re.findall(r"^([A-Z][A-Z0-9_]+)\s*[:=]", text, re.MULTILINE)
    }
    unknown = quoted - set(setting_names()) - set(OTHER_VARIABLES) - constants
    assert unknown == set()
    assert {"GATEWAY_MAX_BODY_BYTES", "GATEWAY_API_KEYS", "RETENTION_DAYS"} <= quoted


def _serve(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GATEWAY_", "UPSTREAM_", "DYNAMODB_", "MCP_"))
    }
    clean.update(XDG_DATA_HOME=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "-m", "responses_gateway.cli", "serve", "--port", "9"],
        capture_output=True,
        text=True,
        env=clean,
        timeout=60,
        check=False,
    )


def test_serve_refuses_to_start_on_a_typo_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(BASE + "[budget]\ndaily_tokens = 5\n", encoding="utf-8")
    missing = tmp_path / "keys.txt"
    for env, line in (
        (
            {"GATEWAY_CONFIG": str(config)},
            f"bad configuration: {config}: top level: unknown key 'budget' (did you mean "
            "'budgets'?)",
        ),
        (
            {"GATEWAY_API_KEYS_FILE": str(missing)},
            f"bad configuration: cannot read GATEWAY_API_KEYS_FILE {missing}: No such file or "
            "directory",
        ),
        (
            {"GATEWAY_MAX_BODY_BYTES": "5MB"},
            "bad configuration: GATEWAY_MAX_BODY_BYTES must be a positive integer, got '5MB'",
        ),
    ):
        done = _serve(env, tmp_path)
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == f"responses-gateway: {line}\n"
    assert not (tmp_path / "responses-gateway").exists()  # nothing created before refusing


def test_serve_does_not_say_listening_on_a_taken_port(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "UPSTREAM_"))}
        clean.update(XDG_DATA_HOME=str(tmp_path), GATEWAY_SEALING_KEYS="k1:" + "A" * 43 + "=")
        done = subprocess.run(
            [sys.executable, "-m", "responses_gateway.cli", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            env=clean,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert "listening" not in done.stdout
    assert done.stderr == (
        f"responses-gateway: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )


def test_settings_table_is_in_order_and_without_duplicates() -> None:
    names = setting_names()
    assert len(names) == len(set(names))
    assert SETTINGS[-1].names[0] == "GATEWAY_SEALING_KEYS"  # installs the keyring: last


def test_a_deployed_document_checks_locally_with_its_keys_named_in_aws(tmp_path: Path) -> None:
    """docs/deploy.md: check a document before deploying with ``GATEWAY_CONFIG=... serve``."""
    path = tmp_path / "gateway-config.json"
    path.write_text(
        '{"providers": [{"name": "openai", "base_url": "https://api.openai.com/v1",'
        ' "api_key_parameter": "/responses-gateway/openai-key"}]}',
        encoding="utf-8",
    )
    config = load_config({"GATEWAY_CONFIG": str(path)})
    assert config is not None
    (provider,) = config.providers
    assert provider.api_key is None
    assert provider.key_reference == "api_key_parameter /responses-gateway/openai-key"
