"""The console's static files: an HTML page, JavaScript modules (one per page, loaded when the
page opens) and a stylesheet, served under ``/console`` without an API key (they hold no data;
every data call the page makes carries the key the user signed in with).

Owns the list of servable files and their content types, and how they are served: each file's
content hash (``?v=<hash>`` URLs, cached for a year, immutable; the page itself revalidates),
strong ETags (``If-None-Match`` answers 304), gzip bodies compressed once, ``HEAD``, and the
page's security headers (a strict Content-Security-Policy with ``frame-ancestors 'none'``:
scripts and styles from this origin only, plus the page's one inline import map by its hash).
The import map, written into the page when it is served, maps every module to its hashed URL, so
modules importing each other load each file once and from cache.

Imported only by the first request under ``/console`` (the app's cold start never reads these
files); it writes nothing and never serves a path outside ``static/``.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["ASSETS", "SECURITY_HEADERS", "Asset", "Served", "asset", "serve"]

_STATIC = Path(__file__).with_name("static")

ASSETS: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "chart.js": "text/javascript; charset=utf-8",
    "items.js": "text/javascript; charset=utf-8",
    "overview.js": "text/javascript; charset=utf-8",
    "requests.js": "text/javascript; charset=utf-8",
    "response.js": "text/javascript; charset=utf-8",
    "traces.js": "text/javascript; charset=utf-8",
    "conversations.js": "text/javascript; charset=utf-8",
    "usage.js": "text/javascript; charset=utf-8",
    "keys.js": "text/javascript; charset=utf-8",
    "budgets.js": "text/javascript; charset=utf-8",
    "playground.js": "text/javascript; charset=utf-8",
}
"""Servable file name → content type (anything else is a 404)."""

_PAGE = "index.html"
_MAP_MARK = "<!--importmap-->"
_YEAR = "public, max-age=31536000, immutable"

SECURITY_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}
"""Headers of every console file (the page adds its Content-Security-Policy)."""


@dataclass(frozen=True, slots=True)
class Asset:
    """One servable file as it is sent."""

    body: bytes
    gzipped: bytes
    media: str
    version: str
    """The first 16 hex digits of the body's SHA-256: its ``?v=`` and its ETag."""
    headers: tuple[tuple[str, str], ...] = ()
    """Headers of this file besides caching (the page's Content-Security-Policy)."""


@dataclass(frozen=True, slots=True)
class Served:
    """An answer to a request for a console file."""

    status: int
    headers: dict[str, str]
    body: bytes


def _version(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:16]


def _asset(body: bytes, media: str, headers: tuple[tuple[str, str], ...] = ()) -> Asset:
    return Asset(body, gzip.compress(body, 9, mtime=0), media, _version(body), headers)


@cache
def _assets() -> dict[str, Asset]:
    """Every file, read once; the page with its import map and hashed links written in."""
    found = {
        name: _asset((_STATIC / name).read_bytes(), media)
        for name, media in ASSETS.items()
        if name != _PAGE
    }
    imports = {
        f"/console/{name}": f"/console/{name}?v={found[name].version}"
        for name in found
        if name.endswith(".js")
    }
    script = json.dumps({"imports": imports}, separators=(",", ":"))
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    page = (_STATIC / _PAGE).read_text(encoding="utf-8")
    page = page.replace(_MAP_MARK, f'<script type="importmap">{script}</script>')
    for name, item in found.items():
        page = page.replace(f'"{name}"', f'"{name}?v={item.version}"')
    policy = (
        "default-src 'none'; "
        f"script-src 'self' 'sha256-{digest}'; "
        "style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
    found[_PAGE] = _asset(
        page.encode("utf-8"), ASSETS[_PAGE], (("content-security-policy", policy),)
    )
    return found


def asset(name: str) -> Asset | None:
    """A console file as it is served, or None when ``name`` is not one."""
    return _assets().get(name) if name in ASSETS else None


def serve(
    name: str,
    *,
    version: str | None = None,
    if_none_match: str | None = None,
    accept_encoding: str = "",
    head: bool = False,
) -> Served | None:
    """The answer to ``GET``/``HEAD /console/<name>`` (None: no such file): 304 when
    ``if_none_match`` names this representation, gzip when accepted, a year of caching when
    ``version`` is the file's current hash (revalidation otherwise)."""
    item = asset(name)
    if item is None:
        return None
    zipped = "gzip" in accept_encoding.lower()
    etag = f'"{item.version}{"-gz" if zipped else ""}"'
    headers = {
        "etag": etag,
        "vary": "Accept-Encoding",
        "cache-control": _YEAR if version == item.version else "no-cache",
        **SECURITY_HEADERS,
        **dict(item.headers),
    }
    if if_none_match is not None and etag in [t.strip() for t in if_none_match.split(",")]:
        return Served(304, headers, b"")
    body = item.gzipped if zipped else item.body
    headers["content-type"] = item.media
    headers["content-length"] = str(len(body))
    if zipped:
        headers["content-encoding"] = "gzip"
    return Served(200, headers, b"" if head else body)
