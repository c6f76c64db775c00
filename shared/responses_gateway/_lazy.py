"""Package attributes resolved on first use (PEP 562), for the packages whose names would
otherwise import heavy submodules at cold start (``loop``, ``protocol``, ``store``).

Owns :func:`lazy_attributes` only: which name lives where is each package's table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``name`` is imported from the submodule
    ``homes[name]`` on first access and kept in ``namespace`` (the package's ``globals()``), so
    later lookups do not come back here; any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value
        return value

    return __getattr__
