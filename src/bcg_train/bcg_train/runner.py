"""The training loop: one run folder, one algorithm object, budget, logs, checkpoints, resume, export.

Run folder (`--out`):
  config.yaml          resolved TrainConfig (+ procs); contract.yaml the policy contract (before normalization)
  reference.npz        the clip (ReferenceTrack) exported with the policy
  metrics.csv          one row per iteration (iteration, samples, wall_s and the algorithm's numbers)
  tb/                  TensorBoard event files
  checkpoints/last.pt  every `checkpoint_every` iterations, on SIGINT/SIGTERM, at a guard stop and at the end
                       (last.rank1.pt ... for the other processes of a data-parallel run); never non-finite
  eval.csv             fixed-protocol evaluations (TrainEvalConfig): before the first iteration, every
                       `eval.every` iterations and after the last; the policy as exported, in bcg_sim
  policy/              the exported artifact (bcg_sim.policy.export_policy) at the end
  policy_best/         the artifact of the best evaluation so far (fewest whole-clip falls, then E_track)
  summary.json         iterations, samples, wall clock, E_track first/last (training batch and evaluation),
                       falls, peak RSS
"""

from __future__ import annotations

import csv
import dataclasses as dc
import json
import math
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from bcg_sim.config import ConfigError
from bcg_sim.policy import STANDARD_LAYOUT, ReferenceTrack, default_contract, export_policy
from bcg_sim.policy.contract import PolicyContract
from bcg_train.algorithm import ALGORITHMS, Algorithm, algorithm_class, all_finite
from bcg_train.config import TrainConfig, config_from_dict, config_to_dict, derive_seed, parse_budget
from bcg_train.dist import Comm
from bcg_train.logger import EVAL_FILE, METRICS_FILE, TrainLog
from bcg_train.task import Task, TaskError

EXIT_BAD_INPUT = 2
EXIT_GUARD_STOP = 3
CONFIG_FILE, CONTRACT_FILE, REFERENCE_FILE = "config.yaml", "contract.yaml", "reference.npz"
SUMMARY_FILE = "summary.json"
EVAL_KEYS = ("e_track_cm", "falls", "survival_s", "worlds")  # one evaluation's figures (eval.csv, per simulator)
BEST_POLICY_DIR = "policy_best"  # the policy of the best evaluation (fewest falls, then lowest E_track)
# contract keys that training itself fills in (normalization, files) and so may differ between runs
_CONTRACT_TRAINED_KEYS = ("files", "description", "reference")


class RunError(ValueError):
    """Bad input to a run (not a run folder, other contract, ...): one line, exit code 2."""


# ---------------------------------------------------------------------------------------------- setup
def sim_config_for(cfg: TrainConfig, rank: int = 0):
    """The run's sim config (TrainConfig.sim_config); BCG on where the algorithm's registry entry asks for it."""
    sim = cfg.sim_config()
    bcg = dc.replace(sim.bcg, enabled=ALGORITHMS[cfg.algo].bcg, seed=derive_seed(cfg.seed + sim.bcg.seed, "bcg", rank))
    return dc.replace(sim, bcg=bcg).validate()


def rollout_horizon(cfg: TrainConfig) -> int:
    return algorithm_class(cfg.algo).rollout_steps(cfg)


def load_motion(cfg: TrainConfig, control_hz: float):
    """The task's clip at the control rate, cut to the window task.motion_start .. task.motion_end [s] (0 / None:
    the clip's start / end; bcg_sim.motion.window: frames cut, world positions kept). A bad window, or one too
    short for a rollout, is a TaskError (one line, exit 2)."""
    from bcg_sim.motion import MotionFormatError, load, window

    t = cfg.task
    try:
        motion = load(t.motion, fps=control_hz)
    except (MotionFormatError, FileNotFoundError, OSError) as exc:
        raise TaskError(f"motion {t.motion!r}: {exc}") from exc
    windowed = not (t.motion_start == 0 and t.motion_end is None)
    if windowed:
        try:
            motion = window(motion, t.motion_start, t.motion_end)
        except ValueError as exc:
            raise TaskError(
                f"motion {t.motion!r}: task.motion_start/motion_end (--motion-start/--motion-end): {exc}"
            ) from exc
    horizon = rollout_horizon(cfg)
    if motion.num_frames < horizon + t.start_margin + 2:
        what = f"the window {t.motion_start:g}-{t.motion_start + motion.duration:g} s holds" if windowed else "has"
        raise TaskError(
            f"motion {t.motion!r}: {what} {motion.num_frames} frames at {control_hz:g} Hz, shorter than horizon "
            f"{horizon} + task.start_margin {t.start_margin} + 2"
        )
    return motion


