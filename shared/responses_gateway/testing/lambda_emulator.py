"""The deployed functions run as Lambda runs them, without Docker: AWS's runtime interface emulator.

Owns laying out and starting one function of ``template.yaml`` the way Lambda would:

- **the emulator**: ``aws-lambda-rie`` (AWS's runtime interface emulator, the binary ``sam
  local`` puts in its containers), taken from the ``aws-sam-cli`` wheel on PyPI
  (``samcli/local/rapid/aws-lambda-rie-<arch>``): an installed SAM CLI's copy, else
  ``pip download --no-deps aws-sam-cli==<version>`` once into the cache directory;
- **Lambda's paths** under a scratch root: ``var/task`` (the function's code directory, copied),
  ``opt`` (the layers, built by ``infra/layers/Makefile`` for this machine's platform, as
  ``sam build`` builds them for arm64), ``var/runtime`` (``awslambdaric``, the Python runtime
  interface client from PyPI, and boto3 with its dependencies: what the managed runtime ships)
  and ``var/lang/bin/python3`` (this machine's Python 3.11 without its site-packages). A
  stand-in for the managed runtime's ``/var/runtime/bootstrap`` honours
  ``AWS_LAMBDA_EXEC_WRAPPER`` as Lambda's does (``/var/task/...`` mapped into the root) and
  otherwise runs ``python3 -m awslambdaric <handler>``. The root cannot be ``/``: the one
  difference from Lambda is that the layers reach ``sys.path`` through ``PYTHONPATH``;
- **the environment** ``template.yaml`` gives the function (Globals merged, intrinsics resolved
  for a stack named ``stack_name`` with default parameters unless overridden), then the local
  endpoints (:class:`LocalServices`: moto's server for DynamoDB, Secrets Manager, Step Functions
  and the WebSocket management API; the upstream).

:class:`EmulatedFunction` starts the emulator for one function, invokes it
(``POST /2015-03-31/functions/function/invocations``: one at a time, the emulator cannot take two)
and reads its ``INIT REPORT`` (the init phase's duration). The emulator returns a streamed
answer in one piece: :mod:`responses_gateway.testing.runtime_api` shows the chunks.

Test and local-run tooling only (``responses-gateway lambda-local``, ``tests/deploy``,
``benchmarks/cold_start.py``): never shipped in a layer.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "AWSLAMBDARIC_VERSION",
    "FUNCTION_DIRECTORIES",
    "LAYER_SOURCES",
    "SAM_CLI_VERSION",
    "EmulatedFunction",
    "EmulatorKit",
    "LocalServices",
    "build_layer",
    "function_environment",
    "link_runtime_packages",
    "prepare_kit",
]

ROOT = Path(__file__).resolve().parents[3]
SAM_CLI_VERSION = "1.170.0"
AWSLAMBDARIC_VERSION = "4.2.2"
FUNCTION_DIRECTORIES = {
    "StreamingFunction": "streaming",
    "BufferedFunction": "buffered",
    "WorkerFunction": "worker",
    "SocketFunction": "socket",
    "AuthorizerFunction": "authorizer",
}
LAYER_SOURCES = {"DependenciesLayer": "infra/layers/dependencies", "SharedLayer": "shared"}
"""Each layer of the template and the directory ``infra/layers/Makefile`` builds it from."""
_ACCOUNT = "123456789012"
_INIT_REPORT = re.compile(r"INIT REPORT\(.*?durationMs: ([0-9.]+)")


def _arch() -> str:
    machine = os.uname().machine
    return "arm64" if machine in ("aarch64", "arm64") else "x86_64"


def _pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *args],
        check=True,
    )


def _emulator(cache: Path) -> Path:
    """The ``aws-lambda-rie`` binary for this machine (from the ``aws-sam-cli`` wheel)."""
    name = f"aws-lambda-rie-{_arch()}"
    target = cache / name
    if target.exists():
        return target
    member = f"samcli/local/rapid/{name}"
    installed = sorted((ROOT / "build/sam-cli/lib").glob(f"python3*/site-packages/{member}"))
    if installed:
        shutil.copy2(installed[0], target)
    else:
        wheels = cache / "wheels"
        _pip("download", "--no-deps", f"aws-sam-cli=={SAM_CLI_VERSION}", "-d", str(wheels))
        wheel = next(wheels.glob("aws_sam_cli-*.whl"))
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
            target.write_bytes(source.read())
    target.chmod(0o755)
    return target


def _top_level_names(distribution: importlib.metadata.Distribution) -> set[str]:
    names = set()
    for file in distribution.files or []:
        first = file.parts[0]
        if first in ("..", "__pycache__") or first.endswith((".dist-info", ".data", ".pth")):
            continue
        names.add(first)
    return names


def link_runtime_packages(target: Path) -> Path:
    """Link boto3 and its dependencies (what Lambda's Python runtime ships) into ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    pending, seen = ["boto3"], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        distribution = importlib.metadata.distribution(name)
        site = Path(str(distribution.locate_file("")))
        for top in _top_level_names(distribution):
            if not (target / top).exists():
                (target / top).symlink_to(site / top)
        for requirement in distribution.requires or []:
            if "extra ==" not in requirement:
                pending.append(re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0])
    return target


