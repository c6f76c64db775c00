"""The gateway's typed error hierarchy.

Owns every exception the library raises on purpose. Each carries what the HTTP edge needs to build
an OpenAI error envelope (status, type, code, param); nothing here knows about HTTP frameworks.
Conversion to a response happens only in ``responses_gateway.app``.

    GatewayError
    ├── InvalidRequestError        400 invalid_request_error (bad input, unknown previous id, ...)
    │   └── PayloadTooLargeError   413 (a body over the configured size cap)
    ├── NotFoundError              404 invalid_request_error
    ├── PermissionDeniedError      403 (a tenant key on an operator endpoint)
    ├── QuotaExceededError         429 insufficient_quota (budget spent; nothing sent upstream)
    ├── UpstreamError              the model provider failed
    │   ├── UpstreamStatusError    it answered with an HTTP error (status kept for 4xx/429)
    │   ├── UpstreamTransportError it could not be reached or dropped the connection (502)
    │   └── UpstreamProtocolError  it answered with something we cannot parse (502)
    └── InternalError              a bug of ours (500)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GatewayError",
    "InternalError",
    "InvalidRequestError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "UpstreamError",
    "UpstreamProtocolError",
    "UpstreamStatusError",
    "UpstreamTransportError",
]


class GatewayError(Exception):
    """Base of every error the gateway raises deliberately."""

    status_code: int = 500
    error_type: str = "server_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param
        self.headers: dict[str, str] = {}
        """Response headers the HTTP edge adds to this error (e.g. the upstream's
        ``retry-after``, or ``x-should-retry: false`` once tools with side effects ran)."""
        if status_code is not None:
            self.status_code = status_code

    def to_error(self) -> dict[str, Any]:
        """The inner OpenAI error object: ``{"message","type","param","code"}``."""
        return {
            "message": self.message,
            "type": self.error_type,
            "param": self.param,
            "code": self.code,
        }


class InvalidRequestError(GatewayError):
    """The client sent something we will not act on."""

    status_code = 400
    error_type = "invalid_request_error"


class PayloadTooLargeError(InvalidRequestError):
    """The request body (or its decompressed form) is larger than the gateway accepts."""

    status_code = 413


class NotFoundError(GatewayError):
    """A named object does not exist (or is not visible to the caller)."""

    status_code = 404
    error_type = "invalid_request_error"


class UpstreamError(GatewayError):
    """The model provider failed."""

    status_code = 502
    error_type = "server_error"


class UpstreamStatusError(UpstreamError):
    """The provider answered with an HTTP error status.

    4xx and 429 statuses are passed on to the client with the provider's message; 5xx become 502.
    """

    def __init__(
        self,
        upstream_status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        error_type: str | None = None,
        body: str = "",
    ) -> None:
        status = upstream_status if 400 <= upstream_status < 500 else 502
        super().__init__(message, code=code, param=param, status_code=status)
        self.upstream_status = upstream_status
        self.body = body
        if error_type:
            self.error_type = error_type
        elif upstream_status == 429:
            self.error_type = "rate_limit_error"
        elif 400 <= upstream_status < 500:
            self.error_type = "invalid_request_error"


class UpstreamTransportError(UpstreamError):
    """The provider could not be reached, timed out, or dropped the connection."""


class UpstreamProtocolError(UpstreamError):
    """The provider answered with a body we cannot parse."""


class InternalError(GatewayError):
    """A bug of ours."""


class PermissionDeniedError(GatewayError):
    """The caller is authenticated but may not use this endpoint (403)."""

    status_code = 403
    error_type = "invalid_request_error"


class QuotaExceededError(GatewayError):
    """The tenant's budget is spent (429 ``insufficient_quota``): no upstream call was made."""

    status_code = 429
    error_type = "insufficient_quota"

    def __init__(self, message: str) -> None:
        super().__init__(message, code="insufficient_quota")
        self.headers["x-should-retry"] = "false"
