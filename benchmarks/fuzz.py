"""Fuzz every operation the gateway serves, as a hostile client would, and report per operation.

Two processes on loopback: this one (the client: schemathesis and hypothesis, generating from the
specs) and a child started from this very file (``--serve``, an internal flag) that runs the
scripted demo upstream and the gateway (SQLite store in a temporary file; every model name the
fuzzer invents goes to the demo upstream over Chat Completions; ``demo-responses`` and
``demo-harmony`` go over the Responses and harmony wires, and a generated body's ``model`` is set
to one of the three names half of the time, so every wire is reached). The child's stderr (the
gateway's logs and tracebacks) is kept in ``--logs``.

Operations come from both specs, vendored for the tests: OpenAI's (trimmed to the gateway's
operations, ``tests/fixtures/openapi/gateway.json``) and Open Responses'
(``tests/fixtures/openresponses/openapi.json``), whose WebSocket mode (``x-openresponses-websocket``
on ``/responses``) is fuzzed too: each generated create body is sent as a ``response.create``
message on one connection. For each operation:

* **fuzzing**: ``--cases`` generated requests (``--negative`` of them in schemathesis' negative
  mode: bodies and parameters that break the schema), with a fixed ``--seed``. Path parameters
  and the ``previous_response_id`` / ``conversation`` of a body take, half of the time, an id the
  gateway handed out earlier in the run (responses, conversations and conversation items), so
  reads and continuations reach stored state;
* **stateful**: schemathesis' state machine over the links it infers between operations
  (create a conversation, add items, list, read and delete them...), ``--stateful`` scenarios;
  its steps are counted under the operation each step called.

Every answer is classified: a **5xx** (over WebSocket: an ``error`` event with status >= 500),
a **non-envelope error** (a 4xx whose body is not exactly OpenAI's
``{"error": {"message", "type", "param", "code"}}``; over WebSocket, an ``error`` event that is
not the spec's ``WebSocketErrorEvent``), a **schema violation** (a 2xx JSON body, or an SSE or
WebSocket event of a 2xx stream, that breaks the spec's schema for it), or a **transport error**
(no answer within ``--timeout`` seconds, or a dropped connection). Where the two specs disagree,
the project's oracle settles it (``responses_gateway.testing.spec_oracle``): an event type OpenAI's
spec defines and Open Responses does not (``response.reasoning_text.delta``,
``response.mcp_call.completed``...), met under the Open Responses spec, is held to OpenAI's schema
for it, and counted apart (``deferred`` in the JSON report); the schema paths the oracle names
as errata of the Open Responses document (``OPEN_RESPONSES_ERRATA``: no value can satisfy them
as published) are held as the oracle holds them. Violations are grouped by
where they are (operation, JSON path with indices removed, item ``type`` when the path goes
through an item) and what broke, and each group is labelled ``input`` (what a client sent and the
gateway stored: conversation items, input items, ids) or ``emitted`` (objects the gateway builds:
Response objects, output items, stream events). The table counts answers: ``schema`` those with
any violation, ``(input)`` those with one on the input side; the list below it counts problems
(one answer may hold several).

Usage::

    python benchmarks/fuzz.py                                # 2,000 cases per operation
    python benchmarks/fuzz.py --cases 200 --only conversations   # a quick look at some operations
    python benchmarks/fuzz.py --tree /tmp/before --json before.json   # another checkout's gateway

It reports, it does not assert (the exit status is 0 whatever the figures; 1 only when the
gateway does not start). ``tests/reliability/test_fuzz_api.py`` runs a small fixed slice in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import selectors
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SPECS = {
    "openai": ROOT / "tests" / "fixtures" / "openapi" / "gateway.json",
    "openresponses": ROOT / "tests" / "fixtures" / "openresponses" / "openapi.json",
}
SEED = 29
DEFAULT_CASES = 2000
DEFAULT_NEGATIVE = 600
DEFAULT_STATEFUL = 300
STATEFUL_STEPS = 8
WIRE_MODELS = ("demo", "demo-responses", "demo-harmony")
"""Model names the child routes to the chat, Responses and harmony wires of the demo upstream."""
SIMPLE_INPUTS: tuple[Any, ...] = (
    "Hello",
    "Think about the weather in Paris",
    [{"role": "user", "content": "Hi"}],
    [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
)
"""Inputs given to a generated create that has none (the specs make ``input`` optional)."""
TERMINAL_EVENTS = frozenset({"response.completed", "response.failed", "response.incomplete"})
ENVELOPE_KEYS = frozenset({"message", "type", "param", "code"})
INPUT_SIDE_OPERATIONS = re.compile(r"/conversations|/input_items|/input_tokens")
"""Operations whose 2xx bodies show what clients sent (stored input), not what the gateway built."""


# --------------------------------------------------------------------------- the child server


def _serve(db_path: str) -> int:
    """Run the demo upstream and the gateway until stdin closes (the child's whole job)."""
    import responses_gateway
    from responses_gateway.app import create_app
    from responses_gateway.config import parse_config
    from responses_gateway.store.sqlite import SqliteStore
    from responses_gateway.testing.fake_upstream import create_fake_upstream_app
    from responses_gateway.testing.script import ScriptedUpstream
    from responses_gateway.testing.server import run_in_thread

    print(f"serving responses_gateway from {responses_gateway.__file__}", file=sys.stderr)
    upstream = ScriptedUpstream(demo=True)
    with run_in_thread(create_fake_upstream_app(upstream)) as up:
        base = f"{up.url}/v1"
        config = parse_config(
            {
                "operators": ["local"],
                "providers": [
                    {"name": "chat", "base_url": base, "api": "chat", "default": True},
                    {
                        "name": "responses",
                        "base_url": base,
                        "api": "responses",
                        "models": ["demo-responses"],
                    },
                    {
                        "name": "harmony",
                        "base_url": base,
                        "api": "harmony",
                        "models": ["demo-harmony"],
                    },
                ],
            }
        )
        store = SqliteStore(db_path)
        with run_in_thread(create_app(config, store)) as gateway:
            print(f"READY {gateway.url}", flush=True)
            for _ in sys.stdin:  # until the parent closes it
                upstream.reset()  # the parent asks between operations: recordings stay small
    store.close()
    return 0


@contextlib.contextmanager
def _child(tree: Path, logs: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "shared"), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as tmp, logs.open("w") as log:
        child = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", f"{tmp}/gateway.db"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            cwd=tmp,
        )
        assert child.stdout is not None and child.stdin is not None
        selector = selectors.DefaultSelector()
        selector.register(child.stdout, selectors.EVENT_READ)
        line = child.stdout.readline() if selector.select(timeout=120) else ""
        if not line.startswith("READY "):
            child.kill()
            raise SystemExit(f"the gateway did not start (see {logs})")

        def reset() -> None:
            child.stdin.write("reset\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]

        try:
            yield line.split()[1], reset
        finally:
            child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()


# --------------------------------------------------------------------------- the report


@dataclass
class OperationReport:
    """What one operation answered over the run."""

    spec: str
    operation: str
    cases: int = 0
    stateful: int = 0
    """Of ``cases``, how many were steps of stateful scenarios."""
    server_errors: int = 0
    schema_violations: int = 0
    """Answers (or WebSocket exchanges) holding at least one schema violation."""
    input_side: int = 0
    """Of those, the answers with a violation on the input side (stored input)."""
    non_envelope: int = 0
    transport_errors: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    """Error answers by ``status code param`` (how deep the cases got)."""
    violations: Counter[str] = field(default_factory=Counter)
    """Schema violations grouped (``side | where | what``)."""
    examples: dict[str, list[str]] = field(default_factory=dict)
    """A few requests (as curl commands) and answers per kind of problem."""

    def example(self, kind: str, text: str, keep: int = 3) -> None:
        found = self.examples.setdefault(kind, [])
        if len(found) < keep:
            found.append(text[:1500])

    def as_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "operation": self.operation,
            "cases": self.cases,
            "stateful": self.stateful,
            "5xx": self.server_errors,
            "schema_violations": self.schema_violations,
            "input_side_answers": self.input_side,
            "non_envelope": self.non_envelope,
            "transport_errors": self.transport_errors,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "errors": dict(self.errors.most_common(40)),
            "violations": dict(self.violations.most_common()),
            "examples": self.examples,
        }


