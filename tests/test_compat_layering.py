"""smdebug_lite.compat sits on top of smdebug_lite, never under it, and serves the smdebug.core
modules docs/compatibility.md promises.

The compatibility layer may import anything; the library must not import the layer, or its own
imports would pull in smdebug's shapes (and their import cost) and could not stand alone.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import _smdebug_lite_alias
import smdebug_lite

REPO = Path(__file__).resolve().parents[1]
COMPAT = "smdebug_lite.compat"
# Extras a module may need (pyproject's optional dependencies, by import name).
OPTIONAL_FRAMEWORKS = {"torch", "tensorflow", "keras", "tf_keras", "xgboost", "pandas", "horovod",
                       "lightning", "pytorch_lightning", "transformers", "accelerate", "ray",
                       "pyarrow", "typer", "click", "rich", "matplotlib", "duckdb"}


def _needs_absent_framework(exc: BaseException | None) -> bool:
    name = getattr(exc, "name", None) or ""
    return isinstance(exc, ModuleNotFoundError) and name.split(".")[0] in OPTIONAL_FRAMEWORKS


def _walk_smdebug_lite() -> tuple[dict[str, Path], dict[str, str]]:
    """({module: source file} of every module pkgutil finds, {module: the absent framework} of
    those that could not be imported for want of one). Any other import failure fails."""
    skipped: dict[str, str] = {}

    def onerror(name: str) -> None:
        exc = sys.exc_info()[1]
        if not _needs_absent_framework(exc):
            raise AssertionError(f"importing {name} failed: {exc!r}") from exc
        skipped[name] = exc.name  # type: ignore[union-attr]

    sources: dict[str, Path] = {}
    walks = [pkgutil.walk_packages(smdebug_lite.__path__, "smdebug_lite.", onerror=onerror)]
    # The images' programs: at the repository's top level in a checkout, which the walk of the
    # package's own directory does not list.
    for program in ("smdebug_lite.container", "smdebug_lite.rule_runner"):
        package = importlib.import_module(program)
        sources[program] = Path(package.__file__)
        walks.append(pkgutil.walk_packages(package.__path__, f"{program}.", onerror=onerror))
    for info in itertools.chain(*walks):
        spec = info.module_finder.find_spec(info.name)  # type: ignore[call-arg]
        assert spec is not None and spec.origin, info.name
        sources[info.name] = Path(spec.origin)
        if info.name in skipped:
            continue
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as e:
            if not _needs_absent_framework(e):
                raise
            skipped[info.name] = str(e.name)
    # A package skipped for a missing framework is not descended into; read its files anyway.
    for name in list(skipped):
        origin = sources.get(name)
        if origin is not None and origin.name == "__init__.py":
            for path in origin.parent.rglob("*.py"):
                rel = path.relative_to(origin.parent).with_suffix("")
                parts = [p for p in rel.parts if p != "__init__"]
                sources.setdefault(".".join([name, *parts]), path)
    return sources, skipped


def _imported_modules(source: Path, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in `source`, relative ones
    resolved; ``from pkg import name`` also counts as importing ``pkg.name``."""
    tree = ast.parse(source.read_text(), filename=str(source))
    package = module if source.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _is_compat(name: str) -> bool:
    return name == COMPAT or name.startswith(COMPAT + ".")


@pytest.fixture(scope="module")
def walked() -> tuple[dict[str, Path], dict[str, str]]:
    return _walk_smdebug_lite()


def test_walk_finds_the_library_and_its_compat_layer(walked):
    sources, skipped = walked
    assert {"smdebug_lite.trials.trial", "smdebug_lite.compat.core.utils",
            "smdebug_lite.container.train", "smdebug_lite.rule_runner.runner"} <= set(sources)
    # smdebug.core's modules need no framework: they must always import.
    assert not [n for n in skipped if n.startswith(COMPAT + ".core")], skipped


