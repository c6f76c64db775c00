"""The contract coverage table: per family and wire, how many names of the installed openai SDK
(and, for create fields, of both vendored specs) are relayed, lowered, run by the gateway,
refused or omitted, and which ones are refused or omitted, with the reason (the rows of
:mod:`responses_gateway.protocol.contract`).

Names the SDK declares without a row are listed as ``MISSING`` (the coverage test fails on them).

Usage::

    python benchmarks/contract_coverage.py [--json PATH] [--policies]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from responses_gateway.protocol.contract import FAMILIES, WIRES
from responses_gateway.testing.sdk_unions import sdk_names as _sdk_names, sdk_version
from responses_gateway.testing.spec_oracle import spec_oracle

FATES = ("relayed", "lowered", "gateway", "refused", "omitted")


def sdk_names() -> dict[str, list[str]]:
    """The SDK's names per family, with the create fields only the specs declare added."""
    names = _sdk_names()
    specs = sorted(set().union(*spec_oracle().create_fields().values()))
    names["create_fields"] += [n for n in specs if n not in names["create_fields"]]
    return names


def table() -> dict[str, dict[str, dict[str, int]]]:
    """Family -> wire -> fate (or ``missing``) -> count, over the SDK's names."""
    names = sdk_names()
    out: dict[str, dict[str, dict[str, int]]] = {}
    for family, rows in FAMILIES.items():
        out[family] = {}
        for wire in WIRES:
            counts = dict.fromkeys((*FATES, "missing"), 0)
            for name in names[family]:
                row = rows.get(name)
                counts[row.on(wire).fate if row else "missing"] += 1
            out[family][wire] = counts
    return out


def policies() -> list[tuple[str, str, str, str, str]]:
    """(family, name, wire, fate, reason) of every refused or omitted SDK name, and of every
    create field refused for some of its values."""
    names = sdk_names()
    found = []
    for family, rows in FAMILIES.items():
        for name in names[family]:
            row = rows.get(name)
            for wire in WIRES:
                handling = row.on(wire) if row else None
                if handling is None:
                    continue
                if handling.fate in ("refused", "omitted"):
                    found.append((family, name, wire, handling.fate, handling.how))
                elif handling.accepts is not None:  # refused for the values it does not cover
                    found.append((family, name, wire, "partly refused", handling.how))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the table as JSON")
    parser.add_argument("--policies", action="store_true", help="list refused/omitted names")
    args = parser.parse_args()
    counts = table()
    print(f"openai SDK {sdk_version()}")
    header = f"{'family':15} {'wire':9} {'names':>5} " + " ".join(f"{f:>8}" for f in FATES)
    print(header + f" {'missing':>8}")
    for family, wires in counts.items():
        for wire, fates in wires.items():
            total = sum(fates.values())
            cells = " ".join(f"{fates[f]:>8}" for f in (*FATES, "missing"))
            print(f"{family:15} {wire:9} {total:>5} {cells}")
    if args.policies:
        print()
        for family, name, wire, fate, how in policies():
            print(f"{family:15} {name:40} {wire:9} {fate:8} {how}")
    if args.json:
        args.json.write_text(json.dumps({"sdk": sdk_version(), "table": counts}, indent=2))


if __name__ == "__main__":
    main()
