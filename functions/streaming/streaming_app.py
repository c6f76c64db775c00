"""Entry point of the streaming function: the app its ``bootstrap`` serves.

Thin by design: the app, its configuration and its telemetry come from
:func:`responses_gateway.observability.lambda_app` (the ``responses_gateway`` layer). API Gateway
routes ``POST /v1/responses`` and ``GET /v1/responses/{response_id}`` here with response
streaming; the gateway's own runtime (:mod:`responses_gateway.lambda_runtime`) hands each
invocation to this app in-process and streams its answer back through the Runtime API.
"""

from responses_gateway.observability import lambda_app

__all__ = ["app"]

app = lambda_app("streaming")