def contract_for(motion_name: str, cfg: TrainConfig) -> PolicyContract:
    extra = ("ref_root_offset_xy",) if cfg.task.observe_root_offset else ()
    return default_contract(
        reference_name=motion_name, layout=STANDARD_LAYOUT + extra, root_source=cfg.task.root_source
    )


def _contract_core(d: dict) -> dict:
    d = {k: v for k, v in d.items() if k not in _CONTRACT_TRAINED_KEYS}
    obs = dict(d["observation"])
    for k in ("mean", "std", "clip"):
        obs.pop(k, None)
    d["observation"] = obs
    return d


def has_checkpoint(run: Path) -> bool:
    """Whether `run` holds what --resume needs to start from: its config and a last checkpoint."""
    return (run / CONFIG_FILE).is_file() and (run / "checkpoints" / "last.pt").is_file()


def check_run_folder(run: Path) -> tuple[TrainConfig, int]:
    """(config, procs) of an existing run folder, or RunError naming what is missing / different."""
    if not has_checkpoint(run):
        raise RunError(f"{run}: not a bcg-train run folder (needs {CONFIG_FILE} and checkpoints/last.pt)")
    with open(run / CONFIG_FILE) as f:
        data = yaml.safe_load(f) or {}
    procs = int(data.pop("procs", 1))
    cfg = config_from_dict(data, str(run / CONFIG_FILE))
    saved = yaml.safe_load(open(run / CONTRACT_FILE)) if (run / CONTRACT_FILE).is_file() else None
    if saved is None:
        raise RunError(f"{run}: no {CONTRACT_FILE}")
    now = _contract_core(contract_for(saved.get("reference", {}).get("name", ""), cfg).to_dict())
    old = _contract_core(saved)
    diff = sorted(k for k in set(now) | set(old) if now.get(k) != old.get(k))
    if diff:
        raise RunError(
            f"{run}: made with another policy contract ({', '.join(diff)} differ from this bcg's); it cannot be resumed"
        )
    return cfg, procs


