"""The README and docs checked against the code where they restate it: the environment table,
the configuration keys, the CLI's commands and flags; and docs that speak of the product, not of
its history (no issue numbers, no commits)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from responses_gateway.cli import build_parser
from responses_gateway.config import PROVIDER_KEYS, TOP_LEVEL_KEYS
from responses_gateway.settings import setting_names

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "docs").glob("*.md")}


def _configuration_table() -> list[str]:
    section = README[README.index("## Configuration") :]
    table = section[section.index("| Variable |") :]
    table = table[: table.index("\n\n")]
    names: list[str] = []
    for row in table.splitlines()[2:]:
        names += re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])
    return names


def test_the_readme_environment_table_lists_exactly_the_settings() -> None:
    listed = _configuration_table()
    assert len(listed) == len(set(listed))
    assert set(listed) == set(setting_names())


def test_every_configuration_key_is_documented() -> None:
    """Each key the configuration accepts is named (in backticks) by the README or a doc."""
    text = README + "".join(DOCS.values())
    documented = (
        set(re.findall(r"`([a-z0-9_]+)(?: =[^`]*)?`", text))
        | set(re.findall(r"^([a-z_]+) = ", text, re.MULTILINE))  # keys in TOML examples
        | set(re.findall(r'"([a-z_]+)":', text))  # keys in JSON examples
    )
    missing = sorted((set(PROVIDER_KEYS) | set(TOP_LEVEL_KEYS)) - documented)
    assert missing == []


HISTORY = re.compile(
    r"issue #?\d+|\(#\d+(?:, #\d+)*\)|\bcommit (?:before|[0-9a-f]{7,})\b|at this commit",
    re.IGNORECASE,
)


def test_docs_speak_of_the_product_not_of_its_history() -> None:
    for name, text in {"README.md": README, **DOCS}.items():
        found = HISTORY.findall(text)
        assert found == [], (name, found)


def _parser_commands() -> dict[str, set[str]]:
    """Each subcommand and its option strings, from the CLI's own parser."""
    (subcommands,) = [
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    ]
    return {
        command: {option for action in sub._actions for option in action.option_strings}
        for command, sub in subcommands.choices.items()
    }


def test_every_command_line_the_docs_show_parses() -> None:
    """Every ``responses-gateway <command> --flag`` in the README and the docs names a command
    and flags the CLI has (the README walk runs the README's; this covers the docs' too)."""
    commands = _parser_commands()
    shown = 0
    for name, text in {"README.md": README, **DOCS}.items():
        for line in re.findall(r"responses-gateway ([a-z-]+)([^`\n|]*)", text):
            command, rest = line
            if command not in commands:
                continue  # the project's name in prose ("responses-gateway serve" is checked)
            shown += 1
            for flag in re.findall(r"(?<![\w-])(--[a-z-]+)", rest):
                assert flag in commands[command], (name, command, flag)
    assert {"serve", "usage", "budget", "keys", "create-table", "fake-upstream"} <= set(commands)
    assert shown >= 15


def test_help_is_plain_text() -> None:
    """``--help`` of the command and of each subcommand, without the docstrings' markup."""
    parser = build_parser()
    (subcommands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for text in [parser.format_help(), *(s.format_help() for s in subcommands.choices.values())]:
        assert re.findall(r"``|:(?:class|mod|func|data|attr|meth):", text) == []
    assert "responses_gateway" not in parser.format_help()
