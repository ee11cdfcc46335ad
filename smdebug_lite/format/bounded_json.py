"""JSON from files the reader does not control (index and collections files), parsed within bounds.

A trial's files may be damaged or hostile. Two bounds keep one bad file from taking down the
process that reads it:

* size: a file larger than `max_bytes` (default 256 MiB, env `SMDEBUG_MAX_JSON_MB`) is refused
  before parsing, since the parsed objects take several times the bytes;
* nesting: the json module recurses once per level (100,000 levels of `[` raise
  RecursionError), so it parses only a text an iterative scan found at most `MAX_DEPTH` levels
  deep (strings cut out with regular expressions, then innermost bracket pairs removed one
  level per pass). orjson, the parser tried first, refuses more than 1024 levels itself without
  overflowing the stack. With `scan_depth` (collections files) every text is held to
  `MAX_DEPTH`; index files skip the scan when orjson takes them, since it costs as much as the
  parse (depth is bounded by the count of opening brackets, and is only scanned when that
  count is over the limit).

Every refusal is a `JSONFileRejected` naming the file.
"""

from __future__ import annotations

import json
import re
from typing import Any

from smdebug_lite.config.env_settings import env_float
from smdebug_lite.exceptions import JSONFileRejected

try:  # about twice as fast as the json module on index files, which dominate trial loading
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency; json is the fallback
    _fast_loads = json.loads

MAX_DEPTH = 64  # real index files nest 4 levels, collections files 5
_DEFAULT_MAX_MB = 256.0
_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_STRING = re.compile(rb'"[^"]*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_STRUCTURE = bytes(range(256)).translate(None, b'[]{}"')


def max_json_bytes() -> int:
    return int(max(env_float("SMDEBUG_MAX_JSON_MB", _DEFAULT_MAX_MB), 0.0) * (1 << 20))


_MAX_BYTES = max_json_bytes()


def nesting_depth(text: bytes, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a JSON text, found without recursion; stops counting past `limit`
    (returns limit + 1). Unbalanced brackets (invalid JSON) count as levels."""
    if b"\\" in text:
        text = _ESCAPE.sub(b"", text)
    brackets = _STRING.sub(b"", text.translate(None, _NOT_STRUCTURE)).replace(b'"', b"")
    depth = 0
    while brackets:
        inner = _INNERMOST.sub(b"", brackets)  # one level: pairs innermost at the start
        if len(inner) == len(brackets):  # unbalanced: every opener left counts as a level
            depth += inner.count(b"[") + inner.count(b"{")
            break
        brackets = inner
        depth += 1
        if depth > limit:
            break
    return min(depth, limit + 1)


def check_bounds(text: bytes, source: str, max_bytes: int | None = None,
                 max_depth: int = MAX_DEPTH) -> None:
    """Refuse a text too large or nested too deeply to parse safely (JSONFileRejected)."""
    check_size(text, source, max_bytes)
    if text.count(b"[") + text.count(b"{") > max_depth:
        depth = nesting_depth(text, max_depth)
        if depth > max_depth:
            raise JSONFileRejected(
                source, f"JSON nested more than {max_depth} levels deep (refused unparsed)")


def check_size(text: bytes, source: str, max_bytes: int | None = None) -> None:
    limit = _MAX_BYTES if max_bytes is None else max_bytes
    if len(text) > limit:
        raise JSONFileRejected(
            source, f"{len(text)} bytes is over the {limit}-byte limit for JSON files "
            "(env SMDEBUG_MAX_JSON_MB)")


def loads(text: bytes | str, source: str, *, scan_depth: bool = True,
          max_bytes: int | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON from a file within the bounds above (JSONFileRejected names `source`).
    What orjson refuses (e.g. NaN) goes to json, which parses it or explains why not."""
    if isinstance(text, str):
        text = text.encode("utf-8", "surrogatepass")
    if scan_depth:
        check_bounds(text, source, max_bytes, max_depth)
    else:
        check_size(text, source, max_bytes)
    try:
        return _fast_loads(text)
    except ValueError:
        pass
    return slow_loads(text, source, max_depth, checked=scan_depth)


def slow_loads(text: bytes, source: str, max_depth: int = MAX_DEPTH,
               checked: bool = False) -> Any:
    """The json module's parse (what orjson refuses), after the depth scan unless `checked`."""
    if not text.strip():
        raise JSONFileRejected(source, "the file is empty" if not text else "the file is blank")
    if not checked:
        check_bounds(text, source, len(text), max_depth)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise JSONFileRejected(source, f"invalid JSON ({e})") from None
