"""Entry point of the background worker: the Lambda the background state machine invokes.

Thin by design: :func:`responses_gateway.background.entry.handle` holds the logic (load the
checkpoint, run loop actions while the invocation's time allows, checkpoint after each, answer
``continue`` or ``done``; ``mode: fail`` is the state machine's watchdog). The state machine
(``infra/statemachines/background.asl.json``) passes only ids:
``{"tenant", "response_id", "generation", "iteration"}``.
"""

from responses_gateway.background.entry import handle as handler

__all__ = ["handler"]
