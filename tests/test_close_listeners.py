"""The listeners a chief hook tells once its trial is written (the index compaction among them):
called in order, each once however often added, one failing without stopping the others."""

from __future__ import annotations

import logging

from smdebug_lite import close_listeners


def test_listeners_run_in_order_and_a_failure_stops_none(tmp_path, caplog):
    calls: list[tuple[str, str]] = []

    def first(out_dir: str) -> None:
        calls.append(("first", out_dir))

    def broken(out_dir: str) -> None:
        raise OSError(f"no space left on the device holding {out_dir}")

    def last(out_dir: str) -> None:
        calls.append(("last", out_dir))

    for listener in (first, broken, last, first):
        close_listeners.add_listener(listener)
    try:
        with caplog.at_level(logging.WARNING):
            close_listeners.trial_written(str(tmp_path))
    finally:
        for listener in (first, broken, last):
            close_listeners.remove_listener(listener)
    assert calls == [("first", str(tmp_path)), ("last", str(tmp_path))]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "(broken)" in warned[0] and str(tmp_path) in warned[0]
    close_listeners.trial_written(str(tmp_path))  # removed: nothing more is called
    assert len(calls) == 2
