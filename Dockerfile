# syntax=docker/dockerfile:1
#
# smdebug-lite container images, built from this repository:
#
#   docker build --target rule-evaluator -t smdebug-lite-rule-evaluator .
#   docker build --target training       -t smdebug-lite-training .
#
# rule-evaluator: a custom RuleEvaluatorImage for DebugRuleConfigurations; SageMaker runs it as
#   a Processing job with the RuleParameters as environment variables (see docs/containers.md).
# training: a training image whose launcher (smdebug-train) attaches the smdebug-lite hook from
#   /opt/ml/input/config/debughookconfig.json without changes to the training script.
#
# scripts/container-test.sh builds both targets and runs them without a Docker daemon.
#
# Every Python package is pinned: requirements-build.lock (wheel build),
# rule_runner/requirements.lock (the runtime both images share) and
# container/requirements-training.lock (PyTorch). Each is installed with --no-deps and then
# verified with `pip check`, so an incomplete lock fails the build instead of floating.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build the smdebug-lite wheel --------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements-build.lock ./
RUN python -m pip install --no-deps -r requirements-build.lock
COPY pyproject.toml README.md LICENSE _smdebug_lite_alias.py smdebug_lite-alias.pth ./
COPY smdebug_lite ./smdebug_lite
# The images' programs: the wheel installs them as smdebug_lite.container and .rule_runner.
COPY container ./container
COPY rule_runner ./rule_runner
# The build context has no .git, so the wheel gets pyproject's fallback-version unless this names
# the release (docker build --build-arg SETUPTOOLS_SCM_PRETEND_VERSION=0.2.0 ...).
ARG SETUPTOOLS_SCM_PRETEND_VERSION
RUN python -m pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

# --- what both images share ----------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 1000 smdebug \
    && useradd --system --uid 1000 --gid smdebug --create-home --home-dir /home/smdebug \
       --shell /usr/sbin/nologin smdebug
COPY rule_runner/requirements.lock /tmp/requirements.lock
RUN python -m pip install --no-deps -r /tmp/requirements.lock && rm /tmp/requirements.lock
COPY --from=wheel /wheels /tmp/wheels
RUN python -m pip install --no-deps /tmp/wheels/*.whl && python -m pip check && rm -rf /tmp/wheels
# SageMaker mounts its volumes over these; locally (`docker run` without -v) they must be
# writable by the unprivileged user.
RUN mkdir -p /opt/ml/input/config /opt/ml/output /opt/ml/config \
             /opt/ml/processing/input /opt/ml/processing/output/rule \
    && chown -R smdebug:smdebug /opt/ml
WORKDIR /home/smdebug

# --- training image ------------------------------------------------------------------------------
FROM runtime AS training
COPY container/requirements-training.lock /tmp/requirements-training.lock
RUN python -m pip install --no-deps -r /tmp/requirements-training.lock \
    && python -m pip check \
    && rm /tmp/requirements-training.lock
USER smdebug
# SageMaker starts training containers as `docker run <image> train`.
ENTRYPOINT ["smdebug-train"]

# --- rule-evaluator image (the default target) ---------------------------------------------------
FROM runtime AS rule-evaluator
USER smdebug
# Exec form, so SIGTERM from StopProcessingJob reaches the runner (it reports Stopped).
ENTRYPOINT ["smdebug-rule-runner"]
