#!/usr/bin/env bash
# Build both images of the Dockerfile without a Docker daemon (podman/buildah) and run them:
#   1. training: `smdebug-train train` (the image's ENTRYPOINT) with a DebugHookConfig at
#      /opt/ml/input/config and an unmodified script in /opt/ml/code writes a trial, which is
#      then read back inside the image;
#   2. rule-evaluator: `smdebug-rule-runner` (its ENTRYPOINT) on that trial mounted at
#      /opt/ml/processing/input/tensors, RuleParameters in the environment, once with a verdict
#      of NoIssuesFound and once of IssuesFound; exit codes and status files are checked;
#   3. rule-evaluator as a plain SageMaker Processing job: the trial as a ProcessingInput at a
#      path of the job's choosing, named by `base_trial` in the environment, one ProcessingOutput.
#
# Needs root (or a rootless podman setup), podman, buildah and runc; without SMDEBUG_PYTHON_IMAGE
# also mmdebstrap, which builds a stand-in for python:3.11-slim-bookworm from Debian packages
# (for machines that reach a package mirror but no container registry). Settings (env):
#   SMDEBUG_PYTHON_IMAGE   base image for the PYTHON_IMAGE build argument (default: the stand-in)
#   SMDEBUG_KEEP_IMAGES=1  keep the built images (the stand-in base image is always kept)
# Debian: apt-get install podman buildah runc mmdebstrap
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$SECONDS

