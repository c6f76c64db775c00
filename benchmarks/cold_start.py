"""Cold start of each deployed function (import-to-ready time) and the size of its artifact.

A cold start runs the function's entry point in a fresh interpreter that sees exactly what the
deployed function sees: its code directory, its layers (built by ``infra/layers/Makefile``, the
recipe ``sam build`` runs, here for this machine's platform so the binary wheels load) and, like
Lambda's ``/var/runtime``, only boto3 and its dependencies besides. Nothing else from this
environment is importable (``python -S``), so a package missing from a layer fails here too.

Per function:

- ``streaming``: ``bootstrap`` (the function's exec wrapper) started against the project's
  stand-in of the Runtime API; *spawn-to-ready* is process start until the runtime asks for its
  first invocation (its init is done) and *import-to-ready* subtracts the bare interpreter's
  start-up (``python -S -c pass``). Then the first ``POST /v1/responses`` (streamed, stored,
  against a scripted upstream and an embedded DynamoDB): its first byte, first SSE event, end.
- ``buffered``: importing ``buffered_handler.py`` (the init phase: *import-to-ready*), then its
  first invocation with an API Gateway REST event that reads DynamoDB (and, for reference, what
  importing the MCP client then costs: the first request with MCP tools pays it).
- ``authorizer``: importing ``authorizer.py``, then one authorization.

Then the streaming and buffered functions under AWS's runtime interface emulator
(``--emulator-runs`` cold starts each, alternating; ``testing.lambda_emulator``):
the emulator's ``INIT REPORT`` of each, their ratio (target: at most 1.2), and the first create.

Each is measured ``--runs`` times with the layers as deployed (bytecode) and, for comparison,
``--source-runs`` times with layers holding sources only, as SAM's ``python_pip`` builder makes
them (Lambda's read-only file system then compiles every module at every cold start).

Artifact sizes (unzipped and zipped) come from a ``sam build`` directory when one exists (the
real arm64 artifacts), else from the host build.

Usage::

    python benchmarks/cold_start.py [--runs 5] [--source-runs 2] [--build-dir .aws-sam/build]
                                    [--json PATH] [--max-artifact-mb 40] [--sizes-only]
                                    [--emulator-runs 3]

Needs ``make`` and the network (or a package index) for the layer build. Exit status: 0 whatever
the timings; 1 when ``--max-artifact-mb`` is exceeded or a function fails to start.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS = ROOT / "functions"
LAYERS = ("DependenciesLayer", "SharedLayer")
FUNCTION_LAYERS = {
    "StreamingFunction": LAYERS,
    "BufferedFunction": LAYERS,
    "AuthorizerFunction": ("SharedLayer",),
    "WorkerFunction": LAYERS,
    "SocketFunction": LAYERS,
}
TARGET_READY_MS = 400.0
TARGET_ARTIFACT_MB = 30.0
TARGET_INIT_RATIO = 1.2
"""The streaming function's emulator INIT REPORT over the buffered one's, in the same run."""

_BUFFERED_PROBE = """
import importlib.util, json, sys, time, uuid
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("buffered_handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
ready = time.perf_counter()
event = json.loads(sys.argv[2])
class Context:
    aws_request_id = str(uuid.uuid4())
    function_name = "BufferedFunction"
answer = module.handler(event, Context())
done = time.perf_counter()
import responses_gateway.gateway_tools  # what the first request with MCP tools imports: the
import responses_gateway.mcp.client  # gateway's own MCP client (the SDK is not shipped)
mcp = time.perf_counter()
print(json.dumps({"ready_ms": (ready - started) * 1000, "first_ms": (done - ready) * 1000,
                  "status": answer["statusCode"], "mcp_ms": (mcp - done) * 1000}))
"""

_SOCKET_PROBE = """
import importlib.util, json, sys, time
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("socket_handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
ready = time.perf_counter()
heavy = sorted(m for m in ("fastapi", "pydantic", "httpx", "uvicorn") if m in sys.modules)
answer = module.handler(json.loads(sys.argv[2]), None)
done = time.perf_counter()
print(json.dumps({"ready_ms": (ready - started) * 1000, "first_ms": (done - ready) * 1000,
                  "status": answer["statusCode"], "heavy": heavy}))
"""

_AUTHORIZER_PROBE = """
import importlib.util, json, sys, time
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("authorizer", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
ready = time.perf_counter()
heavy = sorted(m for m in ("fastapi", "pydantic", "boto3", "httpx") if m in sys.modules)
answer = module.handler(json.loads(sys.argv[2]), None)
done = time.perf_counter()
print(json.dumps({"ready_ms": (ready - started) * 1000, "first_ms": (done - ready) * 1000,
                  "status": 200 if answer.get("usageIdentifierKey") else 401, "heavy": heavy}))
"""


# -- the artifact layout -------------------------------------------------------------------------


def build_layers(into: Path, *, bytecode: bool = True) -> dict[str, Path]:
    """Build both layers with ``infra/layers/Makefile`` for this machine; layer -> its root.

    Without ``bytecode`` the layers hold sources only, as SAM's ``python_pip`` builder makes them.
    """
    from responses_gateway.testing.lambda_emulator import LAYER_SOURCES, build_layer

    built: dict[str, Path] = {}
    for layer in LAYER_SOURCES:
        built[layer] = build_layer(layer, into / layer, bytecode=bytecode)
        if not bytecode:
            for cache in [p for p in built[layer].rglob("__pycache__") if p.is_dir()]:
                shutil.rmtree(cache)
    return built


def runtime_dir(into: Path) -> Path:
    """A stand-in for Lambda's ``/var/runtime``: boto3 and its dependencies only (links)."""
    from responses_gateway.testing.lambda_emulator import link_runtime_packages

    target = into / "runtime"
    if target.exists():
        shutil.rmtree(target)
    return link_runtime_packages(target)


def python_shim(into: Path) -> Path:
    """A ``python`` on PATH that is the base interpreter without site-packages (``-S``)."""
    bin_dir = into / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "python"
    base = getattr(sys, "_base_executable", sys.executable)
    shim.write_text(f'#!/bin/sh\nexec "{base}" -S "$@"\n')
    shim.chmod(0o755)
    return bin_dir


# -- measurements --------------------------------------------------------------------------------


def _interpreter_start_ms(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(["python", "-c", "pass"], env=env, check=True)
    return (time.perf_counter() - started) * 1000


def _rest_event(method: str, resource: str, path: str, key_id: str, body: Any = None) -> str:
    sample = ROOT / "tests/deploy/events/rest_api_request.json"
    event = json.loads(sample.read_text())
    event.update(
        resource=resource,
        path=path,
        httpMethod=method,
        pathParameters=None,
        body=None if body is None else json.dumps(body),
    )
    event["requestContext"].update(requestId=str(uuid.uuid4()), resourcePath=resource)
    event["requestContext"]["identity"]["apiKeyId"] = key_id
    return json.dumps(event)


def measure_streaming(env: dict[str, str], upstream: Any) -> dict[str, float]:
    """The streaming function's ``bootstrap`` against the Runtime API stand-in: spawn until the
    runtime asks for its first invocation (its init is done), then one stored streamed create:
    its first chunk (the prelude), its first SSE event and its end."""
    from responses_gateway.testing import Turn
    from responses_gateway.testing.runtime_api import RuntimeApiStandIn

    with RuntimeApiStandIn() as api:
        run_env = {
            **env,
            "AWS_LAMBDA_RUNTIME_API": api.address,
            "LAMBDA_TASK_ROOT": str(FUNCTIONS / "streaming"),
        }
        started = time.perf_counter()
        process = subprocess.Popen(
            [str(FUNCTIONS / "streaming/bootstrap")],
            env=run_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            while not api.waiting_for_next.wait(0.002):
                if process.poll() is not None:
                    stderr = process.stderr.read().decode() if process.stderr else ""
                    raise RuntimeError(f"bootstrap exited: {stderr[-2000:]}")
            ready = time.perf_counter()
            upstream.push(Turn(text="Hello from a cold start"))
            event = json.loads(
                _rest_event(
                    "POST",
                    "/v1/responses",
                    "/v1/responses",
                    "bench-key",
                    {"model": "bench", "input": "Hi", "stream": True},
                )
            )
            recorded = api.invoke(event).result(timeout=60)
            if b"response.completed" not in recorded.body:
                raise RuntimeError(f"first create answered {recorded.body[:500]!r}")
            base = recorded.invoked_at
            first_event = next(c.at for c in recorded.chunks if b"event: " in c.data)
        finally:
            process.terminate()
            process.wait(timeout=15)
    return {
        "spawn_ready_ms": (ready - started) * 1000,
        "first_byte_ms": (recorded.chunks[0].at - base) * 1000,
        "first_event_ms": (first_event - base) * 1000,
        "first_ms": (recorded.chunks[-1].at - base) * 1000,
    }


def measure_probe(env: dict[str, str], probe: str, entry: Path, event: str) -> dict[str, Any]:
    result = subprocess.run(
        ["python", "-c", probe, str(entry), event],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{entry.name} failed: {result.stderr[-2000:]}")
    measured: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return measured


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def run_cold_starts(
    builds: dict[str, dict[str, Path]], scratch: Path, runs: dict[str, int]
) -> dict[str, Any]:
    from responses_gateway.store.local import start_local_dynamodb
    from responses_gateway.testing import ScriptedUpstream, create_fake_upstream_app, run_in_thread

    dynamo = start_local_dynamodb(table_name="cold-start")
    upstream = ScriptedUpstream(demo=False)
    server = run_in_thread(create_fake_upstream_app(upstream))
    runtime = runtime_dir(scratch)
    shim = python_shim(scratch)
    try:
        base_env = {
            "PATH": f"{shim}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": os.environ.get("HOME", "/tmp"),
            "DYNAMODB_TABLE": dynamo.table_name,
            "DYNAMODB_ENDPOINT_URL": dynamo.endpoint_url,
            "AWS_REGION": dynamo.region,
            # as deployed (template.yaml): the streaming and buffered functions name the
            # background state machine
            "BACKGROUND_STATE_MACHINE_ARN": (
                f"arn:aws:states:{dynamo.region}:123456789012:stateMachine:cold-start-background"
            ),
            "UPSTREAM_BASE_URL": f"{server.url}/v1",
            "UPSTREAM_API": "chat",
            "GATEWAY_TRUST_LAMBDA_CONTEXT": "1",
            "POWERTOOLS_SERVICE_NAME": "responses-gateway",
            "POWERTOOLS_METRICS_NAMESPACE": "ResponsesGateway",
            "POWERTOOLS_TRACE_DISABLED": "true",  # aws_xray_sdk is not in the artifact
            "PYTHONDONTWRITEBYTECODE": "1",  # Lambda's /opt and /var/task are read-only
        }
        authorizer_event = json.dumps(
            {
                "methodArn": "arn:aws:execute-api:eu-west-1:123456789012:api/prod/GET/v1/x",
                "headers": {"Authorization": "Bearer bench-key"},
            }
        )
        socket_event = json.dumps(
            {
                "requestContext": {
                    "routeKey": "$connect",
                    "connectionId": "bench-connection",
                    "domainName": "bench.execute-api.us-east-1.amazonaws.com",
                    "stage": "prod",
                    "identity": {"apiKeyId": "bench"},
                },
                "headers": {"Authorization": "Bearer bench-key"},
            }
        )
        buffered_event = _rest_event(
            "GET", "/v1/conversations/{conversation_id}", "/v1/conversations/conv_x", "bench"
        )
        results: dict[str, Any] = {}
        for mode, layers in builds.items():
            count = runs[mode]
            paths = [str(layers[n]) for n in LAYERS] + [str(runtime)]
            env = {**base_env, "PYTHONPATH": os.pathsep.join(paths)}
            interpreter = [_interpreter_start_ms(env) for _ in range(count)]
            streaming = [measure_streaming(env, upstream) for _ in range(count)]
            buffered = [
                measure_probe(
                    env, _BUFFERED_PROBE, FUNCTIONS / "buffered/buffered_handler.py", buffered_event
                )
                for _ in range(count)
            ]
            authorizer = [
                measure_probe(
                    env, _AUTHORIZER_PROBE, FUNCTIONS / "authorizer/authorizer.py", authorizer_event
                )
                for _ in range(count)
            ]
            sockets = [
                measure_probe(
                    env, _SOCKET_PROBE, FUNCTIONS / "socket/socket_handler.py", socket_event
                )
                for _ in range(count)
            ]
            start = statistics.median(interpreter)
            results[mode] = {
                "interpreter_start_ms": _summary(interpreter),
                "streaming": {
                    "spawn_to_ready_ms": _summary([s["spawn_ready_ms"] for s in streaming]),
                    "import_to_ready_ms": _summary(
                        [s["spawn_ready_ms"] - start for s in streaming]
                    ),
                    "first_create_first_byte_ms": _summary([s["first_byte_ms"] for s in streaming]),
                    "first_create_first_event_ms": _summary(
                        [s["first_event_ms"] for s in streaming]
                    ),
                    "first_create_ms": _summary([s["first_ms"] for s in streaming]),
                },
                "buffered": {
                    "import_to_ready_ms": _summary([b["ready_ms"] for b in buffered]),
                    "first_invoke_ms": _summary([b["first_ms"] for b in buffered]),
                    "first_status": buffered[-1]["status"],
                    "then_import_mcp_client_ms": _summary([b["mcp_ms"] for b in buffered]),
                },
                "authorizer": {
                    "import_to_ready_ms": _summary([a["ready_ms"] for a in authorizer]),
                    "first_invoke_ms": _summary([a["first_ms"] for a in authorizer]),
                    "heavy_modules": authorizer[-1]["heavy"],
                },
                "socket": {  # import, then a $connect (the tenant's item written)
                    "import_to_ready_ms": _summary([s["ready_ms"] for s in sockets]),
                    "first_connect_ms": _summary([s["first_ms"] for s in sockets]),
                    "first_status": sockets[-1]["status"],
                    "heavy_modules": sockets[-1]["heavy"],
                },
            }
        return results
    finally:
        server.stop()
        dynamo.stop()


# -- under AWS's runtime interface emulator --------------------------------------------------------


def run_emulated(runs: int, scratch: Path) -> dict[str, Any]:
    """The streaming and buffered functions under ``aws-lambda-rie`` (alternating, ``runs``
    cold starts each): the emulator's ``INIT REPORT`` and the first create's answer (the
    streaming function's answer comes back in one piece from the emulator: its first event
    is measured through the stand-in, in :func:`measure_streaming`)."""
    from responses_gateway.testing import (
        ScriptedUpstream,
        Turn,
        create_fake_upstream_app,
        run_in_thread,
    )
    from responses_gateway.testing.lambda_emulator import LocalServices, emulate, prepare_kit

    kit = prepare_kit()
    upstream = ScriptedUpstream(demo=False)
    server = run_in_thread(create_fake_upstream_app(upstream))
    services = LocalServices.start(server.url)
    figures: dict[str, dict[str, list[float]]] = {}
    try:
        for run in range(runs):
            order = ("StreamingFunction", "BufferedFunction")
            for function in order if run % 2 == 0 else order[::-1]:
                emulated = emulate(function, kit, scratch / "emulated" / str(run), services)
                with emulated:
                    upstream.push(Turn(text="Hello from a cold start"))
                    body = {"model": "bench", "input": "Hi", "stream": function == order[0]}
                    event = json.loads(
                        _rest_event("POST", "/v1/responses", "/v1/responses", "bench-key", body)
                    )
                    started = time.perf_counter()
                    answer = emulated.invoke_raw(event)
                    elapsed = (time.perf_counter() - started) * 1000
                    if answer.status_code != 200 or b"resp_" not in answer.content:
                        raise RuntimeError(f"{function}: {answer.content[:500]!r}\n{emulated.log}")
                    reports = emulated.init_reports_ms()
                    mine = figures.setdefault(function, {"init": [], "first": []})
                    mine["init"].append(reports[0])
                    mine["first"].append(elapsed)
    finally:
        services.stop()
        server.stop()
    streaming, buffered = figures["StreamingFunction"], figures["BufferedFunction"]
    return {
        "runs": runs,
        "streaming_init_report_ms": _summary(streaming["init"]),
        "buffered_init_report_ms": _summary(buffered["init"]),
        "init_ratio": round(
            statistics.median(streaming["init"]) / statistics.median(buffered["init"]), 2
        ),
        "streaming_first_create_ms": _summary(streaming["first"]),
        "buffered_first_create_ms": _summary(buffered["first"]),
    }


# -- sizes ---------------------------------------------------------------------------------------


def _tree_sizes(path: Path) -> tuple[int, int]:
    """(unzipped bytes, zipped bytes) of a directory, zipped with deflate like ``sam package``."""
    raw = 0
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            raw += file.stat().st_size
            archive.write(file, file.relative_to(path))
    return raw, len(buffer.getvalue())


def artifact_sizes(build_dir: Path) -> dict[str, dict[str, float]]:
    """Per function: MB of its own artifact plus its layers."""
    parts: dict[str, tuple[int, int]] = {}
    for name in {*FUNCTION_LAYERS, *LAYERS}:
        directory = build_dir / name
        if directory.is_dir():
            parts[name] = _tree_sizes(directory)
    sizes: dict[str, dict[str, float]] = {}
    for function, layers in FUNCTION_LAYERS.items():
        if function not in parts:
            continue
        members = [function, *layers]
        unzipped = sum(parts[m][0] for m in members if m in parts)
        zipped = sum(parts[m][1] for m in members if m in parts)
        sizes[function] = {
            "unzipped_mb": round(unzipped / 1e6, 2),
            "zipped_mb": round(zipped / 1e6, 2),
            "code_mb": round(parts[function][0] / 1e6, 3),
        }
    for layer in LAYERS:
        if layer in parts:
            sizes[layer] = {
                "unzipped_mb": round(parts[layer][0] / 1e6, 2),
                "zipped_mb": round(parts[layer][1] / 1e6, 2),
            }
    return sizes


def _built_architecture(build_dir: Path) -> str:
    template = build_dir / "template.yaml"
    if not template.exists():
        return "host"
    text = template.read_text()
    return "arm64" if re.search(r"\barm64\b", text) else "x86_64"


def _add_functions(build_dir: Path) -> Path:
    """Copy the function code next to host-built layers, as ``sam build`` lays them out."""
    for function, source in (
        ("StreamingFunction", "streaming"),
        ("BufferedFunction", "buffered"),
        ("AuthorizerFunction", "authorizer"),
        ("WorkerFunction", "worker"),
        ("SocketFunction", "socket"),
    ):
        target = build_dir / function
        if not target.exists():
            shutil.copytree(
                FUNCTIONS / source, target, ignore=shutil.ignore_patterns("__pycache__")
            )
    return build_dir


# -- report --------------------------------------------------------------------------------------


def _print_report(report: dict[str, Any]) -> None:
    print(f"machine: {report['machine']}")
    for mode, results in report.get("cold_start", {}).items():
        label = "as deployed" if mode == "bytecode" else "layers without bytecode, as python_pip"
        print(f"\ncold start, {mode} ({label}):")
        print(f"  interpreter start (python -S -c pass): {results['interpreter_start_ms']}")
        for function, figures in (
            ("streaming", results["streaming"]),
            ("buffered", results["buffered"]),
            ("authorizer", results["authorizer"]),
            ("socket", results["socket"]),
        ):
            ready = figures["import_to_ready_ms"]["median"]
            verdict = "meets" if ready < TARGET_READY_MS else "misses"
            print(f"  {function}: import-to-ready {figures['import_to_ready_ms']} ms")
            print(f"    ({verdict} the {TARGET_READY_MS:.0f} ms target)")
            for key, value in figures.items():
                if key != "import_to_ready_ms":
                    print(f"    {key}: {value}")
    emulated = report.get("emulator")
    if emulated:
        print(f"\nunder aws-lambda-rie ({emulated['runs']} cold starts each, alternating):")
        print(f"  streaming INIT REPORT: {emulated['streaming_init_report_ms']} ms")
        print(f"  buffered INIT REPORT: {emulated['buffered_init_report_ms']} ms")
        verdict = "meets" if emulated["init_ratio"] <= TARGET_INIT_RATIO else "misses"
        print(f"  ratio {emulated['init_ratio']} ({verdict} the {TARGET_INIT_RATIO}x target)")
        print(
            f"  first create, invoke to answer: streaming {emulated['streaming_first_create_ms']}"
        )
        print(f"    buffered {emulated['buffered_first_create_ms']} ms")
    sizes = report.get("sizes", {})
    if sizes:
        print(f"\nartifact sizes ({report['sizes_from']}; MB, function + its layers):")
        for name, figures in sizes.items():
            print(f"  {name}: {figures}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="cold starts per function, with .pyc")
    parser.add_argument("--source-runs", type=int, default=2, help="cold starts without .pyc")
    parser.add_argument("--build-dir", type=Path, default=ROOT / ".aws-sam/build")
    parser.add_argument("--work-dir", type=Path, default=None, help="keep the host build here")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--max-artifact-mb", type=float, default=None)
    parser.add_argument("--sizes-only", action="store_true", help="only size --build-dir")
    parser.add_argument(
        "--emulator-runs", type=int, default=3, help="cold starts under aws-lambda-rie (0: none)"
    )
    args = parser.parse_args(argv)

    load = os.getloadavg()
    report: dict[str, Any] = {
        "machine": f"{os.cpu_count()} CPUs, load {load[0]:.2f}, Python {sys.version.split()[0]}",
    }
    with tempfile.TemporaryDirectory(prefix="cold-start-") as temporary:
        scratch = args.work_dir or Path(temporary)
        scratch.mkdir(parents=True, exist_ok=True)
        if args.build_dir.is_dir():
            report["sizes_from"] = f"{args.build_dir} ({_built_architecture(args.build_dir)})"
            report["sizes"] = artifact_sizes(args.build_dir)
        elif args.sizes_only:
            print(f"no build directory at {args.build_dir}: run sam build first", file=sys.stderr)
            return 1
        if not args.sizes_only:
            builds = {"bytecode": build_layers(scratch / "layers")}
            if args.source_runs > 0:
                builds["source"] = build_layers(scratch / "layers-source", bytecode=False)
            runs = {"bytecode": args.runs, "source": args.source_runs}
            try:
                report["cold_start"] = run_cold_starts(builds, scratch, runs)
            except RuntimeError as exc:
                print(f"cold start failed: {exc}", file=sys.stderr)
                return 1
            if args.emulator_runs > 0:
                try:
                    report["emulator"] = run_emulated(args.emulator_runs, scratch)
                except RuntimeError as exc:
                    print(f"emulated cold start failed: {exc}", file=sys.stderr)
                    return 1
            if "sizes" not in report:
                host = _add_functions(scratch / "layers")
                report["sizes_from"] = f"a host build ({sysconfig.get_platform()})"
                report["sizes"] = artifact_sizes(host)
    _print_report(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.max_artifact_mb is not None:
        too_big = [
            name
            for name, figures in report.get("sizes", {}).items()
            if name in FUNCTION_LAYERS and figures["unzipped_mb"] > args.max_artifact_mb
        ]
        if too_big:
            print(f"over {args.max_artifact_mb} MB unzipped: {', '.join(too_big)}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
