"""Context windows, token counts, truncation and the context-length error.

Owns what the loop needs to know about the size of a model call: each model's window
(:mod:`.windows`), exact token counts from the upstream's tokenizer (:mod:`.tokens`), the plan
of ``truncation: "auto"`` (:mod:`.truncate`), the live :class:`~.meter.ContextMeter` the driver
asks before each model call (:mod:`.meter`) and the one OpenAI error for a context that does
not fit (:mod:`.errors`). The decisions themselves are the loop's (``decide_before_call_llm``).
Submodules are imported where used; this package imports nothing at import time.
"""

__all__: list[str] = []
