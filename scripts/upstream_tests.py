"""Run smdebug 1.0.34's own test suite, from a fetched copy, against whichever smdebug an
interpreter imports.

The upstream tests are never copied into this repository: they are materialized from a git
directory or checkout into a temporary directory, without the ``smdebug/`` package, so that
``import smdebug`` resolves to the interpreter's smdebug (smdebug-lite's alias in the project
venv, the real library in the reference venv). The same selection and the same run-time
patches are used for both, which makes the two junit files comparable.

Usage (see docs/compatibility.md):

    python scripts/upstream_tests.py SRC [--rev 1.0.34] [--python PY] [--junit OUT.xml]
        [--passed-out IDS.txt] [--compare BASELINE.xml] [--no-run] [--keep] [--list-excluded]
        [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

_REPO_VENV_PYTHON = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"
DEFAULT_PYTHON = str(_REPO_VENV_PYTHON) if _REPO_VENV_PYTHON.exists() else sys.executable
DEFAULT_REV = "1.0.34"
PER_TEST_TIMEOUT_S = 120

# Top-level entries of the upstream repository the tests read at run time. ``smdebug/`` is
# deliberately absent. ``examples/`` holds scripts that some tests launch by relative path.
MATERIALIZED = ("tests", "examples")

# Paths (relative to the materialized root) left out of the run, each with the reason.
EXCLUDED: dict[str, str] = {
    "tests/profiler": "profiler is out of scope: smdebug-lite has no profiler",
    "tests/mxnet": "MXNet is out of scope: smdebug-lite has no MXNet hook",
    "tests/resources/mxnet": "MXNet demo script, not a test",
    "tests/zero_code_change/test_mxnet_gluon_integration.py": "MXNet is out of scope",
    "tests/zero_code_change/test_mxnet_error_handling_agent.py": "MXNet is out of scope",
    "tests/zero_code_change/horovod_tests": "needs Horovod launched under mpirun on GPUs",
    "tests/zero_code_change/smdataparallel_tests": "needs SageMaker's distributed data "
    "parallel library on multi-GPU instances",
    "tests/tensorflow/hooks": "TF1 graph mode: SessionHook / EstimatorHook with "
    "tf.compat.v1 sessions and tf.estimator (removed in TF 2.16); upstream CI ran these "
    "on TF 1.x only",
    "tests/tensorflow/keras": "TF1 Keras (graph mode, tf.compat.v1); upstream CI ran these "
    "on TF 1.x only",
    "tests/tensorflow/test_keras_to_estimator.py": "tf.keras.estimator / tf.estimator, "
    "removed in TF 2.16",
    "tests/tensorflow/test_hook_save_scalar_tensorflow.py": "drives SessionHook through "
    "tf.train.MonitoredSession (TF1)",
    "tests/tensorflow2/test_estimator.py": "tf.estimator, removed in TF 2.16",
    "tests/zero_code_change/test_tensorflow_integration.py": "TF1 zero-code-change "
    "(tf.compat.v1 sessions, SessionHook)",
    "tests/zero_code_change/test_tensorflow_error_handling_agent.py": "TF1 SessionHook "
    "error handling",
    "tests/zero_code_change/test_training_with_no_grad_updates.py": "disabled in upstream "
    "CI itself (config/tests.sh: waits for CUDA drivers)",
    "tests/core/test_timeline_writer.py": "profiler: the timeline (trace event) writer, "
    "configured through the profiler's config parser",
}

# Single tests (node id prefixes) left out of otherwise selected modules, each with the reason.
DESELECTED: dict[str, str] = {
    "tests/core/test_utils.py::test_telemetry_url_preparation": "profiler: report telemetry URL",
    "tests/core/test_utils.py::test_setup_profiler_report": "profiler: report telemetry call",
    "tests/pytorch/test_distributed_training.py::test_run_net_distributed_save_all_test_timeline": (
        "profiler: Horovod timeline trace written by the profiler"
    ),
}

# Run-time patches of the temporary copy, each for something that cannot run here as written.
# Every patch is applied to both runs (reference and ours), so the two stay comparable.
PATCHES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    # The root conftest imports the profiler's config parser and smdebug.core.json_config at
    # module level for two fixtures only; one absent module would fail collection of every
    # test. Each import moves into the fixture that uses it.
    "tests/conftest.py": (
        "module-level profiler / json_config imports made lazy",
        (
            ("from smdebug.core.json_config import DEFAULT_RESOURCE_CONFIG_FILE\n", ""),
            ("from smdebug.profiler.profiler_config_parser import ProfilerConfigParser\n", ""),
            (
                "def set_up_resource_config():\n",
                "def set_up_resource_config():\n"
                "    from smdebug.core.json_config import DEFAULT_RESOURCE_CONFIG_FILE\n\n",
            ),
            (
                "def simple_profiler_config_parser(set_up_smprofiler_config_path):\n",
                "def simple_profiler_config_parser(set_up_smprofiler_config_path):\n"
                "    from smdebug.profiler.profiler_config_parser import ProfilerConfigParser\n\n",
            ),
        ),
    ),
    # At import time this module asks EC2 (describe_regions) for the region list that one test
    # is parametrized with; offline that fails the collection of every test in the module. A
    # fixed list of public regions stands in.
    "tests/core/test_utils.py": (
        "offline: EC2 describe_regions at import replaced by a fixed region list",
        (
            (
                '    ec2 = boto3.client("ec2")\n'
                "    response = ec2.describe_regions()\n"
                '    regions = [r["RegionName"] for r in response["Regions"]]\n',
                '    regions = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1",\n'
                '               "eu-central-1", "ap-northeast-1", "ap-southeast-2", "sa-east-1"]\n',
            ),
        ),
    ),
}


@dataclass
class Outcome:
    """One junit testcase reduced to what the comparison needs."""

    test_id: str
    status: str  # passed / failed / error / skipped
    message: str = ""


@dataclass
class Summary:
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes.values() if o.status == status)

    def line(self, label: str) -> str:
        return (
            f"{label}: {self.count('passed')} passed, {self.count('failed')} failed, "
            f"{self.count('skipped')} skipped, {self.count('error')} errors "
            f"of {len(self.outcomes)} collected"
        )


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def materialize(source: Path, rev: str, dest: Path) -> None:
    """Put the upstream entries the tests need under ``dest``, never ``smdebug/``."""
    if _is_git_dir(source) or ((source / ".git").exists() and not (source / "tests").is_dir()):
        git_dir = source if _is_git_dir(source) else source / ".git"
        archive = subprocess.run(
            ["git", "--git-dir", str(git_dir), "archive", "--format=tar", rev, *MATERIALIZED],
            check=True,
            capture_output=True,
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        return
    if not (source / "tests").is_dir():
        raise SystemExit(
            f"{source}: expected a git directory (with HEAD and objects/) or a checked-out "
            "sagemaker-debugger tree (with tests/)"
        )
    for name in MATERIALIZED:
        if (source / name).is_dir():
            shutil.copytree(source / name, dest / name, symlinks=True)


def apply_patches(root: Path) -> None:
    for rel, (_why, replacements) in PATCHES.items():
        path = root / rel
        text = path.read_text()
        for old, new in replacements:
            if old not in text:
                raise SystemExit(f"{path}: expected text not found, cannot patch: {old!r}")
            text = text.replace(old, new, 1)
        path.write_text(text)
    # An empty ini pins pytest's rootdir here so no configuration above /tmp is picked up.
    (root / "pytest.ini").write_text("[pytest]\n")


def _test_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
    env.pop("PYTHONPATH", None)
    env.update(
        {
            # No instance metadata lookups: S3 tests fail fast offline instead of waiting.
            "AWS_EC2_METADATA_DISABLED": "true",
            "PYTHONDONTWRITEBYTECODE": "1",
            "TF_CPP_MIN_LOG_LEVEL": "1",  # as upstream's config/tests.sh
        }
    )
    return env


def check_interpreter(python: str) -> None:
    probe = subprocess.run(
        [python, "-c", "import pytest, pytest_timeout"], capture_output=True, text=True, cwd="/"
    )
    if probe.returncode != 0:
        raise SystemExit(
            f"{python}: cannot import pytest and pytest_timeout (install both into it): "
            f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else probe.returncode}"
        )


def run_pytest(root: Path, python: str, junit: Path, pytest_args: list[str]) -> int:
    ignores = [f"--ignore={p}" for p in EXCLUDED] + [f"--deselect={t}" for t in DESELECTED]
    paths = [a for a in pytest_args if a == "tests" or a.startswith("tests/")]
    cmd = [
        python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        f"--timeout={PER_TEST_TIMEOUT_S}",
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit1",
        "-q",
        "-rN",
        "--disable-warnings",
        # Pytest's own traceback formatting re-parses source with ast and trips a CPython 3.11
        # "AST constructor recursion depth mismatch" SystemError on some failures here,
        # aborting the whole session; native tracebacks avoid it.
        "--tb=native",
        # Modules that cannot import (no TensorFlow in one venv, no torchvision in either) must
        # not stop the rest of the suite.
        "--continue-on-collection-errors",
        *ignores,
        *pytest_args,
        *([] if paths else ["tests"]),
    ]
    print("running:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=root, env=_test_env()).returncode


def _node_id(case: ET.Element) -> str:
    """Rebuild a pytest node id from a junit testcase (its file, classes and name)."""
    classname, name = case.get("classname", ""), case.get("name", "")
    if not classname:  # collection errors name the module in ``name``
        return case.get("file") or name.replace(".", "/") + ".py"
    parts = classname.split(".")
    module = [p for p in parts if not p.startswith("Test")]
    classes = [p for p in parts if p.startswith("Test")]
    return "::".join([case.get("file") or "/".join(module) + ".py", *classes, name])


_EXCEPTION_LINE = re.compile(r"^(E\s+)?([\w.]+(Error|Exception|Exit|Warning|Interrupt)\b.*)$")
_GENERIC_MESSAGES = (
    "collection failure",
    "internal error",
    "failed on setup",
    "failed on teardown",
)


def _error_line(message: str | None, text: str | None) -> str:
    """The line naming the exception: junit's message, unless pytest made it generic."""
    lines = (message or "").strip().splitlines()
    first = lines[0] if lines else ""
    if first and not first.startswith(_GENERIC_MESSAGES):
        return first[:240]
    found = ""
    for line in (text or "").splitlines():
        match = _EXCEPTION_LINE.match(line.strip())
        if match:
            found = match.group(2)  # the last one is the exception that ended the test
    return (found or first)[:240]


