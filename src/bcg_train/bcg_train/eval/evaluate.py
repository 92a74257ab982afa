"""One policy evaluation: N MuJoCo runs (Python loop or the ROS stack), metrics, delta_d against bcg_sim,
and the output folder (eval.json, eval.md, one plot per metric, PNG strip)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bcg_sim.policy import Policy
from bcg_train.eval import metrics
from bcg_train.eval.config import EvalConfig
from bcg_train.eval.mujoco_eval import MujocoEvaluator, clip_seconds, load_eval_model
from bcg_train.eval.report import EVAL_HEADERS, eval_row, markdown_table, plot_series, render_strip_png, write_json


def _progress(msg: str) -> None:
    print(f"bcg-eval: {msg}", file=sys.stderr, flush=True)


def commit() -> str:
    """Short git commit of this checkout (+ '-dirty'), or 'unknown'."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(here), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = ""
    return rev or "unknown"


def run_mujoco(policy: Policy, cfg: EvalConfig, mjcf: str | None, seconds: float, progress: bool = True) -> list[dict]:
    """cfg.runs Python-loop MuJoCo runs: per run its seed, series, summary and contact checks (`progress`: a line
    per run and per MJCF change on stderr)."""
    notes: list[str] = []
    ev = MujocoEvaluator(policy, cfg, load_eval_model(mjcf, notes), seconds)
    for n in notes if progress else []:
        _progress(n)
    out = []
    for i in range(cfg.runs):
        seed = cfg.base_seed + i
        t0 = time.monotonic()
        r = ev.run(seed)
        s = metrics.series(r.rollout, policy.contract.control_dt, cfg.contact_height)
        out.append(
            {
                "seed": seed,
                "rollout": r.rollout,
                "series": s,
                "fault": r.fault,
                "max_contacts": r.max_contacts,
                "warnings": r.warnings,
                "missed_contacts": r.missed_contacts,
            }
        )
        if not progress:
            continue
        sm = metrics.summarize(s, cfg.fall_height)
        _progress(
            f"MuJoCo run {i + 1}/{cfg.runs} (seed {seed}): {r.rollout.time[-1]:.2f} s sim in "
            f"{time.monotonic() - t0:.1f} s, {'FELL' if sm['fell'] else 'up'}, E_track {sm['e_track_cm']:.2f} cm"
        )
    return out