def _runtime_dir(target: Path) -> Path:
    """``/var/runtime``: awslambdaric (installed from PyPI) and boto3 with its dependencies."""
    if not (target / "awslambdaric").exists():
        _pip("install", "--target", str(target), f"awslambdaric=={AWSLAMBDARIC_VERSION}")
    return link_runtime_packages(target)


def build_layer(layer: str, target: Path, *, bytecode: bool = True) -> Path:
    """Build ``layer`` with ``infra/layers/Makefile`` for this machine into ``target``; its
    ``python`` directory. Without ``bytecode`` it holds sources only (``SOURCELESS=0``)."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    machine = sysconfig.get_platform().split("-")[-1]
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-f",
            str(ROOT / "infra/layers/Makefile"),
            f"build-{layer}",
            f"ARTIFACTS_DIR={target}",
            f"PYTHON={sys.executable}",
            f"PLATFORM=manylinux2014_{machine}",
            f"SOURCELESS={1 if bytecode else 0}",
        ],
        cwd=ROOT / LAYER_SOURCES[layer],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return target / "python"


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if "__pycache__" in file.parts:
                continue
            digest.update(str(file.relative_to(ROOT)).encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class EmulatorKit:
    """What every emulated function shares: the emulator, the runtime and the built layers."""

    emulator: Path
    runtime: Path
    """The ``/var/runtime`` stand-in."""
    layers: tuple[Path, ...]
    """The layers' ``python`` directories, in the order Lambda puts them on ``sys.path``."""
    python_bin: Path
    """The ``/var/lang/bin`` stand-in (``python3``: this Python without site-packages)."""
    bootstrap: Path
    """The managed runtime's ``/var/runtime/bootstrap`` stand-in."""


_BOOTSTRAP = """#!/bin/sh
# Stand-in for the managed Python runtime's /var/runtime/bootstrap (responses_gateway.testing.
# lambda_emulator): an exec wrapper takes over the process as on Lambda, else awslambdaric runs.
cd "$LAMBDA_TASK_ROOT"
if [ -n "${AWS_LAMBDA_EXEC_WRAPPER:-}" ]; then
    if [ ! -f "$AWS_LAMBDA_EXEC_WRAPPER" ]; then
        echo "$AWS_LAMBDA_EXEC_WRAPPER: does not exist"
        exit 127
    fi
    exec "$AWS_LAMBDA_EXEC_WRAPPER" python3 -m awslambdaric "$_HANDLER"
fi
exec python3 -m awslambdaric "$_HANDLER"
"""