# ---------------------------------------------------------------------------------------------- loop
class Trainer:
    """The training loop of one process (rank): task, algorithm, budget, evaluations, checkpoints.
    `train()` returns the exit code."""

    def __init__(
        self, cfg: TrainConfig, out: Path, comm: Comm, procs: int, resume: bool, budget_text: str | None = None
    ):
        self.cfg, self.out, self.comm, self.procs, self.resume = cfg, out, comm, procs, resume
        self.budget = parse_budget(budget_text or cfg.budget)
        self.stop_signal: int | None = None
        self.log: TrainLog | None = None

    # --- building ---
    def build(self) -> None:
        cfg, comm = self.cfg, self.comm
        if cfg.num_envs % self.procs:
            raise RunError(f"num_envs {cfg.num_envs} is not divisible by {self.procs} processes")
        sim = sim_config_for(cfg, comm.rank)
        self.motion = load_motion(cfg, sim.control_hz)
        self.contract = contract_for(self.motion.name, cfg)
        horizon = rollout_horizon(cfg)
        from bcg_sim.diffsim import G1DiffEnv  # after the input checks: building the simulator takes seconds

        self.env = G1DiffEnv(sim, cfg.num_envs // self.procs)
        gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "resets", comm.rank))
        self.task = Task(cfg, self.env, self.motion, self.contract, gen, horizon)
        self.task.reset()
        self.algo = make_algorithm(cfg, self.task, comm, self._total_iters())
        self.iteration, self.samples, self.elapsed = 0, 0, 0.0
        self.first_row: dict | None = None
        self.last_eval: int | None = None  # iteration of the newest eval.csv row (same on every rank)
        # [falls, e_track_cm, iteration] of the best headline so far (rank 0; MuJoCo's with eval.best_by mujoco)
        self.best_eval: list | None = None

    def _total_iters(self) -> int | None:
        """Iterations the budget allows (for the linear learning-rate decay); None for a wall-clock budget
        (which the config allows only with a constant learning rate)."""
        if self.budget.kind == "iterations":
            return int(self.budget.amount)
        if self.budget.kind == "samples":
            per_iter = self.cfg.num_envs * rollout_horizon(self.cfg)
            return max(1, math.ceil(self.budget.amount / per_iter))
        return None

    # --- folder ---
    def _ckpt_path(self, rank: int | None = None) -> Path:
        r = self.comm.rank if rank is None else rank
        return self.out / "checkpoints" / ("last.pt" if r == 0 else f"last.rank{r}.pt")

    def prepare_folder(self) -> None:
        if self.comm.is_main and not self.resume:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "checkpoints").mkdir(exist_ok=True)
            with open(self.out / CONFIG_FILE, "w") as f:
                yaml.safe_dump({**config_to_dict(self.cfg), "procs": self.procs}, f, sort_keys=False)
            self.contract.save(self.out / CONTRACT_FILE)
            ReferenceTrack.from_motion(self.motion).save_npz(self.out / REFERENCE_FILE)
        self.comm.barrier()

    def save_checkpoint(self) -> bool:
        """Write this rank's checkpoint atomically; refuses (returns False) when any weight is non-finite."""
        if not all_finite(self.algo.modules()):
            print(
                f"bcg-train: not writing a checkpoint at iteration {self.iteration}: non-finite weights",
                file=sys.stderr,
            )
            return False
        bundler = self.env.bundler
        state = {
            "iteration": self.iteration,
            "samples": self.samples,
            "elapsed": self.elapsed,
            "first_row": self.first_row,
            "last_eval": self.last_eval,
            "best_eval": self.best_eval,
            "algo": self.algo.state_dict(),
            "task": self.task.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "bcg_gen": bundler.gen.get_state() if bundler is not None else None,
        }
        path = self._ckpt_path()
        tmp = path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        return True

    def load_checkpoint(self) -> None:
        path = self._ckpt_path()
        if not path.is_file():
            raise RunError(f"{path}: missing (this run had {self.procs} processes)")
        d = torch.load(path, map_location=self.task.device, weights_only=False)
        self.iteration, self.samples, self.elapsed = d["iteration"], d["samples"], d["elapsed"]
        self.first_row = d["first_row"]
        self.last_eval = d.get("last_eval")  # checkpoints from before eval.csv have none
        self.best_eval = d.get("best_eval")
        self.algo.load_state_dict(d["algo"])
        self.task.load_state_dict(d["task"])
        torch.set_rng_state(d["torch_rng"])
        if d["bcg_gen"] is not None and self.env.bundler is not None:
            self.env.bundler.gen.set_state(d["bcg_gen"])

    def _install_signals(self) -> dict:
        """SIGINT / SIGTERM set `stop_signal` (the loop saves a checkpoint and stops); returns the old handlers."""

        def handler(signum, frame):
            self.stop_signal = signum

        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    # --- evaluation ---
    def evaluate(self) -> dict | None:
        """Score the current policy (TrainEvalConfig) and log it (eval.csv and a line). The policy is exported to a
        temporary folder and run through the node's PolicyRunner -- the artifact a user gets, not the training
        loop's tensors: the headline in bcg_sim on rank 0 (bcg_train.eval.diffsim_eval), what is beside it (the
        windows, then the MuJoCo validation of eval.mujoco_runs) on rank 1 at the same time when there is one (it
        would otherwise wait; every part seeds its own start states, so the figures do not depend on the split),
        else after it on rank 0. The headline (e_track_cm, falls, survival_s) is bcg-eval's protocol over the
        whole clip; win_* are the windows. A new best headline (fewest falls, then lowest E_track; eval.best_by:
        bcg_sim's or, with eval.mujoco_runs, MuJoCo's) is exported to policy_best/. Returns the row (rank 0) or
        None."""
        from bcg_sim.policy import load_policy
        from bcg_train.eval.config import load_eval_config

        e = self.cfg.eval
        side_rank = min(1, self.comm.world_size - 1)  # the rank that runs what is beside the headline
        side = self.comm.rank == side_rank
        row = None
        with tempfile.TemporaryDirectory(prefix="bcg-eval-") as tmp:
            if self.comm.is_main or side:
                exported = self.export(Path(tmp) / "policy")
                policy = load_policy(exported)
                eval_cfg = load_eval_config()
            if self.comm.is_main:
                from bcg_train.eval.diffsim_eval import clip_tracking

                clip = clip_tracking(policy, eval_cfg, e.clip_runs, e.clip_seconds, self.cfg.kappa)
                row = {
                    "iteration": self.iteration,
                    "samples": self.samples,
                    "wall_s": round(self.elapsed, 3),
                    **{k: clip[k] for k in EVAL_KEYS},
                }
            win = mj = None
            if side:
                from bcg_train.eval.diffsim_eval import window_tracking

                last = max(0.0, policy.reference.duration - e.seconds)
                starts = [float(t) for t in np.linspace(0.0, last, e.starts)]
                win = window_tracking(policy, eval_cfg, starts, e.seconds, self.cfg.kappa)
                if e.mujoco_runs > 0:  # the judge's simulator as validation (seeds apart from bcg-eval's)
                    from bcg_train.eval.evaluate import mujoco_tracking
                    from bcg_train.eval.mujoco_eval import clip_seconds

                    seconds = clip_seconds(policy, e.clip_seconds)
                    mj = mujoco_tracking(
                        policy, eval_cfg, e.mujoco_runs, e.mujoco_base_seed, seconds, tuple(e.mujoco_noise)
                    )
            win = self.comm.share(win, EVAL_KEYS, src=side_rank)
            mj = self.comm.share(mj, EVAL_KEYS, src=side_rank) if e.mujoco_runs > 0 else None
            if row is not None:
                for head, part in (("win_", win), ("mj_", mj)):
                    if part is not None:
                        row.update({f"{head}{k}": part[k] for k in EVAL_KEYS}, **{f"{head}worlds": int(part["worlds"])})
            if self.comm.is_main:
                head = "mj_" if e.best_by == "mujoco" else ""
                key = (row[f"{head}falls"], row[f"{head}e_track_cm"])
                if self.best_eval is None or key < tuple(self.best_eval[:2]):
                    self.best_eval = [*key, self.iteration]
                    shutil.copytree(exported, self.out / BEST_POLICY_DIR, dirs_exist_ok=True)  # the artifact scored
                self.log.evaluation(row, self.elapsed, self.iteration, self.samples, e.seconds)
        self.last_eval = self.iteration
        self.comm.barrier()
        return row

    def _eval_due(self, final: bool = False) -> bool:
        every = self.cfg.eval.every
        return every > 0 and self.last_eval != self.iteration and (final or self.iteration % every == 0)

    # --- the loop ---
    def train(self) -> int:
        """Iterations until the budget is spent, a stop signal arrives or the algorithm gives a stop reason;
        evaluations and checkpoints on their schedules; the policy exported at a normal end. Returns the exit
        code (0, EXIT_GUARD_STOP, or 128 + the signal)."""
        self.build()
        if self.resume:
            self.load_checkpoint()
        self.prepare_folder()
        old_handlers = self._install_signals()
        self.log = TrainLog(
            self.out,
            self.budget,
            f"{self.cfg.algo} {self.motion.name}",
            self.comm.is_main,
            self.iteration if self.resume else None,
            self._progress(),
        )
        code = 0
        t0 = time.perf_counter() - self.elapsed
        try:
            if self._eval_due():
                self.evaluate()
            while not self.budget.reached(self.iteration, self.samples, self.elapsed):
                self._iteration(t0)
                stop = self.comm.any(self.stop_signal is not None)
                guard = self.algo.stop_reason()
                if not (stop or guard) and self._eval_due():
                    self.evaluate()
                    self.elapsed = time.perf_counter() - t0
                if stop or guard or self.iteration % self.cfg.checkpoint_every == 0:
                    self.save_checkpoint()
                if guard:
                    self.log.message(
                        f"bcg-train: stopped at iteration {self.iteration}: {guard}; last good weights "
                        f"in {self._ckpt_path(0)}"
                    )
                    code = EXIT_GUARD_STOP
                    break
                if stop:
                    self.log.message(
                        f"bcg-train: interrupted at iteration {self.iteration}; checkpoint saved, "
                        f"continue with: bcg-train --resume {self.out}"
                    )
                    code = 128 + int(self.stop_signal or signal.SIGTERM)
                    break
            else:
                if self._eval_due(final=True):
                    self.evaluate()
                    self.elapsed = time.perf_counter() - t0
                self.save_checkpoint()
        finally:
            for s, h in old_handlers.items():
                signal.signal(s, h)
            self.log.close()
        if code == 0 and self.comm.is_main:
            self.export(self.out / "policy")
        self.write_summary()
        return code

    def _iteration(self, t0: float) -> None:
        """One algorithm iteration and its metrics.csv row."""
        self.task.begin_iteration(self.iteration)
        self.task.apply_pushes()
        m = self.algo.iteration()
        m.update(self.task.end_iteration())
        self.iteration += 1
        self.samples += int(m.pop("samples"))
        self.elapsed = time.perf_counter() - t0
        row = {"iteration": self.iteration, **m, "samples": self.samples, "wall_s": round(self.elapsed, 3)}
        if self.first_row is None:
            self.first_row = row
        self.log.iteration(row)

    def _progress(self) -> float:
        return {"iterations": self.iteration, "samples": self.samples, "seconds": self.elapsed}[self.budget.kind]

    def export(self, out: Path) -> Path:
        return export_run_state(
            self.algo.policy_network(),
            self.algo.norm,
            self.cfg,
            self.out,
            out,
            f"{self.cfg.algo} on {self.motion.name}, iteration {self.iteration}",
        )

    def write_summary(self) -> None:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB
        total_peak = self.comm.mean({"p": peak_mb})["p"] * self.comm.world_size
        if not self.comm.is_main:
            return
        last = _last_row(self.out / METRICS_FILE)
        summary = {
            "algo": self.cfg.algo,
            "motion": self.motion.name,
            "kappa": self.cfg.kappa,
            "procs": self.procs,
            "iterations": self.iteration,
            "samples": self.samples,
            "wall_s": round(self.elapsed, 2),
            "s_per_iteration": round(self.elapsed / self.iteration, 3) if self.iteration else None,
            "e_track_cm_first": (self.first_row or {}).get("e_track_cm"),
            "e_track_cm_last": last.get("e_track_cm"),
            "falls_total": _sum_col(self.out / METRICS_FILE, "falls"),
            **_eval_ends(self.out / EVAL_FILE),
            "best_eval": self.best_eval,
            "skipped_total": last.get("skipped_total"),
            "peak_rss_mb_rank0": round(peak_mb, 1),
            "peak_rss_mb_all_procs": round(total_peak, 1),
        }
        with open(self.out / SUMMARY_FILE, "w") as f:
            json.dump(summary, f, indent=1)
        print("bcg-train summary: " + summary_line(summary), file=sys.stderr)


