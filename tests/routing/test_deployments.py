"""The routes section of GATEWAY_CONFIG: parsing, defaults, and the rules it enforces."""

from __future__ import annotations

from typing import Any

import pytest

from responses_gateway.config import ConfigError, parse_config

PROVIDERS = [
    {
        "name": "openai",
        "base_url": "https://api.openai.com/v1",
        "api": "responses",
        "api_key": "sk-one",
        "models": ["gpt-4.1"],
    },
    {"name": "vllm", "base_url": "http://vllm:8000/v1", "api": "chat", "models": ["llama"]},
]


def _config(*routes: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return parse_config({"providers": PROVIDERS, "routes": list(routes)}, env or {})


def test_a_route_maps_a_model_to_deployments_on_several_wires() -> None:
    config = _config(
        {
            "model": "gpt-oss",
            "strategy": "least_loaded",
            "fallbacks": ["gpt-4.1"],
            "context_window_fallback": "gpt-4.1",
            "deployments": [
                {"provider": "openai", "model": "gpt-oss-120b", "weight": 1, "rpm": 60},
                {"provider": "vllm", "model": "openai/gpt-oss-120b", "weight": 3, "tpm": 1000},
            ],
        }
    )
    route = config.routes["gpt-oss"]
    assert [(d.id, d.provider.api, d.weight) for d in route.deployments] == [
        ("openai/gpt-oss-120b", "responses", 1.0),
        ("vllm/openai/gpt-oss-120b", "chat", 3.0),
    ]
    assert (route.deployments[0].rpm, route.deployments[1].tpm) == (60, 1000)
    assert (route.strategy, route.fallbacks, route.context_window_fallback) == (
        "least_loaded",
        ("gpt-4.1",),
        "gpt-4.1",
    )
    provider, upstream = config.route("gpt-oss")  # the first deployment, for the request's setup
    assert (provider.name, upstream) == ("openai", "gpt-oss-120b")
    assert config.route("gpt-4.1")[0].name == "openai"  # models without a route are unchanged


def test_a_deployment_may_use_its_own_key_variable_kept_out_of_reprs() -> None:
    config = _config(
        {
            "model": "m",
            "deployments": [{"provider": "openai", "model": "m", "api_key_env": "SECOND_KEY"}],
        },
        env={"SECOND_KEY": "sk-second-account"},
    )
    deployment = config.routes["m"].deployments[0]
    assert deployment.provider.api_key == "sk-second-account"
    assert "sk-second" not in repr(config)


def test_configs_without_routes_keep_working() -> None:
    config = parse_config({"providers": PROVIDERS})
    assert config.routes == {} and config.route("gpt-4.1")[1] == "gpt-4.1"


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ({"model": "m", "deployments": []}, "deployments must be a non-empty list"),
        ({"model": "m", "deployments": [{"provider": "nope", "model": "x"}]}, "provider must"),
        (
            {
                "model": "m",
                "strategy": "fastest",
                "deployments": [{"provider": "vllm", "model": "x"}],
            },
            "strategy must be one of",
        ),
        (
            {
                "model": "m",
                "fallbacks": ["unknown"],
                "deployments": [{"provider": "vllm", "model": "x"}],
            },
            "fallback model 'unknown' is served by no provider",
        ),
        (
            {"model": "m", "deployments": [{"provider": "vllm", "model": "x", "weight": 0}]},
            "weight must be positive",
        ),
        (
            {"model": "m", "deployments": [{"provider": "vllm", "model": "x", "rpm": 1.5}]},
            "rpm must be an integer",
        ),
        (
            {
                "model": "m",
                "deployments": [
                    {"provider": "vllm", "model": "x"},
                    {"provider": "vllm", "model": "x"},
                ],
            },
            "deployment id 'vllm/x' is used twice",
        ),
        (
            {"model": "m", "deployments": [{"provider": "vllm", "model": "x", "key": "sk"}]},
            "unknown key 'key'",
        ),
        (
            {
                "model": "m",
                "deployments": [{"provider": "vllm", "model": "x", "api_key_env": "UNSET"}],
            },
            "api_key_env names a variable that is not set",
        ),
    ],
)
def test_route_mistakes_are_config_errors_naming_the_field(
    route: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(route)


def test_route_loop_limits_win_over_its_providers_and_default_to_them() -> None:
    from responses_gateway.loop.limits import LoopLimits

    config = _config(
        {
            "model": "capped",
            "deployments": [{"provider": "openai", "model": "gpt-5"}],
            "max_model_calls": 5,
        },
        {"model": "plain", "deployments": [{"provider": "vllm", "model": "llama"}]},
    )

    assert config.routes["capped"].limits == LoopLimits(max_model_calls=5)
    assert config.limits_for("capped") == LoopLimits(max_model_calls=5)
    assert config.routes["plain"].limits is None
    assert config.limits_for("plain") == LoopLimits()


def test_route_loop_limits_are_checked() -> None:
    deployments = [{"provider": "openai", "model": "gpt-5"}]
    with pytest.raises(ConfigError, match="route 'm': max_loop_seconds must be a positive"):
        _config({"model": "m", "deployments": deployments, "max_loop_seconds": 0})
