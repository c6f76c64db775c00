"""What ``sam build`` packages: thin entry points, the layers' pins, the start script, and which
modules each function loads at init (heavy ones only where used)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
ENTRY_POINTS = {
    "streaming": "streaming_app.py",
    "buffered": "buffered_handler.py",
    "authorizer": "authorizer.py",
    "worker": "worker_handler.py",
}
RUNTIME_PROVIDED = {"boto3"}
"""Project dependencies the Lambda Python runtime already has (not shipped in a layer)."""
LOCAL_ONLY = {"websockets", "uvicorn"}
"""Project dependencies only ``serve`` uses (uvicorn and its WebSocket mode): the deployed
functions run no web server (the streaming function has its own runtime) and never get an
upgrade (API Gateway's WebSocket API reaches the socket function)."""


def _layer_pins() -> dict[str, Requirement]:
    lines = (ROOT / "infra/layers/dependencies/requirements.txt").read_text().splitlines()
    requirements = [
        Requirement(line) for line in lines if line.strip() and not line.startswith("#")
    ]
    return {r.name.lower(): r for r in requirements}


def test_layer_pins_are_exact_and_admitted_by_pyproject() -> None:
    pins = _layer_pins()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for raw in project["dependencies"]:
        requirement = Requirement(raw)
        name = requirement.name.lower()
        if name in RUNTIME_PROVIDED:
            assert name not in pins  # bundling botocore would add ~30 MB
            continue
        if name in LOCAL_ONLY:
            assert name not in pins
            continue
        assert name in pins, f"{name} is a project dependency missing from the layer"
        (pin,) = pins[name].specifier
        assert pin.operator == "=="
        assert requirement.specifier.contains(pin.version), (name, pin.version)
    for raw in project["optional-dependencies"]["lambda"]:
        requirement = Requirement(raw)
        (pin,) = pins[requirement.name.lower()].specifier
        assert requirement.specifier.contains(pin.version), (requirement.name, pin.version)
    assert {"mangum", "aws-lambda-powertools"} <= set(pins)
    # no web server: the streaming function runs the app on its own runtime
    assert not {"moto", "openai", "aws-xray-sdk", "uvicorn", "uvloop", "httptools"} & set(pins)


def test_the_layer_ships_no_mcp_sdk() -> None:
    # The gateway speaks MCP with its own client; the SDK and what only it needs stay out.
    sdk = {"mcp", "mcp-types", "httpx2", "httpcore2", "sse-starlette", "jsonschema", "pyjwt"}
    assert not sdk & set(_layer_pins())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not {Requirement(raw).name for raw in project["dependencies"]} & sdk


@pytest.mark.parametrize(("directory", "filename"), sorted(ENTRY_POINTS.items()))
def test_entry_points_are_thin(directory: str, filename: str) -> None:
    path = FUNCTIONS / directory / filename
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree)
    imported = {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    } | {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert imported <= {"responses_gateway", "typing"}, imported
    assert len(path.read_text().splitlines()) <= 30
    assert sorted(p.name for p in path.parent.iterdir() if p.name != "__pycache__") == sorted(
        [filename, "bootstrap"] if directory == "streaming" else [filename]
    )


def test_the_streaming_bootstrap_is_an_executable_posix_script() -> None:
    script = FUNCTIONS / "streaming" / "bootstrap"
    assert os.access(script, os.X_OK), "the runtime execs the wrapper directly: chmod 755"
    raw = script.read_bytes()
    assert raw.startswith(b"#!/bin/sh\n")
    assert b"\r" not in raw, "CRLF line endings break /bin/sh on Lambda"
    assert b"-m responses_gateway.lambda_runtime" in raw and b"_HANDLER" in raw


def _modules_after_init(directory: str, env: dict[str, str]) -> set[str]:
    """The top-level modules a fresh interpreter holds once an entry point has initialized."""
    entry = FUNCTIONS / directory / ENTRY_POINTS[directory]
    code = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('entry', {str(entry)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | set(sys.modules))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env, "POWERTOOLS_TRACE_DISABLED": "true"},
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


HEAVY = {"boto3", "botocore.session", "botocore.client", "mcp", "moto", "openai", "aws_xray_sdk"}
"""Modules the functions must not load at init (``botocore``'s package itself is light:
Powertools reads its version)."""


@pytest.mark.parametrize("directory", ["streaming", "buffered"])
def test_app_functions_load_no_heavy_module_at_init(
    directory: str, deployed_env: dict[str, str]
) -> None:
    loaded = _modules_after_init(directory, deployed_env)
    assert not HEAVY & loaded, HEAVY & loaded
    assert "aws_lambda_powertools.utilities.parameters" not in loaded
    assert "responses_gateway.testing" not in loaded
    assert "responses_gateway.store.sqlite" not in loaded  # deployed: DynamoDB only


def test_authorizer_loads_only_the_tenancy_rule(deployed_env: dict[str, str]) -> None:
    loaded = _modules_after_init("authorizer", deployed_env)
    assert not (HEAVY | {"fastapi", "pydantic", "starlette", "httpx"}) & loaded
