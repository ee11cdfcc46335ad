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
        [--keras 2|3|both [--no-examples | --examples-only]] [--working-tree] [--timeout S]
        [-- PYTEST_ARGS...]

Without ``--keras`` the whole selected suite runs as it always has. ``--keras 2`` (Keras 2
through tf_keras: ``TF_USE_LEGACY_KERAS=1``) or ``--keras 3`` (the variable unset) runs only the
TensorFlow 2 suite (``tests/tensorflow2`` and the TF2 Keras zero-code-change modules) and the two
published TF2 example programs (each in a pytest process of its own), offline
(``scripts/upstream_offline.py`` stands in for the dataset downloads); ``--keras both`` runs the
two flavours one after the other. Each flavour prints
``upstream tensorflow2 (Keras 2 / tf_keras): N passed, ... of T collected`` with every failing
test and its error line, then one ``example PROGRAM (...): PASS|FAIL`` line per program.

``import smdebug`` is whatever the interpreter imports from outside this checkout: for the project
venv, the copy of smdebug-lite installed into it. ``--working-tree`` tests this checkout's
``smdebug_lite`` instead.
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


# ---------------------------------------------------------------------------------------------
# The TensorFlow 2 suite, under Keras 2 (tf_keras) or Keras 3
# ---------------------------------------------------------------------------------------------

KERAS_FLAVOURS = {"2": "Keras 2 / tf_keras", "3": "Keras 3"}
TF2_PER_TEST_TIMEOUT_S = 600
OFFLINE_PLUGIN = "upstream_offline"  # scripts/upstream_offline.py, loaded with -p

# smdebug's TF2 tests: the tensorflow2 directory and the zero-code-change modules that train a
# TF2 Keras model (the TF1 ones stay in EXCLUDED).
TF2_PATHS = (
    "tests/tensorflow2",
    "tests/zero_code_change/test_tensorflow2_integration.py",
    "tests/zero_code_change/test_tensorflow2_gradtape_integration.py",
    "tests/zero_code_change/test_tensorflow_disengage_smdebug.py",
)

# smdebug's published TF2 example programs (pytest modules with their own out_dir fixture).
TF2_EXAMPLES = (
    "examples/tensorflow2/scripts/tf2_save_metrics.py",
    "examples/tensorflow2/scripts/tf_save_metrics_gradient_tape.py",
)

# Left out of the TF2 runs in both flavours, besides EXCLUDED and DESELECTED.
TF2_EXCLUDED: dict[str, str] = {
    "tests/zero_code_change/test_tensorflow2_bert.py": "downloads the pretrained "
    "bert-base-uncased model and the GLUE/MRPC dataset (no network here); commented out of "
    "upstream CI (config/tests.sh) as well",
    "tests/zero_code_change/test_tensorflow2_error_handling_agent.py": "trains with no hook and "
    "expects Keras' own fit and GradientTape to build one from the JSON, as AWS's TensorFlow "
    "builds did (TensorFlow from PyPI has no such call; smdebug-lite's zero code change is the "
    "smdebug-train launcher); commented out of upstream CI (config/tests.sh) as well",
}
TF2_DESELECTED: dict[str, str] = {
    "tests/tensorflow2/test_keras.py::test_hook_timeline_file_write": "profiler: checks the "
    "timeline file the profiler writes",
}

