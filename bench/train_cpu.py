"""Training comparison: SHAC+BCG, SHAC and PPO from one seed on one clip, the same iteration budget each.

    python bench/train_cpu.py                                   # preset cpu (64 worlds, h 16), 1000 iterations each
    python bench/train_cpu.py --budget 20it --preset tiny       # a quick check of the bench itself
    python bench/train_cpu.py --procs-compare 4                 # + seconds per SHAC iteration, 1 vs 2 processes
    python bench/train_cpu.py --reward tracking --budget 400it --parallel   # DeepMimic reward instead of ADD
    python bench/train_cpu.py --algos ppo --out runs/bench_train ...        # one more run into the same folder
    python bench/train_cpu.py --report-only --out runs/bench_train          # table, ratio, curves of finished runs

Each algorithm is one `bcg-train` run (run folders under --out). Printed per run: iterations, env samples,
E_track and falls of the fixed-protocol evaluation (eval.csv) before training and at the end, the training
batch's E_track at the first and last iteration, peak RSS; whether SHAC+BCG halved its evaluation E_track with
no evaluation fall at the end; the sample ratio (env samples PPO needs to reach SHAC+BCG's final evaluation
E_track, or "not reached within N samples"), and curves.png (bcg-train plot, Fig. 5 layout).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

import yaml


def bcg_train(*args) -> int:
    return subprocess.call([sys.executable, "-m", "bcg_train", *map(str, args)])


def summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def eval_rows(run: Path) -> list[dict]:
    """The run's fixed-protocol evaluations (eval.csv), numbers as floats."""
    path = run / "eval.csv"
    if not path.is_file():
        return []
    with open(path) as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def samples_to_reach(run: Path, target: float) -> tuple[int | None, int]:
    """(env samples at the first evaluation whose E_track <= target, or None; samples of the whole run)."""
    rows = eval_rows(run)
    hit = next((int(r["samples"]) for r in rows if r["e_track_cm"] <= target), None)
    return hit, int(rows[-1]["samples"]) if rows else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="cpu", help="config/train preset (default: cpu)")
    ap.add_argument("--budget", default="1000it", help="per algorithm: iterations or samples (default: 1000it)")
    ap.add_argument("--motion", default="run", help="(default: run)")
    ap.add_argument("--kappa", type=float, default=300.0, help="kN/m (default: 300)")
    ap.add_argument(
        "--reward", choices=("add", "tracking"), default=None, help="reward of every run (default: the preset's, add)"
    )
    ap.add_argument("--seed", type=int, default=0, help="(default: 0)")
    ap.add_argument("--device", default="cpu", help="(default: cpu)")
    ap.add_argument("--num-envs", type=int, default=None, help="override the preset's (default: preset)")
    ap.add_argument("--horizon", type=int, default=None, help="override the preset's SHAC h (default: preset)")
    ap.add_argument("--algos", nargs="+", default=["shac-bcg", "shac", "ppo"], help="(default: all three)")
    ap.add_argument(
        "--procs-compare",
        type=int,
        default=0,
        metavar="ITERS",
        help="also time ITERS SHAC iterations with 1 and 2 processes (default: 0, skip)",
    )
    ap.add_argument("--out", default="runs/bench_train", help="(default: runs/bench_train)")
    ap.add_argument(
        "--parallel",
        action="store_true",
        help="start the runs at once (they share the cores; each still gets the full budget)",
    )
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="train nothing: print the table, ratio and curves of the run folders already under --out",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    common = [
        "--preset",
        args.preset,
        "--motion",
        args.motion,
        "--kappa",
        args.kappa,
        "--seed",
        args.seed,
        "--device",
        args.device,
    ]
    common += [
        x
        for flag, v in (("--num-envs", args.num_envs), ("--horizon", args.horizon), ("--reward", args.reward))
        if v is not None
        for x in (flag, v)
    ]
    runs = {algo: out / algo for algo in args.algos}
    cmds = {
        algo: [
            sys.executable,
            "-m",
            "bcg_train",
            *map(str, common),
            "--algo",
            algo,
            "--budget",
            args.budget,
            "--out",
            str(run),
        ]
        for algo, run in runs.items()
    }
    missing = [algo for algo, run in runs.items() if args.report_only and not (run / "summary.json").is_file()]
    if missing:
        print(f"train_cpu: --report-only: no finished run for {missing} under {out}", file=sys.stderr)
        return 2
    if args.report_only:
        codes = {}
    elif args.parallel:  # all runs at once, sharing the machine's cores (each run is one process)
        procs = {algo: subprocess.Popen(cmd) for algo, cmd in cmds.items()}
        codes = {algo: p.wait() for algo, p in procs.items()}
    else:
        codes = {}
        for algo, cmd in cmds.items():
            codes[algo] = subprocess.call(cmd)
            if codes[algo] != 0:
                break
    for algo, code in codes.items():
        if code != 0:
            print(f"{algo}: bcg-train exited {code}", file=sys.stderr)
            return code
    for algo, run in runs.items():  # what each run folder was made with (--report-only: not this command's flags)
        c = yaml.safe_load((run / "config.yaml").read_text())
        print(
            f"{algo}: motion {c['task']['motion']}, kappa {c['kappa']:g}, seed {c['seed']}, budget {c['budget']}, "
            f"reward {c['reward']['kind']}, {c['num_envs']} worlds, device {c['device']}, {c.get('procs', 1)} proc"
        )
    print(
        "| algo | iterations | env samples | s/it | E_track eval first -> last [cm] | eval falls first -> last "
        "| E_track batch first -> last [cm] | batch falls | peak RSS [MB] |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for algo, run in runs.items():
        s = summary(run)
        ev = (
            (
                f"{s['eval_first_e_track_cm']:.2f} -> {s['eval_last_e_track_cm']:.2f} | "
                f"{s['eval_first_falls']:.0%} -> {s['eval_last_falls']:.0%}"
            )
            if "eval_first_e_track_cm" in s
            else "– | –"
        )  # a run made before eval.csv existed
        print(
            f"| {algo} | {s['iterations']} | {s['samples']} | {s['s_per_iteration']} | {ev} | "
            f"{s['e_track_cm_first']:.2f} -> {s['e_track_cm_last']:.2f} | {int(s['falls_total'])} | "
            f"{s['peak_rss_mb_all_procs']:.0f} |"
        )
    print(
        "(eval: config/train eval section, the exported policy in bcg_sim from fixed starts, no early termination;"
        " batch: the training rollouts, episodes of every age)"
    )
    if "shac-bcg" in runs and "eval_first_e_track_cm" in summary(runs["shac-bcg"]):
        s = summary(runs["shac-bcg"])
        halved = s["eval_last_e_track_cm"] <= 0.5 * s["eval_first_e_track_cm"]
        upright = s["eval_last_falls"] == 0.0
        print(
            f"SHAC+BCG eval E_track {s['eval_first_e_track_cm']:.2f} -> {s['eval_last_e_track_cm']:.2f} cm "
            f"({s['eval_last_e_track_cm'] / s['eval_first_e_track_cm']:.2f}x): halved {'yes' if halved else 'NO'}, "
            f"upright at the end (no eval fall) {'yes' if upright else 'NO'}"
        )
    if "shac-bcg" in runs and "ppo" in runs:
        target = summary(runs["shac-bcg"])["eval_last_e_track_cm"]
        hit, total = samples_to_reach(runs["ppo"], target)
        shac_samples = summary(runs["shac-bcg"])["samples"]
        if hit is None:
            print(
                f"sample ratio: PPO did not reach SHAC+BCG's final eval E_track {target:.2f} cm within {total} "
                f"samples (SHAC+BCG used {shac_samples})"
            )
        else:
            print(
                f"sample ratio: PPO reached eval E_track {target:.2f} cm after {hit} samples, SHAC+BCG used "
                f"{shac_samples}: {hit / shac_samples:.2f}x"
            )
    if len(runs) > 1:
        bcg_train("plot", *runs.values(), "-o", out / "curves.png")
    if args.procs_compare:
        times = {}
        for procs in (1, 2):
            run = out / f"procs{procs}"
            code = bcg_train(
                *common, "--algo", "shac-bcg", "--budget", f"{args.procs_compare}it", "--procs", procs, "--out", run
            )
            if code != 0:
                return code
            times[procs] = summary(run)["s_per_iteration"]
        print(
            f"SHAC+BCG s/iteration: 1 process {times[1]:.2f}, 2 processes {times[2]:.2f}, "
            f"speed-up {times[1] / times[2]:.2f}x (same run)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
