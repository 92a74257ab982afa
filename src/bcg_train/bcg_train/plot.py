"""`bcg-train plot`: runs' E_track and reward against iterations, env samples (log) and wall clock (the BCG
paper's Fig. 5 layout: one row per quantity, one column per x axis, one line per run). The training batch's
numbers come from metrics.csv; the fixed-protocol evaluation's (E_track, falls) from eval.csv when the runs
have one (dashed: its MuJoCo figures, when the run has them: eval.mujoco_runs)."""

from __future__ import annotations

import csv
import math
from pathlib import Path


class PlotError(ValueError):
    pass


# (file, column, y label): training batch (every iteration), then the fixed-protocol evaluation
ROWS = (
    ("metrics.csv", "e_track_cm", "E_track, training batch [cm]"),
    ("metrics.csv", "reward", "reward per step"),
    ("eval.csv", "e_track_cm", "E_track, evaluation [cm]"),
    ("eval.csv", "falls", "falls, evaluation [fraction]"),
)
COLS = (("iteration", "iterations", False), ("samples", "env samples", True), ("wall_s", "wall clock [s]", False))


def read_metrics(run: Path, name: str = "metrics.csv") -> dict[str, list[float]]:
    path = run / name
    if not path.is_file():
        raise PlotError(f"{run}: no {name} (not a bcg-train run folder)")
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

    files = {
        "metrics.csv": [(r.name, read_metrics(r)) for r in runs],
        "eval.csv": [(r.name, read_metrics(r, "eval.csv")) for r in runs if (r / "eval.csv").is_file()],
    }
    rows = [row for row in ROWS if files[row[0]]]
    fig, axes = plt.subplots(len(rows), len(COLS), figsize=(4 * len(COLS), 3 * len(rows)), squeeze=False)
    for i, (file, key, ylabel) in enumerate(rows):
        for j, (xkey, xlabel, logx) in enumerate(COLS):
            ax = axes[i][j]
            for name, m in files[file]:
                line = ax.plot(m[xkey], m[key], label=name, marker="." if file == "eval.csv" else None)[0]
                if f"mj_{key}" in m:  # eval.mujoco_runs: the same headline in MuJoCo, dashed in the run's colour
                    ax.plot(m[xkey], m[f"mj_{key}"], "--", color=line.get_color(), label=f"{name} (MuJoCo)")
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
