"""The HTML report: built from real trials (smdebug-written golden ones, our PyTorch hook's, a
long one), self-contained, and rendered by headless Chromium without console errors."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import GOLDEN_DIR
from test_rules_helpers import Step, fixed_batches, train_torch, write_trial

from smdebug_lite.config.reduction_config import ReductionConfig
from smdebug_lite.distributed import RuleJob
from smdebug_lite.modes import ModeKeys
from smdebug_lite.report import ReportError, write_report
from smdebug_lite.report import gather as gather_mod
from smdebug_lite.report.nonfinite import COUNTS, MINMAX, RAW, first_nonfinite
from smdebug_lite.report.sampling import spread
from smdebug_lite.trials import create_trial

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
Image = pytest.importorskip("PIL.Image", reason="Pillow (a matplotlib dependency) is missing")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DATA_URI = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


# -- helpers -----------------------------------------------------------------------------------


def render(html: Path, png: Path, height: int = 2400) -> str:
    """Screenshot `html` with headless Chromium (no network); returns its log."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
         "--no-first-run", f"--user-data-dir={png.parent / 'chromium-profile'}",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
         f"--screenshot={png}", f"--window-size=1280,{height}", html.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)
    assert png.is_file(), f"no screenshot (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def console_messages(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def assert_self_contained(text: str) -> None:
    """Nothing fetched when opened: every src/href is a data URI or a fragment, no script."""
    for attr, value in re.findall(r'\b(src|href)="([^"]*)"', text):
        assert value.startswith(("data:", "#")), f"{attr}={value[:80]!r} would be fetched"
    assert "<script" not in text.lower()
    assert "url(" not in text  # no CSS fetches either
    images = DATA_URI.findall(text)
    for b64 in images:
        with Image.open(io.BytesIO(base64.b64decode(b64))) as im:
            im.verify()  # each embedded image is a complete PNG


def assert_not_blank(png: Path) -> None:
    with Image.open(png) as im:
        px = np.asarray(im.convert("RGB")).astype(np.int16)
    non_white = (px < 245).any(axis=2).mean()
    colourful = (px.max(axis=2) - px.min(axis=2) > 60).sum()  # plot lines, heatmap, badges
    assert len(np.unique(px.reshape(-1, 3), axis=0)) > 50, "the page rendered as flat colour"
    assert non_white > 0.05, f"only {non_white:.1%} of the page is not white"
    assert colourful > 20000, f"only {colourful} coloured pixels: were the plots drawn?"


