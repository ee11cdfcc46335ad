"""The documentation site builds with ``mkdocs build --strict``: a broken link, anchor or
reference, a page left out of the nav or a docstring mkdocstrings cannot render fails here. The
API reference holds every documented class and function, and the command line reference every
command."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (mkdocs builds the whole site once for the module: the full tier's)
pytestmark = pytest.mark.slow

# page of the API reference -> objects it documents (the anchors mkdocstrings gives them)
API = {
    "hooks": ["smdebug_lite.pytorch.Hook", "smdebug_lite.pytorch.Hook.register_module",
              "smdebug_lite.pytorch.Hook.save_scalar", "smdebug_lite.tensorflow.KerasHook",
              "smdebug_lite.tensorflow.KerasHook.wrap_tape", "smdebug_lite.xgboost.Hook",
              "smdebug_lite.pytorch.Hook.create_from_json_file", "smdebug_lite.xgboost.Hook.close"],
    "config": ["smdebug_lite.config.SaveConfig", "smdebug_lite.config.SaveConfigMode",
               "smdebug_lite.config.ReductionConfig", "smdebug_lite.config.Collection",
               "smdebug_lite.config.CollectionManager", "smdebug_lite.modes.ModeKeys"],
    "trials": ["smdebug_lite.trials.create_trial", "smdebug_lite.trials.Trial",
               "smdebug_lite.trials.Trial.tensor_names", "smdebug_lite.trials.Tensor",
               "smdebug_lite.trials.Tensor.value", "smdebug_lite.trials.Tensor.reduction_value"],
    "rules": ["smdebug_lite.rules.Rule", "smdebug_lite.rules.invoke_rule",
              "smdebug_lite.rules.RequiredTensors", "smdebug_lite.rules.Actions",
              "smdebug_lite.rules.builtin.get_builtin_rule"],
    "export": ["smdebug_lite.export.export_trial", "smdebug_lite.export.export_tensorboard",
               "smdebug_lite.export.to_pandas", "smdebug_lite.export.sweep.export_sweep"],
    "report": ["smdebug_lite.report.write_report"],
    "callbacks": ["smdebug_lite.lightning.DebuggerCallback",
                  "smdebug_lite.huggingface.DebuggerCallback"],
    "distributed": ["smdebug_lite.distributed.expand_trials", "smdebug_lite.distributed.RuleJob",
                    "smdebug_lite.distributed.evaluate_jobs", "smdebug_lite.distributed.evaluate_job"],
}
CLI_COMMANDS = ["summary", "ls", "show", "rules", "export", "report", "tensorboard", "compact"]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python", "typer"):
        if importlib.util.find_spec(module.split(".")[0]) is None or \
                importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the docs extra)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.timeout(660)
def test_api_reference_documents_the_public_api(site) -> None:
    for page, objects in API.items():
        html = (site / "api" / page / "index.html").read_text()
        missing = [o for o in objects if f'id="{o}"' not in html]
        assert not missing, f"api/{page}.md lacks {missing}"


@pytest.mark.timeout(660)
def test_hooks_show_their_public_constructor_signature(site) -> None:
    """The hooks' __init__ gets its signature at import time (hooks.arguments.hook_constructor);
    scripts/docs_griffe.py shows that one, not the decorated body's ``(shared)``."""
    page = (site / "api" / "hooks" / "index.html").read_text()
    signatures = [" ".join(html.unescape(re.sub("<[^>]+>", "", s)).split())
                  for s in re.findall(r'<div class="doc-signature[^>]*>(.*?)</div>', page, re.S)]
    constructors = [s for s in signatures if s.startswith(("Hook(", "KerasHook("))]
    assert len(constructors) == 3, signatures
    for s in constructors:
        assert "out_dir" in s and "include_workers" in s and "shared" not in s, s


@pytest.mark.timeout(660)
def test_api_reference_lists_every_builtin_rule(site) -> None:
    from smdebug_lite.rules.builtin import BUILTIN_RULES

    html = (site / "api" / "rules" / "index.html").read_text()
    missing = [n for n in BUILTIN_RULES if f'id="smdebug_lite.rules.builtin.{n}"' not in html]
    assert not missing, f"api/rules.md lacks the built-in rules {missing}"


@pytest.mark.timeout(660)
def test_cli_reference_has_every_command(site) -> None:
    html = (site / "api" / "cli" / "index.html").read_text()
    assert "cli-reference" not in html, "the command reference was not generated"
    for command in CLI_COMMANDS:
        assert f"Usage: smdebug-lite {command} " in html, command


@pytest.mark.timeout(660)
def test_pages_of_the_site(site) -> None:
    home = (site / "index.html").read_text()
    assert 'id="install"' in home and 'src="report.png"' in home and 'src="cli.svg"' in home
    assert (site / "report.png").is_file() and (site / "cli.svg").is_file()
    assert "import smdebug" in (site / "migration" / "index.html").read_text()
    assert "[0.1.0]" in (site / "changelog" / "index.html").read_text()
    assert "Benchmark results" in (site / "benchmarks" / "index.html").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert (site / page.stem / "index.html").is_file() or page.stem == "index", page.name
