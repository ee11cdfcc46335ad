"""Figures as PNG data URIs (matplotlib, Agg), so the page needs nothing but itself to open.

matplotlib is the optional extra ``report``; figures are built on `Figure` objects directly
(no pyplot), so nothing global is touched in a process that also uses matplotlib itself.
"""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import numpy as np

from smdebug_lite.report.gather import Curve, Heatmap, StatsGroup

DPI = 100
MAX_LINES = 12  # lines per axes before the rest are left out of the legend


class MissingDependency(ImportError):
    """matplotlib is not installed."""


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise MissingDependency(
            "the HTML report draws its plots with matplotlib, which is not installed; "
            "install it with: pip install 'smdebug-lite[report]'") from e
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def to_data_uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def short(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else "..." + name[-(limit - 3):]


def loss_figure(curves: list[Curve]) -> str:
    """One panel per mode, x the mode step, a line per loss tensor."""
    modes = list(dict.fromkeys(c.mode for c in curves))
    fig = _figure(min(4.2 * len(modes), 12.0) + 0.8, 3.2)
    axes = fig.subplots(1, len(modes), squeeze=False)[0]
    for ax, mode in zip(axes, modes, strict=True):
        mine = [c for c in curves if c.mode == mode]
        for c in mine[:MAX_LINES]:
            marker = "o" if len(c.steps) <= 30 else None
            ax.plot(c.steps, c.values, marker=marker, markersize=3, linewidth=1.4,
                    label=short(c.tensor, 32))
        ax.set_title(f"{mode}")
        ax.set_xlabel(f"{mode.lower()} step")
        ax.set_ylabel("loss")
        ax.grid(True, alpha=0.3)
        values = [v for c in mine for v in c.values if math.isfinite(v)]
        if values and min(values) > 0 and max(values) / min(values) > 100:
            ax.set_yscale("log")
        ax.legend(fontsize=7, loc="best")
    return to_data_uri(fig)


def gradient_figure(heat: Heatmap) -> str:
    """log10 of each layer's gradient L2 norm over steps; grey where nothing was saved."""
    from matplotlib import colormaps

    rows = len(heat.layers)
    fig = _figure(11.0, min(1.6 + 0.28 * rows, 14.0))
    ax = fig.subplots()
    with np.errstate(divide="ignore", invalid="ignore"):
        data = np.log10(np.where(heat.norms > 0, heat.norms, np.nan))
    zero = heat.norms == 0
    floor = np.nanmin(data) - 1 if np.isfinite(data).any() else -12.0
    data = np.where(zero, floor, data)  # exactly zero: below the smallest norm, not missing
    cmap = colormaps["viridis"].with_extremes(bad="#d9d9d9")
    image = ax.imshow(np.ma.masked_invalid(data), aspect="auto", interpolation="nearest",
                      cmap=cmap)
    fig.colorbar(image, ax=ax, label="log10 ||gradient||2", pad=0.01)
    ax.set_yticks(range(rows), [short(n, 48) for n in heat.layers], fontsize=7)
    cols = len(heat.steps)
    ticks = sorted({round(i * (cols - 1) / 8) for i in range(9)}) if cols > 9 else range(cols)
    ax.set_xticks(list(ticks), [str(heat.steps[i]) for i in ticks], fontsize=7)
    ax.set_xlabel("global step")
    return to_data_uri(fig)


def stats_figure(group: StatsGroup) -> str:
    """Two panels: each tensor's L2 norm and its standard deviation over the steps."""
    fig = _figure(11.0, 3.4)
    norm_ax, std_ax = fig.subplots(1, 2)
    for ts in group.tensors[:MAX_LINES]:
        label = short(ts.tensor, 30)
        norm_ax.plot(ts.steps, ts.stats["l2"], linewidth=1.3, label=label)
        std_ax.plot(ts.steps, ts.stats["std"], linewidth=1.3, label=label)
    norm_ax.set_title(f"{group.title}: L2 norm")
    std_ax.set_title(f"{group.title}: standard deviation")
    for ax in (norm_ax, std_ax):
        ax.set_xlabel("global step")
        ax.grid(True, alpha=0.3)
    std_ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return to_data_uri(fig)
