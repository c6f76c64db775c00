"""``responses-gateway keys``: the local key file (a revoked key stops working on the next
request) and the deployed stack's API Gateway keys and usage plan (moto's API Gateway)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from moto import mock_aws

from responses_gateway.cli import main
from responses_gateway.keys import TENANT_TAG, ApiGatewayKeys, KeysError, LocalKeyFile
from responses_gateway.tenancy import current_policy, key_id_of


def _created(output: str) -> tuple[str, str]:
    key_id = re.search(r"^key id: (\S+)$", output, re.MULTILINE)
    value = re.search(r"^key:\s+(\S+)$", output, re.MULTILINE)
    assert key_id and value
    return key_id.group(1), value.group(1)


def test_local_keys_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "keys"
    path.write_text("# operators\nsk-ops:ops\n")
    assert main(["keys", "create", "--tenant", "acme", "--file", str(path)]) == 0
    key_id, value = _created(capsys.readouterr().out)
    assert key_id == key_id_of(value) and value.startswith("sk-gw-")
    assert path.stat().st_mode & 0o777 == 0o600
    assert main(["keys", "create", "--tenant", "acme", "--file", str(path)]) == 0
    second_id, _ = _created(capsys.readouterr().out)

    assert main(["keys", "list", "--file", str(path)]) == 0
    listed = capsys.readouterr().out
    assert listed.splitlines() == [
        f"{key_id_of('sk-ops')}  ops",
        f"{key_id}  acme",
        f"{second_id}  acme",
    ]
    assert value not in listed  # a listing never shows a key

    assert (
        main(["keys", "revoke", "--tenant", "acme", "--key-id", key_id, "--file", str(path)]) == 0
    )
    assert capsys.readouterr().out == f"revoked {key_id} (acme)\n"
    assert [k.key_id for k in LocalKeyFile(path).list("acme")] == [second_id]
    assert path.read_text().startswith("# operators\nsk-ops:ops\n")
    assert main(["keys", "revoke", "--tenant", "nobody", "--file", str(path)]) == 2


def test_a_revoked_local_key_stops_working_on_the_next_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keys"
    keys = LocalKeyFile(path)
    created = keys.create("acme")
    monkeypatch.setenv("GATEWAY_API_KEYS_FILE", str(path))
    monkeypatch.delenv("GATEWAY_API_KEYS", raising=False)
    headers = {"authorization": f"Bearer {created.value}"}
    assert current_policy().resolve(headers=headers) == "acme"
    keys.revoke("acme")
    with pytest.raises(Exception) as refused:
        current_policy().resolve(headers=headers)
    assert getattr(refused.value, "status_code", None) == 401


@pytest.fixture
def plan() -> Iterator[tuple[object, str]]:
    # moto's state is one per process: starting or stopping a mock that resets it would drop
    # the tables of the embedded DynamoDB endpoints other test modules keep for the session
    mock = mock_aws()
    mock.start(reset=False)
    try:
        import boto3

        client = boto3.client("apigateway", region_name="us-east-1")
        api = client.create_rest_api(name="gateway")
        plan_id = client.create_usage_plan(
            name="plan", apiStages=[{"apiId": api["id"], "stage": "prod"}]
        )["id"]
        yield client, plan_id
        for key in client.get_api_keys()["items"]:  # what the test made, gone with it
            client.delete_api_key(apiKey=key["id"])
        for each in client.get_usage_plans()["items"]:
            client.delete_usage_plan(usagePlanId=each["id"])
        client.delete_rest_api(restApiId=api["id"])
    finally:
        mock.stop(remove_data=False)


def test_deployed_keys_create_list_revoke_against_api_gateway(
    plan: tuple[object, str], capsys: pytest.CaptureFixture[str]
) -> None:
    client, plan_id = plan
    args = ["--usage-plan-id", plan_id, "--region", "us-east-1"]
    assert main(["keys", "create", "--tenant", "acme", *args]) == 0
    key_id, value = _created(capsys.readouterr().out)
    key = client.get_api_key(apiKey=key_id, includeValue=True)  # type: ignore[attr-defined]
    assert (key["value"], key["enabled"], key["tags"]) == (value, True, {TENANT_TAG: "acme"})
    in_plan = client.get_usage_plan_keys(usagePlanId=plan_id)["items"]  # type: ignore[attr-defined]
    assert [k["id"] for k in in_plan] == [key_id]
    assert main(["keys", "create", "--tenant", "other", *args]) == 0
    other_id, _ = _created(capsys.readouterr().out)

    assert main(["keys", "list", "--tenant", "acme", *args]) == 0
    assert capsys.readouterr().out == f"{key_id}  acme\n"
    assert main(["keys", "revoke", "--tenant", "acme", *args]) == 0
    assert capsys.readouterr().out == f"revoked {key_id} (acme)\n"
    keys = ApiGatewayKeys(client, plan_id)
    assert [k.key_id for k in keys.list()] == [other_id]
    with pytest.raises(KeysError):
        keys.revoke("acme")


def test_keys_without_a_file_or_stack_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GATEWAY_API_KEYS_FILE", raising=False)
    assert main(["keys", "list"]) == 2
    assert "GATEWAY_API_KEYS_FILE" in capsys.readouterr().err


def test_served_gateway_refuses_a_revoked_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the HTTP edge: the same request is 200-able before and 401 after a revoke."""
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.testing.server import run_in_thread

    path = tmp_path / "keys"
    created = LocalKeyFile(path).create("acme")
    monkeypatch.setenv("GATEWAY_API_KEYS_FILE", str(path))
    config = parse_config({"providers": [{"name": "x", "base_url": "http://127.0.0.1:9/v1"}]})
    server = run_in_thread(create_app(config, store=None))  # type: ignore[arg-type]
    try:
        with httpx.Client(base_url=server.url) as http:
            headers = {"authorization": f"Bearer {created.value}"}
            body = {"model": "m"}  # invalid (no input): 400 proves the key was accepted
            assert http.post("/v1/responses", json=body, headers=headers).status_code == 400
            LocalKeyFile(path).revoke("acme")
            assert http.post("/v1/responses", json=body, headers=headers).status_code == 401
    finally:
        server.stop()


