"""bcg-experiment: the BCG paper's experiments as cells (motion x kappa x algo x seed) that train with
`bcg-train` and evaluate with bcg-eval, into one results folder with a report.md.

    bcg-experiment stiffness  [--motions ..] [--kappas ..] [--seeds ..] [--budget B] [--jobs J] --out DIR [--resume]
        Table 1: SHAC+BCG trained at each kappa; Falls n/N and delta_d (mm) per motion x kappa.
    bcg-experiment compare    [--motions ..] [--kappa K] ...      Table 2: E_track, SHAC+BCG at K vs PPO.
    bcg-experiment gradvar    [--kappas ..] ...                   Fig. 3: gradient variance from the training
        logs (metrics.csv gradvar, gradvar_std), SHAC+BCG vs SHAC, +-1 std from the bootstrap over the worlds.
    bcg-experiment curves     [--motions ..] ...                  Fig. 5: learning curves (metrics.csv reward,
        eval.csv e_track_cm) against iterations, samples (log) and wall-clock.
    bcg-experiment all        [...] [--gradvar-motions ..]       all four, their cells in one queue of --jobs.
    bcg-experiment kappa-map  [--policy DIR | --playback MOTION] [--kappas ..] --out DIR
        delta_d of one exported policy (default: the hold policy; --playback: open-loop playback of a clip)
        along the kappa grid, no training: the mapping of bcg_sim's kappa to contact depth, measured before
        choosing the grid.

A cell's folder: DIR/cells/<motion>_<algo>_k<kappa>_s<seed>/ with policy/ and metrics.csv (bcg-train) and
eval/eval.json (bcg-eval). --resume skips cells whose outputs exist and continues a cell whose training was
interrupted (a checkpoint, no exported policy) from its checkpoint under the experiment's --budget, so one
experiment can span several sittings (stop it with SIGINT/SIGTERM to its process group). Defaults:
config/eval.yaml (section experiment, and eval for the evaluation). Exit 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bcg_sim.config import ConfigError
from bcg_train.eval.config import load_eval_config, load_experiment_config
from bcg_train.eval.mujoco_eval import EvalError
from bcg_train.eval.report import fmt, markdown_table, pm

REPORT_ORDER = ("kappa_map", "table1", "table2", "fig3", "fig5", "cells")
EXPERIMENTS = ("stiffness", "compare", "gradvar", "curves")  # `all` runs their cells in one queue
GRADVAR_COLUMNS = ("gradvar", "gradvar_std")  # bcg-train's metrics.csv (NaN on rows without a measurement)
CURVE_COLUMNS = ("iteration", "samples", "wall_s", "reward")
EVAL_CURVE_COLUMNS = ("iteration", "samples", "wall_s", "e_track_cm")  # bcg-train's eval.csv
# The seed paper's figures as the issue states them (Table 1's soft end); nothing else is assumed.
SEED_SOFT_END = "seed paper, soft end of its grid (κ = 50): Δd ≈ 10–13 mm, 5/5 falls"


@dataclass(frozen=True)
class Cell:
    motion: str
    algo: str
    kappa: float
    seed: int

    @property
    def name(self) -> str:
        return f"{self.motion}_{self.algo}_k{self.kappa:g}_s{self.seed}"


def _progress(msg: str) -> None:
    print(f"bcg-experiment: {msg}", file=sys.stderr, flush=True)


def _eta(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


# --- cells ---------------------------------------------------------------------------------------------------
class ExperimentScheduler:
    """Trains and evaluates cells under out/cells, `jobs` at a time, skipping finished ones with --resume.
    Each cell is two child processes: the training command (bcg-train) and bcg-eval on its exported policy, so
    cells running at once share nothing but the disk (Warp's CPU kernels take one core per process)."""

    def __init__(self, args: argparse.Namespace, exp_cfg, eval_cfg):
        self.args, self.exp, self.eval_cfg = args, exp_cfg, eval_cfg
        self.out = Path(args.out)
        self.cells_dir = self.out / "cells"

    def cell_dir(self, c: Cell) -> Path:
        return self.cells_dir / c.name

    def trained(self, c: Cell) -> bool:
        d = self.cell_dir(c)
        return (d / "policy" / "policy.yaml").is_file() and (d / "metrics.csv").is_file()

    def evaluated(self, c: Cell) -> bool:
        return (self.cell_dir(c) / "eval" / "eval.json").is_file()

    def interrupted(self, c: Cell) -> bool:
        """Training started and checkpointed but never exported (bcg-train stopped by a signal, a reboot)."""
        from bcg_train.runner import has_checkpoint  # the run-folder layout bcg-train --resume reads

        return not self.trained(c) and has_checkpoint(self.cell_dir(c))

    def train_command(self, c: Cell) -> list[str]:
        """experiment.train_command for a new cell, experiment.resume_command for an interrupted one."""
        template = self.exp.resume_command if self.interrupted(c) else self.exp.train_command
        fill = {
            "motion": c.motion,
            "algo": c.algo,
            "kappa": f"{c.kappa:g}",
            "budget": str(self.args.budget),
            "seed": str(c.seed),
            "preset": self.args.preset,
            "reward": self.args.reward,
            "out": str(self.cell_dir(c)),
        }
        try:
            cmd = [part.format(**fill) for part in template]
        except KeyError as exc:
            raise EvalError(f"experiment commands: unknown placeholder {exc} (known: {sorted(fill)})") from None
        if shutil.which(cmd[0]) is None and not Path(cmd[0]).is_file():
            raise EvalError(
                f"experiment commands: {cmd[0]!r} not found on PATH (bcg_train's training entry "
                "point is not installed?)"
            )
        return cmd

    def eval_command(self, c: Cell) -> list[str]:
        """bcg-eval of the cell's policy with delta_d at the cell's kappa, this experiment's eval settings."""
        cmd = [
            sys.executable,
            "-m",
            "bcg_train.eval.cli",
            str(self.cell_dir(c) / "policy"),
            "--out",
            str(self.cell_dir(c) / "eval"),
            "--kappa",
            f"{c.kappa:g}",
            "--runs",
            str(self.eval_cfg.runs),
            "--seconds",
            f"{self.eval_cfg.seconds:g}",
            "--config",
            self.args.config,
        ]
        return cmd + (["--no-render"] if self.args.no_render else [])

    def run(self, cells: list[Cell], to_evaluate: set[Cell]) -> None:
        """Every cell: train (unless trained), then, if in `to_evaluate`, evaluate (unless evaluated); a progress
        line each."""
        done = [c for c in cells if self.trained(c) and (self.evaluated(c) or c not in to_evaluate)]
        started = [c for c in cells if self.cell_dir(c).exists()]
        if started and not self.args.resume:
            raise EvalError(
                f"{self.out}: {len(started)} cell(s) already started or finished; pass --resume or use a new --out"
            )
        todo = [c for c in cells if c not in done]
        for c in todo:  # a missing trainer is one line before anything starts
            if not self.trained(c):
                self.train_command(c)
        jobs = max(1, min(self.args.jobs, len(todo)))
        _progress(f"{len(cells)} cells, {len(done)} finished (skipped), {len(todo)} to run, {jobs} at a time")
        spent: list[float] = []
        t_start = time.monotonic()
        pool = ThreadPoolExecutor(max_workers=jobs)
        futures = {pool.submit(self._cell, c, c in to_evaluate): c for c in todo}
        try:
            for fut in as_completed(futures):
                c = futures[fut]
                spent.append(fut.result())  # a failed cell raises here
                left = float(np.mean(spent)) * (len(todo) - len(spent)) / jobs
                _progress(
                    f"[{len(spent)}/{len(todo)}] {c.name}: {spent[-1]:.0f} s (elapsed "
                    f"{_eta(time.monotonic() - t_start)}); about {_eta(left)} left"
                )
        finally:  # after a failure the running cells finish (their folders stay resumable), queued ones never start
            pool.shutdown(wait=True, cancel_futures=True)

    def _cell(self, c: Cell, evaluate_cells: bool) -> float:
        t0 = time.monotonic()
        if not self.trained(c):
            what = "training (resumed from checkpoints/last.pt)" if self.interrupted(c) else "training"
            self._child(c, self.train_command(c), "train.log", self.trained, what)
        if evaluate_cells and not self.evaluated(c):
            self._child(c, self.eval_command(c), "eval.log", self.evaluated, "evaluation")
        return time.monotonic() - t0

    def _child(self, c: Cell, cmd: list[str], log_name: str, finished, what: str) -> None:
        d = self.cell_dir(c)
        d.mkdir(parents=True, exist_ok=True)
        _progress(f"{c.name}: {what} started")
        with open(d / log_name, "a") as log:  # a resumed training continues its log
            r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
        if r.returncode != 0 or not finished(c):
            raise EvalError(
                f"cell {c.name}: {what} failed (exit {r.returncode}, see {d / log_name}): {shlex.join(cmd)}"
            )

    def result(self, c: Cell) -> dict:
        return json.loads((self.cell_dir(c) / "eval" / "eval.json").read_text())

    def log_csv(self, c: Cell, columns: tuple[str, ...], name: str = "metrics.csv") -> dict[str, np.ndarray]:
        """Columns of a cell's training log (metrics.csv, or eval.csv: bcg-train's evaluation during training)."""
        path = self.cell_dir(c) / name
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        missing = [k for k in columns if not rows or k not in rows[0]]
        if missing:
            raise EvalError(f"{path}: missing column(s) {missing} (has {list(rows[0]) if rows else 'no rows'})")
        return {k: np.array([float(r[k]) for r in rows]) for k in columns}


# --- tables and figures -----------------------------------------------------------------------------------------
def table1(sched: ExperimentScheduler, motions, kappas, seeds) -> str:
    rows, rows_b = [], []
    for m in motions:
        row, row_b = [m], [m]
        for k in kappas:
            res = [sched.result(Cell(m, "shac-bcg", k, s)) for s in seeds]
            n = sum(r["aggregate"]["runs"] for r in res)
            dd = np.mean([r["delta_d"]["delta_d_mm"] for r in res])
            row.append(f"{sum(r['aggregate']['falls'] for r in res)}/{n}, {fmt(float(dd), 1)} mm")
            row_b.append(_train_side_falls(res))
        rows.append(row)
        rows_b.append(row_b)
    head = ["motion"] + [f"κ = {k:g} kN/m" for k in kappas]
    return (
        "### Table 1: Falls and Δd (SHAC+BCG trained at each κ; MuJoCo evaluation)\n\n"
        + markdown_table(head, rows)
        + f"\nReference: {SEED_SOFT_END}.\n\n"
        "### Table 1b: the same policies from the same start states in bcg_sim (the simulator each was "
        "trained in, at its κ): falls and survival\n\n"
        + markdown_table(head, rows_b)
        + "\nA fall in both simulators is the policy's own; one in MuJoCo only is the sim-to-sim gap.\n"
    )


def _train_side_falls(results: list[dict]) -> str:
    """'falls/runs, survival mean s' of bcg-eval's bcg_sim rollouts; empty for evaluations made before they were
    recorded (eval.json without delta_d.train_falls)."""
    d = [r["delta_d"] for r in results]
    if not all("train_falls" in x for x in d):
        return ""
    n = sum(r["aggregate"]["runs"] for r in results)
    surv = np.mean([p["train_survival_s"] for x in d for p in x["per_run"]])
    return f"{sum(x['train_falls'] for x in d)}/{n}, {fmt(float(surv), 2)} s"


def table2(sched: ExperimentScheduler, motions, kappa, seeds) -> str:
    rows = []
    for m in motions:
        row = [m]
        for algo, k in (("shac-bcg", kappa), ("ppo", kappa)):
            e = [r["e_track_cm"] for s in seeds for r in sched.result(Cell(m, algo, k, s))["runs"]]
            row.append(pm(float(np.mean(e)), float(np.std(e))))
        rows.append(row)
    return f"### Table 2: E_track [cm], mean ± std over runs (κ = {kappa:g} kN/m)\n\n" + markdown_table(
        ["motion", "SHAC+BCG", "PPO"], rows
    )


def cells_table(sched: ExperimentScheduler, cells: list[Cell]) -> str:
    """Every trained cell: its training (bcg-train's summary.json, whose evaluation runs in bcg_sim) beside its
    MuJoCo evaluation (bcg-eval, where the experiment evaluates it): whether a policy learned in the simulator
    it was trained in and whether that carried over."""
    rows = []
    for c in cells:
        if not sched.trained(c):
            continue
        t = json.loads((sched.cell_dir(c) / "summary.json").read_text())
        learned = (
            f"{fmt(t['eval_first_e_track_cm'], 1)} → {fmt(t['eval_last_e_track_cm'], 1)} cm, falls "
            f"{t['eval_last_falls']:.0%}"
        )
        mj = ["", "", "", "", "", ""]
        if sched.evaluated(c):
            r = sched.result(c)
            a = r["aggregate"]
            mj = [
                f"{a['falls']}/{a['runs']}",
                pm(a["survival_s_mean"], a["survival_s_std"]),
                _train_side_falls([r]),
                pm(a["e_track_cm_mean"], a["e_track_cm_std"], 1),
                fmt(r["delta_d"]["delta_d_mm"], 2),
                _contacts(r["contacts"]),
            ]
        rows.append(
            [c.motion, c.algo, f"{c.kappa:g}", str(c.seed), str(t["iterations"]), f"{t['samples']:,}", learned, *mj]
        )
    return (
        "### Cells: training (evaluation in bcg_sim during training: first → last) and MuJoCo evaluation\n\n"
        + markdown_table(
            [
                "motion",
                "algo",
                "κ",
                "seed",
                "iterations",
                "samples",
                "bcg_sim E_track, falls",
                "MuJoCo falls",
                "survival [s]",
                "bcg_sim falls, survival (same starts)",
                "E_track [cm]",
                "Δd [mm]",
                "MuJoCo contacts",
            ],
            rows,
        )
    )


def _contacts(c: dict) -> str:
    """bcg-eval's contact check in a few words: ok, or what fired."""
    if not c.get("checked"):
        return "not checked"
    if c["ok"]:
        return f"ok (max {c['max_contacts']})"
    return f"{c['missed_contacts']} missed, warnings {', '.join(c['mujoco_warnings']) or 'none'}"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def gradvar_log(sched: ExperimentScheduler, c: Cell) -> dict[str, np.ndarray]:
    """The measured rows of a cell's log: iteration, gradvar and its bootstrap std over the training worlds."""
    log = sched.log_csv(c, ("iteration",) + GRADVAR_COLUMNS)
    keep = np.isfinite(log[GRADVAR_COLUMNS[0]])
    return {k: v[keep] for k, v in log.items()}


def fig3(sched: ExperimentScheduler, motions, kappas, seeds, out: Path) -> str:
    """Per cell: the first measurement (iteration 1: the same initial policy and start states with and without
    BCG for one seed) and the mean over training, each +-1 std from the bootstrap over the training worlds that
    bcg-train logs (gradvar_std; a mean's std is propagated from its rows'). The figure: both against kappa
    (averaged over motions and seeds), and every cell's gradvar over iterations."""
    plt = _plt()
    rows, summary = [], {}
    fig, (ax_k, ax_t) = plt.subplots(1, 2, figsize=(11, 3.6), dpi=100)
    keys = [(m, s) for m in motions for s in seeds]
    for algo, style in (("shac-bcg", "-"), ("shac", "--")):
        first, mean = [], []
        for k in kappas:
            cells = [gradvar_log(sched, Cell(m, algo, k, s)) for m, s in keys]
            if any(len(g["iteration"]) == 0 for g in cells):
                raise EvalError(
                    f"{algo} at kappa {k:g}: no gradvar measurement in a training log (shac.gradvar_every = 0?)"
                )
            f = [(g[GRADVAR_COLUMNS[0]][0], g[GRADVAR_COLUMNS[1]][0]) for g in cells]
            mu = [
                (g[GRADVAR_COLUMNS[0]].mean(), np.sqrt((g[GRADVAR_COLUMNS[1]] ** 2).sum()) / len(g["iteration"]))
                for g in cells
            ]
            first.append(np.mean(f, axis=0))
            mean.append(np.mean(mu, axis=0))
            for (m, s), g, fi, me in zip(keys, cells, f, mu):
                rows.append(
                    [
                        m,
                        algo,
                        f"{k:g}",
                        f"{fi[0]:.3g} ± {fi[1]:.2g}",
                        f"{me[0]:.3g} ± {me[1]:.2g}",
                        str(len(g["iteration"])),
                    ]
                )
                ax_t.plot(g["iteration"], g[GRADVAR_COLUMNS[0]], style, lw=0.8, label=f"{algo} κ {k:g} {m}")
        summary[algo] = (np.array(first), np.array(mean))
        for arr, marker, what in ((summary[algo][0], "o", "first"), (summary[algo][1], "s", "mean")):
            ax_k.plot(kappas, arr[:, 0], style, marker=marker, label=f"{algo}, {what}")
            ax_k.fill_between(kappas, np.maximum(arr[:, 0] - arr[:, 1], 1e-30), arr[:, 0] + arr[:, 1], alpha=0.2)
    ax_k.set(xscale="log", yscale="log", xlabel="κ [kN/m per sphere]", ylabel="policy-gradient variance")
    ax_t.set(yscale="log", xlabel="iteration", ylabel="policy-gradient variance")
    for ax in (ax_k, ax_t):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "fig3_gradvar.png")
    plt.close(fig)
    return (
        "### Fig. 3: policy-gradient variance recorded during training (trace(Cov)/P across the training "
        "worlds; ±1 std from bcg-train's bootstrap over the worlds, shac.gradvar_bootstrap resamples)\n\n"
        "![Fig. 3](fig3_gradvar.png)\n\n"
        + markdown_table(["motion", "algo", "κ", "first (iteration 1)", "mean over training", "measurements"], rows)
    )


