"""HTTP routes of the Responses and Conversations APIs (route tables served by Starlette alone,
see :mod:`responses_gateway.api.mount`; the console's routers are FastAPI's).

Each module owns one resource's routes and nothing else: request parsing, calls into
:class:`~responses_gateway.service.Gateway` and the store, and response shapes. Errors are raised
as :class:`~responses_gateway.errors.GatewayError` and turned into envelopes by the app.
"""
