"""The benchmarks under ``benchmarks/`` name only gateway modules and attributes that exist.

The benchmarks are run by hand, never by the suite, so a rename in ``shared/`` could leave one
broken until someone measures (``load.py`` imported a store opener that had moved). This reads
every ``from responses_gateway... import ...`` in them, top level or inside a function, and
imports it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _gateway_imports() -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    for path in sorted(BENCHMARKS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "responses_gateway"
            ):
                found.extend((path.name, node.module or "", alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                found.extend(
                    (path.name, alias.name, "")
                    for alias in node.names
                    if alias.name.startswith("responses_gateway")
                )
    return found


IMPORTS = _gateway_imports()


def test_the_benchmarks_import_the_gateway() -> None:
    # The table below is not empty by accident: most benchmarks drive the gateway in process.
    assert {name for name, _, _ in IMPORTS} >= {"load.py", "hot_path.py", "first_request.py"}


@pytest.mark.parametrize(
    ("benchmark", "module", "name"), IMPORTS, ids=[f"{b}:{m}.{n}" for b, m, n in IMPORTS]
)
def test_imported_name_exists(benchmark: str, module: str, name: str) -> None:
    imported = importlib.import_module(module)
    if name:
        submodule = hasattr(imported, "__path__") and importlib.util.find_spec(f"{module}.{name}")
        assert hasattr(imported, name) or submodule, (
            f"benchmarks/{benchmark} imports {name} from {module}, which has no such name"
        )
