#!/usr/bin/env bash
# What a user would `pip install`, checked end to end. The tests import the checkout, so a file
# the wheel leaves out would pass them; this builds the sdist and the wheel, checks them
# (twine check --strict, their contents and metadata), installs the wheel alone with the extras a
# user picks into a fresh virtualenv outside the checkout, and from a folder outside it, with no
# PYTHONPATH, runs: `import smdebug` through the alias, the three console scripts, the demo
# (training under the zero-code-change launcher, the rule jobs, the HTML report), the report
# command, and reads the trials smdebug 1.0.34 wrote. scripts/check_wheel.py holds the assertions.
#
#   bash scripts/check_wheel.sh [--dist DIR] [--keep]
#
#   --dist DIR   check the sdist and wheel already in DIR instead of building them
#   --keep       keep the work folder (venv, demo output, reports) and print where it is
#
# Environment:
#   PYTHON               builds and makes the venv (default: .venv's python, else python3)
#   SMDEBUG_GOLDEN_DIR   trials smdebug 1.0.34 wrote, with expected/*.json
#                        (default: tests/data/golden; the check is skipped where it is absent)
#   SMDEBUG_WHEEL_EXTRAS the extras installed with the wheel (default: torch,cli,report)
#   SMDEBUG_TORCH        pip arguments installing torch first, so the torch extra is already
#                        met (default: torch==2.13.0, a local CPU wheel on the project machines;
#                        elsewhere e.g. "torch==2.13.0 --index-url <a CPU-only index>")
#   BUILD_ARGS           more arguments for `python -m build` (e.g. --no-isolation offline)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
started=$SECONDS

DIST=""
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dist) DIST="$(cd "$2" && pwd)"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "usage: $0 [--dist DIR] [--keep]" >&2; exit 2 ;;
  esac
done

PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
GOLDEN="${SMDEBUG_GOLDEN_DIR:-$ROOT/tests/data/golden}"
EXTRAS="${SMDEBUG_WHEEL_EXTRAS:-torch,cli,report}"
TORCH="${SMDEBUG_TORCH:-torch==2.13.0}"

# Nothing from the caller's environment may point Python at the checkout or configure a hook.
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP
while read -r name; do unset "$name"; done < <(compgen -e | grep -E '^(SMDEBUG_|SM_)' || true)
export AWS_EC2_METADATA_DISABLED=true PIP_DISABLE_PIP_VERSION_CHECK=1

WORK="$(mktemp -d "${TMPDIR:-/tmp}/smdebug-lite-wheel.XXXXXX")"
cleanup() {
  if [ "$KEEP" = 1 ]; then echo "[check_wheel] work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
step() { echo "[check_wheel] $* ($((SECONDS - started)) s)"; }
quiet() { grep -v -e "Location 'file:" -e "^$" || true; }

# -- build and check the artifacts -----------------------------------------------------------
if [ -z "$DIST" ]; then
  DIST="$WORK/dist"
  step "building the sdist and the wheel"
  # shellcheck disable=SC2086 # BUILD_ARGS is a list of arguments
  "$PYTHON" -m build ${BUILD_ARGS:-} --outdir "$DIST" "$ROOT" > "$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log"; exit 1; }
fi
step "twine check --strict"
"$PYTHON" -m twine check --strict "$DIST"/*.tar.gz "$DIST"/*.whl
cp "$ROOT/scripts/check_wheel.py" "$WORK/check_wheel.py"  # runs from outside the checkout
"$PYTHON" "$WORK/check_wheel.py" contents "$DIST" "$ROOT"
WHEEL="$(ls "$DIST"/*.whl)"

# -- install the wheel alone into a fresh venv -----------------------------------------------
step "installing $(basename "$WHEEL")[$EXTRAS] into a fresh venv"
"$PYTHON" -m venv "$WORK/venv"
VENV_BIN="$WORK/venv/bin"
# shellcheck disable=SC2086 # TORCH is a list of pip arguments
"$VENV_BIN/python" -m pip install -q $TORCH 2>&1 | quiet
"$VENV_BIN/python" -m pip install -q "$WHEEL[$EXTRAS]" 2>&1 | quiet
"$VENV_BIN/python" -m pip check

# -- use it from outside the checkout --------------------------------------------------------
mkdir -p "$WORK/run" "$WORK/app"
cd "$WORK/run"
step "imports, the smdebug alias, package data, golden trials"
SMDEBUG_LOG_LEVEL=error "$VENV_BIN/python" "$WORK/check_wheel.py" installed "$GOLDEN"

step "console scripts"
"$VENV_BIN/smdebug-lite" --version
for cmd in smdebug-lite smdebug-rule-runner smdebug-train; do
  "$VENV_BIN/$cmd" --help > "$WORK/$cmd.help" \
    || { echo "$cmd --help failed"; cat "$WORK/$cmd.help"; exit 1; }
  grep -qi "usage" "$WORK/$cmd.help" || { echo "$cmd --help printed no usage"; exit 1; }
done
if [ -d "$GOLDEN/pt_basic" ]; then
  "$VENV_BIN/smdebug-lite" summary "$GOLDEN/pt_basic" > "$WORK/summary.txt"
  grep -q "TRAIN" "$WORK/summary.txt" || { cat "$WORK/summary.txt"; exit 1; }
fi

# The demo's programs are plain scripts: a copy runs them against the installed package.
step "the demo: training under the launcher, rule jobs, report"
cp -r "$ROOT/demo" "$WORK/app/demo"
find "$WORK/app/demo" -name __pycache__ -prune -exec rm -rf {} +
"$VENV_BIN/python" "$WORK/app/demo/run_demo.py" --launcher container \
  --out "$WORK/app/demo_output" > "$WORK/demo.log" 2>&1 || { cat "$WORK/demo.log"; exit 1; }
"$VENV_BIN/python" "$WORK/check_wheel.py" demo "$WORK/app/demo_output"

step "smdebug-lite report"
"$VENV_BIN/smdebug-lite" report "$WORK/app/demo_output/trial" -o "$WORK/run/report.html" \
  --rules VanishingGradient --rules LossNotDecreasing --quiet
"$VENV_BIN/python" "$WORK/check_wheel.py" html "$WORK/run/report.html"

step "all checks passed"
