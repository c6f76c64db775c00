"""Entry point of the buffered function: the same app, through Mangum.

Thin by design: :func:`responses_gateway.observability.lambda_app` builds the app and
:func:`~responses_gateway.observability.mangum_handler` adapts API Gateway REST events to it.
API Gateway routes every route that does not stream here (retrieve input items, delete, input
tokens, conversations); answers are buffered (up to 6 MB, 29 s).
"""

from responses_gateway.observability import lambda_app, mangum_handler

__all__ = ["handler"]

handler = mangum_handler(lambda_app("buffered"))
