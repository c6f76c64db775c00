"""McpSessions: one session per server for a run's listing and calls, closed at the run's end.

The HTTP server is the SDK's ``calc`` server behind
:class:`~responses_gateway.testing.mcp_servers.SessionCounter` (handshakes, TCP connections, and
legacy SSE streams opened and ended); the stdio server is ``tests/mcp/stdio_server.py``
started through a launcher that records each process id, so spawns can be counted and their
ends observed.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import select
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from responses_gateway.config import OperatorMcpServer
from responses_gateway.mcp import (
    McpClient,
    McpPolicy,
    McpServer,
    McpSessions,
    SharedMcpSessions,
    server_from_operator,
    stdio as stdio_transport,
)
from responses_gateway.testing.mcp_servers import HangControl, SessionCounter, create_mcp_app
from responses_gateway.testing.processes import alive, logged_pids, pid_logging_code
from responses_gateway.testing.server import run_in_thread

SERVER_SCRIPT = str(Path(__file__).with_name("stdio_server.py"))


@pytest.fixture
def counted() -> Iterator[tuple[SessionCounter, str]]:
    """The ``calc`` server over streamable HTTP, counted."""
    counter = SessionCounter(create_mcp_app("calc"))
    with run_in_thread(counter) as server:
        yield counter, f"{server.url}/mcp"


@pytest.fixture
def counted_sse() -> Iterator[tuple[SessionCounter, str]]:
    """The ``calc`` server over the legacy SSE transport (a stream per session), counted."""
    counter = SessionCounter(create_mcp_app("calc", "sse"))
    with run_in_thread(counter) as server:
        yield counter, f"{server.url}/sse"


@pytest.fixture
def client() -> McpClient:
    return McpClient(McpPolicy(allow_http=True, allow_loopback=True))


async def test_a_listing_and_two_calls_share_one_session_and_connection(
    client: McpClient, counted: tuple[SessionCounter, str]
) -> None:
    counter, url = counted
    server = McpServer("calc", url=url)
    sessions = McpSessions()

    tools = await client.list_tools(server, sessions=sessions)
    first = await client.call_tool(server, "add", {"a": 1, "b": 2}, sessions=sessions)
    second = await client.call_tool(server, "add", '{"a":3,"b":4}', sessions=sessions)
    await sessions.aclose()

    assert [t.name for t in tools] == ["add", "divide", "repeat"]
    assert (first.output, second.output) == ("3.0", "7.0")
    assert counter.handshakes == 1
    assert len(counter.connections) == 1


async def test_without_sessions_every_operation_has_its_own(
    client: McpClient, counted: tuple[SessionCounter, str]
) -> None:
    counter, url = counted
    server = McpServer("calc", url=url)

    await client.list_tools(server)
    await client.call_tool(server, "add", {"a": 1, "b": 2})

    assert counter.handshakes == 2
    assert len(counter.connections) == 2


async def test_the_session_stays_open_for_the_run_and_ends_with_it(
    client: McpClient, counted_sse: tuple[SessionCounter, str]
) -> None:
    counter, url = counted_sse
    server = McpServer("calc", url=url)
    sessions = McpSessions()

    await client.list_tools(server, sessions=sessions)
    added = await client.call_tool(server, "add", {"a": 1, "b": 2}, sessions=sessions)
    assert added.output == "3.0"
    assert (counter.handshakes, counter.streams_opened, counter.streams_ended) == (1, 1, 0)

    await sessions.aclose()
    assert counter.wait_closed(1) == (1, 1)


async def test_a_failed_call_keeps_the_session_and_it_still_ends(
    client: McpClient, counted_sse: tuple[SessionCounter, str]
) -> None:
    counter, url = counted_sse
    server = McpServer("calc", url=url)
    sessions = McpSessions()

    failed = await client.call_tool(server, "divide", {"a": 1, "b": 0}, sessions=sessions)
    unknown = await client.call_tool(server, "nope", {}, sessions=sessions)
    ok = await client.call_tool(server, "add", {"a": 1, "b": 1}, sessions=sessions)
    await sessions.aclose()

    assert failed.error is not None and failed.error["type"] == "mcp_tool_execution_error"
    assert unknown.error is not None
    assert ok.output == "2.0"
    assert counter.handshakes == 1
    assert counter.wait_closed(1) == (1, 1)


async def test_concurrent_calls_share_the_session(
    client: McpClient, counted: tuple[SessionCounter, str]
) -> None:
    counter, url = counted
    server = McpServer("calc", url=url)
    sessions = McpSessions()

    results = await asyncio.gather(
        *(client.call_tool(server, "add", {"a": i, "b": 1}, sessions=sessions) for i in range(3))
    )
    await sessions.aclose()

    assert [r.output for r in results] == ["1.0", "2.0", "3.0"]
    assert counter.handshakes == 1


async def test_a_closed_set_opens_a_new_session_when_used_again(
    client: McpClient, counted_sse: tuple[SessionCounter, str]
) -> None:
    counter, url = counted_sse
    server = McpServer("calc", url=url)
    sessions = McpSessions()

    await client.call_tool(server, "add", {"a": 1, "b": 2}, sessions=sessions)
    await sessions.aclose()
    again = await client.call_tool(server, "add", {"a": 2, "b": 2}, sessions=sessions)
    await sessions.aclose()

    assert again.output == "4.0"
    assert counter.wait_closed(2) == (2, 2)


def _launcher(
    log: Path, mode: str = "", *, shared: bool = False, gate: Path | None = None
) -> McpServer:
    """The stdio test server, started through ``-c`` code that first appends its pid to ``log``
    (and then, given a ``gate`` FIFO, waits until something is written to it)."""
    code = pid_logging_code(SERVER_SCRIPT, log, mode, gate=gate)
    return McpServer(
        "local",
        transport="stdio",
        command=sys.executable,
        args=("-c", code),
        trusted=True,
        shared=shared,
    )


async def test_a_stdio_server_is_spawned_once_per_run_and_stopped_at_its_end(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log)
    sessions = McpSessions()

    tools = await client.list_tools(server, sessions=sessions)
    first = await client.call_tool(server, "echo", {"text": "a"}, sessions=sessions)
    failed = await client.call_tool(server, "fail", {}, sessions=sessions)
    second = await client.call_tool(server, "echo", {"text": "b"}, sessions=sessions)

    assert "echo" in [t.name for t in tools]
    assert (first.output, second.output) == ("a", "b")
    assert failed.error is not None
    pids = logged_pids(log)
    assert len(pids) == 1 and alive(pids[0])
    await sessions.aclose()
    assert not alive(pids[0])


async def test_a_cancelled_run_still_ends_its_session(client: McpClient) -> None:
    hang = HangControl()
    counter = SessionCounter(create_mcp_app("hanging", "sse", hang=hang))
    with run_in_thread(counter) as running:
        server = McpServer("hanging", url=f"{running.url}/sse")
        sessions = McpSessions()
        call = asyncio.create_task(client.call_tool(server, "hang", {}, sessions=sessions))
        await asyncio.to_thread(hang.started.wait, 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert counter.streams_ended == 0

        await sessions.aclose()
        assert counter.wait_closed(1) == (1, 1)
        hang.release()


async def test_a_stdio_server_that_dies_fails_its_call_and_the_next_call_spawns_it_anew(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log)
    sessions = McpSessions()

    before = await client.call_tool(server, "echo", {"text": "a"}, sessions=sessions)
    died = await client.call_tool(server, "die", {}, sessions=sessions)
    after = await client.call_tool(server, "echo", {"text": "b"}, sessions=sessions)
    pids = logged_pids(log)
    await sessions.aclose()

    assert (before.output, after.output) == ("a", "b")
    assert died.error == {
        "type": "mcp_protocol_error",
        "code": -32000,
        "message": "Connection closed",
    }
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)


async def test_a_stdio_server_deaf_to_stdin_and_sigterm_is_killed(
    client: McpClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio_transport, "EXIT_GRACE", 0.2)
    log = tmp_path / "spawns"
    server = _launcher(log, "stubborn")
    sessions = McpSessions()

    assert (await client.call_tool(server, "echo", {"text": "a"}, sessions=sessions)).ok
    [pid] = logged_pids(log)
    await sessions.aclose()

    assert not alive(pid)


# --------------------------------------------------------------------------- shared stdio servers


async def test_runs_given_the_pool_share_one_process_of_a_shared_server(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log, shared=True)
    pool = SharedMcpSessions(asyncio.get_running_loop())

    first_run = McpSessions(pool)
    listed = await client.list_tools(server, sessions=first_run)
    first = await client.call_tool(server, "echo", {"text": "a"}, sessions=first_run)
    await first_run.aclose()
    second_run = McpSessions(pool)
    second = await client.call_tool(server, "echo", {"text": "b"}, sessions=second_run)
    await second_run.aclose()

    assert "echo" in [t.name for t in listed]
    assert (first.output, second.output) == ("a", "b")
    [pid] = logged_pids(log)
    assert alive(pid)  # the runs ended; the process did not
    await pool.aclose()
    assert not alive(pid)
    # A closed pool gives no session: a later run opens (and ends) one of its own.
    late_run = McpSessions(pool)
    assert (await client.call_tool(server, "echo", {"text": "c"}, sessions=late_run)).ok
    await late_run.aclose()
    assert len(logged_pids(log)) == 2 and not any(alive(p) for p in logged_pids(log))


async def test_concurrent_runs_call_the_shared_process_at_once(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log, shared=True)
    pool = SharedMcpSessions(asyncio.get_running_loop())
    runs = [McpSessions(pool) for _ in range(4)]

    results = await asyncio.gather(
        *(
            client.call_tool(server, "echo", {"text": str(i)}, sessions=run)
            for i, run in enumerate(runs)
        )
    )
    for run in runs:
        await run.aclose()

    assert [r.output for r in results] == ["0", "1", "2", "3"]
    assert len(logged_pids(log)) == 1
    await pool.aclose()
    assert not alive(logged_pids(log)[0])


async def test_a_server_not_marked_shared_is_spawned_per_run_even_with_the_pool(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log)
    pool = SharedMcpSessions(asyncio.get_running_loop())

    for text in ("a", "b"):
        run = McpSessions(pool)
        assert (await client.call_tool(server, "echo", {"text": text}, sessions=run)).ok
        await run.aclose()

    pids = logged_pids(log)
    assert len(pids) == 2 and not any(alive(pid) for pid in pids)
    await pool.aclose()


async def test_a_shared_process_that_died_is_reaped_and_started_again(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log, shared=True)
    pool = SharedMcpSessions(asyncio.get_running_loop())

    run = McpSessions(pool)
    died = await client.call_tool(server, "die", {}, sessions=run)
    await run.aclose()
    run = McpSessions(pool)
    after = await client.call_tool(server, "echo", {"text": "b"}, sessions=run)
    await run.aclose()

    assert died.error is not None and died.error["message"] == "Connection closed"
    assert after.output == "b"
    dead, started = logged_pids(log)
    assert not alive(dead) and alive(started)
    await pool.aclose()
    assert not alive(started)


async def test_a_cancelled_caller_leaves_the_shared_process_serving(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log, shared=True)
    pool = SharedMcpSessions(asyncio.get_running_loop())

    leaving = McpSessions(pool)
    assert (await client.call_tool(server, "echo", {"text": "a"}, sessions=leaving)).ok
    hung = asyncio.create_task(client.call_tool(server, "hang", {}, sessions=leaving))
    staying = McpSessions(pool)
    served = await client.call_tool(server, "echo", {"text": "b"}, sessions=staying)
    hung.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hung
    await leaving.aclose()
    again = await client.call_tool(server, "echo", {"text": "c"}, sessions=staying)
    await staying.aclose()

    assert (served.output, again.output) == ("b", "c")
    [pid] = logged_pids(log)
    assert alive(pid)
    await pool.aclose()
    assert not alive(pid)


async def test_a_pool_of_another_loop_gives_runs_their_own_sessions(
    client: McpClient, tmp_path: Path
) -> None:
    log = tmp_path / "spawns"
    server = _launcher(log, shared=True)
    other = asyncio.new_event_loop()
    try:
        pool = SharedMcpSessions(other)
        run = McpSessions(pool)
        assert (await client.call_tool(server, "echo", {"text": "a"}, sessions=run)).ok
        await run.aclose()
    finally:
        other.close()

    [pid] = logged_pids(log)
    assert not alive(pid)


def test_only_operator_stdio_servers_can_be_shared() -> None:
    operator = OperatorMcpServer("time", "stdio", command="mcp-server-time", shared=True)
    assert server_from_operator(operator).shared
    with pytest.raises(ValueError, match="only stdio"):
        McpServer("calc", url="https://calc.example/mcp", shared=True)


async def test_a_shared_start_is_not_bound_to_the_deadline_of_the_run_that_began_it(
    client: McpClient, tmp_path: Path
) -> None:
    log, gate = tmp_path / "spawns", tmp_path / "gate"
    os.mkfifo(gate)
    server = _launcher(log, shared=True, gate=gate)  # starts, then waits for the gate
    pool = SharedMcpSessions(asyncio.get_running_loop())
    hurried, patient = McpSessions(pool), McpSessions(pool)

    short = asyncio.create_task(
        client.call_tool(
            server, "echo", {"text": "a"}, sessions=hurried, deadline=time.monotonic() + 0.2
        )
    )
    long = asyncio.create_task(
        client.call_tool(
            server, "echo", {"text": "b"}, sessions=patient, deadline=time.monotonic() + 60
        )
    )
    timed_out = await short  # its deadline passed while the process was still starting
    await asyncio.to_thread(gate.write_text, "go")
    served = await long
    await hurried.aclose()
    await patient.aclose()

    assert timed_out.error is not None and timed_out.error["code"] == -32001
    assert served.output == "b"
    assert len(logged_pids(log)) == 1
    await pool.aclose()


async def test_a_hung_shared_process_is_replaced_after_timeouts_in_a_row(
    client: McpClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stdio_transport, "EXIT_GRACE", 0.2)
    log = tmp_path / "spawns"
    server = _launcher(log, shared=True)
    pool = SharedMcpSessions(asyncio.get_running_loop())

    async def echo(text: str, seconds: float) -> str | None:
        run = McpSessions(pool)
        try:
            deadline = time.monotonic() + seconds
            result = await client.call_tool(
                server, "echo", {"text": text}, sessions=run, deadline=deadline
            )
        finally:
            await run.aclose()
        return result.output if result.ok else str(result.error["code"])  # type: ignore[index]

    assert await echo("a", 30) == "a"
    [hung] = logged_pids(log)
    os.kill(hung, signal.SIGSTOP)
    assert [await echo("b", 0.3), await echo("c", 0.3)] == ["-32001", "-32001"]
    assert await echo("d", 30) == "d"  # a new process

    first, second = logged_pids(log)
    assert first == hung and second != hung
    await pool.aclose()
    assert not alive(hung) and not alive(second)


def test_a_shared_process_that_died_between_invocations_is_started_again() -> None:
    # A Lambda container's loop: it runs only while an invocation does.
    loop = asyncio.new_event_loop()
    client = McpClient(McpPolicy(allow_http=True, allow_loopback=True))
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"spawns-{os.getpid()}-{id(loop)}"
    server = _launcher(log, shared=True)
    pool = SharedMcpSessions(loop)

    async def invocation(text: str) -> str | None:
        run = McpSessions(pool)
        try:
            result = await client.call_tool(server, "echo", {"text": text}, sessions=run)
        finally:
            await run.aclose()
        return result.output

    try:
        assert loop.run_until_complete(invocation("a")) == "a"
        [first] = logged_pids(log)
        exited = os.pidfd_open(first)
        os.kill(first, signal.SIGKILL)  # between invocations: the loop is not running
        select.select([exited], [], [], 30)  # it has died (and nobody has noticed)
        os.close(exited)
        assert loop.run_until_complete(invocation("b")) == "b"
        assert loop.run_until_complete(invocation("c")) == "c"
        _, second = logged_pids(log)
        loop.run_until_complete(pool.aclose())
        assert not alive(second)
    finally:
        loop.close()
        log.unlink(missing_ok=True)


async def test_a_shared_process_carries_no_context_of_the_run_that_started_it(
    client: McpClient, tmp_path: Path
) -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
    request_id.set("req_first")
    loop = asyncio.get_running_loop()
    seen: dict[str, str] = {}

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, **kw)
        name = getattr(coro, "__qualname__", "")
        context = kw.get("context")
        if context is None:
            context = contextvars.copy_context()
        seen.setdefault(name, context.run(request_id.get))
        return task

    server = _launcher(tmp_path / "spawns", shared=True)
    pool = SharedMcpSessions(loop)
    run = McpSessions(pool)
    loop.set_task_factory(factory)
    try:
        assert (await client.call_tool(server, "echo", {"text": "a"}, sessions=run)).ok
        await run.aclose()
        await pool.aclose()
    finally:
        loop.set_task_factory(None)

    # The connection (and the reader task it starts) outlive the run: they see nothing of it;
    # the operation itself runs in the run's context.
    assert seen["_Session._open"] == "-"
    assert seen["StdioTransport._read"] == "-"
    assert seen["_Session._do"] == "req_first"
