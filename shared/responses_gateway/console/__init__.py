"""The console's static files: an HTML page, one JavaScript module, a stylesheet and a vendored
chart library, served under ``/console`` without an API key (they hold no data; every data call
the page makes carries the key the user signed in with).

Owns the list of servable files and their content types. Imported only by the first request
under ``/console`` (the app's cold start never reads these files); it writes nothing and never
serves a path outside ``static/``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["ASSETS", "asset"]

_STATIC = Path(__file__).with_name("static")

ASSETS: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "uPlot.iife.min.js": "text/javascript; charset=utf-8",
    "uPlot.min.css": "text/css; charset=utf-8",
}
"""Servable file name → content type (anything else is a 404)."""


@cache
def asset(name: str) -> tuple[bytes, str] | None:
    """The bytes and content type of a console file, or None when ``name`` is not one."""
    media = ASSETS.get(name)
    if media is None:
        return None
    return (_STATIC / name).read_bytes(), media
