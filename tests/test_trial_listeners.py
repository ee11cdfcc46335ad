"""The listeners a chief hook and its writer tell as the trial is written and once it is (the
index compaction among them): called in order, each once however often added, one failing
without stopping the others."""

from __future__ import annotations

import logging

from smdebug_lite import trial_listeners


def test_listeners_run_in_order_and_a_failure_stops_none(tmp_path, caplog):
    calls: list[tuple[str, str]] = []

    def first(out_dir: str) -> None:
        calls.append(("first", out_dir))

    def broken(out_dir: str) -> None:
        raise OSError(f"no space left on the device holding {out_dir}")

    def last(out_dir: str) -> None:
        calls.append(("last", out_dir))

    for listener in (first, broken, last, first):
        trial_listeners.add_listener(listener)
    try:
        with caplog.at_level(logging.WARNING):
            trial_listeners.trial_written(str(tmp_path))
    finally:
        for listener in (first, broken, last):
            trial_listeners.remove_listener(listener)
    assert calls == [("first", str(tmp_path)), ("last", str(tmp_path))]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "(broken)" in warned[0] and str(tmp_path) in warned[0]
    trial_listeners.trial_written(str(tmp_path))  # removed: nothing more is called
    assert len(calls) == 2


def test_step_listeners_hear_each_step_and_the_end_and_a_failure_stops_none(tmp_path, caplog):
    heard: list[tuple] = []

    def on_step(out_dir: str, step: int) -> None:
        heard.append(("step", out_dir, step))

    def broken_step(out_dir: str, step: int) -> None:
        raise RuntimeError(f"cannot compact {out_dir} at {step}")

    def on_end(out_dir: str) -> None:
        heard.append(("end", out_dir))

    pairs = [(broken_step, on_end), (on_step, on_end), (on_step, on_end)]
    for pair in pairs:
        trial_listeners.add_step_listener(*pair)
    try:
        with caplog.at_level(logging.WARNING):
            trial_listeners.steps_written(str(tmp_path), 7)
            trial_listeners.writing_ended(str(tmp_path))
    finally:
        for pair in pairs:
            trial_listeners.remove_step_listener(*pair)
    assert heard == [("step", str(tmp_path), 7), ("end", str(tmp_path)), ("end", str(tmp_path))]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "after step 7" in warned[0] and "(broken_step)" in warned[0]
    trial_listeners.steps_written(str(tmp_path), 8)  # removed: nothing more is called
    assert len(heard) == 3
