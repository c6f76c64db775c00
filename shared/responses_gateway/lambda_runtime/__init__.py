"""The streaming function's own Lambda runtime: an ASGI app served straight from the Runtime API.

Lambda's managed Python runtime cannot stream a response; its Runtime API can, for any process
that speaks it. This package is that process, started by ``functions/streaming/bootstrap`` (the
function's ``AWS_LAMBDA_EXEC_WRAPPER``): it takes the invocations one at a time, turns each API
Gateway REST event into an ASGI request for the same app the other functions serve, and posts
the answer back as it is produced, in API Gateway's streaming format. No web server and no
loopback hop stand in between.

Modules:

- :mod:`.wire`: what goes over the wire, as pure functions: an API Gateway REST (v1 proxy) event
  as an ASGI scope and body, the metadata prelude API Gateway reads before the payload, chunked
  transfer coding with its trailers, and HTTP/1.1 answers read from a stream.
- :mod:`.api`: the Runtime API client (next invocation, streamed response, errors), over
  asyncio streams.
- :mod:`.invocation`: one invocation served: the app run against the event, its answer streamed,
  errors before and after the first byte, a client that leaves, the invocation's deadline.
- :mod:`.main`: the process: initialize the app (reporting an init error), then serve
  invocations until Lambda ends the environment (``python -m responses_gateway.lambda_runtime
  module.app``).

Must not import the app, FastAPI or boto3 itself (the entry point names the app), nor hold
anything from one invocation into the next.
"""

from __future__ import annotations

__all__: list[str] = []