def fig5(sched: ExperimentScheduler, motions, kappa, seeds, out: Path) -> str:
    """Learning curves of every trained cell at kappa (SHAC+BCG; PPO and SHAC where their cells exist): the
    training batch's reward (metrics.csv) and the fixed-protocol evaluation's E_track (eval.csv) against
    iterations, samples (log) and wall-clock."""
    plt = _plt()
    fig, axes = plt.subplots(2, 3, figsize=(13, 6), dpi=100)
    colors = {m: f"C{i}" for i, m in enumerate(motions)}
    styles = {"shac-bcg": "-", "ppo": "--", "shac": ":"}
    for m in motions:
        for algo, style in styles.items():
            for s in seeds:
                c = Cell(m, algo, kappa, s)
                if not sched.trained(c):
                    continue
                logs = [sched.log_csv(c, CURVE_COLUMNS)]
                has_eval = (sched.cell_dir(c) / "eval.csv").is_file()
                logs.append(sched.log_csv(c, EVAL_CURVE_COLUMNS, "eval.csv") if has_eval else None)
                for row, (log, y) in enumerate(zip(logs, ("reward", "e_track_cm"))):
                    for ax, x in zip(axes[row], ("iteration", "samples", "wall_s")):
                        if log is not None:
                            ax.plot(log[x], log[y], style, color=colors[m], lw=1, label=f"{m} {algo} s{s}")
    for row, y in enumerate(("training reward per step", "evaluation E_track [cm]")):
        for ax, x in zip(axes[row], ("iterations", "samples", "wall-clock [s]")):
            ax.set(xlabel=x, ylabel=y)
            ax.grid(alpha=0.3)
        axes[row][1].set_xscale("log")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / "fig5_curves.png")
    plt.close(fig)
    return (
        f"### Fig. 5: learning curves at κ = {kappa:g} kN/m (solid SHAC+BCG, dashed PPO, dotted SHAC where "
        "trained; bottom: bcg-train's fixed-protocol evaluation in bcg_sim)\n\n![Fig. 5](fig5_curves.png)\n"
    )


