"""The trials of a sweep: a list of trial URIs and prefixes, each prefix standing for the trials
found below it.

A trial is a directory (or S3 prefix) holding ``index/``, ``events/`` or ``training_job_end.ts``.
Prefixes are searched level by level with one listing per directory (on S3 a delimited LIST),
never by listing every object: a sweep's trials may hold millions of files between them, and
the search does not enter a trial once it is found.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from smdebug_lite.exceptions import SMDebugValueError

TRIAL_MARKERS = ("index", "events", "training_job_end.ts")
# Levels below a prefix that are searched; SageMaker puts a job's trial two levels down
# (<prefix>/<job name>/debug-output/), so this leaves room for a sweep folder above.
MAX_DEPTH = 4


def _local_children(path: Path) -> tuple[set[str], list[str]]:
    """(entry names, sub-directory names) of a local directory."""
    names: set[str] = set()
    dirs: list[str] = []
    with os.scandir(path) as it:
        for e in it:
            names.add(e.name)
            if e.is_dir(follow_symlinks=True):
                dirs.append(e.name)
    return names, dirs


def _s3_children(bucket: str, prefix: str) -> tuple[set[str], list[str]]:
    """(entry names, sub-prefix names) under `prefix` ('' or ending in '/'): delimited LISTs."""
    from smdebug_lite.storage.s3 import s3_client

    names: set[str] = set()
    dirs: list[str] = []
    pages = s3_client().get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, Delimiter="/")
    for page in pages:
        for cp in page.get("CommonPrefixes", ()):
            name = cp["Prefix"][len(prefix):].rstrip("/")
            names.add(name)
            dirs.append(name)
        for obj in page.get("Contents", ()):
            names.add(obj["Key"][len(prefix):])
    return names, dirs


def _path_order(uri: str) -> list[str]:
    """Directory order: `run-1` before `run-1.5` (a plain sort puts '.' before '/')."""
    return uri.split("/")


def _holds_trial(names: set[str]) -> bool:
    return any(m in names for m in TRIAL_MARKERS)


def _expand_local(uri: str) -> list[str]:
    root = Path(uri).expanduser()
    if not root.is_dir():
        return [uri]  # not here (yet): evaluating it reports that
    names, dirs = _local_children(root)
    if _holds_trial(names):
        return [uri]
    found: list[str] = []
    level = [(root, d) for d in dirs]
    for _depth in range(MAX_DEPTH):
        below: list[tuple[Path, str]] = []
        for parent, name in level:
            path = parent / name
            try:
                names, dirs = _local_children(path)
            except OSError:
                continue  # unreadable: not a trial we can use
            if _holds_trial(names):
                found.append(str(path))
            else:
                below.extend((path, d) for d in dirs)
        level = below
    return sorted(found, key=_path_order) or [uri]


def _expand_s3(uri: str) -> list[str]:
    from smdebug_lite.storage.s3 import parse_s3_uri

    bucket, prefix = parse_s3_uri(uri)
    names, dirs = _s3_children(bucket, prefix)
    if _holds_trial(names):
        return [uri]
    found: list[str] = []
    level = [prefix + d + "/" for d in dirs]
    for _depth in range(MAX_DEPTH):
        below: list[str] = []
        for p in level:
            names, dirs = _s3_children(bucket, p)
            if _holds_trial(names):
                found.append(f"s3://{bucket}/{p.rstrip('/')}")
            else:
                below.extend(p + d + "/" for d in dirs)
        level = below
    return sorted(found, key=_path_order) or [uri]


def expand_trials(uris: Iterable[str]) -> list[str]:
    """Trial URIs for `uris`, in order: a trial stays as given; a local directory or
    ``s3://`` prefix that is not a trial but has trials below it (up to `MAX_DEPTH` levels)
    becomes those trials, sorted; anything else (a missing path, an empty prefix) stays as
    given, so that evaluating it reports why it is not a trial. Duplicates are dropped."""
    out: list[str] = []
    seen: set[str] = set()
    for uri in uris:
        if not isinstance(uri, str) or not uri.strip():
            raise SMDebugValueError(f"trial {uri!r}: expected a local path or s3://bucket/prefix")
        uri = uri.strip()
        if uri.startswith("s3://"):
            found = _expand_s3(uri)
        elif "://" in uri:
            raise SMDebugValueError(f"trial {uri!r}: expected a local path or s3://bucket/prefix")
        else:
            found = _expand_local(uri)
        for t in found:
            key = t.rstrip("/")
            if key not in seen:
                seen.add(key)
                out.append(t)
    return out


def _parts(uri: str) -> list[str]:
    if uri.startswith("s3://"):
        return [p for p in uri[len("s3://"):].split("/") if p]
    return [p for p in os.path.abspath(os.path.expanduser(uri)).split(os.sep) if p]


def trial_names(uris: list[str]) -> list[str]:
    """A short, distinct name per trial: its last path component, or as many trailing
    components as it takes to tell it from the others (``run-3/debug-output``)."""
    parts = [_parts(u) for u in uris]
    depth = [1] * len(uris)
    while True:
        names = ["/".join(p[-d:]) if p else u for p, d, u in zip(parts, depth, uris, strict=True)]
        clash: dict[str, list[int]] = {}
        for i, n in enumerate(names):
            clash.setdefault(n, []).append(i)
        grew = False
        for idx in clash.values():
            if len(idx) > 1:
                for i in idx:
                    if depth[i] < len(parts[i]):
                        depth[i] += 1
                        grew = True
        if not grew:
            dup = [n for n, idx in clash.items() if len(idx) > 1]
            if dup:
                raise SMDebugValueError(f"trials {dup} are given more than once")
            return names
