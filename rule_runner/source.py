"""Finding the rule class: a built-in by name, or a class in user code from ``source_s3_uri``.

User code is a single ``.py`` file (what the SageMaker SDK uploads for ``Rule.custom``) or a
``.tar.gz`` / ``.tgz`` package; both may live in S3 or, for local runs, on disk (a directory
is accepted too). Archives are extracted only after every member is checked, because the
archive comes from a bucket the job merely reads and must not write outside its folder.
"""

from __future__ import annotations

import importlib.util
import itertools
import posixpath
import re
import sys
import tarfile
from pathlib import Path
from types import ModuleType

from smdebug_lite.rule_runner.params import ConfigError

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz")
MAX_ARCHIVE_BYTES = 1 << 30  # refuse archives that expand beyond 1 GiB
_counter = itertools.count()
_roots: set[Path] = set()  # folders user sources were imported from


class SourceError(ConfigError):
    """The rule source could not be fetched, unpacked or imported."""


def _is_archive(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def fetch(uri: str, workdir: Path) -> Path:
    """A local path for `uri` (``s3://`` objects are downloaded into `workdir`)."""
    if uri.startswith("s3://"):
        return _download(uri, workdir)
    path = Path(uri[len("file://"):] if uri.startswith("file://") else uri).expanduser()
    if not path.exists():
        raise SourceError(f"rule source {uri} does not exist")
    return path


def _download(uri: str, workdir: Path) -> Path:
    import boto3
    import botocore.exceptions
    from botocore.config import Config

    bucket, _, key = uri[len("s3://"):].partition("/")
    if not bucket or not key or key.endswith("/"):
        raise SourceError(f"source_s3_uri must name an object (s3://bucket/key.py), got {uri}")
    dest = workdir / posixpath.basename(key)
    client = boto3.client(
        "s3", config=Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 3})
    )
    try:
        client.download_file(bucket, key, str(dest))
    except botocore.exceptions.ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        if code in {"404", "NoSuchKey", "NoSuchBucket"}:
            raise SourceError(f"rule source {uri} does not exist ({code})") from e
        raise SourceError(f"cannot download rule source {uri}: {e}") from e
    except botocore.exceptions.BotoCoreError as e:
        raise SourceError(f"cannot download rule source {uri}: {e}") from e
    return dest


def _check_member(m: tarfile.TarInfo, archive: str) -> None:
    """Refuse anything that could land outside the extraction folder."""
    name = m.name
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise SourceError(f"{archive}: member {name!r} has an absolute path")
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        raise SourceError(f"{archive}: member {name!r} contains '..'")
    if m.issym() or m.islnk():
        link = m.linkname.replace("\\", "/")
        base = posixpath.dirname(name) if m.issym() else ""
        target = posixpath.normpath(posixpath.join(base, link))
        if link.startswith("/") or target == ".." or target.startswith("../"):
            raise SourceError(f"{archive}: link {name!r} -> {m.linkname!r} points outside the archive")
    elif not (m.isfile() or m.isdir()):
        raise SourceError(f"{archive}: member {name!r} is not a regular file or directory")


def safe_extract(archive: Path, dest: Path) -> Path:
    """Extract a tar archive into `dest` after checking every member; returns `dest`."""
    try:
        with tarfile.open(archive, "r:*") as tf:
            members = tf.getmembers()
            total = 0
            for m in members:
                _check_member(m, archive.name)
                total += max(m.size, 0)
                if total > MAX_ARCHIVE_BYTES:
                    raise SourceError(f"{archive.name}: expands beyond {MAX_ARCHIVE_BYTES} bytes")
            dest.mkdir(parents=True, exist_ok=True)
            if hasattr(tarfile, "data_filter"):  # second line of defence where available
                tf.extractall(dest, members=members, filter="data")
            else:  # pragma: no cover - Python without PEP 706
                tf.extractall(dest, members=members)
    except (tarfile.TarError, OSError) as e:
        raise SourceError(f"cannot extract {archive.name}: {e}") from e
    return dest