def report_table(reports: list[OperationReport]) -> str:
    rows = [
        f"{'spec':<14}{'operation':<52}{'cases':>7}{'stateful':>9}{'5xx':>6}"
        f"{'schema':>8}{'(input)':>8}{'envelope':>9}{'transport':>10}"
    ]
    total = OperationReport("", "total")
    for r in reports:
        rows.append(
            f"{r.spec:<14}{r.operation:<52}{r.cases:>7}{r.stateful:>9}{r.server_errors:>6}"
            f"{r.schema_violations:>8}{r.input_side:>8}{r.non_envelope:>9}{r.transport_errors:>10}"
        )
        total.input_side += r.input_side
        total.cases += r.cases
        total.stateful += r.stateful
        total.server_errors += r.server_errors
        total.schema_violations += r.schema_violations
        total.non_envelope += r.non_envelope
        total.transport_errors += r.transport_errors
    rows.append(
        f"{'':<14}{'total':<52}{total.cases:>7}{total.stateful:>9}{total.server_errors:>6}"
        f"{total.schema_violations:>8}{total.input_side:>8}{total.non_envelope:>9}"
        f"{total.transport_errors:>10}"
    )
    return "\n".join(rows)


def violation_table(reports: list[OperationReport], limit: int = 60) -> str:
    merged: Counter[str] = Counter()
    for r in reports:
        for key, n in r.violations.items():
            merged[f"{r.spec} {r.operation} | {key}"] += n
    return "\n".join(f"{n:>7}  {key}" for key, n in merged.most_common(limit))


