"""bcg-experiment: the BCG paper's experiments as cells (motion x kappa x algo x seed) that train with
`bcg-train` and evaluate with bcg-eval, into one results folder with a report.md.

    bcg-experiment stiffness  [--motions ..] [--kappas ..] [--seeds ..] [--budget B] --out DIR [--resume]
        Table 1: SHAC+BCG trained at each kappa; Falls n/N and delta_d (mm) per motion x kappa.
    bcg-experiment compare    [--motions ..] [--kappa K] ...      Table 2: E_track, SHAC+BCG at K vs PPO.
    bcg-experiment gradvar    [--kappas ..] ...                   Fig. 3: gradient variance from the training
        logs (column grad_var of metrics.csv), SHAC+BCG vs SHAC, +-1 std from bootstrap resamples.
    bcg-experiment curves     [--motions ..] ...                  Fig. 5: learning curves (metrics.csv columns
        iteration, samples, wall_s, reward) against iterations, samples (log) and wall-clock.
    bcg-experiment kappa-map  [--policy DIR | --playback MOTION] [--kappas ..] --out DIR
        delta_d of one exported policy (default: the hold policy; --playback: open-loop playback of a clip)
        along the kappa grid, no training: the mapping of bcg_sim's kappa to contact depth, measured before
        choosing the grid.

A cell's folder: DIR/cells/<motion>_<algo>_k<kappa>_s<seed>/ with policy/ and metrics.csv (bcg-train) and
eval/eval.json (bcg-eval). --resume skips cells whose outputs exist. Defaults: config/eval.yaml (section
experiment, and eval for the evaluation). Exit 2 on bad input.
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bcg_sim.config import ConfigError
from bcg_train.eval.config import load_eval_config, load_experiment_config
from bcg_train.eval.mujoco_eval import EvalError
from bcg_train.eval.report import fmt, markdown_table, pm

REPORT_ORDER = ("kappa_map", "table1", "table2", "fig3", "fig5")
GRADVAR_COLUMN = "grad_var"
CURVE_COLUMNS = ("iteration", "samples", "wall_s", "reward")
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
class Runner:
    """Trains and evaluates cells under out/cells, skipping finished ones with --resume."""

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

    def train_command(self, c: Cell) -> list[str]:
        fill = {"motion": c.motion, "algo": c.algo, "kappa": f"{c.kappa:g}", "budget": str(self.args.budget),
                "seed": str(c.seed), "out": str(self.cell_dir(c))}
        cmd = [part.format(**fill) for part in self.exp.train_command]
        if shutil.which(cmd[0]) is None and not Path(cmd[0]).is_file():
            raise EvalError(f"experiment.train_command: {cmd[0]!r} not found on PATH (bcg_train's training entry "
                            "point is not installed yet?)")
        return cmd

    def run(self, cells: list[Cell], evaluate_cells: bool) -> None:
        """Every cell: train (unless trained), then evaluate (unless evaluated), a progress line each."""
        done = [c for c in cells if self.trained(c) and (self.evaluated(c) or not evaluate_cells)]
        started = [c for c in cells if self.cell_dir(c).exists()]
        if started and not self.args.resume:
            raise EvalError(f"{self.out}: {len(started)} cell(s) already started or finished; pass --resume or use "
                            "a new --out")
        todo = [c for c in cells if c not in done]
        _progress(f"{len(cells)} cells, {len(done)} finished (skipped), {len(todo)} to run")
        spent: list[float] = []
        for i, c in enumerate(todo):
            t0 = time.monotonic()
            if not self.trained(c):
                self._train(c)
            if evaluate_cells and not self.evaluated(c):
                self._evaluate(c)
            spent.append(time.monotonic() - t0)
            left = float(np.mean(spent)) * (len(todo) - i - 1)
            _progress(f"[{i + 1}/{len(todo)}] {c.name}: {spent[-1]:.1f} s; about {_eta(left)} left")

    def _train(self, c: Cell) -> None:
        d = self.cell_dir(c)
        d.mkdir(parents=True, exist_ok=True)
        cmd = self.train_command(c)
        with open(d / "train.log", "w") as log:
            r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
        if r.returncode != 0 or not self.trained(c):
            raise EvalError(f"cell {c.name}: training failed (exit {r.returncode}, see {d / 'train.log'}): "
                            f"{shlex.join(cmd)}")

    def _evaluate(self, c: Cell) -> None:
        from bcg_sim.policy import load_policy
        from bcg_train.eval.evaluate import evaluate

        policy = load_policy(self.cell_dir(c) / "policy")
        evaluate(policy, self.eval_cfg, self.cell_dir(c) / "eval", kappa=c.kappa, render=not self.args.no_render)

    def result(self, c: Cell) -> dict:
        return json.loads((self.cell_dir(c) / "eval" / "eval.json").read_text())

    def metrics_csv(self, c: Cell, columns: tuple[str, ...]) -> dict[str, np.ndarray]:
        path = self.cell_dir(c) / "metrics.csv"
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        missing = [k for k in columns if not rows or k not in rows[0]]
        if missing:
            raise EvalError(f"{path}: missing column(s) {missing} (has {list(rows[0]) if rows else 'no rows'})")
        return {k: np.array([float(r[k]) for r in rows]) for k in columns}


# --- tables and figures -----------------------------------------------------------------------------------------
def table1(runner: Runner, motions, kappas, seeds) -> str:
    rows = []
    for m in motions:
        row = [m]
        for k in kappas:
            res = [runner.result(Cell(m, "shac-bcg", k, s)) for s in seeds]
            falls = sum(r["aggregate"]["falls"] for r in res)
            n = sum(r["aggregate"]["runs"] for r in res)
            dd = np.mean([r["delta_d"]["delta_d_mm"] for r in res])
            row.append(f"{falls}/{n}, {fmt(float(dd), 1)} mm")
        rows.append(row)
    head = ["motion"] + [f"κ = {k:g} kN/m" for k in kappas]
    return ("### Table 1: Falls and Δd (SHAC+BCG trained at each κ; MuJoCo evaluation)\n\n"
            + markdown_table(head, rows) + f"\nReference: {SEED_SOFT_END}.\n")


def table2(runner: Runner, motions, kappa, seeds) -> str:
    rows = []
    for m in motions:
        row = [m]
        for algo, k in (("shac-bcg", kappa), ("ppo", kappa)):
            e = [r["e_track_cm"] for s in seeds for r in runner.result(Cell(m, algo, k, s))["runs"]]
            row.append(pm(float(np.mean(e)), float(np.std(e))))
        rows.append(row)
    return (f"### Table 2: E_track [cm], mean ± std over runs (κ = {kappa:g} kN/m)\n\n"
            + markdown_table(["motion", "SHAC+BCG", "PPO"], rows))


def bootstrap_std_of_mean(x: np.ndarray, resamples: int, rng: np.random.Generator) -> float:
    """Std of the mean of x over `resamples` bootstrap resamples (with replacement)."""
    idx = rng.integers(0, len(x), size=(resamples, len(x)))
    return float(x[idx].mean(axis=1).std())


def fig3(runner: Runner, motions, kappas, seeds, resamples: int, out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    rows, curves = [], {}
    for algo in ("shac-bcg", "shac"):
        means, stds = [], []
        for k in kappas:
            v = np.concatenate([runner.metrics_csv(Cell(m, algo, k, s), (GRADVAR_COLUMN,))[GRADVAR_COLUMN]
                                for m in motions for s in seeds])
            means.append(float(v.mean()))
            stds.append(bootstrap_std_of_mean(v, resamples, rng))
        curves[algo] = (np.array(means), np.array(stds))
        rows += [[algo, f"{k:g}", f"{mu:.4g} ± {sd:.2g}"] for k, mu, sd in zip(kappas, means, stds)]
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    for algo, (mu, sd) in curves.items():
        ax.plot(kappas, mu, marker="o", label=algo)
        ax.fill_between(kappas, mu - sd, mu + sd, alpha=0.25)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("κ [kN/m per sphere]")
    ax.set_ylabel("policy-gradient variance")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fig3_gradvar.png")
    plt.close(fig)
    return (f"### Fig. 3: gradient variance from the training logs (±1 std, {resamples} bootstrap resamples)\n\n"
            "![Fig. 3](fig3_gradvar.png)\n\n" + markdown_table(["algo", "κ", "grad var"], rows))


def fig5(runner: Runner, motions, kappa, seeds, out: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), dpi=100)
    for m in motions:
        for s in seeds:
            c = runner.metrics_csv(Cell(m, "shac-bcg", kappa, s), CURVE_COLUMNS)
            for ax, x in zip(axes, ("iteration", "samples", "wall_s")):
                ax.plot(c[x], c["reward"], lw=1, label=f"{m} s{s}")
    for ax, x in zip(axes, ("iterations", "samples", "wall-clock [s]")):
        ax.set_xlabel(x)
        ax.set_ylabel("reward")
        ax.grid(alpha=0.3)
    axes[1].set_xscale("log")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig5_curves.png")
    plt.close(fig)
    return f"### Fig. 5: learning curves, SHAC+BCG at κ = {kappa:g} kN/m\n\n![Fig. 5](fig5_curves.png)\n"


def kappa_map(args, eval_cfg, out: Path) -> str:
    from bcg_sim.policy import load_policy
    from bcg_sim.policy.cli import export_hold
    from bcg_train.eval.evaluate import evaluate

    if args.playback:
        from bcg_train.eval.playback import export_playback

        folder = out / f"playback_{Path(args.playback).stem}"
        path = folder if (args.resume and (folder / "policy.yaml").is_file()) else export_playback(args.playback, folder)
    else:
        folder = out / "hold_policy"
        path = args.policy or (folder if (args.resume and (folder / "policy.yaml").is_file())
                               else export_hold(str(folder), ("onnx",)))
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
        rows.append([f"{k:g}", fmt(dd["train_pen_mm"], 2), fmt(dd["mujoco_pen_mm"], 2),
                     pm(dd["delta_d_mm"], dd["delta_d_std_mm"]),
                     f"{sum(p['train_fell'] for p in dd['per_run'])}/{len(dd['per_run'])}",
                     f"{r['aggregate']['falls']}/{r['aggregate']['runs']}"])
        _progress(f"[{i + 1}/{len(args.kappas)}] kappa {k:g}: delta_d {dd['delta_d_mm']:.2f} mm "
                  f"({time.monotonic() - t0:.1f} s)")
    name = Path(path).name
    return (f"### κ mapping: Δd of `{name}` along the κ grid (no training; window {window:g} s, "
            f"{eval_cfg.runs} start states)\n\n"
            + markdown_table(["κ [kN/m/sphere]", "pen. bcg_sim [mm]", "pen. MuJoCo [mm]", "Δd [mm]",
                              "falls in bcg_sim", "falls in MuJoCo"], rows))


# --- report -----------------------------------------------------------------------------------------------------
def write_report(out: Path, args: argparse.Namespace) -> Path:
    """report.md from every section written so far (sections/*.md), with machine, budget and commit."""
    from bcg_train.eval.evaluate import commit

    sec = out / "sections"
    parts = [f"# bcg experiments\n\n- machine: {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs, "
             f"{platform.python_version()})\n- commit: {commit()}\n- budget: {args.budget} (bcg-train --budget)\n"
             f"- last command: `bcg-experiment {shlex.join(sys.argv[1:])}`\n"]
    for name in REPORT_ORDER:
        for p in sorted(sec.glob(f"{name}*.md")):
            parts.append(p.read_text())
    path = out / "report.md"
    path.write_text("\n".join(parts))
    return path


# --- CLI --------------------------------------------------------------------------------------------------------
def _parser(exp) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bcg-experiment", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiment", choices=["stiffness", "compare", "gradvar", "curves", "kappa-map"])
    ap.add_argument("--out", required=True, help="results folder (cells/, sections/, report.md)")
    ap.add_argument("--motions", nargs="+", default=exp.motions, help=f"default {' '.join(exp.motions)}")
    ap.add_argument("--kappas", nargs="+", type=float, default=exp.kappas,
                    help=f"kN/m per sphere, default {' '.join(f'{k:g}' for k in exp.kappas)}")
    ap.add_argument("--kappa", type=float, default=exp.compare_kappa,
                    help=f"compare/curves kappa (default {exp.compare_kappa:g})")
    ap.add_argument("--seeds", nargs="+", type=int, default=exp.seeds, help=f"default {exp.seeds}")
    ap.add_argument("--budget", type=int, default=exp.budget, help=f"bcg-train --budget (default {exp.budget})")
    ap.add_argument("--runs", type=int, default=None, help="bcg-eval runs per cell (default: config eval.runs)")
    ap.add_argument("--seconds", type=float, default=None, help="bcg-eval seconds (default: config eval.seconds)")
    ap.add_argument("--policy", default=None, help="kappa-map: the policy (default: the hold policy)")
    ap.add_argument("--playback", default=None, metavar="MOTION",
                    help="kappa-map: an open-loop playback policy of this clip instead (moving robot, touchdowns)")
    ap.add_argument("--resume", action="store_true", help="skip finished cells")
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


def _run(args: argparse.Namespace, exp, ev) -> int:
    ev = dataclasses.replace(ev, runs=ev.runs if args.runs is None else args.runs,
                             seconds=ev.seconds if args.seconds is None else args.seconds).validate("arguments")
    if any(k <= 0 for k in args.kappas) or args.kappa <= 0:
        raise EvalError("--kappas/--kappa must be > 0 kN/m")
    out = Path(args.out)
    (out / "sections").mkdir(parents=True, exist_ok=True)
    runner = Runner(args, exp, ev)
    if args.experiment == "kappa-map":
        text = kappa_map(args, ev, out)
        name = "kappa_map" + (f"_{Path(args.playback).stem}" if args.playback else "")
    elif args.experiment == "stiffness":
        runner.run([Cell(m, "shac-bcg", k, s) for m in args.motions for k in args.kappas for s in args.seeds], True)
        text, name = table1(runner, args.motions, args.kappas, args.seeds), "table1"
    elif args.experiment == "compare":
        runner.run([Cell(m, a, args.kappa, s) for m in args.motions for a in ("shac-bcg", "ppo")
                    for s in args.seeds], True)
        text, name = table2(runner, args.motions, args.kappa, args.seeds), "table2"
    elif args.experiment == "gradvar":
        runner.run([Cell(m, a, k, s) for m in args.motions for a in ("shac-bcg", "shac") for k in args.kappas
                    for s in args.seeds], False)
        text, name = fig3(runner, args.motions, args.kappas, args.seeds, exp.bootstrap_resamples, out), "fig3"
    else:
        runner.run([Cell(m, "shac-bcg", args.kappa, s) for m in args.motions for s in args.seeds], False)
        text, name = fig5(runner, args.motions, args.kappa, args.seeds, out), "fig5"
    (out / "sections" / f"{name}.md").write_text(text)
    print(text)
    print(f"wrote {write_report(out, args)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
