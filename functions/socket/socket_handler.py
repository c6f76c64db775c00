"""Entry point of the socket function: API Gateway's WebSocket API ($connect, $default,
$disconnect) and the asynchronous runs its $default hands over.

Thin by design: :func:`responses_gateway.sockets.aws.handle` holds the logic. The clients are
built on the first invocation; the gateway (configuration, upstream client, loop) only when a
create runs, so $connect and $default stay light.
"""

from typing import Any

from responses_gateway.sockets.aws import SocketRuntime, handle

__all__ = ["handler"]

_runtime: list[SocketRuntime] = []


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if not _runtime:
        _runtime.append(SocketRuntime.from_env())
    return handle(event, _runtime[0], context)
