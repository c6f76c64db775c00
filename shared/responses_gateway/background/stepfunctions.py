"""Step Functions as the :class:`~responses_gateway.background.launcher.Launcher`.

Owns the two Step Functions calls the API makes for a background response: ``StartExecution`` of
the background state machine (``infra/statemachines/background.asl.json``), named with
:func:`~responses_gateway.background.launcher.execution_name` so that starting twice is
idempotent, and ``StopExecution`` of that execution on cancel. Only ids cross: the execution
input is ``{"tenant", "response_id", "generation", "iteration": 0}``, the worker's contract.

It must not run loop actions nor touch the store (the worker and the API do), and it must not
block the event loop: every boto3 call runs in a worker thread. boto3 is imported only when a
client is built (:meth:`StepFunctionsLauncher.from_env`), not at import, to keep cold starts
short.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from typing import Any, Protocol

from responses_gateway.background.launcher import execution_name

__all__ = [
    "ENDPOINT_URL_ENV",
    "STATE_MACHINE_ARN_ENV",
    "StepFunctionsClient",
    "StepFunctionsLauncher",
    "execution_arn",
    "execution_input",
]

STATE_MACHINE_ARN_ENV = "BACKGROUND_STATE_MACHINE_ARN"
"""The environment variable ``template.yaml`` sets to the background state machine's ARN."""

ENDPOINT_URL_ENV = "STEPFUNCTIONS_ENDPOINT_URL"
"""Optional Step Functions endpoint (a local emulator in tests)."""

_ALREADY_STARTED = "ExecutionAlreadyExists"
_NOT_STARTED = "ExecutionDoesNotExist"


class StepFunctionsClient(Protocol):
    """The part of boto3's ``stepfunctions`` client the launcher uses."""

    def start_execution(self, **kwargs: Any) -> Mapping[str, Any]: ...

    def stop_execution(self, **kwargs: Any) -> Mapping[str, Any]: ...


def execution_input(tenant: str, response_id: str, generation: int = 0) -> str:
    """The input of a response's ``generation``-th execution, as the worker expects it.

    Always the same text for the same ids: Step Functions treats a second ``StartExecution``
    with the same name *and* input of a running execution as a no-op.
    """
    state = {
        "tenant": tenant,
        "response_id": response_id,
        "generation": generation,
        "iteration": 0,
    }
    return json.dumps(state, separators=(",", ":"))


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of execution ``name`` of a state machine:
    ``arn:<partition>:states:<region>:<account>:execution:<state machine name>:<name>``.

    Raises:
        ValueError: ``state_machine_arn`` is not a state machine ARN.
    """
    prefix, marker, rest = state_machine_arn.partition(":stateMachine:")
    machine = rest.split(":", 1)[0]  # without a version or alias qualifier
    if not marker or not machine or not prefix.startswith("arn:"):
        raise ValueError(f"not a state machine ARN: {state_machine_arn!r}")
    return f"{prefix}:execution:{machine}:{name}"


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    error = response.get("Error")
    code = error.get("Code") if isinstance(error, Mapping) else None
    return code if isinstance(code, str) else None


class StepFunctionsLauncher:
    """Starts and stops the background state machine's executions (one per response and
    generation), with a boto3 ``stepfunctions`` client called from a worker thread."""

    def __init__(self, client: StepFunctionsClient, state_machine_arn: str) -> None:
        execution_arn(state_machine_arn, "check")  # fail early on a malformed ARN
        self._client = client
        self.state_machine_arn = state_machine_arn

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StepFunctionsLauncher | None:
        """The launcher the environment (``os.environ`` by default) configures, or None when
        ``BACKGROUND_STATE_MACHINE_ARN`` is unset (no state machine: not deployed).

        Reads ``AWS_REGION`` (else ``AWS_DEFAULT_REGION``, else the ARN's region) and
        ``STEPFUNCTIONS_ENDPOINT_URL`` (tests, local emulators).
        """
        if env is None:
            env = os.environ
        arn = env.get(STATE_MACHINE_ARN_ENV, "").strip()
        if not arn:
            return None
        parts = arn.split(":")
        region = (
            env.get("AWS_REGION")
            or env.get("AWS_DEFAULT_REGION")
            or (parts[3] if len(parts) > 3 and parts[3] else None)
        )
        import boto3  # type: ignore[import-untyped]  # lazily: cold start

        client: StepFunctionsClient = boto3.client(
            "stepfunctions",
            region_name=region,
            endpoint_url=env.get(ENDPOINT_URL_ENV) or None,
        )
        return cls(client, arn)

    async def start(self, tenant: str, response_id: str, generation: int = 0) -> None:
        """Start the execution ``execution_name(response_id, generation)``; one that already
        exists (running, or ended) counts as started."""
        name = execution_name(response_id, generation)
        payload = execution_input(tenant, response_id, generation)
        await asyncio.to_thread(self._start, name, payload)

    async def stop(self, tenant: str, response_id: str, generation: int = 0) -> None:
        """Stop that execution; one that does not exist is fine (best effort: the worker also
        stops at its next action boundary once the response is cancelled)."""
        arn = execution_arn(self.state_machine_arn, execution_name(response_id, generation))
        await asyncio.to_thread(self._stop, arn)

    def _start(self, name: str, payload: str) -> None:
        try:
            self._client.start_execution(
                stateMachineArn=self.state_machine_arn, name=name, input=payload
            )
        except Exception as exc:
            if _error_code(exc) != _ALREADY_STARTED:
                raise

    def _stop(self, arn: str) -> None:
        try:
            self._client.stop_execution(
                executionArn=arn, error="Cancelled", cause="the response was cancelled"
            )
        except Exception as exc:
            if _error_code(exc) != _NOT_STARTED:
                raise
