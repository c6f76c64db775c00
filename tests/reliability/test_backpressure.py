"""Backpressure: a streaming client that reads nothing holds at most the outbox's high water
mark in the gateway; the loop stops reading the upstream, and after the stall time the response
is cancelled exactly as for a disconnect (stored ``cancelled``, upstream stream closed)."""

from __future__ import annotations

import json
import socket

import httpx
from tests.reliability.conftest import LIMITS, MODEL, Stack, wait_until

from responses_gateway.testing.script import Turn

TEXT = " ".join(f"w{n}" for n in range(40_000))


def test_client_that_never_reads_is_cancelled_without_buffering_the_stream(
    fresh: Stack, http: httpx.Client
) -> None:
    fresh.upstream.push(Turn(text=TEXT, chunk_size=4))
    before = set(fresh.response_ids())
    body = json.dumps({"model": MODEL, "input": "talk", "stream": True}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((fresh.gateway.host, fresh.gateway.port))
    try:
        sock.sendall(
            b"POST /v1/responses HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        # Read nothing. The gateway stops reading the upstream, then gives up on us.
        [response_id] = wait_until(lambda: set(fresh.response_ids()) - before)
        wait_until(
            lambda: http.get(f"/responses/{response_id}").json()["status"] == "cancelled",
            timeout=LIMITS.stream_stall_seconds + 20,
        )
        # The upstream connection is closed too (nothing leaks).
        wait_until(lambda: fresh.upstream_proxy.open_connections == 0)
    finally:
        sock.close()
    stored = http.get(f"/responses/{response_id}").json()
    produced = "".join(part["text"] for item in stored["output"] for part in item["content"])
    # What was produced is kept; the loop stopped reading long before the end.
    assert 0 < len(produced) < len(TEXT) // 2
