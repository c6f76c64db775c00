"""Cold-start helpers: import third-party packages without paying for what the gateway never uses.

Owns :func:`import_fastapi`, which imports FastAPI with pydantic's ``defer_build`` default on,
so the ~40 pydantic models of ``fastapi.openapi.models`` (imported by FastAPI unconditionally,
used only to build an OpenAPI document, which the gateway never serves) are declared but not
built: their schemas are built on first use, if ever. Nothing else changes: models the gateway
defines are imported after, with pydantic's defaults restored, and validate exactly as before.

Must not import the gateway's own modules or do anything at import but that one import.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

__all__ = ["deferred_model_builds", "import_fastapi"]


@contextlib.contextmanager
def deferred_model_builds() -> Iterator[None]:
    """Within the block, pydantic models declared without ``defer_build`` are built on first use.

    Uses pydantic's defaults table (``pydantic._internal._config.config_defaults``); when a
    pydantic version lacks it, the block runs with the defaults unchanged (slower, same result).
    """
    try:
        from pydantic._internal import _config

        defaults = _config.config_defaults
    except (ImportError, AttributeError):  # pragma: no cover - another pydantic layout
        yield
        return
    previous = defaults.get("defer_build", False)
    defaults["defer_build"] = True
    try:
        yield
    finally:
        defaults["defer_build"] = previous


def import_fastapi() -> None:
    """Import ``fastapi`` (once per process) with its OpenAPI models' builds deferred."""
    if "fastapi" in sys.modules:
        return
    with deferred_model_builds():
        import fastapi  # noqa: F401


import_fastapi()