_LEGACY_OPT = "tf.keras.optimizers.legacy optimizer (Keras 3 has none)"
_SAVE_TF = 'model.save(dir, save_format="tf") (Keras 3 saves .keras/.h5 files only)'
_FIT_HELPER = f"helper_keras_fit: {_LEGACY_OPT}, {_SAVE_TF}"
_TAPE_HELPER = (
    f"helper_keras_gradtape: {_LEGACY_OPT}, metric.reset_states() (reset_state() in Keras 3), "
    f"{_SAVE_TF}"
)
# Left out of the Keras 3 run only: the test's own code calls an API Keras 3 removed. Tests that
# skip themselves on TF >= 2.6/2.7 whatever the Keras (their own skipif) are not listed.
_K3_KERAS = "tests/tensorflow2/test_keras.py::"
KERAS3_DESELECTED: dict[str, str] = {
    **{
        f"{_K3_KERAS}{name}": _TAPE_HELPER
        for name in (
            "test_layer_names_gradient_tape",
            "test_keras_gradtape_shapes",
            "test_keras_gradtape[True]",
            "test_keras_gradtape[False]",
            "test_gradtape_base_reductions",
            "test_gradtape_collection_reductions",
            "test_gradtape_include_regex",
            "test_gradtape_training_end",
            "test_gradtape_weights_collections",
            "test_gradtape_include_collections",
            "test_gradtape_hook_from_json",
            "test_gradtape_persistent[True]",
            "test_gradtape_persistent[False]",
        )
    },
    **{
        f"{_K3_KERAS}{name}": _FIT_HELPER
        for name in (
            "test_keras_fit[True]",
            "test_keras_fit[False]",
            "test_keras_fit_shapes",
            "test_base_reductions",
            "test_collection_reductions",
            "test_include_regex",
            "test_layer_names",
            "test_regex_filtering_for_default_collections",
            "test_training_end",
            "test_weights_collections",
            "test_include_collections",
            "test_include_only_custom_collection",
            "test_hook_from_json",
            "test_keras_fit_pure_eager",
            "test_model_inputs_and_outputs",
            "test_save_tensors",
        )
    },
    f"{_K3_KERAS}test_clash_with_tb_callback": f"{_FIT_HELPER}; TensorBoard(write_grads=True) "
    "(argument removed in Keras 3)",
    "tests/tensorflow2/test_embedding_grad.py::test_embedding_grad": f"{_LEGACY_OPT}; its "
    "train_step uses Keras 2's Model.compiled_loss / compiled_metrics",
    "tests/tensorflow2/test_grad_tape_tf_function.py::test_gradtape_tf_function": (
        f"{_LEGACY_OPT}, {_SAVE_TF}"
    ),
    "tests/tensorflow2/test_keras_lstm.py::test_lstm_and_generator": f"{_LEGACY_OPT}, "
    "Model.fit_generator (removed in Keras 3)",
}

# Modules left out of the Keras 3 run only: they import, at module level, a name Keras 3 removed,
# so not one of their tests can be collected.
KERAS3_EXCLUDED: dict[str, str] = {
    "tests/tensorflow2/test_functional_model.py": "imports "
    "tf.keras.optimizers.legacy.Adadelta at module level (Keras 3 has no legacy Adadelta)",
}

