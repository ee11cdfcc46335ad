#!/usr/bin/env bash
# Set up everything the tests need (all frameworks, moto, the SageMaker SDK) and run them.
# The reference venv with real smdebug 1.0.34 is built on first use (tests/refvenv.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh torch,tensorflow,xgboost,lightning,huggingface,test
# Headless Chromium renders the HTML report in tests/test_report.py (which skips without it).
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ]; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
    >/dev/null 2>&1 || echo "[test] chromium could not be installed; the report's browser test will skip"
fi
PY="${VENV:-.venv}/bin/python"
"$PY" -m ruff check .
# Tests run in parallel, one worker more than there are cores: many tests spend part of their
# time waiting on a subprocess, a socket or a timeout (SMDEBUG_TEST_WORKERS to change; 0 runs
# them in this process). A module's tests that share a module-scoped fixture stay on one worker
# (tests/conftest.py).
n_workers="${SMDEBUG_TEST_WORKERS:-$(( $(nproc) + 1 ))}"
workers=(-n "$n_workers" --dist loadgroup)
[ "$n_workers" = 0 ] && workers=()
# --quick: the tier to iterate with (every package, real parts included) in about 3 minutes;
# without it, everything, which is what CI runs.
full=1
args=()
for arg in "$@"; do
  if [ "$arg" = --quick ]; then
    full=0
    args+=(-m "not slow and not container and not browser and not reference")
  else
    args+=("$arg")
  fi
done
"$PY" -m pytest -q "${workers[@]}" "${args[@]}"
# The images, built and run without a Docker daemon: on a full run, where buildah is installed,
# unless SMDEBUG_CONTAINER_TEST=0.
if [ $full = 1 ] && [ $# -eq 0 ] && [ "${SMDEBUG_CONTAINER_TEST:-1}" != 0 ] && command -v buildah >/dev/null; then
  bash scripts/container-test.sh
fi
