"""The background state machine's control flow, run by moto's States Language interpreter, and
the Step Functions launcher against it.

GIVEN ``infra/statemachines/background.asl.json`` as CloudFormation deploys it (its
``${WorkerFunctionArn}`` substituted), created in moto with ``execute_state_machine``, and a
scripted worker answering the Lambda invocations, THEN: the loop runs the worker until it answers
``done``; crashed turns and Lambda service errors are retried with the ASL's backoff; a turn
that keeps failing, or an answer that is neither ``continue`` nor ``done``, goes to the watchdog
(``MarkFailed``: the worker in mode ``fail`` with the ids and the error) and the execution
fails; at the iteration threshold the loop continues in a fresh execution named
``<response_id>-g<generation+1>``. :class:`StepFunctionsLauncher` starts idempotently and stops.

How moto is driven (moto 5.2.5, no Docker):

- ``mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda":
  {"use_docker": False}})``, started once for the module without resetting moto's backends
  (the session's embedded DynamoDB lives in the same process).
- Lambda tasks reach ``LambdaSimpleBackend.invoke``, whose only script is a queue of result
  strings (``/moto-api/static/lambda-simple/response``): it cannot report a function error nor
  show what was invoked. :class:`ScriptedWorker` replaces that method: it records every payload
  and answers from a per-test script, a crash being reported the way Lambda's API reports it
  (``X-Amz-Function-Error: Unhandled`` and an ``errorType`` payload).
- moto's interpreter sleeps for real between retries; the retrier's clock is replaced by one that
  records the intervals instead.
- moto leaves the optimized integrations' request/response normalisation empty, so
  ``states:startExecution`` reaches botocore with the ASL's ``StateMachineArn``/``Name``/``Input``
  instead of ``stateMachineArn``/...; :func:`_normalise_sfn_integration` maps them with
  botocore's model, as Step Functions does.

Executions run in moto's threads: tests poll ``describe_execution`` (bounded) until the status
leaves ``RUNNING``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from responses_gateway.background.launcher import execution_name
from responses_gateway.background.stepfunctions import (
    StepFunctionsLauncher,
    execution_arn,
    execution_input,
)

ROOT = Path(__file__).resolve().parents[2]
ASL = ROOT / "infra" / "statemachines" / "background.asl.json"
REGION = "us-east-1"
ACCOUNT = "123456789012"
WORKER_ARN = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:responses-gateway-WorkerFunction"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/responses-gateway-BackgroundStateMachineRole"
TENANT = "key-tenant-1"
HISTORY_LIMIT = 25_000


def deployed_definition(worker_arn: str = WORKER_ARN) -> str:
    """The ASL with ``DefinitionSubstitutions`` applied, as CloudFormation applies them."""
    text = ASL.read_text(encoding="utf-8").replace("${WorkerFunctionArn}", worker_arn)
    assert "${" not in text, "a substitution the test does not know"
    return text


def iteration_threshold(definition: dict[str, Any]) -> int:
    """The ``iteration`` at or after which ``Decide`` hands over to a fresh execution."""
    (rule,) = [
        condition
        for choice in definition["States"]["Decide"]["Choices"]
        for condition in choice.get("And", [])
        if condition["Variable"] == "$.iteration"
    ]
    threshold: int = rule["NumericLessThan"]
    return threshold


# -- the scripted worker -------------------------------------------------------------------------


@dataclass(frozen=True)
class Crash:
    """An invocation that ended in an unhandled error (Lambda's ``FunctionError``)."""

    error_type: str = "RuntimeError"
    message: str = "worker crashed"


@dataclass(frozen=True)
class ServiceError:
    """The Lambda service refused the invocation (``Lambda.<code>`` in Step Functions)."""

    code: str = "ServiceException"


Answer = dict[str, Any] | Crash | ServiceError
Script = Callable[[dict[str, Any]], Answer]


def turn(payload: dict[str, Any], status: str) -> dict[str, Any]:
    """The worker contract's answer to ``payload``: its ids, ``iteration + 1`` and ``status``."""
    return {
        "tenant": payload["tenant"],
        "response_id": payload["response_id"],
        "generation": payload["generation"],
        "iteration": payload["iteration"] + 1,
        "status": status,
    }


def fail_mode_done(payload: dict[str, Any]) -> dict[str, Any]:
    """The watchdog's answer (mode ``fail``): the ids and ``done``."""
    return {
        "tenant": payload["tenant"],
        "response_id": payload["response_id"],
        "generation": payload["generation"],
        "status": "done",
    }


class ScriptedWorker:
    """Stands in for ``LambdaSimpleBackend.invoke``: records each invocation and answers with
    the current script (set per test)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.script: Script = lambda payload: Crash("NoScript", "no script set")
        self.blocked = threading.Event()
        self.unblock = threading.Event()
        self.block_first_call = False
        self._lock = threading.Lock()

    def reset(self, script: Script) -> None:
        with self._lock:
            self.calls.clear()
        self.script = script
        self.block_first_call = False
        self.blocked.clear()
        self.unblock.clear()

    def payloads(self) -> list[dict[str, Any]]:
        with self._lock:
            return [payload for _, payload in self.calls]

    def invoke(
        self,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: dict[str, str],
    ) -> bytes:
        from moto.core.exceptions import JsonRESTError

        payload = json.loads(body)
        with self._lock:
            self.calls.append((function_name, payload))
            first = len(self.calls) == 1
        if first and self.block_first_call:
            self.blocked.set()
            assert self.unblock.wait(timeout=20), "the test never released the worker"
        answer = self.script(payload)
        if isinstance(answer, ServiceError):
            error = JsonRESTError(answer.code, "injected service error")
            error.code = 500
            raise error
        if isinstance(answer, Crash):
            response_headers["x-amz-function-error"] = "Unhandled"
            answer = {"errorType": answer.error_type, "errorMessage": answer.message}
        return json.dumps(answer).encode()


class _RecordingClock:
    """The ``time`` module as moto's retrier sees it: ``sleep`` records instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def _normalise_sfn_integration(patch: pytest.MonkeyPatch) -> None:
    """Give moto's ``states:startExecution`` integration the parameter/response mapping Step
    Functions applies (ASL ``StateMachineArn`` -> API ``stateMachineArn``, API
    ``executionArn`` -> ``ExecutionArn``), using botocore's model of the API."""
    import botocore.session
    from botocore import xform_name
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_sfn as sfn_service,
    )

    model = botocore.session.get_session().get_service_model("stepfunctions")
    operations = {xform_name(name): model.operation_model(name) for name in model.operation_names}
    service_class = sfn_service.StateTaskServiceSfn
    moto_normalise = service_class._normalise_parameters

    def normalise_parameters(
        self: Any,
        parameters: dict[str, Any],
        boto_service_name: str | None = None,
        service_action_name: str | None = None,
    ) -> None:
        moto_normalise(self, parameters, boto_service_name, service_action_name)
        operation = operations[self._get_boto_service_action(service_action_name)]
        self._to_boto_request(parameters, operation.input_shape)

    def normalise_response(
        self: Any,
        response: Any,
        boto_service_name: str | None = None,
        service_action_name: str | None = None,
    ) -> None:
        operation = operations[self._get_boto_service_action(service_action_name)]
        self._from_boto_response(response, operation.output_shape)

    patch.setattr(service_class, "_normalise_parameters", normalise_parameters)
    patch.setattr(service_class, "_normalise_response", normalise_response)


