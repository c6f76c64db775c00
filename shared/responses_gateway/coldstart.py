"""Cold-start helpers: import third-party packages without paying for what the gateway never uses.

Owns:

- :func:`import_httpx`, run when this module is imported (the app and the Lambda edge import it
  first): ``httpx`` imports its command-line interface (``httpx._main``: click, rich, pygments,
  ~40 ms) whenever those packages are installed, for an ``httpx.main`` the gateway never calls.
  It is imported here with that module stubbed out; ``httpx.main`` still works (it imports the
  real one when called).
- :func:`import_fastapi`, called where FastAPI is first needed (the routes FastAPI serves, on
  their first request): FastAPI imported with pydantic's ``defer_build`` default on, so the ~40
  pydantic models of ``fastapi.openapi.models`` (imported by FastAPI unconditionally, used only
  to build an OpenAPI document, which the gateway never serves) are declared but not built.
  Models the gateway defines are imported after, with pydantic's defaults restored, and
  validate exactly as before.
- :func:`import_anyio_backend`, called at init by the functions that serve creates: anyio's
  asyncio backend and its socket module, which httpcore (its locks, its connections) and
  Starlette's streaming response import on their first use, i.e. on the first request (~20-30 ms
  of CPU here); anyio imports its backend by name, so no event loop is needed to import it.

Must not import the gateway's own modules or do anything at import but :func:`import_httpx`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["deferred_model_builds", "import_anyio_backend", "import_fastapi", "import_httpx"]


class _Deferring:
    """How many blocks defer builds now (any thread), and pydantic's default before the first."""

    lock = threading.Lock()
    depth = 0
    previous = False


@contextlib.contextmanager
def deferred_model_builds() -> Iterator[None]:
    """Within the block, pydantic models declared without ``defer_build`` are built on first use.

    Uses pydantic's defaults table (``pydantic._internal._config.config_defaults``); when a
    pydantic version lacks it, the block runs with the defaults unchanged (slower, same result).
    The table is the process's: blocks may overlap (threads), and the default comes back when
    the last one ends. A model another thread declares meanwhile is built on first use too,
    which changes when it is built, never how it validates.
    """
    try:
        from pydantic._internal import _config

        defaults = _config.config_defaults
    except (ImportError, AttributeError):  # pragma: no cover - another pydantic layout
        yield
        return
    with _Deferring.lock:
        if _Deferring.depth == 0:
            _Deferring.previous = defaults.get("defer_build", False)
            defaults["defer_build"] = True
        _Deferring.depth += 1
    try:
        yield
    finally:
        with _Deferring.lock:
            _Deferring.depth -= 1
            if _Deferring.depth == 0:
                defaults["defer_build"] = _Deferring.previous


def import_fastapi() -> None:
    """Import ``fastapi`` (once per process) with its OpenAPI models' builds deferred."""
    if "fastapi" in sys.modules:
        return
    with deferred_model_builds():
        import fastapi  # noqa: F401


def import_anyio_backend() -> None:
    """Import anyio's asyncio backend (registered as anyio's own first use does) and its socket
    module; a no-op when anyio lacks them (another layout: then the first request imports)."""
    try:
        import anyio._core._sockets  # noqa: F401
        from anyio._core._eventloop import get_async_backend
    except ImportError:  # pragma: no cover - another anyio layout
        return
    get_async_backend("asyncio")


_HTTPX_CLI = "httpx._main"


def _httpx_main(*args: Any, **kwargs: Any) -> Any:
    """``httpx.main``: the real command-line entry point, imported when called."""
    from httpx._main import main

    return main(*args, **kwargs)


def import_httpx() -> None:
    """Import ``httpx`` (once per process) without importing its command-line interface."""
    if "httpx" in sys.modules or _HTTPX_CLI in sys.modules:
        return
    stub = types.ModuleType(_HTTPX_CLI)
    stub.main = _httpx_main  # type: ignore[attr-defined]
    sys.modules[_HTTPX_CLI] = stub
    try:
        import httpx  # noqa: F401
    finally:
        if sys.modules.get(_HTTPX_CLI) is stub:
            del sys.modules[_HTTPX_CLI]


import_httpx()