def prepare_kit(cache: Path | None = None) -> EmulatorKit:
    """Fetch the emulator and ``awslambdaric`` (PyPI, once) and build both layers for this
    machine (the dependencies layer is rebuilt only when its requirements change; the shared
    layer each time its sources do). Needs ``make`` and a package index."""
    cache = (cache or ROOT / "build" / "lambda-emulator").resolve()
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time (test workers, lambda_local)
        return _prepare(cache)


def _prepare(cache: Path) -> EmulatorKit:
    emulator = _emulator(cache)
    runtime = _runtime_dir(cache / "var-runtime")
    layers = []
    for layer, source in LAYER_SOURCES.items():
        built = cache / f"{layer}-{_digest(ROOT / source, ROOT / 'infra/layers/Makefile')}"
        if not (built / "python").is_dir():
            for stale in cache.glob(f"{layer}-*"):
                shutil.rmtree(stale)
            build_layer(layer, built)
        layers.append(built / "python")
    python_bin = cache / "var-lang-bin"
    python_bin.mkdir(exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    shim = python_bin / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{base}" -S "$@"\n')
    shim.chmod(0o755)
    bootstrap = runtime / "bootstrap"
    bootstrap.write_text(_BOOTSTRAP)
    bootstrap.chmod(0o755)
    return EmulatorKit(emulator, runtime, tuple(layers), python_bin, bootstrap)


# -- the template's environment ----------------------------------------------------------------


class _Resolver:
    """CloudFormation intrinsics over default (or given) parameters and named resources."""

    def __init__(
        self, template: Mapping[str, Any], parameters: Mapping[str, str], stack: str, region: str
    ) -> None:
        self.template = template
        self.values: dict[str, str] = {
            name: str(spec.get("Default", ""))
            for name, spec in (template.get("Parameters") or {}).items()
        }
        self.values.update(parameters)
        self.values.update(
            {
                "AWS::Region": region,
                "AWS::AccountId": _ACCOUNT,
                "AWS::Partition": "aws",
                "AWS::StackName": stack,
                "AWS::URLSuffix": "amazonaws.com",
            }
        )
        for name in template.get("Resources") or {}:
            self.values.setdefault(name, f"{stack}-{name}")

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.template["Conditions"][name]))

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value if v != {"Ref": "AWS::NoValue"}]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {k: self.resolve(v) for k, v in value.items()}
        ((key, arg),) = value.items()
        if key == "Ref":
            return self.values[arg]
        if key == "Fn::Sub":
            text, local = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))
            return re.sub(
                r"\$\{([^}]+)\}",
                lambda m: str(local.get(m[1], self.values.get(m[1], m[1].replace(".", "-")))),
                text,
            )
        if key == "Fn::If":
            name, yes, no = arg
            return self.resolve(yes if self.condition(name) else no)
        if key == "Fn::Equals":
            left, right = (self.resolve(a) for a in arg)
            return left == right
        if key == "Fn::Not":
            return not self.resolve(arg[0])
        if key == "Fn::Select":
            index, items = arg
            return self.resolve(items)[int(self.resolve(index))]
        if key == "Fn::Split":
            separator, text = arg
            return str(self.resolve(text)).split(separator)
        if key == "Fn::GetAtt":
            resource, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return f"{self.values.get(resource, resource)}-{attribute}"
        if key == "Condition":
            return self.condition(arg)
        return {key: self.resolve(arg)}


