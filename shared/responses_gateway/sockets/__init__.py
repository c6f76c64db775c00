"""WebSocket mode (``GET /v1/responses`` upgraded): one connection, many ``response.create``.

Owns what a connection adds to the HTTP API: its memory of the latest response of each stream
(:mod:`.memory`: in process, or in DynamoDB for API Gateway WebSocket APIs), and the session
that turns client messages into loop runs and loop events into server messages
(:mod:`.session`). Runs go through the same :class:`~responses_gateway.service.Gateway` and
:func:`~responses_gateway.loop.run_loop` as HTTP creates; nothing here re-implements the loop or
the event rendering. Transports: the ASGI route (:mod:`responses_gateway.api.websocket`) and
the API Gateway handlers (:mod:`.aws`).

Importing this package imports only the memory types: the API Gateway handlers' cold start
must not pay for the loop until a create runs.
"""

from responses_gateway.sockets.memory import ConnectionMemory, Latest, LocalMemory

__all__ = ["ConnectionMemory", "Latest", "LocalMemory"]
