"""TensorBoard export: file layout, real CRCs, file_version header, histograms and scalars."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import numpy as np
import pytest

from smdebug_lite.format.crc import masked_crc32c
from smdebug_lite.format.proto import smdebug_lite_event_pb2 as pb
from smdebug_lite.format.records import iter_records
from smdebug_lite.modes import ModeKeys
from smdebug_lite.writer.tensorboard import (
    BUCKET_LIMITS,
    FILE_VERSION,
    TensorBoardWriter,
    clean_tag,
    histogram_proto,
)


def read_events(path: Path) -> list[pb.Event]:
    """Parse a TB file, checking the real payload CRC of every record."""
    buf = path.read_bytes()
    events = []
    for start, payload in iter_records(buf):
        end = start + 12 + len(payload)
        (footer,) = struct.unpack("<I", buf[end:end + 4])
        assert footer == masked_crc32c(bytes(payload)), "TensorBoard records carry real CRCs"
        events.append(pb.Event.FromString(bytes(payload)))
    return events


def test_bucket_limits_are_tensorflows():
    pos = BUCKET_LIMITS[BUCKET_LIMITS > 0]
    assert pos[0] == 1e-12 and pos[-1] == np.finfo(np.float64).max
    np.testing.assert_allclose(pos[1:-1] / pos[:-2], 1.1, rtol=1e-9)
    assert pos[-2] < 1e20 <= pos[-2] * 1.1
    assert 0.0 in BUCKET_LIMITS
    np.testing.assert_array_equal(BUCKET_LIMITS[BUCKET_LIMITS < 0], -pos[::-1])


def test_histogram_counts():
    values = np.array([-3.0, -3.0, 0.0, 0.5, 0.5, 0.5, 2.0, np.nan, np.inf], dtype=np.float32)
    h = histogram_proto(values)
    assert h.num == 7 and h.min == -3.0 and h.max == 2.0
    assert h.sum == pytest.approx(-2.5) and h.sum_squares == pytest.approx(22.75)
    assert sum(h.bucket) == 7
    limits = np.array(h.bucket_limit)
    assert np.isin(limits, BUCKET_LIMITS).all()
    assert h.bucket[0] == 0  # one empty bucket on the left gives the lower edge
    for v, n in ((-3.0, 2), (0.0, 1), (0.5, 3), (2.0, 1)):
        i = int(np.searchsorted(limits, v, side="right"))  # bucket i: [limit[i-1], limit[i])
        assert h.bucket[i] == n and limits[i - 1] <= v < limits[i]
    assert histogram_proto(np.array([np.nan])) is None


def test_clean_tag():
    assert clean_tag("/weights/fc 1:0(x)") == "weights/fc_1_0_x_"
    assert clean_tag("a-b/c.d_e") == "a-b/c.d_e"


def test_writer_files(tmp_path):
    tb = TensorBoardWriter(str(tmp_path))
    tb.add_scalar("scalar/lr", 0.5, 3, ModeKeys.TRAIN)
    tb.add_histogram("weights/w", np.arange(10, dtype=np.float32), 3, ModeKeys.TRAIN)
    tb.add_scalar("loss", 1.25, 0, ModeKeys.EVAL)
    tb.flush_step()
    tb.add_scalar("late", 2.0, 3, ModeKeys.TRAIN)  # after the step's files were closed: appended
    tb.close()
    suffix = f"_{os.getpid()}_{socket.gethostname()}.tfevents"
    train = tmp_path / "TRAIN" / f"000000000003{suffix}"
    assert sorted(p.name for p in (tmp_path / "TRAIN").iterdir()) == [train.name]
    assert (tmp_path / "EVAL" / f"000000000000{suffix}").exists()
    events = read_events(train)
    assert events[0].file_version == FILE_VERSION
    assert [e.step for e in events] == [3, 3, 3, 3]
    assert events[1].summary.value[0].tag == "scalar/lr"
    assert events[1].summary.value[0].simple_value == 0.5
    histo = events[2].summary.value[0].histo
    assert events[2].summary.value[0].tag == "weights/w" and histo.num == 10 and histo.max == 9
    assert events[3].summary.value[0].tag == "late"
    assert sum(1 for e in events if e.file_version) == 1


def test_hook_exports_tensorboard(tmp_path):
    torch = pytest.importorskip("torch")
    import smdebug_lite.pytorch as smd

    out = tmp_path / "run"
    hook = smd.Hook(str(out), export_tensorboard=True, save_config=smd.SaveConfig(save_interval=2),
                    include_collections=["weights", "gradients", "losses"],
                    reduction_config=smd.ReductionConfig(norms=["l2"]))  # raw not saved: TB still is
    model = torch.nn.Linear(3, 2)
    loss_fn = torch.nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(3):
        loss_fn(model(torch.randn(4, 3)), torch.zeros(4, 2)).backward()
        hook.save_scalar("lr", 0.1)
    hook.close()
    files = sorted((out / "tensorboard" / "TRAIN").iterdir())
    assert [f.name[:12] for f in files] == ["000000000000", "000000000001", "000000000002"]
    tags0 = {v.tag: v for e in read_events(files[0]) for v in e.summary.value}
    assert {"weights/Linear_weight", "gradients/gradient/Linear_weight", "MSELoss_output_0",
            "scalar/lr"} <= set(tags0)
    assert tags0["weights/Linear_weight"].histo.num == 6
    np.testing.assert_allclose(tags0["weights/Linear_weight"].histo.sum,
                               float(model.weight.detach().sum()), rtol=0.5)  # before updates
    assert tags0["scalar/lr"].simple_value == pytest.approx(0.1)
    tags1 = {v.tag for e in read_events(files[1]) for v in e.summary.value}
    assert tags1 == {"scalar/lr"}  # step 1 is not saved; its save_scalar still is


def test_tensorboard_reads_our_files(tmp_path):
    """Only where the `tensorboard` package is installed in this venv."""
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    tb = TensorBoardWriter(str(tmp_path))
    for step in range(3):
        tb.add_scalar("loss", 1.0 / (step + 1), step, ModeKeys.TRAIN)
        tb.add_histogram("weights/w", np.random.default_rng(step).normal(size=100), step, ModeKeys.TRAIN)
        tb.flush_step()
    tb.close()
    acc = ea.EventAccumulator(str(tmp_path / "TRAIN"), size_guidance={"histograms": 0, "scalars": 0})
    acc.Reload()
    assert [s.value for s in acc.Scalars("loss")] == pytest.approx([1.0, 0.5, 1 / 3])
    assert [h.step for h in acc.Histograms("weights/w")] == [0, 1, 2]
    assert acc.Histograms("weights/w")[0].histogram_value.num == 100
