"""The Conversations API end to end, and responses created in a conversation."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from responses_gateway.testing.bedrock import as_chat
from responses_gateway.testing.script import ScriptedUpstream, Turn

pytestmark = pytest.mark.stores("dynamodb", "sqlite")


def _text(item: Any) -> str:
    return str(item.content[0].text)


def test_conversation_crud(client: openai.OpenAI, http: httpx.Client) -> None:
    created = client.conversations.create(
        metadata={"topic": "demo"}, items=[{"role": "user", "content": "hello"}]
    )
    assert created.id.startswith("conv_")
    assert created.object == "conversation"
    assert created.metadata == {"topic": "demo"}
    assert client.conversations.retrieve(created.id).metadata == {"topic": "demo"}

    updated = client.conversations.update(created.id, metadata={"topic": "changed"})
    assert updated.metadata == {"topic": "changed"}

    deleted = client.conversations.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        created.id,
        True,
        "conversation.deleted",
    )
    missing = http.get(f"/conversations/{created.id}")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == f"Conversation with id '{created.id}' not found."


def test_conversation_items_page_both_orders(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(
        items=[{"role": "user", "content": f"m{n}"} for n in range(3)]
    )
    added = client.conversations.items.create(
        conversation.id, items=[{"role": "user", "content": f"m{n}"} for n in range(3, 7)]
    )
    assert [_text(item) for item in added.data] == ["m3", "m4", "m5", "m6"]
    assert added.has_more is False

    desc = list(client.conversations.items.list(conversation.id, limit=3))
    assert [_text(item) for item in desc] == ["m6", "m5", "m4", "m3", "m2", "m1", "m0"]
    asc = list(client.conversations.items.list(conversation.id, limit=2, order="asc"))
    assert [_text(item) for item in asc] == ["m0", "m1", "m2", "m3", "m4", "m5", "m6"]

    first_page = client.conversations.items.list(conversation.id, limit=2, order="asc")
    assert first_page.has_more is True
    assert [item.id for item in first_page.data] == [asc[0].id, asc[1].id]


def test_conversation_item_get_and_delete(client: openai.OpenAI, http: httpx.Client) -> None:
    conversation = client.conversations.create(
        items=[{"role": "user", "content": "keep"}, {"role": "user", "content": "drop"}]
    )
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    keep, drop = items
    assert _text(client.conversations.items.retrieve(drop.id, conversation_id=conversation.id)) == (
        "drop"
    )
    after = client.conversations.items.delete(drop.id, conversation_id=conversation.id)
    assert after.id == conversation.id
    remaining = list(client.conversations.items.list(conversation.id))
    assert [item.id for item in remaining] == [keep.id]
    gone = http.get(f"/conversations/{conversation.id}/items/{drop.id}")
    assert gone.status_code == 404
    assert gone.json()["error"]["message"] == f"Item with id '{drop.id}' not found."


def test_twenty_concurrent_appends_all_land_in_order(client: openai.OpenAI, stack: Any) -> None:
    conversation = client.conversations.create()

    def append(n: int) -> None:
        with httpx.Client(base_url=stack.base_url, timeout=30) as http:
            answer = http.post(
                f"/conversations/{conversation.id}/items",
                json={"items": [{"role": "user", "content": f"{n}-{k}"} for k in range(3)]},
            )
            assert answer.status_code == 200, answer.text

    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(append, range(20)))

    texts = [_text(item) for item in client.conversations.items.list(conversation.id, order="asc")]
    assert len(texts) == 60
    assert sorted(texts) == sorted(f"{n}-{k}" for n in range(20) for k in range(3))
    for start in range(0, 60, 3):  # each append's items are contiguous and in order
        group = texts[start : start + 3]
        n = group[0].split("-")[0]
        assert group == [f"{n}-0", f"{n}-1", f"{n}-2"]


def test_responses_in_a_conversation_see_and_extend_its_items(
    client: openai.OpenAI, upstream: ScriptedUpstream, wire: str, model: str
) -> None:
    conversation = client.conversations.create(items=[{"role": "user", "content": "I am Ada."}])
    upstream.push(Turn(text="Hello Ada."))
    first = client.responses.create(model=model, conversation=conversation.id, input="Hi!")
    assert first.conversation is not None and first.conversation.id == conversation.id
    upstream.push(Turn(text="You are Ada."))
    client.responses.create(model=model, conversation=conversation.id, input="Who am I?")

    request = upstream.model_requests()[-1]
    body = as_chat(request)  # Bedrock's Converse: as chat
    if wire == "harmony":
        assert request.prompt is not None
        assert request.prompt.split("<|end|>", 1)[1] == (
            "<|start|>user<|message|>I am Ada.<|end|><|start|>user<|message|>Hi!<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Hello Ada.<|end|>"
            "<|start|>user<|message|>Who am I?<|end|><|start|>assistant"
        )
    elif wire == "bedrock":  # Converse merges consecutive user messages into one
        assert body["messages"] == [
            {"role": "user", "content": "I am Ada.\nHi!"},
            {"role": "assistant", "content": "Hello Ada."},
            {"role": "user", "content": "Who am I?"},
        ]
    elif wire == "chat":
        assert body["messages"] == [
            {"role": "user", "content": "I am Ada."},
            {"role": "user", "content": "Hi!"},
            {"role": "assistant", "content": "Hello Ada."},
            {"role": "user", "content": "Who am I?"},
        ]
    else:
        assert [item["type"] for item in body["input"]] == ["message"] * 4
    items = list(client.conversations.items.list(conversation.id, order="asc"))
    assert [(item.type, item.role) for item in items] == [  # type: ignore[union-attr]
        ("message", "user"),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]


def test_conversation_and_previous_response_id_together_is_400(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(
            model="scripted-chat", input="Hi", conversation="conv_x", previous_response_id="resp_y"
        )
    assert info.value.param == "conversation"  # type: ignore[attr-defined]
    assert upstream.model_requests() == []


def test_unknown_conversation_on_create_is_404(
    client: openai.OpenAI, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="scripted-chat", input="Hi", conversation="conv_missing")
    assert upstream.model_requests() == []
