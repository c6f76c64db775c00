"""The unknown-key rule every table of the configuration follows, with its "did you mean".

Owns one message: ``<where>: unknown key 'model' (did you mean 'models'?)``. Each parser of a
configuration table (providers, routes, MCP servers, budgets, prices...) passes its entry and
its known keys here, so that a typo anywhere in the file is the same startup error. Must not
know any table's keys itself.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

__all__ = ["did_you_mean", "unknown_key_message"]


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known key, or ``""`` when none is close."""
    import difflib  # on the error path only: not a cold-start import

    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_key_message(where: str, keys: Iterable[object], known: Collection[str]) -> str | None:
    """The error for the first key of ``keys`` (sorted) not in ``known``, or None."""
    unknown = sorted(str(key) for key in keys if key not in known)
    if not unknown:
        return None
    return f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], known)}"
