"""Entry point of the streaming function: the app ``run.sh`` serves under uvicorn.

Thin by design: the app, its configuration and its telemetry come from
:func:`responses_gateway.observability.lambda_app` (the ``responses_gateway`` layer). API Gateway
routes ``POST /v1/responses`` and ``GET /v1/responses/{response_id}`` here with response
streaming; the Lambda Web Adapter forwards each invocation to this app over loopback HTTP.
"""

from responses_gateway.observability import lambda_app

__all__ = ["app"]

app = lambda_app("streaming")
