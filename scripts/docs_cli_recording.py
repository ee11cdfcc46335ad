"""Record the `smdebug-lite` command on a freshly trained trial as an animated SVG for the docs.

A small PyTorch run (with `detect_non_finite=True`, turning non-finite at a known step) is
written to a temporary folder, the commands below run in real subprocesses on a pseudo-terminal,
and each command with its output becomes one frame of a terminal that plays them in turn (CSS
animation only: no script, nothing fetched, so it plays inside the docs site and on its own).

    python scripts/docs_cli_recording.py [--out docs/cli.svg]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 96  # terminal columns of the recording
SECONDS_PER_FRAME = 6.0

TRAIN = """
import sys
import torch
from smdebug_lite import SaveConfig, modes
from smdebug_lite.pytorch import Hook

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
loss_fn = torch.nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
hook = Hook(out_dir=sys.argv[1], save_config=SaveConfig(save_interval=5),
            include_collections=["weights", "gradients", "losses"], detect_non_finite=True)
hook.register_module(model)
hook.register_loss(loss_fn)
hook.set_mode(modes.TRAIN)
x, y = torch.randn(64, 8), torch.randint(0, 2, (64,))
for step in range(40):
    if step == 33:
        x[0, 0] = float("inf")  # a bad sample reaches the first layer
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
hook.close()
"""


def commands(trial: str) -> list[list[str]]:
    """The session the recording shows, as a user would type it."""
    return [
        ["summary", trial],
        ["show", trial, "CrossEntropyLoss_output_0", "--mode", "TRAIN"],
        ["rules", trial, "--rule", "LossNotDecreasing", "--rule", "ExplodingTensor"],
    ]


def train(trial: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", TRAIN, str(trial)], check=True, env=env)


def run_command(args: list[str], cwd: Path) -> str:
    """The command's output with its colours (ANSI), as a terminal of WIDTH columns shows it: the
    command runs on a pseudo-terminal of that size, as in a user's shell."""
    import fcntl
    import pty
    import struct
    import termios

    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color",
           "SMDEBUG_LOG_LEVEL": "WARNING"}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 60, WIDTH, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "smdebug_lite.cli", *args], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the command closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    code = proc.wait(timeout=300)
    if code not in (0, 1):  # 1: a rule found issues, which the recording shows
        raise RuntimeError(f"smdebug-lite {' '.join(args)} exited {code}: {stderr[-2000:]}")
    return b"".join(chunks).decode().replace("\r\n", "\n")


def frame_svg(command: str, output: str, index: int, lines: int) -> str:
    """One terminal screen (prompt, command, output padded to `lines`) as an SVG document, its
    styles scoped to it."""
    from rich.console import Console
    from rich.text import Text

    console = Console(record=True, width=WIDTH, force_terminal=True, color_system="truecolor",
                      file=open(os.devnull, "w"))  # noqa: SIM115 - recorded, not shown
    console.print(Text("$ ", style="bold green") + Text(command, style="bold"))
    output = output.rstrip("\n")
    console.print(Text.from_ansi(output + "\n" * max(0, lines - output.count("\n") - 1)))
    return console.export_svg(title="smdebug-lite", unique_id=f"f{index}")


def animated(frames: list[str]) -> str:
    """Frames stacked in one SVG, each visible for its share of a looping cycle."""
    import re

    sizes = [re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', f) for f in frames]
    width = max(float(m.group(1)) for m in sizes if m)
    height = max(float(m.group(2)) for m in sizes if m)
    count = len(frames)
    cycle = SECONDS_PER_FRAME * count
    share = 100.0 / count
    style = [f"@keyframes show {{ 0% {{ opacity: 1 }} {share - 0.01:.2f}% {{ opacity: 1 }} "
             f"{share:.2f}% {{ opacity: 0 }} 100% {{ opacity: 0 }} }}",
             f".frame {{ opacity: 0; animation: show {cycle:.1f}s step-end infinite; }}"]
    groups = []
    for index, frame in enumerate(frames):
        # drawn at its own size from the top left corner, not scaled into the whole picture
        body = re.sub(r'<svg ([^>]*)viewBox="0 0 ([\d.]+) ([\d.]+)"',
                      r'<svg \1width="\2" height="\3" viewBox="0 0 \2 \3"',
                      frame.split("?>", 1)[-1].strip(), count=1)
        style.append(f".frame-{index} {{ animation-delay: {index * SECONDS_PER_FRAME:.1f}s; }}")
        groups.append(f'<g class="frame frame-{index}">{body}</g>')
    # Without animation support (some viewers), the first frame is what shows.
    style.append("@media (prefers-reduced-motion: reduce) { .frame { animation: none; } "
                 ".frame-0 { opacity: 1; } }")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:g} {height:g}" '
            f'width="{width:g}" height="{height:g}" role="img" '
            f'aria-label="smdebug-lite summary, show and rules on a trial">\n'
            f"<style>\n{chr(10).join(style)}\n</style>\n" + "\n".join(groups) + "\n</svg>\n")


def record(out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train(work / "my-trial")
        shown = [("smdebug-lite " + " ".join(args), run_command(args, work))
                 for args in commands("my-trial")]
    lines = max(output.rstrip("\n").count("\n") + 1 for _, output in shown)
    frames = [frame_svg(command, output, index, lines)
              for index, (command, output) in enumerate(shown)]
    out.write_text(animated(frames))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "cli.svg")
    record(parser.parse_args(argv).out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
