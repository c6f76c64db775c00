"""LocalMemory and Latest: each stream's latest response, found by id on any stream."""

from __future__ import annotations

from responses_gateway.sockets.memory import Latest, LocalMemory


async def test_find_returns_the_latest_of_any_stream_and_forgets_older_ones() -> None:
    memory = LocalMemory()
    await memory.remember("", Latest("resp_1", history=[{"type": "message"}], stored=False))
    await memory.remember("b", Latest("resp_2"))
    await memory.remember("", Latest("resp_3"))  # replaces resp_1 on the default stream
    assert await memory.find("resp_1") is None
    found = await memory.find("resp_2")
    assert found is not None and found.response_id == "resp_2"
    assert memory.streams() == {"": "resp_3", "b": "resp_2"}


def test_latest_round_trips_through_json() -> None:
    latest = Latest("resp_1", history=[{"type": "message", "id": "m"}], chain=["r0"], stored=True)
    assert Latest.from_json(latest.to_json()) == latest
