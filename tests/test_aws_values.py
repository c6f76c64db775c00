"""aws_values: secrets and parameters read at cold start over the gateway's own signed HTTP.

GIVEN Secrets Manager and SSM on moto's server and credentials in the environment (as Lambda
gives them), THEN a string secret, a binary secret and a SecureString parameter read back
without Powertools Parameters (nor boto3), a missing one fails naming only the service's error
code, and without credentials in the environment the read goes through Powertools as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from responses_gateway.aws_values import AwsValueError, read_value
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb


@pytest.fixture(scope="module")
def moto() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name="aws-values")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def env(moto: LocalDynamo, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    from aws_lambda_powertools.utilities import parameters

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("Powertools Parameters was used")

    monkeypatch.setattr(parameters, "get_secret", never)
    monkeypatch.setattr(parameters, "get_parameter", never)
    return {
        "AWS_ENDPOINT_URL": moto.endpoint_url,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_SESSION_TOKEN": "token",
        "AWS_REGION": moto.region,
    }


def _client(moto: LocalDynamo, service: str) -> Any:
    import boto3

    return boto3.client(
        service,
        endpoint_url=moto.endpoint_url,
        region_name=moto.region,
        aws_access_key_id="local",
        aws_secret_access_key="local",  # noqa: S106 - moto's dummy credentials
    )


def test_secrets_and_parameters_are_read_directly(moto: LocalDynamo, env: dict[str, str]) -> None:
    secrets = _client(moto, "secretsmanager")
    secrets.create_secret(Name="gw/text", SecretString='{"api_key": "sk-1"}')
    secrets.create_secret(Name="gw/binary", SecretBinary=b"\x00\x01raw")
    _client(moto, "ssm").put_parameter(Name="/gw/key", Value="sk-2", Type="SecureString")
    assert read_value("secret", "gw/text", env) == '{"api_key": "sk-1"}'
    assert read_value("secret", "gw/binary", env) == b"\x00\x01raw"
    assert read_value("parameter", "/gw/key", env) == "sk-2"


def test_a_missing_value_names_the_error_code_only(env: dict[str, str]) -> None:
    with pytest.raises(AwsValueError) as caught:
        read_value("secret", "gw/absent-secret-name", env)
    assert str(caught.value) == "ResourceNotFoundException"
    with pytest.raises(AwsValueError) as missing:
        read_value("parameter", "/gw/absent", env)
    assert "absent" not in str(missing.value)


def test_a_service_specific_endpoint_wins(env: dict[str, str]) -> None:
    unreachable = {**env, "AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:9"}
    with pytest.raises(AwsValueError) as caught:
        read_value("secret", "gw/text", unreachable)
    assert caught.value.args[0] == "ConnectError"


def test_without_environment_credentials_powertools_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aws_lambda_powertools.utilities import parameters

    seen: list[str] = []
    monkeypatch.setattr(parameters, "get_secret", lambda name, **_: seen.append(name) or "v")
    assert read_value("secret", "gw/x", {"AWS_REGION": "us-east-1"}) == "v"
    assert seen == ["gw/x"]