def parse_junit(path: Path) -> Summary:
    summary = Summary()
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = _node_id(case)
        status, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                status = {"failure": "failed"}.get(child.tag, child.tag)
                message = _error_line(child.get("message"), child.text)
                break
        previous = summary.outcomes.get(test_id)
        # A test that passed but errored in teardown appears twice; the error wins.
        if previous is None or previous.status == "passed":
            summary.outcomes[test_id] = Outcome(test_id, status, message)
    return summary


def regressions(ours: Summary, baseline: Summary) -> list[Outcome]:
    """Baseline-passing tests that do not pass with ours; an uncollected one carries the error
    that failed its module's collection."""
    lost = []
    for test_id in sorted(t for t, o in baseline.outcomes.items() if o.status == "passed"):
        outcome = ours.outcomes.get(test_id)
        if outcome is None:
            module = ours.outcomes.get(test_id.split("::")[0])
            message = f"not collected: {module.message}" if module else "not collected"
            lost.append(Outcome(test_id, "error", message))
        elif outcome.status != "passed":
            lost.append(outcome)
    return lost


def compare(ours: Summary, baseline: Summary) -> None:
    passed_before = baseline.count("passed")
    lost = regressions(ours, baseline)
    kept = passed_before - len(lost)
    rate = 100.0 * kept / passed_before if passed_before else 0.0
    print(f"compare: {kept} of {passed_before} baseline-passing tests pass ({rate:.1f}%)")
    for outcome in lost:
        print(f"REGRESSED {outcome.test_id}\t{outcome.status}: {outcome.message}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="git dir or checkout of sagemaker-debugger")
    parser.add_argument("--rev", default=DEFAULT_REV, help="revision to take from a git dir")
    parser.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter to test with")
    parser.add_argument("--junit", type=Path, default=Path("upstream_junit.xml").resolve())
    parser.add_argument("--passed-out", type=Path, help="write the passing test ids here")
    parser.add_argument("--compare", type=Path, help="baseline junit xml to compare with")
    parser.add_argument("--keep", action="store_true", help="keep the temporary tree")
    parser.add_argument(
        "--no-run", action="store_true", help="only summarize (and compare) an existing --junit"
    )
    parser.add_argument(
        "--list-excluded", action="store_true", help="print what is left out and why, then exit"
    )
    args = parser.parse_args(argv)

    if args.list_excluded:
        for path, why in {**EXCLUDED, **DESELECTED}.items():
            print(f"{path}\t{why}")
        for path, (why, _) in PATCHES.items():
            print(f"{path}\tpatched: {why}")
        return 0
    junit = args.junit.resolve()
    rc = 0
    if not args.no_run:
        check_interpreter(args.python)
        root = Path(tempfile.mkdtemp(prefix="smd-upstream-"))
        try:
            materialize(args.source.resolve(), args.rev, root)
            apply_patches(root)
            rc = run_pytest(root, args.python, junit, pytest_args)
        finally:
            if args.keep:
                print(f"kept {root}")
            else:
                shutil.rmtree(root, ignore_errors=True)
    if not junit.is_file():
        print(f"pytest wrote no junit file (exit {rc})", file=sys.stderr)
        return rc or 1
    summary = parse_junit(junit)
    print(summary.line("upstream"))
    if args.passed_out:
        ids = sorted(t for t, o in summary.outcomes.items() if o.status == "passed")
        args.passed_out.write_text("".join(f"{t}\n" for t in ids))
    if args.compare:
        compare(summary, parse_junit(args.compare))
    return 0


if __name__ == "__main__":
    sys.exit(main())