def summary_line(summary: dict) -> str:
    """summary.json (full precision) as one readable line: cm to 0.1, seconds to 0.01, MB to 1, counts whole."""

    def fmt(key: str, v) -> str:
        if isinstance(v, list) and key == "best_eval":  # [falls, e_track_cm, iteration]
            return "[" + ", ".join(fmt(k, x) for k, x in zip(("falls", "e_track_cm", "iteration"), v)) + "]"
        if not isinstance(v, float) or not math.isfinite(v):
            return str(v)
        unit = set(key.split("_"))  # e.g. eval_last_e_track_cm, wall_s, s_per_iteration, peak_rss_mb_rank0
        if "cm" in unit:
            return f"{v:.1f}"
        if "s" in unit:
            return f"{v:.2f}"
        if "mb" in unit:
            return f"{v:.0f}"
        return str(int(v)) if v.is_integer() else f"{v:.3g}"

    return ", ".join(f"{k}={fmt(k, v)}" for k, v in summary.items())


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def _eval_ends(path: Path) -> dict:
    """First and last evaluation (eval.csv) for the summary: iteration, E_track [cm], falls [fraction]."""
    rows = _rows(path)
    if not rows:
        return {}
    out = {}
    for tag, r in (("first", rows[0]), ("last", rows[-1])):
        out.update(
            {
                f"eval_{tag}_iteration": int(r["iteration"]),
                f"eval_{tag}_e_track_cm": float(r["e_track_cm"]),
                f"eval_{tag}_falls": float(r["falls"]),
                f"eval_{tag}_survival_s": float(r["survival_s"]),
            }
        )
    return out


