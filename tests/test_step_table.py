"""`StepTable`, the step/worker/mode index that Trial and Tensor share: its public interface on
its own, a trial answering through it, and no class of trials/ reaching into another's private
attributes."""

from __future__ import annotations

import ast
import pathlib
from enum import Enum

import numpy as np
import pytest
from trial_builders import open_writer, write_steps

import smdebug_lite.trials.tensor as tensor_module
from smdebug_lite.config.arguments import as_mode
from smdebug_lite.exceptions import IndexFileCorrupted, SMDebugValueError
from smdebug_lite.index import StepIndex
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import create_trial
from smdebug_lite.trials.step_table import StepState, StepTable

TRAIN, EVAL, GLOBAL = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.GLOBAL
TRIALS = pathlib.Path(__file__).resolve().parent.parent / "smdebug_lite" / "trials"


def index(step: int, worker: str, mode: ModeKeys = TRAIN, mode_step: int | None = None,
          names: tuple[str, ...] = ("w",)) -> StepIndex:
    entries = {n: {"tensorname": n, "start_idx": 0, "length": 32} for n in names}
    return StepIndex(step, worker, mode, step if mode_step is None else mode_step,
                     f"events/{step}_{worker}.tfevents", entries)


def test_two_workers_complete_a_step_together():
    table = StepTable()
    table.num_workers = 2
    table.add(index(0, "w1"))
    assert not table.is_complete(0) and table.last_complete_step == -1
    assert table.only(TRAIN, 0) is not None  # one index file read so far
    table.add(index(0, "w0"))
    assert table.is_complete(0) and table.last_complete_step == 0
    assert table.first(0).worker == "w0" and set(table.holders(0)) == {"w0", "w1"}
    assert table.only(TRAIN, 0) is None  # two workers: the caller must pick one
    assert not table.one_index_per_step()
    assert table.all_workers() == {"w0", "w1"} and table.last_step_of("w1") == 0


def test_mode_numbering_and_selection():
    table = StepTable()
    table.num_workers = 1
    for s in range(3):
        table.add(index(s, "w0", TRAIN, s, names=("w", "t")))
    for s in range(3, 5):
        table.add(index(s, "w0", EVAL, s - 3, names=("w", "e")))
    assert len(table) == 5 and table.max_step == 4
    assert table.global_step(EVAL, 1) == 4 and table.global_step(GLOBAL, 7) == 7
    assert table.global_step(TRAIN, 9) is None
    assert table.global_to_mode[3] == (EVAL, 0)
    assert table.modes() == [TRAIN, EVAL]
    assert table.names_of_mode(EVAL) == {"w", "e"}
    assert table.select([4, 0, 3], EVAL, False) == ([0, 1], [3, 4])
    assert table.select([4, 0, 3], GLOBAL, False) == ([0, 3, 4], [0, 3, 4])
    assert table.all_steps(TRAIN) == [0, 1, 2]
    assert [si.step for si in table.added_since(3)] == [3, 4] and table.index_count == 5
    # Tensor names change between runs of index files: each tensor's steps, from any position.
    assert table.steps_holding("t") == [0, 1, 2] and table.steps_holding("e") == [3, 4]
    assert table.steps_holding("w", 2) == [2, 3, 4] and table.steps_holding("w", 5) == []
    assert table.steps_holding("nothing") == []
    assert [si.step for si in table.first_of_each([4, 1])] == [4, 1]


def test_damaged_index_file_counts_towards_completeness_and_is_found_by_mode_step():
    table = StepTable()
    table.num_workers = 2
    table.add(index(0, "w0", TRAIN, 0))
    table.add(index(0, "w1", TRAIN, 0))
    table.add(index(2, "w0", TRAIN, 2))
    damage = IndexFileCorrupted("index/1_w0.json", "not JSON", 1, "w0")
    table.add_damage(damage)
    assert table.workers_written(1) == 1 and not table.is_complete(1)
    # Mode step 1 lies between the known TRAIN steps 0 and 2: the damaged global step 1.
    assert table.damage_at(1, TRAIN) is damage
    assert table.damage_at(1, GLOBAL, "w0") is damage and table.damage_at(1, GLOBAL, "w1") is None
    assert table.damage_at(1, None) is None
    version = table.version
    table.mark_all_loaded()
    assert table.all_loaded and table.is_complete(1) and table.last_complete_step == 2
    assert table.version > version


def test_as_mode_lives_with_the_modes_and_stays_importable_from_tensor():
    class TheirModes(Enum):  # an enum with the same member names, like smdebug's
        TRAIN = 1
        EVAL = 2

    assert tensor_module.as_mode is as_mode and tensor_module.StepState is StepState
    assert as_mode(TheirModes.EVAL) is EVAL and as_mode("train") is TRAIN and as_mode(3) is \
        ModeKeys.PREDICT and as_mode(None) is None
    with pytest.raises(SMDebugValueError, match="mode='sideways'"):
        as_mode("sideways")


def test_trial_and_tensor_answer_through_the_table(tmp_path):
    out = str(tmp_path / "job")
    w = open_writer(out)
    write_steps(w, range(4), lambda s: {"w": np.full(3, s, np.float32)}, TRAIN)
    write_steps(w, range(4, 6), lambda s: {"w": np.full(3, s, np.float32)}, EVAL,
                mode_step=lambda s: s - 4)
    w.close()
    trial = create_trial(out)
    table = trial.step_table
    assert trial.loaded_all_steps is table.all_loaded is True
    assert trial.last_complete_step == table.last_complete_step == 5
    assert trial._global_to_mode is table.global_to_mode  # smdebug's attribute, read by rules
    t = trial.tensor("w")
    steps = t.steps(mode=EVAL)
    steps.append(99)  # the caller's copy: the tensor's cached selection is not changed
    assert t.steps(mode=EVAL) == [0, 1]
    assert {s: float(v[0]) for s, v in t.values(mode=EVAL).items()} == {0: 4.0, 1: 5.0}
    assert float(t.reduction_value(1, "max", mode=EVAL)) == 5.0
    assert trial.has_passed_step(1, EVAL) is StepState.AVAILABLE


def test_no_module_of_trials_reaches_into_another_objects_private_attributes():
    found = []
    for path in sorted(TRIALS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert not found, found
