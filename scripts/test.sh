#!/usr/bin/env bash
# Set up everything the tests need (all frameworks, moto, the SageMaker SDK) and run them.
# The reference venv with real smdebug 1.0.34 is built on first use (tests/refvenv.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh torch,tensorflow,xgboost,test
PY="${VENV:-.venv}/bin/python"
"$PY" -m ruff check .
exec "$PY" -m pytest -q "$@"
