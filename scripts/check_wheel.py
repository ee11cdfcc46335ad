"""The assertions of scripts/check_wheel.sh: the built sdist and wheel, and smdebug-lite installed
from the wheel alone.

The tests import the checkout, so a file the wheel leaves out (the alias, the proto schema, the
two image programs it maps into the package) would go unnoticed there. Each subcommand checks
one stage and exits non-zero, naming what is wrong:

    contents DIST ROOT    the sdist and wheel in DIST against the source tree ROOT, and metadata
    installed GOLDEN      in the fresh venv (run with python -I): imports, the smdebug alias,
                          package data, and the trials smdebug 1.0.34 wrote (GOLDEN/<name>)
    demo OUT              the demo's rule statuses and report in its output folder
    html FILE...          report pages load nothing from the network

Only the standard library (and, for `installed`, the installed smdebug-lite) is imported.
"""

from __future__ import annotations

import argparse
import email.parser
import email.policy
import hashlib
import importlib
import importlib.util
import json
import sys
import tarfile
import zipfile
from html.parser import HTMLParser
from pathlib import Path

NAME = "smdebug_lite"
# The two image programs live at the repository's top level and install inside the package.
PROGRAMS = ("container", "rule_runner")
# Files beside the programs that stay out of the wheel (pyproject's wheel excludes).
PROGRAM_ONLY_SUFFIXES = (".md", ".lock")
ALIAS_FILES = ("_smdebug_lite_alias.py", "smdebug_lite-alias.pth")
SDIST_REQUIRED = ("pyproject.toml", "README.md", "PKG-INFO", *ALIAS_FILES,
                  "container/__init__.py", "container/train.py",
                  "rule_runner/__init__.py", "rule_runner/__main__.py")
SDIST_IF_PRESENT = ("LICENSE", "CHANGELOG.md")
WHEEL_REQUIRED = (f"{NAME}/__init__.py", f"{NAME}/_build_version.py",
                  f"{NAME}/format/proto/smdebug_lite_event.proto",
                  f"{NAME}/format/proto/smdebug_lite_event_pb2.py",
                  f"{NAME}/container/train.py", f"{NAME}/rule_runner/__main__.py")
CONSOLE_SCRIPTS = {
    "smdebug-lite": "smdebug_lite.cli:main",
    "smdebug-rule-runner": "smdebug_lite.rule_runner.__main__:main",
    "smdebug-train": "smdebug_lite.container.train:main",
}
CLASSIFIERS = (
    "Programming Language :: Python :: 3.10",
    "Programming Language :: Python :: 3.13",
    "Topic :: Scientific/Engineering :: Artificial Intelligence",
)
SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".ruff_cache"}
# The demo's verdicts (demo/run_demo.py's four rules on its seeded run).
DEMO_STATUSES = {"VanishingGradient": "NoIssuesFound", "LossNotDecreasing": "NoIssuesFound",
                 "ExplodingTensor": "NoIssuesFound", "WeightLimit": "IssuesFound"}


class CheckFailed(Exception):
    """One failed expectation; main() prints it and exits 1."""