@dataclass
class Interpreter:
    """moto's Step Functions with the background state machine created in it."""

    client: Any
    machine_arn: str
    definition: dict[str, Any]
    worker: ScriptedWorker
    clock: _RecordingClock


@pytest.fixture(scope="module")
def interpreter() -> Iterator[Interpreter]:
    import boto3
    from moto import mock_aws
    from moto.awslambda_simple.models import LambdaSimpleBackend
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    worker = ScriptedWorker()
    clock = _RecordingClock()
    mock = mock_aws(
        config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            LambdaSimpleBackend,
            "invoke",
            lambda backend, *args: worker.invoke(*args),
        )
        patch.setattr(retrier_decl, "time", clock)
        _normalise_sfn_integration(patch)
        mock.start(reset=False)  # keep the session's embedded DynamoDB
        try:
            client = boto3.client("stepfunctions", region_name=REGION)
            text = deployed_definition()
            arn = client.create_state_machine(
                name="responses-gateway-background",
                definition=text,
                roleArn=ROLE_ARN,
                type="STANDARD",
            )["stateMachineArn"]
            try:
                yield Interpreter(client, arn, json.loads(text), worker, clock)
            finally:
                worker.unblock.set()
                client.delete_state_machine(stateMachineArn=arn)
        finally:
            mock.stop(remove_data=False)


