"""The home page's CLI recording: real commands on a real training run, one frame per command,
played by CSS alone (no script, nothing fetched), and a browser draws each frame."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
COMMANDS = ["smdebug-lite summary my-trial",
            "smdebug-lite show my-trial CrossEntropyLoss_output_0 --mode TRAIN",
            "smdebug-lite rules my-trial --rule LossNotDecreasing --rule ExplodingTensor"]


def frames(svg: str) -> list[str]:
    """The text each frame shows, in order."""
    root = ET.fromstring(svg)
    groups = [g for g in root.iter(f"{SVG}g") if "frame" in (g.get("class") or "").split()]
    return ["".join(g.itertext()).replace("\xa0", " ") for g in groups]


def check_recording(svg: str) -> None:
    assert "<script" not in svg and "http://" not in svg.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    shown = frames(svg)
    assert len(shown) == len(COMMANDS)
    for text, command in zip(shown, COMMANDS, strict=True):
        assert re.sub(r"\s+", " ", text).find(command) >= 0, command
    assert "first NaN/Inf" in shown[0] and "IssuesFound" in shown[2]
    assert "animation-delay" in svg


def test_committed_recording_shows_each_command() -> None:
    check_recording((ROOT / "docs" / "cli.svg").read_text())


@pytest.mark.slow
@pytest.mark.browser
def test_recording_is_made_from_a_real_run(tmp_path: Path) -> None:
    out = tmp_path / "cli.svg"
    proc = subprocess.run([sys.executable, "scripts/docs_cli_recording.py", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    svg = out.read_text()
    check_recording(svg)
    shown = frames(svg)
    assert "step 33" in shown[0] and "forward in 0" in shown[0]  # the injected bad input
    assert "nan" in shown[1]

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium); SVG checks passed")
    shot = tmp_path / "frame.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={shot}", "--window-size=1200,700", out.as_uri()],
                   capture_output=True, timeout=120)
    from PIL import Image

    image = Image.open(shot).convert("L")
    dark = sum(1 for p in image.tobytes() if p < 80)
    assert dark > image.width * image.height // 4  # the terminal of the first frame is drawn
