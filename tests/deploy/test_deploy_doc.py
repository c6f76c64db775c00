"""docs/deploy.md checked against template.yaml, every fact derived from the template at test
time: its parameters (names and defaults), its outputs, its functions and layers, the alarm that
watches them, and the arithmetic of the cost example. A parameter, output or function added to
or removed from the template without the guide saying so fails here."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")

NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def _section(start: str, end: str) -> str:
    text = GUIDE[GUIDE.index(start) :]
    return text[: text.index(end)]


def _table_rows(text: str, header: str) -> list[list[str]]:
    table = text[text.index(header) :]
    table = table[: table.index("\n\n")] if "\n\n" in table else table
    return [
        [cell.strip() for cell in row.strip().strip("|").split("|")]
        for row in table.splitlines()[2:]
    ]


def _resources(template: dict[str, Any], kind: str) -> list[str]:
    return [name for name, res in template["Resources"].items() if res["Type"] == kind]


def test_the_parameter_table_is_the_templates_parameters_with_their_defaults(
    sam_template: dict[str, Any],
) -> None:
    rows = _table_rows(GUIDE, "| Parameter | Default | Meaning |")
    documented: dict[str, str] = {}
    for names_cell, defaults_cell, _ in rows:
        names = re.findall(r"`(\w+)`", names_cell)
        defaults = [d.strip() for d in defaults_cell.split(" / ")]
        assert len(defaults) == len(names), names_cell
        for name, default in zip(names, defaults, strict=True):
            assert name not in documented, f"{name} is in the table twice"
            documented[name] = default
    parameters = sam_template["Parameters"]
    assert sorted(documented) == sorted(parameters)
    for name, spec in parameters.items():
        default = spec.get("Default", "")
        expected = "empty" if default == "" else f"`{default}`"
        assert documented[name] == expected, name
        allowed = spec.get("AllowedValues")
        if allowed and len(allowed) <= 6 and name != "QuotaPeriod":
            meaning = next(row[2] for row in rows if f"`{name}`" in row[0])
            for value in allowed:
                assert f"`{value}`" in meaning, (name, value)


def test_the_outputs_list_is_the_templates_outputs(sam_template: dict[str, Any]) -> None:
    listed = _section("The stack's outputs:", "## 4. Call it")
    named = set(re.findall(r"^- `(\w+)`(?: and `(\w+)`)?", listed, re.MULTILINE))
    documented = {name for pair in named for name in pair if name}
    assert documented == set(sam_template["Outputs"])


def test_the_guide_counts_and_lists_the_templates_functions_and_layers(
    sam_template: dict[str, Any],
) -> None:
    functions = _resources(sam_template, "AWS::Serverless::Function")
    layers = _resources(sam_template, "AWS::Serverless::LayerVersion")
    intro = GUIDE[: GUIDE.index("```")]
    assert f"{NUMBERS[len(functions)]} Lambda functions" in intro
    build = _section("## 2. Build", "## 3. Deploy")
    assert f"{NUMBERS[len(functions)]} small function directories and {NUMBERS[len(layers)]}" in (
        build.replace("\n", " ")
    )
    artifacts = [re.sub(r"`", "", row[0]) for row in _table_rows(build, "| Artifact | What |")]
    assert sorted(artifacts) == sorted(functions + layers)
    budget = re.search(r"under (\d+) MB unzipped", build.replace("\n", " "))
    script = (ROOT / "infra" / "check_template.sh").read_text(encoding="utf-8")
    assert budget is not None
    assert f'MAX_ARTIFACT_MB="${{MAX_ARTIFACT_MB:-{budget.group(1)}}}"' in script
    makefile = (ROOT / "infra" / "layers" / "Makefile").read_text(encoding="utf-8")
    assert set(re.findall(r"(\d+) MB artifact budget", makefile)) <= {budget.group(1)}


def test_the_throttle_alarm_watches_every_function(sam_template: dict[str, Any]) -> None:
    alarm = sam_template["Resources"]["ThrottleAlarm"]["Properties"]
    watched = {
        metric["MetricStat"]["Metric"]["Dimensions"][0]["Value"]["Ref"]
        for metric in alarm["Metrics"]
        if "MetricStat" in metric
    }
    assert watched == set(_resources(sam_template, "AWS::Serverless::Function"))
    (total,) = [m for m in alarm["Metrics"] if m.get("ReturnData")]
    ids = {m["Id"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert set(total["Expression"].replace(" ", "").split("+")) == ids
    assert "any Lambda throttle of the stack's functions" in GUIDE


def test_the_cost_example_adds_up() -> None:
    example = _section("**A stored, streamed create**", "Lambda GB-seconds")
    rows = _table_rows(example, "| Item | Usage | Cost |")
    costs = [Decimal(row[2].lstrip("$")) for row in rows if row[2].startswith("$")]
    (total_row,) = [row for row in rows if "Total" in row[0]]
    total = Decimal(re.search(r"\$([\d.]+)", total_row[2]).group(1))  # type: ignore[union-attr]
    assert abs(total - sum(costs)) <= Decimal("0.0000005"), (total, sum(costs))
    per_million = re.search(r"about \$(\d+) per million", total_row[2])
    assert per_million is not None
    assert Decimal(per_million.group(1)) == (total * 1_000_000).quantize(Decimal(1))
