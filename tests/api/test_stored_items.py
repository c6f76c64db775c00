"""Input items come back as OpenAI's spec shows them: every input item type, stored through a
conversation's doors or a create's input, reads back valid against the spec's
``ConversationItem`` / ``ItemResource`` (ids minted where absent, ``status: "completed"``...),
and lists carry string ``first_id`` / ``last_id``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from starlette.testclient import TestClient

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.protocol.resources import NOT_STORED, SHOWN_STATUS, stored_item
from responses_gateway.store.sqlite import SqliteStore
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.sdk_instances import INPUT_INSTANCES
from responses_gateway.testing.server import run_in_thread

SPEC = Path(__file__).parents[1] / "fixtures" / "openapi" / "gateway.json"
NOT_CONVERSATION_CONTENT = {"item_reference", *NOT_STORED}
"""Input types never stored as themselves (a reference is replaced by its item)."""
WITHOUT_RESOURCE = {"configuration_update"}
"""Input types OpenAI's spec has no item resource for (the SDK has: it is newer)."""


@cache
def _validator(name: str) -> Any:
    spec = json.loads(SPEC.read_text())
    schema = {"$ref": f"#/components/schemas/{name}", "components": spec["components"]}
    return jsonschema_rs.validator_for(schema)


def _problems(name: str, value: Any) -> list[str]:
    return [
        f"{list(e.instance_path)}: {e.message[:200]}" for e in _validator(name).iter_errors(value)
    ]


def _instances() -> list[tuple[str, list[dict[str, Any]]]]:
    return sorted(
        (kind, items) for kind, items in INPUT_INSTANCES.items()
        if kind not in NOT_CONVERSATION_CONTENT
    )  # fmt: skip


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with run_in_thread(create_fake_upstream_app(ScriptedUpstream(demo=True))) as upstream:
        config = parse_config({"providers": [{"base_url": f"{upstream.url}/v1", "api": "chat"}]})
        with TestClient(create_app(config, SqliteStore())) as served:
            yield served


@pytest.mark.parametrize(("kind", "items"), _instances(), ids=[k for k, _ in _instances()])
def test_every_input_item_type_reads_back_as_a_valid_conversation_item(
    client: TestClient, kind: str, items: list[dict[str, Any]]
) -> None:
    created = client.post("/v1/conversations", json={"items": items})
    assert created.status_code == 200, created.text
    conversation = created.json()["id"]
    added = client.post(f"/v1/conversations/{conversation}/items", json={"items": items})
    listed = client.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"})

    for answer in (added, listed):
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert [item["type"] for item in page["data"]][: len(items)] == [i["type"] for i in items]
        assert all(isinstance(item["id"], str) and item["id"] for item in page["data"])
        if kind not in WITHOUT_RESOURCE:
            assert _problems("ConversationItemList", page) == []
    one = page["data"][-1]
    single = client.get(f"/v1/conversations/{conversation}/items/{one['id']}")
    assert single.json() == one


def test_stored_items_keep_what_the_client_sent_and_complete_the_rest(client: TestClient) -> None:
    sent = [
        {"role": "user", "content": "Hi"},
        {"type": "message", "role": "assistant", "content": "Hello", "status": "incomplete"},
        {"type": "shell_call", "call_id": "c1", "action": {"commands": ["ls"]}},
    ]
    conversation = client.post("/v1/conversations", json={"items": sent}).json()["id"]

    data = client.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()

    user, assistant, shell = data["data"]
    assert user["type"] == "message" and user["status"] == "completed"
    assert user["content"] == [{"type": "input_text", "text": "Hi"}]
    assert assistant["status"] == "incomplete"  # what the client sent is kept
    assert assistant["content"] == [
        {"type": "output_text", "text": "Hello", "annotations": [], "logprobs": []}
    ]
    assert shell["status"] == "completed" and shell["environment"] is None
    assert shell["action"] == {"commands": ["ls"], "timeout_ms": None, "max_output_length": None}
    assert (data["first_id"], data["last_id"]) == (user["id"], shell["id"])


def test_tool_output_parts_are_completed_too(client: TestClient) -> None:
    sent = [
        {"type": "function_call", "call_id": "c1", "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_image", "image_url": "https://x/a.png"}]},
    ]  # fmt: skip
    conversation = client.post("/v1/conversations", json={"items": sent}).json()["id"]

    page = client.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()

    assert page["data"][1]["output"] == [
        {"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"}
    ]
    assert _problems("ConversationItemList", page) == []


