#!/usr/bin/env bash
# Offline validation of template.yaml, as CI runs it (.ci/run): no AWS credentials, no Docker.
#
#   1. the SAM transform (samtranslator, installed here when missing: infra/sam-translator.txt)
#      + cfn-lint on its output,
#      the background state machine's ASL inlined so that cfn-lint checks it (check_template.py);
#   2. `sam validate --lint` (the SAM CLI lives in its own virtualenv, build/sam-cli, because its
#      pins clash with the project's; an installed `sam` on PATH is used instead when present);
#   3. `sam build` into build/sam and the artifact-size budget, when make and a Python 3.11 are
#      available (set SKIP_SAM_BUILD=1 to skip).
#
# Run from anywhere; needs python (with the project's dev extra installed) and network access to
# PyPI for the SAM CLI and the layer build.
set -euo pipefail
cd "$(dirname "$0")/.."
export SAM_CLI_TELEMETRY=0

SAM_CLI_VERSION="${SAM_CLI_VERSION:-1.170.0}"
MAX_ARTIFACT_MB="${MAX_ARTIFACT_MB:-30}"

# The SAM translator pins an older pydantic than the project's and works with it: installed
# without its dependencies (infra/sam-translator.txt), when missing.
if ! python -c 'import samtranslator' 2>/dev/null; then
    python -m pip install --quiet --disable-pip-version-check --no-deps -r infra/sam-translator.txt
fi
python infra/check_template.py

if command -v sam >/dev/null 2>&1; then
    sam=sam
else
    tools=build/sam-cli
    if [ ! -x "$tools/bin/sam" ]; then
        python -m venv "$tools"
        "$tools/bin/python" -m pip install --quiet --disable-pip-version-check \
            "aws-sam-cli==$SAM_CLI_VERSION"
    fi
    sam="$tools/bin/sam"
fi
"$sam" validate --lint --region us-east-1

if [ "${SKIP_SAM_BUILD:-0}" = 1 ]; then
    echo "check_template: sam build skipped (SKIP_SAM_BUILD=1)"
    exit 0
fi
# The layers are compiled for the functions' runtime: the Makefile needs that Python.
if [ -z "${PYTHON:-}" ]; then
    if python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
        PYTHON="$(command -v python)"
    elif command -v python3.11 >/dev/null 2>&1; then
        PYTHON="$(command -v python3.11)"
    fi
fi
if ! command -v make >/dev/null 2>&1 || [ -z "${PYTHON:-}" ]; then
    echo "check_template: sam build skipped (needs make and Python 3.11 on PATH)"
    exit 0
fi
export PYTHON
"$sam" build --build-dir build/sam
python benchmarks/cold_start.py --sizes-only --build-dir build/sam --max-artifact-mb "$MAX_ARTIFACT_MB"
