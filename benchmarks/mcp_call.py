"""What one gateway-executed MCP call adds to a create, with and without listing reuse.

Runs in one process, on loopback: the scripted model upstream, a real MCP server (the ``calc``
test server, streamable HTTP) and the gateway. Three kinds of create are interleaved:

- ``baseline``: two model turns (a function call answered by the client is not comparable, so the
  baseline pushes the same two scripted turns with no tools: one create = one model call; the
  second turn is consumed by a second plain create), reported per model call;
- ``mcp, listing``: a create with the MCP tool and no ``mcp_list_tools`` in context: list + call +
  two model calls;
- ``mcp, reused``: the same create with the server's ``mcp_list_tools`` item replayed in the
  input (so no listing, and no store read either): call + two model calls.

Added latency = median(mcp create) - 2 x median(plain create). Reports, never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import httpx

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.mcp.security import McpPolicy
from responses_gateway.store.dynamo import DynamoStore
from responses_gateway.store.local import start_local_dynamodb
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.mcp_servers import start_mcp_server
from responses_gateway.testing.script import ScriptedUpstream, ToolCall, Turn
from responses_gateway.testing.server import run_in_thread

TABLE = "bench-mcp"


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    args = parser.parse_args()

    upstream = ScriptedUpstream(demo=False)
    dynamo = start_local_dynamodb(table_name=TABLE)
    with (
        run_in_thread(create_fake_upstream_app(upstream)) as model_server,
        start_mcp_server("calc") as calc,
    ):
        config = parse_config(
            {"providers": [{"base_url": model_server.url + "/v1", "api": "chat"}]}
        )
        app = create_app(
            config,
            DynamoStore(dynamo.client, TABLE),
            mcp_policy=McpPolicy(allow_http=True, allow_loopback=True),
        )
        tool: dict[str, Any] = {
            "type": "mcp",
            "server_label": "calc",
            "server_url": calc.url,
            "require_approval": "never",
        }
        call = ToolCall("calc__add", '{"a":1,"b":2}', "c1")
        with (
            run_in_thread(app) as gateway,
            httpx.Client(base_url=gateway.url + "/v1", timeout=60) as client,
        ):
            upstream.push(Turn(text="listed"))
            listed = client.post(
                "/responses", json={"model": "m", "input": "hi", "tools": [tool]}
            ).json()["output"][0]
            plain: list[float] = []
            listing: list[float] = []
            reused: list[float] = []
            for _ in range(args.iterations + 3):
                upstream.push(Turn(text="plain"))
                started = time.perf_counter()
                client.post("/responses", json={"model": "m", "input": "hi", "store": False})
                plain.append(time.perf_counter() - started)

                upstream.push(Turn(tool_calls=[call]), Turn(text="3"))
                started = time.perf_counter()
                client.post(
                    "/responses",
                    json={"model": "m", "input": "1+2", "tools": [tool], "store": False},
                )
                listing.append(time.perf_counter() - started)

                upstream.push(Turn(tool_calls=[call]), Turn(text="3"))
                started = time.perf_counter()
                client.post(
                    "/responses",
                    json={
                        "model": "m",
                        "input": [listed, {"role": "user", "content": "1+2"}],
                        "tools": [tool],
                        "store": False,
                    },
                )
                reused.append(time.perf_counter() - started)
            plain, listing, reused = plain[3:], listing[3:], reused[3:]  # warm-up dropped
    dynamo.stop()

    base = _ms(plain)
    print(f"plain create (one model call), median      {base:8.2f} ms")
    print(f"MCP create, listing + call, median          {_ms(listing):8.2f} ms")
    print(f"MCP create, listing reused, median          {_ms(reused):8.2f} ms")
    print(f"added by list + call (vs two model calls)   {_ms(listing) - 2 * base:8.2f} ms")
    print(f"added by the call alone (listing reused)    {_ms(reused) - 2 * base:8.2f} ms")


if __name__ == "__main__":
    main()