def function_environment(
    function: str,
    *,
    parameters: Mapping[str, str] | None = None,
    stack_name: str = "gateway",
    region: str = "us-east-1",
    template: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """The environment variables ``template.yaml`` gives ``function`` (its Globals merged),
    with intrinsics resolved for a stack named ``stack_name``."""
    if template is None:
        sys.path.insert(0, str(ROOT / "infra"))
        try:
            from check_template import load_template  # type: ignore[import-not-found]
        finally:
            sys.path.remove(str(ROOT / "infra"))
        template = load_template()
    resolver = _Resolver(template, parameters or {}, stack_name, region)
    merged: dict[str, Any] = dict(
        ((template.get("Globals") or {}).get("Function") or {})
        .get("Environment", {})
        .get("Variables", {})
    )
    own = template["Resources"][function]["Properties"].get("Environment", {})
    merged.update(own.get("Variables", {}))
    return {name: str(resolver.resolve(value)) for name, value in merged.items()}


def function_settings(function: str, template: Mapping[str, Any]) -> dict[str, Any]:
    """Handler, timeout and memory of ``function`` (Globals as defaults)."""
    defaults = (template.get("Globals") or {}).get("Function") or {}
    properties = template["Resources"][function]["Properties"]
    timeout = properties.get("Timeout", defaults.get("Timeout", 3))
    memory = properties.get("MemorySize", defaults.get("MemorySize", 128))
    return {
        "handler": properties["Handler"],
        "timeout": timeout if isinstance(timeout, int) else 900,
        "memory": memory if isinstance(memory, int) else 1024,
    }


# -- the AWS side --------------------------------------------------------------------------------


@dataclass
class LocalServices:
    """moto's server standing in for the stack's AWS services, set up as the stack would be:
    the table, the sealing-key and upstream-key secrets, the background state machine."""

    endpoint_url: str
    table_name: str
    region: str
    stack_name: str
    upstream_url: str
    upstream_key_secret: str = "gateway-upstream-key"
    _dynamo: Any = field(default=None, repr=False)

    @classmethod
    def start(
        cls, upstream_url: str, *, stack_name: str = "gateway", upstream_key: str = "sk-local"
    ) -> LocalServices:
        from responses_gateway.store.local import start_local_dynamodb

        table = f"{stack_name}-Table"
        dynamo = start_local_dynamodb(table_name=table)
        services = cls(
            dynamo.endpoint_url, table, dynamo.region, stack_name, upstream_url, _dynamo=dynamo
        )
        services._provision(upstream_key)
        return services

    def client(self, service: str) -> Any:
        import boto3  # type: ignore[import-untyped]

        return boto3.client(
            service,
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - moto's dummy credentials
        )

    def _provision(self, upstream_key: str) -> None:
        secrets = self.client("secretsmanager")
        sealing = json.dumps({"kid": "k1", "secret": "s" * 64})
        secrets.create_secret(Name=f"{self.stack_name}-SealingKeysSecret", SecretString=sealing)
        secrets.create_secret(Name=self.upstream_key_secret, SecretString=upstream_key)
        definition = (ROOT / "infra/statemachines/background.asl.json").read_text()
        self.client("stepfunctions").create_state_machine(
            name=f"{self.stack_name}-background",
            definition=definition.replace("${WorkerFunctionArn}", "arn:aws:lambda:::worker"),
            roleArn=f"arn:aws:iam::{_ACCOUNT}:role/background",
        )

    @property
    def parameters(self) -> dict[str, str]:
        """The stack parameters this set-up stands for."""
        return {
            "UpstreamBaseUrl": f"{self.upstream_url}/v1",
            "UpstreamApi": "chat",
            "UpstreamApiKeySecretName": self.upstream_key_secret,
        }

    def environment(self) -> dict[str, str]:
        """What points the functions at these endpoints (besides the template's values)."""
        return {
            "DYNAMODB_ENDPOINT_URL": self.endpoint_url,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "SOCKET_MANAGEMENT_ENDPOINT": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        }

    def stop(self) -> None:
        if self._dynamo is not None:
            self._dynamo.stop()


# -- one function under the emulator ------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmulatedFunction:
    """One function of the template under ``aws-lambda-rie``, laid out under ``root``."""

    def __init__(
        self,
        function: str,
        kit: EmulatorKit,
        root: Path,
        env: Mapping[str, str],
        *,
        handler: str,
        timeout: int,
        memory: int,
    ) -> None:
        self.function = function
        self.root = root
        task = root / "var" / "task"
        if task.exists():
            shutil.rmtree(task)
        shutil.copytree(
            ROOT / "functions" / FUNCTION_DIRECTORIES[function],
            task,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        self.port = _free_port()
        self.log_path = root / f"{function}.log"
        wrapper = env.get("AWS_LAMBDA_EXEC_WRAPPER", "")
        if wrapper.startswith("/var/task/"):
            env = {**env, "AWS_LAMBDA_EXEC_WRAPPER": str(task / wrapper.removeprefix("/var/task/"))}
        self.env = {
            "PATH": f"{kit.python_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": "/tmp",  # noqa: S108 - what Lambda gives too
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            "LAMBDA_TASK_ROOT": str(task),
            "LAMBDA_RUNTIME_DIR": str(kit.runtime),
            "PYTHONPATH": os.pathsep.join([*(str(p) for p in kit.layers), str(kit.runtime)]),
            "PYTHONDONTWRITEBYTECODE": "1",  # Lambda's /var/task and /opt are read-only
            "_HANDLER": handler,
            "AWS_LAMBDA_FUNCTION_NAME": function,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(memory),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(timeout),
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{function}",
            "AWS_LAMBDA_LOG_STREAM_NAME": "local",
            "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon here
            **env,
        }
        self._command = [
            str(kit.emulator),
            "--runtime-interface-emulator-address",
            f"127.0.0.1:{self.port}",
            "--runtime-api-address",
            f"127.0.0.1:{_free_port()}",
            str(kit.bootstrap),
        ]
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/2015-03-31/functions/function/invocations"

    def start(self) -> EmulatedFunction:
        with self.log_path.open("ab") as sink:
            self._process = subprocess.Popen(
                self._command,
                env=self.env,
                cwd=self.env["LAMBDA_TASK_ROOT"],
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the emulator exited:\n{self.log}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return self
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=0.02)
        raise RuntimeError(f"the emulator never listened:\n{self.log}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)

    def __enter__(self) -> EmulatedFunction:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def invoke_raw(self, event: Any, *, timeout: float = 120.0) -> httpx.Response:
        """Invoke with ``event`` (one invocation at a time) and return the emulator's answer."""
        with self._lock, httpx.Client(timeout=timeout) as client:
            return client.post(self.url, content=json.dumps(event).encode())

    def invoke(self, event: Any, *, timeout: float = 120.0) -> Any:
        """Invoke and parse the answer as JSON (a buffered function's result)."""
        answer = self.invoke_raw(event, timeout=timeout)
        return answer.json()

    def init_reports_ms(self) -> list[float]:
        """The durations of the ``INIT REPORT`` lines the emulator logged so far."""
        return [float(found) for found in _INIT_REPORT.findall(self.log)]

    def lines(self) -> Iterator[dict[str, Any]]:
        """The JSON log lines the function wrote."""
        for line in self.log.splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    yield json.loads(line)


def emulate(
    function: str,
    kit: EmulatorKit,
    root: Path,
    services: LocalServices,
    *,
    extra_env: Mapping[str, str] | None = None,
    timeout: int | None = None,
) -> EmulatedFunction:
    """``function`` laid out under ``root`` with the template's environment for ``services``
    (not started)."""
    sys.path.insert(0, str(ROOT / "infra"))
    try:
        from check_template import load_template
    finally:
        sys.path.remove(str(ROOT / "infra"))
    template = load_template()
    settings = function_settings(function, template)
    env = function_environment(
        function,
        parameters=services.parameters,
        stack_name=services.stack_name,
        region=services.region,
        template=template,
    )
    env.update(services.environment())
    env.update(extra_env or {})
    return EmulatedFunction(
        function,
        kit,
        root / function,
        env,
        handler=settings["handler"],
        timeout=timeout or settings["timeout"],
        memory=settings["memory"],
    )
