"""Routing: several deployments per model name, their shared health, and choosing one.

Owns the pieces the loop uses to send one model call to a deployment and to move it elsewhere
when that deployment fails: the routes of the configuration (:mod:`.deployments`), the typed
failures of a model call (:mod:`.failures`), the health shared by every gateway instance
through the store (:mod:`.health`), the selection strategies (:mod:`.choose`) and the
per-process :class:`~.router.Router`. Whether to retry, fall back or fail is decided by the loop
(:func:`responses_gateway.loop.failover.decide_after_llm_failure`), never here. See
``docs/routing.md``.
"""

__all__: list[str] = []
