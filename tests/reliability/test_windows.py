"""The two data-loss windows, closed: a buffered create is visible as ``in_progress`` while it
runs, and a response's conversation append is keyed by the response, made before its record, so
an ending that dies half-way is completed by whoever ends it next without duplicating the turn."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import openai
import pytest
from tests.reliability.conftest import MODEL, Stack, wait_until

from responses_gateway.store.base import Conversation
from responses_gateway.store.dynamo import StoreError
from responses_gateway.testing.faults import Call, Fault
from responses_gateway.testing.script import Turn


def test_buffered_create_is_in_progress_for_get_while_it_runs(
    http: httpx.Client, fresh: Stack
) -> None:
    release = threading.Event()

    def held(body: dict[str, Any], wire: Any) -> Turn:
        release.wait(10)
        return Turn(text="finally")

    fresh.upstream.push(held)
    before = set(fresh.response_ids())
    answers: list[httpx.Response] = []
    creating = threading.Thread(
        target=lambda: answers.append(http.post("/responses", json={"model": MODEL, "input": "x"}))
    )
    creating.start()
    try:
        fresh.upstream.wait_for_requests(1)
        [response_id] = set(fresh.response_ids()) - before
        with httpx.Client(base_url=fresh.base_url) as other:
            running = other.get(f"/responses/{response_id}").json()
            chained = other.post(
                "/responses",
                json={"model": MODEL, "input": "y", "previous_response_id": response_id},
            )
    finally:
        release.set()
        creating.join(10)
    assert (running["status"], running["output"]) == ("in_progress", [])
    assert chained.status_code == 400
    assert chained.json()["error"]["code"] == "previous_response_in_progress"
    assert answers[0].json()["id"] == response_id
    assert http.get(f"/responses/{response_id}").json()["status"] == "completed"


def test_unstored_buffered_create_writes_no_record(http: httpx.Client, fresh: Stack) -> None:
    fresh.upstream.push(Turn(text="ephemeral"))
    before = set(fresh.response_ids())
    answer = http.post("/responses", json={"model": MODEL, "input": "x", "store": False})
    assert answer.json()["status"] == "completed"
    assert set(fresh.response_ids()) == before


def _texts(client: openai.OpenAI, conversation_id: str) -> list[str]:
    items = client.conversations.items.list(conversation_id, order="asc").data
    return [item.content[0].text for item in items]  # type: ignore[union-attr]


def _row_put(call: Call) -> bool:
    return call.dynamo_op == "PutItem" and b'"S": "I#' in call.body.replace(b'":"', b'": "')


def _message(text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }


async def test_keyed_append_dying_half_way_completes_once_on_the_next_call(
    fresh: Stack, client: openai.OpenAI
) -> None:
    """The first keyed append reserves its place and writes its marker, then dies before its
    row; the next call with the same key (the worker settling the ending) writes the row at the
    reserved place; a third call adds nothing."""
    store, conversation_id = fresh.store, "conv_window"
    await store.create_conversation(Conversation("local", conversation_id, int(time.time())), [])
    turn = [_message("question", 1), _message("answer", 2)]
    fresh.dynamo_proxy.script(Fault("reset", match=_row_put, times=None))
    with pytest.raises(StoreError):
        await store.append_items("local", conversation_id, turn, once_key="resp_1")
    fresh.dynamo_proxy.script()
    await store.append_items("local", conversation_id, turn, once_key="resp_1")
    await store.append_items("local", conversation_id, turn, once_key="resp_1")
    await store.append_items("local", conversation_id, [_message("next", 3)], once_key="resp_2")
    items = await store.all_items("local", conversation_id)
    assert [i["content"][0]["text"] for i in items] == ["question", "answer", "next"]
    assert _texts(client, conversation_id) == ["question", "answer", "next"]


def test_response_whose_record_write_fails_keeps_one_turn_and_a_retry_adds_one(
    client: openai.OpenAI, http: httpx.Client, fresh: Stack
) -> None:
    """The ending appends the turn, then cannot write the record (500 to the client); the turn
    is in the conversation once (the append is the durable half), never twice."""
    conversation = client.conversations.create()
    fresh.upstream.push(Turn(text="answer"))
    meta_put = Fault(
        "respond",
        status=500,
        body=b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"x"}',
        match=lambda c: c.dynamo_op == "PutItem" and b'"R"' in c.body.replace(b": ", b":"),
        skip=1,
        times=None,
    )
    fresh.dynamo_proxy.script(meta_put)
    answer = http.post(
        "/responses", json={"model": MODEL, "input": "question", "conversation": conversation.id}
    )
    assert answer.status_code == 500
    fresh.dynamo_proxy.script()
    assert wait_until(lambda: _texts(client, conversation.id)) == ["question", "answer"]


def test_client_leaving_while_the_record_is_written_still_leaves_the_record(
    http: httpx.Client, fresh: Stack
) -> None:
    """The final record of a depth-2 chain writes its chain item first (a BatchWriteItem the
    proxy delays); the streaming client leaves during that write. The write is finished anyway:
    the record exists, ``completed`` (before, the cancellation cut it and nothing was stored)."""
    fresh.upstream.push(Turn(text="one"), Turn(text="two"), Turn(text="three"))
    first = http.post("/responses", json={"model": MODEL, "input": "1"}).json()["id"]
    second = http.post(
        "/responses", json={"model": MODEL, "input": "2", "previous_response_id": first}
    ).json()["id"]
    fresh.dynamo_proxy.script(
        Fault("delay", match=lambda c: c.dynamo_op == "BatchWriteItem", seconds=1.5)
    )
    body = {"model": MODEL, "input": "3", "previous_response_id": second, "stream": True}
    response_id = None
    with http.stream("POST", "/responses", json=body) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                response_id = response_id or event["response"]["id"]
                if event["type"] == "response.output_item.done":
                    break
        wait_until(lambda: any(c.action == "delay" for c in fresh.dynamo_proxy.calls))
    # The client is gone while the chain item is being written.
    stored = wait_until(
        lambda: (r := http.get(f"/responses/{response_id}")).status_code == 200 and r.json()
    )
    assert (stored["status"], stored["output"][0]["content"][0]["text"]) == ("completed", "three")