def test_no_module_outside_compat_imports_compat(walked):
    sources, _ = walked
    offenders = [
        f"{module} ({path.relative_to(REPO)}:{line}) imports {name}"
        for module, path in sorted(sources.items())
        if not _is_compat(module)
        for line, name in _imported_modules(path, module)
        if _is_compat(name)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_import_check_sees_relative_and_from_imports(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(
        "import os\n"
        "from .. import compat\n"
        "def f():\n"
        "    from ..compat.core import utils\n"
        "    import smdebug_lite.compat.core.writer\n"
        "    from smdebug_lite import compat as c\n"
    )
    found = _imported_modules(src, "smdebug_lite.trials.mod")
    assert sorted((line, n) for line, n in found if _is_compat(n)) == [
        (2, "smdebug_lite.compat"),
        (4, "smdebug_lite.compat.core"),
        (4, "smdebug_lite.compat.core.utils"),
        (5, "smdebug_lite.compat.core.writer"),
        (6, "smdebug_lite.compat"),
    ]


def _documented_core_modules() -> list[str]:
    """Every public ``smdebug.core`` module docs/compatibility.md names: full dotted names, the
    ``.sibling`` shorthand of a table's first column, and the submodules a package's row lists
    (`` `utils`: ``, `` `util` (``, `` `record_reader.RecordReader` ``)."""
    text = (REPO / "docs" / "compatibility.md").read_text()
    names = set(re.findall(r"smdebug\.core(?:\.[a-z0-9_]+)*", text))
    for row in text.splitlines():
        cells = row.split("|")
        if not row.startswith("| `smdebug.core") or len(cells) < 3:
            continue
        tokens = re.findall(r"`([a-z0-9_.]+)`", cells[1])
        first = tokens[0]
        names.update(first.rpartition(".")[0] + t for t in tokens[1:] if t.startswith("."))
        if len(tokens) == 1 and _resolves_to_package(first):
            subs = re.findall(r"`([a-z0-9_]+)(?:`(?::| \()|\.[A-Z]\w*`)", cells[2])
            names.update(f"{first}.{sub}" for sub in subs)
    return sorted(n for n in names if not any(p.startswith("_") for p in n.split(".")))


def _resolves_to_package(name: str) -> bool:
    target = _smdebug_lite_alias._resolve(name[len("smdebug") :])
    return target is not None and target.submodule_search_locations is not None


def test_alias_resolves_every_documented_smdebug_core_module():
    _smdebug_lite_alias.install()
    importlib.import_module("smdebug")
    names = _documented_core_modules()
    # The tables name about thirty modules; far fewer means the doc's layout was misread.
    assert len(names) >= 30, names
    for sub in ("smdebug.core.access_layer.s3handler", "smdebug.core.tfevent.util",
                "smdebug.core.tfrecord.tensor_reader", "smdebug.core.reduction_config"):
        assert sub in names
    unresolved = []
    for name in names:
        spec = _smdebug_lite_alias._resolve(name[len("smdebug") :])
        if spec is None:
            unresolved.append(name)
            continue
        target = spec.name
        assert _is_compat(target), f"{name} -> {target}: smdebug_lite has no core package"
        assert importlib.import_module(name) is importlib.import_module(target), name
    assert not unresolved, unresolved


def test_an_aliased_module_keeps_its_own_spec():
    _smdebug_lite_alias.install()
    modes = importlib.import_module("smdebug.core.modes")
    assert modes.__spec__.name == "smdebug_lite.compat.core.modes"
    assert not hasattr(modes, "__path__")  # a module, not a package
    assert importlib.import_module("smdebug.core.access_layer").__path__


def _run_fresh(code: str) -> None:
    """Run `code` in a new interpreter (nothing imported yet) on the checkout; it must exit 0."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_from_an_smdebug_package_import_a_compat_submodule():
    """``from smdebug.pytorch import singleton_utils`` with nothing imported before it: the
    submodule lives in compat, the package in smdebug_lite (a fresh interpreter, so no earlier
    dotted import has put it in sys.modules)."""
    code = (
        "import _smdebug_lite_alias; _smdebug_lite_alias.install()\n"
        "from smdebug.pytorch import singleton_utils\n"
        "from smdebug.core import modes\n"
        "import smdebug_lite.compat.pytorch.singleton_utils as real\n"
        "assert singleton_utils is real, singleton_utils\n"
        "assert modes.ModeKeys.TRAIN.value == 1\n"
        "import importlib.util\n"
        "assert importlib.util.find_spec('smdebug_lite.pytorch.no_such_module') is None\n"
    )
    _run_fresh(code)


def test_compat_packages_load_each_module_once():
    """Importing smdebug's action modules through the alias executes each compat file once:
    no copy of a compat module under an ``smdebug_lite.<pkg>`` name."""
    code = (
        "import sys, _smdebug_lite_alias; _smdebug_lite_alias.install()\n"
        "import smdebug.rules.action.action, smdebug.rules.action.message_action\n"
        "from smdebug.rules.action import Actions\n"
        "import smdebug.core.modes\n"
        "seen = {}\n"
        "for name, m in list(sys.modules.items()):\n"
        "    f = getattr(m, '__file__', None) or ''\n"
        "    if '/compat/' in f:\n"
        "        seen.setdefault(f, {})[id(m)] = name\n"
        "dupes = {f: sorted(ids.values()) for f, ids in seen.items() if len(ids) > 1}\n"
        "assert not dupes, dupes\n"
    )
    _run_fresh(code)