def test_revoke_keeps_other_entries_and_comments_of_a_line(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("sk-a:acme, sk-b:beta  # team keys\nsk-bare\nsk-c:acme\n")
    removed = LocalKeyFile(path).revoke("acme")
    assert [k.key_id for k in removed] == [key_id_of("sk-a"), key_id_of("sk-c")]
    assert path.read_text() == "sk-b:beta  # team keys\nsk-bare\n"
    assert [k.key_id for k in LocalKeyFile(path).revoke("local")] == [key_id_of("sk-bare")]
    assert path.read_text() == "sk-b:beta  # team keys\n"


class _PlanRefusing:
    """An API Gateway client whose ``plan`` refuses new keys (moto checks no plan id)."""

    def __init__(self, client: Any, plan: str) -> None:
        self._client = client
        self._plan = plan

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def create_usage_plan_key(self, **request: Any) -> Any:
        if request["usagePlanId"] == self._plan:
            raise RuntimeError("NotFoundException: Invalid Usage Plan ID specified")
        return self._client.create_usage_plan_key(**request)


def test_a_key_joins_every_plan_or_none(plan: tuple[object, str]) -> None:
    """A new key joins the WebSocket API's plan too; one that cannot is deleted again."""
    client, plan_id = plan
    socket_plan = client.create_usage_plan(name="socket")["id"]  # type: ignore[attr-defined]
    keys = ApiGatewayKeys(client, plan_id, more_plan_ids=[socket_plan])
    created = keys.create("acme")
    for each in (plan_id, socket_plan):
        in_plan = client.get_usage_plan_keys(usagePlanId=each)["items"]  # type: ignore[attr-defined]
        assert [k["id"] for k in in_plan] == [created.info.key_id]

    broken = ApiGatewayKeys(
        _PlanRefusing(client, socket_plan), plan_id, more_plan_ids=[socket_plan]
    )
    with pytest.raises(RuntimeError, match="Invalid Usage Plan"):
        broken.create("acme")
    remaining = client.get_api_keys()["items"]  # type: ignore[attr-defined]
    assert [k["id"] for k in remaining] == [created.info.key_id]
