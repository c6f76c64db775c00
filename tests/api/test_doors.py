"""Every door takes the same contract: a route that reads a body declares its model, the mount
layer validates it before the handler runs, and a malformed item or field is the same 400 with
the same ``param`` path at a create (HTTP and WebSocket), ``input_tokens``, ``compact`` and the
conversation writes."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from responses_gateway.api.doors import body_model
from responses_gateway.app import ROUTE_TABLES, create_app
from responses_gateway.config import parse_config
from responses_gateway.protocol.bodies import BODY_MODELS
from responses_gateway.store.sqlite import SqliteStore

API = Path(__file__).parents[2] / "shared" / "responses_gateway" / "api"
NO_BODY = {"/v1/responses/{response_id}/cancel"}
"""POST routes that take no body."""


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    config = parse_config({"providers": [{"base_url": "http://127.0.0.1:9/v1", "api": "chat"}]})
    with TestClient(create_app(config, SqliteStore()), raise_server_exceptions=False) as served:
        yield served


def test_every_route_that_takes_a_body_declares_its_model() -> None:
    declared = {}
    for table in ROUTE_TABLES:
        for spec in table.specs:
            if "POST" in spec.methods and spec.path not in NO_BODY:
                assert spec.door is not None, f"{spec.path} reads a body without declaring it"
                declared[spec.path] = body_model(spec.door.model)
            else:
                assert spec.door is None, spec.path
    assert set(declared.values()) <= {*BODY_MODELS}
    assert {
        "/v1/responses",
        "/v1/responses/input_tokens",
        "/v1/responses/compact",
        "/v1/conversations",
        "/v1/conversations/{conversation_id}",
        "/v1/conversations/{conversation_id}/items",
    } <= set(declared)


def test_no_route_module_reads_a_body_itself() -> None:
    # the one reader is the doors' (the console's routes, served by FastAPI, aside: its admin
    # writes and the trace ingest take no items)
    readers = set()
    for path in API.glob("*.py"):
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        if {"read_json", "read_body"} & names:
            readers.add(path.name)
    assert readers == {"doors.py", "limits.py", "admin.py", "traces.py"}


HOSTILE_ITEMS: list[tuple[Any, str, str]] = [
    (None, "[0]", "invalid_type"),
    (7, "[0]", "invalid_type"),
    (True, "[0]", "invalid_type"),
    ({}, "[0].type", "missing_required_parameter"),
    ({"type": {"a": 1}}, "[0].type", "invalid_value"),
    ({"type": ["message"]}, "[0].type", "invalid_value"),
    ({"type": "message", "role": "user", "content": 3}, "[0].content", "invalid_type"),
    ({"type": "web_search_call", "id": ["ws"], "status": "completed", "action": {}},
     "[0].id", "invalid_type"),
    ({"type": "custom_tool_call", "call_id": ["c"], "name": "f", "input": "x"},
     "[0].call_id", "invalid_type"),
    ({"type": "additional_tools", "role": "developer", "tools": [1]},
     "[0].tools[0]", "invalid_type"),
    ({"type": "additional_tools", "role": "developer", "tools": [{"type": "function"}]},
     "[0].tools[0].name", "missing_required_parameter"),
    ({"type": "item_reference", "id": 5}, "[0].id", "invalid_type"),
]  # fmt: skip

ITEM_DOORS: list[tuple[str, str, dict[str, Any]]] = [
    ("/v1/responses", "input", {"model": "m"}),
    ("/v1/responses/input_tokens", "input", {}),
    ("/v1/responses/compact", "input", {"model": "m"}),
    ("/v1/conversations", "items", {}),
    ("/v1/conversations/conv_missing/items", "items", {}),
]


@pytest.mark.parametrize(("item", "path", "code"), HOSTILE_ITEMS)
def test_a_malformed_item_is_the_same_400_at_every_door(
    client: TestClient, item: Any, path: str, code: str
) -> None:
    answers = {}
    for url, field, body in ITEM_DOORS:
        answer = client.post(url, json={**body, field: [item]})
        assert answer.status_code == 400, (url, answer.text)
        error = answer.json()["error"]
        assert error["param"] == field + path, url
        assert error["code"] == code, url
        answers[url] = error["message"].replace("'items", "'input")
    assert len(set(answers.values())) == 1, answers  # the same words at every door


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("previous_response_id", ["resp_1"], "invalid_type"),
        ("conversation", 5, "invalid_type"),
        ("instructions", {"a": 1}, "invalid_type"),
        ("input", 3.5, "invalid_type"),
        ("tools", [{"type": "function", "name": ""}], "empty_string"),
    ],
)
def test_a_malformed_field_is_the_same_400_at_every_create_like_door(
    client: TestClient, field: str, value: Any, code: str
) -> None:
    for url in ("/v1/responses", "/v1/responses/input_tokens", "/v1/responses/compact"):
        answer = client.post(url, json={"model": "m", "input": "hi", field: value})
        assert answer.status_code == 400, (url, answer.text)
        error = answer.json()["error"]
        assert error["code"] == code, url
        assert error["param"] in (field, f"{field}[0].name"), url


def test_the_body_is_validated_before_the_handler_looks_anything_up(client: TestClient) -> None:
    # a missing conversation would be a 404: the malformed body is refused first
    answer = client.post("/v1/conversations/conv_missing/items", json={"items": "x"})
    assert (answer.status_code, answer.json()["error"]["param"]) == (400, "items")
    missing = client.post("/v1/conversations/conv_missing/items", json={"items": []})
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("url", "body", "param", "code"),
    [
        ("/v1/conversations", {"items": [{"type": "message", "role": "user",
                                          "content": "x"}] * 21},
         "items", "array_above_max_length"),
        ("/v1/conversations/conv_1", {}, "metadata", "missing_required_parameter"),
        ("/v1/conversations/conv_1", {"metadata": {"k": 1}}, "metadata.k", "invalid_type"),
        ("/v1/conversations/conv_1/items", {}, "items", "missing_required_parameter"),
        ("/v1/responses/compact", {"input": "hi"}, "model", "missing_required_parameter"),
        ("/v1/responses", [], None, "invalid_type"),
    ],
)  # fmt: skip
def test_door_specific_rules_are_the_models(
    client: TestClient, url: str, body: Any, param: str | None, code: str
) -> None:
    answer = client.post(url, json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, code)


def test_an_empty_conversation_create_body_is_an_empty_conversation(client: TestClient) -> None:
    answer = client.post("/v1/conversations", content=b"")
    assert answer.status_code == 200
    assert answer.json()["metadata"] == {}


@pytest.mark.parametrize(("item", "path", "code"), HOSTILE_ITEMS)
def test_a_websocket_create_refuses_a_malformed_item_as_http_does(
    client: TestClient, item: Any, path: str, code: str
) -> None:
    http = client.post("/v1/responses", json={"model": "m", "input": [item]}).json()["error"]
    with client.websocket_connect("/v1/responses") as socket:
        socket.send_json({"type": "response.create", "model": "m", "input": [item]})
        event = socket.receive_json()
    assert event["type"] == "error"
    assert event["status"] == 400
    assert event["error"]["param"] == "input" + path
    assert (event["error"]["code"], event["error"]["message"]) == (code, http["message"])