def mujoco_tracking(
    policy: Policy,
    cfg: EvalConfig,
    runs: int,
    base_seed: int,
    seconds: float,
    noise: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> dict[str, float]:
    """bcg-eval's protocol in MuJoCo on the project G1, quietly (the training's validation): `runs` rollouts of
    `seconds` from the first frame with cfg's start noise, seeds base_seed + i, and sensor noise std `noise`
    (encoders [rad], joint velocities [rad/s], gyroscope [rad/s]; bcg-eval --noise). Mean E_track [cm] (each run
    up to its fall, as bcg-eval reports it), fall fraction, mean survival [s], runs."""
    quiet = dataclasses.replace(cfg.with_sensor_noise(noise), runs=runs, base_seed=base_seed)
    sums = [metrics.summarize(r["series"], cfg.fall_height) for r in run_mujoco(policy, quiet, None, seconds, False)]
    return {
        "e_track_cm": float(np.mean([s["e_track_cm"] for s in sums])),
        "falls": float(np.mean([s["fell"] for s in sums])),
        "survival_s": float(np.mean([s["survival_s"] for s in sums])),
        "worlds": runs,
    }


def delta_d(
    policy: Policy, cfg: EvalConfig, runs: list[dict], seconds: float, kappa: float | None, bcg: bool = False
) -> dict:
    """The same policy from the same seeds' start states in the training simulator (bcg_sim, forward only) for
    the whole evaluation: Δd = its mean foot penetration minus MuJoCo's over the first min(seconds,
    diffsim_seconds) [mm] (positive = deeper in training), and its falls and survival beside MuJoCo's, so a
    fall in MuJoCo can be told apart from one the policy also makes in the simulator it was trained in. `bcg`:
    that rollout with BCG on, the bundle mean replacing the state after each touchdown as in training."""
    from bcg_train.eval.diffsim_eval import diffsim_rollouts, sim_config_for

    window = min(seconds, cfg.diffsim_seconds)
    seeds = [r["seed"] for r in runs]
    t0 = time.monotonic()
    train = diffsim_rollouts(policy, cfg, seeds, seconds, kappa, bcg=bcg)
    kappa_used = sim_config_for(policy, kappa).contact.kappa
    per_run = []
    for r, tr in zip(runs, train):
        st = metrics.series(tr, policy.contract.control_dt, cfg.contact_height)
        t_sum = metrics.summarize(st, cfg.fall_height, window)
        pm_ = metrics.summarize(r["series"], cfg.fall_height, window)["pen_window_mm"]
        per_run.append(
            {
                "seed": r["seed"],
                "train_pen_mm": t_sum["pen_window_mm"],
                "mujoco_pen_mm": pm_,
                "delta_d_mm": t_sum["pen_window_mm"] - pm_,
                "train_fell": t_sum["fell"],
                "train_survival_s": t_sum["survival_s"],
                "train_e_track_cm": t_sum["e_track_cm"],
            }
        )
    train_falls = int(sum(p["train_fell"] for p in per_run))
    _progress(
        f"delta_d: bcg_sim rollouts ({len(seeds)} worlds x {seconds:.2f} s, kappa {kappa_used:g}, BCG "
        f"{'on' if bcg else 'off'}) in {time.monotonic() - t0:.1f} s; falls there {train_falls}/{len(seeds)}, "
        f"E_track {np.mean([p['train_e_track_cm'] for p in per_run]):.2f} cm"
    )
    mean = lambda k: float(np.mean([p[k] for p in per_run]))  # noqa: E731
    std = lambda k: float(np.std([p[k] for p in per_run]))  # noqa: E731
    return {
        "window_s": window,
        "kappa": kappa_used,
        "bcg": bcg,
        "train_pen_mm": mean("train_pen_mm"),
        "mujoco_pen_mm": mean("mujoco_pen_mm"),
        "delta_d_mm": mean("delta_d_mm"),
        "delta_d_std_mm": std("delta_d_mm"),
        "train_seconds": seconds,
        "train_falls": train_falls,
        "train_survival_s_mean": mean("train_survival_s"),
        "train_survival_s_std": std("train_survival_s"),
        "train_e_track_cm": mean("train_e_track_cm"),
        "train_e_track_cm_std": std("train_e_track_cm"),
        "per_run": per_run,
    }


def evaluate(
    policy: Policy,
    cfg: EvalConfig,
    out_dir: Path,
    mjcf: str | None = None,
    kappa: float | None = None,
    ros: bool = False,
    render: bool = True,
    with_delta_d: bool = True,
    bcg: bool = False,
) -> dict:
    """Evaluate and write the output folder; returns the eval.json content."""
    out_dir.mkdir(parents=True, exist_ok=True)
    seconds = clip_seconds(policy, cfg.seconds)
    if ros:
        from bcg_train.eval.ros_eval import run_ros

        runs = run_ros(policy, cfg, seconds, out_dir, _progress)
    else:
        runs = run_mujoco(policy, cfg, mjcf, seconds)
    summaries = [metrics.summarize(r["series"], cfg.fall_height) for r in runs]
    result = {
        "policy": str(policy.path),
        "policy_name": policy.path.name,
        "reference": policy.contract.reference.name,
        "mjcf": mjcf or "project G1 (bcg_sim.g1)",
        "mjcf_name": Path(mjcf).name if mjcf else "project",
        "path": "ros" if ros else "python",
        "commit": commit(),
        "seconds": seconds,
        "config": dataclasses.asdict(cfg),
        "runs": [
            {
                "seed": r["seed"],
                **s,
                "fault": r["fault"],
                "max_contacts": r["max_contacts"],
                "mujoco_warnings": r["warnings"],
                "missed_contacts": r["missed_contacts"],
                **({"ros_run_start_s": r["run_start_s"]} if "run_start_s" in r else {}),
            }
            for r, s in zip(runs, summaries)
        ],
        "aggregate": metrics.aggregate(summaries),
    }
    if ros:  # the bag has no MuJoCo contact data; the bridge runs the same model as the Python path
        result["contacts"] = {"checked": False, "ok": None}
    else:
        result["contacts"] = {
            "checked": True,
            "max_contacts": max(r["max_contacts"] for r in runs),
            "mujoco_warnings": sorted({w for r in runs for w in r["warnings"]}),
            "missed_contacts": sum(r["missed_contacts"] for r in runs),
        }
        c = result["contacts"]
        c["ok"] = not c["mujoco_warnings"] and not c["missed_contacts"]
        if not c["ok"]:
            _progress(f"WARNING: MuJoCo contacts: {c}")
    result["delta_d"] = delta_d(policy, cfg, runs, seconds, kappa, bcg) if with_delta_d else None
    write_json(out_dir / "eval.json", result)
    (out_dir / "eval.md").write_text(markdown_table(EVAL_HEADERS, [eval_row(result)]))
    plot_series(out_dir, [r["series"] for r in runs])
    if render:
        r0 = runs[0]["rollout"]
        render_strip_png(
            out_dir / "strip.png",
            r0.qpos,
            r0.ref_qpos,
            1.0 / policy.contract.control_dt,
            cfg.strip_frames,
            cfg.strip_width,
            cfg.strip_height,
        )
    return result
