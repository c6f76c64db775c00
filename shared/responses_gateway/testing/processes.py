"""Child processes a test can count and watch: a Python script started through code that first
logs its pid, and whether a pid still runs.

Owns :func:`pid_logging_code`, :func:`logged_pids` and :func:`alive`; used by the stdio MCP tests
to see how many server processes the gateway spawned and whether it stopped them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["alive", "logged_pids", "pid_logging_code"]


def pid_logging_code(script: Path | str, log: Path, *argv: str, gate: Path | None = None) -> str:
    """``python -c`` code that appends its pid to ``log``, then (given a ``gate`` FIFO) waits
    until something is written to it, then runs ``script`` as ``__main__`` with ``argv``."""
    return (
        "import os, runpy, sys;"
        f"open({str(log)!r}, 'a').write(f'{{os.getpid()}}\\n');"
        + (f"open({str(gate)!r}).read();" if gate is not None else "")
        + f"sys.argv = [{str(script)!r}, *{list(argv)!r}];"
        + f"runpy.run_path({str(script)!r}, run_name='__main__')"
    )


def logged_pids(log: Path) -> list[int]:
    """The pids written to ``log`` so far, in order."""
    return [int(line) for line in log.read_text().split()]


def alive(pid: int) -> bool:
    """Whether ``pid`` exists (a zombie not yet reaped counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
