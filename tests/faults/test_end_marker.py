"""The end marker (`training_job_end.ts`) that readers wait for is written however a run ends:
a script that never calls `close()` (atexit), SIGTERM (the process still ends killed by
SIGTERM, or the script's own handler runs), and a disk that filled up (written straight to
storage by `close()`). Real PyTorch training in a subprocess each time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
END = "training_job_end.ts"

# argv: out_dir, how ("noclose", "sigterm", "handler-before", "handler-after", "full").
# Trains saving every step; with a signal to wait for, says @@READY@@ after 10 steps and
# trains on (bounded) until the signal ends it.
SCRIPT = textwrap.dedent("""
    import json, os, signal, sys, time
    import torch
    from torch import nn
    import smdebug_lite.pytorch as smd

    out, how = sys.argv[1], sys.argv[2]

    def on_term(signum, frame):
        with open(os.path.join(os.path.dirname(out), "handled"), "a") as f:
            f.write(f"{signum} end marker there: {os.path.exists(os.path.join(out, 'training_job_end.ts'))}\\n")
        sys.exit(7)

    if how == "handler-before":
        signal.signal(signal.SIGTERM, on_term)
    if how == "full":  # the disk is full before the hook writes anything
        try:
            with open(os.path.join(os.path.dirname(out), "filler"), "wb") as f:
                while True:
                    f.write(bytes(65536))
        except OSError:
            pass
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights", "gradients", "losses"])
    hook.register_module(model)
    hook.register_loss(loss_fn)
    if how == "handler-after":
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(5))
    waits = how.startswith(("sigterm", "handler"))
    deadline = time.monotonic() + 120
    step = 0
    while step < 30 or (waits and time.monotonic() < deadline):
        opt.zero_grad()
        loss_fn(model(torch.randn(16, 32)), torch.randint(0, 4, (16,))).backward()
        opt.step()
        step += 1
        if step == 10 and waits:
            print("@@READY@@", flush=True)
        if waits:
            time.sleep(0.01)
    if how == "full":
        hook.close()
        print("@@END_MARKER@@" + str(os.path.exists(os.path.join(out, "training_job_end.ts"))))
    print("@@TRAINED@@" + json.dumps(step), flush=True)
    # "noclose": the script just ends
""")


def _start(tmp_path: Path, how: str, prefix: list[str] | None = None) -> subprocess.Popen:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO),
           "HOME": str(tmp_path), "SMDEBUG_WRITER": os.environ.get("SMDEBUG_WRITER", "process")}
    return subprocess.Popen([*(prefix or []), sys.executable, str(script),
                             str(tmp_path / "disk" / "run"), how],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=tmp_path)


def _terminate_when_ready(proc: subprocess.Popen) -> str:
    """Send SIGTERM once the script trains; its whole output once it ended (bounded waits)."""
    seen = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # (the script says READY within seconds, or ends)
        seen.append(line)
        if "@@READY@@" in line or time.monotonic() > deadline:
            break
    assert any("@@READY@@" in line for line in seen), "".join(seen)
    time.sleep(0.3)  # (a few more steps, so that the signal lands mid-training)
    proc.send_signal(signal.SIGTERM)
    try:
        rest, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        rest, _ = proc.communicate()
        pytest.fail("the training process did not end within 120s of SIGTERM:\n" + rest)
    return "".join(seen) + rest


def _saved_steps(out_dir: Path) -> list[int]:
    from smdebug_lite.trials import create_trial

    return create_trial(str(out_dir)).steps()


@pytest.mark.slow
def test_a_script_that_never_closes_the_hook_ends_its_run_at_exit(tmp_path):
    (tmp_path / "disk").mkdir()
    proc = _start(tmp_path, "noclose")
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, output
    run = tmp_path / "disk" / "run"
    assert (run / END).exists()
    assert _saved_steps(run) == list(range(30))  # the last step too, handed over at exit


def test_sigterm_ends_the_run_on_disk_and_the_process_as_killed_by_sigterm(tmp_path):
    (tmp_path / "disk").mkdir()
    proc = _start(tmp_path, "sigterm")
    output = _terminate_when_ready(proc)
    assert proc.returncode == -signal.SIGTERM, output
    run = tmp_path / "disk" / "run"
    assert (run / END).exists(), output
    steps = _saved_steps(run)
    assert len(steps) >= 10 and steps == list(range(len(steps))), steps
    assert "Traceback" not in output and " ERROR " not in output, output
    assert "SIGTERM received; closing 1 hook(s)" in output, output


@pytest.mark.slow
def test_sigterm_closes_the_hook_then_calls_the_handler_installed_before(tmp_path):
    (tmp_path / "disk").mkdir()
    proc = _start(tmp_path, "handler-before")
    output = _terminate_when_ready(proc)
    assert proc.returncode == 7, output  # the script's handler chose the exit
    # It ran once, after the hook was closed.
    assert (tmp_path / "disk" / "handled").read_text() == f"{int(signal.SIGTERM)} end marker there: True\n"
    assert (tmp_path / "disk" / "run" / END).exists()


@pytest.mark.slow
def test_a_handler_installed_after_the_hook_is_left_alone(tmp_path):
    (tmp_path / "disk").mkdir()
    proc = _start(tmp_path, "handler-after")
    output = _terminate_when_ready(proc)
    assert proc.returncode == 5, output  # the script's handler, not ours
    assert "SIGTERM received" not in output, output
    # sys.exit in that handler still ends the run on disk, at exit.
    run = tmp_path / "disk" / "run"
    assert (run / END).exists(), output
    steps = _saved_steps(run)
    assert steps == list(range(len(steps))) and len(steps) >= 10, steps


# Mounts a 1 MiB tmpfs on $1, then runs the rest of the arguments (as tests/test_full_disk.py).
NAMESPACE_SCRIPT = 'mount -t tmpfs -o size=1m tmpfs "$1" && shift && exec "$@"'


@pytest.mark.parametrize("writer", ["process", "thread"])
@pytest.mark.slow
def test_a_full_disk_still_gets_the_end_marker_at_close(tmp_path, monkeypatch, writer):
    disk = tmp_path / "disk"
    disk.mkdir()
    monkeypatch.setenv("SMDEBUG_WRITER", writer)
    prefix = ["unshare", "-m", "sh", "-c", NAMESPACE_SCRIPT, "sh", str(disk)]
    try:
        proc = _start(tmp_path, "full", prefix)
    except FileNotFoundError:
        pytest.skip("unshare(1) is not installed")
    output, _ = proc.communicate(timeout=180)
    if proc.returncode != 0 and output.startswith(("unshare:", "mount:")):
        pytest.skip(f"no private tmpfs mount here (needs root or CAP_SYS_ADMIN): {output.strip()}")
    assert proc.returncode == 0, output
    # The mount is gone with its namespace: the script reports what it left through stdout.
    assert "@@TRAINED@@30" in output, output
    assert "@@END_MARKER@@True" in output, output


FORKED_CHILD = textwrap.dedent("""
    import ctypes, os, signal, sys, time
    import torch
    import smdebug_lite.pytorch as smd

    hook = smd.Hook(out_dir=sys.argv[1], save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["weights"])
    model = torch.nn.Linear(2, 2)
    hook.register_module(model)
    model(torch.randn(1, 2))
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the hook's handler
    pid = os.fork()
    if pid == 0:  # stuck in C, as on a lock another thread held at fork
        libc = ctypes.CDLL(None)
        mutex = ctypes.create_string_buffer(64)
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)
        os._exit(0)
    time.sleep(0.5)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            print("@@CHILD@@", os.waitstatus_to_exitcode(status), flush=True)
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("@@CHILD@@ still running 20s after SIGTERM", flush=True)
    model(torch.randn(1, 2))
    hook.close()
    print("@@END@@", os.path.exists(os.path.join(sys.argv[1], "training_job_end.ts")), flush=True)
