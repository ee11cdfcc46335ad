"""Helpers for the PyTorch hook tests: tiny models, an independent reader of an out_dir built
on smdebug_lite.format only, and a bridge to real smdebug 1.0.34 in the reference venv."""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from smdebug_lite.format.index_file import parse_index
from smdebug_lite.format.records import decode_record
from smdebug_lite.format.tensor_codec import decode_tensor_event

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def seeded_without_hook():
    """Seed 0 for the test; afterwards, no process-wide hook is left for the next test.
    (Test modules use it with ``pytestmark = pytest.mark.usefixtures(...)``.)"""
    import smdebug_lite.pytorch as smd

    torch.manual_seed(0)
    yield
    smd.del_hook()


class MLP(nn.Module):
    def __init__(self, d_in: int = 6, hidden: int = 8, d_out: int = 3) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(12, 4)

    def forward(self, x):
        h = self.pool(self.relu(self.bn(self.conv1(x))))
        return self.fc(h.flatten(1))


@dataclass
class StepData:
    mode: str
    mode_step: int
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    shapes: dict[str, tuple] = field(default_factory=dict)
    event_modes: set = field(default_factory=set)


def read_out_dir(out_dir: str | os.PathLike) -> dict[tuple[str, int], StepData]:
    """{(worker, global step): StepData} from the index and event files."""
    result: dict[tuple[str, int], StepData] = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "index", "*", "*.json"))):
        doc = parse_index(Path(path).read_text(), path)
        data = StepData(doc.mode.name, doc.mode_step)
        if doc.tensors:
            buf = Path(out_dir, doc.event_file_name).read_bytes()
            for e in doc.tensors:
                payload, end = decode_record(buf, e.start_idx)
                assert end - e.start_idx == e.length
                dec = decode_tensor_event(payload)
                assert dec.tag == e.name and dec.step == doc.step
                assert name_not_duplicated(data.tensors, e.name)
                data.tensors[e.name] = dec.value
                data.event_modes.add((dec.mode_value, dec.mode_step))
        for s in doc.shapes:
            data.shapes[s.name] = s.shape
        result[(doc.worker, doc.step)] = data
    return result


def name_not_duplicated(d: dict, name: str) -> bool:
    if name in d:
        raise AssertionError(f"tensor {name} written twice in one step")
    return True


def steps_of(data: dict[tuple[str, int], StepData], name: str, mode: str | None = None,
             worker: str = "worker_0") -> list[int]:
    """Mode steps (or global steps when mode is None) at which `name` was saved."""
    out = []
    for (w, step), d in sorted(data.items()):
        if w == worker and name in d.tensors and (mode is None or d.mode == mode):
            out.append(step if mode is None else d.mode_step)
    return out


def value_at(data, name: str, mode: str, mode_step: int, worker: str = "worker_0") -> np.ndarray:
    for (w, _), d in data.items():
        if w == worker and d.mode == mode and d.mode_step == mode_step:
            return d.tensors[name]
    raise KeyError((name, mode, mode_step))


class Recorder:
    """Independent capture with plain torch: parameters before each forward, gradients after
    backward, losses; keyed by (mode, mode_step)."""

    def __init__(self, model: nn.Module, root: str) -> None:
        self.model, self.root = model, root
        self.values: dict[tuple[str, int], dict[str, np.ndarray]] = {}

    def params(self, key) -> None:
        d = self.values.setdefault(key, {})
        for n, p in self.model.named_parameters():
            d[f"{self.root}_{n}"] = p.detach().clone().numpy()

    def grads(self, key) -> None:
        d = self.values.setdefault(key, {})
        for n, p in self.model.named_parameters():
            if p.grad is not None:
                d[f"gradient/{self.root}_{n}"] = p.grad.detach().clone().numpy()

    def put(self, key, name: str, value: torch.Tensor) -> None:
        self.values.setdefault(key, {})[name] = value.detach().clone().numpy()


