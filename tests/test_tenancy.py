"""The tenant rule (``responses_gateway.tenancy``): local keys, API Gateway contexts, the 401
envelope, tenant isolation through the app, and the API Gateway key authorizer."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import LocalDynamo, start_local_dynamodb
from responses_gateway.tenancy import (
    KEYS_ENV,
    KEYS_FILE_ENV,
    LOCAL_TENANT,
    REQUEST_CONTEXT_HEADER,
    TRUST_ENV,
    AuthenticationError,
    AuthorizerDenied,
    TenancyConfigError,
    TenancyPolicy,
    authorize,
    bearer_token,
    current_policy,
    parse_keys,
)

SECRET_A = "sk-local-alpha-0123456789"
SECRET_B = "sk-local-bravo-9876543210"
KEYS = f"{SECRET_A}:team-a,{SECRET_B}:team-b"


def _context(key_id: str | None, request_id: str = "req-1") -> dict[str, Any]:
    identity: dict[str, Any] = {"sourceIp": "203.0.113.7"}
    if key_id is not None:
        identity["apiKeyId"] = key_id
    return {"requestId": request_id, "stage": "prod", "identity": identity}


# -- key parsing ------------------------------------------------------------------------------


def test_parse_keys_maps_each_key_to_its_tenant() -> None:
    ring = parse_keys(KEYS)
    assert ring.tenant_for(SECRET_A) == "team-a"
    assert ring.tenant_for(SECRET_B) == "team-b"
    assert ring.tenant_for("sk-unknown") is None


def test_parse_keys_bare_key_acts_for_local_and_tenant_follows_last_colon() -> None:
    ring = parse_keys("plain-key, key:with:colons:tenant-x")
    assert ring.tenant_for("plain-key") == LOCAL_TENANT
    assert ring.tenant_for("key:with:colons") == "tenant-x"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "lists no key"),
        (" , ", "lists no key"),
        (":tenant", "empty key"),
        (f"{SECRET_A}:team a", "tenant"),
        (f"{SECRET_A}:", "tenant"),
        (f"{SECRET_A}:x,{SECRET_A}:y", "listed twice"),
    ],
)
def test_parse_keys_rejects_malformed_entries_without_quoting_keys(text: str, reason: str) -> None:
    with pytest.raises(TenancyConfigError, match=reason) as caught:
        parse_keys(text)
    assert SECRET_A not in str(caught.value)


def test_key_ring_repr_hides_keys() -> None:
    ring = parse_keys(KEYS)
    assert repr(ring) == "KeyRing(2 keys)"
    assert SECRET_A not in repr(TenancyPolicy(keys=ring))


def test_keys_file_allows_comments_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# local keys\n{SECRET_A}:team-a  # alpha\n\n{SECRET_B}:team-b\n")
    policy = TenancyPolicy.from_env({KEYS_FILE_ENV: str(path)})
    assert policy.keys is not None
    assert policy.keys.tenant_for(SECRET_B) == "team-b"


def test_from_env_refuses_two_key_sources_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(TenancyConfigError, match="not both"):
        TenancyPolicy.from_env({KEYS_ENV: KEYS, KEYS_FILE_ENV: "/keys"})
    with pytest.raises(TenancyConfigError, match="cannot read"):
        TenancyPolicy.from_env({KEYS_FILE_ENV: str(tmp_path / "missing")})


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer  abc ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token(value: str | None, token: str | None) -> None:
    assert bearer_token(value) == token


# -- resolution -------------------------------------------------------------------------------


def test_without_keys_everyone_is_local() -> None:
    assert TenancyPolicy().resolve(headers={}) == LOCAL_TENANT


def test_with_keys_a_bearer_key_names_the_tenant() -> None:
    policy = TenancyPolicy(keys=parse_keys(KEYS))
    assert policy.resolve(headers={"authorization": f"Bearer {SECRET_B}"}) == "team-b"


@pytest.mark.parametrize("authorization", [None, "Bearer sk-wrong", f"Basic {SECRET_A}"])
def test_with_keys_a_missing_or_wrong_key_is_a_401(authorization: str | None) -> None:
    policy = TenancyPolicy(keys=parse_keys(KEYS))
    headers = {} if authorization is None else {"authorization": authorization}
    with pytest.raises(AuthenticationError) as caught:
        policy.resolve(headers=headers)
    error = caught.value
    assert error.status_code == 401
    assert error.to_error()["code"] == "invalid_api_key"
    assert error.to_error()["type"] == "invalid_request_error"
    assert error.headers == {"www-authenticate": "Bearer"}
    assert "sk-wrong" not in error.message


def test_mangum_event_api_key_id_is_the_tenant_even_without_trust() -> None:
    event = {"requestContext": _context("key-id-a")}
    assert TenancyPolicy().resolve(event=event, headers={}) == "key-id-a"


def test_mangum_event_without_key_id_falls_back_to_local_rules_unless_deployed() -> None:
    event = {"requestContext": _context(None)}
    assert TenancyPolicy().resolve(event=event, headers={}) == LOCAL_TENANT
    with pytest.raises(AuthenticationError):
        TenancyPolicy(trust_lambda_context=True).resolve(event=event, headers={})


def test_adapter_header_is_trusted_only_when_deployed() -> None:
    forged = {REQUEST_CONTEXT_HEADER: json.dumps(_context("someone-else"))}
    assert TenancyPolicy().resolve(headers=forged) == LOCAL_TENANT
    keyed = TenancyPolicy(keys=parse_keys(KEYS))
    with pytest.raises(AuthenticationError):
        keyed.resolve(headers=forged)
    deployed = TenancyPolicy(trust_lambda_context=True)
    assert deployed.resolve(headers=forged) == "someone-else"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {REQUEST_CONTEXT_HEADER: "not json"},
        {REQUEST_CONTEXT_HEADER: json.dumps(_context(None))},
    ],
)
def test_deployed_without_an_api_key_id_is_a_401(headers: dict[str, str]) -> None:
    with pytest.raises(AuthenticationError):
        TenancyPolicy(trust_lambda_context=True).resolve(headers=headers)


def test_current_policy_follows_the_environment() -> None:
    local = current_policy({})
    assert local.keys is None and not local.trust_lambda_context
    assert current_policy({}) is local
    deployed = current_policy({TRUST_ENV: "1"})
    assert deployed.trust_lambda_context
    assert current_policy({TRUST_ENV: "true", KEYS_ENV: KEYS}).keys is not None


# -- through the app ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dynamo() -> Iterator[LocalDynamo]:
    local = start_local_dynamodb(table_name="tenancy-tests")
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
async def keyed_client(dynamo: LocalDynamo) -> AsyncIterator[httpx.AsyncClient]:
    store = DynamoStore(dynamo.client, dynamo.table_name)
    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1"}]})
    app = create_app(config, store)
    app.state.tenancy = TenancyPolicy(keys=parse_keys(KEYS))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway/v1") as client:
        yield client
    store.close()


async def test_app_answers_401_envelope_without_a_key(keyed_client: httpx.AsyncClient) -> None:
    answer = await keyed_client.get("/conversations/conv_missing")
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.headers["x-request-id"]
    assert answer.json()["error"]["code"] == "invalid_api_key"
    wrong = await keyed_client.post(
        "/conversations", json={}, headers={"authorization": "Bearer sk-nope"}
    )
    assert wrong.status_code == 401


async def test_app_isolates_tenants_by_key(keyed_client: httpx.AsyncClient) -> None:
    alpha = {"authorization": f"Bearer {SECRET_A}"}
    bravo = {"authorization": f"Bearer {SECRET_B}"}
    created = await keyed_client.post(
        "/conversations", json={"metadata": {"k": "v"}}, headers=alpha
    )
    assert created.status_code == 200
    conversation_id = created.json()["id"]
    assert (await keyed_client.get(f"/conversations/{conversation_id}", headers=alpha)).is_success
    hidden = await keyed_client.get(f"/conversations/{conversation_id}", headers=bravo)
    assert hidden.status_code == 404
    assert (
        await keyed_client.delete(f"/conversations/{conversation_id}", headers=bravo)
    ).status_code == 404
    assert (await keyed_client.get(f"/conversations/{conversation_id}", headers=alpha)).is_success


async def test_app_reads_keys_from_the_environment(
    dynamo: LocalDynamo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYS_ENV, f"{SECRET_A}:team-a")
    monkeypatch.delenv(KEYS_FILE_ENV, raising=False)
    monkeypatch.delenv(TRUST_ENV, raising=False)
    store = DynamoStore(dynamo.client, dynamo.table_name)
    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1"}]})
    transport = httpx.ASGITransport(app=create_app(config, store))
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway/v1") as client:
        assert (await client.post("/conversations", json={})).status_code == 401
        answer = await client.post(
            "/conversations", json={}, headers={"authorization": f"Bearer {SECRET_A}"}
        )
        assert answer.status_code == 200
    store.close()


# -- the API Gateway authorizer -----------------------------------------------------------------

METHOD_ARN = "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod/POST/v1/responses"


def test_authorize_names_the_bearer_token_as_the_usage_plan_key() -> None:
    event = {"methodArn": METHOD_ARN, "headers": {"Authorization": "Bearer gw-key-1"}}
    answer = authorize(event)
    assert answer["usageIdentifierKey"] == "gw-key-1"
    statement = answer["policyDocument"]["Statement"][0]
    assert statement == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        "Resource": "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod/*",
    }
    assert "gw-key-1" not in answer["principalId"]


@pytest.mark.parametrize(
    "event",
    [
        {"methodArn": METHOD_ARN, "headers": {}},
        {"methodArn": METHOD_ARN, "headers": {"authorization": "Basic x"}},
        {"methodArn": METHOD_ARN, "headers": None},
        {"headers": {"authorization": "Bearer k"}},
        {"methodArn": "garbage", "headers": {"authorization": "Bearer k"}},
    ],
)
def test_authorize_denies_with_unauthorized(event: dict[str, Any]) -> None:
    with pytest.raises(AuthorizerDenied, match="^Unauthorized$"):
        authorize(event)
