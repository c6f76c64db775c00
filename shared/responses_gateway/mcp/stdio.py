"""MCP over stdio: a server process spawned by the gateway, newline-delimited JSON-RPC on its pipes.

Owns :class:`StdioTransport`: it starts the operator's command in a process group of its own with
exactly the environment it is given (see :func:`spawn_environment`: the ``mcp`` SDK's minimal
set plus what the caller adds), its stderr going where the caller says; writes one JSON message
per line to its stdin; reads its stdout line by line (a line over ``max_line_bytes`` fails the
connection; a line that is not JSON is skipped, as the SDK's client does); and stops it the way
the specification and the SDK do: close stdin, wait :data:`EXIT_GRACE` seconds, then ``SIGTERM``
the process group, wait :data:`EXIT_GRACE` seconds more, then ``SIGKILL`` it. The whole stop runs
to its end even when the caller is cancelled.

Only operator-configured servers are spawned (the client checks that); this module must not add
anything of the gateway's environment on its own, and never logs the command's arguments or
environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from responses_gateway.mcp.rpc import (
    CONNECTION_CLOSED,
    TOO_LARGE,
    ChannelTransport,
    McpConnectError,
    McpRpcError,
    McpTransportError,
    Message,
    MessageHandler,
    encode,
)

__all__ = ["BASE_ENV", "EXIT_GRACE", "StdioTransport", "spawn_environment"]

logger = logging.getLogger(__name__)

BASE_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What a server process inherits from the gateway whatever its configuration (the SDK's set)."""
EXIT_GRACE = 2.0
"""Seconds a server gets to exit after its stdin closes, and again after ``SIGTERM``."""
_POLL = 0.01


def spawn_environment(
    extra: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """:data:`BASE_ENV` from ``environ`` (the gateway's by default; shell functions, values
    starting with ``()``, are skipped), then ``extra`` over it."""
    source = os.environ if environ is None else environ
    env = {
        name: source[name]
        for name in BASE_ENV
        if name in source and not source[name].startswith("()")
    }
    env.update(extra)
    return env


class StdioTransport(ChannelTransport):
    """One server process and its pipes (see the module docstring).

    Args:
        command: The executable (looked up on the ``PATH`` of ``env``).
        args: Its arguments.
        env: The whole environment of the process.
        errlog: Where its stderr goes (a file with a descriptor).
        on_message: Receives the server's own requests and notifications.
        max_line_bytes: The most bytes of one line the server writes.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
        errlog: IO[Any],
        on_message: MessageHandler,
        *,
        max_line_bytes: int,
    ) -> None:
        super().__init__()
        self._command = command
        self._args = list(args)
        self._env = dict(env)
        self._errlog = errlog
        self._on_message = on_message
        self._max = max_line_bytes
        self._process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def closed(self) -> bool:
        """The channel failed, or the process is gone: exited, or a zombie not yet reaped
        (which is how a process that died while the event loop was not running looks, a Lambda
        environment's between invocations, until the loop notices)."""
        return super().closed or (self._process is not None and not _running(self._process))

    async def open(self) -> None:
        """Spawn the process.

        Raises:
            McpConnectError: it could not be started (no such command, not executable, ...).
        """
        try:
            self._process = await asyncio.create_subprocess_exec(
                self._command,
                *self._args,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=self._errlog,
                env=self._env,
                start_new_session=True,  # its own process group: stopped as a whole
                limit=self._max,
            )
        except (OSError, ValueError):
            raise McpConnectError("could not start the server process") from None
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        stdout = process.stdout
        failure: McpTransportError | None = None
        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:  # over the limit: the rest of that line was dropped
                    failure = failure or McpTransportError(TOO_LARGE)
                    self._waiting.fail(failure)
                    continue
                if not line:
                    return
                if self._stopping or failure is not None or not line.strip():
                    continue  # drained, so that a server flushing its output can exit
                await self._received(line, self._on_message)
        except (OSError, asyncio.IncompleteReadError):
            failure = failure or McpTransportError()
        finally:
            self._waiting.fail(failure or McpRpcError(CONNECTION_CLOSED, "Connection closed"))

    async def send(self, message: Message) -> None:
        process = self._process
        if self._waiting.failure is not None:
            raise self._waiting.failure
        assert process is not None and process.stdin is not None
        try:
            process.stdin.write(encode(message) + b"\n")
            await process.stdin.drain()
        except OSError:  # the process is gone, or closed its stdin
            raise McpRpcError(CONNECTION_CLOSED, "Connection closed") from None

    async def aclose(self) -> None:
        """Stop the process (see the module docstring); never raises."""
        self._stopping = True
        self._waiting.fail(McpRpcError(CONNECTION_CLOSED, "Connection closed"))
        process = self._process
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
            with contextlib.suppress(OSError):
                await process.stdin.wait_closed()
        if not await _exited(process, EXIT_GRACE):
            await _terminate_group(process)
            if not await _exited(process, EXIT_GRACE):
                logger.warning("an MCP stdio server (pid %d) survived SIGKILL", process.pid)
        if self._reader is not None:
            # EOF follows the exit, unless a child of the server still holds the pipe.
            done, _ = await asyncio.wait({self._reader}, timeout=EXIT_GRACE)
            if not done:
                self._reader.cancel()
        transport = getattr(process, "_transport", None)  # closes the pipes' transports now
        if transport is not None:
            transport.close()


def _running(process: asyncio.subprocess.Process) -> bool:
    """Whether the process still runs: no return code yet, and (where ``/proc`` tells) neither
    gone nor a zombie."""
    if process.returncode is not None:
        return False
    try:
        with open(f"/proc/{process.pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[-1].split()
    except FileNotFoundError:
        return not os.path.isdir("/proc/self")  # no /proc here (macOS): assume it runs
    except OSError:
        return True
    return not fields or fields[0] not in (b"Z", b"X")


async def _exited(process: asyncio.subprocess.Process, seconds: float) -> bool:
    """Whether the process exits within ``seconds`` (its return code is polled: ``wait()``
    would also wait for its pipes, which a child of the server may hold open)."""
    deadline = time.monotonic() + seconds
    while process.returncode is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


async def _terminate_group(process: asyncio.subprocess.Process) -> None:
    """``SIGTERM`` the process group (its pid: ``start_new_session``), ``SIGKILL`` what is left
    after :data:`EXIT_GRACE` seconds."""
    group = process.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    except PermissionError:
        pass
    deadline = time.monotonic() + EXIT_GRACE
    while _group_alive(group):
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
            return
        await asyncio.sleep(_POLL)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
