"""torch.distributed (gloo, two CPU processes): one worker per rank, include_workers one/all."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _pytorch_support import read_out_dir, read_with_smdebug, ref_available

REPO = Path(__file__).resolve().parents[1]

RANK_SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    import torch.distributed as dist
    from torch import nn
    import smdebug_lite.pytorch as smd

    torch.set_num_threads(1)
    out, include_workers = sys.argv[1], sys.argv[2]
    # The hook exists before the process group does (as with the zero-code-change launcher).
    hook = smd.Hook(out, include_workers=include_workers, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients", "losses"])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2)))
    loss_fn = nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(3):
        opt.zero_grad()
        loss_fn(model(torch.randn(8, 4, generator=g)), torch.zeros(8, 2)).backward()
        opt.step()
    hook.close()
    dist.barrier()
    dist.destroy_process_group()
    print("RANK DONE", rank, hook.worker, hook.num_workers)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_two_ranks(tmp_path: Path, include_workers: str) -> Path:
    out = tmp_path / f"run_{include_workers}"
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    port = _free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   RANK=str(rank), WORLD_SIZE="2", GLOO_SOCKET_IFNAME="lo")
        procs.append(subprocess.Popen([sys.executable, str(script), str(out), include_workers],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      env=env, cwd=tmp_path))
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    for rank, (p, text) in enumerate(zip(procs, outputs, strict=True)):
        assert p.returncode == 0, text
        assert f"RANK DONE {rank} worker_{rank} 2" in text, text
    return out


def _collections(out: Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in (out / "collections/000000000").glob("*.json")}


@pytest.mark.slow
def test_two_gloo_ranks_all_and_one(tmp_path):
    out_all = _run_two_ranks(tmp_path, "all")
    data = read_out_dir(out_all)
    assert sorted(data) == [(w, s) for w in ("worker_0", "worker_1") for s in range(3)]
    colls = _collections(out_all)
    assert set(colls) == {"worker_0_collections.json", "worker_1_collections.json"}
    assert all(c["_meta"]["num_workers"] == 2 for c in colls.values())
    name = "DistributedDataParallel_module.0.weight"
    for step in range(3):
        w0, w1 = data[("worker_0", step)].tensors, data[("worker_1", step)].tensors
        assert set(w0) == set(w1) and name in w0 and "gradient/" + name in w0 and "MSELoss_output_0" in w0
        np.testing.assert_array_equal(w0[name], w1[name])  # DDP keeps replicas identical
        assert not np.array_equal(w0["MSELoss_output_0"], w1["MSELoss_output_0"])  # own data

    out_one = _run_two_ranks(tmp_path, "one")
    data_one = read_out_dir(out_one)
    assert sorted(data_one) == [("worker_0", s) for s in range(3)]
    assert {k: c["_meta"]["num_workers"] for k, c in _collections(out_one).items()} == {
        "worker_0_collections.json": 1}

    try:  # our own trial reader, once it exists
        from smdebug_lite.trials import create_trial
    except ImportError:
        create_trial = None
    if create_trial is not None:
        trial = create_trial(str(out_all))
        assert sorted(trial.workers()) == ["worker_0", "worker_1"]
        assert trial.steps() == [0, 1, 2]
        t = trial.tensor("MSELoss_output_0")
        for w in ("worker_0", "worker_1"):
            np.testing.assert_array_equal(t.value(1, worker=w), data[(w, 1)].tensors["MSELoss_output_0"])

    ok, reason = ref_available()
    if not ok:
        pytest.skip(f"smdebug 1.0.34 cross-check skipped: {reason}")
    ref = read_with_smdebug(str(out_all), str(out_one))
    merged = ref[str(out_all)]
    assert merged["workers"] == ["worker_0", "worker_1"]
    assert merged["steps"]["TRAIN"] == [0, 1, 2]
    assert ref[str(out_one)]["workers"] == ["worker_0"]