# --------------------------------------------------------------------------- classification


def is_envelope(body: Any) -> bool:
    """Whether ``body`` is exactly an OpenAI error envelope."""
    if not isinstance(body, dict) or set(body) != {"error"}:
        return False
    error = body["error"]
    return (
        isinstance(error, dict)
        and set(error) == ENVELOPE_KEYS
        and isinstance(error["message"], str)
        and bool(error["message"])
        and isinstance(error["type"], str)
        and (error["param"] is None or isinstance(error["param"], str))
        and (error["code"] is None or isinstance(error["code"], str))
    )


_INDEX = re.compile(r"/\d+(?=/|$)")


def _typed_path(instance: Any, path: list[Any]) -> str:
    """``/output/[]/content`` with the ``type`` of each object the path goes through that has one
    (``/output/[shell_call]/action``), so a violation names the item kind."""
    out: list[str] = []
    node = instance
    for segment in path:
        if isinstance(node, list) and isinstance(segment, int) and segment < len(node):
            node = node[segment]
            kind = node.get("type") if isinstance(node, dict) else None
            out.append(f"[{kind}]" if isinstance(kind, str) else "[]")
        elif isinstance(node, dict) and segment in node:
            node = node[segment]
            out.append(str(segment))
        else:
            out.append(str(segment))
            node = None
    return "/" + "/".join(out)


