"""Per-request dependencies shared by the routers: the service, the tenant, paging parameters,
and when a create must let go of its loop (:class:`Timing`, from the invocation's deadline).

Owns how a route asks for its tenant (the rule itself lives in :mod:`responses_gateway.tenancy`)
and how list endpoints read ``after``/``limit``/``order`` (with OpenAI-style 400s) and shape their
``{"object": "list", ...}`` answers.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from starlette.requests import HTTPConnection, Request

from responses_gateway.errors import InvalidRequestError
from responses_gateway.loop.state import Finish, LoopState
from responses_gateway.service import Gateway, PreparedRun
from responses_gateway.tenancy import LOCAL_TENANT, Identity, TenancyPolicy, current_policy

if TYPE_CHECKING:
    from responses_gateway.api.untyped import UntypedRoute

__all__ = [
    "LOCAL_TENANT",
    "NO_LIMITS",
    "Page",
    "Timing",
    "UntypedRoute",
    "gateway_of",
    "identity_of",
    "invocation_deadline",
    "list_object",
    "page_params",
    "tenant_of",
    "timing_of",
]

LAMBDA_CONTEXT_HEADER = "x-amzn-lambda-context"
"""The invocation context the Lambda Web Adapter passes to the app (JSON, with ``deadline`` in
milliseconds since the epoch)."""

HANDOVER_MARGIN_ENV = "HANDOVER_MARGIN_SECONDS"
_HANDOVER_MARGIN = 180.0
"""Seconds before the invocation's deadline a foreground loop hands over to the worker: room
for the action in flight (tool calls default to a 120 s limit)."""
_STREAM_MARGIN = 5.0
"""Seconds before the deadline a stream following the log ends cleanly."""


def __getattr__(name: str) -> Any:
    """``UntypedRoute``, FastAPI's route class of the gateway's handlers, imported (with FastAPI)
    only by the modules that build FastAPI routes."""
    if name == "UntypedRoute":
        from responses_gateway.api.untyped import UntypedRoute

        return UntypedRoute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def gateway_of(request: HTTPConnection) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def tenant_of(request: HTTPConnection) -> str:
    """The tenant a request (or a WebSocket handshake) acts for (see
    :mod:`responses_gateway.tenancy`).

    The policy is ``app.state.tenancy`` when the app was given one, else the environment's.

    Raises:
        AuthenticationError: the request carries no valid API key (401 ``invalid_api_key``).
    """
    return identity_of(request).tenant


def identity_of(request: HTTPConnection) -> Identity:
    """The tenant and API key id of a request, also left in ``request.state.identity`` (the
    access log reads it from there).

    Raises:
        AuthenticationError: the request carries no valid API key (401 ``invalid_api_key``).
    """
    identity = _policy(request).identify(
        event=request.scope.get("aws.event"), headers=request.headers
    )
    request.state.identity = identity
    return identity


def _policy(request: HTTPConnection) -> TenancyPolicy:
    """``app.state.tenancy`` when the app was given a policy, else the one the environment
    describes: ``app.state.tenancy_env`` (a mapping, tests) or the process's."""
    state = request.app.state
    policy = getattr(state, "tenancy", None)
    if isinstance(policy, TenancyPolicy):
        return policy
    return current_policy(getattr(state, "tenancy_env", None))


@dataclass(frozen=True, slots=True)
class Timing:
    """When a foreground request must let go (wall-clock seconds, ``time.time()``)."""

    hand_over_at: float | None = None
    """After this, the loop hands over to the worker at its next action boundary."""
    stream_until: float | None = None
    """After this, a stream following the log ends (the invocation's own deadline, minus a
    margin); the client resumes with ``starting_after``."""

    def pause(self, run: PreparedRun) -> Callable[[LoopState], bool] | None:
        """The loop's ``pause`` for ``run``: past the hand-over time, before any action but the
        last (finishing costs nothing; handing it over would)."""
        deadline = self.hand_over_at
        if deadline is None or not run.movable:
            return None
        return lambda state: not isinstance(state.next_action, Finish) and time.time() >= deadline


NO_LIMITS = Timing()


def invocation_deadline(request: Request) -> float | None:
    """When the Lambda invocation serving ``request`` ends (``time.time()`` seconds), or None
    when it does not run under Lambda: Mangum's context object, or the Lambda Web Adapter's
    context header (trusted only with ``GATEWAY_TRUST_LAMBDA_CONTEXT=1``, as for tenancy)."""
    context = request.scope.get("aws.context")
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if callable(remaining):
        return time.time() + float(remaining()) / 1000
    if not _policy(request).trust_lambda_context:
        return None
    raw = request.headers.get(LAMBDA_CONTEXT_HEADER)
    if not raw:
        return None
    try:
        deadline = json.loads(raw).get("deadline")
        return float(deadline) / 1000 if deadline else None
    except (ValueError, AttributeError, TypeError):
        return None


def timing_of(request: Request) -> Timing:
    """When a create served by ``request`` hands over to the worker and when its streams end:
    the invocation's deadline minus margins, and the gateway's ``foreground_budget``."""
    deadline = invocation_deadline(request)
    hand_over_at = stream_until = None
    if deadline is not None:
        margin = float(os.environ.get(HANDOVER_MARGIN_ENV) or _HANDOVER_MARGIN)
        hand_over_at = deadline - margin
        stream_until = deadline - _STREAM_MARGIN
    budget = gateway_of(request).foreground_budget
    if budget is not None:
        budget_end = time.time() + budget
        hand_over_at = budget_end if hand_over_at is None else min(hand_over_at, budget_end)
    return Timing(hand_over_at=hand_over_at, stream_until=stream_until)


@dataclass(frozen=True, slots=True)
class Page:
    after: str | None
    limit: int
    order: Literal["asc", "desc"]


def page_params(request: Request) -> Page:
    """``after``, ``limit`` (1-100, default 20) and ``order`` (default ``desc``) of a list call."""
    query = request.query_params
    raw_limit = query.get("limit", "20")
    try:
        limit = int(raw_limit)
    except ValueError:
        raise InvalidRequestError(
            f"Invalid type for 'limit': expected an integer, but got '{raw_limit}' instead.",
            param="limit",
            code="invalid_type",
        ) from None
    if not 1 <= limit <= 100:
        raise InvalidRequestError(
            f"Invalid 'limit': expected a value between 1 and 100, but got {limit} instead.",
            param="limit",
            code="invalid_value",
        )
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequestError(
            f"Invalid value: '{order}'. Supported values are: 'asc' and 'desc'.",
            param="order",
            code="invalid_value",
        )
    return Page(after=query.get("after") or None, limit=limit, order=order)  # type: ignore[arg-type]


def list_object(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """The API's list shape. ``first_id`` and ``last_id`` are strings, as OpenAI's spec and
    SDK type them: ``""`` for an empty page (nothing to page from)."""
    return {
        "object": "list",
        "data": data,
        "first_id": _item_id(data[0]) if data else "",
        "last_id": _item_id(data[-1]) if data else "",
        "has_more": has_more,
    }


def _item_id(item: dict[str, Any]) -> str:
    ident = item.get("id")
    return ident if isinstance(ident, str) else ""
