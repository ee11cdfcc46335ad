"""The long-format export (pandas, Arrow, Parquet, CSV, TensorBoard) against the Trial API, on a
trial from real torch training and on smdebug-written golden trials."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from smdebug_lite.exceptions import SMDebugValueError, TensorUnavailable
from smdebug_lite.export import COLUMNS, export_tensorboard, export_trial, to_arrow, to_pandas
from smdebug_lite.modes import ModeKeys
from smdebug_lite.trials import create_trial

GOLDEN = Path(__file__).parent / "data" / "golden"


def train_trial(out_dir: Path, train_steps: int = 8, eval_steps: int = 3) -> Path:
    """A real torch run: an MLP trained with the hook saving weights, gradients and losses at
    every step, then evaluated."""
    import torch
    from torch import nn

    import smdebug_lite.pytorch as smd

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = smd.Hook(str(out_dir), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "biases", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(train_steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        for _ in range(eval_steps):
            loss_fn(model(x), y)
    hook.close()
    smd.del_hook()
    return out_dir


@pytest.fixture(scope="module")
def torch_trial(tmp_path_factory) -> Path:
    return train_trial(tmp_path_factory.mktemp("export") / "run")


def _loss_name(trial) -> str:
    return trial.tensor_names(collection="losses")[0]


def test_dataframe_matches_trial_api(torch_trial):
    trial = create_trial(str(torch_trial))
    df = to_pandas(trial)
    assert tuple(df.columns) == COLUMNS
    assert df["value"].dtype == np.float64 and df["step"].dtype == np.int64
    names = trial.tensor_names()
    assert sorted(df["tensor"].unique()) == names
    for name in names:
        t = trial.tensor(name)
        rows = df[df["tensor"] == name]
        assert list(rows["step"]) == t.steps()
        for mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            got = rows[rows["mode"] == mode.name]
            assert list(got["mode_step"]) == t.steps(mode=mode)
            for mode_step, step in zip(got["mode_step"], got["step"], strict=True):
                assert trial.global_step(mode, mode_step) == step
    loss = _loss_name(trial)
    rows = df[df["tensor"] == loss]
    expected = trial.tensor(loss).values()
    assert dict(zip(rows["step"], rows["value"], strict=True)) == {
        s: float(v) for s, v in expected.items()}
    assert set(rows["collection"]) == {"losses"}
    assert set(df["reduction"]) == {"raw"} and set(df["worker"]) == {"worker_0"}
    weights = df[df["collection"] == "weights"]
    assert len(weights) and weights["value"].isna().all()  # arrays have no scalar value


def test_windows_do_not_change_the_rows(torch_trial):
    trial = create_trial(str(torch_trial))
    whole = to_pandas(trial, include_values=True)
    windowed = to_pandas(trial, include_values=True, window_steps=3)
    key = ["tensor", "step", "reduction"]
    a = whole.sort_values(key).reset_index(drop=True)
    b = windowed.sort_values(key).reset_index(drop=True)
    assert a.drop(columns="values").equals(b.drop(columns="values"))
    assert [list(v) for v in a["values"]] == [list(v) for v in b["values"]]


def test_values_column_holds_every_element(torch_trial):
    trial = create_trial(str(torch_trial))
    name = trial.tensor_names(collection="weights")[0]
    table = trial.to_arrow(tensors=[name], include_values=True, mode="TRAIN", start_step=2,
                           end_step=5)
    assert table.column_names == [*COLUMNS, "values"]
    rows = table.to_pylist()
    assert [r["step"] for r in rows] == [2, 3, 4]
    for r in rows:
        expected = trial.tensor(name).value(r["step"]).astype(np.float64).reshape(-1)
        assert r["values"] == expected.tolist()


def test_tensor_to_pandas(torch_trial):
    trial = create_trial(str(torch_trial))
    loss = trial.tensor(_loss_name(trial))
    df = loss.to_pandas(mode="EVAL")
    assert list(df["mode_step"]) == loss.steps(mode=ModeKeys.EVAL)
    assert list(df["value"]) == [float(loss.value(s, mode=ModeKeys.EVAL))
                                 for s in loss.steps(mode=ModeKeys.EVAL)]


def test_smdebug_written_reductions_become_rows():
    trial = create_trial(str(GOLDEN / "pt_reductions"))
    df = trial.to_pandas()
    name = next(n for n in trial.tensor_names() if "weight" in n)
    t = trial.tensor(name)
    step = t.steps()[0]
    rows = df[(df["tensor"] == name) & (df["step"] == step)]
    saved = t.reduction_values(step)
    assert "raw" not in set(rows["reduction"])
    expected = {(f"abs_{r}" if a else r): float(v) for (r, a), v in saved.items()}
    assert dict(zip(rows["reduction"], rows["value"], strict=True)) == expected
    assert set(df["trial"]) == {"pt_reductions"}


def test_duckdb_over_parquet_gives_the_trial_api_numbers(torch_trial, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    trial = create_trial(str(torch_trial))
    out = export_trial(trial, tmp_path / "ds", window_steps=4)
    assert (out / "tensor=CrossEntropyLoss_output_0" / "mode=TRAIN").is_dir()
    pattern = str(out / "**" / "*.parquet")
    con = duckdb.connect()
    loss = _loss_name(trial)
    got = con.execute(
        "SELECT mode, avg(value), count(*) FROM read_parquet(?, hive_partitioning=true) "
        "WHERE tensor = ? AND reduction = 'raw' GROUP BY mode ORDER BY mode",
        [pattern, loss]).fetchall()
    t = trial.tensor(loss)
    for mode_name, avg, count in got:
        mode = ModeKeys[mode_name]
        vals = [float(v) for v in t.values(mode=mode).values()]
        assert count == len(vals) and avg == pytest.approx(np.mean(vals), rel=1e-12)
    assert {g[0] for g in got} == {"TRAIN", "EVAL"}
    # Names with '/' (gradients) survive the partition paths.
    grad = trial.tensor_names(collection="gradients")[0]
    assert "/" in grad
    (steps,) = con.execute(
        "SELECT count(DISTINCT step) FROM read_parquet(?, hive_partitioning=true) "
        "WHERE tensor = ?", [pattern, grad]).fetchone()
    assert steps == len(trial.tensor(grad).steps())


def test_pyarrow_dataset_reads_the_partitions(torch_trial, tmp_path):
    ds = pytest.importorskip("pyarrow.dataset")
    trial = create_trial(str(torch_trial))
    out = export_trial(trial, tmp_path / "ds", collection="losses")
    table = ds.dataset(str(out), format="parquet", partitioning="hive").to_table()
    assert set(table.column("tensor").to_pylist()) == {_loss_name(trial)}
    assert table.num_rows == len(to_arrow(trial, collection="losses"))


def test_csv_round_trip(torch_trial, tmp_path):
    trial = create_trial(str(torch_trial))
    out = export_trial(trial, tmp_path / "t.csv", format="csv", include_values=True)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    df = to_pandas(trial, include_values=True)
    assert len(rows) == len(df)
    loss = _loss_name(trial)
    got = {int(r["step"]): float(r["value"]) for r in rows if r["tensor"] == loss}
    assert got == {s: float(v) for s, v in trial.tensor(loss).values().items()}
    weight = next(r for r in rows if r["collection"] == "weights")
    assert r"" == weight["value"]
    assert json.loads(weight["values"]) == trial.tensor(weight["tensor"]).value(
        int(weight["step"])).astype(np.float64).reshape(-1).tolist()


def test_bad_selection_and_outputs(torch_trial, tmp_path):
    trial = create_trial(str(torch_trial))
    with pytest.raises(SMDebugValueError, match="end_step=2 must be greater"):
        to_pandas(trial, start_step=5, end_step=2)
    with pytest.raises(TensorUnavailable):
        to_pandas(trial, tensors=["no_such_tensor"])
    with pytest.raises(SMDebugValueError, match="mode"):
        to_pandas(trial, mode="TRAINING")
    with pytest.raises(SMDebugValueError, match="regex"):
        to_pandas(trial, regex="(")
    with pytest.raises(ValueError, match="format='xlsx'"):
        export_trial(trial, tmp_path / "x", format="xlsx")
    out = export_trial(trial, tmp_path / "ds", collection="losses")
    with pytest.raises(FileExistsError, match="not empty"):
        export_trial(trial, out)
    export_trial(trial, out, overwrite=True, collection="losses")
    (tmp_path / "t.csv").write_text("x")
    with pytest.raises(FileExistsError):
        export_trial(trial, tmp_path / "t.csv", format="csv")


def test_missing_pyarrow_is_named(torch_trial, tmp_path):
    """Run where pyarrow cannot be imported: the error says which extra to install."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from smdebug_lite.trials import create_trial\n"
        f"t = create_trial({str(torch_trial)!r})\n"
        "try:\n    t.to_arrow()\nexcept ImportError as e:\n    print('ERR', e)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(Path(__file__).parents[1]), timeout=120,
                          env={"SMDEBUG_LOG_LEVEL": "warning", "PATH": "/usr/bin:/bin"})
    assert "ERR" in proc.stdout, proc.stderr
    assert "pip install 'smdebug-lite[export]'" in proc.stdout


