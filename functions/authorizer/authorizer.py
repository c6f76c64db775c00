"""Entry point of the API Gateway REQUEST authorizer: the bearer token becomes the API key.

Thin by design: :func:`responses_gateway.tenancy.authorize` holds the logic. It imports nothing
heavy (no FastAPI, no boto3), so this function starts in tens of milliseconds.
"""

from typing import Any

from responses_gateway.tenancy import authorize

__all__ = ["handler"]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Allow the stage and name ``Authorization: Bearer <key>`` as the usage-plan API key."""
    return authorize(event)
