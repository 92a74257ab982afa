"""Writing evaluation results: eval.json, markdown tables, metric-vs-time plots, the PNG strip with a ghost."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

# metric key in `metrics.series` -> (plot title, unit, scale from SI)
PLOTTED = {
    "e_track": ("E_track (mean per-body position error)", "cm", 100.0),
    "joint_err": ("mean joint-angle error", "rad", 1.0),
    "root_height": ("pelvis height", "m", 1.0),
    "penetration": ("foot penetration (mean of both feet)", "mm", 1e3),
    "slip": ("foot slip speed in contact (mean of feet in contact)", "cm/s", 100.0),
}


def fmt(x: float, digits: int = 2) -> str:
    """A number for a table: fixed digits, 'n/a' for None/NaN."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}f}"


def pm(mean: float, std: float, digits: int = 2) -> str:
    return f"{fmt(mean, digits)} ± {fmt(std, digits)}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; every row must have len(headers) cells (str() of each)."""
    for r in rows:
        if len(r) != len(headers):
            raise ValueError(f"table row {list(r)} has {len(r)} cells, the header {len(headers)}")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


EVAL_HEADERS = (
    "policy",
    "MJCF",
    "Falls",
    "Falls in bcg_sim",
    "Δd [mm]",
    "E_track [cm]",
    "joint err [rad]",
    "survival [s]",
    "foot slip [cm/s]",
    "pen. MuJoCo [mm]",
)


def eval_row(result: dict) -> list[str]:
    a, d = result["aggregate"], result.get("delta_d") or {}
    train_falls = f"{d['train_falls']}/{a['runs']}" if "train_falls" in d else ""
    return [
        result["policy_name"],
        result["mjcf_name"],
        f"{a['falls']}/{a['runs']}",
        train_falls,
        fmt(d.get("delta_d_mm"), 2),
        pm(a["e_track_cm_mean"], a["e_track_cm_std"]),
        pm(a["joint_err_rad_mean"], a["joint_err_rad_std"], 3),
        pm(a["survival_s_mean"], a["survival_s_std"]),
        pm(a["slip_cm_s_mean"], a["slip_cm_s_std"]),
        pm(a["pen_mm_mean"], a["pen_mm_std"]),
    ]


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, default=_json_default) + "\n")


def _json_default(x):
    if isinstance(x, (np.floating, np.integer, np.bool_)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serializable: {type(x).__name__}")


def plot_series(out_dir: Path, runs: list[dict[str, np.ndarray]], prefix: str = "") -> list[Path]:
    """One PNG per metric of PLOTTED over time, a line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for key, (title, unit, scale) in PLOTTED.items():
        fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
        for i, s in enumerate(runs):
            y = s[key]
            if y.ndim == 2:  # per foot: mean of the feet with a value (slip is NaN out of contact)
                n = np.isfinite(y).sum(axis=1)
                y = np.where(n > 0, np.nansum(y, axis=1) / np.maximum(n, 1), np.nan)
            ax.plot(s["time"], scale * y, lw=1, label=f"run {i}")
        ax.set_xlabel("time [s]")
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if len(runs) > 1:
            ax.legend(fontsize=7, ncol=min(5, len(runs)))
        fig.tight_layout()
        p = out_dir / f"{prefix}{key}.png"
        fig.savefig(p)
        plt.close(fig)
        paths.append(p)
    return paths


def render_strip_png(
    path: Path, qpos: np.ndarray, ref_qpos: np.ndarray, fps: float, frames: int, width: int, height: int
) -> Path:
    """PNG strip of a rollout qpos [T, 36] with the reference ref_qpos [T, 36] as a translucent ghost."""
    from bcg_sim.motion import Motion
    from bcg_sim.motion.render import render_strip, save_image

    def motion(name: str, q: np.ndarray) -> Motion:
        return Motion(name, fps, q[:, :3].copy(), q[:, 3:7].copy(), q[:, 7:].copy())

    image = render_strip(motion("rollout", qpos), frames, width, height, ghost=motion("reference", ref_qpos))
    save_image(image, path)
    return path