def kappa_map(args, eval_cfg, out: Path) -> str:
    from bcg_sim.policy import load_policy
    from bcg_sim.policy.cli import export_hold
    from bcg_train.eval.evaluate import evaluate

    if args.playback:
        from bcg_train.eval.playback import export_playback

        folder = out / f"playback_{Path(args.playback).stem}"
        resumed = args.resume and (folder / "policy.yaml").is_file()
        path = folder if resumed else export_playback(args.playback, folder)
    else:
        folder = out / "hold_policy"
        path = args.policy or (
            folder if (args.resume and (folder / "policy.yaml").is_file()) else export_hold(str(folder), ("onnx",))
        )
    rows, window = [], 0.0
    for i, k in enumerate(args.kappas):
        t0 = time.monotonic()
        d = out / "kappa_map" / Path(path).name / f"k{k:g}"
        if args.resume and (d / "eval.json").is_file():
            r = json.loads((d / "eval.json").read_text())
        else:
            r = evaluate(load_policy(path), eval_cfg, d, kappa=k, render=False)
        dd = r["delta_d"]
        window = dd["window_s"]
        rows.append(
            [
                f"{k:g}",
                fmt(dd["train_pen_mm"], 2),
                fmt(dd["mujoco_pen_mm"], 2),
                pm(dd["delta_d_mm"], dd["delta_d_std_mm"]),
                f"{sum(p['train_fell'] for p in dd['per_run'])}/{len(dd['per_run'])}",
                f"{r['aggregate']['falls']}/{r['aggregate']['runs']}",
            ]
        )
        _progress(
            f"[{i + 1}/{len(args.kappas)}] kappa {k:g}: delta_d {dd['delta_d_mm']:.2f} mm "
            f"({time.monotonic() - t0:.1f} s)"
        )
    name = Path(path).name
    return (
        f"### κ mapping: Δd of `{name}` along the κ grid (no training; window {window:g} s, "
        f"{eval_cfg.runs} start states)\n\n"
        + markdown_table(
            [
                "κ [kN/m/sphere]",
                "pen. bcg_sim [mm]",
                "pen. MuJoCo [mm]",
                "Δd [mm]",
                "falls in bcg_sim",
                "falls in MuJoCo",
            ],
            rows,
        )
    )