class Oracle:
    """JSON Schema validators for a spec's components, built once per schema."""

    def __init__(
        self, spec: dict[str, Any], deferred: dict[str, tuple[Oracle, dict[str, Any]]] | None = None
    ) -> None:
        self.spec = spec
        self._validators: dict[str, Any] = {}
        self.deferred = deferred or {}
        """Event type -> the other spec's oracle and schema for it: the types this spec leaves
        to providers (see the module docstring)."""
        self.deferred_seen: Counter[str] = Counter()
        self.view: Callable[[Any], Any] = lambda value: value
        """What an answer is checked as: the Open Responses errata applied (see
        :func:`_errata_view`), or the answer itself."""

    def answer_problems(self, schema: dict[str, Any], answer: Any) -> list[str]:
        """A 2xx body's problems, after the errata this spec's oracle names (see
        :func:`_errata_view`)."""
        return self.problems(schema, self.view(answer))

    def event_problems(self, schema: dict[str, Any], event: Any) -> list[str]:
        """A stream event's problems: under this spec's event schema, or under the other
        spec's schema for its type when this spec leaves the type to providers."""
        kind = event.get("type") if isinstance(event, dict) else None
        other = self.deferred.get(kind) if isinstance(kind, str) else None
        if other is None:
            return self.problems(schema, self.view(event))
        self.deferred_seen[str(kind)] += 1
        oracle, its_schema = other
        return [f"(held to the other spec) {p}" for p in oracle.problems(its_schema, event)]

    def validator(self, schema: dict[str, Any]) -> Any:
        import jsonschema_rs

        key = json.dumps(schema, sort_keys=True)
        found = self._validators.get(key)
        if found is None:
            document = {**schema, "components": self.spec["components"]}
            found = self._validators[key] = jsonschema_rs.validator_for(document)
        return found

    def component(self, name: str) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{name}"}

    def problems(self, schema: dict[str, Any], instance: Any, depth: int = 0) -> list[str]:
        """Each violation of ``instance`` against ``schema``, as ``where: what`` (deduplicated;
        a ``oneOf``/``anyOf`` failure on an object with a ``type`` is explained by the component
        schemas of that type: the errors of the one it comes closest to)."""
        found: list[str] = []
        for error in self.validator(schema).iter_errors(instance):
            path = list(error.instance_path)
            where = _typed_path(instance, path)
            node = _node(instance, path)
            keyword = str(list(error.schema_path)[-1]) if list(error.schema_path) else "?"
            explained = (
                self._explain(node, depth) if keyword in {"oneOf", "anyOf"} and depth < 3 else []
            )
            if explained:
                found += [f"{where.rstrip('/')}{inner}" for inner in explained]
            else:
                found.append(f"{where}: {self._what(error, keyword, node)}")
        return sorted(set(found))

    def _typed(self, kind: str) -> list[str]:
        """The component schemas whose ``type`` property is ``kind`` (an enum or a const)."""
        if not hasattr(self, "_by_type"):
            by_type: dict[str, list[str]] = {}
            for name, schema in self.spec["components"]["schemas"].items():
                prop = self._property(schema, "type")
                values = prop.get("enum") or ([prop["const"]] if "const" in prop else [])
                for value in values if len(values) == 1 else ():
                    by_type.setdefault(str(value), []).append(name)
            self._by_type = by_type
        return self._by_type.get(kind, [])

    def _property(self, schema: Any, name: str, depth: int = 0) -> dict[str, Any]:
        """``schema``'s property ``name``, looking through ``allOf`` parts and references."""
        if not isinstance(schema, dict) or depth > 4:
            return {}
        if "$ref" in schema:
            return self._property(_resolve(self.spec, schema["$ref"]), name, depth + 1)
        found = (schema.get("properties") or {}).get(name)
        if isinstance(found, dict):
            return self._property(found, "", depth + 1) if not name else found
        for part in schema.get("allOf") or []:
            found = self._property(part, name, depth + 1)
            if found:
                return found
        return {}

    def _explain(self, node: Any, depth: int) -> list[str]:
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            return []
        best: list[str] | None = None
        for name in self._typed(node["type"]):
            errors = self.problems(self.component(name), node, depth + 1)
            if errors and (best is None or len(errors) < len(best)):
                best = errors  # a schema the object fits (an input form) explains nothing
        return best or []

    def _what(self, error: Any, keyword: str, node: Any) -> str:
        message = str(error.message)
        if keyword in {"oneOf", "anyOf"}:
            return f"{keyword}: matches no branch"
        if keyword == "required":
            missing = re.findall(r"""["']([^"']+)["'] is a required property""", message)
            return f"required {missing[0]}" if missing else f"required ({message[:60]})"
        if keyword in {"type", "enum", "const"}:
            return f"{keyword}: {json.dumps(node)[:40]}"
        if keyword == "additionalProperties":
            return "additionalProperties: " + message[message.find("(") :][:80]
        return f"{keyword}: {message[:100]}"


def _node(instance: Any, path: list[Any]) -> Any:
    node = instance
    for segment in path:
        try:
            node = node[segment]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def sse_events(text: str) -> list[Any]:
    """The JSON data of each event of an SSE body (non-JSON data kept as a string)."""
    events: list[Any] = []
    for block in re.split(r"(?:\r\n|\r|\n){2}", text):
        lines = re.split(r"\r\n|\r|\n", block)  # SSE's line ends only (not str.splitlines')
        data = "\n".join(line[5:].removeprefix(" ") for line in lines if line.startswith("data:"))
        if not data or data == "[DONE]":
            continue
        try:
            events.append(json.loads(data))
        except ValueError:
            events.append(data)
    return events


def side_of(operation: str, where: str) -> str:
    """``input`` for what clients sent and the gateway stored, ``emitted`` for what it built."""
    if INPUT_SIDE_OPERATIONS.search(operation):
        return "input"
    return "emitted"


# --------------------------------------------------------------------------- the fuzzer


