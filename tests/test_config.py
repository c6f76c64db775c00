"""Provider configuration and model routing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.config import ConfigError, ToolBackend, load_config, parse_config
from responses_gateway.errors import NotFoundError

TOML = """
[[providers]]
name = "openai"
base_url = "https://api.openai.com/v1/"
api_key_env = "OPENAI_KEY"
models = ["gpt-5"]
prefixes = ["gpt-", "o4"]

[[providers]]
name = "local"
base_url = "http://127.0.0.1:8000/v1"
api = "chat"
prefixes = ["local/", "local/big/"]
strip_prefix = true

[[providers]]
name = "router"
base_url = "https://openrouter.example/api/v1"
api_key = "sk-router"
default = true
"""


def test_load_config_without_settings_is_none() -> None:
    assert load_config({}) is None


def test_load_config_env_single_provider_takes_every_model() -> None:
    config = load_config(
        {"UPSTREAM_BASE_URL": "http://h:1/v1", "UPSTREAM_API_KEY": "sk-x", "UPSTREAM_API": "chat"}
    )
    assert config is not None
    provider, model = config.route("anything")
    assert (provider.base_url, provider.api_key, provider.api, model) == (
        "http://h:1/v1",
        "sk-x",
        "chat",
        "anything",
    )


def test_load_config_toml_routes_exact_then_longest_prefix_then_default(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(TOML)
    config = load_config({"GATEWAY_CONFIG": str(path), "OPENAI_KEY": "sk-openai"})
    assert config is not None
    openai, model = config.route("gpt-5")
    assert (openai.name, openai.api_key, openai.base_url, model) == (
        "openai",
        "sk-openai",
        "https://api.openai.com/v1",
        "gpt-5",
    )
    assert config.route("o4-mini")[0].name == "openai"
    local, model = config.route("local/big/qwen")
    assert (local.name, model) == ("local", "qwen")
    assert config.route("meta/llama")[0].name == "router"


def test_load_config_json_file(tmp_path: Path) -> None:
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps({"providers": [{"base_url": "http://x/v1", "models": ["m"]}]}))
    config = load_config({"GATEWAY_CONFIG": str(path)})
    assert config is not None and config.route("m")[0].base_url == "http://x/v1"


def test_route_unknown_model_without_default_is_404_model_not_found() -> None:
    config = parse_config({"providers": [{"base_url": "http://x/v1", "models": ["m"]}]})
    with pytest.raises(NotFoundError) as info:
        config.route("other")
    assert (info.value.param, info.value.code) == ("model", "model_not_found")
    assert info.value.message == (
        "The model `other` does not exist or you do not have access to it."
    )


def test_provider_repr_never_shows_the_key() -> None:
    config = parse_config({"providers": [{"base_url": "http://x/v1", "api_key": "sk-secret"}]})
    assert "sk-secret" not in repr(config)


@pytest.mark.parametrize(
    ("providers", "message"),
    [
        ([], "non-empty 'providers'"),
        ([{"base_url": "ftp://x"}], "base_url must be an http"),
        ([{"base_url": "http://x", "api": "grpc"}], "api must be 'auto', 'chat', 'resp"),
        ([{"name": "a", "base_url": "http://x"}, {"name": "a", "base_url": "http://y"}], "unique"),
        (
            [{"base_url": "http://x", "default": True}, {"base_url": "http://y", "default": True}],
            "at most one",
        ),
        ([{"base_url": "http://x", "models": "m"}], "list of strings"),
    ],
)
def test_parse_config_invalid_raises_config_error(providers: list[object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"providers": providers})


def test_hosted_tools_policy_defaults_to_omit_and_accepts_reject() -> None:
    base = {"name": "p", "base_url": "http://x/v1"}
    omit = parse_config({"providers": [base]}).providers[0]
    reject = parse_config({"providers": [{**base, "hosted_tools": "reject"}]}).providers[0]

    assert (omit.hosted_tools, reject.hosted_tools) == ("omit", "reject")
    with pytest.raises(ConfigError, match="hosted_tools must be 'omit' or 'reject'"):
        parse_config({"providers": [{**base, "hosted_tools": "drop"}]})


def test_streaming_defaults_to_auto_and_accepts_on_and_off() -> None:
    base = {"name": "p", "base_url": "http://x/v1"}
    modes = [
        parse_config({"providers": [{**base, **extra}]}).providers[0].streaming
        for extra in ({}, {"streaming": "on"}, {"streaming": "off"})
    ]

    assert modes == ["auto", "on", "off"]
    with pytest.raises(ConfigError, match="streaming must be 'auto', 'on' or 'off'"):
        parse_config({"providers": [{**base, "streaming": False}]})
    env = {"UPSTREAM_BASE_URL": "http://x/v1", "UPSTREAM_STREAMING": "off"}
    single = load_config(env)
    assert single is not None and single.providers[0].streaming == "off"


def test_upstream_hosted_tools_variable_sets_the_single_provider_policy() -> None:
    env = {"UPSTREAM_BASE_URL": "http://x/v1", "UPSTREAM_HOSTED_TOOLS": "reject"}

    config = load_config(env)

    assert config is not None and config.providers[0].hosted_tools == "reject"


def test_tool_backends_name_an_operator_server_and_a_backed_kind() -> None:
    base = {
        "providers": [{"name": "p", "base_url": "http://x/v1"}],
        "mcp_servers": [{"server_label": "search", "url": "https://search.example/mcp"}],
    }
    backend = {"type": "web_search", "server_label": "search", "tool": "find"}

    config = parse_config({**base, "tool_backends": [backend]})

    assert config.tool_backend("web_search") == ToolBackend("web_search", "search", "find")
    assert config.tool_backend("file_search") is None
    every = [
        {"type": kind, "server_label": "search", "tool": kind, "argument": "x"}
        for kind in ("file_search", "code_interpreter", "image_generation")
    ]
    config = parse_config({**base, "tool_backends": every})
    assert config.tool_backend("image_generation") == ToolBackend(
        "image_generation", "search", "image_generation", "x"
    )
    for broken, message in [
        ({**backend, "type": "computer"}, "type must be one of web_search, file_search, code_"),
        ({**backend, "argument": ""}, "argument must be a non-empty string"),
        ({**backend, "server_label": "nope"}, "server_label must name one of the mcp_servers"),
        ({**backend, "tool": ""}, "tool must be a non-empty string"),
        ({**backend, "extra": 1}, "unknown key 'extra'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_config({**base, "tool_backends": [broken]})


def test_context_windows_per_provider_and_model() -> None:
    config = parse_config(
        {
            "providers": [
                {
                    "base_url": "http://u/v1",
                    "context_window": 8192,
                    "context_windows": {"big": 131072},
                }
            ]
        }
    )
    provider = config.providers[0]
    assert provider.context_window == 8192 and dict(provider.context_windows) == {"big": 131072}


@pytest.mark.parametrize(
    "raw", [{"context_window": 0}, {"context_window": "8k"}, {"context_windows": {"m": -1}}]
)
def test_context_window_must_be_a_positive_integer(raw: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="context_windows?(\\.m)? must be a positive integer"):
        parse_config({"providers": [{"base_url": "http://u/v1", **raw}]})


def test_chat_provider_options_default_off_and_parse() -> None:
    config = parse_config(
        {
            "providers": [
                {"name": "plain", "base_url": "http://a/v1", "models": ["a"]},
                {
                    "name": "vllm",
                    "base_url": "http://b/v1",
                    "models": ["b"],
                    "send_reasoning_content": True,
                    "send_verbosity": True,
                },
            ]
        }
    )
    plain, vllm = config.providers
    assert (plain.send_reasoning_content, plain.send_verbosity) == (False, False)
    assert (vllm.send_reasoning_content, vllm.send_verbosity) == (True, True)


@pytest.mark.parametrize("key", ["send_reasoning_content", "send_verbosity"])
def test_chat_provider_options_must_be_booleans(key: str) -> None:
    with pytest.raises(ConfigError, match=f"{key} must be true or false"):
        parse_config({"providers": [{"name": "p", "base_url": "http://a/v1", key: "yes"}]})


def test_request_log_content_is_off_unless_tenants_are_named() -> None:
    providers = [{"name": "p", "base_url": "http://127.0.0.1:1/v1", "api": "chat"}]
    assert parse_config({"providers": providers}, env={}).log_content == frozenset()
    config = parse_config(
        {"providers": providers, "request_log": {"content_tenants": ["a"]}},
        env={"GATEWAY_LOG_CONTENT_TENANTS": " b, ,c"},
    )
    assert config.log_content == frozenset({"a", "b", "c"})
    for bad, message in (
        ({"request_log": ["a"]}, "request_log must be a table"),
        ({"request_log": {"tenants": ["a"]}}, "request_log: unknown key 'tenants'"),
        ({"request_log": {"content_tenants": "a"}}, "content_tenants must be a list"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_config({"providers": providers, **bad}, env={})


def test_loop_limits_default_and_are_set_per_provider() -> None:
    from responses_gateway.loop.limits import LoopLimits

    config = parse_config(
        {
            "providers": [
                {"name": "a", "base_url": "http://a/v1", "models": ["ma"]},
                {
                    "name": "b",
                    "base_url": "http://b/v1",
                    "default": True,
                    "max_model_calls": 8,
                    "max_tool_calls": 3,
                    "max_loop_seconds": 90,
                },
            ]
        },
        {},
    )

    assert config.limits_for("ma") == LoopLimits(64, 32, 3600.0)
    assert config.limits_for("anything") == LoopLimits(8, 3, 90.0)


def test_loop_limits_must_be_positive_numbers() -> None:
    provider = {"name": "p", "base_url": "http://p/v1", "max_model_calls": 0}
    with pytest.raises(ConfigError, match="provider 'p': max_model_calls must be a positive"):
        parse_config({"providers": [provider]}, {})


# -- Amazon Bedrock (docs/bedrock.md) -----------------------------------------------------------


def test_bedrock_provider_defaults_to_the_regions_runtime_endpoint_and_signs() -> None:
    config = parse_config(
        {"providers": [{"name": "br", "api": "bedrock", "models": ["amazon.nova-pro-v1:0"]}]},
        {"AWS_REGION": "eu-west-1"},
    )
    (provider,) = config.providers
    assert provider.base_url == "https://bedrock-runtime.eu-west-1.amazonaws.com"
    assert (provider.aws_region, provider.aws_sigv4, provider.api_key) == ("eu-west-1", True, None)
    assert provider.additional_model_request_fields == {}


def test_bedrock_region_comes_from_the_setting_then_the_endpoint_then_the_environment() -> None:
    def region(raw: dict[str, Any], env: dict[str, str]) -> str | None:
        provider = {"name": "br", "api": "bedrock", **raw}
        return parse_config({"providers": [provider]}, env).providers[0].aws_region

    endpoint = "https://bedrock-runtime.ap-southeast-2.amazonaws.com"
    assert region({"aws_region": "us-west-2", "base_url": endpoint}, {}) == "us-west-2"
    assert region({"base_url": endpoint}, {"AWS_REGION": "us-east-1"}) == "ap-southeast-2"
    assert region({}, {"AWS_DEFAULT_REGION": "ca-central-1"}) == "ca-central-1"
    with pytest.raises(ConfigError, match="needs aws_region"):
        region({}, {})


def test_bedrock_api_key_is_a_bearer_token_instead_of_a_signature() -> None:
    raw = {"name": "br", "api": "bedrock", "aws_region": "us-east-1", "api_key_env": "BR_KEY"}
    (provider,) = parse_config({"providers": [raw]}, {"BR_KEY": "bedrock-api-key"}).providers
    assert (provider.api_key, provider.aws_sigv4) == ("bedrock-api-key", False)


def test_additional_model_request_fields_belong_to_bedrock_providers() -> None:
    fields = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    raw = {"name": "br", "api": "bedrock", "aws_region": "us-east-1"}
    parsed = parse_config({"providers": [{**raw, "additional_model_request_fields": fields}]}, {})
    assert parsed.providers[0].additional_model_request_fields == fields
    chat = {"name": "c", "base_url": "http://x/v1", "additional_model_request_fields": fields}
    for bad in ({**raw, "additional_model_request_fields": "x"}, chat):
        with pytest.raises(ConfigError, match="additional_model_request_fields"):
            parse_config({"providers": [bad]}, {})


def test_aws_sigv4_signs_a_chat_provider_for_bedrocks_openai_compatible_endpoint() -> None:
    url = "https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1"
    raw = {"name": "oss", "base_url": url, "api": "chat", "aws_sigv4": True}
    (provider,) = parse_config({"providers": [raw]}, {}).providers
    assert (provider.aws_sigv4, provider.aws_region) == (True, "us-west-2")
    elsewhere = {**raw, "base_url": "https://proxy.example/v1"}
    with pytest.raises(ConfigError, match="aws_sigv4 needs aws_region"):
        parse_config({"providers": [elsewhere]}, {})
    assert parse_config({"providers": [elsewhere]}, {"AWS_REGION": "us-east-1"}).providers[
        0
    ].aws_region == ("us-east-1")


def test_bedrock_models_variable_adds_a_bedrock_provider_beside_the_upstream() -> None:
    env = {
        "UPSTREAM_BASE_URL": "https://api.openai.com/v1",
        "BEDROCK_MODELS": " us.anthropic.claude-sonnet-4-5-20250929-v1:0, amazon.nova-pro-v1:0 ,",
        "AWS_REGION": "us-east-1",
    }
    config = load_config(env)
    assert config is not None
    provider, model = config.route("amazon.nova-pro-v1:0")
    assert (provider.name, provider.api, model) == ("bedrock", "bedrock", "amazon.nova-pro-v1:0")
    assert provider.models == (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "amazon.nova-pro-v1:0",
    )
    assert config.route("gpt-5")[0].name == "upstream"
    alone = load_config({"BEDROCK_MODELS": "amazon.nova-pro-v1:0", "AWS_REGION": "us-east-1"})
    assert alone is not None and [p.name for p in alone.providers] == ["bedrock"]


def test_cache_points_belong_to_bedrock_providers() -> None:
    raw = {"name": "br", "api": "bedrock", "aws_region": "us-east-1", "cache_points": True}
    assert parse_config({"providers": [raw]}, {}).providers[0].cache_points is True
    chat = {"name": "c", "base_url": "http://x/v1", "cache_points": True}
    with pytest.raises(ConfigError, match="cache_points"):
        parse_config({"providers": [chat]}, {})
