#!/usr/bin/env bash
# Build the reference virtualenv: the real smdebug 1.0.34 on the stack it supports (numpy 1.x,
# protobuf 3.20.3, torch CPU, optionally xgboost). Tests and benchmarks run it side by side with
# smdebug-lite to check compatibility and to measure speed ratios.
#
#   bash scripts/make_ref_venv.sh [DIR]        # default DIR=/tmp/smdref; safe to re-run
#
#   TORCH_SPEC    pip spec for torch        (default torch==2.13.0, the local CPU wheel here)
#   WITH_XGBOOST  1 to add xgboost          (default 1; smdebug.xgboost needs pkg_resources,
#                                            hence setuptools<81)
#   XGBOOST_SPEC  pip spec for xgboost      (default 'xgboost<3.1')
#   PYTHON        interpreter for the venv  (default python3)
set -euo pipefail

dir="${1:-/tmp/smdref}"
python="${PYTHON:-python3}"
torch_spec="${TORCH_SPEC:-torch==2.13.0}"
with_xgboost="${WITH_XGBOOST:-1}"
xgboost_spec="${XGBOOST_SPEC:-xgboost<3.1}"

[ -x "$dir/bin/python" ] || { echo "[ref-venv] creating $dir"; "$python" -m venv "$dir"; }
py="$dir/bin/python"
install() { "$py" -m pip install -q --disable-pip-version-check "$@"; }

echo "[ref-venv] smdebug 1.0.34 with numpy<2 and protobuf 3.20.3"
install smdebug==1.0.34 'numpy<2' protobuf==3.20.3 requests pyinstrument==3.4.2 'pandas<3' \
  psutil pytest boto3
echo "[ref-venv] $torch_spec"
install "$torch_spec"
if [ "$with_xgboost" = 1 ]; then
  echo "[ref-venv] $xgboost_spec"
  install "$xgboost_spec" 'setuptools<81' 'numpy<2' \
    || echo "[ref-venv] xgboost could not be installed: its cross-checks will skip" >&2
fi

"$py" - <<'PY'
import google.protobuf, numpy, smdebug, torch
assert numpy.__version__.startswith("1."), f"smdebug 1.0.34 needs numpy 1.x, got {numpy.__version__}"
print("[ref-venv] smdebug", smdebug.__version__, "torch", torch.__version__,
      "numpy", numpy.__version__, "protobuf", google.protobuf.__version__)
try:
    import smdebug.xgboost  # noqa: F401
    print("[ref-venv] smdebug.xgboost importable")
except Exception as exc:
    print("[ref-venv] smdebug.xgboost not usable:", type(exc).__name__, exc)
PY
echo "[ref-venv] ready: $py"
