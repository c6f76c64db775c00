"""A deploy-time configuration round trip: the whole GATEWAY_CONFIG in an SSM parameter
(providers, routing, MCP servers, prices, budgets, operators), providers' keys in SSM and Secrets
Manager (moto), loaded as a deployed function's cold start loads it; a bad one fails naming the
field."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pytest

from responses_gateway.config import ConfigError
from responses_gateway.observability import NullTelemetry, lambda_app, load_lambda_config
from responses_gateway.store.base import BudgetLimits
from responses_gateway.store.local import LocalDynamo


@pytest.fixture
def aws(dynamo: LocalDynamo, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """SSM and Secrets Manager on the embedded moto endpoint, for clients built from now on."""
    import aws_lambda_powertools.utilities.parameters.base as parameters_base

    monkeypatch.setenv("AWS_ENDPOINT_URL", dynamo.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "local")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "local")
    monkeypatch.setenv("AWS_DEFAULT_REGION", dynamo.region)
    monkeypatch.setattr(parameters_base, "DEFAULT_PROVIDERS", {})
    yield {
        "ssm": boto3.client("ssm", region_name=dynamo.region),
        "secrets": boto3.client("secretsmanager", region_name=dynamo.region),
    }


def _name() -> str:
    return f"/responses-gateway/test-{uuid.uuid4().hex}"


FULL = {
    "providers": [
        {
            "name": "openai",
            "base_url": "https://api.openai.com/v1",
            "prefixes": ["gpt-"],
            "api_key_parameter": "PARAM",
        },
        {
            "name": "router",
            "base_url": "https://openrouter.ai/api/v1",
            "default": True,
            "api_key_secret": "SECRET",
        },
    ],
    "mcp_servers": [{"server_label": "docs", "url": "https://mcp.example.com/mcp"}],
    "prices": {"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.6}},
    "budgets": {"daily_tokens": 1000000, "tenants": {"k123": {"monthly_cost_usd": 25}}},
    "operators": ["k-operator"],
}


def test_the_whole_config_round_trips_through_ssm(aws: dict[str, Any]) -> None:
    key_parameter, secret, config_parameter = (
        _name(),
        f"responses-gateway/{uuid.uuid4().hex}",
        _name(),
    )
    aws["ssm"].put_parameter(Name=key_parameter, Value="sk-openai", Type="SecureString")
    aws["secrets"].create_secret(Name=secret, SecretString='{"api_key": "sk-router"}')
    document = json.loads(
        json.dumps(FULL).replace("PARAM", key_parameter).replace("SECRET", secret)
    )
    aws["ssm"].put_parameter(Name=config_parameter, Value=json.dumps(document), Type="SecureString")

    config = load_lambda_config({"GATEWAY_CONFIG_PARAMETER": config_parameter})

    assert [(p.name, p.api_key) for p in config.providers] == [
        ("openai", "sk-openai"),
        ("router", "sk-router"),
    ]
    assert config.route("gpt-4o-mini")[0].name == "openai"
    assert config.route("llama")[0].name == "router"
    assert [s.server_label for s in config.mcp_servers] == ["docs"]
    price = config.prices.price("gpt-4o-mini")
    assert price is not None and price.output == Decimal("0.6")
    assert config.budgets is not None
    assert config.budgets.limits_for("anyone") == BudgetLimits(daily_tokens=1_000_000)
    assert config.budgets.limits_for("k123") == BudgetLimits(monthly_cost_usd=Decimal(25))
    assert config.operators == frozenset({"k-operator"})
    assert "sk-openai" not in repr(config) and "sk-router" not in repr(config)


def test_a_toml_config_parameter_and_operators_from_the_environment(aws: dict[str, Any]) -> None:
    name = _name()
    aws["ssm"].put_parameter(
        Name=name,
        Value='[[providers]]\nname = "local"\nbase_url = "http://10.0.0.5:8000/v1"\n',
        Type="String",
    )
    config = load_lambda_config(
        {"GATEWAY_CONFIG_PARAMETER": name, "GATEWAY_OPERATOR_TENANTS": "a1, b2"}
    )
    assert config.providers[0].base_url == "http://10.0.0.5:8000/v1"
    assert config.operators == frozenset({"a1", "b2"})
    assert config.budgets is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"budgets": {"daily_tokens": "lots"}}, "budgets.daily_tokens must be a number"),
        ({"budgets": {"daily_tokns": 5}}, "budgets: unknown key 'daily_tokns'"),
        ({"prices": {"gpt-4o": {"input": 1}}}, "prices.gpt-4o.output is required"),
        ({"operators": "ops"}, "operators must be a list"),
        ({"mcp_servers": [{"server_label": "x"}]}, "mcp server 'x': give exactly one of url"),
    ],
)
def test_a_bad_config_fails_the_cold_start_naming_the_field(
    aws: dict[str, Any], change: dict[str, Any], field: str
) -> None:
    name = _name()
    document = {"providers": [{"name": "p", "base_url": "https://x.example/v1"}], **change}
    aws["ssm"].put_parameter(Name=name, Value=json.dumps(document), Type="String")
    with pytest.raises(ConfigError) as failed:
        lambda_app(
            "buffered",
            {"GATEWAY_CONFIG_PARAMETER": name, "DYNAMODB_TABLE": "t"},
            telemetry=NullTelemetry(),
        )
    assert str(failed.value).startswith(f"SSM parameter {name}: {field}")
    assert name in str(failed.value)


def test_an_unreadable_provider_key_names_the_provider_field(aws: dict[str, Any]) -> None:
    name = _name()
    document = {
        "providers": [
            {"name": "p", "base_url": "https://x.example/v1", "api_key_parameter": "/nope/key"}
        ]
    }
    aws["ssm"].put_parameter(Name=name, Value=json.dumps(document), Type="String")
    with pytest.raises(ConfigError, match=r"providers\[0\]\.api_key_parameter: cannot read SSM"):
        load_lambda_config({"GATEWAY_CONFIG_PARAMETER": name})
    with pytest.raises(ConfigError, match="GATEWAY_CONFIG_PARAMETER: cannot read SSM parameter"):
        load_lambda_config({"GATEWAY_CONFIG_PARAMETER": "/responses-gateway/absent"})
