"""Identifier generation for responses and output items.

Owns the id formats (``resp_``, ``msg_``, ``fc_``, ``rs_``, ``call_``...). Ids are random, never
derived from upstream ids, so a stored chain can always be looked up by the ids we returned.
"""

from __future__ import annotations

import secrets

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """A fresh id such as ``resp_3f2a...`` (48 hex characters after the prefix)."""
    return f"{prefix}_{secrets.token_hex(24)}"
