"""The real clients are installed from their registries at the pinned versions."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import HERE, run_client


def test_npm_clients_are_pinned_exactly_and_installed(node_modules: Path) -> None:
    wanted = json.loads((HERE / "package.json").read_text())["dependencies"]
    lock = json.loads((HERE / "package-lock.json").read_text())["packages"]
    for name, version in wanted.items():
        assert version[0].isdigit(), f"{name} must be pinned to an exact version"
        assert lock[f"node_modules/{name}"]["version"] == version
        installed = json.loads((node_modules / name / "package.json").read_text())
        assert installed["version"] == version


def test_codex_binary_comes_from_the_npm_platform_package(codex_bin: Path) -> None:
    done = run_client([str(codex_bin), "--version"], {}, cwd=HERE, timeout=30)
    version = json.loads((HERE / "package.json").read_text())["dependencies"]["@openai/codex"]
    assert done.stdout.strip() == f"codex-cli {version}"
