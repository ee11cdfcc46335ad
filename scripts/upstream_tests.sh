#!/usr/bin/env bash
# Run smdebug 1.0.34's own tests from a fetched copy against an interpreter's smdebug.
#   bash scripts/upstream_tests.sh SRC [--python PY] [--junit OUT.xml] [--compare BASE.xml] [-- PYTEST_ARGS]
# SRC: a git directory of sagemaker-debugger (bare mirror) or a checked-out tree.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "${HOST_PYTHON:-python3}" "$here/upstream_tests.py" "$@"