@pytest.fixture
def sfn(interpreter: Interpreter) -> Interpreter:
    interpreter.worker.reset(lambda payload: Crash("NoScript", "no script set"))
    interpreter.clock.waits.clear()
    return interpreter


def new_response_id() -> str:
    """A fresh response id (executions outlive a test: names must not repeat)."""
    return f"resp_{uuid.uuid4().hex}"


def start_state(response_id: str, generation: int = 0, iteration: int = 0) -> dict[str, Any]:
    return {
        "tenant": TENANT,
        "response_id": response_id,
        "generation": generation,
        "iteration": iteration,
    }


def wait_until_ended(sfn: Interpreter, arn: str) -> dict[str, Any]:
    """``describe_execution`` once the execution has left ``RUNNING`` (bounded polling)."""
    pause = threading.Event()
    for _ in range(1_000):
        described: dict[str, Any] = sfn.client.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            return described
        pause.wait(0.01)
    raise AssertionError(f"{arn} still running")


def run(sfn: Interpreter, state: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    arn = sfn.client.start_execution(
        stateMachineArn=sfn.machine_arn,
        name=name or execution_name(state["response_id"], state["generation"]),
        input=json.dumps(state),
    )["executionArn"]
    return wait_until_ended(sfn, arn)


def history(sfn: Interpreter, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = sfn.client.get_execution_history(executionArn=arn)["events"]
    return events


def entered_states(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e
    ]


def scheduled_payloads(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``Payload`` of every Lambda invocation the execution scheduled, in order."""
    return [
        json.loads(e["taskScheduledEventDetails"]["parameters"])["Payload"]
        for e in events
        if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resource"] == "invoke"
    ]


# -- the loop ------------------------------------------------------------------------------------


def test_the_loop_invokes_the_worker_until_it_answers_done(sfn: Interpreter) -> None:
    # GIVEN a worker that answers continue, continue, done
    sfn.worker.reset(lambda p: turn(p, "continue" if p["iteration"] < 2 else "done"))
    response_id = new_response_id()

    # WHEN the response's execution runs
    described = run(sfn, start_state(response_id))

    # THEN it succeeds after exactly three turns, each invoked with the ids only
    assert described["status"] == "SUCCEEDED"
    expected = [start_state(response_id, iteration=i) for i in range(3)]
    assert sfn.worker.payloads() == expected
    assert {function for function, _ in sfn.worker.calls} == {WORKER_ARN}
    events = history(sfn, described["executionArn"])
    assert scheduled_payloads(events) == expected
    assert entered_states(events) == ["RunWorker", "Decide"] * 3 + ["Done"]
    assert json.loads(described["output"]) == {
        **start_state(response_id, iteration=3),
        "status": "done",
    }
    assert sfn.clock.waits == []


def test_a_cancelled_response_ends_the_loop_at_the_workers_next_answer(sfn: Interpreter) -> None:
    # GIVEN a response cancelled during its second turn: the worker stops at the action
    # boundary and answers done
    sfn.worker.reset(lambda p: turn(p, "continue" if p["iteration"] == 0 else "done"))
    response_id = new_response_id()

    described = run(sfn, start_state(response_id))

    # THEN the execution succeeds without the watchdog
    assert described["status"] == "SUCCEEDED"
    assert [p["iteration"] for p in sfn.worker.payloads()] == [0, 1]
    assert "MarkFailed" not in entered_states(history(sfn, described["executionArn"]))


def test_a_crashed_turn_is_invoked_again_with_the_same_ids(sfn: Interpreter) -> None:
    # GIVEN a worker whose first invocation crashes (it resumes from its checkpoint)
    answers = iter([Crash("Sandbox.Timedout", "Task timed out after 900.00 seconds")])
    sfn.worker.reset(lambda p: next(answers, None) or turn(p, "done"))
    response_id = new_response_id()

    described = run(sfn, start_state(response_id))

    assert described["status"] == "SUCCEEDED"
    assert sfn.worker.payloads() == [start_state(response_id)] * 2
    assert sfn.clock.waits == [5]


def test_lambda_service_errors_are_retried_with_jittered_backoff(sfn: Interpreter) -> None:
    # GIVEN the Lambda service failing four times (throttling, outages), then the worker answering
    answers = iter(
        [
            ServiceError("TooManyRequestsException"),
            ServiceError("ServiceException"),
            ServiceError("TooManyRequestsException"),
            ServiceError("ServiceException"),
        ]
    )
    sfn.worker.reset(lambda p: next(answers, None) or turn(p, "done"))
    response_id = new_response_id()

    described = run(sfn, start_state(response_id))

    # THEN every error was retried (none counted as a crash), waiting a random part of
    # 2, 4, 8 and 16 seconds
    assert described["status"] == "SUCCEEDED"
    assert sfn.worker.payloads() == [start_state(response_id)] * 5
    assert len(sfn.clock.waits) == 4
    for waited, ceiling in zip(sfn.clock.waits, [2, 4, 8, 16], strict=True):
        assert 0 <= waited <= ceiling


def test_a_turn_that_keeps_crashing_goes_to_the_watchdog(sfn: Interpreter) -> None:
    # GIVEN a worker that crashes on every turn, and answers the watchdog
    def script(payload: dict[str, Any]) -> Answer:
        if payload.get("mode") == "fail":
            return fail_mode_done(payload)
        return Crash("KeyError", "'tool_calls'")

    sfn.worker.reset(script)
    response_id = new_response_id()

    described = run(sfn, start_state(response_id, iteration=4))

    # THEN three attempts (two retries, after 5 and 10 s), then MarkFailed with the ids and the
    # error, and the execution fails with that error as its cause
    payloads = sfn.worker.payloads()
    assert payloads[:3] == [start_state(response_id, iteration=4)] * 3
    (watchdog,) = payloads[3:]
    error = {"Error": "KeyError", "Cause": watchdog["error"]["Cause"]}
    assert json.loads(error["Cause"]) == {"errorType": "KeyError", "errorMessage": "'tool_calls'"}
    assert watchdog == {
        "tenant": TENANT,
        "response_id": response_id,
        "generation": 0,
        "mode": "fail",
        "error": error,
    }
    assert sfn.clock.waits == [5, 10]
    assert described["status"] == "FAILED"
    assert described["error"] == "Background.Failed"
    assert json.loads(described["cause"]) == error
    events = history(sfn, described["executionArn"])
    assert entered_states(events) == ["RunWorker", "MarkFailed", "Failed"]


def test_an_answer_neither_continue_nor_done_goes_to_the_watchdog(sfn: Interpreter) -> None:
    def script(payload: dict[str, Any]) -> Answer:
        return fail_mode_done(payload) if "mode" in payload else turn(payload, "paused")

    sfn.worker.reset(script)
    response_id = new_response_id()

    described = run(sfn, start_state(response_id))

    assert described["status"] == "FAILED"
    watchdog = sfn.worker.payloads()[-1]
    assert watchdog["mode"] == "fail"
    assert watchdog["error"]["Error"] == "Worker.UnexpectedResult"
    assert (watchdog["tenant"], watchdog["response_id"]) == (TENANT, response_id)
    events = history(sfn, described["executionArn"])
    assert entered_states(events) == [
        "RunWorker",
        "Decide",
        "UnexpectedResult",
        "MarkFailed",
        "Failed",
    ]


# -- hand-over to a fresh execution --------------------------------------------------------------


def test_the_threshold_keeps_every_execution_under_the_history_limit(sfn: Interpreter) -> None:
    # A turn is TaskStateEntered + 3 events per attempt + TaskStateExited + the Choice's 2 events.
    definition = sfn.definition
    retriers = definition["States"]["RunWorker"]["Retry"]
    attempts = 1 + sum(retrier["MaxAttempts"] for retrier in retriers)
    threshold = iteration_threshold(definition)
    assert threshold == 800
    assert threshold * (4 + 3 * 1) == 5_600  # every first attempt succeeds
    assert threshold * (4 + 3 * attempts) + 10 < HISTORY_LIMIT  # every retry used on every turn
    assert definition["States"]["RunWorker"]["TimeoutSeconds"] == 900 + 60


def test_at_the_threshold_the_loop_continues_in_a_fresh_execution(sfn: Interpreter) -> None:
    threshold = iteration_threshold(sfn.definition)
    sfn.worker.reset(
        lambda p: turn(p, "continue" if p["generation"] == 0 else "done"),
    )
    response_id = new_response_id()

    # WHEN the turn before the threshold answers continue (iteration becomes the threshold)
    described = run(sfn, start_state(response_id, iteration=threshold - 2))

    # THEN one more turn runs below it, then the execution hands over and succeeds
    assert described["status"] == "SUCCEEDED"
    events = history(sfn, described["executionArn"])
    assert entered_states(events) == ["RunWorker", "Decide"] * 2 + ["HandOver", "HandedOver"]
    next_name = execution_name(response_id, 1)
    assert next_name == f"{response_id}-g1"
    next_arn = execution_arn(sfn.machine_arn, next_name)
    assert json.loads(described["output"])["handed_over_to"] == {"execution_arn": next_arn}

    # AND the fresh execution has generation 1 and iteration 0, and runs the loop on
    following = wait_until_ended(sfn, next_arn)
    assert following["name"] == next_name
    assert json.loads(following["input"]) == json.loads(execution_input(TENANT, response_id, 1))
    assert following["status"] == "SUCCEEDED"
    assert sfn.worker.payloads() == [
        start_state(response_id, iteration=threshold - 2),
        start_state(response_id, iteration=threshold - 1),
        start_state(response_id, generation=1, iteration=0),
    ]
    names = {
        e["name"] for e in sfn.client.list_executions(stateMachineArn=sfn.machine_arn)["executions"]
    }
    assert {response_id, next_name} <= names
    assert not {n for n in names if n.startswith(response_id)} - {response_id, next_name}


def test_a_hand_over_that_already_happened_is_done(sfn: Interpreter) -> None:
    # GIVEN generation 1 of the response already ran to its end (a retried hand-over)
    sfn.worker.reset(lambda p: turn(p, "done"))
    response_id = new_response_id()
    assert run(sfn, start_state(response_id, generation=1))["status"] == "SUCCEEDED"
    threshold = iteration_threshold(sfn.definition)
    sfn.worker.reset(lambda p: turn(p, "continue"))

    # WHEN generation 0 reaches the threshold
    described = run(sfn, start_state(response_id, iteration=threshold - 1))

    # THEN StartExecution's ExecutionAlreadyExists is not retried and ends the execution well
    assert described["status"] == "SUCCEEDED"
    events = history(sfn, described["executionArn"])
    assert entered_states(events) == ["RunWorker", "Decide", "HandOver", "HandedOver"]
    failed = [e["taskFailedEventDetails"]["error"] for e in events if e["type"] == "TaskFailed"]
    assert failed == ["StepFunctions.ExecutionAlreadyExistsException"]
    assert sfn.worker.payloads() == [start_state(response_id, iteration=threshold - 1)]


# -- StepFunctionsLauncher ----------------------------------------------------------------------


async def test_launcher_starts_once_and_stops_the_execution(sfn: Interpreter) -> None:
    # GIVEN a worker whose first turn runs until the test releases it
    sfn.worker.reset(lambda p: turn(p, "done"))
    sfn.worker.block_first_call = True
    launcher = StepFunctionsLauncher(sfn.client, sfn.machine_arn)
    response_id = new_response_id()
    arn = execution_arn(sfn.machine_arn, response_id)
    try:
        # WHEN the response is started twice
        await launcher.start(TENANT, response_id)
        assert sfn.worker.blocked.wait(timeout=10)
        await launcher.start(TENANT, response_id)

        # THEN one execution, named after the response, runs the worker with the ids
        described = sfn.client.describe_execution(executionArn=arn)
        assert described["status"] == "RUNNING"
        assert described["name"] == response_id
        assert described["input"] == execution_input(TENANT, response_id)
        assert json.loads(described["input"]) == start_state(response_id)
        assert sfn.worker.payloads() == [start_state(response_id)]

        # WHEN it is stopped (cancel)
        await launcher.stop(TENANT, response_id)
    finally:
        sfn.worker.unblock.set()

    # THEN it is aborted; stopping again, or starting the ended execution again, is fine
    assert wait_until_ended(sfn, arn)["status"] == "ABORTED"
    await launcher.stop(TENANT, response_id)
    await launcher.start(TENANT, response_id)
    executions = sfn.client.list_executions(stateMachineArn=sfn.machine_arn)["executions"]
    assert [e["name"] for e in executions].count(response_id) == 1


async def test_launcher_names_later_generations_and_ignores_unknown_stops(
    sfn: Interpreter,
) -> None:
    sfn.worker.reset(lambda p: turn(p, "done"))
    launcher = StepFunctionsLauncher(sfn.client, sfn.machine_arn)
    response_id = new_response_id()

    await launcher.stop(TENANT, response_id, generation=3)  # never started: nothing to stop
    await launcher.start(TENANT, response_id, generation=2)

    described = wait_until_ended(sfn, execution_arn(sfn.machine_arn, f"{response_id}-g2"))
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["input"]) == start_state(response_id, generation=2)


async def test_launcher_raises_other_errors(sfn: Interpreter) -> None:
    missing = sfn.machine_arn.replace(":stateMachine:", ":stateMachine:missing-")
    launcher = StepFunctionsLauncher(sfn.client, missing)
    with pytest.raises(ClientError) as raised:
        await launcher.start(TENANT, new_response_id())
    assert raised.value.response["Error"]["Code"] == "StateMachineDoesNotExist"


def test_execution_arn_is_built_from_the_state_machine_arn() -> None:
    machine = "arn:aws:states:eu-west-1:123456789012:stateMachine:gw-background"
    assert (
        execution_arn(machine, "resp_1-g2")
        == "arn:aws:states:eu-west-1:123456789012:execution:gw-background:resp_1-g2"
    )
    assert execution_arn(f"{machine}:7", "resp_1") == execution_arn(machine, "resp_1")
    for bad in ("", "gw-background", "arn:aws:lambda:eu-west-1:1:function:f"):
        with pytest.raises(ValueError):
            execution_arn(bad, "resp_1")


def test_launcher_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BACKGROUND_STATE_MACHINE_ARN", raising=False)
    assert StepFunctionsLauncher.from_env() is None  # os.environ
    assert StepFunctionsLauncher.from_env({}) is None
    assert StepFunctionsLauncher.from_env({"BACKGROUND_STATE_MACHINE_ARN": " "}) is None
    arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:gw-background"
    launcher = StepFunctionsLauncher.from_env(
        {
            "BACKGROUND_STATE_MACHINE_ARN": arn,
            "STEPFUNCTIONS_ENDPOINT_URL": "http://127.0.0.1:5999",
            "AWS_ACCESS_KEY_ID": "x",
        }
    )
    assert launcher is not None
    assert launcher.state_machine_arn == arn
    client = launcher._client
    assert client.meta.region_name == "eu-west-1"  # type: ignore[attr-defined]
    assert client.meta.endpoint_url == "http://127.0.0.1:5999"  # type: ignore[attr-defined]
    with_region = StepFunctionsLauncher.from_env(
        {"BACKGROUND_STATE_MACHINE_ARN": arn, "AWS_REGION": "us-west-2"}
    )
    assert with_region is not None
    assert with_region._client.meta.region_name == "us-west-2"  # type: ignore[attr-defined]


def test_the_worker_function_serves_the_background_entry(worker_handler: Any) -> None:
    from responses_gateway.background import entry

    assert worker_handler is entry.handle
