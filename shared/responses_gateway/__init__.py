"""responses-gateway: a serverless, self-hosted OpenAI Responses API endpoint.

The library every Lambda function shares: the agent loop (:mod:`responses_gateway.loop`), the
upstream adapters (:mod:`responses_gateway.adapters`), the sinks (:mod:`responses_gateway.sinks`),
the wire protocol (:mod:`responses_gateway.protocol`) and the HTTP app
(:mod:`responses_gateway.app`).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
