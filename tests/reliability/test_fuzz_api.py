"""Schemathesis over every operation the gateway serves, generated from both specs (OpenAI's,
trimmed in ``tests/fixtures/openapi/``, and Open Responses', in ``tests/fixtures/openresponses/``):
no 5xx, every error an OpenAI envelope, every 2xx JSON body valid against the spec's response
schema. A fast fixed slice of ``benchmarks/fuzz.py`` (which runs 2,000 cases per operation,
stateful links and WebSocket mode included): examples are few and derandomized, so CI is
deterministic and bounded; the gateway routes every model to the demo upstream, so valid
bodies get real answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from tests.reliability.conftest import LIMITS, Stack

from responses_gateway.app import create_app
from responses_gateway.config import parse_config
from responses_gateway.testing.fake_upstream import create_fake_upstream_app
from responses_gateway.testing.script import ScriptedUpstream
from responses_gateway.testing.server import run_in_thread

FIXTURES = Path(__file__).parents[1] / "fixtures"
EXAMPLES = 10
UNCHECKED_2XX = {("openresponses", "POST /responses")}
"""2xx bodies not yet held to their spec here: Open Responses' Response object requires numbers
for ``temperature``/``top_p``/``top_logprobs`` that the gateway echoes as null (issue #29, its
Response-completeness half). Status and envelope rules still apply to them."""


def _schema(path: Path) -> Any:
    schema = schemathesis.openapi.from_path(path)
    schema.config.generation.update(
        modes=[schemathesis.GenerationMode.POSITIVE], max_examples=EXAMPLES, deterministic=True
    )
    # The coverage phase enumerates boundary values of every property (hundreds of requests for
    # CreateResponse alone): far over the CI budget. Examples and random generation remain.
    schema.config.phases.coverage.enabled = False
    schema.config.phases.stateful.enabled = False
    return schema


SPECS = {
    "openai": FIXTURES / "openapi" / "gateway.json",
    "openresponses": FIXTURES / "openresponses" / "openapi.json",
}
openai_schema = _schema(SPECS["openai"])
openresponses_schema = _schema(SPECS["openresponses"])


@cache
def _components(spec: str) -> dict[str, Any]:
    return dict(json.loads(SPECS[spec].read_text())["components"])


@cache
def _validator(spec: str, schema: str) -> Any:
    """A JSON Schema validator of ``schema`` (JSON text) with the spec's components: plain JSON
    Schema semantics (a discriminator without a mapping, as Open Responses writes some, is not
    read as one)."""
    return jsonschema_rs.validator_for({**json.loads(schema), "components": _components(spec)})


def _problems(spec: str, case: Any, status: int, body: Any) -> list[str]:
    answers = case.operation.definition.raw.get("responses", {})
    answer = answers.get(str(status)) or {}
    schema = (answer.get("content", {}).get("application/json") or {}).get("schema")
    if not isinstance(schema, dict):
        return []
    validator = _validator(spec, json.dumps(schema, sort_keys=True))
    return [f"{list(e.instance_path)}: {e.message[:300]}" for e in validator.iter_errors(body)]


CASE_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure reports as found
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def fuzz_url(stack: Stack) -> Iterator[str]:
    upstream = ScriptedUpstream(demo=True)
    with run_in_thread(create_fake_upstream_app(upstream)) as upstream_server:
        config = parse_config(
            {
                "operators": ["local"],  # the usage API answers, instead of a 403
                "providers": [
                    {
                        "name": "demo",
                        "base_url": f"{upstream_server.url}/v1",
                        "api": "chat",
                        "default": True,
                        "timeout": 10,
                    }
                ],
            }
        )
        with run_in_thread(create_app(config, stack.store, limits=LIMITS)) as gateway:
            yield gateway.url


def _check(spec: str, case: Any, fuzz_url: str) -> None:
    if case.media_type == "application/x-www-form-urlencoded":
        case.media_type = "application/json"  # a form cannot carry nested values: never valid
    response = case.call(base_url=f"{fuzz_url}/v1", timeout=30)
    status = response.status_code
    assert status < 500, f"{status}: {response.text[:500]}"
    if status >= 400:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, error
        assert isinstance(error["message"], str) and error["message"]
        return
    content_type = response.headers.get("content-type", [""])
    content_type = content_type[0] if isinstance(content_type, list) else content_type
    checked = (spec, case.operation.label) not in UNCHECKED_2XX
    if status < 300 and content_type.startswith("application/json") and checked:
        assert _problems(spec, case, status, response.json()) == [], case.as_curl_command()


@openai_schema.parametrize()
@CASE_SETTINGS
def test_openai_operations_never_5xx_and_answer_in_spec(case: Any, fuzz_url: str) -> None:
    _check("openai", case, fuzz_url)


@openresponses_schema.parametrize()
@CASE_SETTINGS
def test_open_responses_operations_never_5xx_and_answer_in_spec(case: Any, fuzz_url: str) -> None:
    _check("openresponses", case, fuzz_url)