say() { printf '[container-test %3ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() { printf '[container-test] FAILED: %s\n' "$*" >&2; exit 1; }

for tool in podman buildah runc; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (Debian: apt-get install $tool)"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/smdebug-container-test.XXXXXX")
CONTAINERS=()
TAG="ct-$$"
TRAINING_IMAGE="localhost/smdebug-lite-training:$TAG"
RULE_IMAGE="localhost/smdebug-lite-rule-evaluator:$TAG"
cleanup() {
  for c in "${CONTAINERS[@]}"; do buildah rm "$c" >/dev/null 2>&1 || true; done
  if [ "${SMDEBUG_KEEP_IMAGES:-0}" != 1 ]; then
    podman rmi -f "$TRAINING_IMAGE" "$RULE_IMAGE" >/dev/null 2>&1 || true
    podman image prune -f >/dev/null 2>&1 || true  # this build's untagged stages
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Sandboxes without cgroup delegation: no cgroups, file events. A file of our own; the system's
# containers.conf is left as it is.
export CONTAINERS_CONF="$WORK/containers.conf"
cat > "$CONTAINERS_CONF" <<'EOF'
[containers]
cgroups = "disabled"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF

# --- base image ------------------------------------------------------------------------------
HOST_CA=/etc/ssl/certs/ca-certificates.crt
PYTHON_IMAGE=${SMDEBUG_PYTHON_IMAGE:-localhost/smdebug-lite-python-base:3.11-bookworm}
if [ -z "${SMDEBUG_PYTHON_IMAGE:-}" ] && ! podman image exists "$PYTHON_IMAGE"; then
  command -v mmdebstrap >/dev/null || fail "mmdebstrap is not installed (or set SMDEBUG_PYTHON_IMAGE)"
  say "building the base image stand-in $PYTHON_IMAGE with mmdebstrap"
  mkdir "$WORK/base"
  mmdebstrap --quiet --variant=minbase \
    --include=python3,python3-pip,python3-venv,python-is-python3,ca-certificates,passwd \
    bookworm "$WORK/base/rootfs.tar"
  # The host's CA bundle: it also holds the roots of a TLS-intercepting proxy, if there is one.
  cp "$HOST_CA" "$WORK/base/host-ca.crt"
  cat > "$WORK/base/Containerfile" <<'EOF'
FROM scratch
ADD rootfs.tar /
COPY host-ca.crt /etc/ssl/certs/ca-certificates.crt
RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
CMD ["python3"]
EOF
  podman build --quiet --runtime runc --network host -t "$PYTHON_IMAGE" "$WORK/base" >/dev/null
  rm -rf "$WORK/base"
fi

# --- build both targets ------------------------------------------------------------------------
# pip inside the build trusts the host's CA bundle and sees the host's local wheel directory
# (pip's find-links), if any; both are mounted for the build only and stay out of the images.
PIP_CONF="$WORK/build-pip.conf"
BUILD_MOUNTS=(-v "$PIP_CONF:/etc/pip.conf:ro")
printf '[global]\n' > "$PIP_CONF"
if [ -f "$HOST_CA" ]; then
  printf 'cert = /run/smdebug-build-ca.crt\n' >> "$PIP_CONF"
  BUILD_MOUNTS+=(-v "$HOST_CA:/run/smdebug-build-ca.crt:ro")
fi
WHEELS=$(pip config get global.find-links 2>/dev/null || true)
if [ -n "$WHEELS" ] && [ -d "$WHEELS" ]; then
  # No retries: where wheels come from a local directory, an index that cannot be reached
  # (the PyTorch one) should fail at once, not after pip's backoff for every package.
  printf 'find-links = %s\nretries = 0\n' "$WHEELS" >> "$PIP_CONF"
  BUILD_MOUNTS+=(-v "$WHEELS:$WHEELS:ro")
fi

for target in rule-evaluator training; do
  image=$RULE_IMAGE; [ "$target" = training ] && image=$TRAINING_IMAGE
  say "building --target $target"
  podman build --runtime runc --network host "${BUILD_MOUNTS[@]}" \
    --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" --target "$target" -t "$image" . \
    > "$WORK/build-$target.log" 2>&1 \
    || { tail -40 "$WORK/build-$target.log" >&2; fail "podman build --target $target"; }
done

entrypoint() { podman image inspect --format '{{join .Config.Entrypoint " "}}' "$1"; }
user_of() { podman image inspect --format '{{.Config.User}}' "$1"; }
for image in "$TRAINING_IMAGE" "$RULE_IMAGE"; do
  [ "$(user_of "$image")" = smdebug ] || fail "$image runs as '$(user_of "$image")', not smdebug"
done
[ "$(entrypoint "$TRAINING_IMAGE")" = smdebug-train ] || fail "training ENTRYPOINT"
[ "$(entrypoint "$RULE_IMAGE")" = smdebug-rule-runner ] || fail "rule-evaluator ENTRYPOINT"

# `podman run` trips over rlimits in some sandboxes; `buildah run` on a working container does
# not. It runs as the image's USER, without its ENTRYPOINT, so the entrypoint is spelled out.
run_in() {  # run_in IMAGE [buildah run options...] -- command...
  local image=$1; shift
  local opts=()
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  local ctr
  ctr=$(buildah from --quiet "$image")
  CONTAINERS+=("$ctr")
  buildah run --runtime runc --network none "${opts[@]}" -- "$ctr" "$@" 2>&1
}
expect_status() {  # expect_status FILE STATUS
  python3 - "$1" "$2" <<'EOF' || fail "status file $1"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["status"] == sys.argv[2], f"status {doc['status']!r}, expected {sys.argv[2]!r}: {doc}"
print(f"  status file: {doc['status']} (rule {doc['rule']}, steps evaluated "
      f"{doc['steps_evaluated']}, last step {doc['last_step']})")
EOF
}

# --- training image: DebugHookConfig at /opt/ml/input/config, `docker run <image> train` ---------
say "training image: smdebug-train train"
TRAIN=$WORK/train
mkdir -p "$TRAIN/opt_ml/input/config" "$TRAIN/opt_ml/output" "$TRAIN/code"
cat > "$TRAIN/opt_ml/input/config/debughookconfig.json" <<'EOF'
{
  "LocalPath": "/opt/ml/output/tensors",
  "HookParameters": {"save_interval": "2"},
  "CollectionConfigurations": [
    {"CollectionName": "gradients"},
    {"CollectionName": "weights"},
    {"CollectionName": "losses"}
  ]
}
EOF
# SageMaker stores every hyperparameter as a JSON-encoded string.
printf '{"sagemaker_program": "\\"train.py\\"", "steps": "12"}\n' \
  > "$TRAIN/opt_ml/input/config/hyperparameters.json"
cat > "$TRAIN/code/train.py" <<'EOF'
"""An unmodified training script: no smdebug import."""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
steps = parser.parse_args().steps
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
loss_fn = torch.nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
for _ in range(steps):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print(f"TRAINED {steps} steps, loss {loss.item():.4f}")
EOF
chmod -R a+rwX "$TRAIN"
run_in "$TRAINING_IMAGE" -v "$TRAIN/opt_ml:/opt/ml" -v "$TRAIN/code:/opt/ml/code:ro" \
  -- "$(entrypoint "$TRAINING_IMAGE")" train > "$WORK/train.log" \
  || { cat "$WORK/train.log" >&2; fail "training job"; }
grep -q "TRAINED 12 steps" "$WORK/train.log" || { cat "$WORK/train.log" >&2; fail "script output"; }
TRIAL=$TRAIN/opt_ml/output/tensors
[ -f "$TRIAL/training_job_end.ts" ] || fail "no training_job_end.ts in the trial"

say "training image: reading the trial back"
run_in "$TRAINING_IMAGE" -v "$TRIAL:/trial:ro" -- python - > "$WORK/check.log" <<'EOF' \
  || { cat "$WORK/check.log" >&2; fail "trial check"; }
from smdebug_lite.trials import create_trial

trial = create_trial("/trial")
steps = trial.steps()
assert steps == list(range(0, 12, 2)), steps
grads = trial.tensor_names(collection="gradients")
assert len(grads) == 4, grads  # two Linear layers: weight and bias each
losses = trial.tensor_names(collection="losses")
assert losses, trial.tensor_names()
values = [trial.tensor(losses[0]).value(s).item() for s in steps]
print(f"  trial: steps {steps}, {len(grads)} gradients, loss {values[0]:.4f} -> {values[-1]:.4f}")
EOF
cat "$WORK/check.log"

# --- rule-evaluator image: RuleParameters as environment variables -------------------------------
rule_job() {  # rule_job NAME EXPECTED_EXIT STATUS [--env K=V ...]
  local name=$1 want=$2 status=$3; shift 3
  local job=$WORK/rule-$name
  # The trial's mount point is created by root inside opt_ml, so the folders the runner writes
  # (as uid 1000) must exist beforehand, as with `docker run`.
  mkdir -p "$job/opt_ml/output" "$job/opt_ml/processing/output/rule"
  chmod -R a+rwX "$job"
  say "rule-evaluator image: $name"
  local rc=0
  run_in "$RULE_IMAGE" -v "$job/opt_ml:/opt/ml" \
    -v "$TRIAL:/opt/ml/processing/input/tensors:ro" --env "RULE_CONFIGURATION_NAME=$name" "$@" \
    -- "$(entrypoint "$RULE_IMAGE")" > "$job.log" || rc=$?
  [ "$rc" = "$want" ] || { cat "$job.log" >&2; fail "$name exited $rc, expected $want"; }
  expect_status "$job/opt_ml/processing/output/rule/$name.json" "$status"
}
rule_job VanishingGradient 0 NoIssuesFound \
  --env rule_to_invoke=VanishingGradient --env threshold=1e-7
rule_job GradientsBelow1000 1 IssuesFound \
  --env rule_to_invoke=VanishingGradient --env threshold=1000
grep -q "^RuleEvaluationConditionMet: Evaluation of the rule VanishingGradient" \
  "$WORK/rule-GradientsBelow1000/opt_ml/output/message" || fail "message file of IssuesFound"

# --- rule-evaluator image as a plain Processing job ------------------------------------------------
# What SageMaker Processing does for Processor(image_uri=..., env=...).run(inputs=[
# ProcessingInput(source=<trial>, destination="/opt/ml/processing/input/trial")], outputs=[
# ProcessingOutput(source="/opt/ml/processing/output/status")]): the input is downloaded to its
# destination, the env becomes the container's environment.
say "rule-evaluator image: plain Processing job layout"
JOB=$WORK/processing
mkdir -p "$JOB/opt_ml/output" "$JOB/opt_ml/processing/output/status"
chmod -R a+rwX "$JOB"
run_in "$RULE_IMAGE" -v "$JOB/opt_ml:/opt/ml" -v "$TRIAL:/opt/ml/processing/input/trial:ro" \
  --env rule_to_invoke=LossNotDecreasing --env base_trial=/opt/ml/processing/input/trial \
  --env SM_RULE_OUTPUT_DIR=/opt/ml/processing/output/status \
  --env RULE_CONFIGURATION_NAME=LossNotDecreasing \
  -- "$(entrypoint "$RULE_IMAGE")" > "$JOB.log" || { cat "$JOB.log" >&2; fail "processing job"; }
expect_status "$JOB/opt_ml/processing/output/status/LossNotDecreasing.json" NoIssuesFound

say "passed: both images built and ran"
