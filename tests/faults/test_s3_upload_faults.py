"""A PyTorch hook writing to s3:// through a proxy that throttles (503 SlowDown) and cuts
connections, PUT responses included: every step is readable afterwards, and the uploader's
order holds at S3 itself (from the proxy's log of forwarded requests): no index file is sent
before its event file was stored, and index files reach S3 in step order."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from faults.fault_proxy import FaultProxy
from smdebug_lite.format.locations import parse_event_file_name, parse_index_file_name
from smdebug_lite.trials import create_trial

pytest.importorskip("torch")
pytest.importorskip("moto")

REPO = Path(__file__).resolve().parents[2]
STEPS = 30

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    from torch import nn
    import smdebug_lite.pytorch as smd

    torch.manual_seed(0)
    hook = smd.Hook(out_dir=sys.argv[1], save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "biases", "gradients", "losses"])
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    loss_fn = nn.MSELoss()
    hook.register_module(model)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(int(sys.argv[2])):
        opt.zero_grad()
        loss = loss_fn(model(torch.randn(8, 4)), torch.zeros(8, 2))
        loss.backward()
        opt.step()
    hook.close()
    print("@@DONE disabled=%s" % hook.disabled, flush=True)
""")


def _rel(path: str, bucket: str) -> str:
    """The key under the bucket of a path-style request path."""
    path = unquote(urlparse(path).path)
    prefix = f"/{bucket}/"
    return path[len(prefix):] if path.startswith(prefix) else path


@pytest.mark.slow
def test_hook_writes_every_step_in_order_through_throttling_and_resets(s3_endpoint, s3_bucket):
    uri = f"s3://{s3_bucket}/job"
    with FaultProxy(s3_endpoint.url, seed=11, slowdown=0.10, reset=0.04) as proxy:
        env = dict(os.environ, AWS_ENDPOINT_URL=proxy.url, AWS_ENDPOINT_URL_S3=proxy.url,
                   PYTHONPATH=str(REPO), SMDEBUG_S3_UPLOAD_CONCURRENCY="4")
        done = subprocess.run([sys.executable, "-c", SCRIPT, uri, str(STEPS)], env=env,
                              cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "@@DONE disabled=False" in done.stdout, done.stdout + done.stderr
    assert "failed after" not in done.stderr, done.stderr
    assert proxy.counts.slowdowns >= 5 and proxy.counts.resets >= 2, proxy.counts

    # Every step is there, whole (read straight from moto, not through the proxy).
    trial = create_trial(uri)
    assert trial.steps() == list(range(STEPS))
    names = trial.tensor_names()
    assert any("weight" in n for n in names) and any("gradient" in n for n in names)
    for name in names:
        tensor = trial.tensor(name)
        assert tensor.steps() == list(range(STEPS)), name
        for step in range(STEPS):
            assert tensor.value(step) is not None

    # Order at S3: when each object was first sent, and first stored (answered 200, even if
    # the answer was then cut on its way back).
    sent: dict[str, float] = {}
    stored: dict[str, float] = {}
    for f in proxy.forwarded:
        if f.method != "PUT":
            continue
        key = _rel(f.path, s3_bucket)
        sent[key] = min(sent.get(key, f.sent), f.sent)
        if f.status == 200:
            stored[key] = min(stored.get(key, f.answered), f.answered)
    events = {parse_event_file_name(k): k for k in stored if parse_event_file_name(k)}
    indexes = sorted((parse_index_file_name(k), k) for k in sent if parse_index_file_name(k))
    assert [step for (step, _w), _k in indexes] == list(range(STEPS))
    for (step, worker), key in indexes:
        event = events.get((step, worker))
        assert event is not None, f"no event file stored for step {step}"
        assert sent[key] >= stored[event], f"index of step {step} sent before its event file"
    for (_, earlier), (_, later) in zip(indexes, indexes[1:], strict=False):
        assert sent[later] >= stored[earlier], f"{later} sent before {earlier} was stored"