def diverging_run(out: Path, reduction_config: ReductionConfig | None = None) -> Path:
    """A small MLP trained with a huge learning rate by our hook: it goes Inf, then NaN."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=g)
    y = x @ torch.randn(8, 1, generator=g)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    train_torch(str(out), model, fixed_batches(x, y), loss_fn=nn.MSELoss(), lr=1e4,
                phases=[(ModeKeys.TRAIN, 12), (ModeKeys.EVAL, 3)],
                reduction_config=reduction_config)
    return out


def first_offender_by_raw_values(trial) -> tuple[int, set[str]]:
    """Independently: the first step where a raw value holds NaN/Inf, and every such tensor."""
    for step in trial.steps():
        bad = {n for n in trial.tensor_names(step=step)
               if not np.isfinite(trial.tensor(n).value(step)).all()}
        if bad:
            return step, bad
    raise AssertionError("the run never diverged")


# -- tests -------------------------------------------------------------------------------------


def test_spread_keeps_ends_and_bounds_count() -> None:
    steps = list(range(0, 10_000, 3))
    picked = spread(steps, 120)
    assert len(picked) == 120 and picked[0] == 0 and picked[-1] == steps[-1]
    assert picked == sorted(set(picked))
    assert spread([1, 2, 3], 10) == [1, 2, 3]
    with pytest.raises(ValueError, match="limit"):
        spread(steps, 0)


@pytest.mark.browser
def test_golden_smdebug_trials_report_renders_in_chromium(tmp_path: Path) -> None:
    basic, reductions = str(GOLDEN_DIR / "pt_basic"), str(GOLDEN_DIR / "pt_reductions")
    jobs = [RuleJob(basic, "VanishingGradient"),
            RuleJob(basic, "LossNotDecreasing", {"num_steps": "3"}),
            RuleJob(basic, "WeightUpdateRatio", {"large_threshold": "0.001"}),
            RuleJob(reductions, "TensorVariance", {"collection_names": "weights",
                                                   "max_threshold": "0.01"}),
            RuleJob(basic, "NoSuchRule")]
    out = write_report([basic, reductions], str(tmp_path / "out" / "report.html"), rules=jobs)
    text = out.read_text(encoding="utf-8")
    assert_self_contained(text)
    assert len(DATA_URI.findall(text)) == 6  # loss, gradients, weights of each; no activations
    for heading in ("Rule verdicts", "Loss per mode", "Gradient norm per layer", "Weights",
                    "First NaN / Inf"):
        assert text.count(heading) >= 2 or heading == "Rule verdicts", heading
    assert "TRAIN: 20, EVAL: 5" in text and "TRAIN: 6, EVAL: 1" in text
    assert text.count("Activations not saved.") == 2
    assert text.count("No NaN or Inf in any of the") == 2
    assert "saved min/max reductions)" in text  # pt_reductions: no raw weights
    rows = re.findall(r'<span class="status (\w+)">', text)
    assert rows == ["NoIssuesFound", "NoIssuesFound", "IssuesFound", "IssuesFound", "Error"], rows
    assert "WeightUpdateRatio" in text and "too large" in text  # the rule's own evidence
    assert "NoSuchRule" in text

    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium); HTML checks passed")
    png = tmp_path / "report.png"
    log = render(out, png, height=4200)
    assert console_messages(log) == []
    assert_not_blank(png)


@pytest.mark.slow
def test_first_nan_of_our_pytorch_run(tmp_path: Path) -> None:
    trial_dir = diverging_run(tmp_path / "diverged")
    trial = create_trial(str(trial_dir))
    step, offenders = first_offender_by_raw_values(trial)

    search = first_nonfinite(trial)
    assert search.findings and {f.step for f in search.findings} == {step}
    assert {f.tensor for f in search.findings} == offenders
    assert {f.worker for f in search.findings} == {"worker_0"}
    assert search.sources == {RAW}
    first = search.findings[0]
    value = trial.tensor(first.tensor).value(step)
    assert (first.nan, first.inf) == (int(np.isnan(value).sum()), int(np.isinf(value).sum()))

    job = RuleJob(str(trial_dir), "ExplodingTensor", {"collection_names": "weights,gradients"})
    out = write_report([str(trial_dir)], str(tmp_path / "r.html"), rules=[job], progress=True)
    text = out.read_text(encoding="utf-8")
    assert f"First NaN/Inf at step <b>{step}</b>" in text
    assert f"<code>{first.tensor}</code>" in text
    verdict = re.search(r'<span class="status IssuesFound">IssuesFound</span></td>'
                        r'<td class="num">(\d+)</td>', text)
    assert verdict is not None, "ExplodingTensor did not fire in the report"
    assert int(verdict.group(1)) >= step
    assert "TRAIN" in text and "EVAL" in text
    if CHROMIUM is not None:
        png = tmp_path / "r.png"
        assert console_messages(render(out, png)) == []
        assert_not_blank(png)


@pytest.mark.parametrize("config, source", [
    (ReductionConfig(reductions=["num_nan", "num_inf"], save_raw_tensor=True), COUNTS),
    (ReductionConfig(reductions=["min", "max"], save_raw_tensor=False), MINMAX),
])
def test_first_nan_from_saved_reductions(tmp_path: Path, config, source: str) -> None:
    """The same run saved with counts, or with min/max only, points at the same step."""
    step, offenders = first_offender_by_raw_values(
        create_trial(str(diverging_run(tmp_path / "raw"))))
    trial = create_trial(str(diverging_run(tmp_path / "reduced", config)))
    search = first_nonfinite(trial)
    assert {f.step for f in search.findings} == {step}
    assert {f.tensor for f in search.findings} == offenders
    assert source in search.sources
    if source == COUNTS:
        assert all(f.nan is not None and f.inf is not None and f.nan + f.inf > 0
                   for f in search.findings)


def test_trial_without_losses_or_gradients(tmp_path: Path) -> None:
    steps = [Step(i, {"dense.weight": np.full((3, 2), 0.1 * i, dtype=np.float32)})
             for i in range(4)]
    trial_dir = write_trial(str(tmp_path / "weights_only"), steps, {"weights": ["dense.weight"]})
    text = write_report([trial_dir], str(tmp_path / "r.html")).read_text(encoding="utf-8")
    assert "Losses not saved" in text
    assert "Gradients not saved" in text
    assert "Activations not saved." in text
    assert len(DATA_URI.findall(text)) == 1  # the weights figure only
    assert "dense.weight" in text and "No rules were evaluated" in text


def test_long_trial_is_downsampled_and_nan_search_bounded(tmp_path: Path, monkeypatch) -> None:
    n = 600
    steps = [Step(i, {"loss": np.array(1.0 / (i + 1), dtype=np.float32),
                      "gradient/fc.weight": np.full(4, 1e-3 * (i + 1), dtype=np.float32)})
             for i in range(n)]
    trial_dir = write_trial(str(tmp_path / "long"), steps,
                            {"losses": ["loss"], "gradients": ["gradient/fc.weight"]})
    trial = create_trial(trial_dir)
    monkeypatch.setattr(gather_mod, "MAX_CURVE_POINTS", 50)
    (curve,) = gather_mod.loss_curves(trial)
    assert len(curve.steps) == 50 and curve.total_steps == n
    assert curve.steps[0] == 0 and curve.steps[-1] == n - 1
    assert curve.values[-1] == pytest.approx(1.0 / n)
    heat = gather_mod.gradient_heatmap(trial)
    assert heat is not None and heat.norms.shape == (1, gather_mod.MAX_HEATMAP_STEPS)
    assert heat.total_steps == n
    assert heat.norms[0, -1] == pytest.approx(np.linalg.norm(np.full(4, 1e-3 * n)), rel=1e-5)

    monkeypatch.setattr(gather_mod, "HEATMAP_BYTES", 10 * 16)  # ten columns of 4 float32
    assert gather_mod.gradient_heatmap(trial).norms.shape == (1, 10)
    monkeypatch.setattr(gather_mod, "STAT_BYTES", 1)  # large values: first and last step only
    assert gather_mod.tensor_stats(trial, "gradient/fc.weight").steps == [0, n - 1]

    search = first_nonfinite(trial, max_reads=40)
    assert not search.complete and not search.findings
    assert 0 < search.steps_searched < n

    text = write_report([trial_dir], str(tmp_path / "r.html")).read_text(encoding="utf-8")
    assert "evenly spaced steps" in text
    assert f"No NaN or Inf in any of the {n} steps" in text


def test_bad_input_is_named(tmp_path: Path) -> None:
    out = str(tmp_path / "r.html")
    with pytest.raises(FileNotFoundError, match="no_such_trial"):
        write_report([str(tmp_path / "no_such_trial")], out)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="holds no smdebug trial"):
        write_report([str(tmp_path / "empty")], out)
    with pytest.raises(ReportError, match="non-empty list"):
        write_report([], out)
    with pytest.raises(ReportError, match="non-empty list"):
        write_report(str(GOLDEN_DIR / "pt_basic"), out)  # type: ignore[arg-type]
    with pytest.raises(ReportError, match="is a directory"):
        write_report([str(GOLDEN_DIR / "pt_basic")], str(tmp_path))
    assert not Path(out).exists()


@pytest.mark.slow
def test_report_of_s3_trial_matches_local(s3_endpoint, s3_bucket, tmp_path: Path) -> None:
    from test_s3_trial import upload_dir

    upload_dir(s3_endpoint.client(), GOLDEN_DIR / "pt_basic", s3_bucket, "runs/basic")
    uri = f"s3://{s3_bucket}/runs/basic"
    remote = write_report([uri], str(tmp_path / "s3.html")).read_text(encoding="utf-8")
    local = write_report([str(GOLDEN_DIR / "pt_basic")],
                         str(tmp_path / "local.html")).read_text(encoding="utf-8")
    assert uri in remote
    # The same numbers and the same plots, whichever storage they were read from.
    assert DATA_URI.findall(remote) == DATA_URI.findall(local)
    assert re.findall(r'<td class="num">([^<]*)</td>', remote) == re.findall(
        r'<td class="num">([^<]*)</td>', local)
    with pytest.raises(ReportError, match="no trial data appeared"):
        write_report([f"s3://{s3_bucket}/runs/nothing"], str(tmp_path / "none.html"))