def expect(condition: object, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


# -- contents --------------------------------------------------------------------------------


def source_files(root: Path, top: str) -> set[str]:
    """Files under root/top as the build sees them (no caches, no compiled files)."""
    return {p.relative_to(root).as_posix() for p in (root / top).rglob("*")
            if p.is_file() and not SKIPPED_PARTS & set(p.relative_to(root).parts)
            and p.suffix != ".pyc"}


def sdist_names(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as tar:
        names = {m.name for m in tar.getmembers() if m.isfile()}
    prefixes = {n.split("/", 1)[0] for n in names}
    expect(len(prefixes) == 1, f"{sdist.name}: more than one top-level folder: {sorted(prefixes)}")
    return {n.split("/", 1)[1] for n in names if "/" in n}


def wheel_in_sdist(name: str) -> str | None:
    """Where a file of the sdist lands in the wheel, or None when it stays out."""
    top = name.split("/", 1)[0]
    if top == NAME:
        return name
    if top in PROGRAMS:
        return None if name.endswith(PROGRAM_ONLY_SUFFIXES) else f"{NAME}/{name}"
    return name if name in ALIAS_FILES else None


def check_sdist(sdist: Path, root: Path) -> set[str]:
    names = sdist_names(sdist)
    for required in SDIST_REQUIRED:
        expect(required in names, f"{sdist.name} lacks {required}")
    for optional in SDIST_IF_PRESENT:
        if (root / optional).is_file():
            expect(optional in names, f"{sdist.name} lacks {optional}")
    for top in (NAME, *PROGRAMS):
        missing = {n for n in source_files(root, top) if not n.endswith("/_build_version.py")}
        missing -= names
        expect(not missing, f"{sdist.name} lacks source files: {sorted(missing)[:10]}")
    return names


def wheel_metadata(zf: zipfile.ZipFile, dist_info: str):
    text = zf.read(f"{dist_info}/METADATA").decode("utf-8")
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


def check_wheel_metadata(zf: zipfile.ZipFile, dist_info: str, version: str) -> None:
    meta = wheel_metadata(zf, dist_info)
    expect(meta["Name"] == "smdebug-lite", f"METADATA Name is {meta['Name']!r}")
    expect(meta["Version"] == version, f"METADATA Version {meta['Version']!r} vs file {version}")
    expect(meta["License-Expression"] == "Apache-2.0",
           f"License-Expression is {meta['License-Expression']!r}")
    expect("LICENSE" in (meta.get_all("License-File") or []), "no License-File: LICENSE")
    expect(f"{dist_info}/licenses/LICENSE" in zf.namelist(), "the wheel does not carry LICENSE")
    expect((meta["Description-Content-Type"] or "").startswith("text/markdown"),
           f"Description-Content-Type is {meta['Description-Content-Type']!r}")
    body = meta.get_payload() or ""
    expect(body.lstrip().startswith("# smdebug-lite"), "the long description is not README.md")
    expect(meta["Requires-Python"], "no Requires-Python")
    expect(meta["Keywords"], "no Keywords")
    classifiers = meta.get_all("Classifier") or []
    for classifier in CLASSIFIERS:
        expect(classifier in classifiers, f"classifier missing: {classifier}")
    # License-Expression supersedes the "License ::" classifiers (PEP 639 deprecates them).
    expect(not [c for c in classifiers if c.startswith("License ::")],
           "License :: classifiers beside License-Expression")
    extras = set(meta.get_all("Provides-Extra") or [])
    expect({"torch", "cli", "report"} <= extras, f"extras: {sorted(extras)}")


def check_entry_points(zf: zipfile.ZipFile, dist_info: str) -> None:
    text = zf.read(f"{dist_info}/entry_points.txt").decode("utf-8")
    lines = {line.replace(" ", "") for line in text.splitlines()}
    for script, target in CONSOLE_SCRIPTS.items():
        expect(f"{script}={target}" in lines, f"console script missing: {script} = {target}")


def check_wheel(wheel: Path, sdist_files: set[str]) -> None:
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = f"{NAME}-{version}.dist-info"
        tops = {n.split("/", 1)[0] for n in names} - {dist_info}
        expect(tops == {NAME, *ALIAS_FILES},
               f"{wheel.name}: unexpected top-level entries {sorted(tops)} "
               f"(the programs belong inside {NAME}/)")
        for required in WHEEL_REQUIRED:
            expect(required in names, f"{wheel.name} lacks {required}")
        expected = {w for n in sdist_files if (w := wheel_in_sdist(n))}
        packaged = {n for n in names if not n.startswith(dist_info)}
        expect(not expected - packaged,
               f"{wheel.name} lacks files the sdist has: {sorted(expected - packaged)[:10]}")
        expect(not packaged - expected,
               f"{wheel.name} has files the sdist lacks: {sorted(packaged - expected)[:10]}")
        expect(not [n for n in names if n.endswith(".pyc") or "__pycache__" in n],
               f"{wheel.name} carries compiled files")
        check_wheel_metadata(zf, dist_info, version)
        check_entry_points(zf, dist_info)


def cmd_contents(args: argparse.Namespace) -> None:
    dist, root = Path(args.dist), Path(args.root)
    sdists, wheels = sorted(dist.glob("*.tar.gz")), sorted(dist.glob("*.whl"))
    expect(len(sdists) == 1 and len(wheels) == 1,
           f"{dist}: want one sdist and one wheel, found {[p.name for p in sdists + wheels]}")
    sdist, wheel = sdists[0], wheels[0]
    expect(wheel.name.endswith("-py3-none-any.whl"), f"{wheel.name}: not a pure-Python wheel")
    version = wheel.name.split("-")[1]
    expect(sdist.name == f"{NAME}-{version}.tar.gz", f"{sdist.name} vs {wheel.name}")
    check_wheel(wheel, check_sdist(sdist, root))
    print(f"contents ok: {sdist.name}, {wheel.name}")


# -- installed -------------------------------------------------------------------------------


def golden_answer(trial, q: dict, mode_keys):
    """The answer to one golden query of the kinds checked here, or None to skip it."""
    op = q["op"]
    mode = mode_keys[q.get("mode", "GLOBAL")]
    if op == "tensor_names":
        kw = {k: q[k] for k in ("step", "regex", "collection") if k in q}
        if "mode" in q:
            kw["mode"] = mode
        return trial.tensor_names(**kw)
    if op in ("modes", "collections"):
        items = trial.modes() if op == "modes" else trial.collections()
        return sorted(getattr(m, "name", m) for m in items)
    if op == "workers":
        return trial.workers()
    if op == "steps":
        return trial.steps(mode=mode)
    if op == "t_steps":
        return trial.tensor(q["name"]).steps(mode=mode)
    if op == "t_value" and "__exception__" not in q["expected"]:
        import numpy as np

        value = np.asarray(trial.tensor(q["name"]).value(q["step"], mode=mode))
        return {"dtype": value.dtype.str, "shape": list(value.shape),
                "sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}
    return None


def check_golden(golden: Path) -> int:
    """Read each trial through the `smdebug` alias, as code written for smdebug does."""
    from smdebug.core.modes import ModeKeys
    from smdebug.trials import create_trial

    checked = 0
    for expected_file in sorted((golden / "expected").glob("*.json")):
        expected = json.loads(expected_file.read_text())
        trial = create_trial(str(golden / expected["name"]))
        expect(len(trial.tensor_names()) == expected["num_tensors"],
               f"{expected['name']}: {len(trial.tensor_names())} tensors")
        for q in expected["queries"]:
            got = golden_answer(trial, q, ModeKeys)
            if got is None:
                continue
            want = q["expected"]
            if q["op"] == "t_value":
                want = {k: want[k] for k in ("dtype", "shape", "sha256")}
            expect(got == want, f"golden {q['id']}: {got} != {want}")
            checked += 1
    expect(checked, f"no golden trial under {golden}")
    return checked


def check_installed_layout() -> None:
    prefix = Path(sys.prefix).resolve()
    expect(sys.prefix != sys.base_prefix, "not running in a virtualenv")
    import smdebug_lite

    location = Path(smdebug_lite.__file__).resolve()
    expect(location.is_relative_to(prefix), f"smdebug_lite imported from {location}, not {prefix}")
    import smdebug

    expect(smdebug is smdebug_lite and smdebug.__name__ == NAME,
           f"`import smdebug` gave {smdebug!r}, not the alias of {NAME}")
    import smdebug.pytorch  # noqa: F401 - through the alias, as smdebug scripts do

    import smdebug_lite.pytorch

    expect(sys.modules["smdebug.pytorch"] is smdebug_lite.pytorch, "smdebug.pytorch is not ours")
    for program in PROGRAMS:
        expect(importlib.util.find_spec(program) is None,
               f"a top-level `{program}` module is installed")
        module = importlib.import_module(f"{NAME}.{program}")
        expect(Path(module.__file__).resolve().is_relative_to(location.parent),
               f"{NAME}.{program} imported from {module.__file__}")
    proto = location.parent / "format" / "proto" / "smdebug_lite_event.proto"
    expect(proto.is_file(), f"package data missing: {proto}")
    from smdebug_lite.format.proto import smdebug_lite_event_pb2  # noqa: F401


def cmd_installed(args: argparse.Namespace) -> None:
    check_installed_layout()
    golden = Path(args.golden)
    checked = check_golden(golden) if (golden / "expected").is_dir() else 0
    if not checked:
        print(f"golden trials not found at {golden}; that check was skipped")
    import smdebug_lite

    print(f"installed ok: smdebug_lite {smdebug_lite.__version__} from "
          f"{Path(smdebug_lite.__file__).parent}, import smdebug, programs, proto"
          + (f", {checked} golden answers" if checked else ""))


# -- demo and report -------------------------------------------------------------------------


class ResourceLinks(HTMLParser):
    """Collects the URLs a browser would fetch to render the page."""

    FETCHED = {("script", "src"), ("img", "src"), ("link", "href"), ("source", "src"),
               ("iframe", "src"), ("video", "src"), ("audio", "src"), ("embed", "src"),
               ("object", "data"), ("img", "srcset"), ("source", "srcset")}

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.style_text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if (tag, name) in self.FETCHED and value:
                self.urls.append(value.strip())
            if name == "style" and value:
                self.style_text.append(value)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style_text.append(data)


def check_html(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    parser = ResourceLinks()
    parser.feed(text)
    remote = [u for u in parser.urls if u.lower().startswith(("http:", "https:", "//"))]
    expect(not remote, f"{page}: loads from the network: {remote[:5]}")
    styles = " ".join(parser.style_text).lower()
    expect("@import" not in styles and "url(http" not in styles and "url(//" not in styles,
           f"{page}: its styles load from the network")
    images = [u for u in parser.urls if u.startswith("data:image/")]
    expect(images, f"{page}: no embedded image")
    print(f"html ok: {page.name}, {len(images)} embedded images, nothing fetched")


def cmd_html(args: argparse.Namespace) -> None:
    for page in args.pages:
        check_html(Path(page))


def cmd_demo(args: argparse.Namespace) -> None:
    out = Path(args.out)
    doc = json.loads((out / "rule_evaluation_statuses.json").read_text())
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
                for s in doc["DebugRuleEvaluationStatuses"]}
    expect(statuses == DEMO_STATUSES, f"demo rule statuses {statuses}, want {DEMO_STATUSES}")
    expect((out / "trial" / "training_job_end.ts").is_file(), "the demo's training did not end")
    check_html(out / "report.html")
    print("demo ok: " + ", ".join(f"{k} {v}" for k, v in statuses.items()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("contents", help="the sdist and the wheel against the source tree")
    c.add_argument("dist")
    c.add_argument("root")
    c.set_defaults(run=cmd_contents)
    i = sub.add_parser("installed", help="smdebug-lite installed from the wheel")
    i.add_argument("golden")
    i.set_defaults(run=cmd_installed)
    d = sub.add_parser("demo", help="the demo's output folder")
    d.add_argument("out")
    d.set_defaults(run=cmd_demo)
    h = sub.add_parser("html", help="report pages")
    h.add_argument("pages", nargs="+")
    h.set_defaults(run=cmd_html)
    args = p.parse_args(argv)
    try:
        args.run(args)
    except CheckFailed as e:
        print(f"check_wheel: FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
