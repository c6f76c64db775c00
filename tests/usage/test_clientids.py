"""The client's ids (usage.clientids): the headers a WebSocket connection keeps from its
handshake are the client-id headers only, and they give the same ids as the whole header set."""

from __future__ import annotations

from responses_gateway.usage.clientids import client_id_headers, client_ids


def test_a_handshake_keeps_only_the_client_id_headers_cut_to_200_characters() -> None:
    headers = {
        "authorization": "Bearer sk-secret",
        "cookie": "session=1",
        "session_id": "s" * 300,
        "thread-id": "thr-1",
        "x-client-request-id": "",
        "originator": "codex_cli_rs",
        "host": "gateway.example",
    }
    kept = client_id_headers(headers)
    assert kept == {"session_id": "s" * 200, "thread-id": "thr-1", "originator": "codex_cli_rs"}
    assert client_ids([], kept) == client_ids([], headers)
    assert client_id_headers({}) == {}