_OPTIONAL_PROFILER_RESET = (
    "from smdebug.profiler.profiler_config_parser import reset_profiler_config_parser\n",
    "try:\n"
    "    from smdebug.profiler.profiler_config_parser import reset_profiler_config_parser\n"
    "except ImportError:  # no profiler: nothing to reset\n\n"
    "    def reset_profiler_config_parser():\n"
    "        pass\n",
)
# Run-time patches applied to the TF2 runs only (the default run keeps PATCHES alone).
TF2_PATCHES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    # Both modules import the profiler's config parser at module level only to reset it after
    # each test; without a profiler the whole module would fail to import.
    "tests/tensorflow2/test_config_validator_tensorflow.py": (
        "module-level profiler import made optional (used only to reset it after each test)",
        (_OPTIONAL_PROFILER_RESET,),
    ),
    "tests/zero_code_change/test_tensorflow_disengage_smdebug.py": (
        "module-level profiler import made optional (used only to reset it after each test)",
        (_OPTIONAL_PROFILER_RESET,),
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


def apply_patches(root: Path, extra: dict | None = None) -> None:
    for rel, (_why, replacements) in {**PATCHES, **(extra or {})}.items():
        path = root / rel
        text = path.read_text()
        for old, new in replacements:
            if old not in text:
                raise SystemExit(f"{path}: expected text not found, cannot patch: {old!r}")
            text = text.replace(old, new, 1)
        path.write_text(text)
    # An empty ini pins pytest's rootdir here so no configuration above /tmp is picked up.
    (root / "pytest.ini").write_text("[pytest]\n")


def link_working_tree(root: Path) -> str:
    """A directory (inside the temporary tree) holding a copy of this checkout's ``smdebug_lite``
    and alias module, taken once: on PYTHONPATH it makes the run test the working tree rather than
    the copy installed in the interpreter, the same code for every flavour of one run, without
    putting this repository's ``tests`` package on the path."""
    repo = Path(__file__).resolve().parents[1]
    lib = root / "_working_tree"
    lib.mkdir()
    shutil.copytree(
        repo / "smdebug_lite",
        lib / "smdebug_lite",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    shutil.copy2(repo / "_smdebug_lite_alias.py", lib / "_smdebug_lite_alias.py")
    return str(lib)


def _test_env(
    keras: str | None = None, reset_states: bool = False, pythonpath: tuple[str, ...] = ()
) -> dict[str, str]:
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
    paths = list(pythonpath)
    if keras is not None:
        # The offline plugin is imported from this directory, never from the upstream tree.
        paths.append(str(Path(__file__).resolve().parent))
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    if keras is not None:
        env.pop("UPSTREAM_OFFLINE_RESET_STATES", None)
        if keras == "2":
            env["TF_USE_LEGACY_KERAS"] = "1"
        else:
            env.pop("TF_USE_LEGACY_KERAS", None)
            if reset_states:
                env["UPSTREAM_OFFLINE_RESET_STATES"] = "1"
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


@dataclass
class Selection:
    """What one pytest run collects and leaves out."""

    default_paths: tuple[str, ...] = ("tests",)
    excluded: tuple[str, ...] = tuple(EXCLUDED)
    deselected: tuple[str, ...] = tuple(DESELECTED)
    timeout_s: int = PER_TEST_TIMEOUT_S
    keras: str | None = None  # "2" / "3": a TF2 run, offline plugin loaded
    reset_states: bool = False  # Keras 3 example programs only
    pythonpath: tuple[str, ...] = ()  # --working-tree: the checkout's smdebug_lite first


def tf2_selection(
    keras: str, timeout_s: int | None = None, pythonpath: tuple[str, ...] = ()
) -> Selection:
    deselected = {**DESELECTED, **TF2_DESELECTED, **(KERAS3_DESELECTED if keras == "3" else {})}
    return Selection(
        default_paths=TF2_PATHS,
        excluded=tuple({**EXCLUDED, **TF2_EXCLUDED, **(KERAS3_EXCLUDED if keras == "3" else {})}),
        deselected=tuple(deselected),
        timeout_s=timeout_s or TF2_PER_TEST_TIMEOUT_S,
        keras=keras,
        pythonpath=pythonpath,
    )


def examples_selection(
    keras: str, timeout_s: int | None = None, pythonpath: tuple[str, ...] = ()
) -> Selection:
    return Selection(
        default_paths=TF2_EXAMPLES,
        excluded=(),
        deselected=(),
        timeout_s=timeout_s or TF2_PER_TEST_TIMEOUT_S,
        keras=keras,
        # Keras 3 renamed Metric.reset_states() to reset_state(); the gradient-tape example
        # calls the old name once per epoch, so the plugin gives it back for the examples.
        reset_states=keras == "3",
        pythonpath=pythonpath,
    )


def _smdebug_location(python: str, root: Path, env: dict[str, str]) -> str:
    """Where the run's ``import smdebug`` comes from (an installed copy may be older than the
    checkout: --working-tree tests the checkout)."""
    probe = subprocess.run(
        [python, "-c", "import smdebug, sys; sys.stdout.write(smdebug.__file__)"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        lines = probe.stderr.strip().splitlines()
        return f"(import failed: {lines[-1] if lines else probe.returncode})"
    return str(Path(probe.stdout).resolve())


def run_pytest(
    root: Path, python: str, junit: Path, pytest_args: list[str], selection: Selection | None = None
) -> int:
    selection = selection or Selection()
    ignores = [f"--ignore={p}" for p in selection.excluded]
    ignores += [f"--deselect={t}" for t in selection.deselected]
    paths = [
        a
        for a in pytest_args
        if a in ("tests", "examples") or a.startswith(("tests/", "examples/"))
    ]
    plugin = ["-p", OFFLINE_PLUGIN] if selection.keras else []
    cmd = [
        python,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        *plugin,
        f"--timeout={selection.timeout_s}",
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
        *([] if paths else list(selection.default_paths)),
    ]
    env = _test_env(selection.keras, selection.reset_states, selection.pythonpath)
    if selection.keras:
        print(f"environment: TF_USE_LEGACY_KERAS={env.get('TF_USE_LEGACY_KERAS', '(unset)')}")
    print(f"smdebug under test: {_smdebug_location(python, root, env)}", flush=True)
    print("running:", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=root, env=env).returncode


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


def _suffixed(path: Path, tag: str) -> Path:
    return path.with_name(f"{path.stem}.{tag}{path.suffix}")


def _non_passing(summary: Summary) -> list[Outcome]:
    return [o for _, o in sorted(summary.outcomes.items()) if o.status in ("failed", "error")]


def example_junit(junit: Path, program: str) -> Path:
    return _suffixed(junit, f"example-{Path(program).stem}")


def tf2_report(
    keras: str, tests_junit: Path, tests: bool = True, examples: bool = True
) -> list[str]:
    """Print one flavour's results (counts, then each failure with its error line); returns the
    count lines for the closing summary."""
    label = KERAS_FLAVOURS[keras]
    lines = []
    if tests and tests_junit.is_file():
        summary = parse_junit(tests_junit)
        line = summary.line(f"upstream tensorflow2 ({label})")
        print(line)
        for outcome in _non_passing(summary):
            print(f"  {outcome.status.upper()} {outcome.test_id}\t{outcome.message}")
        lines.append(line)
    for program in TF2_EXAMPLES if examples else ():
        junit = example_junit(tests_junit, program)
        if not junit.is_file():
            continue
        mine = parse_junit(junit)
        bad = _non_passing(mine)
        verdict = "FAIL" if bad or not mine.outcomes else "PASS"
        line = f"example {Path(program).name} ({label}): {verdict}: " + mine.line("")[2:]
        print(line)
        for outcome in bad:
            print(f"  {outcome.status.upper()} {outcome.test_id}\t{outcome.message}")
        lines.append(line)
    return lines


def list_excluded(keras: str | None) -> None:
    for path, why in {**EXCLUDED, **DESELECTED}.items():
        print(f"{path}\t{why}")
    if keras is not None:
        for path, why in {**TF2_EXCLUDED, **TF2_DESELECTED}.items():
            print(f"{path}\t{why}")
        if keras in ("3", "both"):
            for path, why in {**KERAS3_EXCLUDED, **KERAS3_DESELECTED}.items():
                print(f"{path}\t[Keras 3 only] {why}")
    for path, (why, _) in PATCHES.items():
        print(f"{path}\tpatched: {why}")
    if keras is not None:
        for path, (why, _) in TF2_PATCHES.items():
            print(f"{path}\tpatched: {why}")
        print(
            "examples/tensorflow2/scripts/tf_save_metrics_gradient_tape.py\t[Keras 3 only] "
            "run with Metric.reset_states() given back (Keras 3 renamed it reset_state())"
        )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "source", type=Path, nargs="?", help="git dir or checkout of sagemaker-debugger"
    )
    parser.add_argument("--rev", default=DEFAULT_REV, help="revision to take from a git dir")
    parser.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter to test with")
    parser.add_argument(
        "--junit",
        type=Path,
        help="junit file (default upstream_junit.xml; with --keras upstream_tf2_kerasN_junit.xml,"
        " and with --keras both each flavour's name gets .keras2 / .keras3)",
    )
    parser.add_argument("--passed-out", type=Path, help="write the passing test ids here")
    parser.add_argument("--compare", type=Path, help="baseline junit xml to compare with")
    parser.add_argument("--keep", action="store_true", help="keep the temporary tree")
    parser.add_argument(
        "--no-run", action="store_true", help="only summarize (and compare) an existing --junit"
    )
    parser.add_argument(
        "--list-excluded", action="store_true", help="print what is left out and why, then exit"
    )
    parser.add_argument(
        "--keras",
        choices=("2", "3", "both"),
        help="run the TensorFlow 2 suite offline under Keras 2 (tf_keras, TF_USE_LEGACY_KERAS=1),"
        " Keras 3, or both one after the other",
    )
    examples = parser.add_mutually_exclusive_group()
    examples.add_argument(
        "--no-examples", action="store_true", help="with --keras: skip the TF2 example programs"
    )
    examples.add_argument(
        "--examples-only", action="store_true", help="with --keras: only the TF2 example programs"
    )
    parser.add_argument(
        "--working-tree",
        action="store_true",
        help="test a copy of this checkout's smdebug_lite (taken when the run starts) instead of"
        " the copy installed in the interpreter",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        help=f"seconds per test (default {PER_TEST_TIMEOUT_S}; "
        f"{TF2_PER_TEST_TIMEOUT_S} with --keras)",
    )
    args = parser.parse_args(argv)

    if args.list_excluded:
        list_excluded(args.keras)
        return 0
    if args.source is None and not args.no_run:
        parser.error("the source (git dir or checkout of sagemaker-debugger) is required")
    if args.keras is not None:
        return main_tf2(args, pytest_args)
    junit = (args.junit or Path("upstream_junit.xml")).resolve()
    rc = 0
    if not args.no_run:
        check_interpreter(args.python)
        root = Path(tempfile.mkdtemp(prefix="smd-upstream-"))
        try:
            materialize(args.source.resolve(), args.rev, root)
            apply_patches(root)
            selection = Selection(
                timeout_s=args.timeout or PER_TEST_TIMEOUT_S,
                pythonpath=(link_working_tree(root),) if args.working_tree else (),
            )
            rc = run_pytest(root, args.python, junit, pytest_args, selection)
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


def main_tf2(args: argparse.Namespace, pytest_args: list[str]) -> int:
    """The TF2 suite (and example programs) under one Keras flavour or both, in turn: they
    share smdebug's fixed /tmp/test output directory, so they never run at the same time."""
    flavours = ["2", "3"] if args.keras == "both" else [args.keras]
    if args.compare and len(flavours) > 1:
        raise SystemExit("--compare takes one flavour: use --keras 2 or --keras 3")

    def junit_for(keras: str) -> Path:
        if args.junit is None:
            return Path(f"upstream_tf2_keras{keras}_junit.xml").resolve()
        path = args.junit.resolve()
        return _suffixed(path, f"keras{keras}") if len(flavours) > 1 else path

    root = None
    rc = 0
    if not args.no_run:
        check_interpreter(args.python)
        root = Path(tempfile.mkdtemp(prefix="smd-upstream-tf2-"))
    closing: list[str] = []
    try:
        pythonpath: tuple[str, ...] = ()
        if root is not None:
            materialize(args.source.resolve(), args.rev, root)
            apply_patches(root, TF2_PATCHES)
            if args.working_tree:
                pythonpath = (link_working_tree(root),)
        for keras in flavours:
            junit = junit_for(keras)
            if root is not None:
                print(f"== upstream tensorflow2 under {KERAS_FLAVOURS[keras]}", flush=True)
                if not args.examples_only:
                    junit.unlink(missing_ok=True)
                    selection = tf2_selection(keras, args.timeout, pythonpath)
                    rc = run_pytest(root, args.python, junit, pytest_args, selection) or rc
                if not args.no_examples:
                    # Each program in a process of its own, as it was published to run: Keras
                    # numbers layer names per process, and the programs assert those names.
                    selection = examples_selection(keras, args.timeout, pythonpath)
                    for program in TF2_EXAMPLES:
                        program_junit = example_junit(junit, program)
                        program_junit.unlink(missing_ok=True)
                        run_pytest(root, args.python, program_junit, [program], selection)
            if not args.examples_only and not junit.is_file():
                print(f"pytest wrote no junit file {junit} (exit {rc})", file=sys.stderr)
                return rc or 1
            closing += tf2_report(
                keras, junit, tests=not args.examples_only, examples=not args.no_examples
            )
            if args.passed_out and junit.is_file():
                out = args.passed_out
                out = _suffixed(out, f"keras{keras}") if len(flavours) > 1 else out
                summary = parse_junit(junit)
                ids = sorted(t for t, o in summary.outcomes.items() if o.status == "passed")
                out.write_text("".join(f"{t}\n" for t in ids))
            if args.compare and junit.is_file():
                compare(parse_junit(junit), parse_junit(args.compare))
    finally:
        if root is not None:
            if args.keep:
                print(f"kept {root}")
            else:
                shutil.rmtree(root, ignore_errors=True)
    if len(flavours) > 1:
        print("== summary")
        for line in closing:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
