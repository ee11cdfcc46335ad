#!/usr/bin/env bash
# Create (or update) the project venv and install smdebug-lite with the given extras.
#   bash scripts/setup.sh [EXTRAS]      e.g. torch  or  torch,tensorflow,xgboost,test
# torch is pinned to 2.13.0 first: on the project's machines that resolves to a local CPU wheel
# (any other torch requirement would download GBs of CUDA packages).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
EXTRAS="${1:-torch}"
quiet() { grep -v -e "Location 'file:" -e "^$" || true; }
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
# The dependencies are resolved again only when pyproject.toml or the extras change (a stamp in
# the venv records what was installed); smdebug-lite itself is reinstalled every time.
stamp="$VENV/.smdebug-lite-setup-$( (cat pyproject.toml; echo "$EXTRAS") | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && "$VENV/bin/python" -c "import hatchling, hatch_vcs" 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation --force-reinstall . 2>&1 | quiet
else
  "$VENV/bin/python" -m pip install -q torch==2.13.0 2>&1 | quiet
  "$VENV/bin/python" -m pip install -q ".[${EXTRAS}]" 2>&1 | quiet
  rm -f "$VENV"/.smdebug-lite-setup-*
  touch "$stamp"
fi
echo "[setup] $("$VENV/bin/python" -c 'import smdebug_lite, numpy, google.protobuf as p; print("smdebug-lite", smdebug_lite.__version__, "| numpy", numpy.__version__, "| protobuf", p.__version__)')"
