"""Turning a create request into a ready-to-run loop.

Owns the steps between a parsed JSON body and the agent loop: validation (through
:mod:`responses_gateway.protocol`), the checks for what this gateway version serves, model routing,
adapter selection and the initial :class:`~responses_gateway.loop.state.LoopState`. It knows
nothing about HTTP or SSE framing (that is :mod:`responses_gateway.app`) and runs nothing itself:
callers run the returned :class:`PreparedRun` through :func:`responses_gateway.loop.run_loop`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from responses_gateway.adapters.select import PROCESS_LATCH, UpgradeLatch, make_adapter
from responses_gateway.config import GatewayConfig
from responses_gateway.errors import InvalidRequestError
from responses_gateway.ids import new_id
from responses_gateway.loop.driver import LoopContext
from responses_gateway.loop.prepared import prepare_input
from responses_gateway.loop.state import LoopState
from responses_gateway.protocol import echo_fields, parse_create_request

__all__ = ["Gateway", "PreparedRun"]


@dataclass(slots=True)
class PreparedRun:
    """A validated request with its initial loop state and live context."""

    state: LoopState
    ctx: LoopContext
    stream: bool
    include_obfuscation: bool


def _reject_unsupported(data: dict[str, Any]) -> None:
    previous = data.get("previous_response_id")
    if previous:
        raise InvalidRequestError(
            f"Previous response with id '{previous}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    if data.get("conversation"):
        raise InvalidRequestError(
            "Conversations are not available on this gateway yet.",
            param="conversation",
            code="unsupported_parameter",
        )
    if data.get("background"):
        raise InvalidRequestError(
            "Background mode is not available on this gateway yet.",
            param="background",
            code="unsupported_parameter",
        )
    for index, tool in enumerate(data.get("tools") or []):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise InvalidRequestError(
                f"Tool type '{kind}' is not supported by this gateway yet.",
                param=f"tools[{index}].type",
                code="unsupported_tool_type",
            )


class Gateway:
    """The per-process service: configuration, the shared upstream HTTP client, the latch."""

    def __init__(
        self,
        config: GatewayConfig,
        client: httpx.AsyncClient,
        latch: UpgradeLatch = PROCESS_LATCH,
    ) -> None:
        self.config = config
        self.client = client
        self.latch = latch

    def prepare(self, data: Any) -> PreparedRun:
        """Validate a create body and build its loop; raises ``GatewayError`` on bad input."""
        request = parse_create_request(data)
        _reject_unsupported(data)
        provider, upstream_model = self.config.route(request.model)
        prepared = prepare_input(data.get("input"))
        state = LoopState(
            response_id=new_id("resp"),
            created_at=int(time.time()),
            model=request.model,
            request=echo_fields(request),
            upstream_input=prepared.upstream_input,
            control_items=prepared.control_items,
        )
        ctx = LoopContext(
            adapter=make_adapter(provider, self.client, self.latch),
            upstream_model=upstream_model,
        )
        options = data.get("stream_options") or {}
        return PreparedRun(
            state=state,
            ctx=ctx,
            stream=bool(data.get("stream")),
            include_obfuscation=bool(options.get("include_obfuscation", False)),
        )
