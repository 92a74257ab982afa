"""`bcg-train` (also `ros2 run bcg_train train`): train, export a run's policy, plot runs.

bcg-train --motion run --algo shac-bcg --preset cpu             # train (SHAC + BCG, ADD reward)
bcg-train --motion dance1_subject2.csv --motion-start 30 --motion-end 40   # a 10-s window of a long clip
bcg-train --resume runs/train/X                                 # continue from the last checkpoint
bcg-train export runs/train/X -o policy_dir                     # TorchScript + ONNX + contract
bcg-train plot runs/train/A runs/train/B -o curves.png          # E_track / reward vs its, samples, time
torchrun --nproc_per_node=2 -m bcg_train ...   or   bcg-train --procs 2 ...   # data parallel
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bcg_sim.config import ConfigError
from bcg_train.config import ALGOS, REWARD_KINDS, load_train_config, parse_budget

_FLAG_KEYS = {  # CLI flag -> its TrainConfig key, dotted
    "algo": "algo",
    "budget": "budget",
    "seed": "seed",
    "device": "device",
    "kappa": "kappa",
    "num_envs": "num_envs",
    "checkpoint_every": "checkpoint_every",
    "motion": "task.motion",
    "motion_start": "task.motion_start",
    "motion_end": "task.motion_end",
    "horizon": "shac.horizon",
    "reward": "reward.kind",
    "root_offset": "task.observe_root_offset",
}


def _fail(msg: str) -> int:
    print(f"bcg-train: error: {msg}", file=sys.stderr)
    return 2


def train_parser() -> argparse.ArgumentParser:
    try:
        d = load_train_config()
    except ConfigError:
        d = None

    def dflt(path):
        if d is None:
            return "?"
        v = d
        for k in path:
            v = getattr(v, k)
        return v

    ap = argparse.ArgumentParser(
        prog="bcg-train",
        description="Train a G1 motion: SHAC (+BCG) with an ADD "
        "reward, or PPO. Subcommands: 'bcg-train export RUN -o DIR', "
        "'bcg-train plot RUN... -o PNG'. Unset flags come from the preset "
        "(config/train/NAME.yaml over default.yaml); defaults shown are default.yaml's.",
    )
    ap.add_argument("--preset", default="default", help="config/train/NAME.yaml or a path (default: default)")
    ap.add_argument("--motion", help=f"built-in clip or motion file (default: {dflt(('task', 'motion'))})")
    ap.add_argument(
        "--motion-start",
        type=float,
        metavar="S",
        help="train on the clip from S seconds (default: its start; world positions are kept)",
    )
    ap.add_argument(
        "--motion-end",
        type=float,
        metavar="S",
        help="train on the clip up to S seconds (default: its end), e.g. --motion-start 30 "
        "--motion-end 40 for a 10-s window of a long take",
    )
    ap.add_argument(
        "--root-offset",
        action=argparse.BooleanOptionalAction,
        help="the actor observes its offset from the clip (leg odometry on the robot; off for clips with flight "
        f"or sliding feet, docs/training.md) (default: {dflt(('task', 'observe_root_offset'))})",
    )
    ap.add_argument("--algo", choices=ALGOS, help=f"(default: {dflt(('algo',))})")
    ap.add_argument("--reward", choices=REWARD_KINDS, help=f"(default: {dflt(('reward', 'kind'))})")
    ap.add_argument("--kappa", type=float, help=f"contact stiffness kN/m (default: {dflt(('kappa',))})")
    ap.add_argument("--num-envs", type=int, help=f"worlds, all processes (default: {dflt(('num_envs',))})")
    ap.add_argument("--horizon", type=int, help=f"SHAC horizon h (default: {dflt(('shac', 'horizon'))})")
    ap.add_argument("--device", help=f"cpu | cuda:0 (default: {dflt(('device',))})")
    ap.add_argument("--seed", type=int, help=f"(default: {dflt(('seed',))})")
    ap.add_argument(
        "--budget",
        help="1000it iterations | 2M samples | 30min wall clock (needs shac.lr_decay "
        f"constant) (default: {dflt(('budget',))})",
    )
    ap.add_argument("--checkpoint-every", type=int, help=f"iterations (default: {dflt(('checkpoint_every',))})")
    ap.add_argument("--out", help="run folder (default: runs/train/ALGO-MOTION-TIME)")
    ap.add_argument("--resume", metavar="RUN", help="continue RUN from its last checkpoint (--budget may change)")
    ap.add_argument("--procs", type=int, default=1, help="data-parallel processes (default: 1)")
    return ap


def _overrides(args) -> dict:
    out: dict = {}
    for flag, path in _FLAG_KEYS.items():
        v = getattr(args, flag)
        if v is None:
            continue
        *parents, key = path.split(".")
        node = out
        for k in parents:
            node = node.setdefault(k, {})
        node[key] = v
    return out


def train_main(argv) -> int:
    from bcg_train.runner import RunError, TaskError, check_run_folder

    args = train_parser().parse_args(argv)
    try:
        if args.resume:
            extra = [f for f in _FLAG_KEYS if f != "budget" and getattr(args, f) is not None]
            if extra or args.preset != "default":
                return _fail(
                    f"--resume takes the run's own settings; only --budget may be given (got "
                    f"{', '.join('--' + e.replace('_', '-') for e in extra) or '--preset'})"
                )
            if args.budget:
                parse_budget(args.budget)
            cfg, procs = check_run_folder(Path(args.resume))
            out = Path(args.resume)
        else:
            cfg = load_train_config(args.preset, _overrides(args))
            procs = args.procs
            stamp = time.strftime("%Y%m%d-%H%M%S")
            out = Path(args.out or f"runs/train/{cfg.algo}-{Path(cfg.task.motion).stem}-{stamp}")
            if (out / "config.yaml").exists():
                return _fail(f"{out} already holds a run; continue it with --resume {out} or choose another --out")
        if procs < 1:
            return _fail(f"--procs must be >= 1, got {procs}")
        if cfg.num_envs % procs:
            return _fail(f"num_envs {cfg.num_envs} is not divisible by --procs {procs}")
    except (ConfigError, RunError, TaskError) as exc:
        return _fail(str(exc))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # launched by torchrun
        return _worker_torchrun(cfg, out, int(os.environ["WORLD_SIZE"]), bool(args.resume), args.budget)
    if procs == 1:
        return _run(cfg, out, 0, 1, bool(args.resume), args.budget, None)
    return _spawn(cfg, out, procs, bool(args.resume), args.budget)


def _run(cfg, out, rank, procs, resume, budget, comm) -> int:
    import torch

    from bcg_train.dist import Comm
    from bcg_train.runner import RunError, TaskError, Trainer

    # One core per training process (`--procs` is how a training uses more): torch's intra-op threads only
    # contend with the simulator and with a training beside it (6x slower per iteration on 2 cores, measured)
    torch.set_num_threads(1)

    try:
        return Trainer(cfg, out, comm or Comm(rank, procs), procs, resume, budget).train()
    except (ConfigError, RunError, TaskError) as exc:
        return _fail(str(exc))


def _worker_torchrun(cfg, out, procs, resume, budget) -> int:
    from bcg_train.dist import init_from_env

    comm = init_from_env(cfg.device)
    return _run(cfg, out, comm.rank, procs, resume, budget, comm)


def _spawn_worker(rank, cfg, out, procs, resume, budget, init_file, codes):
    import torch.distributed as tdist

    from bcg_train.dist import Comm

    backend = "nccl" if cfg.device.startswith("cuda") else "gloo"
    tdist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=procs)
    codes[rank] = _run(cfg, out, rank, procs, resume, budget, Comm(rank, procs))
    tdist.destroy_process_group()


def _spawn(cfg, out, procs, resume, budget) -> int:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        codes = mp.Manager().dict()
        mp.spawn(
            _spawn_worker,
            args=(cfg, out, procs, resume, budget, os.path.join(tmp, "init"), codes),
            nprocs=procs,
            join=True,
        )
        return max(codes.values()) if codes else 1


def export_main(argv) -> int:
    from bcg_train.runner import RunError, export_run

    ap = argparse.ArgumentParser(
        prog="bcg-train export",
        description="Export a run's last checkpoint as a policy artifact (TorchScript + ONNX + contract).",
    )
    ap.add_argument("run")
    ap.add_argument("-o", "--out", required=True, help="artifact folder")
    args = ap.parse_args(argv)
    try:
        path = export_run(Path(args.run), Path(args.out))
    except (ConfigError, RunError) as exc:
        return _fail(str(exc))
    print(f"exported {path}")
    return 0


def plot_main(argv) -> int:
    from bcg_train.plot import PlotError, plot_runs

    ap = argparse.ArgumentParser(
        prog="bcg-train plot",
        description="E_track and reward against iterations, "
        "env samples (log axis) and wall clock for runs on one figure.",
    )
    ap.add_argument("runs", nargs="+")
    ap.add_argument("-o", "--out", default="curves.png", help="PNG (default: curves.png)")
    args = ap.parse_args(argv)
    try:
        plot_runs([Path(r) for r in args.runs], Path(args.out))
    except PlotError as exc:
        return _fail(str(exc))
    print(f"wrote {args.out}")
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "export":
        return export_main(argv[1:])
    if argv and argv[0] == "plot":
        return plot_main(argv[1:])
    if argv and argv[0] == "train":
        argv = argv[1:]
    return train_main(argv)


if __name__ == "__main__":
    sys.exit(main())