# --- report -----------------------------------------------------------------------------------------------------
def write_report(out: Path, args: argparse.Namespace) -> Path:
    """report.md from every section written so far (sections/*.md), with machine, budget and commit."""
    from bcg_train.eval.evaluate import commit

    sec = out / "sections"
    evaluated_at = sorted(
        {json.loads(p.read_text()).get("commit", "unknown") for p in out.glob("cells/*/eval/eval.json")}
    )
    parts = [
        f"# bcg experiments\n\n- machine: {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.python_version()})\n- commit: {commit()} (this report); cells evaluated at "
        f"{', '.join(evaluated_at) or 'none yet'}\n- budget per cell: {args.budget} (bcg-train --budget), "
        f"preset {args.preset}, reward {args.reward}, {args.jobs} cell(s) at a time\n"
        f"- last command: `bcg-experiment {shlex.join(sys.argv[1:])}`\n"
    ]
    for name in REPORT_ORDER:
        for p in sorted(sec.glob(f"{name}*.md")):
            parts.append(p.read_text())
    path = out / "report.md"
    path.write_text("\n".join(parts))
    return path


# --- CLI --------------------------------------------------------------------------------------------------------
def _parser(exp) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="bcg-experiment", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("experiment", choices=[*EXPERIMENTS, "all", "kappa-map"])
    ap.add_argument("--out", required=True, help="results folder (cells/, sections/, report.md)")
    ap.add_argument("--motions", nargs="+", default=exp.motions, help=f"default {' '.join(exp.motions)}")
    ap.add_argument(
        "--kappas",
        nargs="+",
        type=float,
        default=exp.kappas,
        help=f"kN/m per sphere, default {' '.join(f'{k:g}' for k in exp.kappas)}",
    )
    ap.add_argument(
        "--kappa", type=float, default=exp.compare_kappa, help=f"compare/curves kappa (default {exp.compare_kappa:g})"
    )
    ap.add_argument(
        "--gradvar-motions",
        nargs="+",
        default=None,
        help="gradvar (and all): motions of the SHAC/SHAC+BCG pairs (default: --motions)",
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=exp.seeds, help=f"default {exp.seeds}")
    ap.add_argument("--budget", default=exp.budget, help=f"bcg-train --budget of a cell (default {exp.budget})")
    ap.add_argument("--preset", default=exp.preset, help=f"bcg-train --preset (default {exp.preset})")
    ap.add_argument(
        "--reward", default=exp.reward, choices=["add", "tracking"], help=f"bcg-train --reward (default {exp.reward})"
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=exp.jobs,
        help=f"cells at once, one process each (default {exp.jobs}; 2 uses both cores here)",
    )
    ap.add_argument("--runs", type=int, default=None, help="bcg-eval runs per cell (default: config eval.runs)")
    ap.add_argument("--seconds", type=float, default=None, help="bcg-eval seconds (default: config eval.seconds)")
    ap.add_argument("--policy", default=None, help="kappa-map: the policy (default: the hold policy)")
    ap.add_argument(
        "--playback",
        default=None,
        metavar="MOTION",
        help="kappa-map: an open-loop playback policy of this clip instead (moving robot, touchdowns)",
    )
    ap.add_argument("--resume", action="store_true", help="skip finished cells, continue interrupted ones")
    ap.add_argument("--no-render", action="store_true", help="no PNG strip per cell")
    ap.add_argument("--config", default="eval.yaml", help="config file (default config/eval.yaml)")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cfg_path = argv[argv.index("--config") + 1] if "--config" in argv[:-1] else "eval.yaml"
    try:
        exp, ev = load_experiment_config(cfg_path), load_eval_config(cfg_path)
    except ConfigError as exc:
        print(f"bcg-experiment: {exc}", file=sys.stderr)
        return 2
    args = _parser(exp).parse_args(argv)
    try:
        return _run(args, exp, ev)
    except (ConfigError, ValueError, OSError) as exc:  # EvalError, policy errors, missing files
        print(f"bcg-experiment: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


def experiment_cells(name: str, args: argparse.Namespace) -> tuple[list[Cell], set[Cell]]:
    """The cells an experiment needs (in run order) and those of them that bcg-eval must evaluate."""
    m_, k_, s_ = args.motions, args.kappas, args.seeds
    if name == "stiffness":
        cells = [Cell(m, "shac-bcg", k, s) for m in m_ for k in k_ for s in s_]
        return cells, set(cells)
    if name == "compare":
        cells = [Cell(m, a, args.kappa, s) for m in m_ for a in ("shac-bcg", "ppo") for s in s_]
        return cells, set(cells)
    if name == "gradvar":
        return [
            Cell(m, a, k, s) for m in args.gradvar_motions for a in ("shac-bcg", "shac") for k in k_ for s in s_
        ], set()
    if name == "curves":
        return [Cell(m, "shac-bcg", args.kappa, s) for m in m_ for s in s_], set()
    cells, evaluate = [], set()  # all: every experiment's cells in one queue (both cores busy to the end)
    for part in EXPERIMENTS:
        c, e = experiment_cells(part, args)
        cells += [x for x in c if x not in cells]
        evaluate |= e
    return cells, evaluate


def section(name: str, sched: ExperimentScheduler, args: argparse.Namespace, out: Path) -> tuple[str, str]:
    """(file name, markdown) of one experiment's report section, from its finished cells."""
    if name == "stiffness":
        return "table1", table1(sched, args.motions, args.kappas, args.seeds)
    if name == "compare":
        return "table2", table2(sched, args.motions, args.kappa, args.seeds)
    if name == "gradvar":
        return "fig3", fig3(sched, args.gradvar_motions, args.kappas, args.seeds, out)
    return "fig5", fig5(sched, args.motions, args.kappa, args.seeds, out)


def _run(args: argparse.Namespace, exp, ev) -> int:
    ev = dataclasses.replace(
        ev,
        runs=ev.runs if args.runs is None else args.runs,
        seconds=ev.seconds if args.seconds is None else args.seconds,
    ).validate("arguments")
    from bcg_train.config import parse_budget

    if any(k <= 0 for k in args.kappas) or args.kappa <= 0:
        raise EvalError("--kappas/--kappa must be > 0 kN/m")
    if args.jobs < 1:
        raise EvalError(f"--jobs must be >= 1, got {args.jobs}")
    parse_budget(args.budget)  # a ConfigError names the expected forms
    args.gradvar_motions = args.gradvar_motions or args.motions
    out = Path(args.out)
    (out / "sections").mkdir(parents=True, exist_ok=True)
    if args.experiment == "kappa-map":
        text = kappa_map(args, ev, out)
        name = "kappa_map" + (f"_{Path(args.playback).stem}" if args.playback else "")
        (out / "sections" / f"{name}.md").write_text(text)
        print(text)
    else:
        sched = ExperimentScheduler(args, exp, ev)
        cells, to_evaluate = experiment_cells(args.experiment, args)
        sched.run(cells, to_evaluate)
        parts = [
            section(p, sched, args, out) for p in (EXPERIMENTS if args.experiment == "all" else (args.experiment,))
        ]
        for name, text in parts + [(f"cells_{args.experiment}", cells_table(sched, cells))]:
            (out / "sections" / f"{name}.md").write_text(text)
            print(text)
    print(f"wrote {write_report(out, args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