def _last_row(path: Path) -> dict:
    rows = _rows(path)
    return {k: _num(v) for k, v in rows[-1].items()} if rows else {}


def _sum_col(path: Path, key: str) -> float:
    if not path.is_file():
        return 0
    with open(path) as f:
        return sum(_num(r.get(key, 0)) or 0 for r in csv.DictReader(f))


def _num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


def make_algorithm(cfg: TrainConfig, task: Task, comm: Comm, total_iters: int | None) -> Algorithm:
    """The reward (`reward.kind`) and the algorithm (`algo`) of the run, built from its config."""
    from bcg_train.rewards import make_reward
    from bcg_train.task import features

    dim = features(task.ref_kinematics(torch.zeros(1, dtype=torch.long, device=task.device))).flat().shape[-1]
    gen = torch.Generator().manual_seed(derive_seed(cfg.seed, "reward", comm.rank))
    torch.manual_seed(cfg.seed)
    reward = make_reward(cfg, dim, task.device, gen, comm)
    comm.broadcast_modules(reward.modules())
    return algorithm_class(cfg.algo).from_config(cfg, task, reward, comm, total_iters)


# ---------------------------------------------------------------------------------------------- export
def export_run_state(network, norm, cfg: TrainConfig, run: Path, out: Path, description: str) -> Path:
    """Export `network` (normalized obs -> raw action) with the run's contract and `norm`'s statistics."""
    contract = (
        PolicyContract.from_dict(yaml.safe_load(open(run / CONTRACT_FILE)), str(run / CONTRACT_FILE))
        if (run / CONTRACT_FILE).is_file()
        else None
    )
    if contract is None:
        raise RunError(f"{run}: no {CONTRACT_FILE}")
    contract.observation.mean = [float(x) for x in norm.mean]
    contract.observation.std = [float(x) for x in norm.std]
    contract.observation.clip = float(cfg.task.obs_norm_clip)
    contract.description = description
    contract.train_kappa = float(cfg.kappa)
    reference = ReferenceTrack.load_npz(run / REFERENCE_FILE, contract.reference.name)
    net = _copy_to_cpu(network)
    return export_policy(net, contract, out, reference=reference)


