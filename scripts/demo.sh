#!/usr/bin/env bash
# The main job: train with hooks from a DebugHookConfig, evaluate rules with the rule runner,
# print the rule statuses, then the trial summary and the HTML report. No AWS, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh torch,report
exec "${VENV:-.venv}/bin/python" demo/run_demo.py "$@"
