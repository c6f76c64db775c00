"""DynamoDB faults, injected by the proxy in front of moto: throttling and 500s are retried with
backoff, a call whose answer was lost is not applied twice, and when retries run out the client
gets a 500 envelope and no record claims a success."""

from __future__ import annotations

import time
from typing import Any

import httpx
import openai
import pytest
from tests.reliability.conftest import MODEL, STORE_ATTEMPTS, STORE_READ_TIMEOUT, Stack

from responses_gateway.testing.faults import Call, Fault, dynamo_error, dynamo_op
from responses_gateway.testing.script import Turn


def _throttle(code: str, *operations: str, times: int | None = 1, skip: int = 0) -> Fault:
    fault = dynamo_error(code)
    fault.match, fault.times, fault.skip = dynamo_op(*operations), times, skip
    return fault


def _actions(stack: Stack, operation: str) -> list[str]:
    return [c.action for c in stack.dynamo_proxy.calls if c.dynamo_op == operation]


@pytest.mark.parametrize(
    "code", ["ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"]
)
def test_throttled_writes_are_retried_and_the_record_lands(
    client: openai.OpenAI, fresh: Stack, code: str
) -> None:
    fresh.upstream.push(Turn(text="Stored despite throttling."))
    fresh.dynamo_proxy.script(_throttle(code, "PutItem", times=2))
    response = client.responses.create(model=MODEL, input="hi")
    assert response.status == "completed"
    # in_progress write: 2 throttled + 1 forwarded; the final write: forwarded.
    assert _actions(fresh, "PutItem") == ["respond", "respond", "forward", "forward"]
    stored = client.responses.retrieve(response.id)
    assert (stored.status, stored.output_text) == ("completed", "Stored despite throttling.")


def test_throttling_that_never_ends_is_a_500_and_no_record(
    http: httpx.Client, fresh: Stack
) -> None:
    fresh.upstream.push(Turn(text="never stored"))
    fresh.dynamo_proxy.script(_throttle("ThrottlingException", "PutItem", times=None))
    started = time.monotonic()
    answer = http.post("/responses", json={"model": MODEL, "input": "hi"})
    assert time.monotonic() - started < 15  # bounded: 3 attempts and their backoff
    assert answer.status_code == 500
    assert answer.json()["error"]["type"] == "server_error"
    assert "ThrottlingException" in answer.json()["error"]["message"]
    assert _actions(fresh, "PutItem") == ["respond"] * STORE_ATTEMPTS
    assert fresh.upstream.requests == []  # nothing ran: the in_progress record could not land


def test_store_failing_at_the_end_fails_the_response(http: httpx.Client, fresh: Stack) -> None:
    """The record write at the end is refused: the client gets a 500, never a 200 whose record is
    missing; GET shows the in_progress record, never a completed one."""
    fresh.upstream.push(Turn(text="lost"))
    fresh.dynamo_proxy.script(_throttle("InternalServerError", "PutItem", times=None, skip=1))
    answer = http.post("/responses", json={"model": MODEL, "input": "hi"})
    assert answer.status_code == 500
    assert answer.json()["error"]["message"] == "The response could not be stored."
    fresh.dynamo_proxy.script()
    [response_id] = [i for i in fresh.response_ids() if _status(http, i) == "in_progress"][-1:]
    assert _status(http, response_id) == "in_progress"


def _status(http: httpx.Client, response_id: str) -> str | None:
    answer = http.get(f"/responses/{response_id}")
    return answer.json().get("status") if answer.status_code == 200 else None


def test_read_after_connection_reset_is_retried(client: openai.OpenAI, fresh: Stack) -> None:
    fresh.upstream.push(Turn(text="ok"))
    response = client.responses.create(model=MODEL, input="hi")
    fresh.dynamo_proxy.script(Fault("reset", match=dynamo_op("Query")))
    assert client.responses.retrieve(response.id).output_text == "ok"
    assert _actions(fresh, "Query") == ["reset", "forward"]


def test_stalled_dynamodb_is_a_bounded_500(http: httpx.Client, fresh: Stack) -> None:
    fresh.dynamo_proxy.script(Fault("stall", match=dynamo_op("PutItem"), times=None))
    started = time.monotonic()
    answer = http.post("/responses", json={"model": MODEL, "input": "hi"})
    elapsed = time.monotonic() - started
    assert answer.status_code == 500
    assert "DynamoDB put_item failed" in answer.json()["error"]["message"]
    assert STORE_READ_TIMEOUT * STORE_ATTEMPTS <= elapsed < STORE_READ_TIMEOUT * STORE_ATTEMPTS + 8


def _append_row(call: Call) -> bool:
    return call.dynamo_op == "PutItem" and b'"S": "I#' in call.body.replace(b'":"', b'": "')


def _conversation_texts(client: openai.OpenAI, conversation_id: str) -> list[Any]:
    items = client.conversations.items.list(conversation_id, order="asc").data
    return [item.content[0].text for item in items]  # type: ignore[union-attr]


def test_lost_answer_to_a_conditional_append_is_not_appended_twice(
    client: openai.OpenAI, fresh: Stack
) -> None:
    """DynamoDB applies the append row, the answer is lost, botocore retries: the retry's
    condition fails, the write token shows the row is ours, and the turn is there once."""
    conversation = client.conversations.create()
    fresh.upstream.push(Turn(text="answer"))
    fresh.dynamo_proxy.script(Fault("reset_after", match=_append_row))
    response = client.responses.create(model=MODEL, input="question", conversation=conversation.id)
    assert response.status == "completed"
    assert [c.action for c in fresh.dynamo_proxy.calls if _append_row(c)] == [
        "reset_after",
        "forward",
    ]
    assert _conversation_texts(client, conversation.id) == ["question", "answer"]


def test_lost_answer_to_a_conversation_items_create_is_not_appended_twice(
    client: openai.OpenAI, fresh: Stack
) -> None:
    conversation = client.conversations.create()
    fresh.dynamo_proxy.script(Fault("reset_after", match=_append_row))
    client.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "user", "content": "once"}]
    )
    assert _conversation_texts(client, conversation.id) == ["once"]


def test_lost_answer_to_the_first_checkpoint_write_is_ours(fresh: Stack) -> None:
    """The conditional checkpoint write of a background create succeeds at DynamoDB, its answer
    is lost and the retry's condition fails: the write token recognizes it, the run goes on."""
    fresh.upstream.push(Turn(text="background answer"))
    checkpoint_put = Fault(
        "reset_after",
        match=lambda c: c.dynamo_op == "PutItem" and b"ConditionExpression" in c.body,
    )
    fresh.dynamo_proxy.script(checkpoint_put)
    with openai.OpenAI(base_url=fresh.base_url, api_key="k", max_retries=0) as client:
        queued = client.responses.create(model=MODEL, input="hi", background=True)
        assert queued.status == "queued"
        done = _wait_done(client, queued.id)
    assert (done.status, done.output_text) == ("completed", "background answer")
    assert checkpoint_put.applied == 1


def _wait_done(client: openai.OpenAI, response_id: str) -> Any:
    from tests.reliability.conftest import wait_until

    return wait_until(
        lambda: (
            (r := client.responses.retrieve(response_id)).status
            in ("completed", "failed", "cancelled", "incomplete")
            and r
        )
    )
