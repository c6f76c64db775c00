"""The bare pass-through: the floor a Python ASGI gateway can reach on this machine.

A raw ASGI app under uvicorn that relays ``POST /v1/responses`` byte for byte to an upstream's
``/v1/responses`` with one pooled ``httpx.AsyncClient`` (keep-alive), streaming the answer back
as it arrives: two HTTP hops and nothing else (no FastAPI, no parsing, no validation). Every
figure of ``benchmarks/floor.py`` is reported as a ratio to this app measured in the same run.

Run alone: ``python benchmarks/passthrough.py UPSTREAM_URL`` prints ``PORT <n>`` once it
accepts connections and stops when its stdin closes.
"""

from __future__ import annotations

import sys
from typing import Any

import httpx

__all__ = ["passthrough_app"]

_HOP_BY_HOP = frozenset({b"host", b"content-length", b"connection", b"transfer-encoding"})


def passthrough_app(upstream_url: str) -> Any:
    """The relay ASGI app for ``upstream_url`` (scheme, host and port; no path)."""
    client = httpx.AsyncClient(
        base_url=upstream_url,
        timeout=httpx.Timeout(600.0, connect=10.0),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        trust_env=False,
    )

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["path"] == "/health":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        chunks = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        headers = [(k, v) for k, v in scope["headers"] if k not in _HOP_BY_HOP]
        request = client.build_request("POST", "/v1/responses", content=b"".join(chunks))
        request.headers.update({k.decode(): v.decode() for k, v in headers})
        response = await client.send(request, stream=True)
        try:
            out = [
                (k.encode(), v.encode())
                for k, v in response.headers.items()
                if k.encode() not in _HOP_BY_HOP
            ]
            start = {"type": "http.response.start", "status": response.status_code, "headers": out}
            await send(start)
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    return app


def main(argv: list[str]) -> int:
    from responses_gateway.testing.server import run_in_thread

    server = run_in_thread(passthrough_app(argv[0]), log_level="warning")
    print(f"PORT {server.port}", flush=True)
    sys.stdin.buffer.read()
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