def test_a_null_the_resource_has_no_null_for_is_left_out(client: TestClient) -> None:
    sent = [
        {"type": "computer_call", "id": "cu_1", "call_id": "c1", "pending_safety_checks": [],
         "status": "completed", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "c1", "acknowledged_safety_checks": None,
         "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="}},
    ]  # fmt: skip
    conversation = client.post("/v1/conversations", json={"items": sent}).json()["id"]

    page = client.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()

    assert "acknowledged_safety_checks" not in page["data"][1]
    assert _problems("ConversationItemList", page) == []


def test_a_status_the_resource_has_no_value_for_is_shown_finished(client: TestClient) -> None:
    sent = [
        {"type": "computer_call", "id": "cu_2", "call_id": "c2", "pending_safety_checks": [],
         "status": "completed", "action": {"type": "screenshot"}},
        {"type": "computer_call_output", "call_id": "c2", "status": "in_progress",
         "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="}},
    ]  # fmt: skip
    conversation = client.post("/v1/conversations", json={"items": sent}).json()["id"]

    page = client.get(f"/v1/conversations/{conversation}/items", params={"order": "asc"}).json()

    assert [item["status"] for item in page["data"]] == ["completed", "completed"]
    assert _problems("ConversationItemList", page) == []
    assert stored_item(sent[1])["status"] == "completed" and sent[1]["status"] == "in_progress"


def test_an_empty_list_has_string_ids(client: TestClient) -> None:
    conversation = client.post("/v1/conversations", json={}).json()["id"]
    page = client.get(f"/v1/conversations/{conversation}/items").json()
    assert (page["data"], page["first_id"], page["last_id"]) == ([], "", "")
    assert _problems("ConversationItemList", page) == []


def test_a_conversation_refuses_requests_to_the_gateway_as_items(client: TestClient) -> None:
    answer = client.post(
        "/v1/conversations", json={"items": [{"role": "user", "content": "x"},
                                             {"type": "compaction_trigger"}]}
    )  # fmt: skip
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "items[1].type"


def test_an_unknown_item_reference_is_refused_naming_the_item(client: TestClient) -> None:
    answer = client.post(
        "/v1/conversations", json={"items": [{"type": "item_reference", "id": "msg_nowhere"}]}
    )
    assert answer.status_code == 400
    assert (answer.json()["error"]["code"], answer.json()["error"]["param"]) == (
        "item_not_found",
        "items[0]",
    )


def test_a_reference_to_a_stored_item_stores_the_item(client: TestClient) -> None:
    created = client.post("/v1/responses", json={"model": "demo", "input": "Hello there"}).json()
    answer_id = created["output"][0]["id"]
    conversation = client.post(
        "/v1/conversations", json={"items": [{"type": "item_reference", "id": answer_id}]}
    ).json()["id"]
    (item,) = client.get(f"/v1/conversations/{conversation}/items").json()["data"]
    assert (item["id"], item["type"]) == (answer_id, "message")


def test_a_creates_input_reads_back_as_valid_item_resources(client: TestClient) -> None:
    # every item as input, but the approval answer (it needs its request in the history) and
    # the compaction (the gateway opens only blobs it sealed)
    skipped = {"mcp_approval_response", "compaction", *WITHOUT_RESOURCE}
    items = [item for kind, group in _instances() if kind not in skipped
             for item in group if item["type"] not in skipped]  # fmt: skip
    unique = list({json.dumps(item, sort_keys=True): item for item in items}.values())
    created = client.post(
        "/v1/responses",
        json={"model": "demo", "input": [*unique, {"role": "user", "content": "Thanks"}]},
    )
    assert created.status_code == 200, created.text

    page = client.get(
        f"/v1/responses/{created.json()['id']}/input_items", params={"limit": 100}
    ).json()

    assert len(page["data"]) == len(unique) + 1
    assert _problems("ResponseItemList", page) == []


@pytest.mark.parametrize("kind", sorted(INPUT_INSTANCES))
def test_stored_item_is_idempotent_and_never_changes_a_sent_value(kind: str) -> None:
    for item in INPUT_INSTANCES[kind]:
        once = stored_item(item)
        assert stored_item(once) == once
        assert _keeps(once, item) or item.get("status") in SHOWN_STATUS.get(kind, {})


def _keeps(completed: Any, sent: Any) -> bool:
    """Whether ``completed`` holds every value of ``sent`` (keys may have been added)."""
    if isinstance(sent, dict):
        return isinstance(completed, dict) and all(
            key in completed and _keeps(completed[key], value) for key, value in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(completed, list)
            and len(completed) == len(sent)
            and all(map(_keeps, completed, sent))
        )
    return bool(completed == sent)