def _import_file(path: Path, module_name: str, sys_path_root: Path) -> ModuleType:
    if str(sys_path_root) not in sys.path:
        sys.path.insert(0, str(sys_path_root))
    try:
        if module_name.startswith("_smdebug_rule_"):
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise SourceError(f"cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            return module
        _forget_stale(module_name, sys_path_root)
        return importlib.import_module(module_name)
    except SourceError:
        raise
    except BaseException as e:  # SyntaxError, ImportError, or anything the module runs
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise SourceError(f"cannot import rule source {path.name}: {type(e).__name__}: {e}") from e


def _forget_stale(module_name: str, root: Path) -> None:
    """Drop modules of the same name that an earlier source (another root) left in sys.modules."""
    top = module_name.split(".")[0]
    earlier = [r for r in _roots if r != root.resolve()]
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        origin = getattr(sys.modules[name], "__file__", None)
        if origin and any(Path(origin).resolve().is_relative_to(r) for r in earlier):
            del sys.modules[name]
    _roots.add(root.resolve())


def ensure_smdebug_alias() -> None:
    """Let user code ``import smdebug`` when the runner runs from a checkout (no .pth file)."""
    try:
        import _smdebug_lite_alias
    except ImportError:  # pragma: no cover - installed without the alias module
        return
    _smdebug_lite_alias.install()


def _module_for(py: Path) -> tuple[str, Path]:
    """Dotted module name of `py` and the folder to put on sys.path (above its packages)."""
    parts = [py.stem]
    parent = py.parent
    while (parent / "__init__.py").is_file():
        parts.insert(0, parent.name)
        parent = parent.parent
    return ".".join(parts), parent


def _find_defining_files(root: Path, class_name: str) -> list[Path]:
    pattern = re.compile(rf"^[ \t]*class[ \t]+{re.escape(class_name)}\b", re.MULTILINE)
    hits = []
    for py in sorted(root.rglob("*.py")):
        if "__pycache__" in py.parts or any(p.startswith(".") for p in py.relative_to(root).parts):
            continue
        try:
            if pattern.search(py.read_text(encoding="utf-8", errors="replace")):
                hits.append(py)
        except OSError:
            continue
    return sorted(hits, key=lambda p: (len(p.relative_to(root).parts), str(p)))


def _class_from(module: ModuleType, class_name: str, where: str) -> type:
    obj = getattr(module, class_name, None)
    if obj is None:
        classes = sorted(n for n, v in vars(module).items()
                         if isinstance(v, type) and v.__module__ == module.__name__)
        known = ", ".join(classes) or "none"
        raise SourceError(f"class {class_name} not found in {where} (classes defined there: {known})")
    if not isinstance(obj, type):
        raise SourceError(f"{class_name} in {where} is a {type(obj).__name__}, not a class")
    if not callable(getattr(obj, "invoke_at_step", None)):
        raise SourceError(f"class {class_name} in {where} has no invoke_at_step(step) method; "
                          "derive it from smdebug.rules.Rule")
    return obj


def load_user_rule(uri: str, class_name: str, workdir: Path) -> type:
    """The class `class_name` from the source at `uri`."""
    ensure_smdebug_alias()
    local = fetch(uri, workdir)
    if local.is_dir():
        root = local
    elif _is_archive(local.name):
        root = safe_extract(local, workdir / "source")
    elif local.suffix == ".py":
        module = _import_file(local, f"_smdebug_rule_{next(_counter)}_{local.stem}", local.parent)
        return _class_from(module, class_name, uri)
    else:
        raise SourceError(
            f"source_s3_uri must point to a .py file or a .tar.gz/.tgz archive, got {uri}"
        )
    files = _find_defining_files(root, class_name)
    if not files:
        raise SourceError(f"class {class_name} not found in {uri} (no .py file defines it)")
    module_name, sys_root = _module_for(files[0])
    module = _import_file(files[0], module_name, sys_root)
    return _class_from(module, class_name, f"{uri} ({files[0].relative_to(root)})")


def load_builtin_rule(name: str) -> type:
    """A built-in SageMaker Debugger rule class by its name (e.g. ``VanishingGradient``)."""
    from smdebug_lite.rules.builtin import BUILTIN_RULES, get_builtin_rule

    try:
        cls = get_builtin_rule(name)
    except (KeyError, ValueError, LookupError) as e:
        known = ", ".join(sorted(BUILTIN_RULES)) if BUILTIN_RULES else "none"
        raise ConfigError(f"unknown built-in rule {name!r} (known: {known})") from e
    if cls is None:
        raise ConfigError(f"unknown built-in rule {name!r}")
    return cls
