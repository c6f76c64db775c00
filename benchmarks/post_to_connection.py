"""What PostToConnection adds per event, against response streaming (SSE), on loopback with moto.

One scripted answer of ``--deltas`` text deltas is produced twice per iteration, alternating:

- ``sse``: ``POST /v1/responses`` with ``stream: true`` to the gateway served by uvicorn (what the
  streaming function does behind the Lambda Web Adapter), read to the last byte;
- ``post``: the socket function's run path (``sockets.aws.run_create``: the same session, loop
  and sink, the connection's memory in DynamoDB) posting every event with ``PostToConnection``
  to moto's management API, until the last post returns.

Both use the same upstream, the same embedded DynamoDB endpoint and ``store: false``. Reports the
medians and the added time per event, ``(post - sse) / events``. Moto answers a post in about a
millisecond on loopback; API Gateway's real round trip is longer, so this is a lower bound of the
per-event cost on AWS. Never asserts.

    python benchmarks/post_to_connection.py [--iterations 10] [--deltas 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import boto3
import httpx

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.sockets.aws import DynamoMemory, Poster, run_create
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream, Turn
from responses_gateway.testing.server import run_in_thread

TABLE = "bench-post"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--deltas", type=int, default=200)
    args = parser.parse_args()

    text = " ".join(f"w{i}" for i in range(args.deltas))
    upstream = ScriptedUpstream(demo=False)
    dynamo = start_local_dynamodb(table_name=TABLE)
    management = boto3.client(
        "apigatewaymanagementapi",
        endpoint_url=dynamo.endpoint_url,
        region_name=dynamo.region,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    body = {"model": "m", "input": "count", "store": False}
    sse: list[float] = []
    post: list[float] = []
    events = 0
    with run_in_thread(create_fake_upstream_app(upstream)) as model_server:
        provider = {"base_url": model_server.url + "/v1", "api": "chat"}
        config = parse_config({"providers": [provider]})
        app: Any = create_app(config, DynamoStore(dynamo.client, TABLE))
        # the socket function's own gateway, on this thread's loop (not the server's)
        gateway = create_app(config, DynamoStore(dynamo.client, TABLE)).state.gateway
        loop = asyncio.new_event_loop()
        with (
            run_in_thread(app) as server,
            httpx.Client(base_url=server.url + "/v1", timeout=60) as client,
        ):
            for iteration in range(args.iterations + 2):  # two warm-up rounds
                upstream.push(Turn(text=text))
                started = time.perf_counter()
                with client.stream("POST", "/responses", json={**body, "stream": True}) as answer:
                    for _ in answer.iter_bytes():
                        pass
                sse_elapsed = time.perf_counter() - started

                upstream.push(Turn(text=text))
                connection = f"bench-{iteration}"
                memory = DynamoMemory(dynamo.client, TABLE, connection, int(time.time()) + 60)
                message = json.dumps({"type": "response.create", **body})

                async def run(memory: DynamoMemory, connection: str, message: str) -> int:
                    poster = Poster(management, connection)
                    await run_create(gateway, memory, poster, "bench", message)
                    return poster.posted

                started = time.perf_counter()
                events = loop.run_until_complete(run(memory, connection, message))
                post_elapsed = time.perf_counter() - started
                if iteration >= 2:
                    sse.append(sse_elapsed)
                    post.append(post_elapsed)
        loop.close()
    dynamo.stop()
    sse_ms = statistics.median(sse) * 1000
    post_ms = statistics.median(post) * 1000
    print(f"one response of {args.deltas} deltas = {events} events; medians of {args.iterations}")
    print(
        f"  response streaming (SSE):          {sse_ms:8.1f} ms  ({sse_ms / events:.3f} ms/event)"
    )
    print(
        f"  PostToConnection (moto):           {post_ms:8.1f} ms  ({post_ms / events:.3f} ms/event)"
    )
    print(f"  added per event by PostToConnection: {(post_ms - sse_ms) / events:.3f} ms")


if __name__ == "__main__":
    main()