def train_loop(model: nn.Module, hook, recorder: Recorder | None, *, train_steps: int,
               eval_steps: int, shape=(5, 6), n_classes: int = 3, seed: int = 0):
    """TRAIN then EVAL with CrossEntropyLoss, recording everything independently."""
    import smdebug_lite.pytorch as smd

    g = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    if hook is not None:
        hook.register_module(model)
        hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if hook is not None:
        hook.set_mode(smd.modes.TRAIN)
    for step in range(train_steps):
        x = torch.randn(*shape, generator=g)
        y = torch.randint(0, n_classes, (shape[0],), generator=g)
        key = ("TRAIN", step)
        if recorder:
            recorder.params(key)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        if recorder:
            recorder.grads(key)
            recorder.put(key, "CrossEntropyLoss_output_0", loss)
        opt.step()
    if hook is not None:
        hook.set_mode(smd.modes.EVAL)
    model.eval()
    with torch.no_grad():
        for step in range(eval_steps):
            x = torch.randn(*shape, generator=g)
            y = torch.randint(0, n_classes, (shape[0],), generator=g)
            key = ("EVAL", step)
            if recorder:
                recorder.params(key)
            loss = loss_fn(model(x), y)
            if recorder:
                recorder.put(key, "CrossEntropyLoss_output_0", loss)
    model.train()


REF_READER = r"""
import json, sys
import numpy as np
from smdebug.trials import create_trial
from smdebug import modes

def read(path):
    t = create_trial(path)
    out = {"tensor_names": t.tensor_names(), "workers": sorted(t.workers()),
           "steps": {m: t.steps(mode=getattr(modes, m)) for m in ("TRAIN", "EVAL", "GLOBAL")},
           "values": {}, "reductions": {}}
    for name in t.tensor_names():
        tensor = t.tensor(name)
        for m in ("TRAIN", "EVAL"):
            try:
                steps = tensor.steps(mode=getattr(modes, m))
            except Exception:
                steps = []
            for s in steps:
                key = f"{m}/{s}/{name}"
                try:
                    v = np.asarray(tensor.value(s, mode=getattr(modes, m)))
                    out["values"][key] = [str(v.dtype), list(v.shape), v.astype(np.float64).reshape(-1).tolist()]
                except Exception as e:
                    out["values"][key] = ["unavailable", type(e).__name__]
                for (rname, is_abs), rv in (tensor.reduction_values(s, mode=getattr(modes, m)) or {}).items():
                    out["reductions"][f"{key}/{'abs_' if is_abs else ''}{rname}"] = float(rv)
    return out

print("@@RESULT@@" + json.dumps({p: read(p) for p in sys.argv[1:]}))
"""


def read_with_smdebug(*out_dirs: str) -> dict:
    """What real smdebug 1.0.34's trial answers for every tensor of each out_dir."""
    from refvenv import run_ref

    proc = run_ref(REF_READER, *map(str, out_dirs), timeout=300)
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@RESULT@@")]
    if proc.returncode != 0 or not marker:
        raise AssertionError(f"smdebug failed to read {out_dirs}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(marker[0][len("@@RESULT@@"):])


def ref_available() -> tuple[bool, str]:
    from refvenv import ref_python

    py, reason = ref_python()
    return py is not None, reason


def read_with_our_trial(path: str) -> dict:
    """The REF_READER answers from smdebug_lite: the very same code, its `import smdebug`
    served by smdebug-lite's alias (as user code written for smdebug would be)."""
    import _smdebug_lite_alias

    _smdebug_lite_alias.install()
    namespace: dict = {}
    exec(REF_READER.split('print("@@RESULT@@"')[0], namespace)
    return namespace["read"](str(path))


def write_hook_trial(out: Path, train_steps: int, eval_steps: int) -> Path:
    """A trial our PyTorch hook wrote: `train_steps` TRAIN steps then `eval_steps` EVAL steps of
    a tiny MLP, weights, biases, gradients and losses saved at every step."""
    import smdebug_lite.pytorch as smd

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(str(out), save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "biases", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(train_steps):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    hook.set_mode(smd.modes.EVAL)
    with torch.no_grad():
        for _ in range(eval_steps):
            loss_fn(model(x), y)
    hook.close()
    return out