def _url_safe(ident: Any) -> bool:
    return isinstance(ident, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", ident) is not None


class IdPool:
    """Ids the gateway handed out during the run, offered back in later requests."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.responses: list[str] = []
        self.conversations: list[str] = []
        self.items: list[tuple[str, str]] = []

    def harvest(self, body: Any, path_parameters: dict[str, Any]) -> None:
        """Keep the ids of an answer (only URL-safe ones: an id a client chose may hold ``#``
        or ``/``, which would make another URL of it)."""
        if not isinstance(body, dict):
            return
        kind, ident = body.get("object"), body.get("id")
        if _url_safe(ident):
            if kind == "response" and ident not in self.responses[-200:]:
                self.responses.append(ident)
            elif kind == "conversation" and ident not in self.conversations[-200:]:
                self.conversations.append(ident)
        conversation = path_parameters.get("conversation_id")
        if kind == "list" and isinstance(conversation, str):
            for item in body.get("data") or []:
                if isinstance(item, dict) and _url_safe(item.get("id")):
                    self.items.append((conversation, item["id"]))
        del self.responses[:-500], self.conversations[:-500], self.items[:-500]

    def enrich(self, case: Any) -> None:
        """Half of the time, swap generated ids for real ones (in place)."""
        params = case.path_parameters if isinstance(case.path_parameters, dict) else {}
        coin = self.rng.random() < 0.5
        if "item_id" in params and self.items and coin:
            params["conversation_id"], params["item_id"] = self.rng.choice(self.items)
        elif "conversation_id" in params and self.conversations and coin:
            params["conversation_id"] = self.rng.choice(self.conversations)
        elif "response_id" in params and self.responses and coin:
            params["response_id"] = self.rng.choice(self.responses)
        body = case.body
        if isinstance(body, dict):
            if self.rng.random() < 0.75:  # also when the spec leaves it out (OpenAI's does)
                body["model"] = self.rng.choice(WIRE_MODELS)
            if "input" not in body and "model" in body and self.rng.random() < 0.5:
                body["input"] = self.rng.choice(SIMPLE_INPUTS)  # optional, but needed to run
            if "previous_response_id" in body and self.responses and self.rng.random() < 0.5:
                body["previous_response_id"] = self.rng.choice(self.responses)
                body.pop("conversation", None)
            if "conversation" in body and self.conversations and self.rng.random() < 0.5:
                body["conversation"] = self.rng.choice(self.conversations)
                body.pop("previous_response_id", None)


class Fuzzer:
    """Sends cases to the gateway and classifies its answers into :class:`OperationReport` s."""

    def __init__(self, base_url: str, timeout: float, seed: int) -> None:
        import requests

        self.base_url = base_url
        self.timeout = timeout
        self.session = requests.Session()
        self.pool = IdPool(random.Random(seed))
        self.reports: dict[tuple[str, str], OperationReport] = {}
        self.show_errors = False
        """Keep an example of every kind of error answer (``--show-errors``)."""

    def report(self, spec: str, operation: str) -> OperationReport:
        key = (spec, operation)
        if key not in self.reports:
            self.reports[key] = OperationReport(spec, operation)
        return self.reports[key]

    def send(self, spec: str, oracle: Oracle, case: Any, *, stateful: bool = False) -> Any:
        """Send one case, classify its answer; the answer (None on a transport error)."""
        report = self.report(spec, case.operation.label)
        report.cases += 1
        report.stateful += stateful
        try:
            response = case.call(
                base_url=f"{self.base_url}/v1", session=self.session, timeout=self.timeout
            )
        except Exception as exc:  # no answer: a hang or a dropped connection
            report.transport_errors += 1
            report.example("transport", f"{type(exc).__name__}: {exc}\n{case.as_curl_command()}")
            return None
        self.classify(report, oracle, case, response)
        return response

    def classify(self, report: OperationReport, oracle: Oracle, case: Any, response: Any) -> None:
        status = response.status_code
        report.statuses[status] += 1
        text = response.content.decode("utf-8", "replace") if response.content else ""
        if status >= 500:
            report.server_errors += 1
            report.example(f"5xx {status}", f"{case.as_curl_command()}\n-> {text[:600]}")
            return
        content_type = response.headers.get("content-type", [""])
        content_type = content_type[0] if isinstance(content_type, list) else content_type
        if status >= 400:
            try:
                body = json.loads(text)
            except ValueError:
                body = None
            if is_envelope(body):
                error = body["error"]
                kind = f"{status} {error['code']} {error['param']}"
                report.errors[kind] += 1
                if self.show_errors:
                    report.example(f"error {kind}", f"{case.as_curl_command()}\n-> {text}", 1)
            else:
                report.non_envelope += 1
                report.example("non-envelope", f"{case.as_curl_command()}\n-> {status} {text}")
            return
        if status >= 300:
            return
        schema = self._answer_schema(oracle, case, status, content_type)
        if schema is None:
            return
        if content_type.startswith("text/event-stream"):
            problems = []
            for event in sse_events(text):
                problems += [
                    f"event {_event_type(event)} {p}" for p in oracle.event_problems(schema, event)
                ]
        else:
            try:
                body = json.loads(text)
            except ValueError:
                body = text
            problems = oracle.answer_problems(schema, body)
            if body is not None:
                self.pool.harvest(body, dict(case.path_parameters or {}))
        self._count(report, case, problems, text)

    def _count(self, report: OperationReport, case: Any, problems: list[str], text: str) -> None:
        if not problems:
            return
        report.schema_violations += 1
        sides = {side_of(report.operation, problem) for problem in problems}
        report.input_side += "input" in sides
        for problem in problems:
            report.violations[f"{side_of(report.operation, problem)} | {problem}"] += 1
        report.example(
            "schema " + problems[0][:80], f"{case.as_curl_command()}\n-> {text[:800]}", keep=1
        )

    def _answer_schema(
        self, oracle: Oracle, case: Any, status: int, content_type: str
    ) -> dict[str, Any] | None:
        responses = case.operation.definition.raw.get("responses", {})
        answer = responses.get(str(status)) or responses.get("2XX") or responses.get("default")
        if not isinstance(answer, dict):
            return None
        if "$ref" in answer:
            answer = _resolve(oracle.spec, answer["$ref"])
        media = content_type.split(";")[0].strip() or "application/json"
        declared = answer.get("content", {})
        entry = declared.get(media)
        if entry is None:
            return None
        schema = entry.get("schema")
        return schema if isinstance(schema, dict) else None


def _event_type(event: Any) -> str:
    return str(event.get("type")) if isinstance(event, dict) else "?"


def _resolve(spec: dict[str, Any], ref: str) -> Any:
    node: Any = spec
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def _settings(examples: int) -> Any:
    from hypothesis import HealthCheck, Phase, settings

    return settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],  # never shrink: nothing ever fails
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        stateful_step_count=STATEFUL_STEPS,
    )


GENERATION_ATTEMPTS = 4
"""Runs (each with the next seed) that may fill an operation's count when schemathesis stops
generating (its generator gives up on some schema corners, at random points of a run)."""


def _generate(strategy: Any, count: int, seed: int, send: Callable[[Any], None]) -> int:
    """Feed up to ``count`` cases of ``strategy`` to ``send`` (seeded); how many were sent.
    A strategy that cannot produce a case (a negative mode with nothing to break) sends 0; one
    whose generator fails mid-run is run again with the next seed, at most
    :data:`GENERATION_ATTEMPTS` times in all (the failures are printed)."""
    import hypothesis
    from hypothesis.errors import Unsatisfiable

    sent = {"n": 0}
    for attempt in range(GENERATION_ATTEMPTS):
        if sent["n"] >= count:
            break

        @hypothesis.seed(seed + attempt)
        @_settings(count - sent["n"])
        @hypothesis.given(case=strategy)
        def run(case: Any) -> None:
            if sent["n"] < count:
                sent["n"] += 1
                send(case)

        try:
            run()
            break
        except Unsatisfiable:
            break
        except Exception as exc:  # schemathesis could not generate further: try another seed
            print(f"  generation stopped after {sent['n']} cases: {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:160]}", flush=True)  # fmt: skip
    return sent["n"]


def _as_json(case: Any) -> None:
    """Send a valid case as JSON when its operation also takes JSON: the form encoding Open
    Responses lists as well turns every nested value into a string, so no such case would get
    past the body parser (negative cases keep every declared media type)."""
    body = case.operation.definition.raw.get("requestBody")
    content = body.get("content", {}) if isinstance(body, dict) else {}
    if "application/json" in content:
        case.media_type = "application/json"


def fuzz_operation(
    fuzzer: Fuzzer, spec: str, oracle: Oracle, operation: Any, cases: int, negative: int, seed: int
) -> None:
    """``cases`` generated requests for ``operation``: up to ``negative`` of them
    schema-breaking, the rest valid."""
    from schemathesis import GenerationMode

    def send(case: Any) -> None:
        fuzzer.pool.enrich(case)
        fuzzer.send(spec, oracle, case)

    def send_valid(case: Any) -> None:
        _as_json(case)
        send(case)

    negative_cases = operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)
    done = _generate(negative_cases, negative, seed, send)
    positive_cases = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
    _generate(positive_cases, cases - done, seed, send_valid)


def fuzz_stateful(
    fuzzer: Fuzzer, spec: str, oracle: Oracle, schema: Any, scenarios: int, seed: int
) -> None:
    """Schemathesis' state machine over the spec's inferred links; every step classified."""
    from hypothesis.stateful import run_state_machine_as_test
    from schemathesis.core.errors import NoLinksFound

    base = schema.as_state_machine()

    class Machine(base):  # type: ignore[misc,valid-type]
        def call(self, case: Any, **kwargs: Any) -> Any:
            response = fuzzer.send(spec, oracle, case, stateful=True)
            if response is None:
                raise _Dropped
            return response

        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            return None  # classified in call()

    Machine._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    # NoLinksFound: nothing links the spec's operations (Open Responses: two independent ones)
    with contextlib.suppress(_Dropped, NoLinksFound):
        run_state_machine_as_test(Machine, settings=_settings(scenarios))


class _Dropped(Exception):
    """A stateful step got no answer (counted already); the scenario ends."""


def fuzz_websocket(
    fuzzer: Fuzzer, oracle: Oracle, operation: Any, cases: int, negative: int, seed: int
) -> None:
    """Open Responses' WebSocket mode: each generated create body as a ``response.create``
    message; events read until the response ends or an ``error`` event."""
    from schemathesis import GenerationMode
    from websockets.sync.client import connect

    label = "WEBSOCKET /responses"
    report = fuzzer.report("openresponses", label)
    url = fuzzer.base_url.replace("http://", "ws://") + "/v1/responses"
    event_schema = operation.definition.raw["responses"]["200"]["content"]["text/event-stream"][
        "schema"
    ]
    error_schema = oracle.component("WebSocketErrorEvent")
    holder: dict[str, Any] = {"socket": None}

    def socket() -> Any:
        if holder["socket"] is None:
            holder["socket"] = connect(url, open_timeout=fuzzer.timeout, max_size=None)
        return holder["socket"]

    def exchange(message: str) -> list[Any]:
        ws = socket()
        ws.send(message)
        events: list[Any] = []
        while True:
            event = json.loads(ws.recv(timeout=fuzzer.timeout))
            events.append(event)
            kind = event.get("type") if isinstance(event, dict) else None
            if kind in TERMINAL_EVENTS or kind == "error":
                return events

    def send(case: Any, positive: bool) -> None:
        fuzzer.pool.enrich(case)
        if positive:
            _as_json(case)
        body = case.body
        if isinstance(body, dict):
            body = {"type": "response.create", **body}
            if positive:
                for name in ("stream", "stream_options", "background"):
                    body.pop(name, None)  # the spec forbids them on this transport
        message = _message(body)
        report.cases += 1
        try:
            events = exchange(message)
        except Exception as exc:
            report.transport_errors += 1
            report.example("transport", f"{type(exc).__name__}: {exc}\n{message[:800]}")
            with contextlib.suppress(Exception):
                holder["socket"].close()
            holder["socket"] = None
            return
        problems: list[str] = []
        for event in events:
            if isinstance(event, dict) and event.get("type") == "error":
                status = event.get("status")
                report.statuses[status if isinstance(status, int) else 0] += 1
                if isinstance(status, int) and status >= 500:
                    report.server_errors += 1
                    report.example(f"5xx {status}", f"{message[:800]}\n-> {json.dumps(event)}")
                elif oracle.problems(error_schema, event) or not is_envelope(
                    {"error": event.get("error")}
                ):
                    report.non_envelope += 1
                    report.example("non-envelope", f"{message[:800]}\n-> {json.dumps(event)}")
                continue
            problems += [
                f"event {_event_type(event)} {p}"
                for p in oracle.event_problems(event_schema, event)
            ]
        if events and events[-1].get("type") in TERMINAL_EVENTS:
            report.statuses[200] += 1
            final = events[-1].get("response")
            if isinstance(final, dict):
                fuzzer.pool.harvest(final, {})
        fuzzer._count(report, _Described(message), problems, json.dumps(events[-1])[:800])

    done = _generate(
        operation.as_strategy(generation_mode=GenerationMode.NEGATIVE),
        negative,
        seed,
        lambda case: send(case, False),
    )
    _generate(
        operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        cases - done,
        seed,
        lambda case: send(case, True),
    )
    if holder["socket"] is not None:
        holder["socket"].close()


def _message(body: Any) -> str:
    """A generated body as one WebSocket text message (a negative body may not be JSON)."""
    if isinstance(body, bytes):
        return body.decode("utf-8", "replace")
    try:
        return json.dumps(body)
    except (TypeError, ValueError):
        return "null"  # no body at all


@dataclass
class _Described:
    """A WebSocket case, shown in examples as the message sent."""

    message: str

    def as_curl_command(self) -> str:
        return f"websocket send: {self.message[:800]}"


# --------------------------------------------------------------------------- main


def _operations(schema: Any, only: str | None) -> list[Any]:
    found = [result.ok() for result in schema.get_all_operations()]
    return [op for op in found if only is None or re.search(only, op.label)]


def run(args: argparse.Namespace) -> tuple[list[OperationReport], dict[str, int]]:
    """Every operation's report, and the events held to OpenAI's schema under Open Responses
    (by type)."""
    import schemathesis

    logs = Path(args.logs)
    with _child(Path(args.tree).resolve(), logs) as (url, reset_upstream):
        fuzzer = Fuzzer(url, args.timeout, args.seed)
        fuzzer.show_errors = args.show_errors
        oracles: dict[str, Oracle] = {}
        for spec_name, path in SPECS.items():
            spec = json.loads(path.read_text())
            deferred = _deferred_events(oracles["openai"]) if spec_name == "openresponses" else None
            oracle = oracles[spec_name] = Oracle(spec, deferred)
            if spec_name == "openresponses":
                oracle.view = _errata_view
            schema = schemathesis.openapi.from_dict(spec)
            operations = _operations(schema, args.only)
            for operation in operations:
                reset_upstream()
                started = time.monotonic()
                fuzz_operation(
                    fuzzer, spec_name, oracle, operation, args.cases, args.negative, args.seed
                )
                r = fuzzer.report(spec_name, operation.label)
                print(
                    f"{spec_name:<14}{operation.label:<52}{r.cases:>6} cases "
                    f"{time.monotonic() - started:6.0f} s",
                    flush=True,
                )
            if args.stateful and operations:
                started = time.monotonic()
                fuzz_stateful(fuzzer, spec_name, oracle, schema, args.stateful, args.seed)
                print(f"{spec_name:<14}{'stateful':<52}{time.monotonic() - started:13.0f} s")
            if spec_name == "openresponses" and args.websocket:
                creates = [op for op in operations if op.label == "POST /responses"]
                for operation in creates:
                    started = time.monotonic()
                    fuzz_websocket(fuzzer, oracle, operation, args.cases, args.negative, args.seed)
                    print(
                        f"{spec_name:<14}{'WEBSOCKET /responses':<52}"
                        f"{time.monotonic() - started:13.0f} s"
                    )
        held = oracles.get("openresponses")
        deferred = dict(held.deferred_seen) if held is not None else {}
    return sorted(fuzzer.reports.values(), key=lambda r: (r.spec, r.operation)), deferred


def _errata_view(value: Any) -> Any:
    """``value`` (a Response object, or an event or message carrying one) as the project's
    oracle holds it to the Open Responses document
    (:func:`responses_gateway.testing.spec_oracle.errata_view`: the paths of
    ``OPEN_RESPONSES_ERRATA`` that no value can satisfy as published)."""
    from responses_gateway.testing.spec_oracle import errata_view

    if not isinstance(value, dict):
        return value
    if isinstance(value.get("response"), dict):
        return {**value, "response": errata_view(value["response"])}
    return errata_view(value)


def _deferred_events(openai: Oracle) -> dict[str, tuple[Oracle, dict[str, Any]]]:
    """The event types Open Responses leaves to providers, each with OpenAI's schema for it:
    the project's oracle's table (``SpecOracle.extension_types``), never typed here."""
    from responses_gateway.testing.spec_oracle import SpecOracle

    both = SpecOracle.load(ROOT / "tests" / "fixtures")
    members = both.openai.members(both.openai.schemas["ResponseStreamEvent"])
    return {
        kind: (openai, openai.component(members[kind]))
        for kind in sorted(both.extension_types()["events"])
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=DEFAULT_CASES, help="generated per operation")
    parser.add_argument("--negative", type=int, default=DEFAULT_NEGATIVE, help="of them negative")
    parser.add_argument("--stateful", type=int, default=DEFAULT_STATEFUL, help="scenarios per spec")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per answer")
    parser.add_argument("--only", help="a regex on operation labels (e.g. 'conversations')")
    parser.add_argument("--show-errors", action="store_true", help="an example per error kind")
    parser.add_argument("--no-websocket", dest="websocket", action="store_false")
    parser.add_argument("--tree", default=str(ROOT), help="the checkout whose gateway to run")
    parser.add_argument("--json", help="write the whole report here")
    parser.add_argument("--logs", default="fuzz-gateway.log", help="the gateway's stderr")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        return _serve(args.serve)
    args.negative = min(args.negative, args.cases)
    started = time.monotonic()
    reports, deferred = run(args)
    print()
    print(f"seed {args.seed}, {time.monotonic() - started:.0f} s, gateway tree {args.tree}")
    print(report_table(reports))
    print()
    held = ", ".join(f"{kind} {n}" for kind, n in sorted(deferred.items())) or "none"
    print(f"events Open Responses leaves to providers, held to OpenAI's schema: {held}")
    print()
    print("schema violations by place (side | where: what), most frequent first:")
    print(violation_table(reports))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "seed": args.seed,
                    "tree": args.tree,
                    "deferred": deferred,
                    "operations": [r.as_json() for r in reports],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