""")


@pytest.mark.slow
def test_a_forked_child_stuck_in_c_still_ends_on_sigterm(tmp_path):
    """A `multiprocessing` pool terminates its forked workers with SIGTERM and waits for them:
    the hook's handler, inherited, would never run in a child stuck on a lock in C code."""
    script = tmp_path / "fork.py"
    script.write_text(FORKED_CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], text=True,
                         capture_output=True, timeout=120, cwd=REPO, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"@@CHILD@@ {-signal.SIGTERM}" in out.stdout, out.stdout + out.stderr
    assert "@@END@@ True" in out.stdout, out.stdout  # the parent's run ends as before


HANDLERS_AFTER_FORK = textwrap.dedent("""
    import os, signal, sys
    import torch
    import smdebug_lite.pytorch as smd

    def hook_on(model, out):
        hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1),
                        include_collections=["weights"])
        hook.register_module(model)
        model(torch.randn(1, 2))
        return hook

    def own(signum, frame):
        sys.exit(3)

    def describe():
        h = signal.getsignal(signal.SIGTERM)
        return "ours" if getattr(h, "__module__", "").startswith("smdebug_lite") else (
            "script" if h is own else str(h))

    out, replace = sys.argv[1], sys.argv[2] == "replaced"
    hook = hook_on(torch.nn.Linear(2, 2), os.path.join(out, "parent"))
    if replace:  # the script's handler, installed after the hook's
        signal.signal(signal.SIGTERM, own)
    pid = os.fork()
    if pid == 0:
        seen = [describe()]
        hook_on(torch.nn.Linear(2, 2), os.path.join(out, "child")).close()
        seen.append(describe())
        print("@@CHILD@@", *seen, flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    print("@@PARENT@@", describe(), flush=True)
    hook.close()
""")


@pytest.mark.parametrize("replaced", [False, True])
@pytest.mark.slow
def test_sigterm_handlers_in_a_forked_child(tmp_path, replaced):
    """The child starts with the handler from before the hook's, and its own hook installs the
    hook's again; a handler the script installed over the hook's is kept in the child, and
    never replaced by the child's hook."""
    script = tmp_path / "handlers.py"
    script.write_text(HANDLERS_AFTER_FORK)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, str(script), str(tmp_path),
                          "replaced" if replaced else "kept"], text=True, capture_output=True,
                         timeout=120, cwd=REPO, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    if replaced:
        expected = ("@@CHILD@@ script script", "@@PARENT@@ script")
    else:
        expected = (f"@@CHILD@@ {signal.SIG_DFL} ours", "@@PARENT@@ ours")
    for line in expected:
        assert line in out.stdout, out.stdout + out.stderr
