"""The adapter seam: one upstream wire format per adapter.

Owns :class:`ModelCall` (everything one model call needs, already prepared by the loop) and the
:class:`Adapter` protocol. An adapter translates a ``ModelCall`` into its wire format, calls the
upstream, parses what comes back and reports it through the
:class:`~responses_gateway.loop.output.OutputWriter` (items, text, reasoning, tool calls). It
returns a :class:`~responses_gateway.loop.state.TurnResult` (why the model stopped, usage) and
raises :mod:`responses_gateway.errors` upstream errors. It never decides what the loop does next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the loop imports this module; annotations only, to keep imports acyclic
    from responses_gateway.loop.output import OutputWriter
    from responses_gateway.loop.state import TurnResult

__all__ = ["Adapter", "ModelCall"]


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One upstream model call, in Responses terms."""

    model: str
    """The model name to send upstream."""
    input: list[dict[str, Any]]
    """The transcript: canonical Responses input items, control items already removed."""
    instructions: str | None = None
    """System/developer instructions for this response (never carried across a chain)."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Tools the model may call, as Responses ``function`` tool definitions."""
    tool_choice: Any = None
    """``none``/``auto``/``required`` or ``{"type":"function","name":...}``; None = default."""
    exposed: dict[str, Any] = field(default_factory=dict)
    """Exposed function name -> the lowered tool behind it (a
    :class:`responses_gateway.tool_kinds.Exposed`), for the output writer; adapters ignore it."""
    params: dict[str, Any] = field(default_factory=dict)
    """Sampling and output settings, when the client set them: ``temperature``, ``top_p``,
    ``presence_penalty``, ``frequency_penalty``, ``max_output_tokens``, ``parallel_tool_calls``,
    ``reasoning``, ``text``, ``top_logprobs``, ``user``, ``service_tier``, ``prompt_cache_key``,
    ``safety_identifier``."""


class Adapter(Protocol):
    """Calls the upstream model in one wire format."""

    @property
    def wire(self) -> str:
        """Which wire format: ``chat``, ``responses`` or ``harmony``."""
        ...

    async def call_llm(self, call: ModelCall, out: OutputWriter) -> TurnResult:
        """Call the model once, report its output through ``out``, return how it stopped.

        Raises:
            UpstreamStatusError: the upstream answered with an HTTP error before any output.
            UpstreamTransportError: the upstream could not be reached or dropped the stream.
            UpstreamProtocolError: the upstream's answer could not be parsed.
        """
        ...