def _copy_to_cpu(module: torch.nn.Module) -> torch.nn.Module:
    import copy

    return copy.deepcopy(module).to("cpu").eval()


def export_run(run: Path, out: Path) -> Path:
    """`bcg-train export RUN -o DIR`: the last checkpoint's policy, without building a simulator."""
    cfg, procs = check_run_folder(run)
    d = torch.load(run / "checkpoints" / "last.pt", map_location="cpu", weights_only=False)
    network, norm = networks_from_checkpoint(cfg, run, d)
    return export_run_state(
        network, norm, cfg, run, out, f"{cfg.algo} on {cfg.task.motion}, iteration {d['iteration']}"
    )


def networks_from_checkpoint(cfg: TrainConfig, run: Path, d: dict):
    """(actor network, RunningNorm) of a checkpoint dict."""
    from bcg_train.task import RunningNorm

    contract = PolicyContract.from_dict(yaml.safe_load(open(run / CONTRACT_FILE)), str(run / CONTRACT_FILE))
    norm = RunningNorm(contract.n_obs, cfg.task.obs_norm_clip, cfg.task.obs_norm_epsilon)
    norm.load_state_dict(d["algo"]["norm"])
    return algorithm_class(cfg.algo).network_from_state(cfg, contract.n_obs, d["algo"]), norm


__all__ = ["Trainer", "RunError", "TaskError", "ConfigError", "export_run", "check_run_folder", "EXIT_BAD_INPUT"]
