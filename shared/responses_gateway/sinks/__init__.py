"""Sinks: translations of loop events into a transport's wire events.

Owns only translation; a sink never decides what the loop does. ``SSESink`` writes Responses API
Server-Sent Events; the non-streaming path uses :class:`responses_gateway.loop.events.NullSink`.
"""

from responses_gateway.sinks.sse import SSESink, encode_frame

__all__ = ["SSESink", "encode_frame"]