def test_tensorboard_export_is_readable_by_tensorboard(torch_trial, tmp_path):
    ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    trial = create_trial(str(torch_trial))
    out = export_tensorboard(trial, tmp_path / "tb")
    acc = ea_mod.EventAccumulator(str(out / "TRAIN"), size_guidance={"scalars": 0,
                                                                     "histograms": 0})
    acc.Reload()
    loss = _loss_name(trial)
    scalars = {e.step: e.value for e in acc.Scalars(loss)}
    t = trial.tensor(loss)
    train = {trial.global_step(ModeKeys.TRAIN, s): float(v)
             for s, v in t.values(mode=ModeKeys.TRAIN).items()}
    assert scalars.keys() == train.keys()
    assert all(scalars[s] == pytest.approx(v, rel=1e-6) for s, v in train.items())
    histos = acc.Tags()["histograms"]
    assert any(tag.startswith("weights/") for tag in histos)


def test_golden_trial_copy_exports_both_modes(tmp_path):
    src = shutil.copytree(GOLDEN / "pt_basic", tmp_path / "pt_basic")
    df = to_pandas(str(src))
    assert set(df["mode"]) == {"TRAIN", "EVAL"}
    assert len(df[df["reduction"] == "raw"]) == sum(
        len(create_trial(str(src)).tensor(n).steps()) for n in df["tensor"].unique())
