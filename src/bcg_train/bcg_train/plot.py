"""`bcg-train plot`: runs' E_track and reward against iterations, env samples (log) and wall clock (the BCG
paper's Fig. 5 layout: one row per quantity, one column per x axis, one line per run)."""

from __future__ import annotations

import csv
import math
from pathlib import Path


class PlotError(ValueError):
    pass


ROWS = (("e_track_cm", "E_track [cm]"), ("reward", "reward per step"))
COLS = (("iteration", "iterations", False), ("samples", "env samples", True), ("wall_s", "wall clock [s]", False))


def read_metrics(run: Path) -> dict[str, list[float]]:
    path = run / "metrics.csv"
    if not path.is_file():
        raise PlotError(f"{run}: no metrics.csv (not a bcg-train run folder)")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise PlotError(f"{path}: no iterations logged yet")

    def num(v):
        try:
            return float(v)
        except ValueError:
            return math.nan

    return {k: [num(r[k]) for r in rows] for k in rows[0]}


def plot_runs(runs: list[Path], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = [(r.name, read_metrics(r)) for r in runs]
    fig, axes = plt.subplots(len(ROWS), len(COLS), figsize=(4 * len(COLS), 3 * len(ROWS)), squeeze=False)
    for i, (key, ylabel) in enumerate(ROWS):
        for j, (xkey, xlabel, logx) in enumerate(COLS):
            ax = axes[i][j]
            for name, m in data:
                ax.plot(m[xkey], m[key], label=name)
            if logx:
                ax.set_xscale("log")
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
